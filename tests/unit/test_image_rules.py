"""Image build rules over every Dockerfile of the repository (no Docker engine here: the rules a build and a GPU
would enforce, written down with their sources and checked on the files):

* no step installs packages without a package index: ``apt-get install``, or an installer the catalog knows calls
  it (``INSTALLERS_USING_APT``: the EFA installer), after ``/var/lib/apt/lists`` was removed or before any
  ``apt-get update`` ("Unable to locate package");
* every ``FROM`` is pinned by digest;
* every CUDA compilation states its targets, and covers the compute capability (``components/catalog/gpus.py``) of
  every GPU of every stack, benchmark experiments included, whose jobs run that image ("no kernel image is
  available"); a stack whose group's GPU an image does not cover fails validation naming the job, the image and the
  GPU;
* an image an MPI job runs says where its Open MPI is (``ENV OPAL_PREFIX``), and that folder is on its ``PATH``.

Each rule is also run on the bug it was written for, put back into the real file, and must report it.
"""

import re
from pathlib import Path

import pytest

from components.catalog import INSTANCE_TYPES
from components.catalog.charts import INSTALLERS_USING_APT
from components.catalog.gpus import GPU_MODELS, compute_capability, runs_on
from components.image.dockerfile import Dockerfile, package_index_problems
from stacks.config import ConfigError, load_config
from stacks.plan import build_plan
from stacks.stackfile import use_stack_config
from tests.harness import PROJECT, REPO, stack_config, stack_names
from tests.image_support import base_images, repository_dockerfiles


NCCL_TESTS = REPO / "images" / "nccl-tests" / "Dockerfile"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _id(path: Path) -> str:
    return path.parent.relative_to(REPO).as_posix()


@pytest.mark.parametrize("path", repository_dockerfiles(), ids=_id)
def test_no_package_is_installed_without_a_package_index(path: Path) -> None:
    assert package_index_problems(Dockerfile.read(path), INSTALLERS_USING_APT) == []


def test_the_package_index_rule_finds_the_nccl_tests_bug() -> None:
    """The nccl-tests image as it was: the lists removed, then the EFA installer (which runs apt-get install)."""
    text = NCCL_TESTS.read_text()
    broken = text.replace("RUN apt-get update \\\n    && curl -fsSL", "RUN curl -fsSL", 1)
    assert broken != text
    (problem,) = package_index_problems(Dockerfile(NCCL_TESTS, broken), INSTALLERS_USING_APT)
    assert "efa_installer.sh" in problem and "without a package index" in problem
    # and apt-get install itself, after the lists are gone
    bare = Dockerfile(
        NCCL_TESTS,
        "FROM x@sha256:" + "0" * 64 + "\nRUN apt-get update && rm -rf /var/lib/apt/lists/*\n"
        "RUN apt-get install -y curl\n",
    )
    assert len(package_index_problems(bare, INSTALLERS_USING_APT)) == 1


@pytest.mark.parametrize("path", repository_dockerfiles(), ids=_id)
def test_every_base_image_is_pinned_by_digest(path: Path) -> None:
    bases = base_images(path.read_text())
    assert bases and [b for b in bases if not DIGEST.search(b)] == [], path


def _stack_plans():  # type: ignore[no-untyped-def]
    for stack in stack_names():
        use_stack_config(stack_config(stack))
        yield stack, build_plan(load_config(PROJECT, stack))


def test_every_gpu_model_of_the_catalog_has_a_compute_capability() -> None:
    models = {t.gpu_model for t in INSTANCE_TYPES.values() if t.is_gpu}
    assert models <= set(GPU_MODELS), models - set(GPU_MODELS)


def test_cuda_compatibility_rules() -> None:
    """The CUDA C++ Programming Guide's binary and PTX compatibility (source key ``cuda-compatibility``)."""
    nccl = {t for _, ts in Dockerfile.read(NCCL_TESTS).cuda_compilations() for t in ts}
    sm80 = {t for t in nccl if str(t) == "sm_80"}
    assert runs_on(sm80, (8, 0)) and runs_on(sm80, (8, 6)) and not runs_on(sm80, (9, 0)) and not runs_on(sm80, (7, 0))
    ptx = {t for t in nccl if str(t) == "compute_100"}
    assert runs_on(ptx, (12, 0)) and not runs_on(ptx, (9, 0))


