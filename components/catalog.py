"""Facts about EC2 instance types, Helm charts and EKS add-ons, as data in one place.

Every row names its source (keys are defined in ``SOURCES`` below and come from
``../shared/field-notes.md``). Components and the config loader read these tables; nothing
else in the code base hard-codes a GPU count, an EFA interface count, a price or a chart
version.

An instance type that is not in :data:`INSTANCE_TYPES` is a configuration error unless the
user supplies its facts in stack config (``instanceFacts``), which the loader turns into an
:class:`InstanceType` with ``source="stack config"``.
"""

from dataclasses import dataclass, field
from typing import Mapping, Optional

#: Source keys used in the tables below (see ../shared/field-notes.md, section 0).
SOURCES: Mapping[str, str] = {
    "K-IT": "aws/karpenter-provider-aws website/content/en/docs/reference/instance-types.md @ 1d927085 "
    "(generated from EC2 DescribeInstanceTypes)",
    "K-IT-1.0": "aws/karpenter-provider-aws website/content/en/v1.0/reference/instance-types.md",
    "K-PRICE": "aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go @ 1d927085 "
    "(us-east-1 On-Demand Linux, generated 2026-07-20)",
    "K-VPC": "aws/karpenter-provider-aws pkg/providers/instancetype/zz_generated.vpclimits.go (2026-08-06)",
    "K-BW": "aws/karpenter-provider-aws pkg/providers/instancetype/zz_generated.bandwidth.go",
    "EKS-CHARTS": "aws/eks-charts @ 5239609 stable/aws-efa-k8s-device-plugin/{Chart.yaml,values.yaml}",
    "NVDP": "NVIDIA/k8s-device-plugin @ 1b826acc deployments/helm/nvidia-device-plugin/Chart.yaml",
    "EKS-AMI": "https://docs.amazonaws.cn/en_us/eks/latest/userguide/ml-eks-optimized-ami.md",
    "EKS-ADDONS": "https://docs.aws.amazon.com/eks/latest/userguide/metrics-server.html ; "
    "https://docs.aws.amazon.com/pt_br/eks/latest/userguide/add-ons-aws-efs-csi-driver.html",
    "EFS-CSI-POLICY": "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy "
    "(https://docs.aws.amazon.com/eks/latest/userguide/efs-csi.html)",
    "ADT-ETCD": "aws-samples/awsome-distributed-training @ 7217859f "
    "3.test_cases/pytorch/ddp/kubernetes/ddp-custom-container.yaml-template (etcd v3.5.19 with --enable-v2)",
    "AWS-M5": "https://aws.amazon.com/ec2/instance-types/m5/ (m5.large 2 vCPU/8 GiB, m5.xlarge 4 vCPU/16 GiB; "
    "EFA only on m5dn/m5n.24xlarge and larger) and https://aws.amazon.com/ec2/pricing/on-demand/ "
    "(us-east-1 Linux: m5.large 0.096, m5.xlarge 0.192 $/h); not in ../shared/field-notes.md",
    "stack config": "facts supplied by the user in the stack's instanceFacts config key",
    "AWS-G5": "https://aws.amazon.com/ec2/instance-types/g5/ (g5.12xlarge: 4 x A10G 24 GB, 48 vCPU, 192 GiB, "
    "3800 GB NVMe, 40 Gbps, EFA supported from g5.8xlarge up) and https://aws.amazon.com/ec2/pricing/on-demand/ "
    "(us-east-1 Linux $5.672/h); GPU memory as the EC2 API reports A10G (22888 MiB, field notes 1a); "
    "not in ../shared/field-notes.md",
    "EKS-EFA-2024": "awsdocs/amazon-eks-user-guide latest/ug/ml/node-efa.adoc @ 4d52b4d0 (hugepages-2Mi 5120Mi per "
    "EFA pod; 5128 2MiB huge pages pre-allocated by the EFA driver)",
    "OFI": "aws/aws-ofi-nccl doc/efa-env-var.md; aws-samples/awsome-distributed-training 1.architectures/efa-cheatsheet.md",
    "ADT-NCCL": "aws-samples/awsome-distributed-training @ 7217859f micro-benchmarks/nccl-tests/README.md "
    "(2-node all_reduce_perf busbw: p4de 78.33 GB/s at 2 GiB (Slurm); p5 437.79 GB/s at 2 GiB on EKS)",
    "CA-CHART": "kubernetes/autoscaler charts/cluster-autoscaler/Chart.yaml @ 058219f6 (chart 9.43.1, appVersion 1.31.0); "
    "image tags per Kubernetes minor from the kubernetes/autoscaler release notes (v1.33.6, v1.34.5) and "
    "kubermatic's addon image table (v1.32.3)",
    "AWS-EKS-PRICE": "https://aws.amazon.com/eks/pricing/ ($0.10 per cluster-hour, standard support); "
    "not in ../shared/field-notes.md",
    "AWS-VPC-PRICE": "https://aws.amazon.com/vpc/pricing/ (NAT gateway $0.045/hour in us-east-1, plus "
    "$0.045/GB processed; public IPv4 address $0.005/hour); not in ../shared/field-notes.md",
    "AWS-EBS-PRICE": "https://aws.amazon.com/ebs/pricing/ (gp3 $0.08/GB-month in us-east-1); not in ../shared/field-notes.md",
    "AWS-KMS-PRICE": "https://aws.amazon.com/kms/pricing/ ($1/month per customer managed key); "
    "not in ../shared/field-notes.md",
}

