"""``TrainingImage``: the training container, built in AWS CodeBuild from ``training/`` and pushed to ECR.

The machine running ``pulumi up`` needs no Docker daemon: the build context is hashed and zipped at
program time, uploaded to S3, and a CodeBuild project (privileged, so it can run ``docker build``)
builds and pushes it, driven by the dynamic resource in :mod:`components.image_build`.

Content addressing
------------------
The image tag is a hash of the build context (see :func:`hash_build_context`), computed when the
program runs. The same context gives the same tag, so the build resource reports no change and
nothing is rebuilt; a changed file gives a new tag and a new S3 key, which replaces only the build
resource (and the context object). The repository, bucket, role, log group and project do not change.
Jobs should use :attr:`TrainingImage.image_uri`, which pins the image by digest.

Region and credentials of the build step
----------------------------------------
The children use whatever AWS provider the component inherits (no provider is created here). The
dynamic build resource runs boto3 in Pulumi's dynamic-provider host with the ambient credentials;
its region is taken from the repository ARN, so it always matches the region the children were
created in (see :mod:`components.image_build`).

Pure helpers (no Pulumi, no AWS) are public so that tests and the config loader can use them:
:func:`hash_build_context`, :func:`collect_build_context`, :func:`write_context_zip`,
:func:`validate_image_reference`, :func:`codebuild_policy_document`, :func:`lifecycle_policy_document`,
:func:`buildspec`.
"""

import hashlib
import json
import os
import re
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
import yaml
from typing_extensions import NotRequired

from components.image_build import ImageBuild, ImageBuildInputs

HASH_SCHEME = "eks-training-image-context-v1"
"""Versioned prefix of the context hash: bump it if the hashing rules change."""
TAG_HEX_LENGTH = 24
"""Length of the image tag (hex characters of the context hash)."""
CONTEXT_PREFIX = "contexts"
"""S3 key prefix of uploaded build contexts."""

DEFAULT_COMPUTE_TYPE = "BUILD_GENERAL1_LARGE"
DEFAULT_PLATFORM = "linux/amd64"
DEFAULT_KEEP_IMAGES = 10
DEFAULT_BUILD_TIMEOUT_MINUTES = 90
DEFAULT_QUEUED_TIMEOUT_MINUTES = 60
DEFAULT_LOG_RETENTION_DAYS = 30

#: platform -> (CodeBuild environment type, curated CodeBuild image with Docker)
PLATFORM_BUILD_ENVIRONMENTS: dict[str, tuple[str, str]] = {
    "linux/amd64": ("LINUX_CONTAINER", "aws/codebuild/amazonlinux2-x86_64-standard:5.0"),
    "linux/arm64": ("ARM_CONTAINER", "aws/codebuild/amazonlinux2-aarch64-standard:3.0"),
}
COMPUTE_TYPES = frozenset(
    {"BUILD_GENERAL1_SMALL", "BUILD_GENERAL1_MEDIUM", "BUILD_GENERAL1_LARGE", "BUILD_GENERAL1_XLARGE", "BUILD_GENERAL1_2XLARGE"}
)


# ---------------------------------------------------------------------------------------------------
# Build-context hashing (pure)
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DockerignorePattern:
    """One ``.dockerignore`` line, cleaned as Docker does."""

    pattern: str
    exclude: bool
    """False for ``!pattern`` (re-include)."""
    regex: "re.Pattern[str]"


@dataclass(frozen=True)
class ContextEntry:
    """One file (or symlink) of the build context."""

    path: str
    """Path relative to the context root, ``/``-separated."""
    mode: int
    """0o755 if any execute bit is set, else 0o644 (like git: umask-independent); 0o777 for symlinks."""
    is_symlink: bool
    sha256: str
    """Hex digest of the content (of the link target text for a symlink)."""


