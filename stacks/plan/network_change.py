"""Network changes a running stack cannot take: its region (:mod:`stacks.plan.region_change`), a cluster's VPC, its
zones, or a subnet's address block.

EKS keeps a cluster in the VPC it was made in, and the subnets it is given later must be in the zones it was made
with (https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html). EC2 replaces a subnet whose block changes
(terraform-provider-aws ``aws_subnet.cidr_block``, ForceNew), and its dependents cannot be replaced beside the old
ones: EFS keeps one mount target per zone (``MountTargetConflict``), a NAT gateway's Elastic IP stays with the old
gateway until it is deleted, and a new block that overlaps the old one is refused (``InvalidSubnet.Conflict``).
Pulumi deletes the old resources only at the end of ``pulumi up``, so the update would fail partway.
"""

from typing import Optional

from stacks.config import ConfigError, StackConfig, key
from stacks.config.base import ZONE_ID_RE
from stacks.plan import Plan, same_cluster
from stacks.plan.region_change import region_problem
from stacks.zones import RegionZones, find_zone, zone_pins

#: What a refusal offers instead of changing the network in place.
INSTEAD = "to move the stack to another network, deploy it under a new clusterName, or run `pulumi destroy` first"


def network_problems(
    old: Plan, new: Plan, region: Optional[RegionZones] = None, deployed_zones: Optional[list[str]] = None
) -> list[str]:
    """Why ``pulumi up`` must not move a running stack from ``old``'s network to ``new``'s, each naming its key. A
    new ``clusterName`` replaces every resource, network included, and a jobs-only stack has no network of its own.
    ``region``: the region's zones, which ``pulumi up`` reads; without them (offline) a change of zones is only noted
    (:func:`network_notes`). ``deployed_zones``: the zones the last update's VPC was made in, where it recorded them
    (else they are resolved from ``old``)."""
    a, b = old.config, new.config
    if a.region != b.region:  # whatever the cluster's name: the resources it does not replace would stay behind
        return [region_problem(a.region, b.region)]
    if not same_cluster(a, b):
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
    # without the region's zones (offline, or a configuration they cannot place) the subnets compare by place:
    # the same place holds the same zone unless the zones changed, which `pulumi up` refuses by itself
    if region is not None:
        moved = _zone_problems(a, b, region, deployed_zones if deployed_zones is not None else _zones(a, region))
        if moved:
            return moved
    elif _zones_certainly_change(a, b):
        return [_offline_zone_problem(a, b)]
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


def deployed_zone_problems(new: Plan, region: RegionZones, deployed_zones: list[str]) -> list[str]:
    """The zones alone, where the last update's configuration is unknown (its record is unreadable, or does not load
    with this version): ``new``'s VPC zones against those the last update's VPC was made in. Zones of another region
    were refused before (:func:`stacks.last_update.refuse_new_region`)."""
    b = new.config
    if b.network is None or b.jobs_only:
        return []
    return _zone_problems(None, b, region, deployed_zones)


def _zone_problems(
    a: Optional[StackConfig], b: StackConfig, region: RegionZones, zones_a: Optional[list[str]]
) -> list[str]:
    """``b``'s VPC zones against ``zones_a``, the running VPC's (``None``: unknown, nothing compared); ``a``: the
    configuration that made them, where known."""
    zones_b = _zones(b, region)
    if zones_a is None or zones_a == zones_b:
        return []
    gone = [z for z in zones_a if not region.has(z)]
    if not gone and zones_b is None:
        return []  # the region cannot place b: its own check (stacks.zones.choose_zones) says why
    return [_zones_problem(a, b, zones_a, zones_b, gone, region)]


def _zones_certainly_change(a: StackConfig, b: StackConfig) -> bool:
    """Whether ``a`` and ``b`` give the VPC other zones whatever the region's are: another number of zones, or two
    lists of zone names (or two of zone IDs) that differ, order included (each zone keeps its subnets' places). A
    count with zones pinned may resolve to more zones than it says (:func:`stacks.zones.choose_zones` adds the pinned
    ones, and two EKS accepts), so only a list or an unpinned count has a known number."""
    assert a.network is not None and b.network is not None
    listed_a, listed_b = a.network.availability_zones, b.network.availability_zones
    count_a, count_b = _known_count(a), _known_count(b)
    if count_a is not None and count_b is not None and count_a != count_b:
        return True
    if not listed_a or not listed_b or listed_a == listed_b:
        return False
    return {bool(ZONE_ID_RE.match(z)) for z in [*listed_a, *listed_b]} in ({True}, {False})


def _offline_zone_problem(a: StackConfig, b: StackConfig) -> str:
    """The refusal of zones :func:`_zones_certainly_change` finds changed: other zones, or the same in another order,
    which moves each place's subnet blocks, the NAT gateway (the first zone's) and the EFS mount targets."""
    assert a.network is not None and b.network is not None
    keys = " and ".join(key(k) for k in _zone_keys(a, b))
    listed_a, listed_b = a.network.availability_zones or [], b.network.availability_zones or []
    if listed_a and sorted(listed_a) == sorted(listed_b):
        why = (
            "the same zones in another order, and each place keeps its subnet blocks, the NAT gateway (the first "
            "zone's) and the EFS mount target, which EC2 and EFS cannot move"
        )
    else:
        why = "whatever the region's zones are, and EKS keeps the zones a cluster was made in"
    return f"{keys}: the VPC's zones change ({_spec(a)} -> {_spec(b)}), {why}: keep {_spec(a)}; {INSTEAD}"