#: Prices of the fixed parts of an environment (us-east-1, USD): per hour unless the name says month.
SERVICE_PRICES: Mapping[str, tuple[float, str]] = {
    "eks-cluster": (0.10, "AWS-EKS-PRICE"),
    "nat-gateway": (0.045, "AWS-VPC-PRICE"),
    "public-ipv4": (0.005, "AWS-VPC-PRICE"),
    "ebs-gp3-gb-month": (0.08, "AWS-EBS-PRICE"),
    "kms-key-month": (1.0, "AWS-KMS-PRICE"),
}
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class InstanceType:
    """What the program needs to know about one EC2 instance type.

    ``memory_mib`` and ``gpu_memory_mib`` are EC2 API values. ``max_efa_interfaces`` is
    ``NetworkInfo.EfaInfo.MaximumEfaInterfaces`` (0 = no EFA), ``network_cards`` is
    ``NetworkInfo.MaximumNetworkCards``. ``price_per_hour`` is the us-east-1 On-Demand Linux
    price in USD, ``None`` where no source was found.
    """

    name: str
    vcpus: int
    memory_mib: int
    gpus: int
    gpu_model: Optional[str]
    gpu_memory_mib: Optional[int]
    max_efa_interfaces: int
    network_cards: int
    local_nvme_gb: int
    price_per_hour: Optional[float]
    sources: tuple[str, ...]
    #: Allocatable CPU (millicores) and memory (MiB) after kube/system reservations
    #: (Karpenter's AL2023 estimate, field notes 1b); used to size pods that fill a node.
    allocatable_cpu_m: Optional[int] = None
    allocatable_memory_mib: Optional[int] = None
    #: Architecture for the EKS AMI type; all catalogued types are x86_64.
    arch: str = "x86_64"

    @property
    def is_gpu(self) -> bool:
        """True for NVIDIA GPU instance types."""
        return self.gpus > 0

    @property
    def supports_efa(self) -> bool:
        """True when the type has at least one EFA interface."""
        return self.max_efa_interfaces > 0

    @property
    def family(self) -> str:
        """The instance family, e.g. ``p4d`` for ``p4d.24xlarge``."""
        return self.name.split(".", 1)[0]


