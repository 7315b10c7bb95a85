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
* the base an image builds on supports every GPU of every stack whose jobs run that image, where the catalog knows
  which GPUs the GPU code that base ships supports (``BaseImage.gpus``: NGC TensorFlow 25.02, 7.5 and later, so no
  V100); a stack that runs such an image on a GPU its base does not support fails validation the same way;
* an image an MPI job runs says where its Open MPI is (``ENV OPAL_PREFIX``), and that folder is on its ``PATH``.

Each rule is also run on the bug it was written for, put back into the real file, and must report it.
"""

import re
from pathlib import Path

import pytest

from components.catalog import INSTANCE_TYPES
from components.catalog.charts import BASE_IMAGES, INSTALLERS_USING_APT, base_image
from components.catalog.gpus import GPU_MODELS, compute_capability, runs_on
from components.image.dockerfile import Copy, Dockerfile, package_index_problems
from stacks.config import ConfigError, load_config
from stacks.plan import build_plan
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
        yield stack, build_plan(load_config(PROJECT, stack, stack_config(stack)))


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
    # nccl-tests runs on L4 (mpi-horovod's g6.48xlarge, benchmark's g6.xlarge)
    assert ("nccl-tests", "NVIDIA L4") in checked


def _on_p3(cfg: dict, *jobs: str) -> dict:
    """mpi-horovod as it shipped: its GPU group on p3.16xlarge (8 x V100, compute capability 7.0), with only
    ``jobs``."""
    cfg[f"{PROJECT}:nodeGroups"]["gpu"]["instanceTypes"] = ["p3.16xlarge"]
    cfg[f"{PROJECT}:jobs"] = {
        name: {k: v for k, v in job.items() if k != "after"}
        for name, job in cfg[f"{PROJECT}:jobs"].items()
        if name in jobs
    }
    return cfg


def test_a_stack_whose_gpu_an_image_does_not_cover_fails_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nccl-tests image as it was (sm_80..sm_100, no PTX) on p3.16xlarge (V100, 7.0), where the mpi-horovod
    preset ran it; the image as it is covers the V100."""
    text = NCCL_TESTS.read_text()
    old = re.sub(
        r'ARG NVCC_GENCODE="[^"]*"',
        'ARG NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 '
        '-gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_89,code=sm_89 '
        '-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100"',
        text,
    )
    assert old != text
    import stacks.config.rules.sections as rules

    real = rules.read_dockerfile
    cfg = _on_p3(stack_config("mpi-horovod"), "nccl")
    assert load_config(PROJECT, "mpi-horovod", cfg).jobs["nccl"].image == "nccl-tests"
    monkeypatch.setattr(
        rules,
        "read_dockerfile",
        lambda ctx, name="Dockerfile": (
            Dockerfile(NCCL_TESTS, old) if Path(ctx).name == "nccl-tests" else real(ctx, name)
        ),
    )
    with pytest.raises(ConfigError) as exc:
        load_config(PROJECT, "mpi-horovod", cfg)
    (problem,) = exc.value.problems
    assert problem.startswith("eks-training:jobs.nccl.image: job nccl runs image 'nccl-tests'")
    assert "NVIDIA V100" in problem and "compute capability 7.0" in problem and "p3.16xlarge" in problem
    assert "-gencode=arch=compute_70,code=sm_70" in problem


def test_every_base_supports_every_gpu_its_stacks_run_it_on() -> None:
    """Over every stack: the final base of every built image a job runs, where the catalog states which GPUs the GPU
    code that base ships supports, supports the GPU of every instance type of the job's group."""
    checked = set()
    for stack, plan in _stack_plans():
        for job in plan.jobs.values():
            if job.image.context is None:
                continue
            ref = Dockerfile.read(job.image.context / job.image.dockerfile).final_base()
            base = base_image(ref) if ref else None
            if base is None or base.gpus is None:
                continue
            for t in job.group.types:
                if not t.is_gpu:
                    continue
                cc = compute_capability(t.gpu_model)
                assert cc is not None, f"{stack}: {t.gpu_model}"
                assert base.gpus.supports(cc), (
                    f"{stack}/{job.name}: {job.image.name}'s base {ref} supports {base.gpus}, not {t.gpu_model} {cc}"
                )
                checked.add((job.image.name, t.gpu_model))
    # the Horovod image (NGC TensorFlow 25.02) runs on mpi-horovod's L4s
    assert ("horovod", "NVIDIA L4") in checked


