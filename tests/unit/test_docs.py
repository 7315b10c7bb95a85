"""The generated documentation (the reference pages, the README's and the pages' tables, Pulumi.yaml's schema) and
.ci/run stay in step with the code."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.config import SECTIONS, load_config
from stacks.costs import estimate, storage_summary
from stacks.plan import build_plan
from tests.harness import PROJECT, REPO, stack_config, stack_names

DOCS = REPO / "docs"


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
    """The README's and the contributing guide's test command is .ci/run's last line, and the README keeps its two
    commands."""
    testing = (DOCS / "contributing" / "testing.md").read_text()
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    command = (
        '.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/python -m mypy && '
        '.venv/bin/python -m pytest -q && .venv/bin/python -m pytest -q -n 0 -m "alone and not (unit or mock)" '
        '--durations=5 && .venv/bin/python -m pytest -q -n 4 -m "not (unit or mock or alone)" --durations=20'
    )
    assert f"```bash\n{command}\n```" in testing
    assert ci[-1] == command
    readme = (REPO / "README.md").read_text()
    assert f"`{command}`" in readme
    two = readme.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"```bash\n(.*?)\n```", two) == [
        "export PULUMI_CONFIG_PASSPHRASE='choose-a-passphrase' && python3 -m venv .venv && .venv/bin/pip install -r "
        "requirements.txt && pulumi stack select --create dev && pulumi up --stack dev",
        "bash .ci/run",
    ]


def test_ci_builds_the_site_with_warnings_as_errors_before_the_tests() -> None:
    """.ci/run makes the docs' virtualenv from requirements-docs.txt and builds the site offline, nitpicky, with every
    warning an error, before the test command; the pins it installs are the ones documented."""
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    build = ".venv-docs/bin/python -m sphinx -W --keep-going -n -q -b html docs docs/_build/html"
    assert build in ci and ci.index(build) < len(ci) - 1
    assert '    "$1/bin/python" -m pip install -q -r requirements-docs.txt' in ci
    assert "venv .venv-docs install_venv_docs requirements-docs.txt" in ci
    pins = dict(
        line.split("==")
        for line in (REPO / "requirements-docs.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert {"sphinx", "myst-parser", "furo", "sphinxcontrib-mermaid"} <= set(pins)
    conf = (DOCS / "conf.py").read_text()
    assert '"myst_parser"' in conf and '"sphinxcontrib.mermaid"' in conf and 'html_theme = "furo"' in conf
    assert ".venv-docs" in (REPO / ".gitignore").read_text().splitlines()


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


def _pages_with_blocks() -> dict[str, str]:
    from stacks.docs import FILES, regenerate

    return {name: path.read_text() for name, (path, render) in FILES.items() if render is regenerate}


def test_every_generated_block_is_on_a_page_and_equals_the_code() -> None:
    """The presets, the instance catalog, the pinned versions and the launcher's exit codes are rendered by
    stacks/docs/; the pages hold exactly that, and every block the code renders is on some page."""
    from stacks.docs import GENERATED, readme_blocks

    seen: set[str] = set()
    for name, text in _pages_with_blocks().items():
        blocks = readme_blocks(text)
        assert set(blocks) <= set(GENERATED), (name, set(blocks) - set(GENERATED))
        for block, body in blocks.items():
            assert body == GENERATED[block](), f"{name}'s {block} table is stale: run python -m stacks docs"
        seen |= set(blocks)
    assert seen == set(GENERATED), set(GENERATED) - seen
    assert {"presets", "dev-cost"} <= set(readme_blocks((REPO / "README.md").read_text()))


@pytest.mark.parametrize(
    "name", ["README.md", *(n for n in __import__("stacks.docs", fromlist=["FILES"]).FILES if n != "README.md")]
)
def test_each_generated_file_equals_what_the_code_renders(name: str) -> None:
    """Every generated file (the reference pages, the pages with generated tables, Pulumi.yaml) holds exactly what
    the code renders; python -m stacks docs regenerates them all."""
    from stacks.docs import FILES, REGENERATE

    path, render = FILES[name]
    assert path.is_file(), f"{name} is missing: run {REGENERATE}"
    current = path.read_text()
    assert render(current) == current, f"{name} is stale (the code changed): run {REGENERATE}"


def test_the_generated_files_are_the_reference_pages_the_readme_and_pulumi_yaml() -> None:
    from stacks.bundle import REFERENCE
    from stacks.docs import FILES

    assert set(FILES) == {
        "README.md",
        "Pulumi.yaml",
        *(f"docs/reference/{p.name}" for p in (DOCS / "reference").glob("*.md")),
        "docs/tutorials/deploy-dev.md",
        "docs/how-to/upgrading.md",
    }
    assert FILES["docs/reference/configuration.md"][0] == REFERENCE == DOCS / "reference" / "configuration.md"


def test_every_page_with_a_generated_block_is_regenerated() -> None:
    """A page that holds a generated block's markers is one python -m stacks docs renders (and the staleness test
    checks): otherwise its block stays empty, as the dev tutorial's cost once did."""
    from stacks.docs import FILES
    from stacks.docs.markdown import BLOCK

    marked = {
        p.relative_to(REPO).as_posix() for p in [REPO / "README.md", *DOCS.rglob("*.md")] if BLOCK.search(p.read_text())
    }
    assert marked <= set(FILES), marked - set(FILES)


