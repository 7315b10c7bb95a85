"""Dynamic resource that builds the training image in AWS CodeBuild and reports its digest.

:class:`ImageBuild` is made by :class:`components.image.component.TrainingImage`, not alone. Its provider
(:class:`ImageBuildProvider`) runs in Pulumi's dynamic-provider host. ``create`` reuses a tagged image or a running
build, else starts one and polls it; ``diff`` replaces only on a new tag, context object or repository; ``read``
re-reads the digest; ``delete`` does nothing. Failures raise :class:`ImageBuildError`, saying what to do.

Every call builds its boto3 session from the ``aws`` input (:mod:`components.image.aws_settings`) and first checks
that its account is the repository's. dill pickles the provider by reference, so the host must import this module:
it keeps no state and imports only the standard library, ``pulumi`` and ``aws_settings`` (boto3 inside the methods).

Why: docs/explanation/pulumi-up.md, "The image build"; docs/explanation/packaging.md, "One import name"."""

import contextlib
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi.dynamic
from typing_extensions import NotRequired

from components.image.aws_settings import AwsSettings, aws_session, aws_settings_problems, describe_credentials

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
    "aws",
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


class ImageBuildCredentialsError(ImageBuildError):
    """The build's AWS credentials are missing, rejected, not allowed, or for another account than the repository."""


class ImageRepositoryNotFoundError(ImageBuildError):
    """The build's ECR repository does not exist where the build's credentials look for it."""


#: Error codes AWS answers for credentials it does not accept, by what to do about them.
EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"})
UNRECOGNISED_CODES = frozenset(
    {
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "AuthFailure",
        "IncompleteSignature",
        "MissingAuthenticationToken",
    }
)
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Forbidden"})
#: botocore exceptions raised before any request, for credentials that cannot be found or loaded.
NO_CREDENTIAL_ERRORS = frozenset(
    {
        "NoCredentialsError",
        "PartialCredentialsError",
        "CredentialRetrievalError",
        "UnknownCredentialError",
        "InvalidConfigError",
        "ConfigParseError",
    }
)
SSO_ERRORS = frozenset({"SSOTokenLoadError", "UnauthorizedSSOTokenError", "TokenRetrievalError", "SSOError"})

_AGAIN = "then run `pulumi up` again"


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
    """Seconds between ``batch_get_builds`` polls. Default 15."""
    wait_timeout_seconds: NotRequired[pulumi.Input[float]]
    """Give up (and stop the build) after this many seconds. Default 10800 (3 h)."""
    digest_wait_seconds: NotRequired[pulumi.Input[float]]
    """After a successful build, how long to wait for the tag to be visible in ECR, in seconds. Default 60."""
    aws: NotRequired[AwsSettings]
    """The stack's AWS settings (profile, region, credential files, assumed roles) the build runs with;
    default: the ambient credentials of the dynamic-provider host."""


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
        return f"https://console.aws.amazon.com/cloudwatch/home?region={region}#logEvent:group={group};stream={stream}"
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


def repository_account(repository_url: str) -> Optional[str]:
    """Pure: the account of an ECR repository URI (``<account>.dkr.ecr.<region>.amazonaws.com/<name>``)."""
    account = repository_url.split("/", 1)[0].split(".", 1)[0]
    return account if len(account) == 12 and account.isdigit() else None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def explain_aws_error(exc: BaseException, props: Mapping[str, Any]) -> Optional[ImageBuildError]:
    """Pure: the :class:`ImageBuildError` to raise, with what to do, for a botocore error met while building the
    image of ``props`` (missing, expired or rejected credentials, a missing profile or repository); ``None`` for
    errors this has nothing to add to."""
    settings: Mapping[str, Any] = props.get("aws") or {}
    who = describe_credentials(settings)
    profile = settings.get("profile")
    name = type(exc).__name__
    if name == "ProfileNotFound":
        return ImageBuildCredentialsError(
            f"The image build cannot find AWS profile {profile or '(from AWS_PROFILE)'!r} in the AWS config and "
            f"credentials files ({_short(str(exc))}). Create it (`aws configure --profile NAME` or `aws configure "
            f"sso`) or correct aws:profile / AWS_PROFILE, {_AGAIN}."
        )
    if name in SSO_ERRORS:
        login = "aws sso login" + (f" --profile {profile}" if profile else "")
        return ImageBuildCredentialsError(
            f"The AWS SSO session behind the image build's credentials ({who}) is missing or expired "
            f"({_short(str(exc))}). Run `{login}`, {_AGAIN}."
        )
    if name in NO_CREDENTIAL_ERRORS:
        return ImageBuildCredentialsError(
            f"The image build found no usable AWS credentials ({who}: {_short(str(exc))}). Give it the credentials "
            "`pulumi up` uses for the AWS provider: set aws:profile (pulumi config set aws:profile NAME), export "
            "AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, or run `aws sso login`, "
            f"{_AGAIN}."
        )
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    error = response.get("Error") or {}
    code = str(error.get("Code") or "")
    message = _short(str(error.get("Message") or ""))
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    operation = str(getattr(exc, "operation_name", "") or "an AWS call")
    if code == "RepositoryNotFoundException":
        account = repository_account(str(props.get("repository_url", ""))) or "(unknown)"
        return ImageRepositoryNotFoundError(
            f"ECR repository {props.get('repository_name')!r} does not exist in account {account}, region "
            f"{props.get('region')}, where the image build looks with {who}. TrainingImage creates it before the "
            "build: if it was deleted outside Pulumi, run `pulumi refresh` and then `pulumi up` to create it again; "
            "if the repository's AWS provider uses other credentials than the build (an explicit provider), pass "
            "TrainingImage the matching `aws` settings."
        )
    if code in EXPIRED_CODES:
        return ImageBuildCredentialsError(
            f"AWS rejected the image build's credentials ({who}) as expired: {code} on {operation} ({message}). "
            f"Refresh them (`aws sso login`, a new session token, or re-assume the role), {_AGAIN}."
        )
    if code in UNRECOGNISED_CODES:
        return ImageBuildCredentialsError(
            f"AWS does not recognise the image build's credentials ({who}): {code} on {operation} ({message}). "
            "Check that the access key exists, is active and belongs to this partition, and that the secret key "
            f"and session token go with it (for assumed roles: the credentials they are assumed with), {_AGAIN}."
        )
    if code in DENIED_CODES:
        return ImageBuildCredentialsError(
            f"The image build's identity ({who}) may not call {operation}: {code} ({message}). It needs "
            "sts:AssumeRole on each role of aws:assumeRoles (whose trust policy must allow the caller, with the "
            "external id if one is set), codebuild:StartBuild, BatchGetBuilds, ListBuildsForProject and StopBuild "
            f"on the project, and ecr:DescribeImages on the repository; grant them, {_AGAIN}."
        )
    if status == 403:
        return ImageBuildCredentialsError(
            f"AWS refused {operation} with the image build's credentials ({who}): HTTP 403 {code} ({message}). "
            "The credentials are unknown, expired or not allowed for it: refresh them or grant the permission, "
            f"{_AGAIN}."
        )
    return None


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