def _known_count(cfg: StackConfig) -> Optional[int]:
    """How many zones the VPC has, where the configuration alone says it: the zones listed, or a count with no zone
    pinned; ``None`` otherwise."""
    assert cfg.network is not None
    if cfg.network.availability_zones:
        return len(cfg.network.availability_zones)
    return None if zone_pins(cfg) else cfg.network.availability_zone_count


def network_notes(old: Plan, new: Plan) -> list[str]:
    """What an offline plan cannot decide: the stack files choose the zones differently, and only the region's zones
    say whether the VPC's zones change; ``pulumi up`` resolves them and refuses a change. A change of zones that is
    certain offline is refused (:func:`_zones_certainly_change`)."""
    a, b = old.config, new.config
    if not same_cluster(a, b) or a.network is None or b.network is None or _vpc(a) != _vpc(b):
        return []
    if _spec(a) == _spec(b) or _zones_certainly_change(a, b):
        return []
    keys = " and ".join(key(k) for k in _zone_keys(a, b)) or key("network")
    return [
        f"{keys}: the zones are chosen differently ({_spec(a)} -> {_spec(b)}); if the VPC's zones change, `pulumi up` "
        "refuses it before anything is registered (EKS keeps the zones a cluster was made in): to keep them, set "
        f"{key('network.availabilityZones')} to the zones the VPC has"
    ]


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
    pins = sorted(set(zone_pins(cfg).values()))
    return f"availabilityZoneCount {cfg.network.availability_zone_count}" + (
        f" with {', '.join(pins)} pinned" if pins else ""
    )


def _zones(cfg: StackConfig, region: Optional[RegionZones]) -> Optional[list[str]]:
    """The VPC's zones in order, resolved from the ``region``'s; ``None`` offline or where the region cannot place
    them."""
    if region is None:
        return None
    try:
        return region.of(cfg)
    except ConfigError:
        return None  # the region cannot place it: the new configuration's own check says why


def _zone_keys(a: StackConfig, b: StackConfig) -> list[str]:
    """The keys that choose the zones and differ between ``a`` and ``b``: the zones listed, their count, a zone a node
    group or the FSx file system is pinned to."""
    assert a.network is not None and b.network is not None
    pins_a, pins_b = zone_pins(a), zone_pins(b)
    changed = [
        k
        for k, x, y in (
            ("network.availabilityZones", a.network.availability_zones, b.network.availability_zones),
            ("network.availabilityZoneCount", a.network.availability_zone_count, b.network.availability_zone_count),
        )
        if x != y
    ]
    return changed + [k for k in sorted({*pins_a, *pins_b}) if pins_a.get(k) != pins_b.get(k)]


def _lists(listed: Optional[list[str]], zones_a: list[str], region: RegionZones) -> bool:
    """``listed`` (``network.availabilityZones``, names or IDs) names the zones ``zones_a`` in their order. A zone the
    region does not list now has no ID to match: an unavailable entry in the place of an unavailable zone counts as
    the same (once it is available again, the next update compares them exactly)."""
    if not listed or len(listed) != len(zones_a):
        return False
    for ref, name in zip(listed, zones_a):
        zone = find_zone(ref, region.zones)
        if ref != name and (zone.name != name if zone is not None else region.has(name)):
            return False
    return True


def _zones_problem(
    a: Optional[StackConfig],
    b: StackConfig,
    zones_a: list[str],
    zones_b: Optional[list[str]],
    gone: list[str],
    region: RegionZones,
) -> str:
    """The refusal of new zones, naming the keys that moved them (or, where none did, what moved the choice) and how
    to keep the old ones; ``gone``: zones of the VPC the region does not list as available now, which cannot be listed
    until it does; a stack that lists them (:func:`_lists`) is told only to wait. ``a``: the last update's
    configuration, where known."""
    assert b.network is not None
    changed = _zone_keys(a, b) if a is not None else []
    listed = b.network.availability_zones
    keys = " and ".join(key(k) for k in changed) or key(
        "network.availabilityZones" if listed else "network.availabilityZoneCount"
    )
    now = ", ".join(zones_b) if zones_b is not None else "zones the region cannot give now"
    keep = f"set {key('network.availabilityZones')} to [{', '.join(zones_a)}] and pin groups only to those zones"
    if gone:
        why = (
            f" ({', '.join(gone)}: the VPC has subnets there, and the region does not list it as available now: "
            "`aws ec2 describe-availability-zones` shows its state)"
        )
        wait = f"wait until AWS reports {', '.join(gone)} available again"
        keep = wait if _lists(listed, zones_a, region) else f"{wait}, then {keep}"
    elif a is None:
        why = " (the zones the last update exported as vpcZones)"
    elif not changed:
        why = " (the same settings choose other zones: the region's available zones, or this version's rules, changed)"
    else:
        why = ""
    return (
        f"{keys}: the VPC's zones {', '.join(zones_a)} -> {now}{why}; EKS keeps the zones a cluster was made in, and "
        f"each zone keeps its subnets in their order: to keep them, {keep}; {INSTEAD}"
    )