def test_a_component_left_out_of_the_references_groups_stops_the_generator(monkeypatch) -> None:
    """Each exported component sits in one group of the components reference; one left out (or one the package no
    longer exports) fails ``python -m stacks docs``, naming it."""
    from stacks.docs import library

    kept = tuple((title, tuple(n for n in group if n != "TensorBoard")) for title, group in library.GROUPS)
    monkeypatch.setattr(library, "GROUPS", kept)
    with pytest.raises(ValueError, match=r"not grouped: \['TensorBoard'\]"):
        library.components_reference()
    monkeypatch.setattr(library, "GROUPS", ((kept[0][0], (*kept[0][1], "Nothing", "TensorBoard")), *kept[1:]))
    with pytest.raises(ValueError, match=r"not exported: \['Nothing'\]"):
        library.components_reference()


def test_the_reference_pages_name_every_command_component_and_output() -> None:
    """The generated pages are complete: every command of the command line and each of its options, every exported
    component and each of its arguments, every documented stack output."""
    import components
    from stacks import cli
    from stacks.docs.commands import command_parser
    from stacks.docs.stack_outputs import EXPORTERS, documented_outputs

    commands = (DOCS / "reference" / "commands.md").read_text()
    for name in cli.TOOLS:
        assert f"\n## {name}\n" in commands, name
        for action in command_parser(name)._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in commands, (name, option)
    assert "\n### box build\n" in commands and "\n### box bench\n" in commands
    assert "--check-external" in commands and "--stack" not in commands.split("\n## docs\n")[1].split("\n## ")[0]
    library = (DOCS / "reference" / "components.md").read_text()
    assert "FleetObservability" in [c.__name__ for c in components.COMPONENTS]
    for component in components.COMPONENTS:
        assert f"\n### {component.__name__}\n" in library, component.__name__
        args = __import__("inspect").get_annotations(component.__init__)["args"]
        for key in args.__annotations__:
            assert f"| `{key}` |" in library, (component.__name__, key)
    outputs = (DOCS / "reference" / "outputs.md").read_text()
    for path, function in EXPORTERS.values():
        documented = documented_outputs(path, function)
        assert len(documented) >= 8, (path, documented)
        for key in documented:
            assert f"| `{key}` |" in outputs, key


def test_every_type_of_the_components_reference_says_an_import_that_works() -> None:
    """A type a caller writes (a list of ``NodeTaint`` shared by a group and its jobs) lives in a module of its own;
    each type's section names it, and the import, less the installed package's prefix, finds the type here."""
    import importlib

    library = (DOCS / "reference" / "components.md").read_text().split("\n## Types\n")[1]
    sections = library.split("\n### ")[1:]
    assert len(sections) >= 14
    for section in sections:
        name = section.split("\n", 1)[0]
        found = re.search(r"^Import: `from eks_training\.(\S+) import (\w+)`\.$", section, re.M)
        assert found and found[2] == name, section[:300]
        assert getattr(importlib.import_module(found[1]), name).__name__ == name


