"""Dynamic resource that builds the training image in AWS CodeBuild and reports its digest.

``ImageBuild`` is created by :class:`components.image.component.TrainingImage`; it is not meant to be used alone.

How it behaves
--------------
* ``create``: if the repository already holds an image tagged ``image_tag`` (tags are content hashes,
  so that image *is* the wanted build) no build is started and only the digest is read. Otherwise a
  CodeBuild build that is still running for the same tag is reused (a ``pulumi up`` interrupted
  mid-build), else ``start_build`` is called with the uploaded context as S3 source override and the
  ``IMAGE_TAG``/``REPOSITORY_URI`` environment overrides. ``batch_get_builds`` is polled until a
  terminal status (with a deadline; on expiry the build is stopped). A failed build raises
  :class:`ImageBuildError` naming the build id, status, failing phase, the phase's error context and
  the CloudWatch deep link. On success the digest comes from ``ecr.describe_images``.
* ``diff``: replace only when the tag, the context object or the repository changes; no change at all
  when the context is unchanged (so no rebuild).
* ``read`` (``pulumi refresh``): re-reads the digest; an image that has aged out of the repository
  makes the resource disappear, so the next ``pulumi up`` builds it again.
* ``delete``: does nothing. Old images age out through the repository's lifecycle policy (and the
  repository may be force-deleted with the stack).

Where it runs and with which credentials
----------------------------------------
The provider runs inside Pulumi's dynamic-provider host (``python -m pulumi.dynamic``), not inside
the program. It uses boto3 with the *ambient* credentials of that process (environment variables,
``AWS_PROFILE``, instance/SSO credentials; ``aws:profile`` from the stack config is honoured when the
engine passes it to ``configure``). The region is an explicit input (the component derives it from
the repository ARN, so it always matches the provider the AWS children were created with).
``AWS_ENDPOINT_URL`` is respected by boto3 itself, which is how the tests point it at moto.

dill pickles :class:`ImageBuildProvider` *by reference* (``components.image.build_provider.ImageBuildProvider``),
so the dynamic-provider host must be able to ``import components.image.build_provider``: it can when the
Pulumi program directory (the host's working directory) is the repository root holding
``components/``; otherwise put the repository on ``PYTHONPATH`` or install it. The provider keeps no
state (no clients at module level or on the instance), so unpickling is cheap and side-effect free.
This module imports only the standard library and ``pulumi``; boto3 is imported inside the methods.
"""

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi.dynamic
from typing_extensions import NotRequired

# CodeBuild build statuses (StatusType) and phase statuses.
BUILD_IN_PROGRESS = "IN_PROGRESS"
BUILD_SUCCEEDED = "SUCCEEDED"
FAILED_PHASE_STATUSES = frozenset({"FAILED", "FAULT", "TIMED_OUT", "STOPPED", "CLIENT_ERROR"})

#: Inputs whose change means "a different image": the build resource is replaced (new build).
REPLACE_KEYS: tuple[str, ...] = ("image_tag", "source_bucket", "source_key", "repository_url", "repository_name")
#: Inputs that can change without rebuilding (updated in place).
UPDATE_KEYS: tuple[str, ...] = (
    "project_name",
    "region",
    "poll_interval_seconds",
    "wait_timeout_seconds",
    "digest_wait_seconds",
)
#: Outputs computed by the provider.
OUTPUT_KEYS: tuple[str, ...] = ("image_digest", "image_uri", "build_id", "log_link", "build_skipped")

#: Phases that fail before any Docker work, typically because a just-created IAM role/policy has not
#: propagated yet (AccessDenied on the S3 source). A build failing there is started once more.
RETRYABLE_PHASES = frozenset({"SUBMITTED", "QUEUED", "PROVISIONING", "DOWNLOAD_SOURCE"})
MAX_START_ATTEMPTS = 2

_PROVIDER_KEY = "__provider"
_RECENT_BUILDS_TO_SCAN = 20


class ImageBuildError(Exception):
    """A CodeBuild image build failed, timed out, or did not produce the expected image."""


