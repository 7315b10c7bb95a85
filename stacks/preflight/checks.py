"""The preflight checks, each reading the plan (docs/explanation/preflight.md lists them)."""

import ipaddress
import os
import re
from typing import Any, Callable, Optional, Sequence, TypeVar

import boto3

from components.catalog import (
    AMAZON_DNS,
    AMAZON_DNS_ADDRESSES,
    AMAZON_DNS_OFFSET,
    ANYWHERE_IPV4,
    MAX_SPOT_DISCOUNT,
    QUOTA_NAMES,
    VCPU_QUOTAS,
)
from stacks.config import ConfigError, StackConfig, key
from stacks.plan import NodeGroupPlan, Plan
from stacks.plan.checklist import quota_needs, type_key
from stacks.preflight.addons import check_addons
from stacks.preflight.aws import AwsClient
from stacks.preflight.cluster import check_running_cluster
from stacks.preflight.datasets import check_datasets
from stacks.preflight.findings import (
    SKIP_HINT,
    AwsCallError,
    Finding,
    PreflightError,
    format_time,
    join_names,
    number,
    unreadable_quota,
)
from stacks.preflight.fsx import check_fsx
from stacks.preflight.machine import aws_cli_finding, program_bin
from stacks.preflight.node_groups import check_node_group_quotas
from stacks.preflight.session import CREDENTIAL_KEYS, CREDENTIALS_KEY, CredentialsError, stack_session
from stacks.zones import MIN_CONTROL_PLANE_ZONES, Zone, choose_zones, control_plane_zones, find_zone

#: What an AWS read of :func:`_vpc_read` answers.
T = TypeVar("T")


def available_zones(session: boto3.session.Session, region: str) -> list[Zone]:
    """The region's available zones (state ``available``, ``opt-in-not-required``) with their IDs, sorted.

    Raises :class:`AwsCallError` when EC2 cannot be asked.
    """
    return AwsClient(session, region).available_zones()


def run_preflight(
    plan: Plan,
    zones: Optional[Sequence[Zone]],
    session: Optional[boto3.session.Session] = None,
    client: Optional[AwsClient] = None,
    previous: Optional[Plan] = None,
) -> list[Finding]:
    """Run every check and return all findings, passed and failed; AWS is asked through ``client``, else ``session``,
    else the stack's own credentials (:func:`stack_client`).

    ``zones`` are the zones of the new VPC (``None``: resolved from the region for a new VPC, or looked
    up from ``existingVpc.privateSubnetIds`` for an existing VPC). The region is the stack's ``aws:region``.
    ``previous`` is the last update's plan, where ``pulumi up`` read it: the vCPU quotas count its groups that run
    until the end of the update (:func:`~stacks.plan.checklist.quota_needs`). AWS errors become failed findings.
    """
    findings = [aws_cli_finding(os.environ.get("PATH", ""), program_bin())]
    if plan.config.jobs_only:
        return findings  # a jobs-only stack's account, zones and quotas are the cluster stack's, checked there
    aws, who = stack_client(plan, session, client)
    findings.append(who)
    if aws is None:
        return findings
    vpc_zone_list = _vpc_zones(plan, zones, aws, findings)
    _check_control_plane_zones(plan, vpc_zone_list, findings)
    check_running_cluster(plan, aws, findings)
    vpc_zones = [z.name for z in vpc_zone_list]
    group_zones = {g.path: _group_zones(g, plan, vpc_zone_list, aws, findings) for g in plan.all_groups}
    for g in plan.all_groups:
        _check_offerings(g, group_zones[g.path], vpc_zones, aws, findings)
    for g in plan.groups.values():
        _report_spot_prices(g, group_zones[g.path], aws, findings)
    for g in plan.groups.values():
        _check_efa(g, plan, aws, findings)
    for g in plan.groups.values():
        _check_reservation(g, group_zones[g.path], vpc_zones, aws, findings)
    _check_quotas(plan, aws, findings, previous)
    check_node_group_quotas(plan, aws, findings)
    check_addons(plan, aws, findings)
    _check_admin_roles(plan, aws, findings)
    check_fsx(plan, aws, findings)
    check_datasets(plan, aws, findings)
    return findings


