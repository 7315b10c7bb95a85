"""EKS platform facts: Kubernetes versions and their support windows, how node groups roll, managed add-ons, AMI
types, the VPC CNI that efa-only interfaces need, zones EKS refuses, CloudWatch retention values."""

from dataclasses import dataclass
from datetime import date
from typing import Mapping


@dataclass(frozen=True, kw_only=True)
class KubernetesVersion:
    """One Kubernetes minor on EKS and its support window (source key ``eks-kubernetes-versions``)."""

    minor: str
    released: date
    end_of_standard: date
    """After this day the cluster is billed extended support (or upgraded, with upgradePolicy STANDARD)."""
    end_of_extended: date


#: Kubernetes minors this project supports, newest last. 1.34 to 1.36 are in standard support on 2026-11-22;
#: 1.32 and 1.33 are in extended support only (billed at the extended price; the config must opt in).
KUBERNETES_VERSIONS: Mapping[str, KubernetesVersion] = {
    v.minor: v
    for v in (
        KubernetesVersion(
            minor="1.32",
            released=date(2025, 1, 23),
            end_of_standard=date(2026, 3, 23),
            end_of_extended=date(2027, 3, 23),
        ),
        KubernetesVersion(
            minor="1.33",
            released=date(2025, 5, 29),
            end_of_standard=date(2026, 7, 29),
            end_of_extended=date(2027, 7, 29),
        ),
        KubernetesVersion(
            minor="1.34",
            released=date(2025, 10, 2),
            end_of_standard=date(2026, 12, 2),
            end_of_extended=date(2027, 12, 2),
        ),
        KubernetesVersion(
            minor="1.35",
            released=date(2026, 1, 27),
            end_of_standard=date(2027, 3, 27),
            end_of_extended=date(2028, 3, 27),
        ),
        KubernetesVersion(
            minor="1.36", released=date(2026, 6, 2), end_of_standard=date(2027, 8, 2), end_of_extended=date(2028, 8, 2)
        ),
    )
}
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = tuple(KUBERNETES_VERSIONS)
#: The newest minor: new clusters get it unless the config says otherwise.
DEFAULT_KUBERNETES_VERSION = SUPPORTED_KUBERNETES_VERSIONS[-1]
#: ``upgradePolicy.supportType`` values (listed once): STANDARD upgrades the cluster at the end of standard
#: support instead of billing extended support, which is EKS's default (source key ``eks-kubernetes-versions``).
SUPPORT_TYPES: tuple[str, ...] = ("STANDARD", "EXTENDED")


def in_standard_support(minor: str, day: date) -> bool:
    """Whether ``minor`` is in EKS standard support on ``day`` (UTC). EKS bills extended support from the start of the
    end-of-standard-support day (source key ``eks-kubernetes-versions``), so that day is already extended."""
    v = KUBERNETES_VERSIONS[minor]
    return v.released <= day < v.end_of_standard


def billed_extended(minor: str, day: date) -> bool:
    """Whether a cluster of ``minor`` is billed the extended-support price on ``day``: from its end of standard
    support on. A cluster that only opts in (``upgradePolicy`` EXTENDED) pays the standard price until then (source key
    ``eks-enable-extended-support``)."""
    return day >= KUBERNETES_VERSIONS[minor].end_of_standard


def minor_number(minor: str) -> tuple[int, int]:
    """``"1.35"`` -> ``(1, 35)``, to compare minors and count the steps between them."""
    major, _, rest = minor.partition(".")
    return int(major), int(rest)


#: How far ``pulumi up`` may move the control plane at once: one minor. EKS updates a cluster to the next minor only,
#: never down, and only while every managed node group runs the cluster's minor (source key ``eks-update-cluster``).
MINOR_STEP = 1
#: How many minors a node's kubelet may be older than the API server; never newer (source key
#: ``kubernetes-version-skew``). EKS tests the same three minors and recommends keeping nodes on the control plane's
#: minor (source key ``eks-kubernetes-versions``).
KUBELET_MAX_SKEW = 3