class ImageBuildInputs(TypedDict):
    """Inputs of :class:`ImageBuild` (all plain values once resolved)."""

    project_name: pulumi.Input[str]
    """CodeBuild project that builds and pushes the image."""
    repository_url: pulumi.Input[str]
    """ECR repository URI (``<account>.dkr.ecr.<region>.amazonaws.com/<name>``)."""
    repository_name: pulumi.Input[str]
    """ECR repository name."""
    region: pulumi.Input[str]
    """Region of the repository and the project."""
    image_tag: pulumi.Input[str]
    """Content-hash tag to build and push."""
    source_bucket: pulumi.Input[str]
    """Bucket holding the zipped build context."""
    source_key: pulumi.Input[str]
    """Key of the zipped build context (contains the content hash)."""
    poll_interval_seconds: NotRequired[pulumi.Input[float]]
    """Seconds between ``batch_get_builds`` polls (default 15)."""
    wait_timeout_seconds: NotRequired[pulumi.Input[float]]
    """Give up (and stop the build) after this many seconds (default 3 h)."""
    digest_wait_seconds: NotRequired[pulumi.Input[float]]
    """After a successful build, how long to wait for the tag to be visible in ECR (default 60)."""


@dataclass(frozen=True)
class BuildState:
    """What a ``batch_get_builds`` record says about a build."""

    build_id: str
    status: str
    """``buildStatus``: IN_PROGRESS, SUCCEEDED, FAILED, FAULT, TIMED_OUT or STOPPED."""
    done: bool
    succeeded: bool
    current_phase: str
    failed_phase: Optional[str]
    """First phase whose status is a failure (None if none reported)."""
    failure_context: Optional[str]
    """``statusCode: message`` of the failed phase's contexts, if any."""
    log_link: str
    """CloudWatch console deep link of the build's log, or a fallback text."""


def build_log_link(build: Mapping[str, Any]) -> str:
    """The build's CloudWatch deep link (``logs.deepLink``), else a console link built from the
    reported group/stream, else a note saying none was reported."""
    logs = build.get("logs") or {}
    link = logs.get("deepLink")
    if link:
        return str(link)
    group, stream = logs.get("groupName"), logs.get("streamName")
    if group and stream:
        region = str(build.get("arn", "::::")).split(":")[3] or "us-east-1"
        return (
            f"https://console.aws.amazon.com/cloudwatch/home?region={region}"
            f"#logEvent:group={group};stream={stream}"
        )
    return "(no CloudWatch log link reported for this build)"


def evaluate_build(build: Mapping[str, Any]) -> BuildState:
    """Pure: interpret one ``codebuild.batch_get_builds()["builds"][i]`` record.

    A build is done when ``buildStatus`` is anything but IN_PROGRESS. The failing phase is the
    first entry of ``phases`` whose ``phaseStatus`` is a failure (moto repeats phase entries on every
    poll, real CodeBuild lists each phase once; both work)."""
    status = str(build.get("buildStatus") or BUILD_IN_PROGRESS)
    failed_phase: Optional[str] = None
    failure_context: Optional[str] = None
    for phase in build.get("phases") or []:
        if phase.get("phaseStatus") in FAILED_PHASE_STATUSES:
            failed_phase = str(phase.get("phaseType"))
            contexts = [
                f"{c.get('statusCode', '')}: {c.get('message', '')}".strip(": ")
                for c in phase.get("contexts") or []
                if c.get("statusCode") or c.get("message")
            ]
            failure_context = "; ".join(contexts) or None
            break
    return BuildState(
        build_id=str(build.get("id", "")),
        status=status,
        done=status != BUILD_IN_PROGRESS,
        succeeded=status == BUILD_SUCCEEDED,
        current_phase=str(build.get("currentPhase") or ""),
        failed_phase=failed_phase,
        failure_context=failure_context,
        log_link=build_log_link(build),
    )


def format_build_failure(state: BuildState) -> str:
    """Pure: the message raised for a build that ended without success."""
    phase = state.failed_phase or f"unknown (current phase {state.current_phase or 'unknown'})"
    detail = f" ({state.failure_context})" if state.failure_context else ""
    return (
        f"CodeBuild build {state.build_id} ended with status {state.status}; "
        f"failing phase: {phase}{detail}. Build log: {state.log_link}"
    )


def build_environment(build: Mapping[str, Any]) -> dict[str, str]:
    """Pure: the environment variables a build record reports (name -> value)."""
    env = (build.get("environment") or {}).get("environmentVariables") or []
    return {str(v.get("name")): str(v.get("value")) for v in env if v.get("name") is not None}


def find_reusable_build(builds: Sequence[Mapping[str, Any]], image_tag: str, repository_url: str) -> Optional[str]:
    """Pure: id of a still-running build of the same tag for the same repository, if any."""
    for build in builds:
        if build.get("buildStatus") != BUILD_IN_PROGRESS:
            continue
        env = build_environment(build)
        if env.get("IMAGE_TAG") == image_tag and env.get("REPOSITORY_URI") == repository_url:
            return str(build["id"])
    return None