def test_the_job_contracts_exit_codes_are_the_launchers() -> None:
    """The exit-code table is the launcher's own list (training/launch.py's docstring), and the launcher's constants
    and the component's agree with it."""
    from components.workloads import pytorch as component
    from stacks.docs.contract import launcher_exit_codes

    codes = {c.split()[0]: m for c, m in launcher_exit_codes()}
    assert {"0", "143", "3", "69", "2", "127", "1", "any"} <= set(codes), codes
    assert component.LAUNCHER_EXIT_STOPPED == 143 and "Ignore" in codes["143"]
    assert component.LAUNCHER_EXIT_RENDEZVOUS_LOST == 69 and "Ignore" in codes["69"]
    assert component.LAUNCHER_EXIT_RUN_FAILED == 3 and "FailJob" in codes["3"]
    assert component.LAUNCHER_EXIT_USAGE == 2 and "FailJob" in codes["2"]


def test_the_versions_page_states_the_images_torch_and_the_tests_torch_apart() -> None:
    """The image's torch (its Dockerfile's ARG) is on the versions page, generated; the tests' torch (.ci/run's
    install) is stated where the measurements are, as what it is."""
    versions = (DOCS / "reference" / "versions.md").read_text()
    image_torch = re.search(r"^ARG TORCH_VERSION=(\S+)", (REPO / "training" / "Dockerfile").read_text(), re.M)
    ci_torch = re.search(r"pip install -q torch==(\S+)", (REPO / ".ci" / "run").read_text())
    assert image_torch and ci_torch
    assert f"| `training` | `TORCH_VERSION` | `{image_torch.group(1)}` |" in versions
    for page in ("explanation/verified.md", "contributing/testing.md"):
        assert f"torch {ci_torch.group(1)}" in (DOCS / page).read_text(), page


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
        docs,
        "FILES",
        {**docs.FILES, "docs/reference/configuration.md": (stale, lambda _: docs.configuration_reference())},
    )
    out = StringIO()
    with redirect_stdout(out):
        code = docs.main(["--check"])
    assert code == 1 and out.getvalue().strip() == "stale: docs/reference/configuration.md; run python -m stacks docs"


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
    assert out.getvalue() == REFERENCE.read_text(), "the reference is stale: run python -m stacks docs"
    written = tmp_path / "configuration.md"
    monkeypatch.setattr(docs, "FILES", {"docs/reference/configuration.md": (written, lambda _: "rewritten")})
    monkeypatch.setattr(docs, "PREFIX", "eks_training.")
    err = StringIO()
    with redirect_stderr(err):
        assert docs.main([]) == 2
    assert f"configuration reference is {REFERENCE} (print it with python -m stacks.docs --reference)" in err.getvalue()
    assert not written.exists()


def test_the_instance_types_table_has_a_row_per_catalogued_type() -> None:
    from components.catalog import INSTANCE_TYPES
    from stacks.docs.tables import instance_types_table

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


def test_the_instance_facts_example_is_a_valid_stack() -> None:
    guide = (DOCS / "how-to" / "capacity.md").read_text()
    block = re.search(r"```yaml\n(  eks-training:instanceFacts:\n.*?)```", guide, re.S)
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


def _user_facing_texts() -> dict[str, str]:
    pages = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
    return {str(p.relative_to(REPO)): p.read_text() for p in pages if "_build" not in p.parts}


#: A shell block of a user page: its first line's number and its lines.
_SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.M | re.S)
#: A command that asks at the terminal before it acts (no --yes).
_ASKS = re.compile(r"\bpulumi (?:up|destroy)\b(?!.*--yes)")


def _shell_blocks() -> list[tuple[str, int, list[str]]]:
    """Every shell block of the pages a user reads (not the contributors' pages, whose commands run on Linux)."""
    blocks = []
    for name, text in _user_facing_texts().items():
        if name.startswith("docs/contributing/"):
            continue
        for m in _SHELL_BLOCK.finditer(text):
            blocks.append((name, text.count("\n", 0, m.start()) + 1, m.group(1).splitlines()))
    return blocks


def pasted_block_problems(blocks: list[tuple[str, int, list[str]]]) -> list[str]:
    """What goes wrong when a user pastes a block whole: a line after `pulumi up` or `pulumi destroy` becomes the
    answer to its question, and a `#` line is a command in zsh (macOS's shell, without interactivecomments; a pasted
    block is read whole, so a setopt in it comes too late)."""
    found = []
    for name, line, lines in blocks:
        asks = [i for i, text in enumerate(lines) if _ASKS.search(text)]
        if asks and asks[0] < len(lines) - 1:
            found.append(
                f"{name}:{line}: a line after `{lines[asks[0]].strip()}` answers its question: end the block there"
            )
        found += [
            f"{name}:{line}: a comment line in zsh is a command: {t.strip()}"
            for t in lines
            if t.lstrip().startswith("#")
        ]
    return found


