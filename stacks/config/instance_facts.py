"""Facts for instance types the catalog lacks (``instanceFacts.<type>``)."""

from typing import Optional

from pydantic import Field, model_validator

from components.catalog import InstanceType
from components.catalog.gpus import GPU_MODELS
from stacks.config.base import Model, Number
from stacks.config.errors import check

#: Each field of ``instanceFacts.<type>``: its unit, and where ``aws ec2 describe-instance-types`` reports it (the
#: README's table of these fields is generated from this mapping, which covers every field of the model).
FACT_FIELDS: dict[str, tuple[str, str]] = {
    "vcpus": ("vCPUs", "`VCpuInfo.DefaultVCpus`"),
    "memoryMib": ("MiB (1 GiB = 1024 MiB)", "`MemoryInfo.SizeInMiB`"),
    "gpus": ("NVIDIA GPUs per instance", "`GpuInfo.Gpus[].Count`"),
    "gpuModel": ("text, e.g. `NVIDIA H100`", "`GpuInfo.Gpus[].Manufacturer` and `.Name`"),
    "gpuMemoryMib": ("MiB per GPU", "`GpuInfo.Gpus[].MemoryInfo.SizeInMiB`"),
    "maxEfaInterfaces": ("EFA interfaces per instance (0: no EFA)", "`NetworkInfo.EfaInfo.MaximumEfaInterfaces`"),
    "networkCards": ("network cards (an EFA type has one interface per card)", "`NetworkInfo.MaximumNetworkCards`"),
    "networkGbps": (
        "Gbit/s, baseline (8 Gbit/s = 1 GB/s)",
        "`NetworkInfo.NetworkCards[].BaselineBandwidthInGbps`, summed",
    ),
    "localNvmeGb": ("GB of instance store", "`InstanceStorageInfo.TotalSizeInGB`"),
    "pricePerHour": (
        "USD per hour, On-Demand Linux in us-east-1 (the estimate's prices)",
        "not in the API: https://aws.amazon.com/ec2/pricing/on-demand/",
    ),
    "source": ("text: where the facts come from", "-"),
}

#: Memory per vCPU of EC2 instance types, MiB: from t3.nano's 0.5 GiB for 2 vCPUs to u-24tb1.112xlarge's 24576 GiB
#: for 448 vCPUs (about 55 GiB; source keys ``ec2-general-specs``, ``ec2-memory-specs``), with a margin.
MIN_MIB_PER_VCPU = 256
MAX_MIB_PER_VCPU = 64 * 1024
#: Memory of one GPU, MiB: below 1 GiB or above 512 GiB no GPU exists (the catalog's range is 16 to 179 GiB).
MIN_GPU_MIB = 1024
MAX_GPU_MIB = 512 * 1024


def _unit_guess(value: int, per: int, low: float, high: float) -> str:
    """``did you write GiB? ...`` when reading ``value`` in another unit brings ``value / per`` MiB into [low, high]."""
    for unit, mib in (("GiB", value * 1024), ("KiB", value / 1024), ("bytes", value / (1 << 20))):
        if low <= mib / per <= high:
            return f"did you write {unit}? {value} {unit} is {mib:g} MiB; "
    return ""


def _catalogued_model(written: str) -> Optional[str]:
    """The catalogued GPU model ``written`` misspells (``H100`` or ``nvidia h100`` for ``NVIDIA H100``), or ``None``:
    it is one, or names a GPU the catalog does not know (whose facts the rules then lack)."""
    if written in GPU_MODELS:
        return None
    squashed = "".join(written.lower().split())
    for name in GPU_MODELS:
        full = "".join(name.lower().split())
        if squashed in (full, full.removeprefix("nvidia")) or squashed == "nvidia" + full.removeprefix("nvidia"):
            return name
    return None  # (not a close match: NVIDIA B300, GB200, H800, A10... are other GPUs, one character apart)