def _glob_to_regex(pattern: str) -> "re.Pattern[str]":
    """Docker/Go ``filepath.Match`` semantics plus ``**`` (any number of directories)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            if j - i >= 2:
                if j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")
                    j += 1
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
            i = j
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$")


def parse_dockerignore(text: str) -> list[DockerignorePattern]:
    """Parse ``.dockerignore`` content: ``#`` comments, blank lines, ``!`` re-includes, leading ``/``
    and ``./`` dropped, paths cleaned (``a//b/../c`` -> ``a/c``)."""
    patterns: list[DockerignorePattern] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclude = True
        if line.startswith("!"):
            exclude = False
            line = line[1:].strip()
        line = os.path.normpath(line.replace("\\", "/")).replace(os.sep, "/").lstrip("/")
        if line in ("", "."):
            continue
        patterns.append(DockerignorePattern(line, exclude, _glob_to_regex(line)))
    return patterns


def is_ignored(path: str, patterns: Sequence[DockerignorePattern]) -> bool:
    """Docker's rule: the last pattern that matches the path *or one of its parent directories* wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    ignored = False
    for p in patterns:
        if any(p.regex.match(candidate) for candidate in prefixes):
            ignored = p.exclude
    return ignored


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def collect_build_context(context_dir: str, dockerfile: str = "Dockerfile") -> list[ContextEntry]:
    """Pure (reads files only): the files Docker would send for ``context_dir``, sorted by path.

    Honours ``.dockerignore`` (basic patterns: ``*``, ``?``, ``[...]``, ``**``, ``!`` re-includes,
    parent-directory matches). The Dockerfile and ``.dockerignore`` are always included, as Docker
    always sends them. Empty directories are not part of the context hash. Raises ``ValueError`` when
    the directory or the Dockerfile is missing."""
    root = os.path.abspath(context_dir)
    if not os.path.isdir(root):
        raise ValueError(f"build context directory {context_dir!r} does not exist")
    dockerfile_rel = os.path.normpath(dockerfile).replace(os.sep, "/")
    if not os.path.isfile(os.path.join(root, dockerfile_rel)):
        raise ValueError(f"build context {context_dir!r} has no {dockerfile_rel} (the Dockerfile to build)")
    ignore_path = os.path.join(root, ".dockerignore")
    patterns: list[DockerignorePattern] = []
    if os.path.isfile(ignore_path):
        with open(ignore_path, encoding="utf-8") as f:
            patterns = parse_dockerignore(f.read())
    has_reincludes = any(not p.exclude for p in patterns)
    always = {dockerfile_rel, ".dockerignore"}

    entries: list[ContextEntry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        if not has_reincludes:  # prune ignored directories (safe only without `!` patterns)
            dirnames[:] = [d for d in dirnames if not is_ignored(rel_dir + d, patterns)]
        # Symlinks to directories are listed in dirnames but not followed: treat them as links.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if d not in links]
        for name in list(filenames) + links:
            rel = rel_dir + name
            if rel not in always and is_ignored(rel, patterns):
                continue
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                entries.append(ContextEntry(rel, 0o777, True, hashlib.sha256(target.encode("utf-8")).hexdigest()))
            elif stat.S_ISREG(st.st_mode):
                mode = 0o755 if st.st_mode & 0o111 else 0o644
                entries.append(ContextEntry(rel, mode, False, _file_sha256(full)))
            # sockets, fifos, devices: not part of a build context
    entries.sort(key=lambda e: e.path)
    return entries


def hash_build_context(
    context_dir: str, dockerfile: str = "Dockerfile", platform: str = DEFAULT_PLATFORM
) -> str:
    """Pure: sha256 (64 hex) of the build context.

    Hashed, in path order: each entry's relative ``/`` path, kind (file/symlink), normalised mode
    (0644/0755) and content sha256, after :data:`HASH_SCHEME`, the Dockerfile path and the target
    platform (both change the image). File order on disk, mtimes, owners and the absolute location of
    the directory do not matter; files excluded by ``.dockerignore`` do not matter."""
    h = hashlib.sha256()
    h.update(f"{HASH_SCHEME}\0dockerfile={dockerfile}\0platform={platform}\0".encode("utf-8"))
    for e in collect_build_context(context_dir, dockerfile):
        kind = "symlink" if e.is_symlink else "file"
        h.update(f"{e.path}\0{kind}\0{e.mode:o}\0{e.sha256}\n".encode("utf-8"))
    return h.hexdigest()


def image_tag_for(context_hash: str) -> str:
    """The image tag for a context hash: its first :data:`TAG_HEX_LENGTH` hex characters."""
    return context_hash[:TAG_HEX_LENGTH]


def write_context_zip(context_dir: str, dest: str, dockerfile: str = "Dockerfile") -> list[ContextEntry]:
    """Write the context as a deterministic zip: entries sorted, timestamps fixed (1980-01-01),
    stored (not deflated, so the bytes do not depend on the zlib version), Unix mode bits kept.
    The same context gives byte-identical zips. Written atomically; returns the entries."""
    entries = collect_build_context(context_dir, dockerfile)
    root = os.path.abspath(context_dir)
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ctx-", suffix=".zip", dir=os.path.dirname(os.path.abspath(dest)))
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_STORED) as zf:
            for e in entries:
                info = zipfile.ZipInfo(e.path, date_time=(1980, 1, 1, 0, 0, 0))
                info.create_system = 3  # Unix, so external_attr carries the mode
                full = os.path.join(root, *e.path.split("/"))
                if e.is_symlink:
                    info.external_attr = (stat.S_IFLNK | 0o777) << 16
                    data = os.readlink(full).encode("utf-8")
                else:
                    info.external_attr = (stat.S_IFREG | e.mode) << 16
                    with open(full, "rb") as f:
                        data = f.read()
                zf.writestr(info, data, compress_type=zipfile.ZIP_STORED)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return entries


def context_zip_path(context_hash: str) -> str:
    """Where the zipped context is written (a per-hash file under the system temp directory)."""
    return os.path.join(tempfile.gettempdir(), "eks-training-image-contexts", f"{context_hash}.zip")


# ---------------------------------------------------------------------------------------------------
# Image references (pure)
# ---------------------------------------------------------------------------------------------------
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_RE = re.compile(rf"^{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?$")
_PATH_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")


def validate_image_reference(uri: str, *, require_pinned: bool = True) -> Optional[str]:
    """Check that ``uri`` is a plausible container image reference
    ``[registry[:port]/]repo/path[:tag][@sha256:<64 hex>]``.

    Returns ``None`` when it is fine, else a one-line message naming the problem. With
    ``require_pinned`` (default) a reference without tag and digest (an implicit ``:latest``) is a
    problem, because a training job should run a known image."""
    if not isinstance(uri, str) or not uri:
        return "image reference is empty"
    if any(ch.isspace() for ch in uri):
        return f"image reference {uri!r} contains whitespace"
    if "://" in uri:
        return f"image reference {uri!r} must not contain a URL scheme (drop 'https://')"
    name, at, digest = uri.partition("@")
    if at and not _DIGEST_RE.match(digest):
        return f"image reference {uri!r} has an invalid digest {digest!r}: expected sha256: followed by 64 lowercase hex digits"
    tag = ""
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG_RE.match(tag):
            return f"image reference {uri!r} has an invalid tag {tag!r} (letters, digits, '_', '.', '-'; at most 128; not starting with '.' or '-')"
    if not name:
        return f"image reference {uri!r} has no repository name"
    if len(name) > 255:
        return f"image reference {uri!r}: repository name longer than 255 characters"
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN_RE.match(first):
            return f"image reference {uri!r} has an invalid registry host {first!r}"
        parts = parts[1:]
    for part in parts:
        if not part:
            return f"image reference {uri!r} has an empty path component (doubled or trailing '/')"
        if part.lower() != part and _PATH_COMPONENT_RE.match(part.lower()):
            return f"image reference {uri!r}: repository path {part!r} must be lowercase"
        if not _PATH_COMPONENT_RE.match(part):
            return f"image reference {uri!r} has an invalid repository path component {part!r}"
    if require_pinned and not tag and not at:
        return f"image reference {uri!r} has neither a tag nor a @sha256 digest (it would float on :latest); pin one"
    return None


# ---------------------------------------------------------------------------------------------------
# Policies and buildspec (pure)
# ---------------------------------------------------------------------------------------------------
class _PolicyStatement(TypedDict):
    Sid: str
    Effect: str
    Action: list[str]
    Resource: list[str] | str
    Condition: NotRequired[dict[str, dict[str, str]]]


class _PolicyDocument(TypedDict):
    Version: str
    Statement: list[_PolicyStatement]


def region_from_arn(arn: str) -> str:
    """The region field of an ARN (``arn:partition:service:REGION:account:resource``)."""
    parts = arn.split(":")
    if len(parts) < 6 or not parts[3]:
        raise ValueError(f"{arn!r} is not a regional ARN")
    return parts[3]


def account_from_arn(arn: str) -> str:
    """The account field of an ARN."""
    parts = arn.split(":")
    if len(parts) < 6 or not parts[4]:
        raise ValueError(f"{arn!r} has no account field")
    return parts[4]


def codebuild_assume_role_policy(account_id: str) -> str:
    """Trust policy: only CodeBuild, on behalf of this account (confused-deputy guard)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "CodeBuildAssume",
                    "Effect": "Allow",
                    "Principal": {"Service": "codebuild.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                    "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
                }
            ],
        },
        sort_keys=True,
    )


