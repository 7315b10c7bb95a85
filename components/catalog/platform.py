"""EKS platform facts: Kubernetes versions, managed add-ons, AMI types, the VPC CNI that efa-only needs."""

from typing import Mapping

#: Kubernetes versions EKS supports that this project is tested against (the strict schema
#: validation runs against each). Source: https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = ("1.31", "1.32", "1.33", "1.34")
DEFAULT_KUBERNETES_VERSION = "1.33"

#: EKS managed add-ons the backbone installs (source keys ``eks-addons``, ``eks-fsx-csi-addon``). Versions are resolved per
#: Kubernetes version with ``aws.eks.get_addon_version`` (EKS's default for that version) unless a
#: stack pins one (``cluster.addonVersions``).
EKS_ADDONS: tuple[str, ...] = (
    "vpc-cni",
    "kube-proxy",
    "coredns",
    "eks-pod-identity-agent",
    "metrics-server",
    "aws-efs-csi-driver",
    "aws-fsx-csi-driver",
)
#: The CSI driver add-on of each shared file system backend (installed with the file system, not the cluster).
STORAGE_ADDONS: tuple[str, ...] = ("aws-efs-csi-driver", "aws-fsx-csi-driver")

#: Oldest VPC CNI that supports ``efa-only`` interfaces (source key ``eks-efa``).
EFA_ONLY_MIN_VPC_CNI: tuple[int, int, int] = (1, 18, 5)

#: Instance families the AL2023 x86_64 NVIDIA AMI supports (source key ``eks-nvidia-ami``).
NVIDIA_AMI_FAMILIES: frozenset[str] = frozenset(
    {"p6-b300", "p6-b200", "p5", "p5e", "p5en", "p4d", "p4de", "p3", "p3dn", "g7e", "gr6", "g6", "g6e", "g6f", "gr6f", "g5", "g4dn"}
)

#: EKS managed node group AMI types by kind of node (source key ``eks-nvidia-ami``).
AMI_TYPES: Mapping[str, str] = {"cpu": "AL2023_x86_64_STANDARD", "nvidia": "AL2023_x86_64_NVIDIA"}
