"""The image build's credentials against real ``moto_server`` processes: the provider builds its boto3
session from the stack's AWS settings (an assumed role, a chain of roles, a profile, a credentials file), so the
build runs and the digest is read in the repository's account; credentials of another account, none at all,
unknown or unauthorised ones, and a missing repository stop it with a message saying what to do.

moto keeps one set of resources per account and answers a request in the account of its credentials: the root
credentials of the environment are account 123456789012, credentials from ``AssumeRole`` are the role's account,
an IAM user's access key is the user's account. Resources made in account 111111111111 can only be found with
credentials of that account, which is what the tests rely on. What went over the wire (operation, signing key,
signing region) comes from moto's request recorder."""

import os
from pathlib import Path
from typing import Any, Iterator

import boto3
import pytest

from components.image.aws_settings import DEFAULT_SESSION_NAME
from components.image.build_provider import (
    ImageBuildCredentialsError,
    ImageBuildProvider,
    ImageRepositoryNotFoundError,
)
from tests import image_support as sup
from tests.aws_support import recorded_calls

HOME_ACCOUNT = "123456789012"  # moto's account for the environment's credentials
ACCOUNT_B = "111111111111"
ACCOUNT_C = "222222222222"
ROLE_B = f"arn:aws:iam::{ACCOUNT_B}:role/deployer"
ROLE_C = f"arn:aws:iam::{ACCOUNT_C}:role/image-builder"


def _environment(mp: pytest.MonkeyPatch, endpoint: str, workdir: Path) -> None:
    for key, value in sup.aws_test_environment(endpoint, workdir).items():
        if value is None:
            mp.delenv(key, raising=False)
        else:
            mp.setenv(key, value)
    mp.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never wait for an instance role


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp("moto-credentials")
    server = sup.start_moto_server(workdir)
    mp = pytest.MonkeyPatch()
    _environment(mp, server.endpoint, workdir)
    try:
        yield server
    finally:
        mp.undo()
        sup.stop_moto_server(server)


def _session(credentials: dict[str, Any]) -> Any:
    return boto3.session.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials.get("SessionToken"),
        region_name=sup.REGION,
    )


def _assume(role_arn: str, via: Any = None) -> Any:
    """A session with credentials of ``role_arn`` (assumed by the test itself, to set accounts up)."""
    sts = (via or boto3.session.Session()).client("sts", region_name=sup.REGION)
    return _session(sts.assume_role(RoleArn=role_arn, RoleSessionName="test-setup")["Credentials"])


def _provision(tmp_path: Path, session: Any = None) -> tuple[sup.AwsAccount, dict[str, Any]]:
    ctx = sup.make_context(tmp_path / "ctx", {"train.py": "print('train')\n"})
    aws = sup.AwsAccount(session)
    return aws, aws.provision(ctx, tmp_path / "zips")


def _starts(server: Any, project: str) -> list[Any]:
    return [c for c in recorded_calls(server) if c.operation == "StartBuild" and c.params.get("projectName") == project]


# ------------------------------------------------------------------------------------- assumed roles


def test_create_builds_and_reads_the_digest_with_the_assumed_role(moto: Any, tmp_path: Path) -> None:
    aws, props = _provision(tmp_path, _assume(ROLE_B))
    assert props["repository_url"].startswith(f"{ACCOUNT_B}.dkr.ecr.")
    settings = {
        "region": "eu-west-1",
        "assume_roles": [
            {"role_arn": ROLE_B, "session_name": "eks-training-test", "external_id": "ext-7", "duration_seconds": 900}
        ],
    }
    res, build_ids, pushed = sup.create_while_pushing(aws, props | {"aws": settings})

    # The build ran in account B's project and the digest is account B's image.
    assert res.outs["image_digest"] == pushed and res.outs["build_id"] == build_ids[0]
    assert aws.builds(props["project_name"]) == build_ids
    assert res.outs["aws"] == settings  # kept in the state, as an input

    calls = recorded_calls(moto)
    assumes = [
        c for c in calls if c.operation == "AssumeRole" and c.params.get("RoleSessionName") == "eks-training-test"
    ]
    assert len(assumes) == 1
    assume = assumes[0]
    assert assume.params["RoleArn"] == ROLE_B and assume.params["ExternalId"] == "ext-7"
    assert assume.params["DurationSeconds"] == "900"
    assert (assume.access_key, assume.service, assume.region) == ("testing", "sts", "eu-west-1")  # the stack's region
    (start,) = _starts(moto, props["project_name"])
    # Signed with the role's temporary key (not the environment's), for the repository's region.
    assert start.access_key not in ("", "testing") and (start.service, start.region) == ("codebuild", sup.REGION)
    checks = [c for c in calls if c.operation == "GetCallerIdentity" and c.access_key == start.access_key]
    assert checks, "the account check ran with the same credentials"