def test_the_ngc_tensorflow_base_supports_no_volta() -> None:
    """NGC's containers from release 25.01 on support compute capability 7.5 and later (source key
    ``ngc-25.01-gpu-requirements``): the T4 (7.5) and later, not the V100 (7.0)."""
    gpus = BASE_IMAGES["tensorflow-25.02-tf2-py3"].gpus
    assert gpus is not None and gpus.source == "ngc-25.01-gpu-requirements"
    assert not gpus.supports(GPU_MODELS["NVIDIA V100"].compute_capability)
    assert all(gpus.supports(g.compute_capability) for name, g in GPU_MODELS.items() if name != "NVIDIA V100")


def test_a_stack_running_an_image_on_a_gpu_its_base_does_not_support_fails_validation() -> None:
    """mpi-horovod as it shipped: the Horovod image (NGC TensorFlow 25.02, 7.5 and later) on p3.16xlarge's V100s.
    Refused before the program registers anything, with one message naming the job, the image, the GPU and the
    fix (the cheapest catalogued 8-GPU type the base supports)."""
    with pytest.raises(ConfigError) as exc:
        load_config(PROJECT, "mpi-horovod", _on_p3(stack_config("mpi-horovod"), "nccl", "horovod"))
    (problem,) = exc.value.problems
    assert problem.startswith(
        "eks-training:jobs.horovod.image: job horovod runs image 'horovod', built on "
        f"{BASE_IMAGES['tensorflow-25.02-tf2-py3'].ref} (images/horovod/Dockerfile)"
    ), problem
    assert "compute capability 7.5 and later" in problem
    assert "not the NVIDIA V100 GPU (compute capability 7.0) of p3.16xlarge in node group gpu" in problem
    assert "such as g6.48xlarge (8 x NVIDIA L4, compute capability 8.9, $13.3504/h" in problem
    # the nccl-tests image on the same nodes is fine (its own kernels cover 7.0), and so is the preset as it is
    load_config(PROJECT, "mpi-horovod", _on_p3(stack_config("mpi-horovod"), "nccl"))
    load_config(PROJECT, "mpi-horovod", stack_config("mpi-horovod"))


def test_the_final_base_of_a_dockerfile() -> None:
    """The image the last stage builds on, through stage names; none for scratch or a build argument."""

    def final(text: str):  # type: ignore[no-untyped-def]
        return Dockerfile(NCCL_TESTS, text).final_base()

    assert final("FROM a:1@sha256:00 AS build\nRUN x\nFROM b:2\n") == "b:2"
    assert final("FROM --platform=linux/amd64 a:1 AS build\nFROM build AS two\nFROM two\nRUN y\n") == "a:1"
    assert final("FROM a:1 AS build\nFROM scratch\nCOPY --from=build /x /x\n") is None
    # the ARG defaults declared before the first FROM are what the build uses without --build-arg (the program
    # passes none); an ARG without a default, or one declared inside a stage, leaves the base unknown
    assert final("ARG BASE=a:1\nFROM ${BASE}\n") == "a:1"
    assert final("ARG REPO=a\nARG BASE=$REPO:1\nFROM ${BASE} AS x\nFROM x\n") == "a:1"
    assert final("ARG BASE\nFROM ${BASE}\n") is None
    assert final("FROM a:1\nARG B=c:3\nFROM ${B}\n") is None
    assert Dockerfile.read(REPO / "images" / "horovod" / "Dockerfile").final_base() == (
        BASE_IMAGES["tensorflow-25.02-tf2-py3"].ref
    )


