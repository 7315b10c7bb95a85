"""The box starts each group at the size the cluster autoscaler scales it to for its jobs (stacks/box/nodes.py
``initial_size``): its desiredSize, or the most nodes one step's jobs ask of it at once, up to its maxSize; a group
Kueue provisions nodes for at its minSize; the system group at its desiredSize."""

from typing import Any

import pytest

from stacks.box.nodes import initial_size
from stacks.config import load_config
from stacks.plan import Plan, build_plan
from tests.harness import PROJECT, stack_config

pytestmark = pytest.mark.unit

P = f"{PROJECT}:"


def _plan(stack: str = "dev", **jobs: dict[str, Any]) -> Plan:
    cfg = stack_config(stack)
    if stack == "dev":
        cfg[P + "nodeGroups"]["cpu"].update(desiredSize=1, maxSize=4)
    for name, fields in jobs.items():
        cfg[P + "jobs"].setdefault(name, {"kind": "command", "command": ["true"], "nodeGroup": "cpu"}).update(fields)
    return build_plan(load_config(PROJECT, stack, cfg))


def _sizes(plan: Plan) -> dict[str, int]:
    return {g.name: initial_size(plan, g) for g in plan.all_groups}


def test_a_group_starts_at_its_desired_size_when_its_jobs_fit() -> None:
    assert _sizes(_plan()) == {"system": 1, "cpu": 1}


def test_a_job_that_asks_for_more_nodes_scales_its_group() -> None:
    assert _sizes(_plan(train={"nodes": 3}))["cpu"] == 3


def test_jobs_of_one_step_add_up_to_the_groups_max_size() -> None:
    assert _sizes(_plan(train={"nodes": 2}, prep={"nodes": 2}))["cpu"] == 4
    assert _sizes(_plan(train={"nodes": 3}, prep={"nodes": 2}))["cpu"] == 4  # maxSize: Kueue admits them in turn


def test_jobs_of_later_steps_do_not_add_up() -> None:
    assert _sizes(_plan(train={"nodes": 2}, later={"nodes": 3, "after": ["train"]}))["cpu"] == 3


def test_the_system_group_and_a_provisioned_group_keep_their_own_start() -> None:
    """The system group's jobs take a share of a node; p5's GPU group scales from zero through Kueue's
    ProvisioningRequests, whose stand-in adds its nodes."""
    assert _sizes(_plan(evaluate={"nodes": 1}))["system"] == 1
    plan = _plan("p5")
    (flavor,) = [f for f in plan.admission.flavors if f.provisioned]
    group = plan.groups[flavor.group]
    assert initial_size(plan, group) == group.min_size == 0 < group.desired_size