def stack_client(
    plan: Plan, session: Optional[boto3.session.Session] = None, client: Optional[AwsClient] = None
) -> tuple[Optional[AwsClient], Finding]:
    """The checks' client (``client``, else one of ``session``, else of the stack's own) once AWS answered who the
    stack's credentials are, and the finding that says so; ``None`` and a failed finding when they cannot be used
    (then no check runs, to fail for the same reason again)."""
    try:
        aws = client or AwsClient(session or stack_session(plan), plan.config.region)
        caller = aws.caller_arn()
    except CredentialsError as exc:
        return None, Finding(False, CREDENTIALS_KEY, str(exc))
    except (AwsCallError, ValueError) as exc:  # ValueError: a malformed AWS_ENDPOINT_URL
        return None, Finding(
            False,
            CREDENTIALS_KEY,
            f"AWS did not say who the stack's credentials are ({CREDENTIAL_KEYS}; STS in {plan.config.region}): "
            f"{exc} {SKIP_HINT}",
        )
    return aws, Finding(True, CREDENTIALS_KEY, f"the checks ask AWS as {caller}")


def check(
    plan: Plan,
    zones: Optional[Sequence[Zone]],
    session: Optional[boto3.session.Session] = None,
    previous: Optional[Plan] = None,
) -> list[Finding]:
    """Run the preflight checks; raise :class:`PreflightError` when any fails, else return the findings.

    The program calls this before registering any resource when ``preflight.enabled`` is true, with the last update's
    plan as ``previous`` where it has one (:func:`run_preflight`).
    """
    findings = run_preflight(plan, zones, session, previous=previous)
    if any(not f.ok for f in findings):
        raise PreflightError(findings)
    return findings


def _check_control_plane_zones(plan: Plan, zones: list[Zone], findings: list[Finding]) -> None:
    """EKS needs control-plane subnets in two zones it supports; the program leaves the others out of the
    cluster's subnets (nodes may still run there)."""
    if not zones:
        return
    where = key("network") if plan.config.network is not None else key("existingVpc.privateSubnetIds")
    refused = [z for z in zones if not z.control_plane]
    supported = control_plane_zones(zones)
    if len(supported) < MIN_CONTROL_PLANE_ZONES:
        findings.append(
            Finding(
                False,
                where,
                f"EKS needs control-plane subnets in {MIN_CONTROL_PLANE_ZONES} zones it supports, the VPC has "
                f"{join_names([str(z) for z in supported]) if supported else 'none'}"
                + (f" ({join_names([str(z) for z in refused])} refused by EKS)" if refused else "")
                + "; add subnets in other zones",
            )
        )
    elif refused:
        findings.append(
            Finding(
                True,
                where,
                f"{join_names([str(z) for z in refused])}: EKS refuses control-plane subnets there, so the cluster "
                f"uses {join_names([str(z) for z in supported])} (nodes may still run in every zone)",
            )
        )


def _vpc_zones(plan: Plan, zones: Optional[Sequence[Zone]], aws: AwsClient, findings: list[Finding]) -> list[Zone]:
    """The VPC's zones: given, resolved for a new VPC, or the existing private subnets' zones."""
    cfg = plan.config
    if zones is not None:
        return list(zones)
    if cfg.network is not None:
        try:
            resolved = choose_zones(cfg, aws.available_zones())
        except ConfigError as exc:
            k = key("network.availabilityZones" if cfg.network.availability_zones else "network.availabilityZoneCount")
            findings.extend(Finding(False, k, p.split(": ", 1)[-1]) for p in exc.problems)
            return []
        except AwsCallError as exc:
            findings.append(Finding(False, key("network"), f"could not list the region's zones ({exc}) {SKIP_HINT}"))
            return []
        findings.append(
            Finding(
                True, key("network"), f"the new VPC uses zones {join_names([str(z) for z in resolved])} of {aws.region}"
            )
        )
        return resolved
    if cfg.existing_vpc is None:
        return []
    _vpc_dns(cfg, cfg.existing_vpc.vpc_id, aws, findings)
    out: list[Zone] = []
    for i, sid in enumerate(cfg.existing_vpc.private_subnet_ids):
        k = key(f"existingVpc.privateSubnetIds[{i}]")
        try:
            subnet = aws.subnet(sid)
        except AwsCallError as exc:
            findings.append(
                Finding(False, k, f"{sid}: {exc}; list a private subnet of {cfg.existing_vpc.vpc_id} in {aws.region}")
            )
            continue
        zone = Zone(str(subnet["AvailabilityZone"]), str(subnet.get("AvailabilityZoneId", "")))
        if subnet.get("VpcId") != cfg.existing_vpc.vpc_id:
            findings.append(
                Finding(
                    False,
                    k,
                    f"{sid} belongs to {subnet.get('VpcId')}, not existingVpc.vpcId {cfg.existing_vpc.vpc_id}; "
                    "list subnets of that VPC (or fix vpcId)",
                )
            )
            continue
        findings.append(Finding(True, k, f"{sid} is in {zone}"))
        if zone not in out:
            out.append(zone)
    return sorted(out)


