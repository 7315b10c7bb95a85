"""Rules on what a job's kind needs in its image: an MPI job's image names its Open MPI, a ``tensorflow`` job's image
holds TensorFlow."""

import fnmatch
import posixpath
import re
from pathlib import Path
from typing import Callable

from components.catalog.charts import base_image
from components.image.context import collect_build_context
from components.image.dockerfile import Dockerfile
from stacks.config.errors import key
from stacks.config.images import ImageConfig
from stacks.config.rules.sections import Sections, image_dockerfile
from stacks.kinds.base import JobKind


def check_mpi_image(
    s: Sections, path: str, job_name: str, image_name: str, image: ImageConfig, problems: list[str]
) -> None:
    """An MPI job's image has sshd and Open MPI, and says where its Open MPI is. Each worker runs sshd, and the
    launcher runs ``<prefix>/bin/mpirun``, which makes Open MPI start ``<prefix>/bin/orted`` on the workers over ssh
    with ``<prefix>/lib`` on their library path (orterun(1)); sshd gives the workers' sessions neither the image's
    PATH nor its LD_LIBRARY_PATH."""
    dockerfile = image_dockerfile(s, image_name, image)
    folder = s.image_folders.get(image_name, s.project_dir / image.context) if image.context else None
    missing = _surely_lacks(dockerfile, folder, image) if dockerfile is not None and folder is not None else ""
    if dockerfile is not None and missing:
        problems.append(
            f"{key(f'{path}.image')}: MPI job {job_name} runs image {image_name!r}, which has no {missing} (its base "
            f"{(dockerfile.final_base() or '').partition('@')[0]} ships none, and its Dockerfile installs none): the "
            "launcher runs mpirun, which reaches the workers over ssh, and each worker runs sshd; run an image that "
            f"has both, such as the shipped one ({key('images.horovod')}: {{context: images/horovod}}, then image: "
            "horovod)"
        )
        return
    if image.mpi_prefix is not None or (dockerfile is not None and dockerfile.mpi_prefix()):
        return
    if image.context and dockerfile is None:
        return  # no Dockerfile to read: the image's own rule names its context or dockerfile
    where = (
        f"its Dockerfile ({image.context}/{image.dockerfile}) sets no ENV OPAL_PREFIX"
        if image.context
        else "it is prebuilt"
    )
    problems.append(
        f"{key(f'images.{image_name}.mpiPrefix')}: MPI job {job_name} ({key(path)}) runs image {image_name!r}, and "
        f"{where}; set mpiPrefix to the folder of the image's Open MPI (where bin/mpirun and bin/orted are, e.g. "
        "/opt/amazon/openmpi), so the workers' orted is found over ssh"
    )


def _surely_lacks(dockerfile: Dockerfile, folder: Path, image: ImageConfig) -> str:
    """What an MPI job's image surely lacks, ``sshd`` or ``Open MPI`` (``""``: neither, or not known). Known only on a
    catalogued final base, whose contents the catalog describes: none ships sshd (the shipped MPI images install
    openssh-server), and an OS or CUDA toolkit base ships no MPI, where a framework's (NGC's) does. Then neither the
    Dockerfile's instructions but ``FROM`` nor the build context's files a ``RUN`` names (a setup script, a package
    list) name ssh, or MPI (Open MPI, HPC-X, AWS's EFA installer, which installs Open MPI). A ``RUN`` that mounts
    files of the context, or an ``mpiPrefix`` set for the image, leaves it unknown."""
    base = base_image(dockerfile.final_base() or "")
    runs = [args for word, args in dockerfile.instructions if word == "RUN"]
    if base is None or any(re.search(r"--mount=[^ ]*type=bind", args) for args in runs):
        return ""
    said = _image_text(
        folder,
        image.dockerfile,
        dockerfile,
        lambda name: any(re.search(rf"(^|[\s/'\"=]){re.escape(name)}\b", args) for args in runs),
    )
    if not re.search(r"ssh", said, re.I):
        return "sshd"
    if image.mpi_prefix is None and not base.python_packages and not re.search(r"mpi|hpcx|efa_installer", said, re.I):
        return "Open MPI"
    return ""


#: The largest file of a build context read for what the image installs (a tarball or a model a RUN names is not
#: read).
READ_BYTES_MAX = 1 << 20


def _image_text(folder: Path, dockerfile_name: str, dockerfile: Dockerfile, reads: Callable[[str], bool]) -> str:
    """What the image's own files say it installs: the Dockerfile's instructions but ``FROM`` (the base is the
    catalog's to describe), and each file of the build context whose name ``reads`` takes (up to
    :data:`READ_BYTES_MAX`; no link)."""
    texts = [args for word, args in dockerfile.instructions if word != "FROM"]
    for entry in collect_build_context(str(folder), dockerfile_name):
        path = folder / entry.path
        if not entry.is_symlink and reads(posixpath.basename(entry.path)) and path.stat().st_size <= READ_BYTES_MAX:
            texts.append(path.read_text(errors="replace"))
    return "\n".join(texts)


#: Files that say which Python packages an image installs besides its Dockerfile's own lines: pip's requirement and
#: constraint files, a project's metadata, lock files, conda's environment files.
INSTALL_FILES = (
    "requirements*.txt",
    "constraints*.txt",
    "*.in",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Pipfile*",
    "*.lock",
    "environment*.yml",
    "environment*.yaml",
)


def check_image_package(
    s: Sections, path: str, job_name: str, image_name: str, image: ImageConfig, kind: JobKind, problems: list[str]
) -> None:
    """A job whose kind's program imports a framework (a ``tensorflow`` job's TensorFlow) runs an image that has it.
    An image built on a catalogued base without it, whose Dockerfile and install files never name it, would fail at
    the first import on the cluster. A prebuilt image, or one on a base the catalog does not describe, is not
    checked."""
    package = kind.image_package
    dockerfile = image_dockerfile(s, image_name, image)
    if not package or dockerfile is None or image.context is None:
        return
    base = base_image(dockerfile.final_base() or "")
    if base is None or package in base.python_packages:
        return
    folder = s.image_folders.get(image_name, s.project_dir / image.context)
    if _installs(folder, image.dockerfile, dockerfile, package):
        return
    example = posixpath.basename(kind.example_image)
    problems.append(
        f"{key(f'{path}.image')}: {kind.name} job {job_name} runs image {image_name!r}, built on "
        f"{base.ref.partition('@')[0]}, which has no {package}, and neither its Dockerfile nor its requirement files "
        f"install it: the job would fail at its first import; run an image that has it, such as the shipped one "
        f"({key(f'images.{example}')}: {{context: {kind.example_image}}}, then image: {example}), or add {package} "
        "to the image's requirements.txt"
    )


def _installs(folder: Path, dockerfile_name: str, dockerfile: Dockerfile, package: str) -> bool:
    """An instruction of the Dockerfile but its ``FROM``, or an install file of the build context
    (:data:`INSTALL_FILES`), names ``package``."""
    said = _image_text(
        folder, dockerfile_name, dockerfile, lambda name: any(fnmatch.fnmatch(name, p) for p in INSTALL_FILES)
    )
    return re.search(re.escape(package), said, re.I) is not None
