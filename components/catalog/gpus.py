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


def _gpu(name: str, major: int, minor: int) -> GpuModel:
    return GpuModel(name=name, compute_capability=(major, minor), source="nvidia-compute-capabilities")


#: Compute capability of every GPU model the instance catalog names (NVIDIA's table, source key
#: ``nvidia-compute-capabilities``). ``tests/test_catalog.py`` checks that every GPU model in the instance
#: catalog is here.
GPU_MODELS: Mapping[str, GpuModel] = {
    g.name: g
    for g in (
        _gpu("NVIDIA V100", 7, 0),
        _gpu("NVIDIA T4", 7, 5),
        _gpu("NVIDIA A100", 8, 0),
        _gpu("NVIDIA A10G", 8, 6),
        _gpu("NVIDIA L4", 8, 9),
        _gpu("NVIDIA L40S", 8, 9),
        _gpu("NVIDIA H100", 9, 0),
        _gpu("NVIDIA H200", 9, 0),
        _gpu("NVIDIA B200", 10, 0),
    )
}


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