def test_a_base_is_known_by_its_tag_with_or_without_a_digest() -> None:
    """A ``FROM`` (or a prebuilt image) naming a catalogued base by ``repository:tag`` alone, or at another digest, is
    that base: the publisher's statement is about the release the tag names."""
    ngc = BASE_IMAGES["tensorflow-25.02-tf2-py3"]
    name = ngc.ref.partition("@")[0]
    assert base_image(ngc.ref) is ngc and base_image(name) is ngc and base_image(f"{name}@sha256:{'0' * 64}") is ngc
    assert base_image("nvcr.io/nvidia/tensorflow:25.01-tf2-py3") is None


@pytest.mark.parametrize("prebuilt", ["digest", "tag"])
def test_a_prebuilt_image_is_checked_against_the_gpus_its_publisher_supports(prebuilt: str) -> None:
    """The NGC TensorFlow image itself as a prebuilt image (by digest, or by tag) on p3.16xlarge's V100s: refused as
    the image built on it is, with the fix that applies to a prebuilt image."""
    ngc = BASE_IMAGES["tensorflow-25.02-tf2-py3"].ref
    ref = ngc if prebuilt == "digest" else ngc.partition("@")[0]
    cfg = _on_p3(stack_config("mpi-horovod"), "horovod")
    cfg[f"{PROJECT}:images"]["horovod"] = {"prebuilt": ref, "mpiPrefix": "/usr/local/mpi"}
    with pytest.raises(ConfigError) as exc:
        load_config(PROJECT, "mpi-horovod", cfg)
    (problem,) = exc.value.problems
    assert problem.startswith(
        f"eks-training:jobs.horovod.image: job horovod runs image 'horovod', the prebuilt {ref}, whose publisher "
        "supports GPUs of compute capability 7.5 and later"
    ), problem
    assert "not the NVIDIA V100 GPU (compute capability 7.0) of p3.16xlarge in node group gpu" in problem
    assert problem.endswith("or use an image that supports the NVIDIA V100"), problem
    cfg[f"{PROJECT}:nodeGroups"]["gpu"]["instanceTypes"] = ["g6.48xlarge"]
    load_config(PROJECT, "mpi-horovod", cfg)


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
    with pytest.raises(ConfigError) as exc:
        load_config(PROJECT, "mpi-horovod", cfg)
    (problem,) = exc.value.problems
    assert problem.startswith("eks-training:images.nccl-tests.mpiPrefix: MPI job nccl")
    cfg[f"{PROJECT}:images"]["nccl-tests"]["mpiPrefix"] = "/opt/amazon/openmpi"
    assert build_plan(load_config(PROJECT, "mpi-horovod", cfg)).images["nccl-tests"].mpi_prefix == "/opt/amazon/openmpi"


def _mpi_job(cfg: dict, image: str) -> None:
    """The mpi-horovod stack with its horovod job on ``image`` (None: the job's default, the training image)."""
    job = cfg[f"{PROJECT}:jobs"]["horovod"]
    job.pop("image", None)
    if image is not None:
        job["image"] = image


def test_an_mpi_job_on_the_training_image_is_refused_for_its_missing_sshd_even_with_a_prefix() -> None:
    """The training image has Open MPI (the EFA installer's, /opt/amazon/openmpi) but no sshd, which every MPI worker
    runs: a prefix would pass and the workers fail on the cluster, so the refusal names the image, not mpiPrefix."""
    cfg = stack_config("mpi-horovod")
    _mpi_job(cfg, None)
    for prefix in (None, "/opt/amazon/openmpi"):
        if prefix:
            cfg[f"{PROJECT}:images"]["training"] = {"context": "training", "mpiPrefix": prefix}
        with pytest.raises(ConfigError) as exc:
            load_config(PROJECT, "mpi-horovod", cfg, REPO)
        (problem,) = exc.value.problems
        assert problem.startswith(
            "eks-training:jobs.horovod.image: MPI job horovod runs image 'training', which has no sshd (its base "
            "public.ecr.aws/docker/library/ubuntu:24.04 ships none, and its Dockerfile installs none)"
        ), problem
        assert problem.endswith("(eks-training:images.horovod: {context: images/horovod}, then image: horovod)")


