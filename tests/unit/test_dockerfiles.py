"""The Dockerfiles CodeBuild builds: bases off Docker Hub and pinned, the training image's Python, user and
library path, and the MPI images' sshd."""

import re

import pytest

from components.catalog import BASE_IMAGES, SOURCES
from components.image import is_docker_hub, registry_of
from components.image.dockerfile import Dockerfile
from components.workloads.mpi import SSHD_PORT
from tests.harness import REPO
from tests.image_support import base_images, dockerfile_instructions, repository_dockerfiles

TRAINING = REPO / "training" / "Dockerfile"
MPI_IMAGES = [REPO / "images" / "horovod" / "Dockerfile", REPO / "images" / "nccl-tests" / "Dockerfile"]


@pytest.mark.parametrize(
    "ref, registry",
    [
        ("ubuntu:24.04", "docker.io"),
        ("pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime", "docker.io"),
        ("docker.io/library/ubuntu:24.04", "docker.io"),
        ("index.docker.io/library/python:3.12", "index.docker.io"),
        ("public.ecr.aws/docker/library/ubuntu:24.04@sha256:" + "a" * 64, "public.ecr.aws"),
        ("nvcr.io/nvidia/cuda:12.9.1-devel-ubuntu22.04", "nvcr.io"),
        ("localhost:5000/img:1", "localhost:5000"),
        ("localhost/img:1", "localhost"),
    ],
)
def test_registry_of_follows_docker_name_resolution(ref: str, registry: str) -> None:
    assert registry_of(ref) == registry
    assert is_docker_hub(ref) == (registry in ("docker.io", "index.docker.io"))


def test_base_image_parser_skips_stages_scratch_and_build_args() -> None:
    text = (
        "ARG BASE=ubuntu:24.04\n"
        "FROM --platform=$BUILDPLATFORM golang:1.22 AS build\n"
        "RUN echo \\\n  FROM not-an-instruction\n"
        "FROM scratch AS empty\n"
        "FROM ${BASE}\n"
        "from Build as final\n"
        "FROM nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04\n"
    )
    assert base_images(text) == ["golang:1.22", "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04"]


def test_repository_dockerfiles_are_found() -> None:
    found = {p.relative_to(REPO).as_posix() for p in repository_dockerfiles()}
    assert {
        "training/Dockerfile",
        "images/horovod/Dockerfile",
        "images/nccl-tests/Dockerfile",
        "images/tensorflow/Dockerfile",
    } <= found


@pytest.mark.parametrize("dockerfile", repository_dockerfiles(), ids=lambda p: p.parent.name)
def test_no_base_image_comes_from_docker_hub(dockerfile) -> None:
    """CodeBuild's anonymous Docker Hub pulls fail with 429 (source keys ``docker-hub-limits``,
    ``codebuild-docker-hub-429``): every base comes from another registry."""
    bases = base_images(dockerfile.read_text())
    assert bases, dockerfile
    assert [b for b in bases if is_docker_hub(b)] == []


@pytest.mark.parametrize("dockerfile", repository_dockerfiles(), ids=lambda p: p.parent.name)
def test_every_base_is_a_catalogued_digest(dockerfile) -> None:
    """Every FROM of every Dockerfile (ECR Public and nvcr.io alike) is a catalogued digest with its source."""
    pinned = {b.ref for b in BASE_IMAGES.values()}
    for base in base_images(dockerfile.read_text()):
        assert base in pinned, f"{dockerfile}: {base} is not in components.catalog.BASE_IMAGES"


def test_catalogued_base_images_are_pinned_and_sourced() -> None:
    for name, image in BASE_IMAGES.items():
        assert re.search(r":[\w.-]+@sha256:[0-9a-f]{64}$", image.ref), name
        assert image.source in SOURCES, name
        assert not is_docker_hub(image.ref), name
    # The digest each source shows is the one pinned (its first and last characters are quoted there).
    for name, image in BASE_IMAGES.items():
        digest = image.ref.rsplit("@sha256:", 1)[1]
        assert f"sha256:{digest[:12]}...{digest[-5:]}" in SOURCES[image.source].shows, name


def _instructions(path):
    return dockerfile_instructions(path.read_text())


def test_training_image_runs_the_venv_python_as_user_1000() -> None:
    ins = _instructions(TRAINING)
    assert base_images(TRAINING.read_text()) == [BASE_IMAGES["ubuntu-24.04"].ref]
    env = " ".join(args for word, args in ins if word == "ENV")
    path = re.search(r"\bPATH=(\S+)", env)
    assert path and path.group(1).split(":")[0] == "/opt/venv/bin", "python and torchrun must be the venv's"
    runs = "\n".join(args for word, args in ins if word == "RUN")
    assert "python3 -m venv /opt/venv" in runs and "python3-venv" in runs
    # torch from the index of the build the plan chooses, checked against its CUDA version and arch flags
    # (the defaults: tests/unit/test_torch_pin.py)
    assert 'pip install --retries 5 --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"' in runs
    assert "torch.version.cuda == '${TORCH_CUDA_VERSION}'" in runs
    assert "flags.split() == '${TORCH_CUDA_ARCHS}'.split()" in runs
    assert ("USER", "1000:1000") in ins and ("WORKDIR", "/app") in ins and ("HEALTHCHECK", "NONE") in ins
    # Ubuntu 24.04's own uid-1000 user is removed before trainer takes the id.
    user_run = next(a for w, a in ins if w == "RUN" and "useradd" in a)
    assert (
        user_run.index("userdel") < user_run.index("groupadd --gid 1000 trainer") < user_run.index("useradd --uid 1000")
    )
    # The USER comes after every RUN (root is needed to install).
    last_run = max(i for i, (w, _) in enumerate(ins) if w == "RUN")
    assert ins.index(("USER", "1000:1000")) > last_run


