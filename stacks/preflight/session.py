"""The boto3 session preflight asks AWS with: the stack's AWS provider settings (``aws:profile``, the shared files,
``aws:assumeRoles``), so the checks read the account ``pulumi up`` deploys to, not the shell's default one."""

import boto3
from botocore.exceptions import NoCredentialsError

from components.image.aws_settings import aws_session
from stacks.plan import Plan

#: The finding about the stack's credentials is under this key.
CREDENTIALS_KEY = "aws:profile"
#: The keys that choose the stack's credentials, for messages.
CREDENTIAL_KEYS = "aws:profile, aws:sharedConfigFiles, aws:sharedCredentialsFiles, aws:assumeRoles"


class CredentialsError(Exception):
    """The stack's credentials cannot be used; the message names the keys that choose them."""


def stack_session(plan: Plan) -> boto3.session.Session:
    """A session with the stack's credentials in its region, resolved once here (a ``credential_process`` run, a
    profile's ``source_profile`` and MFA, a role assumed, an SSO token read), so each failure is one error; raises
    :class:`CredentialsError`."""
    try:
        session: boto3.session.Session = aws_session(plan.config.aws, plan.config.region)
        credentials = session.get_credentials()
        if credentials is None:
            raise NoCredentialsError()
        credentials.get_frozen_credentials()
    except Exception as exc:  # noqa: BLE001 - botocore's, and a prompt for an MFA code with no terminal (EOFError)
        raise CredentialsError(
            f"cannot use the stack's AWS credentials ({CREDENTIAL_KEYS}): {str(exc) or type(exc).__name__}"
        ) from exc
    return session
