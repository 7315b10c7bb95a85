"""What is tested is what ships, read from the torch the tests run: its release and build are the ones the training
image installs where it has the GPU kernels (components/catalog/torch.py), the release honours the stop setting the
pods carry, the image's search for the CUDA runtime finds the wheel's one file, and the requirements' install keeps
the torch build (run with pip against stand-in wheels)."""

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
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
    components/workloads/pytorch.py sets it from the grace period): read by the installed release's launcher."""
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


#: The torch build the image installs first, as pip names it (PyTorch's index gives builds a local version label).
IMAGE_TORCH = f"{TORCH_VERSION}+cu126"


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (), module: str = "") -> None:
    """A wheel of ``name`` ``version`` that needs ``requires``, with ``module`` holding ``__version__``."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    if module:
        files[f"{module}/__init__.py"] = f"__version__ = {version!r}\n"
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)


def _image_venv(tmp_path: Path, extra: str) -> tuple[Path, dict[str, str]]:
    """A virtualenv holding the image's torch build (a stand-in wheel), and the environment the requirements'
    ``RUN`` sees: pip reads stand-ins of training/requirements.txt's packages, ``extra`` (a requirement line a
    user adds) and torch 2.14.0 from a local folder, not PyPI."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    lines = (REPO / "training" / "requirements.txt").read_text().splitlines()
    modules = {"python-etcd": "etcd"}
    for line in [ln for ln in lines if ln.strip() and not ln.startswith("#")]:
        req = Requirement(line)
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        version = pinned[0] if pinned else next(v for v in ("2.0.0", "1.26.0") if req.specifier.contains(v))
        _wheel(wheels, req.name, version, module=modules.get(req.name, req.name))
    _wheel(wheels, "needs-torch", "1.0", ("torch",), module="needs_torch")
    _wheel(wheels, "needs-newer-torch", "1.0", ("torch>=2.14",), module="needs_newer_torch")
    _wheel(wheels, "torch", "2.14.0", module="torch")
    _wheel(wheels, "torch", IMAGE_TORCH, module="torch")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=patient(120))
    # the venv's pip is the tests' own, pointed at it (pip --python): no copy of pip installed per test
    shim = venv / "bin" / "pip"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m pip --python {venv / "bin" / "python"} "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(["pip", "install", "-q", f"torch=={IMAGE_TORCH}"], env=env, check=True, timeout=patient(120))
    (tmp_path / "requirements.txt").write_text("\n".join([*lines, extra, ""]))
    return venv, env


def _requirements_step(tmp_path: Path, env: dict[str, str], *, constraint: bool = True) -> subprocess.CompletedProcess:
    """The Dockerfile's ``RUN`` that installs requirements.txt, with its /tmp/ files in ``tmp_path``."""
    runs = [a for w, a in dockerfile_instructions((REPO / "training" / "Dockerfile").read_text()) if w == "RUN"]
    (step,) = [r for r in runs if "/tmp/requirements.txt" in r]
    if not constraint:
        step = step.replace(" -c /tmp/torch.txt", "")
    return subprocess.run(
        ["bash", "-ec", step.replace("/tmp/", f"{tmp_path}/")],
        env=env,
        capture_output=True,
        text=True,
        timeout=patient(300),
    )


def _torch_in(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_package_a_copy_adds_that_needs_torch_keeps_the_images_build(tmp_path: Path) -> None:
    """The requirements' ``RUN``, run with pip: a package that needs torch installs beside the build the image
    installed first (PyTorch's CUDA 12.6 build for V100s), which stays."""
    venv, env = _image_venv(tmp_path, "needs-torch")
    done = _requirements_step(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert _torch_in(venv) == IMAGE_TORCH
    assert f"torch {IMAGE_TORCH}" in done.stdout


@pytest.mark.parametrize("constraint", [True, False], ids=["as-shipped", "without-the-constraint"])
def test_a_package_that_needs_another_torch_release_stops_the_build(tmp_path: Path, constraint: bool) -> None:
    """A package that needs another torch release stops the build: pip refuses it, as the constraint holds torch
    at the image's build. Without the constraint pip would replace the build, and the check after it stops the
    build instead (the second guard)."""
    venv, env = _image_venv(tmp_path, "needs-newer-torch")
    done = _requirements_step(tmp_path, env, constraint=constraint)
    assert done.returncode != 0
    if constraint:
        said = done.stdout + done.stderr  # pip explains the conflict on stdout
        assert "needs-newer-torch" in said and f"(constraint) torch=={IMAGE_TORCH}" in said, said
        assert _torch_in(venv) == IMAGE_TORCH
    else:
        assert "torch replaced" in done.stderr and _torch_in(venv) == "2.14.0", done.stderr
