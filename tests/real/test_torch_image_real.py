"""What is tested is what ships, read from the torch the tests run: its release and build are the ones the training
image installs where it has the GPU kernels (components/catalog/torch.py), the release honours the stop setting the
pods carry, and the image's search for the CUDA runtime finds the wheel's one file."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.distributed.launcher.api import LaunchConfig

from components.catalog.torch import DEFAULT_TORCH_BUILD, PYPI_INDEX, TORCH_BUILDS, TORCH_VERSION
from tests.harness import REPO
from tests.image_support import dockerfile_instructions
from tests.wait import patient


def test_the_tests_run_the_torch_release_the_image_installs() -> None:
    assert torch.__version__.split("+")[0] == TORCH_VERSION


def test_the_tests_run_the_default_build_and_its_kernels_are_the_catalogs() -> None:
    """``.ci/run`` installs PyPI's wheel, the default build: its CUDA version and compiled GPU targets are the ones the
    catalog lists, read from the wheel itself (the image build checks the same for every build it installs)."""
    build = TORCH_BUILDS[DEFAULT_TORCH_BUILD]
    assert build.index_url == PYPI_INDEX
    if torch.version.cuda is None:
        pytest.skip("torch here is a CPU build (PyTorch's CPU index); .ci/run installs PyPI's CUDA build")
    assert torch.version.cuda == build.cuda
    assert torch._C._cuda_getArchFlags().split() == build.arch_flags.split()


def test_the_release_honours_the_shutdown_timeout_the_pods_set() -> None:
    """torchrun's wait for its workers after a stop follows ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` (from torch 2.12;
    components/workloads/training.py sets it from the grace period): read by the installed release's launcher."""
    import os

    before = os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
    os.environ["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = "285"
    try:
        assert LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=1).shutdown_timeout == 285
    finally:
        if before is None:
            del os.environ["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"]
        else:
            os.environ["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = before


def test_the_images_cuda_runtime_search_finds_the_wheels_one_file(tmp_path: Path) -> None:
    """The Dockerfile's ``RUN`` that names the wheel's CUDA runtime ``libcudart.so`` for the OFI NCCL plugin, run
    with the Python the tests use (the default build's layout, nvidia/cu13/lib): it finds exactly one file, of the
    wheel's CUDA major version, and the name it links loads."""
    if torch.version.cuda is None:
        pytest.skip("torch here is a CPU build (PyTorch's CPU index) without a CUDA runtime; .ci/run installs PyPI's")
    runs = [a for w, a in dockerfile_instructions((REPO / "training" / "Dockerfile").read_text()) if w == "RUN"]
    (step,) = [r for r in runs if "libcudart.so" in r and "ln -s" in r]
    target = tmp_path / "cudart"
    bin_dir = Path(sys.executable).parent  # the venv's: `python` there is the tests' interpreter, as in the image
    done = subprocess.run(
        ["bash", "-ec", step.replace("/opt/cudart", str(target))],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=patient(120),
    )
    assert done.returncode == 0, done.stderr
    link = target / "libcudart.so"
    real = link.resolve()
    assert real.is_file() and re.fullmatch(rf"libcudart\.so\.{torch.version.cuda.split('.')[0]}", real.name), real
    loaded = subprocess.run(
        [sys.executable, "-c", "import ctypes; ctypes.CDLL('libcudart.so')"],
        env={**os.environ, "LD_LIBRARY_PATH": str(target)},
        capture_output=True,
        text=True,
        timeout=patient(60),
    )
    assert loaded.returncode == 0, loaded.stderr
