"""Hourly cost estimate of a stack (us-east-1 On-Demand list prices from the catalog).

Counts the EKS control plane, NAT gateways and their public IPv4 addresses, the secrets KMS key, EC2
instances and their gp3 root volumes; excludes what depends on usage (data transfer, NAT data
processing, EFS storage, ECR storage, CloudWatch logs, CodeBuild minutes, KMS requests). "Running" uses the
desired sizes, "idle" the minimum sizes. Spot groups are priced at On-Demand (an upper bound).
"""

from dataclasses import dataclass
from typing import Optional

from components.catalog import HOURS_PER_MONTH, SERVICE_PRICES
from stacks.config import StackConfig


@dataclass(frozen=True)
class CostEstimate:
    """USD per hour; ``None`` when an instance type has no known price."""

    running: Optional[float]
    idle: Optional[float]


def estimate(cfg: StackConfig) -> CostEstimate:
    """The stack's hourly cost when running (desired sizes) and idle (minimum sizes)."""
    price = {k: v[0] for k, v in SERVICE_PRICES.items()}
    fixed = price["eks-cluster"] + price["kms-key-month"] / HOURS_PER_MONTH
    if cfg.network is not None:
        zones = len(cfg.network.availability_zones or []) or cfg.network.availability_zone_count
        nats = zones if cfg.network.nat_gateways == "perAz" else 1
        fixed += (price["nat-gateway"] + price["public-ipv4"]) * nats
    disk_hour = price["ebs-gp3-gb-month"] / HOURS_PER_MONTH

    def nodes(attr: str) -> Optional[float]:
        sys_price = cfg.instance(cfg.system_node_group.instance_type).price_per_hour
        if sys_price is None:
            return None
        total = (sys_price + cfg.system_node_group.disk_size_gib * disk_hour) * getattr(cfg.system_node_group, attr)
        for g in cfg.node_groups.values():
            node_price = cfg.instance(g.instance_types[0]).price_per_hour
            if node_price is None:
                return None
            total += (node_price + g.disk_size_gib * disk_hour) * getattr(g, attr)
        return total

    running, idle = nodes("desired_size"), nodes("min_size")
    return CostEstimate(
        running=None if running is None else round(fixed + running, 3),
        idle=None if idle is None else round(fixed + idle, 3),
    )
