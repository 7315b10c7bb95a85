"""The README, Pulumi.yaml and .ci/run stay in step with the code."""

import json
import re
from typing import Any

import yaml

from stacks.config import SECTIONS, load_config
from stacks.costs import estimate, storage_summary
from stacks.plan import build_plan
from tests.harness import PROJECT, REPO, stack_config, stack_names


def test_pulumi_yaml_documents_exactly_the_keys_the_loader_reads() -> None:
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert project["name"] == PROJECT
    assert project["backend"]["url"].startswith("file://"), "local state backend by default"
    declared = set(project["config"])
    assert declared == set(SECTIONS), declared ^ set(SECTIONS)
    for key, spec in project["config"].items():
        assert spec.get("description"), key


def test_readme_stack_table_matches_the_cost_model() -> None:
    readme = (REPO / "README.md").read_text()
    rows = {
        m.group(1): (m.group(2), float(m.group(3)), float(m.group(4)))
        for m in re.finditer(r"^\| `([\w-]+)` \|.*\| ([^|]+) \| \$([\d.]+) \| \$([\d.]+) \|$", readme, re.M)
    }
    assert set(rows) == set(stack_names()), "every stack has a README row, and no row is stale"
    for stack in stack_names():
        plan = build_plan(load_config(PROJECT, stack, stack_config(stack)))
        cost = estimate(plan)
        assert rows[stack] == (storage_summary(plan), cost.running, cost.idle), stack


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    command = (
        '.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/python -m mypy && '
        '.venv/bin/python -m pytest -q && .venv/bin/python -m pytest -q -n 0 -m "alone and not (unit or mock)" '
        '--durations=5 && .venv/bin/python -m pytest -q -n 4 -m "not (unit or mock or alone)" --durations=20'
    )
    assert f"`{command}`" in readme
    assert ci[-1] == command
    assert "bash .ci/run" in readme
    assert "pulumi up --stack dev" in readme


def test_every_nested_config_key_is_documented_in_pulumi_yaml() -> None:
    """Each field of each structured key appears, by its camelCase name, in that key's description."""
    from pydantic import BaseModel

    from stacks.config import (
        DataRepositoryConfig,
        FsxConfig,
        InstanceFactsConfig,
        NodeGroupConfig,
        StorageConfig,
        TaintConfig,
    )
    from stacks.config.benchmark import BenchmarkConfig, KeepConfig, ResultsConfig
    from stacks.config.nodegroups import NodeRepairConfig
    from stacks.config.operations import IdleGpuAlarmConfig, OperationsConfig
    from stacks.config.teams import TeamConfig

    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    nested = {
        "nodeGroups": [NodeGroupConfig, TaintConfig, NodeRepairConfig],
        "operations": [OperationsConfig, IdleGpuAlarmConfig],
        "instanceFacts": [InstanceFactsConfig],
        "storage": [StorageConfig, FsxConfig, DataRepositoryConfig],
        "benchmark": [BenchmarkConfig, ResultsConfig, KeepConfig],
        "teams": [TeamConfig],
    }
    checked = 0
    for key, model in SECTIONS.items():
        models = nested.get(key) or ([model] if isinstance(model, type) and issubclass(model, BaseModel) else [])
        text = project["config"][key]["description"]
        for m in models:
            for name, field in m.model_fields.items():
                alias = field.alias or name
                assert alias in text, f"Pulumi.yaml: {key} does not document {alias}"
                checked += 1
    assert checked > 75


def test_readme_generated_tables_equal_the_code() -> None:
    """The supported instance types (the catalog), the presets' regions and zones (the stack files) and the
    instanceFacts fields (the model) are rendered by stacks/docs.py; the README holds exactly that."""
    from stacks.docs import GENERATED, readme_blocks

    blocks = readme_blocks((REPO / "README.md").read_text())
    assert set(blocks) == set(GENERATED)
    for name, render in GENERATED.items():
        assert blocks[name] == render(), f"README's {name} table is stale: run python -m stacks.docs"


