"""``TrainingImage``: a container image built in AWS CodeBuild from a directory, pushed to ECR, referenced by digest.

The build context is hashed and zipped at program time (:mod:`components.image.context`), uploaded to S3, and built
by a CodeBuild project, driven by the dynamic resource of :mod:`components.image.build_provider`. The tag is the
context's hash, so an unchanged context rebuilds nothing. Jobs use :attr:`TrainingImage.image_uri`, pinned by digest.
The children use the AWS provider the component inherits. The build resource gets the stack's AWS settings as the
input ``aws`` (:class:`~components.image.aws_settings.AwsSettings`): give it when the component gets an explicit
AWS provider with other settings.

Why: docs/explanation/pulumi-up.md, "The image build"."""

import json
import re
from dataclasses import dataclass
from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired

from components.args import checks_args
from components.arns import account_from_arn, region_from_arn
from components.iam import codebuild_policy, service_trust_policy
from components.image.aws_settings import AwsSettings, AwsSettingsError, aws_settings_problems, stack_aws_settings
from components.image.build_provider import ImageBuild, ImageBuildInputs
from components.image.buildspec import (
    BUILD_ARGS_VARIABLE,
    BUILD_TIMEOUT_MINUTES_RANGE,
    COMPUTE_TYPES,
    DEFAULT_BUILD_TIMEOUT_MINUTES,
    DEFAULT_COMPUTE_TYPE,
    DEFAULT_KEEP_IMAGES,
    PLATFORM_BUILD_ENVIRONMENTS,
    RESERVED_BUILD_VARIABLES,
    buildspec,
    lifecycle_policy_document,
)
from components.image.context import (
    CONTEXT_PREFIX,
    DEFAULT_PLATFORM,
    context_zip_path,
    hash_build_context,
    image_tag_for,
    write_context_zip,
)
from components.private_bucket import private_bucket

DEFAULT_QUEUED_TIMEOUT_MINUTES = 60
DEFAULT_LOG_RETENTION_DAYS = 30


class TrainingImageArgs(TypedDict):
    """Inputs of :class:`TrainingImage`."""

    context_dir: str
    """Local path of the Docker build context (hashed and zipped when the program runs)."""
    dockerfile: NotRequired[str]
    """Dockerfile path relative to the context. Default ``Dockerfile``."""
    build_args: NotRequired[Mapping[str, str]]
    """Build arguments (``docker build --build-arg``) by name; part of the image's tag."""
    platform: NotRequired[str]
    """``linux/amd64`` (default) or ``linux/arm64``; picks the CodeBuild environment."""
    repository_name: NotRequired[pulumi.Input[str]]
    """ECR repository name (default: auto-named from the component name)."""
    keep_images: NotRequired[int]
    """Lifecycle policy keeps the newest N images. Default 10."""
    force_delete: NotRequired[bool]
    """Delete the repository with its images on destroy (images are rebuildable). Default True."""
    kms_key_arn: NotRequired[pulumi.Input[str]]
    """KMS key for ECR, the context bucket and CodeBuild artifacts (default: AES256 / AWS-managed)."""
    compute_type: NotRequired[str]
    """CodeBuild compute type (CUDA images are big). Default ``BUILD_GENERAL1_LARGE``."""
    codebuild_image: NotRequired[str]
    """Override the curated CodeBuild image of the platform."""
    build_timeout_minutes: NotRequired[int]
    """CodeBuild build timeout in minutes, 5-2160. Default 90."""
    queued_timeout_minutes: NotRequired[int]
    """CodeBuild queue timeout in minutes, 5-480. Default 60."""
    log_retention_days: NotRequired[int]
    """Retention of the build log group, in days. Default 30."""
    poll_interval_seconds: NotRequired[float]
    """How often the build status is polled, in seconds. Default 15."""
    tags: NotRequired[Mapping[str, str]]
    """Tags added to every taggable child."""
    aws: NotRequired[AwsSettings]
    """AWS settings the build runs with; they must lead to the account and region of the AWS provider the
    children use (default: the stack's ``aws:`` settings, right for the default provider)."""


@dataclass(frozen=True)
class _Settings:
    """What the image's arguments decide before any resource exists (validated: a bad argument fails here)."""

    dockerfile: str
    platform: str
    env_type: str
    build_image: str
    compute_type: str
    keep_images: int
    build_timeout: int
    queued_timeout: int
    log_retention_days: int
    poll_interval: float
    kms_key_arn: Optional[pulumi.Input[str]]
    tags: dict[str, str]
    aws: AwsSettings
    build_args: dict[str, str]


