"""EC2 instance topology: which instance types' nodes carry the network-topology labels, and how many layers.

The AWS network is a hierarchy of layers; ``DescribeInstanceTopology`` returns, per instance, its network nodes from the
top layer down to the one the instance connects to: 3 for most supported types, 4 for p6-b200 and p6-b300 (source key
``ec2-instance-topology-prerequisites``; the hierarchy: ``ec2-instance-topology``). EKS exposes them as the node labels
``topology.k8s.aws/network-node-layer-1`` (top) .. ``-<n>`` (the node the instance connects to; nodes that share it are
closest) (source key ``eks-ml-workload-topology``). What sets them is the AWS cloud controller manager, which EKS runs
in its control plane: when a node registers it calls ``ec2:DescribeInstanceTopology`` for the instance and labels the
Node with one label per network node, or none when EC2 returns no topology (a type or region not supported) (source key
``cloud-provider-aws-topology-labels``). A node without them is not one Kueue's topology-aware scheduling places pods
on (:mod:`stacks.plan.admission`).
"""

from dataclasses import dataclass
from typing import Mapping, Optional

#: The label of network layer ``n`` (1: the top) is this prefix and ``n`` (source key ``eks-ml-workload-topology``).
NETWORK_NODE_LABEL_PREFIX = "topology.k8s.aws/network-node-layer-"
_SOURCES = ("ec2-instance-topology-prerequisites", "eks-ml-workload-topology", "cloud-provider-aws-topology-labels")


@dataclass(frozen=True, kw_only=True)
class NetworkTopology:
    """How many network layers ``DescribeInstanceTopology`` returns for one instance type."""

    instance_type: str
    layers: int
    sources: tuple[str, ...] = _SOURCES

    @property
    def labels(self) -> tuple[str, ...]:
        """The node labels, top layer first; the last is the lowest layer (the instance's own network node)."""
        return tuple(f"{NETWORK_NODE_LABEL_PREFIX}{n}" for n in range(1, self.layers + 1))


#: The catalogued instance types EC2 returns a topology for (source key ``ec2-instance-topology-prerequisites``:
#: "Returns 3 network nodes": p3dn.24xlarge, p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge,
#: g6e.*; "Returns 4 network nodes": p6-b200.48xlarge). The catalog's other types (p3.2xlarge, p3.16xlarge, g4dn, g5,
#: g6, c5, m5) are not listed there: their nodes carry no such labels.
NETWORK_TOPOLOGY: Mapping[str, NetworkTopology] = {
    t.instance_type: t
    for t in (
        NetworkTopology(instance_type="p3dn.24xlarge", layers=3),
        NetworkTopology(instance_type="p4d.24xlarge", layers=3),
        NetworkTopology(instance_type="p4de.24xlarge", layers=3),
        NetworkTopology(instance_type="p5.48xlarge", layers=3),
        NetworkTopology(instance_type="p5e.48xlarge", layers=3),
        NetworkTopology(instance_type="p5en.48xlarge", layers=3),
        NetworkTopology(instance_type="p6-b200.48xlarge", layers=4),
        NetworkTopology(instance_type="g6e.48xlarge", layers=3),
    )
}

#: The regions where ``DescribeInstanceTopology`` is offered (source key ``ec2-instance-topology-prerequisites``, "AWS
#: Regions"); elsewhere the cloud controller manager gets ``UnsupportedOperation`` and labels nothing.
TOPOLOGY_REGIONS: frozenset[str] = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "af-south-1",
        "ap-southeast-3",
        "ap-east-1",
        "ap-south-2",
        "ap-southeast-4",
        "ap-south-1",
        "ap-northeast-3",
        "ap-northeast-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-northeast-1",
        "ca-central-1",
        "eu-central-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-south-2",
        "eu-north-1",
        "eu-central-2",
        "il-central-1",
        "me-south-1",
        "me-central-1",
        "sa-east-1",
        "us-gov-west-1",
    }
)


def network_topology(instance_type: str, region: str) -> Optional[NetworkTopology]:
    """The network layers a node of ``instance_type`` in ``region`` is labelled with, ``None`` when it gets none."""
    if region not in TOPOLOGY_REGIONS:
        return None
    return NETWORK_TOPOLOGY.get(instance_type)