def _vpc_read(findings: list[Finding], what: str, call: Callable[[], T]) -> Optional[T]:
    """``call``'s answer, or ``None`` with a failed finding of ``existingVpc.vpcId`` where AWS did not answer."""
    try:
        return call()
    except AwsCallError as exc:
        findings.append(Finding(False, key("existingVpc.vpcId"), f"could not read {what} ({exc}) {SKIP_HINT}"))
        return None


def _vpc_dns(cfg: StackConfig, vpc_id: str, aws: AwsClient, findings: list[Finding]) -> None:
    """An existing VPC resolves DNS and names its instances: EKS's nodes cannot register with their cluster otherwise,
    and the private endpoint's name resolves only so (source key ``eks-network-requirements``)."""
    k = key("existingVpc.vpcId")
    read = _vpc_read(findings, f"the DNS attributes of {vpc_id}", lambda: aws.vpc_dns(vpc_id))
    if read is None:
        return
    support, hostnames = read
    attributes = (
        ("enableDnsSupport", "--enable-dns-support", support),
        ("enableDnsHostnames", "--enable-dns-hostnames", hostnames),
    )
    off = [(a, flag) for a, flag, on in attributes if not on]
    if not off:
        findings.append(Finding(True, k, f"{vpc_id} has DNS resolution and DNS hostnames on"))
        _vpc_name_servers(cfg, vpc_id, aws, findings)
        return
    commands = "; ".join(f"aws ec2 modify-vpc-attribute --vpc-id {vpc_id} {flag}" for _, flag in off)
    findings.append(
        Finding(
            False,
            k,
            f"{vpc_id} has {' and '.join(a for a, _ in off)} off: EKS's nodes cannot register with the cluster without "
            f"DNS resolution and DNS hostnames in its VPC; turn them on: {commands}",
        )
    )


def _vpc_name_servers(cfg: StackConfig, vpc_id: str, aws: AwsClient, findings: list[Finding]) -> None:
    """An existing VPC's DHCP options set names the Amazon-provided DNS server, by name or at one of its addresses:
    the private endpoint's name resolves only through it (source keys ``eks-cluster-endpoint``, ``vpc-dns-server``).
    Where it does not, nodes resolve the endpoint's public name: that passes only with a public endpoint open to any
    address, which their NAT then reaches."""
    k = key("existingVpc.vpcId")
    read = _vpc_read(findings, f"the DHCP options of {vpc_id}", lambda: aws.vpc_name_servers(vpc_id))
    if read is None:
        return
    servers, block = read
    amazon = {AMAZON_DNS, *AMAZON_DNS_ADDRESSES}
    if block:
        amazon.add(str(ipaddress.ip_network(block, strict=False).network_address + AMAZON_DNS_OFFSET))
    if servers is not None and amazon & set(servers):
        findings.append(Finding(True, k, f"{vpc_id}'s DHCP options use the Amazon-provided DNS server"))
        return
    listed = (
        " has no DHCP options set"
        if servers is None
        else f"'s DHCP options set lists {', '.join(servers) or 'no DNS server'}"
    )
    cluster = cfg.cluster
    if cluster.endpoint_public_access and ANYWHERE_IPV4 in cluster.public_access_cidrs:
        findings.append(
            Finding(
                True,
                k,
                f"{vpc_id}{listed}, not {AMAZON_DNS}: nodes resolve the cluster's public endpoint, not its private "
                "one, and reach it through the VPC's NAT",
            )
        )
        return
    findings.append(
        Finding(
            False,
            k,
            f"{vpc_id}{listed}, not {AMAZON_DNS}: nodes could not resolve the cluster's private endpoint, whose name "
            f"EKS keeps in a private zone of the VPC; associate a DHCP options set whose domain-name-servers include "
            f"{AMAZON_DNS} (aws ec2 create-dhcp-options, then aws ec2 associate-dhcp-options --vpc-id {vpc_id} "
            "--dhcp-options-id <its id>)",
        )
    )


