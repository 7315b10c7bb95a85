"""Hourly cost estimate of a stack (us-east-1 On-Demand list prices from the catalog), read from the plan.

Counts the EKS control plane (at the extended-support price when the stack opts in), NAT gateways and their
public IPv4 addresses, the secrets KMS key, EC2 instances and their gp3 root volumes, and an FSx for Lustre file
system (its provisioned capacity at its throughput tier's price: billed whether or not a job runs, so in "running"
and "idle" alike); excludes what depends on usage (data transfer, NAT data processing, EFS storage and throughput
(EFS is billed by the GB stored and, with Elastic throughput, by the GB read and written), S3 storage and requests,
ECR storage, CloudWatch logs, CodeBuild minutes, KMS requests, user-provisioned FSx metadata IOPS). "Running" uses
the desired sizes, "idle" the minimum sizes. Spot groups are priced at On-Demand (an upper bound).
"""

from dataclasses import dataclass
from typing import Optional

from components.catalog import FSX_LUSTRE_PRICES, HOURS_PER_MONTH, SERVICE_PRICES
from components.scheduling import SYSTEM_ROLE
from stacks.plan import JobPlan, NodeGroupPlan, Plan


@dataclass(frozen=True)
class CostEstimate:
    """USD per hour; ``None`` when an instance type has no known price."""

    running: Optional[float]
    idle: Optional[float]
    storage: float = 0.0
    """The shared file system's fixed part (FSx capacity; 0 for EFS, billed by use), included in both."""


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
    return f"FSx {fsx.storage_capacity_gib} GiB at {fsx.throughput_per_tib} MB/s/TiB{efa}, ${storage_hourly(plan):.3f}/h"


def node_hourly(g: NodeGroupPlan) -> Optional[float]:
    """USD per hour of one node of the group: its instance type and its gp3 root volume (``None``: no price)."""
    price = g.types[0].price_per_hour
    return None if price is None else price + g.disk_size_gib * SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH


def job_hourly(job: JobPlan) -> Optional[float]:
    """USD per hour of the nodes a job holds while it runs (one per pod, whole nodes): what an experiment of a
    benchmark costs per hour of its run (the environment's fixed costs, shared by all jobs, are not in it). A job on
    the system group runs on nodes that exist anyway: 0."""
    if job.group.name == SYSTEM_ROLE:
        return 0.0
    hour = node_hourly(job.group)
    return None if hour is None else round(job.nodes * hour, 4)


def estimate(plan: Plan) -> CostEstimate:
    """The stack's hourly cost when running (desired sizes) and idle (minimum sizes)."""
    cfg = plan.config
    control_plane = "eks-cluster-extended" if cfg.cluster.support_type == "EXTENDED" else "eks-cluster"
    storage = storage_hourly(plan)
    fixed = _hourly(control_plane) + _hourly("kms-key") + storage
    if cfg.network is not None:
        nats = cfg.network.zone_count if cfg.network.nat_gateways == "perAz" else 1
        fixed += (_hourly("nat-gateway") + _hourly("public-ipv4")) * nats

    def nodes(attr: str) -> Optional[float]:
        total = 0.0
        for g in plan.all_groups:
            hour = node_hourly(g)
            if hour is None:
                return None
            total += hour * getattr(g, attr)
        return total

    running, idle = nodes("desired_size"), nodes("min_size")
    return CostEstimate(
        running=None if running is None else round(fixed + running, 3),
        idle=None if idle is None else round(fixed + idle, 3),
        storage=round(storage, 3),
    )