def image_uri_for(repository_url: str, digest: str) -> str:
    """``<repository_url>@<digest>``: the by-digest reference jobs should use."""
    return f"{repository_url}@{digest}"


def start_build_request(props: Mapping[str, Any], attempt: int = 1) -> dict[str, Any]:
    """Pure: the keyword arguments of ``codebuild.start_build`` for these inputs.

    The idempotency token makes a retried call (within CodeBuild's 5-minute window) return the
    same build instead of starting a second one; it differs per ``attempt``."""
    token_src = (
        f"{props['project_name']}|{props['repository_url']}|{props['image_tag']}|{props['source_key']}|{attempt}"
    )
    return {
        "projectName": props["project_name"],
        "sourceTypeOverride": "S3",
        "sourceLocationOverride": f"{props['source_bucket']}/{props['source_key']}",
        "environmentVariablesOverride": [
            {"name": "IMAGE_TAG", "value": props["image_tag"], "type": "PLAINTEXT"},
            {"name": "REPOSITORY_URI", "value": props["repository_url"], "type": "PLAINTEXT"},
        ],
        "idempotencyToken": hashlib.sha256(token_src.encode("utf-8")).hexdigest()[:32],
    }


def _inputs_only(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k != _PROVIDER_KEY and k not in OUTPUT_KEYS}


