"""The README, Pulumi.yaml and .ci/run stay in step with the code."""

import re

import pulumi
import pytest
import yaml

from stacks.config import SECTIONS, load_config
from stacks.costs import estimate, storage_summary
from stacks.plan import build_plan
from tests.harness import PROJECT, REPO, _config_to_runtime, stack_config, stack_names

pytestmark = pytest.mark.unit


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
        pulumi.runtime.set_all_config(_config_to_runtime(stack_config(stack)), [])
        plan = build_plan(load_config(PROJECT, stack))
        cost = estimate(plan)
        assert rows[stack] == (storage_summary(plan), cost.running, cost.idle), stack


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    command = '.venv/bin/python -m mypy && .venv/bin/python -m pytest -q -m "unit or mock or moto or real"'
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

    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    nested = {
        "nodeGroups": [NodeGroupConfig, TaintConfig],
        "instanceFacts": [InstanceFactsConfig],
        "storage": [StorageConfig, FsxConfig, DataRepositoryConfig],
        "benchmark": [BenchmarkConfig, ResultsConfig, KeepConfig],
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
