"""Loading and planning a stack is a plain function of its configuration and the project folder: no Pulumi runtime
is read or set (the program passes Pulumi's configuration, the command-line tools the stack file's)."""

from typing import Any

import pulumi
import pytest

from stacks.config import ConfigError, load_config
from stacks.config.namespaces import as_passed
from stacks.plan import build_plan
from stacks.plan.report import report
from stacks.stackfile import plan_stack
from tests.harness import PROJECT, stack_config


@pytest.fixture
def foreign_runtime_config() -> Any:
    """The process's Pulumi configuration set to another stack's (what a program evaluated before would leave)."""
    before = dict(pulumi.runtime.config.CONFIG.get())
    other = {k: as_passed(v) for k, v in stack_config("p5").items()}
    pulumi.runtime.set_all_config(other, [])
    yield other
    pulumi.runtime.set_all_config(before, [])


def test_loading_reads_only_the_configuration_it_is_given(foreign_runtime_config: Any) -> None:
    cfg = load_config(PROJECT, "dev", stack_config("dev"))
    assert {g.instance_types[0] for g in cfg.node_groups.values()} == {
        g["instanceTypes"][0] for g in stack_config("dev")[f"{PROJECT}:nodeGroups"].values()
    }
    assert cfg.aws.get("region") == stack_config("dev")["aws:region"]
    # the same configuration gives the same plan whatever the runtime holds
    pulumi.runtime.set_all_config({}, [])
    assert report(build_plan(load_config(PROJECT, "dev", stack_config("dev"))), None) == report(build_plan(cfg), None)


def test_a_problem_of_the_given_configuration_is_reported_not_the_runtimes(foreign_runtime_config: Any) -> None:
    bad = {**stack_config("dev"), f"{PROJECT}:nodeGrops": {}}
    with pytest.raises(ConfigError) as exc:
        load_config(PROJECT, "dev", bad)
    assert any("nodeGrops: unknown key; did you mean nodeGroups?" in p for p in exc.value.problems)


def test_the_tools_leave_the_pulumi_runtime_alone(foreign_runtime_config: Any) -> None:
    """``plan_stack`` (every command's prologue) neither reads nor sets the process's Pulumi configuration."""
    config, plan = plan_stack("dev")
    assert dict(pulumi.runtime.config.CONFIG.get()) == foreign_runtime_config
    assert plan.config.stack == "dev" and config["aws:region"] == plan.config.aws.get("region")