def _it(
    name: str,
    vcpus: int,
    memory_mib: int,
    gpus: int,
    gpu_model: Optional[str],
    gpu_memory_mib: Optional[int],
    efa: int,
    cards: int,
    nvme: int,
    price: Optional[float],
    sources: tuple[str, ...],
    alloc_cpu_m: Optional[int] = None,
    alloc_mem_mib: Optional[int] = None,
) -> InstanceType:
    return InstanceType(
        name=name,
        vcpus=vcpus,
        memory_mib=memory_mib,
        gpus=gpus,
        gpu_model=gpu_model,
        gpu_memory_mib=gpu_memory_mib,
        max_efa_interfaces=efa,
        network_cards=cards,
        local_nvme_gb=nvme,
        price_per_hour=price,
        sources=sources,
        allocatable_cpu_m=alloc_cpu_m,
        allocatable_memory_mib=alloc_mem_mib,
    )


_HW = ("K-IT", "K-VPC", "K-PRICE")

#: Instance types we know, keyed by EC2 name. Values from ../shared/field-notes.md 1a-1c.
INSTANCE_TYPES: Mapping[str, InstanceType] = {
    t.name: t
    for t in (
        # name, vCPU, MiB, GPUs, model, GPU MiB, EFA, cards, NVMe GB, $/h, sources, alloc cpu m, alloc MiB
        _it("p3.2xlarge", 8, 62464, 1, "NVIDIA V100", 16384, 0, 1, 0, 3.06, ("K-IT-1.0", "K-BW", "K-VPC", "K-PRICE")),
        _it("p3.16xlarge", 64, 499712, 8, "NVIDIA V100", 16384, 0, 1, 0, 24.48, ("K-IT-1.0", "K-VPC", "K-PRICE")),
        _it("p3dn.24xlarge", 96, 786432, 8, "NVIDIA V100", 32768, 1, 1, 1800, 31.212, _HW, 95690, 718987),
        _it("p4d.24xlarge", 96, 1179648, 8, "NVIDIA A100", 40960, 4, 4, 8000, 21.957642, _HW, 95690, 1082712),
        _it("p4de.24xlarge", 96, 1179648, 8, "NVIDIA A100", 81920, 4, 4, 8000, 27.44705, _HW, 95690, 1082712),
        _it("p5.48xlarge", 192, 2097152, 8, "NVIDIA H100", 81920, 32, 32, 30400, 55.04, _HW, 191450, 1938410),
        # p5e.48xlarge: no us-east-1 On-Demand price in K-PRICE (field notes 1c).
        _it("p5e.48xlarge", 192, 2097152, 8, "NVIDIA H200", 144384, 32, 32, 30400, None, ("K-IT", "K-VPC"), 191450, 1938410),
        _it("p5en.48xlarge", 192, 2097152, 8, "NVIDIA H200", 144384, 16, 16, 30400, 63.296, _HW, 191450, 1937332),
        _it("p6-b200.48xlarge", 192, 2097152, 8, "NVIDIA B200", 183359, 8, 8, 30400, 113.9328, _HW, 191450, 1937332),
        _it("g4dn.xlarge", 4, 16384, 1, "NVIDIA T4", 16384, 0, 1, 125, 0.526, _HW, 3920, 14481),
        _it("g5.xlarge", 4, 16384, 1, "NVIDIA A10G", 22888, 0, 1, 250, 1.006, _HW, 3920, 14162),
        _it("g5.12xlarge", 48, 196608, 4, "NVIDIA A10G", 22888, 1, 1, 3800, 5.672, ("AWS-G5",)),
        _it("g5.48xlarge", 192, 786432, 8, "NVIDIA A10G", 22888, 1, 1, 7600, 16.288, _HW, 191450, 723299),
        _it("g6.xlarge", 4, 16384, 1, "NVIDIA L4", 22888, 0, 1, 250, 0.8048, _HW, 3920, 14162),
        _it("g6.48xlarge", 192, 786432, 8, "NVIDIA L4", 22888, 1, 1, 7520, 13.3504, _HW, 191450, 718987),
        _it("g6e.48xlarge", 192, 1572864, 8, "NVIDIA L40S", 45776, 4, 4, 7600, 30.13118, _HW, 191450, 1449132),
        _it("c5.4xlarge", 16, 32768, 0, None, None, 0, 1, 0, 0.68, _HW, 15890, 27381),
        _it("m5.large", 2, 8192, 0, None, None, 0, 1, 0, 0.096, ("AWS-M5",)),
        _it("m5.xlarge", 4, 16384, 0, None, None, 0, 1, 0, 0.192, ("AWS-M5",)),
    )
}