def codebuild_policy_document(
    repository_arn: str,
    bucket_arn: str,
    log_group_arn: str,
    kms_key_arn: Optional[str] = None,
    context_prefix: str = CONTEXT_PREFIX,
) -> _PolicyDocument:
    """Least-privilege permissions of the CodeBuild role.

    Only ``ecr:GetAuthorizationToken`` uses ``"*"`` (the API has no resource-level permissions).
    ECR push/pull and DescribeImages on this repository; read of this bucket's context prefix;
    log streams/events in this project's log group; the KMS key, when one is used."""
    log_group = log_group_arn[:-2] if log_group_arn.endswith(":*") else log_group_arn
    statements: list[_PolicyStatement] = [
        {"Sid": "EcrLogin", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
        {
            "Sid": "EcrPushPullThisRepository",
            "Effect": "Allow",
            "Action": [
                "ecr:BatchCheckLayerAvailability",
                "ecr:BatchGetImage",
                "ecr:CompleteLayerUpload",
                "ecr:DescribeImages",
                "ecr:GetDownloadUrlForLayer",
                "ecr:InitiateLayerUpload",
                "ecr:PutImage",
                "ecr:UploadLayerPart",
            ],
            "Resource": [repository_arn],
        },
        {
            "Sid": "ReadBuildContexts",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": [f"{bucket_arn}/{context_prefix}/*"],
        },
        {
            "Sid": "ContextBucketLocation",
            "Effect": "Allow",
            "Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"],
            "Resource": [bucket_arn],
        },
        {
            "Sid": "BuildLogs",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": [log_group, f"{log_group}:*"],
        },
    ]
    if kms_key_arn:
        statements.append(
            {
                "Sid": "UseEncryptionKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
                "Resource": [kms_key_arn],
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def lifecycle_policy_document(keep_images: int) -> str:
    """ECR lifecycle policy JSON: expire all but the newest ``keep_images`` images (one rule)."""
    if keep_images < 1:
        raise ValueError("keep_images must be >= 1")
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": f"Keep only the newest {keep_images} images",
                    "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep_images},
                    "action": {"type": "expire"},
                }
            ]
        },
        sort_keys=True,
    )


def buildspec() -> str:
    """The inline buildspec (YAML). Uses ``IMAGE_TAG`` and ``REPOSITORY_URI`` (set per build by the
    dynamic resource), ``DOCKERFILE`` and ``DOCKER_PLATFORM`` (project environment), ``AWS_REGION``
    (set by CodeBuild). Logs in to ECR, builds, pushes and prints the pushed digest."""
    spec: dict[str, Any] = {
        "version": 0.2,
        "env": {"shell": "bash", "variables": {"DOCKER_BUILDKIT": "1"}},
        "phases": {
            "pre_build": {
                "commands": [
                    'test -n "${IMAGE_TAG:-}" || { echo "IMAGE_TAG is not set" >&2; exit 1; }',
                    'test -n "${REPOSITORY_URI:-}" || { echo "REPOSITORY_URI is not set" >&2; exit 1; }',
                    'REGISTRY="${REPOSITORY_URI%%/*}"',
                    'aws ecr get-login-password --region "$AWS_REGION" | docker login --username AWS --password-stdin "$REGISTRY"',
                ]
            },
            "build": {
                "commands": [
                    'docker build --platform "$DOCKER_PLATFORM" --file "$DOCKERFILE" --tag "$REPOSITORY_URI:$IMAGE_TAG" .',
                    'docker push "$REPOSITORY_URI:$IMAGE_TAG"',
                    'IMAGE_DIGEST="$(aws ecr describe-images --region "$AWS_REGION" --repository-name "${REPOSITORY_URI#*/}"'
                    ' --image-ids imageTag="$IMAGE_TAG" --query "imageDetails[0].imageDigest" --output text)"',
                    'echo "IMAGE_DIGEST=$IMAGE_DIGEST"',
                    'echo "IMAGE_URI=$REPOSITORY_URI@$IMAGE_DIGEST"',
                ]
            },
        },
    }
    return yaml.safe_dump(spec, sort_keys=False, width=4096)


