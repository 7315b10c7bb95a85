"""``TrainingVpc``: a VPC laid out for EKS across several availability zones.

Public subnets hold only the NAT gateway(s) and internet-facing load balancers; nodes go in the
private subnets. Subnets carry the tags EKS and the AWS Load Balancer Controller look for.
"""

import ipaddress
from dataclasses import dataclass
from typing import Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import ANYWHERE_IPV4


class TrainingVpcArgs(TypedDict):
    """Inputs of :class:`TrainingVpc`. Zone names and CIDRs are plain values: they decide how many
    subnets exist, so they must be known when the program runs."""

    cluster_name: str
    """Name of the EKS cluster that will use the subnets (for the ``kubernetes.io/cluster/<name>`` tag)."""
    cidr_block: str
    """The VPC's IPv4 block, e.g. ``10.0.0.0/16``."""
    availability_zones: Sequence[str]
    """Zone names, one public and one private subnet each (at least 2)."""
    private_subnet_cidrs: Sequence[str]
    """One CIDR per zone, in zone order."""
    public_subnet_cidrs: Sequence[str]
    """One CIDR per zone, in zone order."""
    nat_gateway_per_az: NotRequired[bool]
    """One NAT gateway per zone (zone-failure tolerant) instead of one shared gateway (cheaper). Default False."""
    tags: NotRequired[pulumi.Input[dict[str, str]]]
    """Tags added to every resource."""


#: The load balancer role tag of each tier's subnets (what the AWS Load Balancer Controller looks for).
_ELB_ROLE_TAGS = {"public": "kubernetes.io/role/elb", "private": "kubernetes.io/role/internal-elb"}


@dataclass(frozen=True)
class _Layout:
    """What the VPC's arguments decide before any resource exists (validated: a bad argument fails here)."""

    azs: list[str]
    private_cidrs: list[str]
    public_cidrs: list[str]
    cluster_tag: str
    tags: dict[str, str]
    per_az_nat: bool

    @property
    def nat_azs(self) -> list[str]:
        """The zones with a NAT gateway: every zone, or the first."""
        return self.azs if self.per_az_nat else self.azs[:1]


def _check_blocks(vpc_cidr: str, subnet_cidrs: list[str]) -> None:
    """Each subnet's block lies inside the VPC's and overlaps no other subnet's, as EC2 requires
    (https://docs.aws.amazon.com/vpc/latest/userguide/subnet-sizing.html): refused here, before the VPC is made, where
    EC2 would refuse the subnet after it."""
    try:
        vpc = ipaddress.IPv4Network(vpc_cidr)
        nets = [ipaddress.IPv4Network(c) for c in subnet_cidrs]
    except ValueError as exc:
        raise ValueError(f"TrainingVpc: {exc}; give IPv4 blocks such as 10.0.0.0/16") from exc
    for n in nets:
        if not n.subnet_of(vpc):
            raise ValueError(f"TrainingVpc: subnet {n} is outside cidr_block {vpc}; use a block inside it")
    for i, a in enumerate(nets):
        for b in nets[i + 1 :]:
            if a.overlaps(b):
                raise ValueError(f"TrainingVpc: subnets {a} and {b} overlap; give each subnet its own block")


def _layout(args: TrainingVpcArgs) -> _Layout:
    """The zones and their CIDRs (at least two zones, one private and one public CIDR each), tags and NAT layout."""
    azs = list(args["availability_zones"])
    private_cidrs = list(args["private_subnet_cidrs"])
    public_cidrs = list(args["public_subnet_cidrs"])
    if len(azs) < 2 or len(private_cidrs) != len(azs) or len(public_cidrs) != len(azs):
        raise ValueError("TrainingVpc needs >= 2 zones and exactly one private and one public CIDR per zone")
    _check_blocks(args["cidr_block"], [*private_cidrs, *public_cidrs])
    return _Layout(
        azs=azs,
        private_cidrs=private_cidrs,
        public_cidrs=public_cidrs,
        cluster_tag=f"kubernetes.io/cluster/{args['cluster_name']}",
        tags=dict(args.get("tags") or {}),  # type: ignore[arg-type]
        per_az_nat=bool(args.get("nat_gateway_per_az", False)),
    )