def test_the_configuration_reference_and_pulumi_yaml_equal_the_models() -> None:
    """docs/configuration.md and Pulumi.yaml's ``config:`` are rendered from the config models by stacks/docs.py
    (issue 19: a reference that cannot go stale); each file holds exactly that."""
    from stacks.docs import FILES, REGENERATE

    assert set(FILES) == {"README.md", "docs/configuration.md", "Pulumi.yaml"}
    for name, (path, render) in FILES.items():
        assert path.is_file(), f"{name} is missing: run {REGENERATE}"
        current = path.read_text()
        assert render(current) == current, f"{name} is stale (the config models changed): run {REGENERATE}"


def _reference_fields() -> list[tuple[str, str, Any]]:
    """(table path, key, FieldInfo) of every field of every model a stack's configuration holds."""
    from stacks.docs import model_tables, section_entry

    out = []
    for section in SECTIONS:
        model = section_entry(section)[2]
        if model is not None:
            for path, m in model_tables(section, model):
                out += [(path, f.alias or n, f) for n, f in m.model_fields.items()]
    return out


def test_every_key_of_the_reference_has_its_type_default_and_a_description() -> None:
    """Every field of every config model is in the reference with its type, the model's default and a description
    (the field's docstring): a field added without a docstring fails here."""
    from stacks.docs import configuration_reference, default_text, type_text

    text = configuration_reference()
    fields = _reference_fields()
    assert len(fields) > 140, len(fields)
    for path, alias, field in fields:
        assert field.description and field.description.strip()[-1] in ".)", f"{path}.{alias}: no one-sentence docstring"
        row = f"| `{alias}` | {type_text(field.annotation)} | {default_text(field)} |"
        assert row in text, f"{path}.{alias}: {row!r} not in the reference"
    summaries = __import__("stacks.config.loader", fromlist=["SECTION_SUMMARIES"]).SECTION_SUMMARIES
    assert set(summaries) == set(SECTIONS)


def test_the_reference_shows_the_models_defaults_and_the_validators_values() -> None:
    """The defaults shown are the models' (not restated), and the values a validator accepts are those it checks."""
    from components.catalog import DEFAULT_KUBERNETES_VERSION, LOG_RETENTION_DAYS, SUPPORTED_KUBERNETES_VERSIONS
    from stacks.config import ClusterConfig, JobConfig, NodeGroupConfig
    from stacks.docs import allowed_text, default_text

    assert default_text(ClusterConfig.model_fields["kubernetes_version"]) == f'`"{DEFAULT_KUBERNETES_VERSION}"`'
    job = JobConfig.model_validate({"kind": "command", "command": ["true"]})
    assert default_text(JobConfig.model_fields["max_restarts"]) == f"`{job.max_restarts}`"
    assert default_text(NodeGroupConfig.model_fields["min_size"]) == "required"
    assert allowed_text(JobConfig.model_fields["max_restarts"]) == ">= 0, <= 100"
    for name, values in (
        ("kubernetes_version", SUPPORTED_KUBERNETES_VERSIONS),
        ("log_retention_days", LOG_RETENTION_DAYS),
    ):
        shown = allowed_text(ClusterConfig.model_fields[name])
        assert shown == ", ".join(f"`{json.dumps(v)}`" for v in values)
        for v in values:  # each value the reference shows is one the validator accepts
            ClusterConfig.model_validate(
                {
                    "kubernetesVersion": DEFAULT_KUBERNETES_VERSION,
                    "extendedSupport": True,
                    {"kubernetes_version": "kubernetesVersion", "log_retention_days": "logRetentionDays"}[name]: v,
                }
            )


def test_stacks_docs_check_names_the_stale_file_and_the_command(tmp_path: Any, monkeypatch: Any) -> None:
    """``python -m stacks.docs --check`` fails on a stale file and prints the command that regenerates it."""
    from contextlib import redirect_stdout
    from io import StringIO

    import stacks.docs as docs

    stale = tmp_path / "configuration.md"
    stale.write_text(docs.configuration_reference().replace('`"10.0.0.0/16"`', '`"10.1.0.0/16"`'))
    monkeypatch.setattr(
        docs, "FILES", {**docs.FILES, "docs/configuration.md": (stale, lambda _: docs.configuration_reference())}
    )
    out = StringIO()
    with redirect_stdout(out):
        code = docs.main(["--check"])
    assert code == 1 and out.getvalue().strip() == "stale: docs/configuration.md; run python -m stacks.docs"


