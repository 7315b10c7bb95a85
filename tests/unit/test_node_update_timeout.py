"""How long ``pulumi up`` waits for a node group's update: every node rolled one at a time and one more for the
scale-up, never below the provider's own hour (a shorter wait ends while EKS goes on rolling)."""

from components.catalog.timings import NODE_ROLL, PROVIDER_NODE_GROUP_WAIT
from components.nodegroup import update_timeout_minutes


def test_the_update_waits_for_every_node_rolled_and_never_less_than_the_provider() -> None:
    assert PROVIDER_NODE_GROUP_WAIT.minutes == 60 and NODE_ROLL.minutes >= 15  # EKS's eviction limit alone
    assert update_timeout_minutes(1) == 60
    assert update_timeout_minutes(2) == 60
    assert update_timeout_minutes(3) == 4 * NODE_ROLL.minutes
    assert update_timeout_minutes(9) == 10 * NODE_ROLL.minutes
