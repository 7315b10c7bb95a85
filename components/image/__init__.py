"""Container images built in AWS CodeBuild from directories of this repository, pinned by digest.

Modules: :mod:`~components.image.context` (content hash and zip of a build context),
:mod:`~components.image.reference` (image references), :mod:`~components.image.buildspec`
(CodeBuild buildspec, ECR lifecycle policy), :mod:`~components.image.aws_settings` (the stack's AWS
settings the build runs with), :mod:`~components.image.build_provider` (the dynamic resource that runs the
build), :mod:`~components.image.component` (``TrainingImage``).
"""

from typing import TYPE_CHECKING

from components.image.aws_settings import (
    AssumeRole,
    AwsSettings,
    AwsSettingsError,
    aws_settings_from_config,
    stack_aws_settings,
)
from components.image.buildspec import (
    COMPUTE_TYPES,
    DEFAULT_BUILD_TIMEOUT_MINUTES,
    DEFAULT_COMPUTE_TYPE,
    DEFAULT_KEEP_IMAGES,
    PLATFORM_BUILD_ENVIRONMENTS,
    ComputeType,
    buildspec,
    lifecycle_policy_document,
)
from components.image.context import (
    CONTEXT_PREFIX,
    DEFAULT_PLATFORM,
    TAG_HEX_LENGTH,
    collect_build_context,
    context_zip_path,
    hash_build_context,
    image_tag_for,
    is_ignored,
    parse_dockerignore,
    write_context_zip,
)
from components.image.reference import is_docker_hub, registry_of, validate_image_reference
from components.lazy import lazy_exports

# the component and its build provider import the AWS SDK: on first use
if TYPE_CHECKING:
    from components.image.component import TrainingImage, TrainingImageArgs

__getattr__ = lazy_exports(
    __name__,
    {
        "component": ("TrainingImage", "TrainingImageArgs"),
    },
)

__all__ = [
    "AssumeRole",
    "AwsSettings",
    "AwsSettingsError",
    "COMPUTE_TYPES",
    "ComputeType",
    "CONTEXT_PREFIX",
    "DEFAULT_BUILD_TIMEOUT_MINUTES",
    "DEFAULT_COMPUTE_TYPE",
    "DEFAULT_KEEP_IMAGES",
    "DEFAULT_PLATFORM",
    "PLATFORM_BUILD_ENVIRONMENTS",
    "TAG_HEX_LENGTH",
    "TrainingImage",
    "TrainingImageArgs",
    "aws_settings_from_config",
    "buildspec",
    "collect_build_context",
    "context_zip_path",
    "hash_build_context",
    "image_tag_for",
    "is_docker_hub",
    "is_ignored",
    "lifecycle_policy_document",
    "parse_dockerignore",
    "registry_of",
    "stack_aws_settings",
    "validate_image_reference",
    "write_context_zip",
]
