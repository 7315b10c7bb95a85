"""The PyTorch the bundled training image installs: one version, in the CUDA build that runs on the GPUs its jobs use.

The version is the one the tests run (``.ci/run`` installs it; ``tests/unit/test_torch_pin.py`` ties them), so
what torchrun does on a stop (``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``, read by torch >= 2.12) is what the real tier
measured. PyPI's Linux wheel is PyTorch's default CUDA build; PyTorch's own index serves the others. Builds of the
same release differ only in their compiled GPU code: torchrun, torch.distributed and the Python code are the same.
"""

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from components.catalog.gpus import CudaTarget, runs_on

#: The torch release every image variant installs (source keys ``torch-2.13.0``, ``pytorch-cuda-matrix-2.13``).
TORCH_VERSION = "2.13.0"


#: PyPI's simple index (pip's default; given explicitly, so every build names its index).
PYPI_INDEX = "https://pypi.org/simple"


def _sm(*capabilities: tuple[int, int]) -> tuple[CudaTarget, ...]:
    return tuple(CudaTarget("sm", c) for c in capabilities)


@dataclass(frozen=True, kw_only=True)
class TorchBuild:
    """One CUDA build of :data:`TORCH_VERSION` and the GPU code its wheel carries."""

    name: str
    """PyTorch's name for the build (``cu130``): the suffix of its local version and of its index."""
    cuda: str
    """``torch.version.cuda`` of the build."""
    index_url: str
    """The package index serving it (PyPI publishes only the default build)."""
    targets: tuple[CudaTarget, ...]
    """The compute capabilities its kernels are compiled for (``torch._C._cuda_getArchFlags()``); the image build
    stops when the wheel has others."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""
    min_driver: tuple[int, int, int]
    """The oldest NVIDIA driver its CUDA runtime runs on (minor version compatibility, source key
    ``cuda-driver-compatibility``): 580 for CUDA 13.x, 525.60.13 for CUDA 12.x."""

    @property
    def arch_flags(self) -> str:
        """The targets as ``torch._C._cuda_getArchFlags()`` prints them (``sm_75 sm_80 ...``)."""
        return " ".join(str(t) for t in self.targets)

    def runs_on(self, capability: tuple[int, int]) -> bool:
        """Whether the build has a kernel a GPU of ``capability`` runs (:func:`components.catalog.gpus.runs_on`)."""
        return runs_on(self.targets, capability)


#: The CUDA builds of :data:`TORCH_VERSION` the training image can install, in order of preference: the first is
#: PyPI's (what ``.ci/run`` installs and the tests run), the others only for GPUs it has no kernel for.
#: - ``cu130``: PyPI's Linux x86_64 wheel of 2.13.0 is the CUDA 13.0 build (``2.13.0+cu130``, NCCL 2.29.7 from
#:   ``nvidia-nccl-cu13``); its arch flags, read from the installed wheel, are sm_75 sm_80 sm_86 sm_90 sm_100
#:   sm_120 (source key ``torch-2.13.0``): Turing to Blackwell. CUDA 13 cannot build for Volta (source key
#:   ``cuda-13-volta``), so V100 (p3) has no kernel in it. Ada (sm_89, L4 and L40S) runs the sm_86 code.
#: - ``cu126``: the legacy CUDA 12.6 build of the same release, served by download.pytorch.org, covers Maxwell,
#:   Pascal, Volta, Turing, Ampere and Hopper (5.0, 6.0, 7.0, 7.5, 8.0, 8.6, 9.0), no Blackwell (source key
#:   ``pytorch-cuda-matrix-2.13``).
TORCH_BUILDS: Mapping[str, TorchBuild] = {
    b.name: b
    for b in (
        TorchBuild(
            name="cu130",
            cuda="13.0",
            index_url=PYPI_INDEX,
            targets=_sm((7, 5), (8, 0), (8, 6), (9, 0), (10, 0), (12, 0)),
            source="torch-2.13.0",
            min_driver=(580, 0, 0),
        ),
        TorchBuild(
            name="cu126",
            cuda="12.6",
            index_url="https://download.pytorch.org/whl/cu126",
            targets=_sm((5, 0), (6, 0), (7, 0), (7, 5), (8, 0), (8, 6), (9, 0)),
            source="pytorch-cuda-matrix-2.13",
            min_driver=(525, 60, 13),
        ),
    )
}
#: The build of PyPI, which the tests run and images without GPUs get.
DEFAULT_TORCH_BUILD = next(iter(TORCH_BUILDS))

#: The build arguments of a Dockerfile that installs :data:`TORCH_VERSION` in the build a plan chooses (the bundled
#: training image declares them with the default build's values): a Dockerfile that declares the first gets all.
TORCH_BUILD_ARGS: tuple[str, ...] = ("TORCH_INDEX_URL", "TORCH_VERSION", "TORCH_CUDA_VERSION", "TORCH_CUDA_ARCHS")


def declares_torch_build(build_args: Mapping[str, str]) -> bool:
    """Whether a Dockerfile whose ``ARG`` defaults are ``build_args`` takes the torch build arguments (the plan then
    builds it once per torch build its jobs' GPUs need)."""
    return TORCH_BUILD_ARGS[0] in build_args


def torch_build_for(capabilities: Iterable[tuple[int, int]]) -> Optional[TorchBuild]:
    """The first build of :data:`TORCH_BUILDS` with a kernel for every compute capability given (none given: the
    default build), or ``None`` when no build covers them all (a group mixing Volta and Blackwell GPUs)."""
    wanted = set(capabilities)
    return next((b for b in TORCH_BUILDS.values() if all(b.runs_on(c) for c in wanted)), None)


def torch_build_args(build: TorchBuild) -> dict[str, str]:
    """The values of :data:`TORCH_BUILD_ARGS` for ``build``: its index, the version, the CUDA version and the arch
    flags the image build checks the installed wheel against."""
    return {
        "TORCH_INDEX_URL": build.index_url,
        "TORCH_VERSION": TORCH_VERSION,
        "TORCH_CUDA_VERSION": build.cuda,
        "TORCH_CUDA_ARCHS": build.arch_flags,
    }


def torch_build_label(build: Optional[str]) -> Optional[str]:
    """How reports name a build: ``torch 2.13.0+cu130 (CUDA 13.0: sm_75 ... sm_120)``; ``None`` for ``None``."""
    if build is None:
        return None
    b = TORCH_BUILDS[build]
    return f"torch {TORCH_VERSION}+{b.name}, CUDA {b.cuda}: {b.arch_flags}"
