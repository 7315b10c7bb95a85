"""EC2 instance types: what the program needs to know about each, with the source of every value.

An instance type that is not listed here is a configuration error unless the stack describes it
under ``instanceFacts`` (the config loader turns that into an :class:`InstanceType` whose source is
``stack config``).
"""

from dataclasses import dataclass
from typing import Mapping, Optional


@dataclass(frozen=True, kw_only=True)
class InstanceType:
    """Facts about one EC2 instance type (built by keyword only: no two integers can be swapped)."""

    name: str
    """EC2 name, e.g. ``p5.48xlarge``."""
    vcpus: int
    """vCPUs (what the EC2 vCPU quotas count)."""
    memory_mib: int
    """Memory in MiB as the EC2 API reports it."""
    gpus: int
    """NVIDIA GPUs (0 for CPU types)."""
    gpu_model: Optional[str]
    """GPU model, e.g. ``NVIDIA H100``."""
    gpu_memory_mib: Optional[int]
    """Memory per GPU in MiB (EC2 API value)."""
    max_efa_interfaces: int
    """``NetworkInfo.EfaInfo.MaximumEfaInterfaces`` (0: no EFA)."""
    network_cards: int
    """``NetworkInfo.MaximumNetworkCards``; an EFA group gets one interface per card."""
    network_gbps: float
    """Baseline network bandwidth in Gbit/s (EFA and IP share it)."""
    local_nvme_gb: int
    """Instance-store NVMe in GB (0: none)."""
    price_per_hour: Optional[float]
    """On-Demand Linux price in us-east-1, USD per hour; ``None`` where no source gives one."""
    sources: tuple[str, ...]
    """Keys of :data:`components.catalog.sources.SOURCES` the values come from."""
    allocatable_cpu_m: Optional[int] = None
    """Allocatable CPU (millicores) after kube/system reservations on AL2023 (Karpenter's estimate)."""
    allocatable_memory_mib: Optional[int] = None
    """Allocatable memory (MiB) after kube/system reservations on AL2023 (Karpenter's estimate)."""
    arch: str = "x86_64"
    """CPU architecture (selects the EKS AMI type)."""

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

    @property
    def user_supplied(self) -> bool:
        """True for facts from the stack's ``instanceFacts``."""
        return any(s.startswith("stack config") for s in self.sources)


_ACCEL = ("ec2-accelerated-specs", "karpenter-instance-types", "ec2-network-cards", "ec2-on-demand-prices")
_P3 = ("ec2-accelerated-specs", "karpenter-instance-types-v1.0", "ec2-on-demand-prices")