#: EC2 vCPU quotas (service code ``ec2``) by quota class: (On-Demand code, Spot code), and the
#: instance-family prefixes of each class (field notes 6a: zuul aws driver const.py; AWS CLI docs).
VCPU_QUOTAS: Mapping[str, tuple[str, str]] = {
    "P": ("L-417A185B", "L-7212CCBC"),
    "G": ("L-DB2E81BA", "L-3819A6DF"),
    "Trn": ("L-2C3B7624", "L-6B0D517C"),
    "Inf": ("L-1945791B", "L-B5D1601B"),
    "Standard": ("L-1216C47A", "L-34B43A08"),
}


def quota_class(instance_type: str) -> str:
    """The vCPU quota class of an instance type (``P``, ``G``, ``Trn``, ``Inf`` or ``Standard``)."""
    family = instance_type.split(".", 1)[0]
    if family.startswith("trn"):
        return "Trn"
    if family.startswith("inf"):
        return "Inf"
    if family.startswith(("g", "vt")):
        return "G"
    if family.startswith("p") and len(family) > 1 and family[1].isdigit():
        return "P"
    return "Standard"


#: Instance types whose AL2023 NVIDIA EKS AMI is supported (field notes 2c, EKS-AMI).
NVIDIA_AMI_FAMILIES: frozenset[str] = frozenset(
    {"p6-b300", "p6-b200", "p5", "p5e", "p5en", "p4d", "p4de", "p3", "p3dn", "g7e", "gr6", "g6", "g6e", "g6f", "gr6f", "g5", "g4dn"}
)

#: EKS managed node group AMI types by kind of node (field notes 2c).
AMI_TYPES: Mapping[str, str] = {"cpu": "AL2023_x86_64_STANDARD", "nvidia": "AL2023_x86_64_NVIDIA"}


@dataclass(frozen=True)
class HelmChart:
    """A third-party Helm chart installed at deploy time, version pinned."""

    chart: str
    repo: str
    version: str
    source: str


#: Helm charts (installed at deploy time, never committed).
HELM_CHARTS: Mapping[str, HelmChart] = {
    "nvidia-device-plugin": HelmChart(
        chart="nvidia-device-plugin",
        repo="https://nvidia.github.io/k8s-device-plugin",
        version="0.20.0",
        source="NVDP",
    ),
    "cluster-autoscaler": HelmChart(
        chart="cluster-autoscaler",
        repo="https://kubernetes.github.io/autoscaler",
        version="9.43.1",
        source="CA-CHART",
    ),
    "aws-efa-k8s-device-plugin": HelmChart(
        chart="aws-efa-k8s-device-plugin",
        repo="https://aws.github.io/eks-charts",
        version="v0.5.30",
        source="EKS-CHARTS",
    ),
}

#: Cluster-autoscaler image per Kubernetes minor (the autoscaler's minor must match the cluster's).
CLUSTER_AUTOSCALER_IMAGES: Mapping[str, str] = {
    "1.31": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.31.0",
    "1.32": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.3",
    "1.33": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.33.6",
    "1.34": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.5",
}

#: Oldest VPC CNI that supports ``efa-only`` interfaces (EKS-EFA-2024: "VPC CNI >= 1.18.5").
EFA_ONLY_MIN_VPC_CNI: tuple[int, int, int] = (1, 18, 5)

#: UID and GID the training image runs as (training/Dockerfile ``USER``); pods run as it and the EFS
#: access points own the shared volume's files as it.
TRAINING_IMAGE_UID = 1000

#: Huge pages an EFA training pod requests (the EFA driver pre-allocates 5128 x 2 MiB; EKS-EFA-2024).
EFA_HUGEPAGES_2MI = "5120Mi"

