"""Hourly cost estimate of a stack (us-east-1 On-Demand list prices from the catalog), read from the plan.

Counts the EKS control plane (at the extended-support price when the stack opts in), NAT gateways and their public IPv4 addresses, the secrets KMS key, EC2
instances and their gp3 root volumes; excludes what depends on usage (data transfer, NAT data
processing, EFS storage, ECR storage, CloudWatch logs, CodeBuild minutes, KMS requests). "Running" uses the
desired sizes, "idle" the minimum sizes. Spot groups are priced at On-Demand (an upper bound).
"""

from dataclasses import dataclass
from typing import Optional

from components.catalog import HOURS_PER_MONTH, SERVICE_PRICES
from stacks.plan import NodeGroupPlan, Plan


@dataclass(frozen=True)
class CostEstimate:
    """USD per hour; ``None`` when an instance type has no known price."""

    running: Optional[float]
    idle: Optional[float]


def _hourly(name: str) -> float:
    price = SERVICE_PRICES[name]
    return price.usd / HOURS_PER_MONTH if price.unit == "month" else price.usd


def estimate(plan: Plan) -> CostEstimate:
    """The stack's hourly cost when running (desired sizes) and idle (minimum sizes)."""
    cfg = plan.config
    control_plane = "eks-cluster-extended" if cfg.cluster.support_type == "EXTENDED" else "eks-cluster"
    fixed = _hourly(control_plane) + _hourly("kms-key")
    if cfg.network is not None:
        nats = cfg.network.zone_count if cfg.network.nat_gateways == "perAz" else 1
        fixed += (_hourly("nat-gateway") + _hourly("public-ipv4")) * nats
    disk_hour = SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH

    def node_hour(g: NodeGroupPlan) -> Optional[float]:
        price = g.types[0].price_per_hour
        return None if price is None else price + g.disk_size_gib * disk_hour

    def nodes(attr: str) -> Optional[float]:
        total = 0.0
        for g in plan.all_groups:
            hour = node_hour(g)
            if hour is None:
                return None
            total += hour * getattr(g, attr)
        return total

    running, idle = nodes("desired_size"), nodes("min_size")
    return CostEstimate(
        running=None if running is None else round(fixed + running, 3),
        idle=None if idle is None else round(fixed + idle, 3),
    )
