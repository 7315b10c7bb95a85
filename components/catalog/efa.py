"""EFA facts: huge pages, the NCCL/libfabric environment per instance family, published all-reduce figures."""

from dataclasses import dataclass
from typing import Mapping

#: The fastest GPU-to-GPU link of any catalogued type, GB/s per GPU (both directions together): fifth-generation
#: NVLink on B200, 1.8 TB/s (source key ``nvidia-nvlink``). Inside one node an all-reduce cannot move data faster.
FASTEST_GPU_LINK_GBYTES_PER_S = 1800.0

#: Huge pages an EFA pod requests: the EFA driver pre-allocates 5128 x 2 MiB (source key ``eks-efa``).
EFA_HUGEPAGES_2MI = "5120Mi"
#: 2 MiB huge pages the EFA driver pre-allocates on a node with EFA (source key ``eks-efa``): the node's
#: ``hugepages-2Mi`` capacity, which the kubelet takes off its allocatable memory.
EFA_PREALLOCATED_HUGEPAGES_2MI = 5128

#: NCCL / libfabric environment of pods on EFA nodes, common to every family (source keys
#: ``aws-ofi-nccl-env``, ``efa-cheatsheet``).
EFA_ENV_COMMON: Mapping[str, str] = {
    "FI_PROVIDER": "efa",
    "NCCL_SOCKET_IFNAME": "^lo,docker,veth",
    "NCCL_DEBUG": "WARN",
}
#: Per instance family. FI_EFA_USE_DEVICE_RDMA matters where the GPUs do GPUDirect RDMA over EFA
#: (p4d/p4de/p5/p5e/p5en/p6) and is harmless with newer aws-ofi-nccl; NCCL_SHM_USE_CUDA_MEMCPY=1
#: about doubles intra-node bandwidth on g5/g6/g6e (source keys ``aws-ofi-nccl-env``, ``efa-cheatsheet``). Every
#: family with EFA has a line, empty where those sources give it no variable of its own (p3dn).
EFA_ENV_BY_FAMILY: Mapping[str, Mapping[str, str]] = {
    "p3dn": {},
    "p4d": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p4de": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p5": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p5e": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p5en": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "p6-b200": {"FI_EFA_USE_DEVICE_RDMA": "1"},
    "g5": {"NCCL_SHM_USE_CUDA_MEMCPY": "1"},
    "g6": {"NCCL_SHM_USE_CUDA_MEMCPY": "1"},
    "g6e": {"NCCL_SHM_USE_CUDA_MEMCPY": "1"},
}


@dataclass(frozen=True, kw_only=True)
class AllReduceReference:
    """A published two-node all-reduce bus bandwidth (GB/s = 1e9 bytes/s) at one message size."""

    busbw_gbytes_per_s: float
    message_bytes: int
    source: str
    """Key of :data:`components.catalog.sources.SOURCES` and what was measured."""


#: Published two-node nccl-tests all_reduce_perf bus bandwidth with EFA. The health check measures
#: at the same message size and, when enforced, requires 80% of it.
REFERENCE_ALLREDUCE: Mapping[str, AllReduceReference] = {
    "p4de.24xlarge": AllReduceReference(
        busbw_gbytes_per_s=78.33, message_bytes=2 << 30, source="nccl-tests-results (2 x p4de, Slurm, 2 GiB)"
    ),
    "p5.48xlarge": AllReduceReference(
        busbw_gbytes_per_s=437.79, message_bytes=2 << 30, source="nccl-tests-results (2 x p5 on EKS, MPIJob, 2 GiB)"
    ),
}
