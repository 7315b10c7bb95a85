"""Hourly cost estimate of a stack (us-east-1 On-Demand list prices from the catalog).

Counts the EKS control plane, NAT gateways and EC2 instances; excludes data transfer, NAT data
processing, EBS volumes, EFS storage and CloudWatch logs (usage-dependent). "Running" uses the
desired sizes, "idle" the minimum sizes. Spot groups are priced at On-Demand (an upper bound).
"""

from dataclasses import dataclass
from typing import Optional

from components.catalog import SERVICE_PRICES
from stacks.config import StackConfig


@dataclass(frozen=True)
class CostEstimate:
    """USD per hour; ``None`` when an instance type has no known price."""

    running: Optional[float]
    idle: Optional[float]


def estimate(cfg: StackConfig) -> CostEstimate:
    """The stack's hourly cost when running (desired sizes) and idle (minimum sizes)."""
    fixed = SERVICE_PRICES["eks-cluster"][0]
    if cfg.network is not None:
        zones = len(cfg.network.availability_zones or []) or cfg.network.availability_zone_count
        fixed += SERVICE_PRICES["nat-gateway"][0] * (zones if cfg.network.nat_gateways == "perAz" else 1)

    def nodes(attr: str) -> Optional[float]:
        total = 0.0
        sys_price = cfg.instance(cfg.system_node_group.instance_type).price_per_hour
        if sys_price is None:
            return None
        total += sys_price * getattr(cfg.system_node_group, attr)
        for g in cfg.node_groups.values():
            price = cfg.instance(g.instance_types[0]).price_per_hour
            if price is None:
                return None
            total += price * getattr(g, attr)
        return total

    running, idle = nodes("desired_size"), nodes("min_size")
    return CostEstimate(
        running=None if running is None else round(fixed + running, 3),
        idle=None if idle is None else round(fixed + idle, 3),
    )
