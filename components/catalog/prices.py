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


SERVICE_PRICES: Mapping[str, Price] = {
    "eks-cluster": Price(usd=0.10, unit="hour", source="eks-pricing"),
    "eks-cluster-extended": Price(usd=0.60, unit="hour", source="eks-extended-support-pricing"),
    "nat-gateway": Price(usd=0.045, unit="hour", source="vpc-pricing"),
    "public-ipv4": Price(usd=0.005, unit="hour", source="vpc-pricing"),
    "ebs-gp3": Price(usd=0.08, unit="GB-month", source="ebs-pricing"),
    "kms-key": Price(usd=1.0, unit="month", source="kms-pricing"),
}
HOURS_PER_MONTH = 730
