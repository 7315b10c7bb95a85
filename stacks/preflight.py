"""Preflight checks against the AWS account, run before any resource is created.

The config loader (:mod:`stacks.config`) checks a stack's configuration on its own; these checks ask
the account whether it can actually run it:

1. **Offerings**: every instance type of every node group (the system group included) is offered in
   each of the group's zones (``ec2:DescribeInstanceTypeOfferings``); a failure names the zones of
   the region where the type *is* offered.
2. **vCPU quotas**: per quota class (P, G, Standard, ...) and market, the account's quota covers the
   sum over groups of ``maxSize x vCPUs`` (``service-quotas:GetServiceQuota``, falling back to
   ``GetAWSDefaultServiceQuota`` when the account has no applied value). SPOT groups count against
   the Spot code, ON_DEMAND groups (with or without an On-Demand Capacity Reservation) against the
   On-Demand code; CAPACITY_BLOCK groups are not counted (a Capacity Block is a prepaid reservation).
   The quota is a limit, not free capacity: instances already running in the account count too.
3. **Capacity reservations**: a group's ``capacityReservationId`` exists, is ``active`` (a
   ``scheduled`` Capacity Block fails with its start time), matches the group's instance type and
   zone, and has ``ReservationType`` ``capacity-block`` exactly when ``capacityType`` is CAPACITY_BLOCK
   (``ec2:DescribeCapacityReservations``).
4. **EFA**: for EFA-enabled groups, EC2 says the type supports EFA and its
   ``MaximumEfaInterfaces`` equals the catalog's ``max_efa_interfaces`` (the launch template is sized
   from the catalog).
5. **VPC CNI for efa-only interfaces**: when an EFA group's type has more than one network card
   (its launch template carries ``efa-only`` interfaces), the vpc-cni version the cluster will run
   is at least v1.18.5: the pinned ``cluster.addonVersions.vpc-cni`` must be one EKS offers for the
   cluster's Kubernetes version, and without a pin EKS's *default* version for that Kubernetes
   version must be new enough (``eks:DescribeAddonVersions``); a failure names the newest version to pin.

Every check yields a :class:`Finding` (ok or not) keyed by the config key it is about, with a
message that says what to do. :func:`check` raises :class:`PreflightError` when any fails.

All AWS calls go through clients made from one ``boto3`` session
(``session.client(service, region_name=region)``), so the standard ``AWS_ENDPOINT_URL`` and
credential settings apply. Read-only permissions needed: ``ec2:DescribeAvailabilityZones``,
``ec2:DescribeSubnets``, ``ec2:DescribeInstanceTypeOfferings``, ``ec2:DescribeInstanceTypes``,
``ec2:DescribeCapacityReservations``, ``servicequotas:GetServiceQuota``,
``servicequotas:GetAWSDefaultServiceQuota``, ``eks:DescribeAddonVersions``.

Standalone: ``python -m stacks.preflight --stack NAME [--region R] [--stack-file PATH]`` prints the
report; exit status 0 when everything passed, 1 when a check failed, 2 on a configuration error.
"""

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

import boto3
import pulumi
import yaml
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from components.catalog import EFA_ONLY_MIN_VPC_CNI, VCPU_QUOTAS, InstanceType, quota_class
from stacks.config import (
    EFA_ONLY_MIN_VPC_CNI_TEXT,
    NAMESPACE,
    ConfigError,
    StackConfig,
    choose_zones,
    load_config,
    version_tuple,
)

REPO = Path(__file__).resolve().parent.parent

#: Service Quotas names of the EC2 vCPU quotas (On-Demand names: field notes 6a; Spot names as the
#: Service Quotas console shows them). Used when the quota itself could not be read.
QUOTA_NAMES: dict[str, str] = {
    "L-417A185B": "Running On-Demand P instances",
    "L-7212CCBC": "All P Spot Instance Requests",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-2C3B7624": "Running On-Demand Trn instances",
    "L-6B0D517C": "All Trn Spot Instance Requests",
    "L-1945791B": "Running On-Demand Inf instances",
    "L-B5D1601B": "All Inf Spot Instance Requests",
    "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
}

_SKIP_HINT = f"(to deploy without these checks, set {NAMESPACE}:preflight.enabled: false)"


@dataclass(frozen=True)
class Finding:
    """The outcome of one preflight check.

    ``key`` is the config key the check is about, e.g. ``eks-training:nodeGroups.gpu.instanceTypes[0]``;
    ``message`` says what was found and, for a failure, what to do.
    """

    ok: bool
    key: str
    message: str


