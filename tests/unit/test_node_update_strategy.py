"""How EKS rolls a node group's nodes, decided from the group's capacity
(:func:`components.nodeplan.node_update_strategy`): ``MINIMAL`` (each old node terminated before its replacement
launches) where the capacity has no room for an extra instance, a Capacity Block, an On-Demand Capacity Reservation
or the EFA group's own cluster placement group; else ``DEFAULT`` (new nodes first). The facts name their public
sources."""

from typing import Optional

import pytest

from components.catalog.platform import NO_SURGE_CAPACITY, NODE_UPDATE_STRATEGIES
from components.catalog.sources import SOURCES
from components.nodeplan import node_update_strategy, placement_group, surge_limit


@pytest.mark.parametrize(
    ("capacity_type", "reservation", "efa", "strategy", "limit"),
    [
        ("ON_DEMAND", None, False, "DEFAULT", None),
        ("SPOT", None, False, "DEFAULT", None),
        ("ON_DEMAND", None, True, "MINIMAL", "cluster-placement"),  # EFA: the group's own placement group
        ("ON_DEMAND", "cr-0123456789abcdef0", False, "MINIMAL", "capacity-reservation"),
        ("ON_DEMAND", "cr-0123456789abcdef0", True, "MINIMAL", "capacity-reservation"),  # the reservation places them
        ("CAPACITY_BLOCK", "cr-0123456789abcdef0", False, "MINIMAL", "capacity-block"),
        ("CAPACITY_BLOCK", "cr-0123456789abcdef0", True, "MINIMAL", "capacity-block"),
    ],
)
def test_the_strategy_follows_the_capacity(
    capacity_type: str, reservation: Optional[str], efa: bool, strategy: str, limit: Optional[str]
) -> None:
    s = node_update_strategy(capacity_type, reservation, efa)
    assert s.name == strategy
    assert s.surge is (limit is None)
    found = surge_limit(capacity_type, reservation, efa)
    assert (found.key if found else None) == limit


def test_only_an_efa_group_without_a_reservation_has_a_placement_group() -> None:
    assert placement_group(True, None)
    assert not placement_group(True, "cr-0123456789abcdef0")
    assert not placement_group(False, None)


def test_the_two_strategies_are_eks_s_and_every_limit_has_a_source() -> None:
    assert set(NODE_UPDATE_STRATEGIES) == {"DEFAULT", "MINIMAL"}  # NodegroupUpdateConfig's valid values
    assert NODE_UPDATE_STRATEGIES["DEFAULT"].surge and not NODE_UPDATE_STRATEGIES["MINIMAL"].surge
    assert "eks-nodegroup-update-config" in NODE_UPDATE_STRATEGIES["MINIMAL"].sources
    assert SOURCES["eks-nodegroup-update-config"].url.startswith("https://docs.aws.amazon.com/eks/")
    for limit in NO_SURGE_CAPACITY.values():
        assert limit.sources and all(k in SOURCES for k in limit.sources), limit.key