@pytest.mark.parametrize("path", repository_dockerfiles(), ids=_id)
def test_every_cuda_compilation_states_its_targets(path: Path) -> None:
    for run, targets in Dockerfile.read(path).cuda_compilations():
        assert targets, f"{path}: a CUDA compilation without -gencode targets: {run[:120]}"


def test_every_cuda_compilation_covers_every_gpu_its_stacks_run_it_on() -> None:
    checked = set()
    for stack, plan in _stack_plans():
        for job in plan.jobs.values():
            if job.image.context is None:
                continue
            compilations = Dockerfile.read(job.image.context / job.image.dockerfile).cuda_compilations()
            for t in job.group.types:
                facts = t
                if not facts.is_gpu:
                    continue
                cc = compute_capability(facts.gpu_model)
                assert cc is not None, f"{stack}: {facts.gpu_model}"
                for _, targets in compilations:
                    assert runs_on(targets, cc), (
                        f"{stack}/{job.name}: {job.image.name} has no kernel for {facts.gpu_model} {cc}"
                    )
                    checked.add((job.image.name, facts.gpu_model))
    # nccl-tests runs on V100 (mpi-horovod) and L4 (benchmark)
    assert {("nccl-tests", "NVIDIA V100"), ("nccl-tests", "NVIDIA L4")} <= checked


def test_a_stack_whose_gpu_an_image_does_not_cover_fails_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nccl-tests image as it was (sm_80..sm_100, no PTX) on the mpi-horovod preset's p3.16xlarge (V100, 7.0)."""
    text = NCCL_TESTS.read_text()
    old = re.sub(
        r'ARG NVCC_GENCODE="[^"]*"',
        'ARG NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 '
        '-gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_89,code=sm_89 '
        '-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100"',
        text,
    )
    assert old != text
    import stacks.config.rules as rules

    real = rules.read_dockerfile
    monkeypatch.setattr(
        rules,
        "read_dockerfile",
        lambda ctx, name="Dockerfile": (
            Dockerfile(NCCL_TESTS, old) if Path(ctx).name == "nccl-tests" else real(ctx, name)
        ),
    )
    use_stack_config(stack_config("mpi-horovod"))
    with pytest.raises(ConfigError) as exc:
        load_config(PROJECT, "mpi-horovod")
    (problem,) = exc.value.problems
    assert problem.startswith("eks-training:jobs.nccl.image: job nccl runs image 'nccl-tests'")
    assert "NVIDIA V100" in problem and "compute capability 7.0" in problem and "p3.16xlarge" in problem
    assert "-gencode=arch=compute_70,code=sm_70" in problem


def test_every_mpi_image_says_where_its_open_mpi_is() -> None:
    """The launcher runs ``$OPAL_PREFIX/bin/mpirun`` (see tests/real/test_mpi_sshd_real.py for what that does over ssh),
    and the image's own PATH reaches that mpirun too."""
    seen = set()
    for _, plan in _stack_plans():
        for job in plan.jobs.values():
            if job.kind != "mpi":
                continue
            assert job.image.mpi_prefix, job.name
            env = Dockerfile.read(job.image.context / job.image.dockerfile).env() if job.image.context else {}
            if env:
                assert env["OPAL_PREFIX"] == job.image.mpi_prefix
            seen.add(job.image.name)
    assert seen == {"nccl-tests", "horovod"}


def test_an_mpi_image_without_its_open_mpi_prefix_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = stack_config("mpi-horovod")
    cfg[f"{PROJECT}:images"] = {
        "nccl-tests": {"prebuilt": "123456789012.dkr.ecr.us-east-1.amazonaws.com/nccl:1"},
        "horovod": {"context": "images/horovod"},
    }
    use_stack_config(cfg)
    with pytest.raises(ConfigError) as exc:
        load_config(PROJECT, "mpi-horovod")
    (problem,) = exc.value.problems
    assert problem.startswith("eks-training:images.nccl-tests.mpiPrefix: MPI job nccl")
    cfg[f"{PROJECT}:images"]["nccl-tests"]["mpiPrefix"] = "/opt/amazon/openmpi"
    use_stack_config(cfg)
    assert build_plan(load_config(PROJECT, "mpi-horovod")).images["nccl-tests"].mpi_prefix == "/opt/amazon/openmpi"