def _settings(name: str, args: TrainingImageArgs) -> _Settings:
    """The validated settings of the build: the name, platform, compute type, timeouts, AWS settings and build
    arguments."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", name):
        # Children (bucket, repository) are auto-named from it, and those names must be lowercase.
        raise ValueError(f"TrainingImage name {name!r} must be 1-40 lowercase letters, digits or '-'")
    platform = args.get("platform", DEFAULT_PLATFORM)
    if platform not in PLATFORM_BUILD_ENVIRONMENTS:
        raise ValueError(f"platform must be one of {sorted(PLATFORM_BUILD_ENVIRONMENTS)}, got {platform!r}")
    compute_type = args.get("compute_type", DEFAULT_COMPUTE_TYPE)
    if compute_type not in COMPUTE_TYPES:
        raise ValueError(f"compute_type must be one of {sorted(COMPUTE_TYPES)}, got {compute_type!r}")
    keep_images = int(args.get("keep_images", DEFAULT_KEEP_IMAGES))
    build_timeout = int(args.get("build_timeout_minutes", DEFAULT_BUILD_TIMEOUT_MINUTES))
    queued_timeout = int(args.get("queued_timeout_minutes", DEFAULT_QUEUED_TIMEOUT_MINUTES))
    low, high = BUILD_TIMEOUT_MINUTES_RANGE
    if not low <= build_timeout <= high:
        raise ValueError(f"build_timeout_minutes must be between {low} and {high}")
    if not 5 <= queued_timeout <= 480:
        raise ValueError("queued_timeout_minutes must be between 5 and 480")
    aws_settings: AwsSettings = args["aws"] if "aws" in args else stack_aws_settings()
    aws_problems = aws_settings_problems(aws_settings)
    if aws_problems:
        raise AwsSettingsError(aws_problems)
    env_type, default_build_image = PLATFORM_BUILD_ENVIRONMENTS[platform]
    return _Settings(
        dockerfile=args.get("dockerfile", "Dockerfile"),
        platform=platform,
        env_type=env_type,
        build_image=args.get("codebuild_image", default_build_image),
        compute_type=compute_type,
        keep_images=keep_images,
        build_timeout=build_timeout,
        queued_timeout=queued_timeout,
        log_retention_days=int(args.get("log_retention_days", DEFAULT_LOG_RETENTION_DAYS)),
        poll_interval=float(args.get("poll_interval_seconds", 15.0)),
        kms_key_arn=args.get("kms_key_arn"),
        tags=dict(args.get("tags") or {}),
        aws=aws_settings,
        build_args=_build_args(args),
    )


def _build_args(args: TrainingImageArgs) -> dict[str, str]:
    """The build arguments, each a variable name that is neither CodeBuild's nor the build's own."""
    build_args = dict(args.get("build_args") or {})
    for arg in build_args:
        if (
            not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", arg)
            or arg in RESERVED_BUILD_VARIABLES
            or arg.startswith(("CODEBUILD_", "AWS_"))
        ):
            raise ValueError(
                f"build argument {arg!r} must be a variable name, not CODEBUILD_* or AWS_* (CodeBuild's) nor "
                f"{', '.join(RESERVED_BUILD_VARIABLES)} (the build's)"
            )
    return build_args


@dataclass(frozen=True)
class _Context:
    """The build context as it was hashed and zipped when the program ran."""

    hash: str
    tag: str
    zip_path: str
    key: str


def _context(context_dir: str, settings: _Settings) -> _Context:
    """Program-time content addressing: hash the context, then write a deterministic zip named by the hash."""
    context_hash = hash_build_context(context_dir, settings.dockerfile, settings.platform, settings.build_args)
    zip_path = context_zip_path(context_hash)
    write_context_zip(context_dir, zip_path, settings.dockerfile)
    return _Context(
        hash=context_hash,
        tag=image_tag_for(context_hash),
        zip_path=zip_path,
        key=f"{CONTEXT_PREFIX}/{context_hash}.zip",
    )


def _environment_variables(settings: _Settings) -> list[aws.codebuild.ProjectEnvironmentEnvironmentVariableArgsDict]:
    """The CodeBuild project's variables: the Dockerfile, the platform and the build arguments."""
    env_vars: list[aws.codebuild.ProjectEnvironmentEnvironmentVariableArgsDict] = [
        {"name": "DOCKERFILE", "value": settings.dockerfile, "type": "PLAINTEXT"},
        {"name": "DOCKER_PLATFORM", "value": settings.platform, "type": "PLAINTEXT"},
    ]
    build_args = settings.build_args
    if build_args:  # each argument's value in a variable of its name; the buildspec passes them by name
        env_vars.append({"name": BUILD_ARGS_VARIABLE, "value": " ".join(sorted(build_args)), "type": "PLAINTEXT"})
        env_vars += [{"name": k, "value": v, "type": "PLAINTEXT"} for k, v in sorted(build_args.items())]
    return env_vars


