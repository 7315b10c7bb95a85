"""What a GPU model can run: its CUDA compute capability, and which compiled code runs on it.

A CUDA binary holds machine code (cubin, ``sm_XY``) for some compute capabilities and PTX (``compute_XY``) for
others. The CUDA C++ Programming Guide's "Binary Compatibility" and "PTX Compatibility" rules (source key
``cuda-compatibility``): a cubin built for X.y runs on X.z with z >= y only (same major version, never across
majors); PTX built for X.y is compiled just in time for any device of compute capability X.y or higher. An
architecture-specific target (``sm_90a``, ``sm_100a``) runs on exactly that compute capability. A GPU none of a
binary's targets covers fails with "no kernel image is available for execution on the device".
"""

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional


@dataclass(frozen=True, kw_only=True)
class GpuModel:
    """One NVIDIA GPU model, named as the instance catalog names it (``InstanceType.gpu_model``)."""

    name: str
    compute_capability: tuple[int, int]
    """CUDA compute capability (major, minor)."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""
    peak_fp16_tflops: Optional[float] = None
    """Peak dense FP16 tensor-core throughput, teraFLOP/s, without structured sparsity (NVIDIA's datasheets print the
    sparse figure, twice this, for Ampere and later): the denominator of model FLOPs utilization for the bundled
    trainer, which trains in float16 autocast on GPUs. On every GPU here from Ampere on, BF16 has the same peak.
    ``None``: NVIDIA publishes no figure for the model."""
    peak_source: Optional[str] = None
    """Key of the datasheet :attr:`peak_fp16_tflops` and :attr:`link_gbytes_per_s` come from."""
    link_gbytes_per_s: Optional[float] = None
    """The GPU's link to the node's other GPUs, GB/s in both directions together, as its datasheet prints it: NVLink
    on SXM parts, PCIe on the others. An all-reduce inside one node cannot move data faster. ``None``: no datasheet."""


def _gpu(
    name: str,
    major: int,
    minor: int,
    peak: Optional[float] = None,
    source: Optional[str] = None,
    link: Optional[float] = None,
) -> GpuModel:
    return GpuModel(
        name=name,
        compute_capability=(major, minor),
        source="nvidia-compute-capabilities",
        peak_fp16_tflops=peak,
        peak_source=source,
        link_gbytes_per_s=link,
    )


#: Compute capability of every GPU model the instance catalog names (NVIDIA's table, source key
#: ``nvidia-compute-capabilities``). ``tests/unit/test_image_rules.py`` checks that every GPU model in the instance
#: catalog is here.
GPU_MODELS: Mapping[str, GpuModel] = {
    g.name: g
    for g in (
        # V100 SXM2 (p3): 125 TFLOPS "Tensor Performance" (FP16 mixed precision; Volta has no sparsity, no BF16);
        # NVLink 300 GB/s
        _gpu("NVIDIA V100", 7, 0, 125.0, "nvidia-v100-datasheet", 300.0),
        # T4 (g4dn): 65 TFLOPS mixed-precision (FP16/FP32); interconnect PCIe Gen3 x16, 32 GB/s
        _gpu("NVIDIA T4", 7, 5, 65.0, "nvidia-t4-datasheet", 32.0),
        # A100 SXM (p4d): BF16/FP16 Tensor Core 312 TFLOPS (624 with sparsity); NVLink 600 GB/s
        _gpu("NVIDIA A100", 8, 0, 312.0, "nvidia-a100-datasheet", 600.0),
        # A10G (g5): an AWS variant of the A10 with no NVIDIA datasheet of its own; the A10's figures do not hold for it
        _gpu("NVIDIA A10G", 8, 6),
        # L4 (g6): FP16/BF16 Tensor Core 242 TFLOPS with sparsity -> 121 dense; PCIe Gen4 x16, 64 GB/s
        _gpu("NVIDIA L4", 8, 9, 121.0, "nvidia-l4-datasheet", 64.0),
        # L40S (g6e): BF16/FP16 Tensor Core 362.05 TFLOPS (733 with sparsity); PCIe Gen4 x16, 64 GB/s
        _gpu("NVIDIA L40S", 8, 9, 362.05, "nvidia-l40s-datasheet", 64.0),
        # H100 SXM (p5): BF16/FP16 Tensor Core 1,979 TFLOPS with sparsity -> 989.5 dense; NVLink 900 GB/s
        _gpu("NVIDIA H100", 9, 0, 989.5, "nvidia-h100-datasheet", 900.0),
        # H200 SXM (p5e, p5en): BF16/FP16 Tensor Core 1,979 TFLOPS with sparsity -> 989.5 dense; NVLink 900 GB/s
        _gpu("NVIDIA H200", 9, 0, 989.5, "nvidia-h200-datasheet", 900.0),
        # B200 (p6-b200, HGX B200): FP16/BF16 Tensor Core 36 PFLOPS with sparsity for 8 GPUs -> 2,250 dense per GPU;
        # NVLink 1.8 TB/s per GPU
        _gpu("NVIDIA B200", 10, 0, 2250.0, "nvidia-hgx-b200-datasheet", 1800.0),
    )
}


#: NVIDIA's driver branches end older architectures: the 580 series is the last for GPUs below compute capability 7.5
#: (Maxwell, Pascal and Volta, the V100 of p3 and p3dn; source key ``nvidia-driver-deprecation``).
LAST_DRIVER_BRANCH_BELOW: Mapping[tuple[int, int], int] = {(7, 5): 580}


def last_driver_branch(capability: tuple[int, int]) -> Optional[int]:
    """The newest NVIDIA driver branch that supports a GPU of ``capability`` (``None``: every branch so far)."""
    ends = [branch for below, branch in LAST_DRIVER_BRANCH_BELOW.items() if capability < below]
    return min(ends) if ends else None


@dataclass(frozen=True)
class CudaTarget:
    """One ``-gencode`` target: machine code (``sm``) or PTX (``compute``) for a compute capability."""

    kind: str
    """``sm`` (cubin) or ``compute`` (PTX)."""
    capability: tuple[int, int]
    arch_specific: bool = False
    """``sm_90a``-style targets: this exact compute capability only."""

    def __str__(self) -> str:
        return f"{self.kind}_{self.capability[0]}{self.capability[1]}{'a' if self.arch_specific else ''}"


@dataclass(frozen=True, kw_only=True)
class GpuSupport:
    """The GPUs prebuilt GPU code supports (a framework image's TensorFlow, cuDNN, NCCL...), as its publisher states
    it: code nobody here compiles, so no ``-gencode`` target can be read; the publisher's statement is the fact."""

    min_compute_capability: tuple[int, int]
    """The lowest CUDA compute capability supported ("X.Y and later")."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES` (where the publisher states it)."""

    def supports(self, capability: tuple[int, int]) -> bool:
        """Whether a GPU of ``capability`` is one the publisher supports."""
        return capability >= self.min_compute_capability

    def __str__(self) -> str:
        return f"compute capability {self.min_compute_capability[0]}.{self.min_compute_capability[1]} and later"


def runs_on(targets: Iterable[CudaTarget], capability: tuple[int, int]) -> bool:
    """Whether code compiled for ``targets`` has a kernel a GPU of ``capability`` can run (source key
    ``cuda-compatibility``)."""
    for t in targets:
        if t.arch_specific:
            if t.capability == capability:
                return True
        elif t.kind == "sm":
            if t.capability[0] == capability[0] and t.capability[1] <= capability[1]:
                return True
        elif t.capability <= capability:
            return True
    return False


def compute_capability(gpu_model: Optional[str]) -> Optional[tuple[int, int]]:
    """The compute capability of a GPU model of the catalog (``None`` for a model it does not know)."""
    found = GPU_MODELS.get(gpu_model or "")
    return found.compute_capability if found else None


def peak_flops_per_device(gpu_models: Iterable[Optional[str]]) -> Optional[float]:
    """The peak dense FP16 FLOP/s of one GPU when every model given is the same model with a published peak (a node
    group of several types whose GPUs differ has no single peak); ``None`` otherwise."""
    models = set(gpu_models)
    if len(models) != 1:
        return None
    found = GPU_MODELS.get(next(iter(models)) or "")
    return found.peak_fp16_tflops * 1e12 if found and found.peak_fp16_tflops else None
