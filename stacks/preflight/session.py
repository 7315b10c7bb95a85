"""The boto3 session preflight asks AWS with: the stack's AWS provider settings (``aws:profile``, the shared files,
``aws:assumeRoles``), so the checks read the account ``pulumi up`` deploys to, not the shell's default one."""

import shlex
from typing import Any, Mapping, Optional

import boto3
from botocore.exceptions import NoCredentialsError

from components.image.aws_settings import AwsSettings, assume_role_arguments, aws_session
from stacks.plan import Plan
from stacks.plan.checklist import CREDENTIAL_KEYS as CREDENTIAL_KEYS
from stacks.plan.checklist import CREDENTIALS_KEY as CREDENTIALS_KEY


class CredentialsError(Exception):
    """The stack's credentials cannot be used; the message names the keys that choose them."""


def mfa_profile(session: boto3.session.Session) -> Optional[str]:
    """The profile of ``session``'s chain (itself, then each ``source_profile``) that sets ``mfa_serial``, if any:
    botocore would prompt for a code on the terminal, under Pulumi's display or with no terminal at all."""
    profiles = session._session.full_config.get("profiles", {})
    name: Optional[str] = session.profile_name
    seen: set[str] = set()
    while name and name not in seen and name in profiles:
        if profiles[name].get("mfa_serial"):
            return name
        seen.add(name)
        name = profiles[name].get("source_profile")
    return None


def credentials_fix(settings: AwsSettings) -> str:
    """How to give the stack credentials and check them with the AWS CLI, for its ``aws:`` settings (the AWS provider
    of `pulumi up` reads the same): the stack's profile (else the shell's default), its own shared files (the CLI's
    environment variables) and the first role it assumes."""
    profile = settings.get("profile")
    files = (
        ("AWS_CONFIG_FILE", settings.get("shared_config_file")),
        ("AWS_SHARED_CREDENTIALS_FILE", settings.get("shared_credentials_file")),
    )
    cli = "".join(f"{variable}={shlex.quote(path)} " for variable, path in files if path) + "aws"
    flag = f" --profile {profile}" if profile else ""
    where = "" if profile else ", or a profile named in the stack file's aws:profile"
    fix = (
        f"give the stack credentials AWS accepts (`{cli} configure{flag}`, `{cli} sso login{flag}`{where}), and check "
        f"them with `{cli} sts get-caller-identity{flag}`"
    )
    roles = settings.get("assume_roles") or []
    if roles:
        check_role = f"{cli} sts assume-role{flag} {_assume(roles[0])}"
        fix += f", then that they may assume aws:assumeRoles' first role: `{check_role}`"
    return fix


def _assume(role: Mapping[str, Any]) -> str:
    """The AWS CLI's arguments of ``aws sts assume-role`` that ask what the provider's AssumeRole asks: the settings
    a role's trust policy may require (external id, source identity, session tags) and its duration."""
    args = assume_role_arguments(role)
    words = ["--role-arn", args["RoleArn"], "--role-session-name", args["RoleSessionName"]]
    for name, option in (("ExternalId", "--external-id"), ("SourceIdentity", "--source-identity")):
        if name in args:
            words += [option, args[name]]
    if "DurationSeconds" in args:
        words += ["--duration-seconds", str(args["DurationSeconds"])]
    if "Tags" in args:
        words += ["--tags", *(f"Key={t['Key']},Value={t['Value']}" for t in args["Tags"])]
    return " ".join(shlex.quote(w) for w in words)


def stack_session(plan: Plan) -> boto3.session.Session:
    """A session with the stack's credentials in its region, resolved once here (a ``credential_process`` run, a
    profile's ``source_profile``, a role assumed, an SSO token read), so each failure is one error; raises
    :class:`CredentialsError`."""
    try:
        session: boto3.session.Session = aws_session(plan.config.aws, plan.config.region)
        if (profile := mfa_profile(session)) is not None:
            raise CredentialsError(
                f"cannot use the stack's AWS credentials ({CREDENTIAL_KEYS}): profile {profile} asks for an MFA code "
                "(mfa_serial), which neither preflight nor the AWS provider of `pulumi up` prompts for "
                "(https://github.com/pulumi/pulumi-aws/issues/584); use a profile without it (aws sso login, a "
                "credential_process, or keys from `aws sts get-session-token` in a profile of their own)"
            )
        credentials = session.get_credentials()
        if credentials is None:
            raise NoCredentialsError()
        credentials.get_frozen_credentials()
    except CredentialsError:
        raise
    except Exception as exc:  # noqa: BLE001 - botocore's (ProfileNotFound, CredentialRetrievalError, ClientError...)
        raise CredentialsError(
            f"cannot use the stack's AWS credentials ({CREDENTIAL_KEYS}): {str(exc) or type(exc).__name__}; "
            + credentials_fix(plan.config.aws)
        ) from exc
    return session
