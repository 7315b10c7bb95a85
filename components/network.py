"""``TrainingVpc``: a VPC laid out for EKS across several availability zones.

Public subnets hold only the NAT gateway(s) and internet-facing load balancers; nodes go in the
private subnets. Subnets carry the tags EKS and the AWS Load Balancer Controller look for.
"""

from typing import Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired


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

    def __init__(self, name: str, args: TrainingVpcArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:TrainingVpc", name, None, opts)
        azs = list(args["availability_zones"])
        private_cidrs = list(args["private_subnet_cidrs"])
        public_cidrs = list(args["public_subnet_cidrs"])
        if len(azs) < 2 or len(private_cidrs) != len(azs) or len(public_cidrs) != len(azs):
            raise ValueError("TrainingVpc needs >= 2 zones and exactly one private and one public CIDR per zone")
        cluster_tag = f"kubernetes.io/cluster/{args['cluster_name']}"
        base_tags: dict[str, str] = dict(args.get("tags") or {})  # type: ignore[arg-type]
        per_az_nat = bool(args.get("nat_gateway_per_az", False))
        child = pulumi.ResourceOptions(parent=self)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args["cidr_block"],
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

        public_subnets: list[aws.ec2.Subnet] = []
        private_subnets: list[aws.ec2.Subnet] = []
        for i, az in enumerate(azs):
            public_subnets.append(
                aws.ec2.Subnet(
                    f"{name}-public-{az}",
                    vpc_id=vpc.id,
                    availability_zone=az,
                    cidr_block=public_cidrs[i],
                    map_public_ip_on_launch=False,
                    tags={
                        **base_tags,
                        "Name": f"{name}-public-{az}",
                        "kubernetes.io/role/elb": "1",
                        cluster_tag: "shared",
                        "eks-training/tier": "public",
                    },
                    opts=child,
                )
            )
            private_subnets.append(
                aws.ec2.Subnet(
                    f"{name}-private-{az}",
                    vpc_id=vpc.id,
                    availability_zone=az,
                    cidr_block=private_cidrs[i],
                    map_public_ip_on_launch=False,
                    tags={
                        **base_tags,
                        "Name": f"{name}-private-{az}",
                        "kubernetes.io/role/internal-elb": "1",
                        cluster_tag: "shared",
                        "eks-training/tier": "private",
                    },
                    opts=child,
                )
            )

        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**base_tags, "Name": f"{name}-public-rt"},
            opts=child,
        )
        for az, subnet in zip(azs, public_subnets):
            aws.ec2.RouteTableAssociation(
                f"{name}-public-rta-{az}", subnet_id=subnet.id, route_table_id=public_rt.id, opts=child
            )

        nat_azs = azs if per_az_nat else azs[:1]
        nats: dict[str, aws.ec2.NatGateway] = {}
        for az, subnet in zip(azs, public_subnets):
            if az not in nat_azs:
                continue
            eip = aws.ec2.Eip(
                f"{name}-nat-eip-{az}", domain="vpc", tags={**base_tags, "Name": f"{name}-nat-{az}"}, opts=child
            )
            nats[az] = aws.ec2.NatGateway(
                f"{name}-nat-{az}",
                allocation_id=eip.id,
                subnet_id=subnet.id,
                connectivity_type="public",
                tags={**base_tags, "Name": f"{name}-nat-{az}"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )

        private_rts: list[aws.ec2.RouteTable] = []
        for az, subnet in zip(azs, private_subnets):
            nat = nats[az] if per_az_nat else nats[azs[0]]
            rt = aws.ec2.RouteTable(
                f"{name}-private-rt-{az}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags={**base_tags, "Name": f"{name}-private-rt-{az}"},
                opts=child,
            )
            private_rts.append(rt)
            aws.ec2.RouteTableAssociation(
                f"{name}-private-rta-{az}", subnet_id=subnet.id, route_table_id=rt.id, opts=child
            )

        # Free S3 gateway endpoint: dataset downloads and ECR image layers (served from S3) skip the NAT.
        region = aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=self))
        aws.ec2.VpcEndpoint(
            f"{name}-s3-endpoint",
            vpc_id=vpc.id,
            service_name=region.region.apply(lambda r: f"com.amazonaws.{r}.s3"),
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_rts],
            tags={**base_tags, "Name": f"{name}-s3"},
            opts=child,
        )

        self.vpc_id = vpc.id
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public_subnets])
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private_subnets])
        self.private_subnet_id_list = [s.id for s in private_subnets]
        self.availability_zones = pulumi.Output.from_input(azs)
        self.nat_gateway_ids = pulumi.Output.all(*[n.id for n in nats.values()])
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "public_subnet_ids": self.public_subnet_ids,
                "private_subnet_ids": self.private_subnet_ids,
                "availability_zones": self.availability_zones,
                "nat_gateway_ids": self.nat_gateway_ids,
            }
        )