#: Instance types this project knows, keyed by EC2 name.
INSTANCE_TYPES: Mapping[str, InstanceType] = {
    t.name: t
    for t in (
        InstanceType(
            name="p3.2xlarge",
            vcpus=8,
            memory_mib=62464,
            gpus=1,
            gpu_model="NVIDIA V100",
            gpu_memory_mib=16384,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=2.5,
            local_nvme_gb=0,
            price_per_hour=3.06,
            sources=_P3,
        ),
        InstanceType(
            name="p3.16xlarge",
            vcpus=64,
            memory_mib=499712,
            gpus=8,
            gpu_model="NVIDIA V100",
            gpu_memory_mib=16384,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=25,
            local_nvme_gb=0,
            price_per_hour=24.48,
            sources=_P3,
        ),
        InstanceType(
            name="p3dn.24xlarge",
            vcpus=96,
            memory_mib=786432,
            gpus=8,
            gpu_model="NVIDIA V100",
            gpu_memory_mib=32768,
            max_efa_interfaces=1,
            network_cards=1,
            network_gbps=100,
            local_nvme_gb=1800,
            price_per_hour=31.212,
            sources=_ACCEL,
            allocatable_cpu_m=95690,
            allocatable_memory_mib=718987,
        ),
        InstanceType(
            name="p4d.24xlarge",
            vcpus=96,
            memory_mib=1179648,
            gpus=8,
            gpu_model="NVIDIA A100",
            gpu_memory_mib=40960,
            max_efa_interfaces=4,
            network_cards=4,
            network_gbps=400,
            local_nvme_gb=8000,
            price_per_hour=21.957642,
            sources=_ACCEL,
            allocatable_cpu_m=95690,
            allocatable_memory_mib=1082712,
        ),
        InstanceType(
            name="p4de.24xlarge",
            vcpus=96,
            memory_mib=1179648,
            gpus=8,
            gpu_model="NVIDIA A100",
            gpu_memory_mib=81920,
            max_efa_interfaces=4,
            network_cards=4,
            network_gbps=400,
            local_nvme_gb=8000,
            price_per_hour=27.44705,
            sources=_ACCEL,
            allocatable_cpu_m=95690,
            allocatable_memory_mib=1082712,
        ),
        InstanceType(
            name="p5.48xlarge",
            vcpus=192,
            memory_mib=2097152,
            gpus=8,
            gpu_model="NVIDIA H100",
            gpu_memory_mib=81920,
            max_efa_interfaces=32,
            network_cards=32,
            network_gbps=3200,
            local_nvme_gb=30400,
            price_per_hour=55.04,
            sources=_ACCEL,
            allocatable_cpu_m=191450,
            allocatable_memory_mib=1938410,
        ),
        # No us-east-1 On-Demand price is published for p5e.48xlarge (Capacity Blocks and reservations only).
        InstanceType(
            name="p5e.48xlarge",
            vcpus=192,
            memory_mib=2097152,
            gpus=8,
            gpu_model="NVIDIA H200",
            gpu_memory_mib=144384,
            max_efa_interfaces=32,
            network_cards=32,
            network_gbps=3200,
            local_nvme_gb=30400,
            price_per_hour=None,
            sources=_ACCEL[:3],
            allocatable_cpu_m=191450,
            allocatable_memory_mib=1938410,
        ),
        InstanceType(
            name="p5en.48xlarge",
            vcpus=192,
            memory_mib=2097152,
            gpus=8,
            gpu_model="NVIDIA H200",
            gpu_memory_mib=144384,
            max_efa_interfaces=16,
            network_cards=16,
            network_gbps=3200,
            local_nvme_gb=30400,
            price_per_hour=63.296,
            sources=_ACCEL,
            allocatable_cpu_m=191450,
            allocatable_memory_mib=1937332,
        ),
        InstanceType(
            name="p6-b200.48xlarge",
            vcpus=192,
            memory_mib=2097152,
            gpus=8,
            gpu_model="NVIDIA B200",
            gpu_memory_mib=183359,
            max_efa_interfaces=8,
            network_cards=8,
            network_gbps=3200,
            local_nvme_gb=30400,
            price_per_hour=113.9328,
            sources=_ACCEL,
            allocatable_cpu_m=191450,
            allocatable_memory_mib=1937332,
        ),
        InstanceType(
            name="g4dn.xlarge",
            vcpus=4,
            memory_mib=16384,
            gpus=1,
            gpu_model="NVIDIA T4",
            gpu_memory_mib=16384,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=5,
            local_nvme_gb=125,
            price_per_hour=0.526,
            sources=_ACCEL,
            allocatable_cpu_m=3920,
            allocatable_memory_mib=14481,
        ),
        InstanceType(
            name="g5.xlarge",
            vcpus=4,
            memory_mib=16384,
            gpus=1,
            gpu_model="NVIDIA A10G",
            gpu_memory_mib=22888,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=2.5,
            local_nvme_gb=250,
            price_per_hour=1.006,
            sources=_ACCEL,
            allocatable_cpu_m=3920,
            allocatable_memory_mib=14162,
        ),
        InstanceType(
            name="g5.12xlarge",
            vcpus=48,
            memory_mib=196608,
            gpus=4,
            gpu_model="NVIDIA A10G",
            gpu_memory_mib=22888,
            max_efa_interfaces=1,
            network_cards=1,
            network_gbps=40,
            local_nvme_gb=3800,
            price_per_hour=5.672,
            sources=("ec2-g5", "ec2-accelerated-specs"),
        ),
        InstanceType(
            name="g5.48xlarge",
            vcpus=192,
            memory_mib=786432,
            gpus=8,
            gpu_model="NVIDIA A10G",
            gpu_memory_mib=22888,
            max_efa_interfaces=1,
            network_cards=1,
            network_gbps=100,
            local_nvme_gb=7600,
            price_per_hour=16.288,
            sources=_ACCEL,
            allocatable_cpu_m=191450,
            allocatable_memory_mib=723299,
        ),
        InstanceType(
            name="g6.xlarge",
            vcpus=4,
            memory_mib=16384,
            gpus=1,
            gpu_model="NVIDIA L4",
            gpu_memory_mib=22888,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=2.5,
            local_nvme_gb=250,
            price_per_hour=0.8048,
            sources=_ACCEL,
            allocatable_cpu_m=3920,
            allocatable_memory_mib=14162,
        ),
        InstanceType(
            name="g6.48xlarge",
            vcpus=192,
            memory_mib=786432,
            gpus=8,
            gpu_model="NVIDIA L4",
            gpu_memory_mib=22888,
            max_efa_interfaces=1,
            network_cards=1,
            network_gbps=100,
            local_nvme_gb=7520,
            price_per_hour=13.3504,
            sources=_ACCEL,
            allocatable_cpu_m=191450,
            allocatable_memory_mib=718987,
        ),
        InstanceType(
            name="g6e.48xlarge",
            vcpus=192,
            memory_mib=1572864,
            gpus=8,
            gpu_model="NVIDIA L40S",
            gpu_memory_mib=45776,
            max_efa_interfaces=4,
            network_cards=4,
            network_gbps=400,
            local_nvme_gb=7600,
            price_per_hour=30.13118,
            sources=_ACCEL,
            allocatable_cpu_m=191450,
            allocatable_memory_mib=1449132,
        ),
        InstanceType(
            name="c5.4xlarge",
            vcpus=16,
            memory_mib=32768,
            gpus=0,
            gpu_model=None,
            gpu_memory_mib=None,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=5,
            local_nvme_gb=0,
            price_per_hour=0.68,
            sources=("ec2-compute-specs", "karpenter-instance-types", "ec2-on-demand-prices"),
            allocatable_cpu_m=15890,
            allocatable_memory_mib=27381,
        ),
        InstanceType(
            name="m5.large",
            vcpus=2,
            memory_mib=8192,
            gpus=0,
            gpu_model=None,
            gpu_memory_mib=None,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=0.75,
            local_nvme_gb=0,
            price_per_hour=0.096,
            sources=("ec2-m5", "ec2-general-specs", "ec2-on-demand-prices"),
        ),
        InstanceType(
            name="m5.xlarge",
            vcpus=4,
            memory_mib=16384,
            gpus=0,
            gpu_model=None,
            gpu_memory_mib=None,
            max_efa_interfaces=0,
            network_cards=1,
            network_gbps=1.25,
            local_nvme_gb=0,
            price_per_hour=0.192,
            sources=("ec2-m5", "ec2-general-specs", "ec2-on-demand-prices"),
        ),
    )
}