def test_without_the_stack_settings_the_build_stops_instead_of_using_another_account(moto: Any, tmp_path: Path) -> None:
    """What happened before: the environment's credentials (account 123456789012) for a repository that
    the stack's provider created in account 111111111111."""
    aws, props = _provision(tmp_path, _assume(ROLE_B))
    with pytest.raises(ImageBuildCredentialsError) as err:
        ImageBuildProvider().create(dict(props))
    msg = str(err.value)
    assert f"in account {HOME_ACCOUNT}" in msg and f"is in account {ACCOUNT_B}" in msg
    assert "aws:profile / aws:assumeRoles" in msg
    assert _starts(moto, props["project_name"]) == [] and aws.builds(props["project_name"]) == []

    # pulumi refresh with the wrong credentials also stops (rather than reporting the image deleted).
    aws.push(props, seed="refresh")
    with pytest.raises(ImageBuildCredentialsError):
        ImageBuildProvider().read("id", dict(props))
    refreshed = ImageBuildProvider().read("id", props | {"aws": {"assume_roles": [{"role_arn": ROLE_B}]}})
    assert refreshed.id == "id" and refreshed.outs is not None
    assert refreshed.outs["image_digest"].startswith("sha256:")


def test_roles_are_assumed_in_order_each_with_the_credentials_of_the_one_before(moto: Any, tmp_path: Path) -> None:
    aws, props = _provision(tmp_path, _assume(ROLE_C, via=_assume(ROLE_B)))
    assert props["repository_url"].startswith(f"{ACCOUNT_C}.")
    chain = [{"role_arn": ROLE_B, "session_name": "hop-1"}, {"role_arn": ROLE_C, "session_name": "hop-2"}]
    res, build_ids, _ = sup.create_while_pushing(aws, props | {"aws": {"assume_roles": chain}})
    assert res.outs["build_skipped"] is False and aws.builds(props["project_name"]) == build_ids
    assumes = [
        c
        for c in recorded_calls(moto)
        if c.operation == "AssumeRole" and c.params["RoleSessionName"] in ("hop-1", "hop-2")
    ]
    assert [c.params["RoleArn"] for c in assumes] == [ROLE_B, ROLE_C]
    assert assumes[0].access_key == "testing" and assumes[1].access_key not in ("", "testing")
    (start,) = _starts(moto, props["project_name"])
    assert start.access_key not in (assumes[0].access_key, assumes[1].access_key)


def test_a_role_without_session_name_gets_the_default_one(moto: Any, tmp_path: Path) -> None:
    aws, props = _provision(tmp_path, _assume(ROLE_B))
    aws.push(props, seed="default-session")
    before = len(recorded_calls(moto))
    res = ImageBuildProvider().create(props | {"aws": {"assume_roles": [{"role_arn": ROLE_B}]}})
    assert res.outs["build_skipped"] is True
    new = recorded_calls(moto)[before:]
    assert [c.params["RoleSessionName"] for c in new if c.operation == "AssumeRole"] == [DEFAULT_SESSION_NAME]


# ------------------------------------------------------------------------------------------- profiles


