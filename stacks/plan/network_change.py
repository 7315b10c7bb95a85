"""Network changes a running stack cannot take: a cluster's VPC, its zones, or a subnet's address block.

EKS keeps a cluster in the VPC it was made in, and the subnets it is given later must be in the zones it was made
with (https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html). EC2 replaces a subnet whose block changes
(terraform-provider-aws ``aws_subnet.cidr_block``, ForceNew), and its dependents cannot be replaced beside the old
ones: EFS keeps one mount target per zone (``MountTargetConflict``), a NAT gateway's Elastic IP stays with the old
gateway until it is deleted, and a new block that overlaps the old one is refused (``InvalidSubnet.Conflict``).
Pulumi deletes the old resources only at the end of ``pulumi up``, so the update would fail partway.
"""

from typing import Callable, Optional

from stacks.config import ConfigError, StackConfig, key
from stacks.plan import Plan

#: What a refusal offers instead of changing the network in place.
INSTEAD = "to move the stack to another network, deploy it under a new clusterName, or run `pulumi destroy` first"

#: The zones a new VPC of a configuration uses, in the VPC's order (:func:`stacks.zones.choose_zones` over the
#: region's zones): ``pulumi up`` knows them, an offline plan does not.
ZonesOf = Callable[[StackConfig], list[str]]


def network_problems(old: Plan, new: Plan, zones_of: Optional[ZonesOf] = None) -> list[str]:
    """Why ``pulumi up`` must not move a running stack from ``old``'s network to ``new``'s, each naming its key. A
    new ``clusterName`` replaces every resource, network included, and a jobs-only stack has no network of its own.
    Without ``zones_of`` a change of zones is decided from the stack files alone (:func:`network_notes`)."""
    a, b = old.config, new.config
    if not _compared(a, b):
        return []
    vpc_a, vpc_b = _vpc(a), _vpc(b)
    if vpc_a != vpc_b:
        if a.network is not None and b.network is not None:
            which, vpc_a, vpc_b = "network.vpcCidr", a.network.vpc_cidr, b.network.vpc_cidr
        else:
            which = "existingVpc.vpcId" if a.network is None and b.network is None else "existingVpc"
        return [
            f"{key(which)} {vpc_a} -> {vpc_b}: another VPC, and EKS keeps a cluster in the VPC it was made in: keep "
            f"the cluster's VPC; {INSTEAD}"
        ]
    if a.network is None or b.network is None:
        return []
    if zones_of is None and _spec(a) != _spec(b):
        return []  # the region's zones decide: network_notes
    zones_a, zones_b = _zones(a, zones_of), _zones(b, zones_of)
    if zones_a is None or zones_b is None:
        return []
    if zones_a != zones_b:
        which = "network.availabilityZones" if b.network.availability_zones else "network.availabilityZoneCount"
        return [
            f"{key(which)}: the VPC's zones {', '.join(zones_a)} -> {', '.join(zones_b)} (the zones node groups are "
            "pinned to count among them); EKS keeps the zones a cluster was made in, and each zone keeps its subnets "
            f"in their order: keep {', '.join(zones_a)}; {INSTEAD}"
        ]
    problems = []
    for field, old_cidrs, new_cidrs in zip(
        ("privateSubnetCidrs", "publicSubnetCidrs"), a.network.subnet_cidrs(), b.network.subnet_cidrs()
    ):
        for i, (was, now) in enumerate(zip(old_cidrs, new_cidrs)):
            if was != now:
                problems.append(
                    f"{key(f'network.{field}')}[{i}] {was} -> {now}: EC2 replaces a subnet whose block changes, and "
                    "a running stack's subnet has what cannot be replaced beside it (the zone's EFS mount target, a "
                    f"NAT gateway's Elastic IP, a block overlapping the old one): keep {was}; {INSTEAD}"
                )
    return problems


def network_notes(old: Plan, new: Plan) -> list[str]:
    """What an offline plan cannot decide: the stack files choose the zones differently, and only the region's zones
    say whether the VPC's zones change; ``pulumi up`` resolves them and refuses a change."""
    a, b = old.config, new.config
    if not _compared(a, b) or a.network is None or b.network is None or _vpc(a) != _vpc(b):
        return []
    if _spec(a) == _spec(b):
        return []
    return [
        f"{key('network')}: the zones are chosen differently ({_spec(a)} -> {_spec(b)}); if the VPC's zones change, "
        "`pulumi up` refuses it before anything is registered: EKS keeps the zones a cluster was made in"
    ]


def _compared(a: StackConfig, b: StackConfig) -> bool:
    """Both configurations make the same cluster: not jobs-only, not renamed (a new name replaces everything)."""
    jobs_only = a.cluster.stack_reference is not None or b.cluster.stack_reference is not None
    return not jobs_only and a.cluster_name == b.cluster_name


def _vpc(cfg: StackConfig) -> str:
    """The VPC a configuration deploys into: a new VPC's block, or an existing VPC's id."""
    if cfg.network is not None:
        return f"a new VPC {cfg.network.vpc_cidr}"
    return cfg.existing_vpc.vpc_id if cfg.existing_vpc is not None else "no VPC"


def _spec(cfg: StackConfig) -> str:
    """How a configuration chooses its zones: the list, or the count and the zones its groups are pinned to."""
    assert cfg.network is not None
    if cfg.network.availability_zones:
        return f"availabilityZones {', '.join(cfg.network.availability_zones)}"
    pins = sorted({g.availability_zone for g in cfg.node_groups.values() if g.availability_zone})
    if cfg.storage.backend == "fsx" and cfg.storage.fsx_settings.availability_zone:
        pins = sorted({*pins, cfg.storage.fsx_settings.availability_zone})
    return f"availabilityZoneCount {cfg.network.availability_zone_count}" + (
        f" with {', '.join(pins)} pinned" if pins else ""
    )


def _zones(cfg: StackConfig, zones_of: Optional[ZonesOf]) -> Optional[list[str]]:
    """The VPC's zones in order: resolved (``zones_of``; ``None`` where the region cannot place them), else the
    configuration's choice itself (the same choice resolves to the same zones)."""
    if zones_of is not None:
        try:
            return zones_of(cfg)
        except ConfigError:
            return None  # the region cannot place it: the new configuration's own check says why
    return [_spec(cfg)]
