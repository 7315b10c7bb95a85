"""Facts for instance types the catalog lacks (``instanceFacts.<type>``)."""

from typing import Optional

from pydantic import Field, model_validator

from components.catalog import InstanceType
from stacks.config.base import Model
from stacks.config.errors import check


class InstanceFactsConfig(Model):
    """Facts for an instance type the built-in catalog does not know (key ``instanceFacts.<type>``).

    Units: memory in MiB as the EC2 API reports it, network bandwidth in Gbit/s, NVMe in GB, price in
    USD per hour."""

    vcpus: int = Field(ge=1)
    memory_mib: int = Field(ge=512)
    gpus: int = Field(default=0, ge=0)
    gpu_model: Optional[str] = None
    gpu_memory_mib: Optional[int] = None
    max_efa_interfaces: int = Field(default=0, ge=0)
    network_cards: int = Field(default=1, ge=1)
    network_gbps: float = Field(default=10, gt=0)
    local_nvme_gb: int = Field(default=0, ge=0)
    price_per_hour: Optional[float] = Field(default=None, ge=0)
    source: str = Field(min_length=3)

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