def test_an_mpi_image_with_sshd_on_a_base_without_mpi_is_refused_for_its_missing_open_mpi(tmp_path: Path) -> None:
    """A CUDA toolkit base ships no Open MPI; an image that installs sshd only has no mpirun for any prefix. One that
    runs the EFA installer (AWS's Open MPI), or names MPI, may have it: then only the prefix is asked for."""
    cuda = BASE_IMAGES["cuda-12.9.1-devel-ubuntu22.04"].ref
    folder = tmp_path / "mine"
    folder.mkdir()
    cfg = stack_config("mpi-horovod")
    cfg[f"{PROJECT}:images"]["mine"] = {"context": "mine"}
    _mpi_job(cfg, "mine")
    (folder / "setup.sh").write_text("apt-get install -y openssh-server openmpi-bin\n")
    (folder / "unrelated.py").write_text("# sshd, mpirun\n")
    install = "RUN apt-get update && apt-get install -y openssh-server\n"
    no_mpi = "eks-training:jobs.horovod.image: MPI job horovod runs image 'mine', which has no Open MPI"
    prefix = "eks-training:images.mine.mpiPrefix: MPI job horovod"
    for extra, expected in (
        ("", no_mpi),
        ("RUN ./efa_installer.sh -y --skip-kmod\n", prefix),
        ("RUN wget -q https://example.com/hpcx-v2.21-gcc.tbz && tar xf hpcx-v2.21-gcc.tbz\n", prefix),
        ("ENV OPAL_PREFIX=/opt/amazon/openmpi\n", None),
        # an install in a script the Dockerfile runs, or in files a RUN mounts: read, or not known
        ("COPY setup.sh /tmp/\nRUN sh /tmp/setup.sh\nENV OPAL_PREFIX=/usr\n", None),
        ("RUN --mount=type=bind,source=setup.sh,target=/s.sh sh /s.sh\n", prefix),
        # a file of the context that no RUN names says nothing of the image
        ("COPY unrelated.py /app/\n", no_mpi),
    ):
        (folder / "Dockerfile").write_text(f"FROM {cuda}\n{install}{extra}")
        try:
            load_config(PROJECT, "mpi-horovod", cfg, tmp_path)
            problems = []
        except ConfigError as exc:
            problems = exc.problems
        assert [p[: len(expected)] for p in problems] == ([expected] if expected else []), (extra, problems)
    # the image's mpiPrefix says where its Open MPI is: not refused for the want of one the files name
    (folder / "Dockerfile").write_text(f"FROM {cuda}\n{install}RUN tar xf /tmp/ompi.tgz -C /opt\n")
    cfg[f"{PROJECT}:images"]["mine"]["mpiPrefix"] = "/opt/ompi"
    load_config(PROJECT, "mpi-horovod", cfg, tmp_path)
    # a setup script that installs sshd, run by the Dockerfile, is read
    (folder / "Dockerfile").write_text(f"FROM {cuda}\nCOPY setup.sh /tmp/\nRUN /tmp/setup.sh\n")
    load_config(PROJECT, "mpi-horovod", cfg, tmp_path)
    (folder / "Dockerfile").write_text(f"FROM {cuda}\nRUN echo nothing\n")
    with pytest.raises(ConfigError, match="which has no sshd"):
        load_config(PROJECT, "mpi-horovod", cfg, tmp_path)
    # a large file a RUN names (a tarball, a model) is not read as a script: the rule stays quick
    from stacks.config.rules.kind_images import READ_BYTES_MAX

    (folder / "big.bin").write_text("openssh-server\n" + "x" * READ_BYTES_MAX)
    (folder / "Dockerfile").write_text(f"FROM {cuda}\nCOPY big.bin /tmp/\nRUN tar xf /tmp/big.bin\n")
    with pytest.raises(ConfigError, match="which has no sshd"):
        load_config(PROJECT, "mpi-horovod", cfg, tmp_path)


def _copies(text: str) -> list[Copy]:
    return Dockerfile(Path("Dockerfile"), text).copies()