def test_a_block_pasted_whole_runs_as_written_in_bash_and_zsh() -> None:
    blocks = _shell_blocks()
    assert {"README.md", "docs/tutorials/deploy-dev.md"} <= {name for name, _, _ in blocks}
    assert pasted_block_problems(blocks) == []
    # the check can fail: a block that goes on after pulumi up, and one with a comment line
    bad = [
        ("page.md", 1, ["pulumi up --stack dev", "pulumi stack output jobs"]),
        ("page.md", 9, ["# 1. Install", "ls"]),
    ]
    assert [p.split(": ", 1)[1][:20] for p in pasted_block_problems(bad)] == [
        "a line after `pulumi",
        "a comment line in zs",
    ]
    assert pasted_block_problems([("page.md", 1, ["pulumi destroy --stack dev --yes", "ls"])]) == []


def test_the_docs_have_no_placeholder_install_line() -> None:
    texts = _user_facing_texts()
    for name, text in texts.items():
        for placeholder in ("<the repository URL>", "<this repository>", "git+https://<", "@<tag>"):
            assert placeholder not in text, (name, placeholder)
    guide = texts["docs/how-to/components.md"]
    assert ".venv/bin/pip install ../eks-training" in guide and "pulumi package add ../eks-training/provider" in guide


def test_every_torch_install_line_gives_the_cpu_build() -> None:
    """`pip install torch==2.13.0` gives the CPU build only on the development machine; on Linux
    PyPI's wheel is the CUDA build (4.5 GB with its nvidia-* packages). Every install line a user copies names PyTorch's
    CPU index."""
    texts = {**_user_facing_texts(), "requirements-dev.txt": (REPO / "requirements-dev.txt").read_text()}
    lines = [
        (name, line)
        for name, text in texts.items()
        for line in text.splitlines()
        if re.search(r"pip install torch==", line)
    ]
    assert len(lines) >= 4, lines
    for name, line in lines:
        assert "--index-url https://download.pytorch.org/whl/cpu" in line, (name, line)


def test_the_components_examples_use_one_kubernetes_version() -> None:
    """The Python and the TypeScript example of the components guide create the same cluster: one Kubernetes version,
    one the config accepts."""
    from components.catalog import SUPPORTED_KUBERNETES_VERSIONS

    guide = (DOCS / "how-to" / "components.md").read_text()
    versions = set(re.findall(r'"kubernetes_version": "([\d.]+)"', guide)) | set(
        re.findall(r'kubernetesVersion: "([\d.]+)"', guide)
    )
    assert len(versions) == 1 and versions <= set(SUPPORTED_KUBERNETES_VERSIONS), versions


def test_a_changed_block_is_found_stale(tmp_path: Path) -> None:
    """Control for the staleness check: a changed generated block is found stale."""
    from stacks.docs import regenerate

    page = tmp_path / "page.md"
    page.write_text("x\n<!-- generated: dev-cost (marker) -->\nstale\n<!-- end: dev-cost -->\n")
    assert regenerate(page.read_text()) != page.read_text()


def test_a_minor_the_tutorials_tell_you_to_pin_is_the_default() -> None:
    """The tutorials show the minor to pin as YAML (deploy-dev.md, "Make your copy"), and the README's quick start
    and the how-to guides' copy commands (mpi.md) write it into the copy: the default a new stack gets, which moves
    with the catalog."""
    from components.catalog import DEFAULT_KUBERNETES_VERSION

    shown = [
        (page.name, minor)
        for page in [
            REPO / "README.md",
            *sorted((DOCS / "tutorials").glob("*.md")),
            *sorted((DOCS / "how-to").glob("*.md")),
        ]
        for minor in re.findall(r"kubernetesVersion: '([\d.]+)'", page.read_text())
    ]
    assert ("deploy-dev.md", DEFAULT_KUBERNETES_VERSION) in shown and ("README.md", DEFAULT_KUBERNETES_VERSION) in shown
    assert [s for s in shown if s[1] != DEFAULT_KUBERNETES_VERSION] == []