@dataclass(frozen=True, kw_only=True)
class NodeUpdateStrategy:
    """An EKS managed node group update strategy (``updateConfig.updateStrategy``): how EKS replaces the nodes when
    a group rolls (a new AMI release, a Kubernetes minor, a launch template version)."""

    name: str
    """EKS's name: ``DEFAULT`` or ``MINIMAL``."""
    surge_per_zone: int
    """The most nodes it launches beyond the group's size, per zone of the group (the larger of that and
    ``maxUnavailable``, 1 here, is what EKS adds: source key ``eks-managed-node-update``)."""
    what: str
    """What a roll does, in words."""
    sources: tuple[str, ...]

    @property
    def surge(self) -> bool:
        """A replacement node is launched before an old one is terminated (the group needs room for more instances
        than its size while it rolls)."""
        return self.surge_per_zone > 0


#: EKS's two update strategies (source key ``eks-nodegroup-update-config``). A group gets ``MINIMAL`` when its
#: capacity has no room for an extra instance (:data:`NO_SURGE_CAPACITY`), else ``DEFAULT``
#: (:func:`components.nodeplan.node_update_strategy`).
NODE_UPDATE_STRATEGIES: Mapping[str, NodeUpdateStrategy] = {
    s.name: s
    for s in (
        NodeUpdateStrategy(
            name="DEFAULT",
            surge_per_zone=2,
            what="new nodes are launched first, then each old node is drained and terminated",
            sources=("eks-nodegroup-update-config", "eks-managed-node-update"),
        ),
        NodeUpdateStrategy(
            name="MINIMAL",
            surge_per_zone=0,
            what="each old node is drained and terminated before its replacement is launched: the pods of a node "
            "stop before the node that replaces it is up",
            sources=("eks-nodegroup-update-config",),
        ),
    )
}


#: EKS's limit on a pod leaving a node during a managed node group update (source key ``eks-managed-node-update``).
EVICTION_LIMIT_MINUTES = 15
#: How long EKS lets a node of a group it deletes drain before it terminates it (source key
#: ``eks-delete-managed-node-group``).
DELETE_DRAIN_LIMIT_S = 300
#: The most a pod gets after SIGTERM when its node shuts down: the kubelet's graceful shutdown on EKS's AL2023 nodes,
#: less the share kept for critical pods, from the Kubernetes minor that turns it on; before it, the kubelet does
#: not wait for pods at all (source key ``eks-ami-graceful-shutdown``).
NODE_SHUTDOWN_GRACE_S = 120
GRACEFUL_SHUTDOWN_FROM = "1.34"


def node_shutdown_grace_s(minor: str) -> int:
    """The most a pod gets after SIGTERM when a node of Kubernetes ``minor`` shuts down (:data:`NODE_SHUTDOWN_GRACE_S`
    from :data:`GRACEFUL_SHUTDOWN_FROM`, else none)."""
    return NODE_SHUTDOWN_GRACE_S if minor_number(minor) >= minor_number(GRACEFUL_SHUTDOWN_FROM) else 0


@dataclass(frozen=True, kw_only=True)
class NoSurge:
    """A source of capacity that launches no instance beyond what a group already runs, so a ``DEFAULT`` roll (new
    nodes first) fails there with a launch error."""

    key: str
    why: str
    """Why there is no room, in words."""
    sources: tuple[str, ...]


#: What leaves a node group no room for an extra instance, in the order :func:`components.nodeplan.surge_limit`
#: asks. A reservation or a cluster placement group may have room to spare; the program cannot know, so it
#: assumes it has none.
NO_SURGE_CAPACITY: Mapping[str, NoSurge] = {
    n.key: n
    for n in (
        NoSurge(
            key="capacity-block",
            why="its Capacity Block runs exactly the instances bought, none beyond them",
            sources=("eks-capacity-blocks-mng",),
        ),
        NoSurge(
            key="capacity-reservation",
            why="its On-Demand Capacity Reservation launches an instance only while it has capacity free",
            sources=("ec2-capacity-reservation-launch",),
        ),
        NoSurge(
            key="cluster-placement",
            why="its cluster placement group may have no room for another instance",
            sources=("ec2-placement-strategies",),
        ),
    )
}