# ---------------------------------------------------------------------------------------------------
# The component
# ---------------------------------------------------------------------------------------------------
class TrainingImageArgs(TypedDict):
    """Inputs of :class:`TrainingImage`."""

    context_dir: str
    """Local path of the Docker build context (hashed and zipped when the program runs)."""
    dockerfile: NotRequired[str]
    """Dockerfile path relative to the context (default ``Dockerfile``)."""
    platform: NotRequired[str]
    """``linux/amd64`` (default) or ``linux/arm64``; picks the CodeBuild environment."""
    repository_name: NotRequired[pulumi.Input[str]]
    """ECR repository name (default: auto-named from the component name)."""
    keep_images: NotRequired[int]
    """Lifecycle policy keeps the newest N images (default 10)."""
    force_delete: NotRequired[bool]
    """Delete the repository with its images on destroy (default True: images are rebuildable)."""
    kms_key_arn: NotRequired[pulumi.Input[str]]
    """KMS key for ECR, the context bucket and CodeBuild artifacts (default: AES256 / AWS-managed)."""
    compute_type: NotRequired[str]
    """CodeBuild compute type (default BUILD_GENERAL1_LARGE: CUDA images are big)."""
    codebuild_image: NotRequired[str]
    """Override the curated CodeBuild image of the platform."""
    build_timeout_minutes: NotRequired[int]
    """CodeBuild build timeout, 5-2160 (default 90)."""
    queued_timeout_minutes: NotRequired[int]
    """CodeBuild queue timeout, 5-480 (default 60)."""
    log_retention_days: NotRequired[int]
    """Retention of the build log group (default 30)."""
    poll_interval_seconds: NotRequired[float]
    """How often the build status is polled (default 15)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags added to every taggable child."""


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

    def __init__(self, name: str, args: TrainingImageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:TrainingImage", name, None, opts)
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", name):
            # Children (bucket, repository) are auto-named from it, and those names must be lowercase.
            raise ValueError(f"TrainingImage name {name!r} must be 1-40 lowercase letters, digits or '-'")

        dockerfile = args.get("dockerfile", "Dockerfile")
        platform = args.get("platform", DEFAULT_PLATFORM)
        if platform not in PLATFORM_BUILD_ENVIRONMENTS:
            raise ValueError(f"platform must be one of {sorted(PLATFORM_BUILD_ENVIRONMENTS)}, got {platform!r}")
        compute_type = args.get("compute_type", DEFAULT_COMPUTE_TYPE)
        if compute_type not in COMPUTE_TYPES:
            raise ValueError(f"compute_type must be one of {sorted(COMPUTE_TYPES)}, got {compute_type!r}")
        keep_images = int(args.get("keep_images", DEFAULT_KEEP_IMAGES))
        build_timeout = int(args.get("build_timeout_minutes", DEFAULT_BUILD_TIMEOUT_MINUTES))
        queued_timeout = int(args.get("queued_timeout_minutes", DEFAULT_QUEUED_TIMEOUT_MINUTES))
        if not 5 <= build_timeout <= 2160:
            raise ValueError("build_timeout_minutes must be between 5 and 2160")
        if not 5 <= queued_timeout <= 480:
            raise ValueError("queued_timeout_minutes must be between 5 and 480")
        kms_key_arn = args.get("kms_key_arn")
        tags: dict[str, str] = dict(args.get("tags") or {})
        env_type, default_build_image = PLATFORM_BUILD_ENVIRONMENTS[platform]

        # Program-time content addressing: hash, then a deterministic zip named by the hash.
        context_hash = hash_build_context(args["context_dir"], dockerfile, platform)
        tag = image_tag_for(context_hash)
        zip_path = context_zip_path(context_hash)
        write_context_zip(args["context_dir"], zip_path, dockerfile)
        context_key = f"{CONTEXT_PREFIX}/{context_hash}.zip"

        child = pulumi.ResourceOptions(parent=self)

        # --- ECR -----------------------------------------------------------------------------------
        encryption: aws.ecr.RepositoryEncryptionConfigurationArgsDict = (
            {"encryption_type": "KMS", "kms_key": kms_key_arn} if kms_key_arn is not None else {"encryption_type": "AES256"}
        )
        scanning: aws.ecr.RepositoryImageScanningConfigurationArgsDict = {"scan_on_push": True}
        repo = aws.ecr.Repository(
            f"{name}-repo",
            name=args.get("repository_name"),
            image_tag_mutability="IMMUTABLE",  # tags are content hashes: never re-pointed
            image_scanning_configuration=scanning,
            encryption_configurations=[encryption],
            force_delete=bool(args.get("force_delete", True)),
            tags=tags,
            opts=child,
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-lifecycle",
            repository=repo.name,
            policy=lifecycle_policy_document(keep_images),
            opts=child,
        )

        # --- S3 bucket for build contexts ----------------------------------------------------------
        bucket = aws.s3.Bucket(f"{name}-contexts", force_destroy=True, tags=tags, opts=child)
        sse_default: aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgsDict = (
            {"sse_algorithm": "aws:kms", "kms_master_key_id": kms_key_arn}
            if kms_key_arn is not None
            else {"sse_algorithm": "AES256"}
        )
        sse_rule: aws.s3.BucketServerSideEncryptionConfigurationRuleArgsDict = {
            "apply_server_side_encryption_by_default": sse_default,
            "bucket_key_enabled": kms_key_arn is not None,
        }
        sse = aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-contexts-sse", bucket=bucket.id, rules=[sse_rule], opts=child
        )
        pab = aws.s3.BucketPublicAccessBlock(
            f"{name}-contexts-pab",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-contexts-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(
                lambda arn: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "DenyInsecureTransport",
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": "s3:*",
                                "Resource": [arn, f"{arn}/*"],
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        ],
                    },
                    sort_keys=True,
                )
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[pab]),
        )
        context_object = aws.s3.BucketObjectv2(
            f"{name}-context",
            bucket=bucket.id,
            key=context_key,
            source=pulumi.FileAsset(zip_path),
            content_type="application/zip",
            server_side_encryption="aws:kms" if kms_key_arn is not None else "AES256",
            kms_key_id=kms_key_arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[sse]),
        )

        # --- Logs, IAM ---------------------------------------------------------------------------------
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-build-logs",
            retention_in_days=int(args.get("log_retention_days", DEFAULT_LOG_RETENTION_DAYS)),
            tags=tags,
            opts=child,
        )
        role = aws.iam.Role(
            f"{name}-codebuild-role",
            description="CodeBuild service role that builds and pushes the training image",
            assume_role_policy=repo.arn.apply(lambda arn: codebuild_assume_role_policy(account_from_arn(arn))),
            tags=tags,
            opts=child,
        )
        policy_json = pulumi.Output.all(repo.arn, bucket.arn, log_group.arn, pulumi.Output.from_input(kms_key_arn)).apply(
            lambda a: json.dumps(codebuild_policy_document(a[0], a[1], a[2], a[3]), sort_keys=True)
        )
        role_policy = aws.iam.RolePolicy(f"{name}-codebuild-policy", role=role.id, policy=policy_json, opts=child)

        # --- CodeBuild -----------------------------------------------------------------------------------
        env_vars: list[aws.codebuild.ProjectEnvironmentEnvironmentVariableArgsDict] = [
            {"name": "DOCKERFILE", "value": dockerfile, "type": "PLAINTEXT"},
            {"name": "DOCKER_PLATFORM", "value": platform, "type": "PLAINTEXT"},
        ]
        environment: aws.codebuild.ProjectEnvironmentArgsDict = {
            "type": env_type,
            "image": args.get("codebuild_image", default_build_image),
            "compute_type": compute_type,
            "image_pull_credentials_type": "CODEBUILD",
            "privileged_mode": True,  # docker build needs the Docker daemon
            "environment_variables": env_vars,
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
        project = aws.codebuild.Project(
            f"{name}-build",
            description="Builds the training image from the content-addressed context in S3",
            service_role=role.arn,
            build_timeout=build_timeout,
            queued_timeout=queued_timeout,
            environment=environment,
            source=source,
            artifacts=artifacts,
            logs_config=logs_config,
            encryption_key=kms_key_arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role_policy]),
        )

        # --- The build ---------------------------------------------------------------------------------------
        poll = float(args.get("poll_interval_seconds", 15.0))
        build_inputs: ImageBuildInputs = {
            "project_name": project.name,
            "repository_url": repo.repository_url,
            "repository_name": repo.name,
            "region": repo.arn.apply(region_from_arn),
            "image_tag": tag,
            "source_bucket": bucket.bucket,
            "source_key": context_object.key,
            "poll_interval_seconds": poll,
            "wait_timeout_seconds": float((build_timeout + queued_timeout) * 60 + 600),
            "digest_wait_seconds": 120.0,
        }
        build = ImageBuild(
            f"{name}-image",
            build_inputs,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role_policy, context_object, project]),
        )

        self.image_uri = build.image_uri
        self.image_tag = pulumi.Output.from_input(tag)
        self.digest = build.image_digest
        self.repository_url = repo.repository_url
        self.repository_arn = repo.arn
        self.context_hash = pulumi.Output.from_input(context_hash)
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
