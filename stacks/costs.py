"""Hourly cost estimate of a stack (us-east-1 list prices from the catalog), read from the plan.

Counts the EKS control plane (at the extended-support price once its Kubernetes minor is past EKS standard support on
the plan's day, :func:`control_plane_line`), NAT gateways and their
public IPv4 addresses, the secrets KMS key, EC2 instances and their gp3 root volumes, and an FSx for Lustre file
system (its provisioned capacity at its throughput tier's price: billed whether or not a job runs, so in "running"
and "idle" alike); excludes what depends on usage (data transfer, NAT data processing, EFS storage and throughput
(EFS is billed by the GB stored and, with Elastic throughput, by the GB read and written), S3 storage and requests,
ECR storage, CloudWatch logs, CodeBuild minutes, KMS requests, user-provisioned FSx metadata IOPS). "Running" uses
the desired sizes, "idle" the minimum sizes.

Instances are priced by capacity type: ON_DEMAND at the On-Demand price; SPOT at the On-Demand price less the
group's ``spotDiscount`` (else the catalog's assumed :data:`~components.catalog.DEFAULT_SPOT_DISCOUNT`, labelled as
an assumption: Spot prices move, preflight reports the current one); CAPACITY_BLOCK instances not at all (a Capacity
Block's reservation fee is paid up front when it is reserved), only their root volumes.
"""

from dataclasses import dataclass, field
from datetime import date
from typing import Optional

from components.catalog import DEFAULT_SPOT_DISCOUNT, FSX_LUSTRE_PRICES, HOURS_PER_MONTH, SERVICE_PRICES, SOURCES
from components.catalog.platform import KUBERNETES_VERSIONS, billed_extended
from components.catalog.prices import EKS_PRICES_AS_OF
from components.scheduling import SYSTEM_ROLE
from stacks.config import cluster as cluster_config
from stacks.plan import JobPlan, NodeGroupPlan, Plan, nodes_at_once
from stacks.plan.admission import autoscales


@dataclass(frozen=True)
class CostLine:
    """One part of the estimate, USD per hour; ``None`` when an instance type has no known price."""

    what: str
    running: Optional[float]
    idle: Optional[float]
    basis: str = ""
    """How it is priced (``On-Demand``, ``Spot at 50% off On-Demand (assumed ...)``, ``billed by use`` ...)."""


@dataclass(frozen=True)
class CostEstimate:
    """USD per hour; ``None`` when an instance type has no known price."""

    running: Optional[float]
    idle: Optional[float]
    storage: float = 0.0
    """The shared file system's fixed part (FSx capacity; 0 for EFS, billed by use), included in both."""
    lines: tuple[CostLine, ...] = field(default_factory=tuple)
    """What the totals are made of."""


def _hourly(name: str) -> float:
    price = SERVICE_PRICES[name]
    return price.usd / HOURS_PER_MONTH if price.unit == "month" else price.usd


def storage_hourly(plan: Plan) -> float:
    """USD per hour of the shared file system's provisioned capacity (FSx; EFS has none)."""
    fsx = plan.storage.fsx
    if not plan.storage.is_fsx or fsx is None or plan.config.storage.file_system_id is not None:
        return 0.0  # EFS is billed by use; an adopted file system was counted by the stack that made it
    price = FSX_LUSTRE_PRICES[fsx.throughput_per_tib]
    return fsx.storage_capacity_gib * price.usd / HOURS_PER_MONTH


def storage_summary(plan: Plan) -> str:
    """The shared file system in a few words, as the README's stack table shows it."""
    fsx = plan.storage.fsx
    if not plan.storage.is_fsx or fsx is None:
        return "EFS (billed by use)"
    efa = ", EFA" if fsx.efa else ""
    return (
        f"FSx {fsx.storage_capacity_gib} GiB at {fsx.throughput_per_tib} MB/s/TiB{efa}, ${storage_hourly(plan):.3f}/h"
    )


def instance_basis(g: NodeGroupPlan) -> str:
    """How a group's instances are priced, in words (the plan and the README say the same)."""
    if g.capacity_type == "SPOT":
        pct = f"{g.price_discount * 100:g}%"
        if g.spot_discount_set:
            return f"Spot, estimated at {pct} off On-Demand ({g.path}.spotDiscount)"
        return (
            f"Spot, estimated at {pct} off On-Demand (an assumption, set {g.path}.spotDiscount from "
            f"{SOURCES['ec2-spot-advisor'].url}; preflight reports the current Spot price)"
        )
    if g.capacity_type == "CAPACITY_BLOCK":
        return (
            "Capacity Block: instances paid up front with the block (not in the hourly figures), root volumes counted"
        )
    return "On-Demand" + (f", in reservation {g.capacity_reservation_id}" if g.capacity_reservation_id else "")


def node_hour(g: NodeGroupPlan) -> Optional[float]:
    """USD per hour of one node of the group: its instance (by capacity type) and its gp3 root volume."""
    disk = g.disk_size_gib * SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH
    if g.capacity_type == "CAPACITY_BLOCK":
        return disk
    price = g.types[0].price_per_hour
    return None if price is None else price * (1 - g.price_discount) + disk


