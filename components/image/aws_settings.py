"""The AWS settings the image build runs with: the stack's AWS provider's profile, region, credential files and
assumed roles, as plain values.

The build's dynamic provider runs in a separate process, out of the AWS provider's reach (source key
``pulumi-dynamic-providers``). So the program reads the stack's ``aws:`` settings (:func:`aws_settings_from_config`,
source key ``pulumi-aws-config``) and passes them as a plain input, and the provider builds its boto3 session from
them (:func:`aws_session`). ``aws:assumeRoles`` is followed (source key ``pulumi-aws-7-role-chaining``);
``aws:assumeRole`` is an error. Static keys and ``aws:assumeRoleWithWebIdentity`` are not passed on. boto3 is
imported only inside :func:`aws_session`.

Why, with the sources: docs/explanation/pulumi-up.md, "The image build"."""

import json
import os
import re
from typing import Any, Callable, Mapping, Optional, Sequence, TypedDict

from typing_extensions import NotRequired

#: The AWS provider's static credentials, which the build does not receive (``aws:<key>``; only noted when set).
STATIC_KEYS = ("accessKey", "secretKey", "token")
#: The web-identity role the provider may assume, which the build does not follow.
WEB_IDENTITY_KEY = "assumeRoleWithWebIdentity"
#: The one role of pulumi-aws 6, which version 7 no longer reads (it reads ``assumeRoles``).
ASSUME_ROLE_V6 = "assumeRole"
#: STS DurationSeconds bounds (source key ``sts-assume-role``).
MIN_DURATION_SECONDS = 900
MAX_DURATION_SECONDS = 43200
#: Session name when the stack's role has none (visible in CloudTrail as the assumed-role session).
DEFAULT_SESSION_NAME = "eks-training-image-build"

_ROLE_ARN = re.compile(r"^arn:aws[a-zA-Z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,64}$")
_EXTERNAL_ID = re.compile(r"^[\w+=,.@:/-]{2,1224}$")
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class AssumeRole(TypedDict):
    """One role the build assumes (an entry of ``aws:assumeRoles``; STS AssumeRole's parameters)."""

    role_arn: str
    """ARN of the role (``roleArn``)."""
    session_name: NotRequired[str]
    """Session name, 2-64 characters of ``[\\w+=,.@-]`` (``sessionName``; default ``eks-training-image-build``)."""
    external_id: NotRequired[str]
    """External id the role's trust policy asks for (``externalId``)."""
    duration_seconds: NotRequired[int]
    """Session length, 900-43200 seconds (``duration``, e.g. ``1h``; default: STS's, one hour)."""
    policy: NotRequired[str]
    """Session policy JSON that narrows the role's permissions (``policy``)."""
    policy_arns: NotRequired[list[str]]
    """Managed policies that narrow the role's permissions (``policyArns``)."""
    source_identity: NotRequired[str]
    """Source identity of the session (``sourceIdentity``)."""
    tags: NotRequired[Mapping[str, str]]
    """Session tags (``tags``)."""
    transitive_tag_keys: NotRequired[list[str]]
    """Session tags passed on to roles assumed after this one (``transitiveTagKeys``)."""


class AwsSettings(TypedDict):
    """The AWS settings of the image build, as the stack's AWS provider has them (all optional: unset means the
    default credential chain of the machine running ``pulumi up``)."""

    profile: NotRequired[str]
    """Named profile of the AWS config and credentials files (``aws:profile``)."""
    region: NotRequired[str]
    """The provider's region (``aws:region``); the build's STS calls go there. ECR and CodeBuild calls go to the
    repository's region."""
    shared_config_file: NotRequired[str]
    """AWS config file to read instead of ``~/.aws/config`` (``aws:sharedConfigFiles``, one file)."""
    shared_credentials_file: NotRequired[str]
    """AWS credentials file to read instead of ``~/.aws/credentials`` (``aws:sharedCredentialsFiles``, one file)."""
    assume_roles: NotRequired[list[AssumeRole]]
    """Roles assumed in order, each with the credentials of the one before (``aws:assumeRoles``)."""


