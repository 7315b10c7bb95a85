"""Network changes a running stack cannot take: a cluster's VPC, or a subnet's address block.

EKS keeps a cluster in the VPC it was made in: ``UpdateClusterConfig`` takes new subnets only from that VPC
(https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html). EC2 replaces a subnet whose block changes
(terraform-provider-aws ``aws_subnet.cidr_block``, ForceNew), and its dependents cannot be replaced beside the old
ones: EFS keeps one mount target per zone (``MountTargetConflict``), a NAT gateway's Elastic IP stays with the old
gateway until it is deleted, and a new block that overlaps the old one is refused (``InvalidSubnet.Conflict``).
Pulumi deletes the old resources only at the end of ``pulumi up``, so the update would fail partway.
"""

from typing import Optional

from stacks.config import StackConfig, key
from stacks.plan import Plan

#: What a refusal offers instead of changing the network in place.
INSTEAD = "to move the stack to another network, deploy it under a new clusterName, or run `pulumi destroy` first"


def network_problems(old: Plan, new: Plan) -> list[str]:
    """Why ``pulumi up`` must not move a running stack from ``old``'s network to ``new``'s, each naming its key. A
    new ``clusterName`` replaces every resource, network included, and a jobs-only stack has no network of its own."""
    a, b = old.config, new.config
    if a.cluster.stack_reference is not None or b.cluster.stack_reference is not None:
        return []
    if a.cluster_name != b.cluster_name:
        return []
    vpc_a, vpc_b = _vpc(a), _vpc(b)
    if vpc_a != vpc_b:
        if a.network is not None and b.network is not None:
            which, vpc_a, vpc_b = "network.vpcCidr", a.network.vpc_cidr, b.network.vpc_cidr
        else:
            which = "existingVpc.vpcId" if a.network is None and b.network is None else "existingVpc"
        return [
            f"{key(which)} {vpc_a} -> {vpc_b}: another VPC, and EKS keeps a cluster in the VPC it was made in: keep "
            f"the cluster's VPC; {INSTEAD}"
        ]
    if a.network is None or b.network is None:
        return []
    problems = []
    for field, old_cidrs, new_cidrs in zip(
        ("privateSubnetCidrs", "publicSubnetCidrs"), a.network.subnet_cidrs(), b.network.subnet_cidrs()
    ):
        for i, (was, now) in enumerate(zip(old_cidrs, new_cidrs)):
            if _zone(a.network.availability_zones, i) != _zone(b.network.availability_zones, i) or was == now:
                continue
            problems.append(
                f"{key(f'network.{field}')}[{i}] {was} -> {now}: EC2 replaces a subnet whose block changes, and a "
                "running stack's subnet has what cannot be replaced beside it (the zone's EFS mount target, a NAT "
                f"gateway's Elastic IP, a block overlapping the old one): keep {was}; {INSTEAD}"
            )
    return problems


def _vpc(cfg: StackConfig) -> str:
    """The VPC a configuration deploys into: a new VPC's block, or an existing VPC's id."""
    if cfg.network is not None:
        return f"a new VPC {cfg.network.vpc_cidr}"
    return cfg.existing_vpc.vpc_id if cfg.existing_vpc is not None else "no VPC"


def _zone(listed: Optional[list[str]], i: int) -> str:
    """The zone of the ``i``-th subnets: its name where the zones are listed, else its place in the region's order."""
    return listed[i] if listed is not None and i < len(listed) else f"zone {i}"