@pytest.fixture()
def research_profile(moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An IAM user of account B with an access key, as profile ``research`` in an AWS config and credentials
    file; the environment keeps the root credentials of account 123456789012."""
    iam = _assume(ROLE_B).client("iam")
    user = sup.unique("research")
    iam.create_user(UserName=user)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    config = tmp_path / "aws-config"
    config.write_text(f"[profile research]\nregion = {sup.REGION}\n")
    credentials = tmp_path / "aws-credentials"
    credentials.write_text(
        f"[research]\naws_access_key_id = {key['AccessKeyId']}\naws_secret_access_key = {key['SecretAccessKey']}\n"
    )
    return {"key_id": key["AccessKeyId"], "config": config, "credentials": credentials}


def test_the_stack_profile_wins_over_the_environment_credentials(
    moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, research_profile: dict[str, Any]
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(research_profile["config"]))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(research_profile["credentials"]))
    aws, props = _provision(tmp_path, _assume(ROLE_B))
    res, build_ids, pushed = sup.create_while_pushing(aws, props | {"aws": {"profile": "research"}})
    assert res.outs["image_digest"] == pushed and aws.builds(props["project_name"]) == build_ids
    (start,) = _starts(moto, props["project_name"])
    assert start.access_key == research_profile["key_id"]


def test_the_credentials_file_of_the_stack_settings_is_read(
    moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, research_profile: dict[str, Any]
) -> None:
    """aws:sharedCredentialsFiles / aws:sharedConfigFiles, while the environment points at files without the profile."""
    assert (
        not Path(os.environ["AWS_SHARED_CREDENTIALS_FILE"]).exists()
        and not Path(os.environ["AWS_CONFIG_FILE"]).exists()
    )
    aws, props = _provision(tmp_path, _assume(ROLE_B))
    aws.push(props, seed="credentials-file")
    settings = {
        "profile": "research",
        "shared_config_file": str(research_profile["config"]),
        "shared_credentials_file": str(research_profile["credentials"]),
    }
    before = len(recorded_calls(moto))
    res = ImageBuildProvider().create(props | {"aws": settings})
    assert res.outs["build_skipped"] is True
    keys = {c.access_key for c in recorded_calls(moto)[before:]}
    assert keys == {research_profile["key_id"]}


def test_an_unknown_profile_is_named_with_what_to_do(moto: Any, tmp_path: Path) -> None:
    _aws, props = _provision(tmp_path)
    with pytest.raises(ImageBuildCredentialsError) as err:
        ImageBuildProvider().create(props | {"aws": {"profile": "no-such-profile"}})
    msg = str(err.value)
    assert "cannot find AWS profile 'no-such-profile'" in msg and "aws configure --profile" in msg


# --------------------------------------------------------------------------- missing things, refused things


def test_a_missing_repository_says_where_the_build_looked_and_what_to_do(moto: Any, tmp_path: Path) -> None:
    aws, props = _provision(tmp_path)
    gone = props | {
        "repository_name": "deleted-outside-pulumi",
        "repository_url": f"{HOME_ACCOUNT}.dkr.ecr.{sup.REGION}.amazonaws.com/deleted-outside-pulumi",
    }
    with pytest.raises(ImageRepositoryNotFoundError) as err:
        ImageBuildProvider().create(gone)
    msg = str(err.value)
    assert "ECR repository 'deleted-outside-pulumi' does not exist in account 123456789012, region us-east-1" in msg
    assert "`pulumi refresh`" in msg and "`pulumi up`" in msg
    assert aws.builds(props["project_name"]) == []  # nothing was started
    assert isinstance(err.value.__cause__, Exception) and "RepositoryNotFoundException" in str(err.value.__cause__)


def test_no_credentials_at_all(moto: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _aws, props = _provision(tmp_path)
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ImageBuildCredentialsError) as err:
        ImageBuildProvider().create(dict(props))
    msg = str(err.value)
    assert "found no usable AWS credentials" in msg
    assert "pulumi config set aws:profile" in msg and "aws sso login" in msg
    with pytest.raises(ImageBuildCredentialsError, match="found no usable AWS credentials"):
        ImageBuildProvider().create(props | {"aws": {"assume_roles": [{"role_arn": ROLE_B}]}})


@pytest.fixture()
def strict_moto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A moto server that checks credentials and IAM permissions (after the first two requests, which set up
    a user without permissions)."""
    server = sup.aws_support.start_moto_server(
        tmp_path, log_name="strict-moto.log", env_extra={"INITIAL_NO_AUTH_ACTION_COUNT": "2"}
    )
    _environment(monkeypatch, server.endpoint, tmp_path)
    try:
        yield server
    finally:
        server.stop()


def _props_in_home_account() -> dict[str, Any]:
    repo = sup.unique("train")
    return {
        "project_name": "train-image",
        "repository_url": f"{HOME_ACCOUNT}.dkr.ecr.{sup.REGION}.amazonaws.com/{repo}",
        "repository_name": repo,
        "region": sup.REGION,
        "image_tag": "a" * 24,
        "source_bucket": "b",
        "source_key": "contexts/x.zip",
        "poll_interval_seconds": 0.05,
        "wait_timeout_seconds": 5.0,
        "digest_wait_seconds": 0.1,
    }


def test_unknown_or_unauthorised_credentials(strict_moto: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    iam = boto3.client("iam", region_name=sup.REGION)
    iam.create_user(UserName="no-permissions")
    key = iam.create_access_key(UserName="no-permissions")["AccessKey"]  # the second free request
    props = _props_in_home_account()

    # The environment's key is unknown to this server: STS says so on the account check.
    with pytest.raises(ImageBuildCredentialsError) as err:
        ImageBuildProvider().create(dict(props))
    msg = str(err.value)
    assert "AWS does not recognise the image build's credentials" in msg
    assert "InvalidClientTokenId on GetCallerIdentity" in msg

    # A known user without permissions passes the account check and is refused by ECR.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    monkeypatch.delenv("AWS_SECURITY_TOKEN")
    with pytest.raises(ImageBuildCredentialsError) as err:
        ImageBuildProvider().create(dict(props))
    msg = str(err.value)
    # moto answers ECR's IAM refusals with an XML body botocore cannot read, so the code it sees is the HTTP
    # status (AWS sends AccessDeniedException, which gets the message naming the permissions).
    assert "refused DescribeImages" in msg and "HTTP 403" in msg and "AccessDenied" in msg
    assert "refresh them or grant the permission" in msg