#: Pods a node of each type can run with the VPC CNI (one IP per pod): ``ENIs x (IPv4 per ENI - 1) + 2``, the EKS AMI's
#: table (source key ``eks-ami-eni-max-pods``; for multi-card types it counts the default network card only).
#: :func:`components.nodeplan.max_pods` caps it as managed node groups do.
ENI_MAX_PODS: Mapping[str, int] = {
    "p3.2xlarge": 58,
    "p3.16xlarge": 234,
    "p3dn.24xlarge": 737,
    "p4d.24xlarge": 737,
    "p4de.24xlarge": 737,
    "p5.48xlarge": 100,
    "p5e.48xlarge": 100,
    "p5en.48xlarge": 198,
    "p6-b200.48xlarge": 198,
    "g4dn.xlarge": 29,
    "g5.xlarge": 58,
    "g5.12xlarge": 737,
    "g5.48xlarge": 345,
    "g6.xlarge": 58,
    "g6.48xlarge": 737,
    "g6e.48xlarge": 492,
    "c5.4xlarge": 234,
    "m5.large": 29,
    "m5.xlarge": 58,
}


@dataclass(frozen=True)
class Catalog:
    """The instance types a stack sees: the built-in ones plus any the stack describes."""

    instance_types: Mapping[str, InstanceType]

    @staticmethod
    def builtin() -> "Catalog":
        """The catalog without user facts."""
        return Catalog(dict(INSTANCE_TYPES))

    def get(self, name: str) -> Optional[InstanceType]:
        """Facts for ``name``, or ``None`` when unknown."""
        return self.instance_types.get(name)

    def require(self, name: str) -> InstanceType:
        """Facts for ``name``; raises ``KeyError`` naming the known types when unknown."""
        it = self.instance_types.get(name)
        if it is None:
            raise KeyError(f"unknown instance type {name!r}; known: {', '.join(sorted(self.instance_types))}")
        return it