#: The CSI driver add-on of each shared file system backend (installed with the file system, not the cluster).
STORAGE_ADDON: Mapping[str, str] = {"efs": "aws-efs-csi-driver", "fsx": "aws-fsx-csi-driver"}
STORAGE_ADDONS: tuple[str, ...] = tuple(STORAGE_ADDON.values())

#: EKS managed add-ons the backbone installs (source keys ``eks-addons``, ``eks-fsx-csi-addon``, ``eks-node-health``,
#: ``cloudwatch-observability-addon``). The version each gets is decided by
#: :func:`components.catalog.addons.addon_version_for`: the stack's ``cluster.addonVersions``, else this project's pin
#: for the Kubernetes minor, else EKS's default for it.
EKS_ADDONS: tuple[str, ...] = (
    "vpc-cni",
    "kube-proxy",
    "coredns",
    "eks-pod-identity-agent",
    "metrics-server",
    STORAGE_ADDON["efs"],
    STORAGE_ADDON["fsx"],
    "eks-node-monitoring-agent",
    "amazon-cloudwatch-observability",
)

#: The VPC CNI add-on's setting that turns on Kubernetes NetworkPolicy enforcement (a string, not a
#: boolean; the versions that have it: ``components.catalog.addons.ADDON_FEATURES``; source key
#: ``vpc-cni-network-policy``).
VPC_CNI_NETWORK_POLICY_CONFIG: Mapping[str, str] = {"enableNetworkPolicy": "true"}

#: Oldest VPC CNI that supports ``efa-only`` interfaces (source key ``eks-efa``).
EFA_ONLY_MIN_VPC_CNI: tuple[int, int, int] = (1, 18, 5)

#: Instance families the AL2023 x86_64 NVIDIA AMI supports (source key ``eks-nvidia-ami``).
NVIDIA_AMI_FAMILIES: frozenset[str] = frozenset(
    {
        "p6-b300",
        "p6-b200",
        "p5",
        "p5e",
        "p5en",
        "p4d",
        "p4de",
        "p3",
        "p3dn",
        "g7e",
        "gr6",
        "g6",
        "g6e",
        "g6f",
        "gr6f",
        "g5",
        "g4dn",
    }
)

#: EKS managed node group AMI types by kind of node (source key ``eks-nvidia-ami``).
AMI_TYPES: Mapping[str, str] = {"cpu": "AL2023_x86_64_STANDARD", "nvidia": "AL2023_x86_64_NVIDIA"}

#: The node label cluster-autoscaler's AWS provider reads to know a node has GPUs before the device plugin
#: registers them (without it the autoscaler treats a fresh GPU node as unready capacity and misjudges scale-up
#: and scale-down); its value names the GPU (source key ``cluster-autoscaler-gpu-label``).
AUTOSCALER_GPU_LABEL = "k8s.amazonaws.com/accelerator"

#: The label EKS gives each node of a managed node group, valued with the group's EKS name (source key
#: ``eks-managed-node-update``).
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


def accelerator_label_value(gpu_model: "str | None") -> str:
    """The value of :data:`AUTOSCALER_GPU_LABEL` for a GPU model: ``NVIDIA H100`` -> ``nvidia-h100``."""
    if not gpu_model:
        return "nvidia"
    value = "-".join("".join(c if c.isalnum() else " " for c in gpu_model.lower()).split())
    return value[:63].strip("-") or "nvidia"


#: Zone IDs whose subnets EKS refuses for a control plane (source key ``eks-network-requirements``).
#: Zone names map to different IDs in each account, so zones are chosen and checked by ID.
EKS_UNSUPPORTED_ZONE_IDS: frozenset[str] = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})
#: EKS needs control-plane subnets in at least this many zones it supports (source key ``eks-network-requirements``).
MIN_CONTROL_PLANE_ZONES = 2

#: Retention periods CloudWatch Logs accepts, in days (source key ``cloudwatch-retention``).
LOG_RETENTION_DAYS: tuple[int, ...] = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