def _group_zones(
    g: NodeGroupPlan, plan: Plan, vpc_zones: list[Zone], aws: AwsClient, findings: list[Finding]
) -> list[str]:
    """A group's zone names: its availabilityZone (a name or an ID), else its subnet's zone, else all of the
    VPC's zones."""
    cfg = plan.config
    pinned = find_zone(g.zone, vpc_zones) if g.zone is not None else None
    zone = pinned.name if pinned is not None else g.zone
    if g.subnet_id is not None:
        k = key(f"{g.path}.subnetId")
        try:
            subnet = aws.subnet(g.subnet_id)
        except AwsCallError as exc:
            findings.append(
                Finding(False, k, f"{g.subnet_id}: {exc}; give a private subnet id of the VPC in {aws.region}")
            )
        else:
            subnet_zone = Zone(str(subnet["AvailabilityZone"]), str(subnet.get("AvailabilityZoneId", "")))
            problems = []
            if cfg.existing_vpc is not None and subnet.get("VpcId") != cfg.existing_vpc.vpc_id:
                problems.append(f"it belongs to {subnet.get('VpcId')}, not existingVpc.vpcId {cfg.existing_vpc.vpc_id}")
            if g.zone is not None and not subnet_zone.matches(g.zone):
                problems.append(
                    f"it is in {subnet_zone} but {g.path}.availabilityZone is {g.zone}; make them agree (or drop "
                    "availabilityZone)"
                )
            if problems:
                findings.append(Finding(False, k, f"{g.subnet_id}: " + "; ".join(problems)))
            else:
                findings.append(Finding(True, k, f"{g.subnet_id} is in {subnet_zone}"))
            zone = zone or subnet_zone.name
    if zone is None:
        return [z.name for z in vpc_zones]
    if g.zone is not None and vpc_zones and pinned is None:
        where = (
            "network.availabilityZones" if cfg.network is not None else "existingVpc.privateSubnetIds (a subnet there)"
        )
        findings.append(
            Finding(
                False,
                key(f"{g.path}.availabilityZone"),
                f"{g.zone} is not one of the VPC's zones ({join_names([str(z) for z in vpc_zones])}), so the group has "
                f"no subnet there; pick one of those zones or add it to {where}",
            )
        )
    return [zone]


def _check_offerings(
    g: NodeGroupPlan, zones: list[str], vpc_zones: list[str], aws: AwsClient, findings: list[Finding]
) -> None:
    """Check 1: each instance type is offered in each of the group's zones."""
    if not zones:
        return
    for i, itype in enumerate(g.instance_types):
        k = type_key(g, i)
        try:
            offered = aws.offered_zones(itype)
        except AwsCallError as exc:
            findings.append(Finding(False, k, f"could not check where {itype} is offered ({exc}) {SKIP_HINT}"))
            continue
        missing = [z for z in zones if z not in offered]
        if not missing:
            findings.append(Finding(True, k, f"{itype} is offered in {join_names(zones)}"))
            continue
        if not offered:
            findings.append(
                Finding(
                    False,
                    k,
                    f"{itype} is not offered in any zone of {aws.region}; choose another instance type or region",
                )
            )
            continue
        in_vpc = [z for z in offered if z in vpc_zones]
        if g.path == "systemNodeGroup":
            fix = "choose a type offered in every zone, or pick the VPC's zones among those (network.availabilityZones)"
        elif len(zones) > 1:
            fix = (
                f"pin the group to one of them with {g.path}.availabilityZone"
                + (f" ({join_names(in_vpc)} are in the VPC)" if in_vpc else ", and add it to network.availabilityZones")
                + ", or choose another instance type"
            )
        else:
            fix = f"set {g.path}.availabilityZone (or subnetId) to one of those zones, or choose another instance type"
        findings.append(
            Finding(
                False,
                k,
                f"{itype} is not offered in {join_names(missing)} (the group's zones: {join_names(zones)}); "
                f"it is offered in {join_names(offered)} of {aws.region}: pick one of {join_names(offered)} ({fix})",
            )
        )