class AwsSettingsError(ValueError):
    """The stack's ``aws:`` settings cannot be given to the image build; one line per problem, naming the key."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


#: config name -> settings name of an ``aws:assumeRoles`` entry (``duration`` becomes seconds).
_ROLE_FIELDS: Mapping[str, str] = {
    "roleArn": "role_arn",
    "sessionName": "session_name",
    "externalId": "external_id",
    "duration": "duration_seconds",
    "policy": "policy",
    "policyArns": "policy_arns",
    "sourceIdentity": "source_identity",
    "tags": "tags",
    "transitiveTagKeys": "transitive_tag_keys",
}


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration (``1h``, ``90m``, ``1h30m``, ``3600s``), the format of ``aws:assumeRoles[].duration``.
    Raises ``ValueError`` for anything else."""
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _GO_DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"{text!r} is not a duration such as 1h, 90m or 1h30m")
    return total


def _decode(raw: Optional[str]) -> Any:
    """A config value: objects and lists arrive as JSON, strings as themselves."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw  # a plain string


def _one_file(key: str, value: Any, problems: list[str]) -> Optional[str]:
    files = [value] if isinstance(value, str) else value
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        problems.append(f"aws:{key}: must be a list of file paths")
        return None
    if len(files) > 1:
        problems.append(
            f"aws:{key}: the image build (boto3) reads one file, {len(files)} are given: merge them into one"
        )
        return None
    return files[0] if files else None


def aws_settings_from_config(get: Callable[[str], Optional[str]]) -> tuple[AwsSettings, list[str]]:
    """Pure: the image build's :class:`AwsSettings` from the stack's ``aws:`` settings, read with ``get(key)``
    (e.g. ``pulumi.Config("aws").get``: strings, objects as JSON), and warnings about settings the build cannot
    follow. Raises :class:`AwsSettingsError` naming every bad key."""
    problems: list[str] = []
    warnings: list[str] = []
    settings: AwsSettings = {}
    for key, field in (("profile", "profile"), ("region", "region")):
        value = get(key)
        if value:
            settings[field] = value  # type: ignore[literal-required]
    for key, field in (
        ("sharedConfigFiles", "shared_config_file"),
        ("sharedCredentialsFiles", "shared_credentials_file"),
    ):
        value = _decode(get(key))
        if value is not None:
            path = _one_file(key, value, problems)
            if path:
                settings[field] = path  # type: ignore[literal-required]
    if get(ASSUME_ROLE_V6) is not None:
        problems.append(
            "aws:assumeRole: pulumi-aws 7 (this project's AWS provider) reads aws:assumeRoles, a list of roles "
            "assumed in order; write `aws:assumeRoles: [{roleArn: ..., sessionName: ..., externalId: ...}]` instead"
        )
    raw_roles = _decode(get("assumeRoles"))
    if raw_roles is not None:
        if isinstance(raw_roles, dict):
            raw_roles = [raw_roles]
        if not isinstance(raw_roles, list):
            problems.append(
                "aws:assumeRoles: must be a list of roles ({roleArn, sessionName, externalId, duration, ...})"
            )
        else:
            roles: list[AssumeRole] = []
            for i, raw in enumerate(raw_roles):
                role = _role_from_config(f"aws:assumeRoles[{i}]", raw, problems)
                if role is not None:
                    roles.append(role)
            if roles:
                settings["assume_roles"] = roles
    for key in STATIC_KEYS:
        if get(key):
            warnings.append(
                f"aws:{key} is set: the image build does not receive static keys from the stack (they would be stored "
                "as build inputs); it uses the credentials of the environment (AWS_ACCESS_KEY_ID..., AWS_PROFILE). "
                "Make them the same account, or use aws:profile"
            )
    if get(WEB_IDENTITY_KEY):
        warnings.append(
            "aws:assumeRoleWithWebIdentity is set: the image build does not follow it and uses the credentials of the "
            "environment (AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE work there); make them the same account"
        )
    problems.extend(aws_settings_problems(settings, style="config"))
    if problems:
        raise AwsSettingsError(sorted(set(problems), key=problems.index))
    return settings, warnings


def _role_from_config(path: str, raw: Any, problems: list[str]) -> Optional[AssumeRole]:
    if not isinstance(raw, dict):
        problems.append(f"{path}: must be an object with roleArn (and sessionName, externalId, duration, ...)")
        return None
    unknown = sorted(set(raw) - set(_ROLE_FIELDS))
    if unknown:
        problems.append(f"{path}: unknown keys {', '.join(unknown)}; valid keys are {', '.join(_ROLE_FIELDS)}")
    if not raw.get("roleArn"):
        problems.append(f"{path}.roleArn: required (the ARN of the role to assume)")
        return None
    role: dict[str, Any] = {}
    for key, field in _ROLE_FIELDS.items():
        value = raw.get(key)
        if value is None or value == "" or value == [] or value == {}:
            continue
        if key == "duration":
            try:
                role[field] = int(parse_go_duration(str(value)))
            except ValueError as exc:
                problems.append(f"{path}.duration: {exc}")
            continue
        role[field] = value
    return role  # type: ignore[return-value]


def _name(style: str, field: str) -> str:
    if style == "config":
        inverse = {v: k for k, v in _ROLE_FIELDS.items()}
        return {"duration_seconds": "duration"}.get(field, inverse.get(field, field))
    return field


def aws_settings_problems(settings: Mapping[str, Any], style: str = "args") -> list[str]:
    """Pure: what is wrong with ``settings`` (types, role ARNs, session names, external ids, durations). Keys are
    named as in the stack config (``style="config"``: ``aws:assumeRoles[0].roleArn``) or as the arguments
    (``aws.assume_roles[0].role_arn``)."""
    problems: list[str] = []
    base = "aws:" if style == "config" else "aws."
    config_names = {
        "profile": "profile",
        "region": "region",
        "shared_config_file": "sharedConfigFiles",
        "shared_credentials_file": "sharedCredentialsFiles",
        "assume_roles": "assumeRoles",
    }
    for field in settings:
        if field not in config_names:
            problems.append(f"{base}{field}: unknown setting; valid ones are {', '.join(config_names)}")
    for field in ("profile", "region", "shared_config_file", "shared_credentials_file"):
        value = settings.get(field)
        if value is not None and (not isinstance(value, str) or not value):
            key = config_names[field] if style == "config" else field
            problems.append(f"{base}{key}: must be a non-empty string")
    roles = settings.get("assume_roles")
    if roles is None:
        return problems
    roles_key = "assumeRoles" if style == "config" else "assume_roles"
    if not isinstance(roles, (list, tuple)):
        return problems + [f"{base}{roles_key}: must be a list of roles"]
    for i, role in enumerate(roles):
        path = f"{base}{roles_key}[{i}]"
        if not isinstance(role, Mapping):
            problems.append(f"{path}: must be an object")
            continue

        def at(field: str) -> str:
            return f"{path}.{_name(style, field)}"

        arn = role.get("role_arn")
        if not isinstance(arn, str) or not _ROLE_ARN.match(arn):
            problems.append(f"{at('role_arn')}: {arn!r} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
        name = role.get("session_name", DEFAULT_SESSION_NAME)
        if not isinstance(name, str) or not _SESSION_NAME.match(name):
            problems.append(
                f"{at('session_name')}: {name!r} must be 2-64 letters, digits or +=,.@_- (STS RoleSessionName)"
            )
        ext = role.get("external_id")
        if ext is not None and (not isinstance(ext, str) or not _EXTERNAL_ID.match(ext)):
            problems.append(f"{at('external_id')}: must be 2-1224 letters, digits or +=,.@:/_- (STS ExternalId)")
        seconds = role.get("duration_seconds")
        if seconds is not None and (
            not isinstance(seconds, int)
            or isinstance(seconds, bool)
            or not MIN_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS
        ):
            problems.append(
                f"{at('duration_seconds')}: {seconds!r} s is outside STS's 900-43200 s (15 minutes to 12 hours)"
            )
        for field in ("policy", "source_identity"):
            value = role.get(field)
            if value is not None and not isinstance(value, str):
                problems.append(f"{at(field)}: must be a string")
        for field in ("policy_arns", "transitive_tag_keys"):
            value = role.get(field)
            if value is not None and (
                not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value)
            ):
                problems.append(f"{at(field)}: must be a list of strings")
        tags = role.get("tags")
        if tags is not None and (
            not isinstance(tags, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items())
        ):
            problems.append(f"{at('tags')}: must map strings to strings")
    return problems


def stack_aws_settings() -> AwsSettings:
    """The :class:`AwsSettings` of the running program's stack (``pulumi.Config("aws")``); warnings go to the
    engine's log. Raises :class:`AwsSettingsError`."""
    import pulumi

    settings, warnings = aws_settings_from_config(pulumi.Config("aws").get)
    for warning in warnings:
        pulumi.log.warn(warning)
    return settings


