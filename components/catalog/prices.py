"""Prices of the fixed parts of an environment (us-east-1, USD)."""

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True, kw_only=True)
class Price:
    """One list price."""

    usd: float
    unit: str
    """``hour``, ``GB-month`` or ``month``."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""


#: The day the instances' On-Demand prices (:mod:`components.catalog.instances`, source ``ec2-on-demand-prices``)
#: were read from AWS's price list; prices change, so the plan prints it.
PRICES_AS_OF = "2026-07-20"
#: The day the EKS cluster-hour prices below (standard and extended support, source ``eks-pricing``) were read.
EKS_PRICES_AS_OF = "2026-11-28"

SERVICE_PRICES: Mapping[str, Price] = {
    "eks-cluster": Price(usd=0.10, unit="hour", source="eks-pricing"),
    "eks-cluster-extended": Price(usd=0.60, unit="hour", source="eks-pricing"),
    "nat-gateway": Price(usd=0.045, unit="hour", source="vpc-pricing"),
    "public-ipv4": Price(usd=0.005, unit="hour", source="vpc-pricing"),
    "ebs-gp3": Price(usd=0.08, unit="GB-month", source="ebs-pricing"),
    "kms-key": Price(usd=1.0, unit="month", source="kms-pricing"),
}
HOURS_PER_MONTH = 730

#: FSx for Lustre PERSISTENT_2 SSD storage per GB-month of provisioned capacity, by per-unit throughput
#: (MB/s/TiB), us-east-1 (source key ``fsx-lustre-pricing``; the 125 MB/s/TiB rate is cross-checked by
#: ``fsx-lustre-price-125``). The throughput is included in the storage price; AUTOMATIC metadata is
#: included, USER_PROVISIONED metadata IOPS are billed on top (not in the estimate).
FSX_LUSTRE_PRICES: Mapping[int, Price] = {
    125: Price(usd=0.145, unit="GB-month", source="fsx-lustre-pricing"),
    250: Price(usd=0.210, unit="GB-month", source="fsx-lustre-pricing"),
    500: Price(usd=0.340, unit="GB-month", source="fsx-lustre-pricing"),
    1000: Price(usd=0.600, unit="GB-month", source="fsx-lustre-pricing"),
}


@dataclass(frozen=True, kw_only=True)
class Discount:
    """A share taken off a list price."""

    fraction: float
    """0.5: half the list price is taken off."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""


#: What the cost estimate takes off the On-Demand price of a SPOT group when the group does not set
#: ``spotDiscount``: an assumption, not a quote. Spot prices move with supply and demand per type and zone
#: (``ec2-spot-pricing``, "up to 90%" off); AWS's worked example of us-east-1 Spot prices shows 44-62% off
#: On-Demand (``ec2-spot-example-prices``); the Spot Instance Advisor gives each type's recent average
#: (``ec2-spot-advisor``), which is what to set ``spotDiscount`` from. Preflight reports the current price.
DEFAULT_SPOT_DISCOUNT = Discount(fraction=0.5, source="ec2-spot-example-prices")
#: The largest discount AWS states for Spot (``ec2-spot-pricing``): a spotDiscount above it is a mistake.
MAX_SPOT_DISCOUNT = Discount(fraction=0.9, source="ec2-spot-pricing")