#: NCCL / libfabric environment for training pods on EFA nodes, by instance family (OFI). Families
#: not listed get the common part. FI_EFA_USE_DEVICE_RDMA is only meaningful where the GPU supports
#: GPUDirect RDMA over EFA (p4d/p4de/p5/p5e/p5en/p6); harmless with newer aws-ofi-nccl.
EFA_ENV_COMMON: Mapping[str, str] = {
    "FI_PROVIDER": "efa",
    "NCCL_SOCKET_IFNAME": "^lo,docker,veth",
    "NCCL_DEBUG": "WARN",
}
EFA_ENV_BY_FAMILY: Mapping[str, Mapping[str, str]] = {
    "p4d": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p4de": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p5": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p5e": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p5en": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p6-b200": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    # g5/g6: NCCL_SHM_USE_CUDA_MEMCPY=1 doubles intra-node bandwidth (ADT efa-cheatsheet.md).
    "g5": {"NCCL_SHM_USE_CUDA_MEMCPY": "1"},
    "g6": {"NCCL_SHM_USE_CUDA_MEMCPY": "1"},
    "g6e": {"NCCL_SHM_USE_CUDA_MEMCPY": "1"},
}

@dataclass(frozen=True)
class AllReduceReference:
    """A published two-node all-reduce bus bandwidth (GB/s, 1e9 bytes/s) at one message size."""

    busbw_gbytes_per_s: float
    message_bytes: int
    source: str


#: Published two-node nccl-tests all_reduce_perf bus bandwidth with EFA (field notes 7a, ADT-NCCL).
#: The health check measures at the same message size and, when enforced, requires 80% of it.
REFERENCE_ALLREDUCE: Mapping[str, AllReduceReference] = {
    "p4de.24xlarge": AllReduceReference(78.33, 2 << 30, "ADT-NCCL (2 x p4de, Slurm, 2 GiB)"),
    "p5.48xlarge": AllReduceReference(437.79, 2 << 30, "ADT-NCCL (2 x p5 on EKS, MPIJob, 2 GiB)"),
}

#: EKS managed add-ons the backbone installs. Versions are resolved per Kubernetes version with
#: ``aws.eks.get_addon_version`` (the default version EKS publishes for that Kubernetes version),
#: unless a stack pins one in config (``addonVersions``).
EKS_ADDONS: tuple[str, ...] = (
    "vpc-cni",
    "kube-proxy",
    "coredns",
    "eks-pod-identity-agent",
    "metrics-server",
    "aws-efs-csi-driver",
)

#: Container images referenced by the workloads (pinned).
IMAGES: Mapping[str, str] = {
    # etcd 3.5 is the last release with the v2 API torchrun's etcd-v2 rendezvous needs (field notes 4).
    "etcd": "quay.io/coreos/etcd:v3.5.19",
}

#: Kubernetes versions EKS supports that this project has been tested against (schema
#: validation runs against each). EKS standard support: 1.31-1.34 in late 2026.
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = ("1.31", "1.32", "1.33", "1.34")
DEFAULT_KUBERNETES_VERSION = "1.33"

#: Label and taint the GPU node groups get; the NVIDIA device plugin selects and tolerates them.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_LABEL = ("eks-training/accelerator", "nvidia")
EFA_LABEL = ("eks-training/efa", "true")
NODE_ROLE_LABEL = "eks-training/role"


@dataclass(frozen=True)
class Catalog:
    """The catalog seen by a stack: the built-in facts plus any the user supplied."""

    instance_types: Mapping[str, InstanceType] = field(default_factory=lambda: dict(INSTANCE_TYPES))

    def get(self, name: str) -> Optional[InstanceType]:
        """Facts for ``name``, or ``None`` when unknown."""
        return self.instance_types.get(name)

    def require(self, name: str) -> InstanceType:
        """Facts for ``name``; raises ``KeyError`` naming the known types when unknown."""
        it = self.instance_types.get(name)
        if it is None:
            raise KeyError(f"unknown instance type {name!r}; known: {', '.join(sorted(self.instance_types))}")
        return it