class TrainingVpc(pulumi.ComponentResource):
    """VPC, internet gateway, public and private subnets per zone, NAT, route tables, an S3 gateway
    endpoint, and a locked-down default security group."""

    vpc_id: pulumi.Output[str]
    """The VPC id."""
    public_subnet_ids: pulumi.Output[list[str]]
    """Public subnet ids, in zone order."""
    private_subnet_ids: pulumi.Output[list[str]]
    """Private subnet ids, in zone order (nodes, EFS mount targets)."""
    availability_zones: pulumi.Output[list[str]]
    """The zones used, in the same order as the subnet lists."""
    nat_gateway_ids: pulumi.Output[list[str]]
    """NAT gateway ids (one, or one per zone)."""
    private_subnet_id_list: list[pulumi.Output[str]]
    """The private subnet ids one Output each (in zone order), for per-subnet children such as mount targets."""

    @checks_args
    def __init__(self, name: str, args: TrainingVpcArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        layout = _layout(args)  # its refusals come before anything registers
        super().__init__("eks-training:index:TrainingVpc", name, None, opts)
        vpc, igw = self._vpc(name, args["cidr_block"], layout)
        public_subnets, private_subnets = self._subnets(name, layout, vpc)
        self._public_routes(name, layout, vpc, igw, public_subnets)
        nats = self._nat_gateways(name, layout, igw, public_subnets)
        private_rts = self._private_routes(name, layout, vpc, nats, private_subnets)
        self._s3_endpoint(name, layout, vpc, private_rts)

        self.vpc_id = vpc.id
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets])
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets])
        self.private_subnet_id_list = [s.id for s in private_subnets]
        self.availability_zones = pulumi.Output.from_input(layout.azs)
        self.nat_gateway_ids = pulumi.Output.all(*[n.id for n in nats.values()])
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "public_subnet_ids": self.public_subnet_ids,
                "private_subnet_ids": self.private_subnet_ids,
                "private_subnet_id_list": self.private_subnet_id_list,
                "availability_zones": self.availability_zones,
                "nat_gateway_ids": self.nat_gateway_ids,
            }
        )

    def _vpc(self, name: str, cidr_block: str, layout: _Layout) -> tuple[aws.ec2.Vpc, aws.ec2.InternetGateway]:
        """The VPC (DNS on), its default security group locked down, and its internet gateway."""
        child = pulumi.ResourceOptions(parent=self)
        base_tags = layout.tags
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=cidr_block,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**base_tags, "Name": f"{name}-vpc"},
            opts=child,
        )
        # CIS: the default security group allows nothing.
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-sg",
            vpc_id=vpc.id,
            tags={**base_tags, "Name": f"{name}-default-sg-locked"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={**base_tags, "Name": f"{name}-igw"}, opts=child
        )
        return vpc, igw

    def _subnets(
        self, name: str, layout: _Layout, vpc: aws.ec2.Vpc
    ) -> tuple[list[aws.ec2.Subnet], list[aws.ec2.Subnet]]:
        """A public and a private subnet per zone (in zone order), tagged for EKS and the load balancer controller."""
        public_subnets: list[aws.ec2.Subnet] = []
        private_subnets: list[aws.ec2.Subnet] = []
        for az, public_cidr, private_cidr in zip(layout.azs, layout.public_cidrs, layout.private_cidrs):
            public_subnets.append(self._subnet(name, layout, vpc, az, public_cidr, "public"))
            private_subnets.append(self._subnet(name, layout, vpc, az, private_cidr, "private"))
        return public_subnets, private_subnets

    def _subnet(self, name: str, layout: _Layout, vpc: aws.ec2.Vpc, az: str, cidr: str, tier: str) -> aws.ec2.Subnet:
        """One subnet of a tier (``public`` or ``private``) in one zone; no public IPs on launch."""
        return aws.ec2.Subnet(
            f"{name}-{tier}-{az}",
            vpc_id=vpc.id,
            availability_zone=az,
            cidr_block=cidr,
            map_public_ip_on_launch=False,
            tags={
                **layout.tags,
                "Name": f"{name}-{tier}-{az}",
                _ELB_ROLE_TAGS[tier]: "1",
                layout.cluster_tag: "shared",
                "eks-training/tier": tier,
            },
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _public_routes(
        self,
        name: str,
        layout: _Layout,
        vpc: aws.ec2.Vpc,
        igw: aws.ec2.InternetGateway,
        public_subnets: list[aws.ec2.Subnet],
    ) -> None:
        """One route table for the public subnets, its default route through the internet gateway."""
        child = pulumi.ResourceOptions(parent=self)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block=ANYWHERE_IPV4, gateway_id=igw.id)],
            tags={**layout.tags, "Name": f"{name}-public-rt"},
            opts=child,
        )
        for az, subnet in zip(layout.azs, public_subnets):
            aws.ec2.RouteTableAssociation(
                f"{name}-public-rta-{az}", subnet_id=subnet.id, route_table_id=public_rt.id, opts=child
            )

    def _nat_gateways(
        self, name: str, layout: _Layout, igw: aws.ec2.InternetGateway, public_subnets: list[aws.ec2.Subnet]
    ) -> dict[str, aws.ec2.NatGateway]:
        """A NAT gateway with its Elastic IP in the public subnet of each NAT zone, by zone."""
        nats: dict[str, aws.ec2.NatGateway] = {}
        for az, subnet in zip(layout.azs, public_subnets):
            if az not in layout.nat_azs:
                continue
            eip = aws.ec2.Eip(
                f"{name}-nat-eip-{az}",
                domain="vpc",
                tags={**layout.tags, "Name": f"{name}-nat-{az}"},
                opts=pulumi.ResourceOptions(parent=self),
            )
            nats[az] = aws.ec2.NatGateway(
                f"{name}-nat-{az}",
                allocation_id=eip.id,
                subnet_id=subnet.id,
                connectivity_type="public",
                tags={**layout.tags, "Name": f"{name}-nat-{az}"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
        return nats

    def _private_routes(
        self,
        name: str,
        layout: _Layout,
        vpc: aws.ec2.Vpc,
        nats: dict[str, aws.ec2.NatGateway],
        private_subnets: list[aws.ec2.Subnet],
    ) -> list[aws.ec2.RouteTable]:
        """A route table per private subnet, its default route through the zone's NAT gateway (or the shared one)."""
        child = pulumi.ResourceOptions(parent=self)
        private_rts: list[aws.ec2.RouteTable] = []
        for az, subnet in zip(layout.azs, private_subnets):
            nat = nats[az] if layout.per_az_nat else nats[layout.azs[0]]
            rt = aws.ec2.RouteTable(
                f"{name}-private-rt-{az}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block=ANYWHERE_IPV4, nat_gateway_id=nat.id)],
                tags={**layout.tags, "Name": f"{name}-private-rt-{az}"},
                opts=child,
            )
            private_rts.append(rt)
            aws.ec2.RouteTableAssociation(
                f"{name}-private-rta-{az}", subnet_id=subnet.id, route_table_id=rt.id, opts=child
            )
        return private_rts

    def _s3_endpoint(self, name: str, layout: _Layout, vpc: aws.ec2.Vpc, private_rts: list[aws.ec2.RouteTable]) -> None:
        """The S3 gateway endpoint on the private route tables."""
        # Free: dataset downloads and ECR image layers (served from S3) skip the NAT.
        region = aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=self))
        aws.ec2.VpcEndpoint(
            f"{name}-s3-endpoint",
            vpc_id=vpc.id,
            service_name=region.region.apply(lambda r: f"com.amazonaws.{r}.s3"),
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_rts],
            tags={**layout.tags, "Name": f"{name}-s3"},
            opts=pulumi.ResourceOptions(parent=self),
        )