def money(value: Optional[float]) -> str:
    """A price per hour as the reports print it, or why there is none."""
    return (
        "unknown (a type has no price: set instanceFacts.<type>.pricePerHour)" if value is None else f"${value:.3f}/h"
    )


def job_hourly(job: JobPlan) -> Optional[float]:
    """USD per hour of the nodes a job holds while it runs (one per pod, whole nodes, priced as the group is: Spot
    at its discount, a Capacity Block's instances prepaid): what an experiment of a benchmark costs per hour of its
    run (the environment's fixed costs, shared by all jobs, are not in it). A job on the system group runs on nodes
    that exist anyway: 0."""
    if job.group.name == SYSTEM_ROLE:
        return 0.0
    hour = node_hour(job.group)
    return None if hour is None else round(job.nodes * hour, 4)


def plan_day() -> date:
    """The day the plan prices the control plane on: the day support windows are judged on
    (:data:`stacks.config.cluster.today`)."""
    return cluster_config.today()


def control_plane_line(minor: str, day: date) -> CostLine:
    """The EKS control plane of a cluster of ``minor`` on ``day``: the extended-support price from the minor's end of
    standard support on (EKS bills it from the start of that day, UTC), the standard price before, and when that
    changes."""
    v = KUBERNETES_VERSIONS[minor]
    standard, extended = SERVICE_PRICES["eks-cluster"].usd, SERVICE_PRICES["eks-cluster-extended"].usd
    prices = f"EKS prices read {EKS_PRICES_AS_OF}"
    if billed_extended(minor, day):
        basis = (
            f"extended support: {minor} left standard support on {v.end_of_standard.isoformat()}, ${extended:.2f} "
            f"instead of ${standard:.2f} per cluster-hour until {v.end_of_extended.isoformat()}; upgrade to end it; "
            f"{prices}"
        )
        return CostLine("EKS control plane", _hourly("eks-cluster-extended"), _hourly("eks-cluster-extended"), basis)
    basis = (
        f"standard support until {v.end_of_standard.isoformat()}, then ${extended:.2f} per cluster-hour (extended "
        f"support) unless upgraded; {prices}"
    )
    return CostLine("EKS control plane", _hourly("eks-cluster"), _hourly("eks-cluster"), basis)


def running_size(plan: Plan, g: NodeGroupPlan) -> int:
    """The nodes a group runs while its jobs run: its desiredSize, or, where the cluster autoscaler grows it, the
    nodes the jobs of one step ask (:func:`~stacks.plan.nodes_at_once`), up to its maxSize."""
    if not autoscales(plan, g):
        return g.desired_size
    return min(g.max_size, max(g.desired_size, nodes_at_once(plan, g)))


def cost_lines(plan: Plan, day: Optional[date] = None) -> list[CostLine]:
    """Every part of the estimate, running (:func:`running_size`) and idle (minimum sizes), on ``day`` (default
    :func:`plan_day`)."""
    cfg = plan.config
    lines = [
        control_plane_line(cfg.cluster.kubernetes_version, day or plan_day()),
        CostLine("KMS key (secrets encryption)", _hourly("kms-key"), _hourly("kms-key"), "per month"),
    ]
    if cfg.network is not None:
        nats = cfg.network.zone_count if cfg.network.nat_gateways == "perAz" else 1
        nat = (_hourly("nat-gateway") + _hourly("public-ipv4")) * nats
        lines.append(
            CostLine(
                f"NAT gateway{'s' if nats > 1 else ''} and public IPv4 ({nats})",
                nat,
                nat,
                "per hour, data processing extra",
            )
        )
    for g in plan.all_groups:
        hour = node_hour(g)
        running = running_size(plan, g)
        lines.append(
            CostLine(
                f"{g.path}: {running} running / {g.min_size} idle x {g.types[0].name} + {g.disk_size_gib} GiB gp3",
                None if hour is None else hour * running,
                None if hour is None else hour * g.min_size,
                instance_basis(g),
            )
        )
    storage = storage_hourly(plan)
    if plan.storage.is_fsx:
        lines.append(CostLine(f"shared storage: {storage_summary(plan)}", storage, storage, "provisioned capacity"))
    else:
        lines.append(
            CostLine("shared storage: EFS", 0.0, 0.0, "billed by use (GB stored, GB read and written): not included")
        )
    return lines


def estimate(plan: Plan, day: Optional[date] = None) -> CostEstimate:
    """The stack's hourly cost when running (desired sizes) and idle (minimum sizes), on ``day`` (default
    :func:`plan_day`)."""
    lines = cost_lines(plan, day)
    running = None if any(c.running is None for c in lines) else sum(c.running or 0.0 for c in lines)
    idle = None if any(c.idle is None for c in lines) else sum(c.idle or 0.0 for c in lines)
    return CostEstimate(
        running=None if running is None else round(running, 3),
        idle=None if idle is None else round(idle, 3),
        storage=round(storage_hourly(plan), 3),
        lines=tuple(lines),
    )


__all__ = [
    "CostEstimate",
    "CostLine",
    "DEFAULT_SPOT_DISCOUNT",
    "control_plane_line",
    "cost_lines",
    "estimate",
    "instance_basis",
    "node_hour",
    "plan_day",
    "storage_hourly",
    "storage_summary",
]
