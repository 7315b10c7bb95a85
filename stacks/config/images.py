"""The ``images`` and ``imageBuild`` sections: the container images a stack builds from a folder or names prebuilt,
and how CodeBuild builds them."""

from typing import Optional

from pydantic import Field, field_validator, model_validator

from components.image.buildspec import (
    BUILD_TIMEOUT_MINUTES_RANGE,
    DEFAULT_BUILD_TIMEOUT_MINUTES,
    DEFAULT_COMPUTE_TYPE,
    DEFAULT_KEEP_IMAGES,
    ComputeType,
)
from components.image.reference import validate_image_reference
from stacks.config.base import Model, relative_path_problem
from stacks.config.errors import check


class ImageConfig(Model):
    """One container image (key ``images.<name>``): built by CodeBuild from a folder of the project (or a shipped one),
    or a prebuilt reference."""

    context: Optional[str] = None
    """A folder of the Pulumi project holding a Dockerfile, else one this package ships (training, images/nccl-tests,
    images/horovod, images/tensorflow): built by AWS CodeBuild into its own ECR repository, tagged with a hash of the
    folder's content (an unchanged folder is not rebuilt) and referenced by digest; its CUDA targets, and its base
    where that ships GPU code (images/horovod: NGC TensorFlow 25.02, compute capability 7.5 and later, no V100), must
    cover the GPUs its jobs run on. A Dockerfile that takes the torch build arguments (the bundled training image,
    torch 2.13.0) is built once per CUDA build its jobs' GPUs need: PyPI's CUDA 13.0 build, the one the tests run,
    and the CUDA 12.6 build of the same release for V100 (p3). Set context or prebuilt."""
    prebuilt: Optional[str] = None
    """A pinned image reference, REGISTRY/REPO:TAG or REPO@sha256:..., e.g. an AWS Deep Learning Container or an NGC
    image. Set context or prebuilt."""
    dockerfile: str = "Dockerfile"
    """The Dockerfile in context."""
    mpi_prefix: Optional[str] = None
    """Where the image's Open MPI is installed (MPI jobs run ``<mpiPrefix>/bin/mpirun``); default, for a built image,
    its Dockerfile's ``ENV OPAL_PREFIX``."""

    @field_validator("mpi_prefix")
    @classmethod
    def _mpi_prefix(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (not v.startswith("/") or v.rstrip("/") == "" or any(c.isspace() for c in v)):
            raise ValueError(f"{v!r} must be an absolute folder of the image (e.g. /opt/amazon/openmpi)")
        return v.rstrip("/") if v is not None else v

    @field_validator("prebuilt")
    @classmethod
    def _prebuilt(cls, v: Optional[str]) -> Optional[str]:
        why = None if v is None else validate_image_reference(v)
        if why:
            raise ValueError(f"{why}; give a pinned reference such as REGISTRY/REPO:TAG or REPO@sha256:...")
        return v

    @field_validator("dockerfile")
    @classmethod
    def _dockerfile(cls, v: str) -> str:
        if why := relative_path_problem(v):
            raise ValueError(why.replace("the shared volume", "the image's context") + " (CodeBuild builds it there)")
        return v

    @field_validator("context")
    @classmethod
    def _context(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (why := relative_path_problem(v)):
            raise ValueError(why.replace("the shared volume", "the repository") + " (a folder with a Dockerfile)")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> "ImageConfig":
        if (self.context is None) == (self.prebuilt is None):
            check(
                [
                    (
                        "",
                        "set exactly one of context (a folder of your project, or one this package ships, to build) or "
                        "prebuilt (a pinned reference)",
                    )
                ]
            )
        return self


class ImageBuildConfig(Model):
    """How images are built (key ``imageBuild``)."""

    keep_images: int = Field(default=DEFAULT_KEEP_IMAGES, ge=1, le=1000)
    """Each ECR repository's lifecycle policy keeps the newest this many images."""
    build_timeout_minutes: int = Field(
        default=DEFAULT_BUILD_TIMEOUT_MINUTES, ge=BUILD_TIMEOUT_MINUTES_RANGE[0], le=BUILD_TIMEOUT_MINUTES_RANGE[1]
    )
    """CodeBuild's timeout for one image build."""
    compute_type: ComputeType = DEFAULT_COMPUTE_TYPE
    """The CodeBuild machine that builds the images."""
