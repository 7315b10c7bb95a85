"""The boto3 session preflight asks AWS with: the stack's AWS provider settings (``aws:profile``, the shared files,
``aws:assumeRoles``), so the checks read the account ``pulumi up`` deploys to, not the shell's default one."""

import boto3

from components.image.aws_settings import aws_session
from stacks.plan import Plan

#: The keys that choose the stack's credentials, for messages.
CREDENTIAL_KEYS = "aws:profile, aws:sharedConfigFiles, aws:sharedCredentialsFiles, aws:assumeRoles"


def stack_session(plan: Plan) -> boto3.session.Session:
    """A session with the stack's credentials in its region; raises botocore's errors (a missing profile, no
    credentials for a role to assume)."""
    session: boto3.session.Session = aws_session(plan.config.aws, plan.config.region)
    return session
