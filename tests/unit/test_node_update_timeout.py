"""How long ``pulumi up`` waits for a node group's update: every node rolled one at a time, with ``DEFAULT``'s new
nodes first, never below the provider's own hour (a shorter wait ends while EKS goes on rolling); and the upgrade
plan's duration of a roll is the same figure."""

import pytest

from components.catalog.platform import NODE_UPDATE_STRATEGIES
from components.catalog.timings import NODE_ROLL, NODE_SURGE, PROVIDER_NODE_GROUP_WAIT
from components.nodegroup import update_timeout_minutes
from components.nodeplan import roll_minutes
from stacks.plan.group_changes import GroupChange

DEFAULT, MINIMAL = NODE_UPDATE_STRATEGIES["DEFAULT"], NODE_UPDATE_STRATEGIES["MINIMAL"]


def test_the_update_waits_for_every_node_rolled_and_never_less_than_the_provider() -> None:
    assert PROVIDER_NODE_GROUP_WAIT.minutes == 60 and NODE_ROLL.minutes >= 15  # EKS's eviction limit alone
    assert NODE_SURGE.minutes > 0
    for strategy in (DEFAULT, MINIMAL):
        assert update_timeout_minutes(1, strategy) == 60
        assert update_timeout_minutes(2, strategy) == 60
    assert update_timeout_minutes(3, MINIMAL) == 3 * NODE_ROLL.minutes
    assert update_timeout_minutes(3, DEFAULT) == 3 * NODE_ROLL.minutes + NODE_SURGE.minutes
    assert update_timeout_minutes(9, MINIMAL) == 9 * NODE_ROLL.minutes


@pytest.mark.parametrize("nodes", [1, 2, 5, 16])
@pytest.mark.parametrize("strategy", ["DEFAULT", "MINIMAL"])
def test_the_plan_and_the_timeout_model_a_roll_alike(nodes: int, strategy: str) -> None:
    s = NODE_UPDATE_STRATEGIES[strategy]
    roll = GroupChange(path="nodeGroups.g", action="roll", reasons=(), nodes=nodes, strategy="rolling", node_update=s)
    assert roll.minutes == roll_minutes(nodes, s)
    assert update_timeout_minutes(nodes, s) >= roll.minutes  # pulumi up waits at least as long as the plan says
    assert roll.minutes == nodes * NODE_ROLL.minutes + (NODE_SURGE.minutes if s.surge else 0)