class InstanceFactsConfig(Model):
    """Facts for an instance type the built-in catalog does not know (key ``instanceFacts.<type>``).

    Units: memory in MiB as the EC2 API reports it, network bandwidth in Gbit/s, NVMe in GB, price in
    USD per hour."""

    vcpus: int = Field(ge=1)
    """vCPUs (VCpuInfo.DefaultVCpus)."""
    memory_mib: int = Field(ge=512)
    """Memory in MiB (MemoryInfo.SizeInMiB), 0.25-64 GiB per vCPU, else an error naming the unit."""
    gpus: int = Field(default=0, ge=0)
    """NVIDIA GPUs."""
    gpu_model: Optional[str] = None
    """The GPU's name, e.g. "NVIDIA H100" (its architecture decides the CUDA targets an image must have)."""
    gpu_memory_mib: Optional[int] = None
    """Memory per GPU in MiB, 1024-524288."""
    max_efa_interfaces: int = Field(default=0, ge=0)
    """EFA interfaces (NetworkInfo.EfaInfo.MaximumEfaInterfaces); 0 means no EFA."""
    network_cards: int = Field(default=1, ge=1)
    """Network cards (NetworkInfo.MaximumNetworkCards); must equal maxEfaInterfaces on EFA types."""
    network_gbps: Number = Field(default=10, gt=0)
    """Baseline network bandwidth in Gbit/s."""
    local_nvme_gb: int = Field(default=0, ge=0)
    """Instance store in GB."""
    price_per_hour: Optional[Number] = Field(default=None, ge=0)
    """USD per hour On-Demand Linux in us-east-1, the cost estimate's price; without it the estimate has no price
    for the type."""
    source: str = Field(min_length=3)
    """Where the facts come from (a URL or the command that reported them)."""

    @model_validator(mode="after")
    def _consistent(self) -> "InstanceFactsConfig":
        problems = []
        if self.max_efa_interfaces and self.max_efa_interfaces != self.network_cards:
            problems.append(
                (
                    "maxEfaInterfaces",
                    f"{self.max_efa_interfaces} != @{{networkCards}} ({self.network_cards}): an EFA node gets one EFA "
                    "interface per network card; give EC2's NetworkInfo.EfaInfo.MaximumEfaInterfaces and "
                    "NetworkInfo.MaximumNetworkCards (aws ec2 describe-instance-types)",
                )
            )
        if self.gpu_memory_mib is not None and not self.gpus:
            problems.append(("gpuMemoryMib", "set without gpus; give the GPU count too, or remove it"))
        if self.gpus and self.gpu_model is None:
            problems.append(
                (
                    "gpuModel",
                    f"required with gpus ({self.gpus}): the GPU decides which CUDA build runs on it; give one of "
                    f"{', '.join(GPU_MODELS)} (GpuInfo.Gpus[].Manufacturer and Name)",
                )
            )
        elif self.gpu_model is not None and not self.gpus:
            problems.append(("gpuModel", "set without gpus; give the GPU count too, or remove it"))
        elif self.gpu_model is not None and (meant := _catalogued_model(self.gpu_model)) is not None:
            problems.append(
                (
                    "gpuModel",
                    f"{self.gpu_model!r} is not how the catalog names a GPU, so its compute capability (which CUDA "
                    f"build runs on it) would be unknown; did you mean {meant!r}? (GpuInfo.Gpus[].Manufacturer and "
                    "Name, with a space)",
                )
            )
        per_vcpu = self.memory_mib / self.vcpus
        if not MIN_MIB_PER_VCPU <= per_vcpu <= MAX_MIB_PER_VCPU:
            problems.append(
                (
                    "memoryMib",
                    f"{self.memory_mib} MiB for {self.vcpus} vCPUs is {per_vcpu:g} MiB per vCPU, and EC2 types "
                    f"have {MIN_MIB_PER_VCPU / 1024:g} to {MAX_MIB_PER_VCPU / 1024:g} GiB per vCPU; "
                    f"{_unit_guess(self.memory_mib, self.vcpus, MIN_MIB_PER_VCPU, MAX_MIB_PER_VCPU)}the value is in "
                    "MiB (MemoryInfo.SizeInMiB of aws ec2 describe-instance-types)",
                )
            )
        if self.gpu_memory_mib is not None and not MIN_GPU_MIB <= self.gpu_memory_mib <= MAX_GPU_MIB:
            problems.append(
                (
                    "gpuMemoryMib",
                    f"{self.gpu_memory_mib} MiB per GPU is outside the {MIN_GPU_MIB} to {MAX_GPU_MIB} MiB "
                    f"of any GPU; {_unit_guess(self.gpu_memory_mib, 1, MIN_GPU_MIB, MAX_GPU_MIB)}the value is in MiB "
                    "per GPU (GpuInfo.Gpus[].MemoryInfo.SizeInMiB)",
                )
            )
        check(problems)
        return self

    def to_instance_type(self, name: str) -> InstanceType:
        """The catalog row these facts describe."""
        return InstanceType(
            name=name,
            vcpus=self.vcpus,
            memory_mib=self.memory_mib,
            gpus=self.gpus,
            gpu_model=self.gpu_model,
            gpu_memory_mib=self.gpu_memory_mib,
            max_efa_interfaces=self.max_efa_interfaces,
            network_cards=self.network_cards,
            network_gbps=self.network_gbps,
            local_nvme_gb=self.local_nvme_gb,
            price_per_hour=self.price_per_hour,
            sources=(f"stack config: {self.source}",),
        )