def test_stacks_docs_reference_prints_the_reference_and_an_install_rewrites_nothing(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """``--reference`` prints the configuration reference (the file, current); an installed package (its modules under
    ``eks_training.``) has no checkout's files to rewrite: ``docs`` refuses, naming the shipped reference."""
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    import stacks.docs as docs
    from stacks.bundle import REFERENCE

    out = StringIO()
    with redirect_stdout(out):
        assert docs.main(["--reference"]) == 0
    assert out.getvalue() == REFERENCE.read_text()
    written = tmp_path / "configuration.md"
    monkeypatch.setattr(docs, "FILES", {"docs/configuration.md": (written, lambda _: "rewritten")})
    monkeypatch.setattr(docs, "PREFIX", "eks_training.")
    err = StringIO()
    with redirect_stderr(err):
        assert docs.main([]) == 2
    assert f"configuration reference is {REFERENCE} (print it with python -m stacks.docs --reference)" in err.getvalue()
    assert not written.exists()


def test_the_instance_types_table_has_a_row_per_catalogued_type() -> None:
    from components.catalog import INSTANCE_TYPES
    from stacks.docs import instance_types_table

    rows = instance_types_table().splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == [
        f"| `{n}`" for n in sorted(INSTANCE_TYPES, key=lambda n: (INSTANCE_TYPES[n].family, INSTANCE_TYPES[n].vcpus, n))
    ]
    p5 = next(r for r in rows if r.startswith("| `p5.48xlarge`"))
    assert "| 192 | 2048 | 8 x NVIDIA H100 | 80.0 | 32 | 3200 | 30400 | 55.04 |" in p5


def test_every_instance_facts_field_has_a_unit() -> None:
    from stacks.config import InstanceFactsConfig
    from stacks.config.instance_facts import FACT_FIELDS

    assert set(FACT_FIELDS) == {f.alias or n for n, f in InstanceFactsConfig.model_fields.items()}


def test_the_readme_instance_facts_example_is_a_valid_stack() -> None:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```yaml\n(  eks-training:instanceFacts:\n.*?)```", readme, re.S)
    assert block is not None
    facts = yaml.safe_load(block.group(1))["eks-training:instanceFacts"]
    (name,) = facts
    settings = {
        "aws:region": "us-east-1",
        "eks-training:instanceFacts": facts,
        "eks-training:nodeGroups": {
            "gpu": {
                "instanceTypes": [name],
                "minSize": 0,
                "desiredSize": 1,
                "maxSize": 1,
                "availabilityZone": "us-east-1a",
            }
        },
    }
    cfg = load_config(PROJECT, "readme", settings)
    assert cfg.instance(name).memory_mib == 393216 and cfg.instance(name).user_supplied


def test_the_readme_has_no_placeholder_install_line() -> None:
    readme = (REPO / "README.md").read_text()
    for placeholder in ("<the repository URL>", "<this repository>", "git+https://<", "@<tag>"):
        assert placeholder not in readme, placeholder
    assert ".venv/bin/pip install ../eks-training" in readme and "pulumi package add ../eks-training/provider" in readme


def test_every_torch_install_line_gives_the_cpu_build() -> None:
    """Issue 19, finding 5: `pip install torch==2.13.0` gives the CPU build only on the development machine; on Linux
    PyPI's wheel is the CUDA build (4.5 GB with its nvidia-* packages). Every install line a user copies names PyTorch's
    CPU index."""
    texts = {
        "README.md": (REPO / "README.md").read_text(),
        "requirements-dev.txt": (REPO / "requirements-dev.txt").read_text(),
    }
    lines = [
        (name, line)
        for name, text in texts.items()
        for line in text.splitlines()
        if re.search(r"pip install torch==", line)
    ]
    assert len(lines) >= 3, lines
    for name, line in lines:
        assert "--index-url https://download.pytorch.org/whl/cpu" in line, (name, line)