def test_training_image_keeps_the_efa_installer_and_both_plugin_paths() -> None:
    ins = _instructions(TRAINING)
    assert ("ARG", "EFA_INSTALLER_VERSION=1.47.0") in ins
    runs = "\n".join(args for word, args in ins if word == "RUN")
    assert "./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify" in runs
    ld = next(a for w, a in ins if w == "ENV" and a.startswith("LD_LIBRARY_PATH="))
    dirs = ld.split("=", 1)[1].split(":")
    # EFA >= 1.44 without the arch folder, older installers with it; libfabric; the wheel's CUDA runtime as
    # libcudart.so (the one file the build links there: tests/real/test_torch_image_real.py runs its search).
    assert dirs[:3] == ["/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "/opt/amazon/ofi-nccl/lib", "/opt/amazon/efa/lib"]
    assert "/opt/cudart" in dirs and "" not in dirs
    assert 'ln -s "$cudart" /opt/cudart/libcudart.so' in runs and 'test "$cudart" = "${cudart%% *}"' in runs
    assert "/opt/amazon/ofi-nccl/lib/libnccl-net.so /opt/amazon/ofi-nccl/lib/*-linux-gnu/libnccl-net.so" in runs


def test_training_image_copies_exactly_what_dockerignore_lets_in() -> None:
    copied = {s for c in Dockerfile.read(TRAINING).copies() for s in c.sources}
    allowed = {line[1:] for line in (TRAINING.parent / ".dockerignore").read_text().split() if line.startswith("!")}
    assert copied == allowed - {"Dockerfile"}


@pytest.mark.parametrize("dockerfile", MPI_IMAGES, ids=lambda p: p.parent.name)
def test_mpi_images_have_the_sshd_privilege_separation_directory(dockerfile) -> None:
    """sshd run as root exits with "Missing privilege separation directory: /run/sshd" without it."""
    ins = _instructions(dockerfile)
    creates = [i for i, (w, a) in enumerate(ins) if w == "RUN" and "mkdir -p /run/sshd" in a]
    user = [i for i, (w, a) in enumerate(ins) if w == "USER"]
    assert creates and user and creates[0] < user[0], "created as root, before USER"
    assert ins[-1] == ("CMD", '["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]')


def _pins(path) -> dict[str, str]:
    """``name -> version spec`` of a requirements file (extras dropped, names lowercased)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):  # blank, or an option such as -r other.txt
            continue
        match = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?(.*)$", line)
        assert match, line
        out[match.group(1).lower()] = match.group(3).strip()
    return out


def test_the_tensorflow_test_venv_has_the_tensorflow_images_packages() -> None:
    """The TensorFlow workers of the real tier run from .venv-tf (requirements-tf.txt): the example image's packages
    at the image's versions, without the CUDA extra; nothing else from the image's list is left out."""
    image = _pins(REPO / "images" / "tensorflow" / "requirements.txt")
    tests = _pins(REPO / "requirements-tf.txt")
    assert tests == image and tests["tensorflow"] == "==2.21.0"
    # and the PyTorch side has no TensorFlow: with it, torch.utils.tensorboard imports it at every trainer start
    dev = (
        _pins(REPO / "requirements-dev.txt")
        | _pins(REPO / "requirements.txt")
        | _pins(REPO / "training" / "requirements.txt")
    )
    assert not {"tensorflow", "tensorflow-cpu", "tf-keras"} & set(dev)


def test_the_mpi_images_set_up_ssh_identically() -> None:
    """Each image's build context is its own folder, so the MPI images each carry the operator's ssh setup (the user,
    the host keys, sshd's and ssh's configs, the unprivileged sshd): it must stay the same in every one of them."""

    def ssh_setup(dockerfile) -> list[tuple[str, str]]:
        return [
            (w, a)
            for w, a in _instructions(dockerfile)
            if (w == "RUN" and "mpiuser" in a) or (w == "COPY" and "ssh" in a) or w in ("USER", "CMD", "HEALTHCHECK")
        ]

    first, *others = MPI_IMAGES
    assert others, "more than one MPI image"
    for other in others:
        assert ssh_setup(other) == ssh_setup(first), other.parent.name
        for name in ("sshd_config", "ssh_config"):
            assert (other.parent / name).read_text() == (first.parent / name).read_text(), (other.parent.name, name)


@pytest.mark.parametrize("dockerfile", MPI_IMAGES, ids=lambda p: p.parent.name)
def test_the_mpi_images_sshd_listens_where_the_launcher_waits_and_connects(dockerfile) -> None:
    """The image's sshd, its launcher's ssh client and the component's wait for the workers use one port."""
    ports = {
        name: re.findall(r"^\s*Port\s+(\d+)", (dockerfile.parent / name).read_text(), re.M)
        for name in ("sshd_config", "ssh_config")
    }
    assert ports == {"sshd_config": [str(SSHD_PORT)], "ssh_config": [str(SSHD_PORT)]}