def _report_spot_prices(g: NodeGroupPlan, zones: list[str], aws: AwsClient, findings: list[Finding]) -> None:
    """Information for SPOT groups (never a failure): the current Spot price of each type in the group's zones, the
    discount off On-Demand it amounts to, and the discount the cost estimate assumes."""
    if g.capacity_type != "SPOT" or not zones:
        return
    assumed = f"the cost estimate uses {g.price_discount * 100:g}% off ({g.path}.spotDiscount)"
    for i, facts in enumerate(g.types):
        k = type_key(g, i)
        try:
            prices = aws.spot_prices(facts.name, zones)
        except AwsCallError as exc:
            findings.append(
                Finding(
                    True, k, f"(information) could not read the current Spot price of {facts.name} ({exc}); {assumed}"
                )
            )
            continue
        if not prices:
            findings.append(
                Finding(
                    True,
                    k,
                    f"(information) EC2 reports no current Spot price for {facts.name} in "
                    f"{join_names(zones)}; {assumed}",
                )
            )
            continue
        where = ", ".join(f"${p:g}/h in {z}" for z, p in prices.items())
        text = f"(information) current Spot price of {facts.name}: {where}"
        if facts.price_per_hour:
            off = sorted(1 - p / facts.price_per_hour for p in prices.values())
            span = (
                f"{off[0] * 100:.0f}%"
                if round(off[0], 2) == round(off[-1], 2)
                else f"{off[0] * 100:.0f}% to {off[-1] * 100:.0f}%"
            )
            text += (
                f", {span} below its On-Demand ${facts.price_per_hour:g}/h; {assumed}: set it to "
                f"{max(0.0, min(off[0], MAX_SPOT_DISCOUNT.fraction)):.2f} to estimate with the highest of these prices"
            )
        else:
            text += f"; {assumed}"
        findings.append(Finding(True, k, text))


