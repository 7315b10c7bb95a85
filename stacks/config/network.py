"""Network sections: a new VPC (``network``) or an existing one (``existingVpc``)."""

import ipaddress
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from stacks.config.base import AZ_HINT, AZ_RE, SUBNET_RE, VPC_RE, Model, cidr_problem, ipv4
from stacks.config.errors import check

#: The default subnet layout covers at most this many zones (four quarters of the VPC).
DEFAULT_LAYOUT_MAX_ZONES = 3


def default_private_subnet_cidrs(vpc: ipaddress.IPv4Network, count: int) -> list[str]:
    """Private subnets: the first ``count`` blocks of a quarter of the VPC each (/18 in a /16)."""
    return [str(s) for s in list(vpc.subnets(new_prefix=vpc.prefixlen + 2))[:count]]


def default_public_subnet_cidrs(vpc: ipaddress.IPv4Network, count: int) -> list[str]:
    """Public subnets: small blocks (/22 in a /16) at the start of the VPC's last quarter."""
    last_quarter = list(vpc.subnets(new_prefix=vpc.prefixlen + 2))[-1]
    return [str(s) for s in list(last_quarter.subnets(new_prefix=vpc.prefixlen + 6))[:count]]


class NetworkConfig(Model):
    """A new VPC (key ``network``)."""

    vpc_cidr: str = "10.0.0.0/16"
    """The VPC's IPv4 block, a /16 to /20 (pods take VPC addresses through the VPC CNI)."""
    availability_zone_count: int = Field(default=3, ge=2, le=6)
    """How many zones the VPC spans: the pinned groups' zones plus the region's first zones in name order whose zone
    IDs EKS accepts for control planes (e.g. not use1-az3)."""
    availability_zones: Optional[list[str]] = None
    """The zones, by name (us-east-1a) or zone ID (use1-az1), instead of availabilityZoneCount; at least two must be
    zones EKS accepts for control planes (the control plane uses only those, nodes use all)."""
    nat_gateways: Literal["single", "perAz"] = "single"
    """One NAT gateway for the VPC (cheaper), or one per zone (tolerates a zone's failure)."""
    private_subnet_cidrs: Optional[list[str]] = None
    """One CIDR per zone inside vpcCidr, not overlapping; default a quarter of the VPC each (/18 in a /16)."""
    public_subnet_cidrs: Optional[list[str]] = None
    """One CIDR per zone inside vpcCidr, not overlapping; default /22-sized blocks (in a /16) in the VPC's last
    quarter."""

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr(cls, v: str) -> str:
        why = cidr_problem(v)
        if why:
            raise ValueError(why)
        net = ipaddress.IPv4Network(v)
        if not 16 <= net.prefixlen <= 20:
            raise ValueError(
                f"/{net.prefixlen} is outside /16../20; pods take VPC addresses (VPC CNI), so use a /16 to /20 block"
            )
        return v

    @field_validator("availability_zones")
    @classmethod
    def _zones(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        if v is None:
            return v
        problems = []
        if len(v) < 2:
            problems.append(("", f"EKS needs at least 2 availability zones, got {len(v)}; list 2 or more"))
        if len(set(v)) != len(v):
            problems.append(("", f"duplicate zones in {v}"))
        problems += [(f"[{i}]", f"{az!r} {AZ_HINT}") for i, az in enumerate(v) if not AZ_RE.match(az)]
        check(problems)
        return v

    @property
    def zone_count(self) -> int:
        """How many zones the VPC spans."""
        return len(self.availability_zones) if self.availability_zones is not None else self.availability_zone_count

    def subnet_cidrs(self) -> tuple[list[str], list[str]]:
        """(private, public) subnet CIDRs, one per zone: configured or the default layout."""
        vpc = ipaddress.IPv4Network(self.vpc_cidr)
        private = self.private_subnet_cidrs or default_private_subnet_cidrs(vpc, self.zone_count)
        public = self.public_subnet_cidrs or default_public_subnet_cidrs(vpc, self.zone_count)
        return private, public

    @model_validator(mode="after")
    def _subnets(self) -> "NetworkConfig":
        vpc = ipv4(self.vpc_cidr)
        count = self.zone_count
        problems: list[tuple[str, str]] = []
        if (
            self.availability_zones is not None
            and "availability_zone_count" in self.model_fields_set
            and self.availability_zone_count != count
        ):
            # the same count is harmless (plan --from advises listing the zones a counted VPC has, beside its count)
            problems.append(
                (
                    "availabilityZoneCount",
                    f"{self.availability_zone_count} is not read with @{{availabilityZones}}: the VPC spans the "
                    f"{count} zones listed there; remove availabilityZoneCount, or availabilityZones to have the "
                    "region's first zones",
                )
            )
        nets: list[tuple[str, ipaddress.IPv4Network]] = []
        for field, cidrs, default in (
            ("privateSubnetCidrs", self.private_subnet_cidrs, default_private_subnet_cidrs),
            ("publicSubnetCidrs", self.public_subnet_cidrs, default_public_subnet_cidrs),
        ):
            if cidrs is None:
                if vpc is None:
                    continue
                if count > DEFAULT_LAYOUT_MAX_ZONES:
                    problems.append(
                        (
                            field,
                            f"the default layout covers at most {DEFAULT_LAYOUT_MAX_ZONES} zones; list {count} CIDRs "
                            "explicitly",
                        )
                    )
                else:
                    nets += [(f"{field} (default)", ipaddress.IPv4Network(c)) for c in default(vpc, count)]
                continue
            if len(cidrs) != count:
                problems.append(
                    (field, f"{len(cidrs)} CIDRs for {count} availability zones; give exactly one per zone")
                )
            for i, c in enumerate(cidrs):
                why = cidr_problem(c)
                if why:
                    problems.append((f"{field}[{i}]", why))
                    continue
                n = ipaddress.IPv4Network(c)
                if vpc is not None and not n.subnet_of(vpc):
                    problems.append(
                        (f"{field}[{i}]", f"{c} is outside network.vpcCidr {vpc}; use a block inside the VPC")
                    )
                nets.append((f"{field}[{i}]", n))
        for i, (ka, a) in enumerate(nets):
            for kb, b in nets[i + 1 :]:
                if a.overlaps(b):
                    problems.append((ka, f"{a} overlaps @{{{kb}}} {b}; give each subnet its own block"))
        check(problems)
        return self


class ExistingVpcConfig(Model):
    """An existing VPC to deploy into (key ``existingVpc``); no network is created."""

    vpc_id: str
    """The VPC's id (vpc-...)."""
    private_subnet_ids: list[str]
    """At least two subnet ids in different zones, with NAT egress; the nodes go here."""
    public_subnet_ids: list[str] = Field(default_factory=list)
    """Public subnet ids, given to the EKS cluster with the private ones (for internet-facing load balancers)."""

    @field_validator("vpc_id")
    @classmethod
    def _vpc_id(cls, v: str) -> str:
        if not VPC_RE.match(v):
            raise ValueError(f"{v!r} is not a VPC id (vpc-0123abcd...)")
        return v

    @model_validator(mode="after")
    def _subnets(self) -> "ExistingVpcConfig":
        problems: list[tuple[str, str]] = []
        if len(self.private_subnet_ids) < 2:
            problems.append(
                (
                    "privateSubnetIds",
                    "EKS needs private subnets in at least 2 availability zones; list at least 2 subnet ids "
                    f"(got {len(self.private_subnet_ids)})",
                )
            )
        for field, ids in (("privateSubnetIds", self.private_subnet_ids), ("publicSubnetIds", self.public_subnet_ids)):
            problems += [
                (f"{field}[{i}]", f"{sid!r} is not a subnet id (subnet-0123abcd...)")
                for i, sid in enumerate(ids)
                if not SUBNET_RE.match(sid)
            ]
        dup = set(self.private_subnet_ids) & set(self.public_subnet_ids)
        if dup or len(set(self.private_subnet_ids)) != len(self.private_subnet_ids):
            problems.append(
                (
                    "",
                    "subnet ids must be distinct and not both private and public "
                    f"({', '.join(sorted(dup)) or 'duplicate in privateSubnetIds'})",
                )
            )
        check(problems)
        return self