def _value(props: Mapping[str, Any], key: str) -> Any:
    """An input as diff compares it: no ``aws`` settings and empty ones are the same (state written before
    the input existed has none)."""
    value = props.get(key)
    return (value or {}) if key == "aws" else value


@contextlib.contextmanager
def _explained(props: Mapping[str, Any]) -> Iterator[None]:
    """Re-raise botocore's credential and missing-repository errors as :class:`ImageBuildError` saying what to do."""
    try:
        yield
    except ImageBuildError:
        raise
    except Exception as exc:  # noqa: BLE001 - explained or re-raised unchanged
        explained = explain_aws_error(exc, props)
        if explained is None:
            raise
        raise explained from exc


class ImageBuildProvider(pulumi.dynamic.ResourceProvider):
    """CRUD of one CodeBuild-built image. Stateless; boto3 is created per call."""

    # The serialized provider holds no secret: don't mark it secret in the state.
    serialize_as_secret_always = False

    # -- AWS helpers -------------------------------------------------------------------------------
    def _session(self, props: Mapping[str, Any]) -> Any:
        return aws_session(props.get("aws") or {}, props["region"])

    def _clients(self, props: Mapping[str, Any]) -> tuple[Any, Any]:
        """CodeBuild and ECR clients with the build's credentials, after checking that they are for the
        repository's account (else the build would run, and the digest be looked up, in another account)."""
        from botocore.config import Config

        session = self._session(props)
        cfg = Config(retries={"mode": "standard", "max_attempts": 10}, user_agent_extra="eks-training-image")
        settings: Mapping[str, Any] = props.get("aws") or {}
        sts = session.client("sts", region_name=settings.get("region") or props["region"], config=cfg)
        identity = sts.get_caller_identity()
        expected = repository_account(props["repository_url"])
        if expected and identity.get("Account") != expected:
            raise ImageBuildCredentialsError(
                f"The image build's credentials ({describe_credentials(settings)}) are {identity.get('Arn')} in "
                f"account {identity.get('Account')}, but repository {props['repository_url']} is in account "
                f"{expected}: the build would start CodeBuild and look up the digest in the wrong account. Give the "
                "build the credentials of the AWS provider that created the repository: the stack's aws:profile / "
                "aws:assumeRoles, or TrainingImage's `aws` argument when the component has an explicit provider."
            )
        region = props["region"]
        return session.client("codebuild", region_name=region, config=cfg), session.client(
            "ecr", region_name=region, config=cfg
        )

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
        cb, ecr = self._clients(props)
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
        for key in (
            "project_name",
            "repository_url",
            "repository_name",
            "region",
            "image_tag",
            "source_bucket",
            "source_key",
        ):
            if news.get(key) in (None, ""):
                failures.append(pulumi.dynamic.CheckFailure(key, f"{key} is required"))
        aws = news.get("aws")
        if aws is not None:
            problems = aws_settings_problems(aws) if isinstance(aws, Mapping) else ["aws: must be an object"]
            failures.extend(pulumi.dynamic.CheckFailure("aws", problem) for problem in problems)
        return pulumi.dynamic.CheckResult(news, failures)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        with _explained(props):
            built = self._build_or_reuse(props)
        outs = {**_inputs_only(props), **built}
        return pulumi.dynamic.CreateResult(f"{props['repository_url']}:{props['image_tag']}", outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        replaces = [k for k in REPLACE_KEYS if _value(olds, k) != _value(news, k)]
        updates = [k for k in UPDATE_KEYS if _value(olds, k) != _value(news, k)]
        return pulumi.dynamic.DiffResult(
            changes=bool(replaces or updates), replaces=replaces, delete_before_replace=False
        )

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        computed = {k: olds.get(k) for k in OUTPUT_KEYS}
        return pulumi.dynamic.UpdateResult({**_inputs_only(news), **computed})

    def read(self, id_: str, props: dict[str, Any]) -> pulumi.dynamic.ReadResult:
        with _explained(props):
            _cb, ecr = self._clients(props)
            try:
                digest = self._find_digest(ecr, props["repository_name"], props["image_tag"])
            except ecr.exceptions.RepositoryNotFoundException:
                digest = None  # the repository is gone (the credentials are the repository account's: checked)
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