def _check_efa(g: NodeGroupPlan, plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """Check 4: an EFA group's types support EFA with the interface count the plan uses."""
    if g.efa is None:
        return
    requested = plan.config.node_groups[g.name].efa
    for i, facts in enumerate(g.types):
        itype = facts.name
        k = type_key(g, i)
        fix_where = (
            f"fix {key(f'instanceFacts.{itype}.maxEfaInterfaces')} (and networkCards)"
            if facts.user_supplied
            else "fix max_efa_interfaces and network_cards in components/catalog/instances.py (with their source)"
        )
        try:
            info = aws.instance_type(itype)
        except AwsCallError as exc:
            findings.append(Finding(False, k, f"could not check EFA support of {itype} ({exc}) {SKIP_HINT}"))
            continue
        net = info.get("NetworkInfo", {})
        supported = bool(net.get("EfaSupported"))
        api_max = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
        if not supported:
            if requested is True:
                findings.append(
                    Finding(
                        False,
                        key(f"{g.path}.efa"),
                        f"efa is true but EC2 says {itype} does not support EFA; set efa: false or choose an "
                        "EFA-capable type (p4d.24xlarge, p5.48xlarge, ...)",
                    )
                )
            else:
                findings.append(
                    Finding(
                        False,
                        k,
                        f"the catalog gives {itype} {facts.max_efa_interfaces} EFA interface(s) but EC2 says it does "
                        f"not support EFA; {fix_where}, or set {g.path}.efa: false",
                    )
                )
        elif api_max != g.efa.interfaces:
            findings.append(
                Finding(
                    False,
                    k,
                    f"EFA interfaces of {itype}: EC2 says MaximumEfaInterfaces {api_max}, the plan uses "
                    f"{g.efa.interfaces} (launch template, pod requests, autoscaler tags); {fix_where} to {api_max}",
                )
            )
        else:
            findings.append(Finding(True, k, f"{itype} supports EFA with {api_max} interface(s), as the plan uses"))


def _check_reservation(
    g: NodeGroupPlan, zones: list[str], vpc_zones: list[str], aws: AwsClient, findings: list[Finding]
) -> None:
    """Check 3: the group's capacity reservation exists, is active and matches the group."""
    k = key(f"{g.path}.capacityReservationId")
    rid = g.capacity_reservation_id
    if rid is None:
        return
    try:
        res = aws.capacity_reservation(rid)
    except AwsCallError as exc:
        findings.append(Finding(False, k, f"could not look up {rid} ({exc}) {SKIP_HINT}"))
        return
    if res is None:
        findings.append(
            Finding(False, k, f"{rid} does not exist in {aws.region} (for this account); check the id and aws:region")
        )
        return
    problems = _reservation_problems(g, res, zones, vpc_zones)
    if problems:
        findings.append(Finding(False, k, f"{rid}: " + "; ".join(problems)))
    else:
        findings.append(Finding(True, k, f"{rid}: {_reservation_found(g, res)}"))


def _reservation_problems(g: NodeGroupPlan, res: dict[str, Any], zones: list[str], vpc_zones: list[str]) -> list[str]:
    """What keeps the reservation ``res`` from serving the group: its state, its kind, its type, its zone, its size."""
    problems: list[str] = []
    state = str(res.get("State", "unknown"))
    rtype = str(res.get("ReservationType") or "default")
    itype = str(res.get("InstanceType"))
    zone = str(res.get("AvailabilityZone"))
    total = int(res.get("TotalInstanceCount") or 0)
    block = rtype == "capacity-block" and g.capacity_type == "CAPACITY_BLOCK"
    if state == "scheduled" and not block:
        problems.append(
            f"it is scheduled and starts at {format_time(res.get('StartDate'))}; deploy the group after that time"
        )
    elif state not in ("active", "scheduled"):
        problems.append(
            f"its state is {state}, not active; use an active reservation"
            + (" or a scheduled Capacity Block" if g.capacity_type == "CAPACITY_BLOCK" else "")
        )
    if g.capacity_type == "CAPACITY_BLOCK" and rtype != "capacity-block":
        problems.append(
            f"it is an On-Demand Capacity Reservation (ReservationType {rtype}), not a Capacity Block; "
            "set capacityType: ON_DEMAND or give a Capacity Block id"
        )
    if g.capacity_type == "ON_DEMAND" and rtype == "capacity-block":
        problems.append("it is a Capacity Block; set capacityType: CAPACITY_BLOCK")
    if itype not in g.instance_types:
        problems.append(
            f"it reserves {itype} but the group runs {join_names(g.instance_types)}; set instanceTypes: [{itype}] "
            "or give a reservation for that type"
        )
    if zones != [zone]:
        fix = f"set {g.path}.availabilityZone: {zone}"
        if vpc_zones and zone not in vpc_zones:
            fix += " and add it to the VPC (network.availabilityZones, or a private subnet there)"
        problems.append(f"it is in {zone} but the group runs in {join_names(zones)}; {fix}")
    if g.capacity_type == "CAPACITY_BLOCK" and total and g.max_size > total:
        problems.append(f"the block holds {total} instance(s) but maxSize is {g.max_size}; lower maxSize to {total}")
    return problems


def _reservation_found(g: NodeGroupPlan, res: dict[str, Any]) -> str:
    """What a reservation that serves the group holds: a scheduled Capacity Block's schedule (information:
    everything is built now, the group takes its sizes when the block starts), or an active reservation."""
    total, itype, zone = (
        int(res.get("TotalInstanceCount") or 0),
        str(res.get("InstanceType")),
        res.get("AvailabilityZone"),
    )
    if str(res.get("State", "unknown")) == "scheduled":
        end = f" and ends {format_time(res['EndDate'])}" if res.get("EndDate") else ""
        return (
            f"scheduled Capacity Block for {total} x {itype} in {zone}: it starts "
            f"{format_time(res.get('StartDate'))}{end}. `pulumi up` builds the environment now; the group has "
            f"no nodes until the start, when a scheduled action sets its sizes (min {g.min_size}, desired "
            f"{g.desired_size}, max {g.max_size}), and the first `pulumi up` after the start creates the jobs "
            "on it; EKS scales it to 0 40 minutes before the end (EC2 starts terminating the block's instances "
            "30 minutes before it)"
        )
    block = str(res.get("ReservationType") or "default") == "capacity-block"
    kind = "Capacity Block" if block else "On-Demand Capacity Reservation"
    end = f", ends {format_time(res['EndDate'])}" if res.get("EndDate") else ""
    return f"active {kind} for {total} x {itype} in {zone}{end}"


def _check_quotas(plan: Plan, aws: AwsClient, findings: list[Finding], previous: Optional[Plan] = None) -> None:
    """Check 2: vCPU quota per class and market covers the sum of maxSize x vCPUs, and the nodes of the last update's
    groups that run until the end of this one (``previous``)."""
    for (cls, market), parts in sorted(quota_needs(plan, previous).items()):
        codes = VCPU_QUOTAS.get(cls)
        if codes is None:  # pragma: no cover - quota_class only returns known classes
            continue
        code = codes[0] if market == "On-Demand" else codes[1]
        needed = sum(p[0] for p in parts)
        k = max(parts, key=lambda p: p[0])[1]
        breakdown = " + ".join(p[2] for p in parts)
        try:
            value, name, source = aws.quota(code)
        except AwsCallError as exc:
            findings.append(
                unreadable_quota(k, f"{cls} {market} vCPU", code, QUOTA_NAMES.get(code, code), f"{needed} vCPUs", exc)
            )
            continue
        if value >= needed:
            findings.append(
                Finding(
                    True,
                    k,
                    f"{cls} {market} vCPU quota {code} ({name}) is {number(value)} ({source}); the stack needs up to "
                    f"{needed} ({breakdown})",
                )
            )
        else:
            findings.append(
                Finding(
                    False,
                    k,
                    f"{cls} {market} vCPU quota {code} ({name}) is {number(value)} ({source}) but the stack needs up "
                    f"to {needed} vCPUs ({breakdown}); request an increase to at least {needed} vCPUs: "
                    f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
                    f"--desired-value {needed} --region {aws.region} (or lower maxSize; instances already running "
                    "in the account count against the quota too"
                    + (
                        "; a replaced or removed group's nodes run until the end of the update: to never run both, "
                        "remove the old group in one `pulumi up` and add the new one in the next"
                        if any(p.outgoing for p in parts)
                        else ""
                    )
                    + ")",
                )
            )


_ASSUMED_ROLE_RE = re.compile(
    r"^arn:(?P<partition>[\w-]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[\w+=,.@-]+)/.+$"
)
_ROLE_RE = re.compile(r"^arn:(?P<partition>[\w-]+):iam::(?P<account>\d{12}):role/(?:.*/)?(?P<role>[\w+=,.@-]+)$")


def principal_of(arn: str) -> Optional[tuple[str, str, str]]:
    """(partition, account, role name) of a role ARN or of an assumed-role session ARN (a session of role
    ``r`` is ``arn:aws:sts::<account>:assumed-role/r/<session>``; the role's path is not in it, so roles
    compare by account and name); ``None`` for other principals (users, root)."""
    m = _ASSUMED_ROLE_RE.match(arn) or _ROLE_RE.match(arn)
    return (m.group("partition"), m.group("account"), m.group("role")) if m else None


def _check_admin_roles(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """Check 6: the identity running ``pulumi up`` is not listed in ``cluster.adminRoleArns``: EKS gives the
    cluster creator admin access itself, and an access entry for the same principal fails with
    ResourceInUseException (https://github.com/pulumi/pulumi-eks/issues/2373)."""
    arns = plan.config.cluster.admin_role_arns
    if not arns:
        return
    try:
        caller = aws.caller_arn()
    except AwsCallError as exc:
        findings.append(
            Finding(False, key("cluster.adminRoleArns"), f"could not tell who runs the deployment ({exc}) {SKIP_HINT}")
        )
        return
    me = principal_of(caller)
    for i, arn in enumerate(arns):
        k = key(f"cluster.adminRoleArns[{i}]")
        if me is not None and principal_of(arn) == me:
            findings.append(
                Finding(
                    False,
                    k,
                    f"{arn} is the identity running this deployment ({caller}), which EKS already makes cluster admin "
                    "as the cluster's creator; a second access entry for it fails with ResourceInUseException: remove "
                    "it from adminRoleArns (or deploy as another identity)",
                )
            )
        else:
            findings.append(
                Finding(True, k, f"{arn} gets a cluster-admin access entry (the deployment runs as {caller})")
            )
