"""The images a stack builds or pulls, and which build of an image runs on which node group.

An image whose Dockerfile declares the torch build arguments (:data:`components.catalog.torch.TORCH_BUILD_ARGS`,
as the bundled training image does) is built once per CUDA build of torch its groups' GPUs need
(:func:`components.catalog.torch.torch_build_for`): PyPI's build, the one the tests run, wherever it has kernels for
the GPUs (and on CPU nodes), another build of the same torch release only for GPUs it has none for (V100). Every
other image is built (or pulled) once, as its configuration says.
"""

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from components.catalog import InstanceType
from components.catalog.gpus import compute_capability
from components.catalog.torch import (
    DEFAULT_TORCH_BUILD,
    TORCH_BUILDS,
    TorchBuild,
    declares_torch_build,
    torch_build_args,
    torch_build_for,
)
from components.image.context import hash_build_context, image_tag_for
from components.image.dockerfile import Dockerfile, read_dockerfile
from stacks.bundle import TOOLBOX_IMAGE
from stacks.config import StackConfig, key
from stacks.config.rules.images import training_imports
from stacks.kinds import KINDS


@dataclass(frozen=True, kw_only=True)
class ImagePlan:
    """One container image: built from a folder of the repository, or prebuilt."""

    name: str
    """Its key under ``images`` (the configuration's name, which jobs' ``image`` names)."""
    context: Optional[Path]
    """Absolute folder to build (``None``: prebuilt)."""
    dockerfile: str
    prebuilt: Optional[str]
    version: str
    """The content-hash tag of a built image, the reference of a prebuilt one (part of run ids)."""
    mpi_prefix: Optional[str] = None
    """Where its Open MPI is installed: ``images.<name>.mpiPrefix``, else its Dockerfile's ``ENV OPAL_PREFIX``
    (``None``: not an MPI image; the config rules require it for an image an MPI job runs)."""
    torch_build: Optional[str] = None
    """The CUDA build of torch it installs (:data:`components.catalog.torch.TORCH_BUILDS`), for an image whose
    Dockerfile takes the torch build arguments; ``None`` otherwise."""
    build_args: Mapping[str, str] = field(default_factory=dict)
    """The build arguments it is built with (those of :attr:`torch_build`)."""

    @property
    def variant(self) -> str:
        """The key of this build among the stack's images: :attr:`name` for the default build (and for every image
        without torch builds), ``<name>-<build>`` for another torch build (one repository and one image each)."""
        if self.torch_build is None or self.torch_build == DEFAULT_TORCH_BUILD:
            return self.name
        return f"{self.name}-{self.torch_build}"


def tag_only_note(image: ImagePlan) -> Optional[str]:
    """A warning for a prebuilt image pinned by its tag alone (``None`` for a digest or a built image): a node that
    pulls it later may get another image, and a job resuming on it keeps its run folder (run ids take the reference)."""
    if image.prebuilt is None or "@" in image.prebuilt:
        return None
    repo = image.prebuilt.rpartition(":")[0] if ":" in image.prebuilt.rpartition("/")[2] else image.prebuilt
    return (
        f"{key(f'images.{image.name}.prebuilt')} {image.prebuilt} is pinned by its tag alone: a node that pulls it "
        "later (a scale-up, a node roll, a resumed job) gets whatever the tag names then, in the same run folder. "
        f"Pin it by digest, {repo}@sha256:<digest>: the first Digest line of `docker buildx imagetools inspect "
        f"{image.prebuilt}`. The new reference starts its jobs' runs again, in new folders"
    )