class PreflightError(ConfigError):
    """Raised by :func:`check` when at least one preflight check failed; nothing was created."""

    def __init__(self, findings: Sequence[Finding]):
        self.findings = list(findings)
        failed = [f for f in self.findings if not f.ok]
        super().__init__([f"{f.key}: {f.message}" for f in failed])
        text = "\n".join(f"  - {f.key}: {f.message}" for f in failed)
        self.args = (
            f"preflight checks against the AWS account failed ({len(failed)} of {len(self.findings)}); "
            f"no resource was created:\n{text}",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class AwsCallError(Exception):
    """An AWS API call failed (access denied, throttled, not implemented, unreachable, ...)."""

    def __init__(self, operation: str, code: str, message: str):
        self.operation = operation
        self.code = code
        super().__init__(f"{operation} failed: {code}: {message}")


def _key(path: str) -> str:
    return f"{NAMESPACE}:{path}"


def _join(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "(none)"


def _short(message: str, status: Optional[int]) -> str:
    """An error message fit for one report line (an HTML error page becomes its HTTP status)."""
    if "<html" in message.lower() or "<!doctype" in message.lower():
        return f"an HTML error page{f' (HTTP {status})' if status else ''} instead of an AWS response"
    message = " ".join(message.split())
    return message if len(message) <= 300 else message[:297] + "..."


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class _Aws:
    """The few read-only AWS calls the checks make, with per-run caches and uniform errors."""

    def __init__(self, session: boto3.session.Session, region: str):
        self.region = region
        self.ec2 = session.client("ec2", region_name=region)
        self.quotas = session.client("service-quotas", region_name=region)
        self.eks = session.client("eks", region_name=region)
        self._offered: dict[str, list[str]] = {}
        self._types: dict[str, dict[str, Any]] = {}
        self._subnets: dict[str, dict[str, Any]] = {}

    def _call(self, client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = getattr(client, operation)(**kwargs)
            return result
        except ClientError as exc:
            err = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            raise AwsCallError(operation, str(err.get("Code", "Error")), _short(str(err.get("Message", exc)), status)) from exc
        except (BotoCoreError, ResponseParserError) as exc:  # unreachable endpoint, no credentials, bad response
            raise AwsCallError(operation, type(exc).__name__, _short(str(exc), None)) from exc

    def available_zones(self) -> list[str]:
        """The region's available zones that need no opt-in, sorted (as the program resolves them)."""
        resp = self._call(
            self.ec2,
            "describe_availability_zones",
            Filters=[
                {"Name": "state", "Values": ["available"]},
                {"Name": "opt-in-status", "Values": ["opt-in-not-required"]},
            ],
        )
        return sorted(z["ZoneName"] for z in resp.get("AvailabilityZones", []) if z.get("ZoneType", "availability-zone") == "availability-zone")

    def offered_zones(self, instance_type: str) -> list[str]:
        """Zones of the region where ``instance_type`` is offered (one call per type, cached)."""
        if instance_type not in self._offered:
            zones: set[str] = set()
            token: Optional[str] = None
            while True:
                kwargs: dict[str, Any] = {
                    "LocationType": "availability-zone",
                    "Filters": [{"Name": "instance-type", "Values": [instance_type]}],
                }
                if token:
                    kwargs["NextToken"] = token
                resp = self._call(self.ec2, "describe_instance_type_offerings", **kwargs)
                zones.update(o["Location"] for o in resp.get("InstanceTypeOfferings", []))
                token = resp.get("NextToken")
                if not token:
                    break
            self._offered[instance_type] = sorted(zones)
        return self._offered[instance_type]

    def instance_type(self, instance_type: str) -> dict[str, Any]:
        """``DescribeInstanceTypes`` for one type (cached)."""
        if instance_type not in self._types:
            resp = self._call(self.ec2, "describe_instance_types", InstanceTypes=[instance_type])
            found = resp.get("InstanceTypes", [])
            if not found:
                raise AwsCallError("describe_instance_types", "NotFound", f"{instance_type} is not known to EC2 here")
            self._types[instance_type] = found[0]
        return self._types[instance_type]

    def subnet(self, subnet_id: str) -> dict[str, Any]:
        """``DescribeSubnets`` for one subnet (cached)."""
        if subnet_id not in self._subnets:
            resp = self._call(self.ec2, "describe_subnets", SubnetIds=[subnet_id])
            found = resp.get("Subnets", [])
            if not found:
                raise AwsCallError("describe_subnets", "InvalidSubnetID.NotFound", f"subnet {subnet_id} not found")
            self._subnets[subnet_id] = found[0]
        return self._subnets[subnet_id]

    def quota(self, code: str) -> tuple[float, str, str]:
        """(value, name, where from) of an EC2 quota: the applied value, else AWS's default."""
        try:
            q = self._call(self.quotas, "get_service_quota", ServiceCode="ec2", QuotaCode=code)["Quota"]
            source = "applied"
        except AwsCallError as exc:
            if exc.code != "NoSuchResourceException":
                raise
            q = self._call(self.quotas, "get_aws_default_service_quota", ServiceCode="ec2", QuotaCode=code)["Quota"]
            source = "AWS default"
        return float(q["Value"]), str(q.get("QuotaName") or QUOTA_NAMES.get(code, code)), source

    def addon_versions(self, addon: str, kubernetes_version: str) -> list[tuple[str, bool]]:
        """(version, is EKS's default) of every version of an EKS add-on offered for ``kubernetes_version``."""
        found: list[tuple[str, bool]] = []
        token: Optional[str] = None
        while True:
            kwargs: dict[str, Any] = {"addonName": addon, "kubernetesVersion": kubernetes_version}
            if token:
                kwargs["nextToken"] = token
            resp = self._call(self.eks, "describe_addon_versions", **kwargs)
            for entry in resp.get("addons", []):
                if entry.get("addonName") != addon:
                    continue
                for version in entry.get("addonVersions", []):
                    compat = [c for c in version.get("compatibilities", []) if c.get("clusterVersion") == kubernetes_version]
                    if compat:
                        found.append((str(version["addonVersion"]), any(bool(c.get("defaultVersion")) for c in compat)))
            token = resp.get("nextToken")
            if not token:
                return found

    def capacity_reservation(self, reservation_id: str) -> Optional[dict[str, Any]]:
        """The reservation, or ``None`` when EC2 says it does not exist."""
        try:
            resp = self._call(self.ec2, "describe_capacity_reservations", CapacityReservationIds=[reservation_id])
        except AwsCallError as exc:
            if exc.code.startswith("InvalidCapacityReservationId"):
                return None
            raise
        found = [r for r in resp.get("CapacityReservations", []) if r.get("CapacityReservationId") == reservation_id]
        return found[0] if found else None


@dataclass
class _Group:
    """A node group as the checks see it (the system group included)."""

    label: str  # "nodeGroups.gpu" or "systemNodeGroup"
    instance_types: list[str]
    type_keys: list[str]  # config key of each instance type
    max_size: int
    capacity_type: str
    capacity_reservation_id: Optional[str] = None
    efa: Optional[bool] = None
    availability_zone: Optional[str] = None
    subnet_id: Optional[str] = None
    zones: list[str] = field(default_factory=list)


def _groups(cfg: StackConfig) -> list[_Group]:
    sys_group = cfg.system_node_group
    out = [
        _Group(
            label="systemNodeGroup",
            instance_types=[sys_group.instance_type],
            type_keys=[_key("systemNodeGroup.instanceType")],
            max_size=sys_group.max_size,
            capacity_type="ON_DEMAND",
        )
    ]
    for name, g in cfg.node_groups.items():
        label = f"nodeGroups.{name}"
        out.append(
            _Group(
                label=label,
                instance_types=list(g.instance_types),
                type_keys=[_key(f"{label}.instanceTypes[{i}]") for i in range(len(g.instance_types))],
                max_size=g.max_size,
                capacity_type=g.capacity_type,
                capacity_reservation_id=g.capacity_reservation_id,
                efa=g.efa,
                availability_zone=g.availability_zone,
                subnet_id=g.subnet_id,
            )
        )
    return out


def available_zones(session: boto3.session.Session, region: str) -> list[str]:
    """The region's available zones (state ``available``, ``opt-in-not-required``), sorted.

    Raises :class:`AwsCallError` when EC2 cannot be asked.
    """
    return _Aws(session, region).available_zones()


def resolve_zones(cfg: StackConfig, available: Sequence[str]) -> list[str]:
    """The zones a new VPC uses, chosen exactly as the program chooses them."""
    return choose_zones(cfg, available)


def _region(session: Optional[boto3.session.Session]) -> Optional[str]:
    region = pulumi.Config("aws").get("region")
    if region:
        return region
    if session is not None and session.region_name:
        return str(session.region_name)
    return None


def run_preflight(
    cfg: StackConfig,
    zones: Optional[Sequence[str]],
    session: Optional[boto3.session.Session] = None,
) -> list[Finding]:
    """Run every check and return all findings, passed and failed (see the module docstring).

    ``zones`` are the zones of the new VPC (``None``: resolved from the region for a new VPC, or
    looked up from ``existingVpc.privateSubnetIds`` for an existing VPC). The region is
    ``aws:region`` from the stack config, else the session's. AWS errors become failed findings.
    """
    region = _region(session)
    if region is None:
        return [
            Finding(
                False,
                "aws:region",
                "no AWS region: set it with `pulumi config set aws:region us-east-1` (or AWS_REGION)",
            )
        ]
    if session is None:
        session = boto3.session.Session(region_name=region)
    aws = _Aws(session, region)
    findings: list[Finding] = []

    vpc_zones = _vpc_zones(cfg, zones, aws, findings)
    groups = _groups(cfg)
    for g in groups:
        g.zones = _group_zones(g, cfg, vpc_zones, aws, findings)
    for g in groups:
        _check_offerings(g, vpc_zones, aws, findings)
    for g in groups:
        _check_efa(g, cfg, aws, findings)
    for g in groups:
        _check_reservation(g, vpc_zones, aws, findings)
    _check_quotas(groups, cfg, aws, findings)
    _check_vpc_cni(cfg, aws, findings)
    return findings


def _vpc_zones(cfg: StackConfig, zones: Optional[Sequence[str]], aws: _Aws, findings: list[Finding]) -> list[str]:
    """The VPC's zones: given, resolved for a new VPC, or the existing private subnets' zones."""
    if zones is not None:
        return list(zones)
    if cfg.network is not None:
        try:
            resolved = resolve_zones(cfg, aws.available_zones())
        except ConfigError as exc:
            key = _key("network.availabilityZones" if cfg.network.availability_zones else "network.availabilityZoneCount")
            findings.extend(Finding(False, key, p.split(": ", 1)[-1]) for p in exc.problems)
            return []
        except AwsCallError as exc:
            findings.append(Finding(False, _key("network"), f"could not list the region's zones ({exc}) {_SKIP_HINT}"))
            return []
        findings.append(Finding(True, _key("network"), f"the new VPC uses zones {_join(resolved)} of {aws.region}"))
        return resolved
    if cfg.existing_vpc is None:
        return []
    out: list[str] = []
    for i, sid in enumerate(cfg.existing_vpc.private_subnet_ids):
        key = _key(f"existingVpc.privateSubnetIds[{i}]")
        try:
            subnet = aws.subnet(sid)
        except AwsCallError as exc:
            findings.append(Finding(False, key, f"{sid}: {exc}; list a private subnet of {cfg.existing_vpc.vpc_id} in {aws.region}"))
            continue
        zone = str(subnet["AvailabilityZone"])
        if subnet.get("VpcId") != cfg.existing_vpc.vpc_id:
            findings.append(
                Finding(
                    False,
                    key,
                    f"{sid} belongs to {subnet.get('VpcId')}, not existingVpc.vpcId {cfg.existing_vpc.vpc_id}; "
                    "list subnets of that VPC (or fix vpcId)",
                )
            )
            continue
        findings.append(Finding(True, key, f"{sid} is in {zone}"))
        if zone not in out:
            out.append(zone)
    return sorted(out)


def _group_zones(g: _Group, cfg: StackConfig, vpc_zones: list[str], aws: _Aws, findings: list[Finding]) -> list[str]:
    """A group's zones: its availabilityZone, else its subnet's zone, else all of the VPC's zones."""
    zone = g.availability_zone
    if g.subnet_id is not None:
        key = _key(f"{g.label}.subnetId")
        try:
            subnet = aws.subnet(g.subnet_id)
        except AwsCallError as exc:
            findings.append(Finding(False, key, f"{g.subnet_id}: {exc}; give a private subnet id of the VPC in {aws.region}"))
        else:
            subnet_zone = str(subnet["AvailabilityZone"])
            problems = []
            if cfg.existing_vpc is not None and subnet.get("VpcId") != cfg.existing_vpc.vpc_id:
                problems.append(f"it belongs to {subnet.get('VpcId')}, not existingVpc.vpcId {cfg.existing_vpc.vpc_id}")
            if zone is not None and zone != subnet_zone:
                problems.append(
                    f"it is in {subnet_zone} but {g.label}.availabilityZone is {zone}; make them agree "
                    "(or drop availabilityZone)"
                )
            if problems:
                findings.append(Finding(False, key, f"{g.subnet_id}: " + "; ".join(problems)))
            else:
                findings.append(Finding(True, key, f"{g.subnet_id} is in {subnet_zone}"))
            zone = zone or subnet_zone
    if zone is None:
        return list(vpc_zones)
    if g.availability_zone is not None and vpc_zones and g.availability_zone not in vpc_zones:
        where = "network.availabilityZones" if cfg.network is not None else "existingVpc.privateSubnetIds (a subnet there)"
        findings.append(
            Finding(
                False,
                _key(f"{g.label}.availabilityZone"),
                f"{g.availability_zone} is not one of the VPC's zones ({_join(vpc_zones)}), so the group has no "
                f"subnet there; pick one of those zones or add it to {where}",
            )
        )
    return [zone]


def _check_offerings(g: _Group, vpc_zones: list[str], aws: _Aws, findings: list[Finding]) -> None:
    """Check 1: each instance type is offered in each of the group's zones."""
    if not g.zones:
        return
    for itype, key in zip(g.instance_types, g.type_keys):
        try:
            offered = aws.offered_zones(itype)
        except AwsCallError as exc:
            findings.append(Finding(False, key, f"could not check where {itype} is offered ({exc}) {_SKIP_HINT}"))
            continue
        missing = [z for z in g.zones if z not in offered]
        if not missing:
            findings.append(Finding(True, key, f"{itype} is offered in {_join(g.zones)}"))
            continue
        if not offered:
            findings.append(
                Finding(False, key, f"{itype} is not offered in any zone of {aws.region}; choose another instance type or region")
            )
            continue
        in_vpc = [z for z in offered if z in vpc_zones]
        if g.label == "systemNodeGroup":
            fix = "choose a type offered in every zone, or pick the VPC's zones among those (network.availabilityZones)"
        elif len(g.zones) > 1:
            fix = (
                f"pin the group to one of them with {g.label}.availabilityZone"
                + (f" ({_join(in_vpc)} are in the VPC)" if in_vpc else ", and add it to network.availabilityZones")
                + ", or choose another instance type"
            )
        else:
            fix = f"set {g.label}.availabilityZone (or subnetId) to one of those zones, or choose another instance type"
        findings.append(
            Finding(
                False,
                key,
                f"{itype} is not offered in {_join(missing)} (the group's zones: {_join(g.zones)}); "
                f"it is offered in {_join(offered)} of {aws.region}: pick one of {_join(offered)} ({fix})",
            )
        )


def _check_efa(g: _Group, cfg: StackConfig, aws: _Aws, findings: list[Finding]) -> None:
    """Check 4: EFA-enabled groups' types support EFA with the catalog's interface count."""
    if g.label == "systemNodeGroup":
        return
    group = cfg.node_groups[g.label.split(".", 1)[1]]
    for itype, key in zip(g.instance_types, g.type_keys):
        facts: InstanceType = cfg.instance(itype)
        if not group.efa_enabled(facts):
            continue
        from_stack = any(s.startswith("stack config") for s in facts.sources)
        fix_where = (
            f"fix {_key(f'instanceFacts.{itype}.maxEfaInterfaces')}"
            if from_stack
            else "fix max_efa_interfaces in components/catalog.py (with its source)"
        )
        try:
            info = aws.instance_type(itype)
        except AwsCallError as exc:
            findings.append(Finding(False, key, f"could not check EFA support of {itype} ({exc}) {_SKIP_HINT}"))
            continue
        net = info.get("NetworkInfo", {})
        supported = bool(net.get("EfaSupported"))
        api_max = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
        if not supported:
            if group.efa is True:
                findings.append(
                    Finding(
                        False,
                        _key(f"{g.label}.efa"),
                        f"efa is true but EC2 says {itype} does not support EFA; set efa: false or choose an "
                        "EFA-capable type (p4d.24xlarge, p5.48xlarge, ...)",
                    )
                )
            else:
                findings.append(
                    Finding(
                        False,
                        key,
                        f"the catalog gives {itype} {facts.max_efa_interfaces} EFA interface(s) but EC2 says it does "
                        f"not support EFA; {fix_where}, or set {g.label}.efa: false",
                    )
                )
        elif api_max != facts.max_efa_interfaces:
            findings.append(
                Finding(
                    False,
                    key,
                    f"EFA interfaces of {itype}: EC2 says MaximumEfaInterfaces {api_max}, the catalog says "
                    f"{facts.max_efa_interfaces} (the launch template is sized from the catalog); {fix_where} to {api_max}",
                )
            )
        else:
            findings.append(Finding(True, key, f"{itype} supports EFA with {api_max} interface(s), as the catalog says"))


def _fmt_time(value: Any) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return str(value)


def _check_reservation(g: _Group, vpc_zones: list[str], aws: _Aws, findings: list[Finding]) -> None:
    """Check 3: the group's capacity reservation exists, is active and matches the group."""
    key = _key(f"{g.label}.capacityReservationId")
    rid = g.capacity_reservation_id
    if rid is None:
        if g.capacity_type == "CAPACITY_BLOCK":
            findings.append(
                Finding(False, key, "capacityType CAPACITY_BLOCK needs the Capacity Block's id (cr-...); set capacityReservationId")
            )
        return
    if g.capacity_type == "SPOT":
        findings.append(
            Finding(False, key, "capacity reservations do not apply to SPOT groups; set capacityType ON_DEMAND or remove the id")
        )
        return
    try:
        res = aws.capacity_reservation(rid)
    except AwsCallError as exc:
        findings.append(Finding(False, key, f"could not look up {rid} ({exc}) {_SKIP_HINT}"))
        return
    if res is None:
        findings.append(
            Finding(False, key, f"{rid} does not exist in {aws.region} (for this account); check the id and aws:region")
        )
        return
    problems: list[str] = []
    state = str(res.get("State", "unknown"))
    rtype = str(res.get("ReservationType") or "default")
    itype = str(res.get("InstanceType"))
    zone = str(res.get("AvailabilityZone"))
    total = int(res.get("TotalInstanceCount") or 0)
    if state == "scheduled":
        problems.append(
            f"it is scheduled and starts at {_fmt_time(res.get('StartDate'))}; deploy the group after that time"
        )
    elif state != "active":
        problems.append(f"its state is {state}, not active; use an active reservation")
    if g.capacity_type == "CAPACITY_BLOCK" and rtype != "capacity-block":
        problems.append(
            f"it is an On-Demand Capacity Reservation (ReservationType {rtype}), not a Capacity Block; "
            "set capacityType: ON_DEMAND or give a Capacity Block id"
        )
    if g.capacity_type == "ON_DEMAND" and rtype == "capacity-block":
        problems.append("it is a Capacity Block; set capacityType: CAPACITY_BLOCK")
    if itype not in g.instance_types:
        problems.append(
            f"it reserves {itype} but the group runs {_join(g.instance_types)}; set instanceTypes: [{itype}] "
            "or give a reservation for that type"
        )
    if g.zones != [zone]:
        fix = f"set {g.label}.availabilityZone: {zone}"
        if vpc_zones and zone not in vpc_zones:
            fix += " and add it to the VPC (network.availabilityZones, or a private subnet there)"
        problems.append(f"it is in {zone} but the group runs in {_join(g.zones)}; {fix}")
    if g.capacity_type == "CAPACITY_BLOCK" and total and g.max_size > total:
        problems.append(f"the block holds {total} instance(s) but maxSize is {g.max_size}; lower maxSize to {total}")
    if problems:
        findings.append(Finding(False, key, f"{rid}: " + "; ".join(problems)))
    else:
        kind = "Capacity Block" if rtype == "capacity-block" else "On-Demand Capacity Reservation"
        end = f", ends {_fmt_time(res['EndDate'])}" if res.get("EndDate") else ""
        findings.append(Finding(True, key, f"{rid}: active {kind} for {total} x {itype} in {zone}{end}"))


def _check_quotas(groups: list[_Group], cfg: StackConfig, aws: _Aws, findings: list[Finding]) -> None:
    """Check 2: vCPU quota per class and market covers the sum of maxSize x vCPUs."""
    # (class, market) -> [(vcpus, key, description)]
    needs: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
    for g in groups:
        if g.capacity_type == "CAPACITY_BLOCK":
            continue  # prepaid reservation: not counted against the On-Demand or Spot quota
        market = "Spot" if g.capacity_type == "SPOT" else "On-Demand"
        per_class: dict[str, InstanceType] = {}
        for itype in g.instance_types:
            facts = cfg.instance(itype)
            cls = quota_class(itype)
            if cls not in per_class or facts.vcpus > per_class[cls].vcpus:
                per_class[cls] = facts
        for cls, facts in per_class.items():
            vcpus = g.max_size * facts.vcpus
            desc = f"{g.label}: maxSize {g.max_size} x {facts.name} ({facts.vcpus} vCPUs) = {vcpus}"
            needs.setdefault((cls, market), []).append((vcpus, _key(f"{g.label}.maxSize"), desc))
    for (cls, market), parts in sorted(needs.items()):
        codes = VCPU_QUOTAS.get(cls)
        if codes is None:  # pragma: no cover - quota_class only returns known classes
            continue
        code = codes[0] if market == "On-Demand" else codes[1]
        needed = sum(p[0] for p in parts)
        key = max(parts, key=lambda p: p[0])[1]
        breakdown = " + ".join(p[2] for p in parts)
        try:
            value, name, source = aws.quota(code)
        except AwsCallError as exc:
            findings.append(
                Finding(
                    False,
                    key,
                    f"could not read the {cls} {market} vCPU quota {code} ({QUOTA_NAMES.get(code, code)}) needed for "
                    f"{needed} vCPUs ({exc}); check it in the Service Quotas console (the caller needs "
                    f"servicequotas:GetServiceQuota) {_SKIP_HINT}",
                )
            )
            continue
        if value >= needed:
            findings.append(
                Finding(
                    True,
                    key,
                    f"{cls} {market} vCPU quota {code} ({name}) is {_num(value)} ({source}); the stack needs up to "
                    f"{needed} ({breakdown})",
                )
            )
        else:
            findings.append(
                Finding(
                    False,
                    key,
                    f"{cls} {market} vCPU quota {code} ({name}) is {_num(value)} ({source}) but the stack needs up to "
                    f"{needed} vCPUs ({breakdown}); request an increase to at least {needed} vCPUs: "
                    f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
                    f"--desired-value {needed} --region {aws.region} (or lower maxSize; instances already running "
                    "in the account count against the quota too)",
                )
            )


def _efa_only_groups(cfg: StackConfig) -> list[tuple[str, str]]:
    """(group config key, instance type) of EFA groups whose launch template has efa-only interfaces."""
    out = []
    for name, g in cfg.node_groups.items():
        for itype in g.instance_types:
            if g.efa_only_interfaces(cfg.instance(itype)):
                out.append((f"nodeGroups.{name}", itype))
                break
    return out


def _addon_version_order(version: str) -> tuple[tuple[int, ...], int]:
    """Sort key of EKS add-on versions: ``v1.20.1-eksbuild.3`` -> ``((1, 20, 1), 3)``."""
    build = re.search(r"eksbuild\.(\d+)", version)
    return version_tuple(version), int(build.group(1)) if build else 0


def _check_vpc_cni(cfg: StackConfig, aws: _Aws, findings: list[Finding]) -> None:
    """Check 5: the cluster's vpc-cni version supports efa-only interfaces (when a group has them)."""
    groups = _efa_only_groups(cfg)
    if not groups:
        return
    k8s = cfg.cluster.kubernetes_version
    minimum = EFA_ONLY_MIN_VPC_CNI_TEXT
    pinned = cfg.cluster.addon_versions.get("vpc-cni")
    key = _key("cluster.addonVersions.vpc-cni")
    who = ", ".join(f"{label} ({itype})" for label, itype in groups)
    try:
        offered = aws.addon_versions("vpc-cni", k8s)
    except AwsCallError as exc:
        findings.append(
            Finding(False, key, f"could not read the vpc-cni versions EKS offers for Kubernetes {k8s} ({exc}); efa-only "
                    f"interfaces of {who} need vpc-cni >= {minimum} {_SKIP_HINT}")
        )
        return
    if not offered:
        findings.append(Finding(False, _key("cluster.kubernetesVersion"), f"EKS offers no vpc-cni version for Kubernetes "
                                f"{k8s} in {aws.region}; choose a Kubernetes version EKS supports there"))
        return
    new_enough = sorted((v for v, _ in offered if version_tuple(v) >= EFA_ONLY_MIN_VPC_CNI), key=_addon_version_order)
    advice = (
        f"pin {key} to {new_enough[-1]} (the newest EKS offers for Kubernetes {k8s})"
        if new_enough
        else f"EKS offers no vpc-cni >= {minimum} for Kubernetes {k8s}: choose a newer cluster.kubernetesVersion"
    )
    if pinned is not None:
        if pinned in {v for v, _ in offered}:
            findings.append(Finding(True, key, f"vpc-cni {pinned} is offered for Kubernetes {k8s} (efa-only interfaces "
                                               f"of {who} need >= {minimum})"))
        else:
            findings.append(Finding(False, key, f"vpc-cni {pinned} is not offered by EKS for Kubernetes {k8s}; {advice}"))
        return
    defaults = [v for v, is_default in offered if is_default]
    if not defaults:
        findings.append(Finding(False, key, f"EKS names no default vpc-cni version for Kubernetes {k8s}, so the version "
                                            f"the cluster gets is unknown; efa-only interfaces of {who} need >= "
                                            f"{minimum}: {advice}"))
    elif version_tuple(defaults[0]) < EFA_ONLY_MIN_VPC_CNI:
        findings.append(Finding(False, key, f"without a pin the cluster gets EKS's default vpc-cni for Kubernetes {k8s}, "
                                            f"{defaults[0]}, older than the {minimum} that efa-only interfaces of {who} "
                                            f"need; {advice}"))
    else:
        findings.append(Finding(True, key, f"EKS's default vpc-cni for Kubernetes {k8s} is {defaults[0]} (efa-only "
                                           f"interfaces of {who} need >= {minimum})"))


def check(
    cfg: StackConfig,
    zones: Optional[Sequence[str]],
    session: Optional[boto3.session.Session] = None,
) -> list[Finding]:
    """Run the preflight checks; raise :class:`PreflightError` when any fails, else return the findings.

    The program calls this before registering any resource when ``preflight.enabled`` is true.
    """
    findings = run_preflight(cfg, zones, session)
    if any(not f.ok for f in findings):
        raise PreflightError(findings)
    return findings


def format_report(findings: Sequence[Finding]) -> str:
    """One line per finding (``OK`` or ``FAIL``, key, message) and a summary line."""
    lines = [f"{'OK  ' if f.ok else 'FAIL'} {f.key}: {f.message}" for f in findings]
    failed = sum(1 for f in findings if not f.ok)
    if failed:
        lines.append(f"preflight: {failed} of {len(findings)} check(s) FAILED; fix them before `pulumi up`")
    else:
        lines.append(f"preflight: all {len(findings)} check(s) passed")
    return "\n".join(lines)


def _project_name(stack_file: Path) -> str:
    project_file = stack_file.parent / "Pulumi.yaml"
    if project_file.exists():
        data = yaml.safe_load(project_file.read_text()) or {}
        if isinstance(data, dict) and data.get("name"):
            return str(data["name"])
    return NAMESPACE


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m stacks.preflight --stack NAME [--region R] [--stack-file PATH]``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m stacks.preflight",
        description="Check the AWS account can run a stack (offerings, vCPU quotas, capacity reservations, EFA) "
        "before `pulumi up`. Exit 0: all passed, 1: a check failed, 2: configuration error.",
    )
    parser.add_argument("--stack", required=True, help="stack name (reads Pulumi.<stack>.yaml)")
    parser.add_argument("--region", help="AWS region (default: the stack's aws:region, else the AWS profile's)")
    parser.add_argument("--stack-file", type=Path, help="stack file to read (default: Pulumi.<stack>.yaml in the repo)")
    args = parser.parse_args(argv)

    stack_file: Path = args.stack_file or REPO / f"Pulumi.{args.stack}.yaml"
    try:
        data = yaml.safe_load(stack_file.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        print(f"error: cannot read {stack_file}: {exc}", file=sys.stderr)
        return 2
    config = dict((data.get("config") or {}) if isinstance(data, dict) else {})
    if args.region:
        config["aws:region"] = args.region
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}, [])

    session = boto3.session.Session(region_name=config.get("aws:region") if isinstance(config.get("aws:region"), str) else None)
    region = _region(session)
    if region is None:
        print("error: no AWS region: set aws:region in the stack file, pass --region, or set AWS_REGION", file=sys.stderr)
        return 2
    try:
        available = available_zones(session, region)
    except AwsCallError as exc:
        print(f"error: cannot reach EC2 in {region}: {exc}", file=sys.stderr)
        return 1
    try:
        cfg = load_config(_project_name(stack_file), args.stack)
        zones = resolve_zones(cfg, available) if cfg.network is not None else None
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    findings = run_preflight(cfg, zones, session)
    print(f"preflight for stack {args.stack} in {region}:")
    print(format_report(findings))
    return 1 if any(not f.ok for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