def test_the_files_a_dockerfile_copies_from_its_context() -> None:
    """The final stage's COPY and ADD of context files, in both forms, with WORKDIR, ARG and ENV applied
    (https://docs.docker.com/reference/dockerfile/#copy); another stage's, ``--from`` and URLs put none there."""
    copies = _copies(
        "FROM a AS build\nCOPY early.py /app/\n"
        "FROM b\nARG DIR=lib\nWORKDIR /app\nCOPY ./one.py two.py ${DIR}/\n"
        'COPY ["three.py", "/opt/3.py"]\nADD https://example.com/x.py /app/\n'
        "COPY --from=build /app/early.py /app/\nCOPY --chmod=755 src/ /srv\nCOPY . .\n"
    )
    assert copies == [
        Copy(("./one.py", "two.py"), "/app/lib", True),
        Copy(("three.py",), "/opt/3.py", False),
        Copy(("src/",), "/srv", False),
        Copy((".",), "/app", True),
    ]
    assert [c.place("one.py") for c in copies] == ["/app/lib/one.py", None, None, "/app/one.py"]
    assert copies[1].place("three.py") == "/opt/3.py" and copies[2].place("src/a/b.py") == "/srv/a/b.py"
    assert copies[0].place("early.py") is None and copies[2].place("srcx.py") is None
    assert _copies("FROM a\nCOPY *.py /app/\n")[0].place("x.py") == "/app/x.py"


@pytest.mark.parametrize(
    "text",
    [
        "FROM a\nWORKDIR /app\nCOPY x.py /app\n",  # onto a folder that exists: into it
        'FROM a\nCOPY --chown=1000:1000 ["x.py", "/app/"]\n',
        'FROM a\nWORKDIR "/app"\nCOPY "x.py" ./\n',
        "ARG DIR=/app\nFROM a\nARG DIR\nCOPY x.py ${DIR}/\n",  # a global ARG redeclared in the stage
        "FROM a AS base\nWORKDIR /app\nFROM base\nCOPY x.py ./\n",  # a stage on a stage keeps its WORKDIR
        "FROM a AS base\nCOPY x.py /app/\nFROM base\n",  # ... and its files
        "FROM a\nCOPY /x.py /app/\n",
    ],
    ids=["existing-folder", "json-with-options", "quoted", "global-arg", "stage-workdir", "stage-files", "slash"],
)
def test_a_script_copied_into_app_is_placed_there(text: str) -> None:
    assert "/app/x.py" in {c.place("x.py") for c in _copies(text)}


def test_a_global_arg_not_redeclared_is_empty_in_the_stage() -> None:
    """https://docs.docker.com/reference/dockerfile/#scope: the copy goes to /, not /app."""
    assert {c.place("x.py") for c in _copies("ARG DIR=/app\nFROM a\nCOPY x.py ${DIR}/\n")} == {"/x.py"}


def test_a_heredocs_lines_are_its_instructions_not_others() -> None:
    """A Python heredoc's ``from`` line is not a ``FROM`` (https://docs.docker.com/reference/dockerfile/#here-documents);
    ``<<`` inside a word or another instruction opens none."""
    text = (
        "FROM a\nWORKDIR /app\nCOPY x.py ./\nRUN python3 <<EOF\nfrom pathlib import Path\nprint(1)\nEOF\n"
        "RUN <<-'END' sh\n\tFROM b\n\tEND\nRUN echo a<<b\nENV A=1\n"
    )
    ins = Dockerfile(Path("Dockerfile"), text).instructions
    assert [w for w, _ in ins] == ["FROM", "WORKDIR", "COPY", "RUN", "RUN", "RUN", "ENV"]
    assert ins[3][1] == "python3 <<EOF\nfrom pathlib import Path\nprint(1)"
    assert {c.place("x.py") for c in _copies(text)} == {"/app/x.py"}


def test_a_copy_reads_double_star_as_one_star_and_a_heredoc_as_a_file() -> None:
    """A COPY source matches as Go's filepath.Match (``**`` is ``*``, unlike in .dockerignore); a COPY heredoc
    (``COPY <<EOF /app/x.py``) copies no file of the context."""
    (copy,) = _copies("FROM a\nCOPY **/*.py /app/\n")
    assert copy.place("run_script.py") is None and copy.place("src/run_script.py") == "/app/run_script.py"
    assert _copies("FROM a\nCOPY <<EOF /app/x.py\nprint(1)\nEOF\nCOPY y.py /app/\n") == [Copy(("y.py",), "/app", True)]