def prebuilt_scripts_note(image: ImagePlan, jobs: Mapping[str, str]) -> Optional[str]:
    """A warning for a prebuilt image whose jobs (``jobs``: name -> kind) run this project's scripts from ``/app``
    (a ``pytorch`` job's torchrun wrapper, the training image's launcher): a built image is checked for them
    (:func:`stacks.config.rules.images.check_image_scripts`), a prebuilt one cannot be, and one such as NGC's has
    none. ``None``: a built image, no job needs one, or the training image given prebuilt (every pod's helpers run
    from it, so it is a build of training/ pushed elsewhere, as documented)."""
    if image.prebuilt is None or image.name == TOOLBOX_IMAGE:
        return None
    needs: dict[str, tuple[str, list[str]]] = {}
    for job, kind in sorted(jobs.items()):
        for path, why in KINDS[kind].image_scripts(False).items():
            needs.setdefault(path, (why, []))[1].append(job)
    if not needs:
        return None
    modules = sorted({m for path in needs for m in training_imports(posixpath.basename(path))})
    return (
        f"{key(f'images.{image.name}.prebuilt')} {image.prebuilt} must hold this project's "
        + ", ".join(
            f"{path} ({why}, for job{'s' if len(names) > 1 else ''} {', '.join(names)})"
            for path, (why, names) in sorted(needs.items())
        )
        + (f" with {', '.join(modules)} beside it" if modules else "")
        + ": a prebuilt image is not read, and one not built from a copy of training/ (such as NGC's) has none, so "
        f"the pods would fail at start. Build it from such a copy instead ({key(f'images.{image.name}.context')}; "
        "docs/how-to/images-and-datasets.md), or run the jobs on the training image"
    )


def image_warnings(image: ImagePlan, jobs: Iterable[Any]) -> list[str]:
    """What ``pulumi up`` warns of and the plan prints about ``image``; ``jobs``: the stack's planned jobs (each
    with its ``name``, ``kind`` and ``image``)."""
    on_it = {j.name: j.kind for j in jobs if j.image.variant == image.variant}
    return [w for w in (tag_only_note(image), prebuilt_scripts_note(image, on_it)) if w]


def gpu_capabilities(types: Iterable[InstanceType]) -> list[tuple[int, int]]:
    """The compute capabilities of the GPUs of ``types`` that the catalog knows (a CPU type has none)."""
    return [cc for t in types if t.is_gpu and (cc := compute_capability(t.gpu_model)) is not None]


def image_plans(cfg: StackConfig) -> dict[str, ImagePlan]:
    """Every configured image in its default build (PyPI's torch for one that installs the torch build)."""
    images: dict[str, ImagePlan] = {}
    for name, image in cfg.images.items():
        context = cfg.image_folders.get(name) if image.context else None
        dockerfile = read_dockerfile(context, image.dockerfile) if context else None
        torch_aware = dockerfile is not None and declares_torch_build(dockerfile.build_args())
        build = TORCH_BUILDS[DEFAULT_TORCH_BUILD] if torch_aware else None
        images[name] = _plan(name, context, image.dockerfile, image.prebuilt, image.mpi_prefix, dockerfile, build)
    return images


def image_for(image: ImagePlan, types: Iterable[InstanceType]) -> ImagePlan:
    """The build of ``image`` that runs on nodes of ``types``: the image itself unless it installs a torch build,
    then the first torch build with kernels for every GPU of the types (the config rules refuse a group no build
    covers; it keeps the default build)."""
    if image.torch_build is None:
        return image
    build = torch_build_for(gpu_capabilities(types)) or TORCH_BUILDS[DEFAULT_TORCH_BUILD]
    if build.name == image.torch_build:
        return image
    dockerfile = read_dockerfile(image.context, image.dockerfile) if image.context else None
    return _plan(image.name, image.context, image.dockerfile, image.prebuilt, image.mpi_prefix, dockerfile, build)


def _plan(
    name: str,
    context: Optional[Path],
    dockerfile_name: str,
    prebuilt: Optional[str],
    mpi_prefix: Optional[str],
    dockerfile: Optional[Dockerfile],
    build: Optional[TorchBuild],
) -> ImagePlan:
    args = torch_build_args(build) if build is not None else {}
    version = prebuilt or image_tag_for(hash_build_context(str(context), dockerfile_name, build_args=args))
    return ImagePlan(
        name=name,
        context=context,
        dockerfile=dockerfile_name,
        prebuilt=prebuilt,
        version=version,
        mpi_prefix=mpi_prefix or (dockerfile.mpi_prefix() if dockerfile is not None else None),
        torch_build=build.name if build is not None else None,
        build_args=args,
    )