class TrainingImage(pulumi.ComponentResource):
    """ECR repository + lifecycle policy, S3 context bucket + uploaded context, CodeBuild role, log
    group and project, and the :class:`~components.image_build.ImageBuild` that runs the build."""

    image_uri: pulumi.Output[str]
    """``<repository_url>@sha256:<digest>``: reference jobs should use."""
    image_tag: pulumi.Output[str]
    """Content-hash tag of the image (first 24 hex characters of the context hash)."""
    digest: pulumi.Output[str]
    """``sha256:...`` digest of the pushed image."""
    repository_url: pulumi.Output[str]
    """ECR repository URI (without tag or digest)."""
    repository_arn: pulumi.Output[str]
    """ECR repository ARN (grant node roles pull access on it)."""
    context_hash: pulumi.Output[str]
    """Full sha256 of the build context."""
    build_project_name: pulumi.Output[str]
    """Name of the CodeBuild project."""
    build_log_link: pulumi.Output[str]
    """CloudWatch link of the last build's log ("" when the image already existed)."""

    @checks_args
    def __init__(self, name: str, args: TrainingImageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:TrainingImage", name, None, opts)
        settings = _settings(name, args)
        context = _context(args["context_dir"], settings)
        repo = self._repository(name, args, settings)
        bucket, context_object = self._context_upload(name, settings, context)
        log_group = self._log_group(name, settings)
        role, role_policy = self._build_role(name, settings, repo, bucket, log_group)
        project = self._project(name, settings, bucket, log_group, role, role_policy)
        build = self._build(name, settings, context, repo, bucket, context_object, project, role_policy)

        self.image_uri = build.image_uri
        self.image_tag = pulumi.Output.from_input(context.tag)
        self.digest = build.image_digest
        self.repository_url = repo.repository_url
        self.repository_arn = repo.arn
        self.context_hash = pulumi.Output.from_input(context.hash)
        self.build_project_name = project.name
        self.build_log_link = build.log_link
        self.register_outputs(
            {
                "image_uri": self.image_uri,
                "image_tag": self.image_tag,
                "digest": self.digest,
                "repository_url": self.repository_url,
                "repository_arn": self.repository_arn,
                "context_hash": self.context_hash,
                "build_project_name": self.build_project_name,
                "build_log_link": self.build_log_link,
            }
        )

    def _repository(self, name: str, args: TrainingImageArgs, settings: "_Settings") -> aws.ecr.Repository:
        """The ECR repository (immutable tags, scan on push, encrypted) and its lifecycle policy."""
        child = pulumi.ResourceOptions(parent=self)
        encryption: aws.ecr.RepositoryEncryptionConfigurationArgsDict = (
            {"encryption_type": "KMS", "kms_key": settings.kms_key_arn}
            if settings.kms_key_arn is not None
            else {"encryption_type": "AES256"}
        )
        scanning: aws.ecr.RepositoryImageScanningConfigurationArgsDict = {"scan_on_push": True}
        repo = aws.ecr.Repository(
            f"{name}-repo",
            name=args.get("repository_name"),
            image_tag_mutability="IMMUTABLE",  # tags are content hashes: never re-pointed
            image_scanning_configuration=scanning,
            encryption_configurations=[encryption],
            force_delete=bool(args.get("force_delete", True)),
            tags=settings.tags,
            opts=child,
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-lifecycle",
            repository=repo.name,
            policy=lifecycle_policy_document(settings.keep_images),
            opts=child,
        )
        return repo

    def _context_upload(
        self, name: str, settings: "_Settings", context: "_Context"
    ) -> tuple[aws.s3.Bucket, aws.s3.BucketObjectv2]:
        """The private bucket of build contexts and this context's zip in it."""
        kms_key_arn = settings.kms_key_arn
        contexts = private_bucket(
            self, f"{name}-contexts", force_destroy=True, kms_key_arn=kms_key_arn, tags=settings.tags
        )
        bucket, sse = contexts.bucket, contexts.encryption
        context_object = aws.s3.BucketObjectv2(
            f"{name}-context",
            bucket=bucket.id,
            key=context.key,
            source=pulumi.FileAsset(context.zip_path),
            content_type="application/zip",
            server_side_encryption="aws:kms" if kms_key_arn is not None else "AES256",
            kms_key_id=kms_key_arn,
            tags=settings.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[sse]),
        )
        return bucket, context_object

    def _log_group(self, name: str, settings: "_Settings") -> aws.cloudwatch.LogGroup:
        """The build log group, with its retention."""
        return aws.cloudwatch.LogGroup(
            f"{name}-build-logs",
            retention_in_days=settings.log_retention_days,
            tags=settings.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _build_role(
        self,
        name: str,
        settings: "_Settings",
        repo: aws.ecr.Repository,
        bucket: aws.s3.Bucket,
        log_group: aws.cloudwatch.LogGroup,
    ) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
        """CodeBuild's service role (assumed from the repository's account only) and its least-privilege policy."""
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-codebuild-role",
            description="CodeBuild service role that builds and pushes the training image",
            assume_role_policy=repo.arn.apply(
                lambda arn: service_trust_policy(
                    "codebuild.amazonaws.com", source_account=account_from_arn(arn), sid="CodeBuildAssume"
                )
            ),
            tags=settings.tags,
            opts=child,
        )
        policy_json = pulumi.Output.all(
            repo.arn, bucket.arn, log_group.arn, pulumi.Output.from_input(settings.kms_key_arn)
        ).apply(lambda a: json.dumps(codebuild_policy(a[0], a[1], a[2], a[3], CONTEXT_PREFIX), sort_keys=True))
        role_policy = aws.iam.RolePolicy(f"{name}-codebuild-policy", role=role.id, policy=policy_json, opts=child)
        return role, role_policy

    def _project(
        self,
        name: str,
        settings: "_Settings",
        bucket: aws.s3.Bucket,
        log_group: aws.cloudwatch.LogGroup,
        role: aws.iam.Role,
        role_policy: aws.iam.RolePolicy,
    ) -> aws.codebuild.Project:
        """The privileged CodeBuild project that runs ``docker build`` and pushes, logging to the log group."""
        environment: aws.codebuild.ProjectEnvironmentArgsDict = {
            "type": settings.env_type,
            "image": settings.build_image,
            "compute_type": settings.compute_type,
            "image_pull_credentials_type": "CODEBUILD",
            "privileged_mode": True,  # docker build needs the Docker daemon
            "environment_variables": _environment_variables(settings),
        }
        source: aws.codebuild.ProjectSourceArgsDict = {
            "type": "S3",
            # Stable location; each build overrides it with the content-addressed zip.
            "location": bucket.bucket.apply(lambda b: f"{b}/{CONTEXT_PREFIX}/"),
            "buildspec": buildspec(),
        }
        artifacts: aws.codebuild.ProjectArtifactsArgsDict = {"type": "NO_ARTIFACTS"}
        logs_config: aws.codebuild.ProjectLogsConfigArgsDict = {
            "cloudwatch_logs": {"status": "ENABLED", "group_name": log_group.name},
            "s3_logs": {"status": "DISABLED"},
        }
        return aws.codebuild.Project(
            f"{name}-build",
            description="Builds the training image from the content-addressed context in S3",
            service_role=role.arn,
            build_timeout=settings.build_timeout,
            queued_timeout=settings.queued_timeout,
            environment=environment,
            source=source,
            artifacts=artifacts,
            logs_config=logs_config,
            encryption_key=settings.kms_key_arn,
            tags=settings.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role_policy]),
        )

    def _build(
        self,
        name: str,
        settings: "_Settings",
        context: "_Context",
        repo: aws.ecr.Repository,
        bucket: aws.s3.Bucket,
        context_object: aws.s3.BucketObjectv2,
        project: aws.codebuild.Project,
        role_policy: aws.iam.RolePolicy,
    ) -> ImageBuild:
        """The dynamic resource that starts the build of this context (when its tag is not pushed yet) and reads the
        image's digest."""
        build_inputs: ImageBuildInputs = {
            "project_name": project.name,
            "repository_url": repo.repository_url,
            "repository_name": repo.name,
            "region": repo.arn.apply(region_from_arn),
            "image_tag": context.tag,
            "source_bucket": bucket.bucket,
            "source_key": context_object.key,
            "poll_interval_seconds": settings.poll_interval,
            "wait_timeout_seconds": float((settings.build_timeout + settings.queued_timeout) * 60 + 600),
            "digest_wait_seconds": 120.0,
            "aws": settings.aws,
        }
        return ImageBuild(
            f"{name}-image",
            build_inputs,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role_policy, context_object, project]),
        )
