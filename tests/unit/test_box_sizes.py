"""The box starts each group at the most the cluster autoscaler could scale it to for its jobs (stacks/box/nodes.py
``initial_size``): its desiredSize, or every node its jobs ask, up to its maxSize; a group Kueue provisions nodes
for at its minSize; the system group at its desiredSize, or the nodes its widest job needs."""

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


def test_jobs_of_later_steps_add_up_too() -> None:
    """Kueue may admit a later job beside the one it waits for (its pods wait on nodes); the box has no autoscaler to
    add a node then, so it starts with them: prep (1) and train (2, after prep) on a group of at most 3 get 3 nodes,
    where 2 left train's second pod, or prep's, without a node until the other finished."""
    assert _sizes(_plan(prep={"nodes": 1}, train={"nodes": 2, "after": ["prep"]}))["cpu"] == 3
    assert _sizes(_plan(train={"nodes": 2}, later={"nodes": 3, "after": ["train"]}))["cpu"] == 4


def test_the_system_group_and_a_provisioned_group_keep_their_own_start() -> None:
    """The system group's jobs take a share of a node; p5's GPU group scales from zero through Kueue's
    ProvisioningRequests, whose stand-in adds its nodes."""
    assert _sizes(_plan(evaluate={"nodes": 1}))["system"] == 1
    # a system job's pods each take a node of their own (the job's anti-affinity), up to the group's maxSize (2)
    assert _sizes(_plan(gather={"nodes": 2, "nodeGroup": "system"}))["system"] == 2
    plan = _plan("p5")
    (flavor,) = [f for f in plan.admission.flavors if f.provisioned]
    group = plan.groups[flavor.group]
    assert initial_size(plan, group) == group.min_size == 0 < group.desired_size