class ImageBuildProvider(pulumi.dynamic.ResourceProvider):
    """CRUD of one CodeBuild-built image. Stateless; boto3 is created per call."""

    # The serialized provider holds no secret: don't mark it secret in the state.
    serialize_as_secret_always = False

    def configure(self, req: pulumi.dynamic.ConfigureRequest) -> None:
        profile = None
        try:
            profile = req.config.get("aws:profile")
        except Exception:  # noqa: BLE001 - config shape differs between engine versions
            profile = None
        self._profile = profile if isinstance(profile, str) and profile else None

    # -- AWS helpers -------------------------------------------------------------------------------
    def _clients(self, region: str) -> tuple[Any, Any]:
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(profile_name=getattr(self, "_profile", None), region_name=region)
        cfg = Config(retries={"mode": "standard", "max_attempts": 10}, user_agent_extra="eks-training-image")
        return session.client("codebuild", config=cfg), session.client("ecr", config=cfg)

    @staticmethod
    def _find_digest(ecr: Any, repository_name: str, image_tag: str) -> Optional[str]:
        try:
            details = ecr.describe_images(repositoryName=repository_name, imageIds=[{"imageTag": image_tag}])[
                "imageDetails"
            ]
        except ecr.exceptions.ImageNotFoundException:
            return None
        for detail in details:
            if detail.get("imageDigest"):
                return str(detail["imageDigest"])
        return None

    @staticmethod
    def _running_build(cb: Any, props: Mapping[str, Any]) -> Optional[str]:
        ids = cb.list_builds_for_project(projectName=props["project_name"], sortOrder="DESCENDING").get("ids", [])
        ids = ids[:_RECENT_BUILDS_TO_SCAN]
        if not ids:
            return None
        builds = cb.batch_get_builds(ids=ids).get("builds", [])
        return find_reusable_build(builds, props["image_tag"], props["repository_url"])

    @staticmethod
    def _wait(cb: Any, build_id: str, poll: float, timeout: float) -> BuildState:
        deadline = time.monotonic() + timeout
        while True:
            builds = cb.batch_get_builds(ids=[build_id]).get("builds", [])
            if not builds:
                raise ImageBuildError(f"CodeBuild build {build_id} is not reported by batch_get_builds")
            state = evaluate_build(builds[0])
            if state.done:
                return state
            if time.monotonic() >= deadline:
                try:
                    cb.stop_build(id=build_id)
                except Exception:  # noqa: BLE001 - best effort, the error below is what matters
                    pass
                raise ImageBuildError(
                    f"CodeBuild build {build_id} still {state.status} (phase {state.current_phase}) after "
                    f"{timeout:.0f}s; stop requested. Build log: {state.log_link}"
                )
            time.sleep(poll)

    def _build_or_reuse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        cb, ecr = self._clients(props["region"])
        repo_name, tag, repo_url = props["repository_name"], props["image_tag"], props["repository_url"]
        digest = self._find_digest(ecr, repo_name, tag)
        build_id, log_link, skipped = "", "", True
        if digest is None:
            skipped = False
            poll = float(props.get("poll_interval_seconds") or 15)
            timeout = float(props.get("wait_timeout_seconds") or 3 * 3600)
            build_id = self._running_build(cb, props) or ""
            failures: list[str] = []
            for attempt in range(1, MAX_START_ATTEMPTS + 1):
                if not build_id:
                    build_id = cb.start_build(**start_build_request(props, attempt))["build"]["id"]
                state = self._wait(cb, build_id, poll, timeout)
                log_link = state.log_link
                if state.succeeded:
                    break
                failures.append(format_build_failure(state))
                if state.failed_phase not in RETRYABLE_PHASES or attempt == MAX_START_ATTEMPTS:
                    raise ImageBuildError(" | previous attempt: ".join(reversed(failures)))
                build_id = ""  # failed before any Docker work (IAM propagation?): start once more
                time.sleep(min(poll, 10.0))
            deadline = time.monotonic() + float(props.get("digest_wait_seconds") or 60)
            digest_poll = min(poll, 5.0)
            while digest is None:
                digest = self._find_digest(ecr, repo_name, tag)
                if digest is None:
                    if time.monotonic() >= deadline:
                        raise ImageBuildError(
                            f"CodeBuild build {build_id} SUCCEEDED but {repo_url}:{tag} is not in ECR "
                            f"(did the buildspec push it?). Build log: {log_link}"
                        )
                    time.sleep(digest_poll)
        return {
            "image_digest": digest,
            "image_uri": image_uri_for(repo_url, digest),
            "build_id": build_id,
            "log_link": log_link,
            "build_skipped": skipped,
        }

    # -- CRUD -------------------------------------------------------------------------------------
    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.CheckResult:
        failures = []
        for key in ("project_name", "repository_url", "repository_name", "region", "image_tag", "source_bucket", "source_key"):
            if news.get(key) in (None, ""):
                failures.append(pulumi.dynamic.CheckFailure(key, f"{key} is required"))
        return pulumi.dynamic.CheckResult(news, failures)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        outs = {**_inputs_only(props), **self._build_or_reuse(props)}
        return pulumi.dynamic.CreateResult(f"{props['repository_url']}:{props['image_tag']}", outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        replaces = [k for k in REPLACE_KEYS if olds.get(k) != news.get(k)]
        updates = [k for k in UPDATE_KEYS if olds.get(k) != news.get(k)]
        return pulumi.dynamic.DiffResult(
            changes=bool(replaces or updates), replaces=replaces, delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        computed = {k: olds.get(k) for k in OUTPUT_KEYS}
        return pulumi.dynamic.UpdateResult({**_inputs_only(news), **computed})

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        _cb, ecr = self._clients(props["region"])
        try:
            digest = self._find_digest(ecr, props["repository_name"], props["image_tag"])
        except ecr.exceptions.RepositoryNotFoundException:
            digest = None
        if digest is None:
            # The image is gone (aged out or deleted): report the resource as deleted so the next
            # `pulumi up` builds it again.
            return pulumi.dynamic.ReadResult("", {})
        outs = {**_inputs_only(props), **{k: props.get(k) for k in OUTPUT_KEYS}}
        outs["image_digest"] = digest
        outs["image_uri"] = image_uri_for(props["repository_url"], digest)
        return pulumi.dynamic.ReadResult(id_, outs)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        # Nothing destructive: the image stays until the lifecycle policy expires it (or the
        # repository is force-deleted with the stack).
        return None


class ImageBuild(pulumi.dynamic.Resource, module="eks-training", name="ImageBuild"):
    """The image built from one content-addressed context (type
    ``pulumi-python:dynamic/eks-training:ImageBuild``)."""

    image_digest: pulumi.Output[str]
    """``sha256:...`` manifest digest of the pushed image."""
    image_uri: pulumi.Output[str]
    """``<repository_url>@<digest>``."""
    image_tag: pulumi.Output[str]
    """The content-hash tag."""
    build_id: pulumi.Output[str]
    """CodeBuild build id ("" when the image already existed and no build ran)."""
    log_link: pulumi.Output[str]
    """CloudWatch deep link of the build log ("" when no build ran)."""
    build_skipped: pulumi.Output[bool]
    """True when the tag already existed in the repository."""

    def __init__(self, name: str, args: ImageBuildInputs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        props: dict[str, Any] = dict(args)
        for key in OUTPUT_KEYS:
            props[key] = None
        super().__init__(ImageBuildProvider(), name, props, opts)