def describe_credentials(settings: Mapping[str, Any]) -> str:
    """Pure: the credentials ``settings`` lead to, in words (for error messages)."""
    if settings.get("profile"):
        base = f"AWS profile {settings['profile']!r}"
    else:
        base = "the default AWS credentials (environment variables, AWS_PROFILE, SSO, instance or pod role)"
    files = [settings[k] for k in ("shared_config_file", "shared_credentials_file") if settings.get(k)]
    if files:
        base += f" read from {' and '.join(files)}"
    for role in settings.get("assume_roles") or []:
        base += f", then role {role.get('role_arn')} (session {role.get('session_name') or DEFAULT_SESSION_NAME})"
    return base


def assume_role_arguments(role: Mapping[str, Any]) -> dict[str, Any]:
    """Pure: STS AssumeRole's keyword arguments for ``role`` (source key ``sts-assume-role``)."""
    args: dict[str, Any] = {
        "RoleArn": role["role_arn"],
        "RoleSessionName": role.get("session_name") or DEFAULT_SESSION_NAME,
    }
    if role.get("external_id"):
        args["ExternalId"] = role["external_id"]
    if role.get("duration_seconds"):
        args["DurationSeconds"] = int(role["duration_seconds"])
    if role.get("policy"):
        args["Policy"] = role["policy"]
    if role.get("policy_arns"):
        args["PolicyArns"] = [{"arn": arn} for arn in role["policy_arns"]]
    if role.get("source_identity"):
        args["SourceIdentity"] = role["source_identity"]
    if role.get("tags"):
        args["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(role["tags"].items())]
    if role.get("transitive_tag_keys"):
        args["TransitiveTagKeys"] = list(role["transitive_tag_keys"])
    return args


def aws_session(settings: Mapping[str, Any], region: str) -> Any:
    """A ``boto3.Session`` with the credentials ``settings`` describe, for calls in ``region``.

    The profile and credential files go to botocore as if set on the command line (an explicit profile takes
    precedence over credentials in environment variables, as it does for the AWS CLI). Each role of
    ``assume_roles`` is assumed with the credentials of the one before, through STS in ``settings["region"]``
    (else ``region``), and its credentials refresh themselves before they expire: a build can outlast a role
    session. Raises botocore's errors (``ProfileNotFound``, ``NoCredentialsError``, ``ClientError``...)."""
    import boto3
    import botocore.session
    from botocore.credentials import (
        AssumeRoleCredentialFetcher,
        CredentialProvider,
        CredentialResolver,
        DeferredRefreshableCredentials,
    )
    from botocore.exceptions import NoCredentialsError

    class _Given(CredentialProvider):
        METHOD = "eks-training-assume-role"

        def __init__(self, credentials: Any) -> None:
            super().__init__()
            self._credentials = credentials

        def load(self) -> Any:
            return self._credentials

    class _Refreshing(DeferredRefreshableCredentials):
        # botocore refreshes 15 minutes before expiry (10 at the latest): with the shortest session STS allows,
        # 15 minutes, that is before every call. 5 minutes (2 at the latest) is ample for one API call.
        _advisory_refresh_timeout = 5 * 60
        _mandatory_refresh_timeout = 2 * 60

    sts_region = settings.get("region") or region
    core = botocore.session.Session()
    for field, variable in (("shared_config_file", "config_file"), ("shared_credentials_file", "credentials_file")):
        if settings.get(field):
            core.set_config_variable(variable, os.path.expanduser(settings[field]))
    if settings.get("profile"):
        core.set_config_variable("profile", settings["profile"])
    core.set_config_variable("region", sts_region)
    roles: Sequence[Mapping[str, Any]] = settings.get("assume_roles") or []
    for role in roles:
        source = core.get_credentials()
        if source is None:
            raise NoCredentialsError()
        fetcher = AssumeRoleCredentialFetcher(
            client_creator=core.create_client,
            source_credentials=source,
            role_arn=role["role_arn"],
            extra_args={k: v for k, v in assume_role_arguments(role).items() if k != "RoleArn"},
        )
        assumed = botocore.session.Session()
        assumed.set_config_variable("region", sts_region)
        credentials = _Refreshing(refresh_using=fetcher.fetch_credentials, method=_Given.METHOD)
        assumed.register_component("credential_provider", CredentialResolver(providers=[_Given(credentials)]))
        core = assumed
    return boto3.session.Session(botocore_session=core, region_name=region)
