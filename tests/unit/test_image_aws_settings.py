"""The stack's AWS settings for the image build: read from ``aws:`` config (unit), checked, explained in errors,
and passed by the real program into every image-build resource (mock)."""

from typing import Any

import pytest
from botocore.exceptions import ClientError, NoCredentialsError, ProfileNotFound, SSOTokenLoadError

from components.image.aws_settings import (
    DEFAULT_SESSION_NAME,
    AwsSettingsError,
    assume_role_arguments,
    aws_settings_from_config,
    aws_settings_problems,
    describe_credentials,
    parse_go_duration,
)
from components.image.build_provider import (
    ImageBuildCredentialsError,
    ImageBuildProvider,
    ImageRepositoryNotFoundError,
    explain_aws_error,
    repository_account,
)

ROLE = "arn:aws:iam::111111111111:role/deployer"


def _get(values: dict[str, Any]):
    """``pulumi.Config("aws").get`` over ``values``: strings as they are, anything else as JSON."""
    import json

    return lambda key: (
        None if key not in values else (values[key] if isinstance(values[key], str) else json.dumps(values[key]))
    )


# ------------------------------------------------------------------------------------------------ reading


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("1h", 3600),
        ("90m", 5400),
        ("1h30m", 5400),
        ("3600s", 3600),
        ("1.5h", 5400),
        ("15m", 900),
        ("12h", 43200),
        ("2h0m0s", 7200),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1 hour", "h", "10", "1d", "m5", "1h-5m"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_no_settings_means_the_default_chain() -> None:
    assert aws_settings_from_config(_get({})) == ({}, [])


def test_every_supported_setting_is_read() -> None:
    settings, warnings = aws_settings_from_config(
        _get(
            {
                "profile": "research",
                "region": "eu-west-1",
                "sharedConfigFiles": ["~/work/aws-config"],
                "sharedCredentialsFiles": ["/secure/credentials"],
                "assumeRoles": [
                    {
                        "roleArn": ROLE,
                        "sessionName": "pulumi-up",
                        "externalId": "ext-7",
                        "duration": "1h30m",
                        "policyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"],
                        "sourceIdentity": "alice",
                        "tags": {"team": "ml"},
                        "transitiveTagKeys": ["team"],
                        "policy": '{"Version": "2012-10-17"}',
                    },
                    {"roleArn": "arn:aws:iam::222222222222:role/builder"},
                ],
                "skipCredentialsValidation": "true",  # not about credentials the build could use: ignored
            }
        )
    )
    assert warnings == []
    assert settings == {
        "profile": "research",
        "region": "eu-west-1",
        "shared_config_file": "~/work/aws-config",
        "shared_credentials_file": "/secure/credentials",
        "assume_roles": [
            {
                "role_arn": ROLE,
                "session_name": "pulumi-up",
                "external_id": "ext-7",
                "duration_seconds": 5400,
                "policy_arns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"],
                "source_identity": "alice",
                "tags": {"team": "ml"},
                "transitive_tag_keys": ["team"],
                "policy": '{"Version": "2012-10-17"}',
            },
            {"role_arn": "arn:aws:iam::222222222222:role/builder"},
        ],
    }
    assert aws_settings_problems(settings) == []


@pytest.mark.parametrize(
    "values, expected",
    [
        (
            {"assumeRole": {"roleArn": ROLE}},
            "aws:assumeRole: pulumi-aws 7 (this project's AWS provider) reads aws:assumeRoles",
        ),
        ({"assumeRoles": [{"sessionName": "x1"}]}, "aws:assumeRoles[0].roleArn: required"),
        (
            {"assumeRoles": [{"roleArn": "arn:aws:iam::1:user/me"}]},
            "aws:assumeRoles[0].roleArn: 'arn:aws:iam::1:user/me' is not an IAM role ARN",
        ),
        (
            {"assumeRoles": [{"roleArn": ROLE, "duration": "10m"}]},
            "aws:assumeRoles[0].duration: 600 s is outside STS's 900-43200 s",
        ),
        ({"assumeRoles": [{"roleArn": ROLE, "duration": "13h"}]}, "aws:assumeRoles[0].duration: 46800 s is outside"),
        (
            {"assumeRoles": [{"roleArn": ROLE, "duration": "soon"}]},
            "aws:assumeRoles[0].duration: 'soon' is not a duration",
        ),
        ({"assumeRoles": [{"roleArn": ROLE, "sessionName": "a"}]}, "aws:assumeRoles[0].sessionName: 'a' must be 2-64"),
        ({"assumeRoles": [{"roleArn": ROLE, "sessionName": "has space"}]}, "aws:assumeRoles[0].sessionName"),
        ({"assumeRoles": [{"roleArn": ROLE, "externalId": "x"}]}, "aws:assumeRoles[0].externalId: must be 2-1224"),
        ({"assumeRoles": [{"roleArn": ROLE, "roleARN": ROLE}]}, "aws:assumeRoles[0]: unknown keys roleARN"),
        (
            {"assumeRoles": [{"roleArn": ROLE, "tags": {"team": 7}}]},
            "aws:assumeRoles[0].tags: must map strings to strings",
        ),
        ({"assumeRoles": "arn:aws:iam::111111111111:role/deployer"}, "aws:assumeRoles: must be a list of roles"),
        ({"assumeRoles": ["x"]}, "aws:assumeRoles[0]: must be an object with roleArn"),
        (
            {"sharedConfigFiles": ["/a", "/b"]},
            "aws:sharedConfigFiles: the image build (boto3) reads one file, 2 are given",
        ),
        ({"sharedCredentialsFiles": [3]}, "aws:sharedCredentialsFiles: must be a list of file paths"),
    ],
)
def test_settings_the_build_cannot_follow_name_the_key(values: dict[str, Any], expected: str) -> None:
    with pytest.raises(AwsSettingsError) as err:
        aws_settings_from_config(_get(values))
    assert any(p.startswith(expected) for p in err.value.problems), err.value.problems


def test_static_keys_and_web_identity_are_warned_about_not_passed() -> None:
    settings, warnings = aws_settings_from_config(
        _get(
            {
                "accessKey": "AKIAEXAMPLE",
                "secretKey": "s",
                "assumeRoleWithWebIdentity": {"roleArn": ROLE},
                "profile": "p",
            }
        )
    )
    assert settings == {"profile": "p"}  # no secret ever becomes a build input
    assert [w.split(" ", 1)[0] for w in warnings] == ["aws:accessKey", "aws:secretKey", "aws:assumeRoleWithWebIdentity"]
    assert all("credentials of the environment" in w for w in warnings)


def test_settings_given_as_arguments_are_checked_with_their_own_names() -> None:
    problems = aws_settings_problems(
        {"profile": "", "assume_roles": [{"role_arn": ROLE, "duration_seconds": 60}], "assume_role": {}}
    )
    assert "aws.profile: must be a non-empty string" in problems
    assert any(p.startswith("aws.assume_roles[0].duration_seconds: 60 s is outside") for p in problems)
    assert any(p.startswith("aws.assume_role: unknown setting") for p in problems)


def test_sts_arguments_of_a_role() -> None:
    assert assume_role_arguments({"role_arn": ROLE}) == {"RoleArn": ROLE, "RoleSessionName": DEFAULT_SESSION_NAME}
    assert assume_role_arguments(
        {
            "role_arn": ROLE,
            "session_name": "s1",
            "external_id": "ext-7",
            "duration_seconds": 900,
            "policy": "{}",
            "policy_arns": ["arn:aws:iam::aws:policy/A"],
            "source_identity": "alice",
            "tags": {"b": "2", "a": "1"},
            "transitive_tag_keys": ["a"],
        }
    ) == {
        "RoleArn": ROLE,
        "RoleSessionName": "s1",
        "ExternalId": "ext-7",
        "DurationSeconds": 900,
        "Policy": "{}",
        "PolicyArns": [{"arn": "arn:aws:iam::aws:policy/A"}],
        "SourceIdentity": "alice",
        "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}],
        "TransitiveTagKeys": ["a"],
    }


def test_credentials_in_words() -> None:
    assert describe_credentials({}).startswith("the default AWS credentials (environment variables, AWS_PROFILE")
    assert describe_credentials({"profile": "research", "assume_roles": [{"role_arn": ROLE}]}) == (
        f"AWS profile 'research', then role {ROLE} (session {DEFAULT_SESSION_NAME})"
    )


# ------------------------------------------------------------------------------------- error messages

PROPS = {
    "repository_url": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/train",
    "repository_name": "team/train",
    "region": "eu-west-1",
    "aws": {"profile": "research"},
}


def _client_error(code: str, operation: str, status: int = 400, message: str = "details") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


@pytest.mark.parametrize(
    "exc, kind, says",
    [
        (
            NoCredentialsError(),
            ImageBuildCredentialsError,
            ["found no usable AWS credentials", "pulumi config set aws:profile"],
        ),
        (ProfileNotFound(profile="research"), ImageBuildCredentialsError, ["cannot find AWS profile 'research'"]),
        (
            SSOTokenLoadError(error_msg="Token has expired"),
            ImageBuildCredentialsError,
            ["`aws sso login --profile research`"],
        ),
        (
            _client_error("ExpiredToken", "GetCallerIdentity", 403),
            ImageBuildCredentialsError,
            ["as expired: ExpiredToken on GetCallerIdentity", "`aws sso login`"],
        ),
        (_client_error("ExpiredTokenException", "StartBuild"), ImageBuildCredentialsError, ["as expired"]),
        (
            _client_error("InvalidClientTokenId", "AssumeRole", 403),
            ImageBuildCredentialsError,
            [
                "does not recognise the image build's credentials (AWS profile 'research')",
                "InvalidClientTokenId on AssumeRole",
            ],
        ),
        (
            _client_error("UnrecognizedClientException", "DescribeImages"),
            ImageBuildCredentialsError,
            ["does not recognise"],
        ),
        (
            _client_error("AccessDenied", "AssumeRole", 403),
            ImageBuildCredentialsError,
            ["may not call AssumeRole", "sts:AssumeRole", "trust policy"],
        ),
        (_client_error("AccessDeniedException", "StartBuild"), ImageBuildCredentialsError, ["codebuild:StartBuild"]),
        (
            _client_error("403", "DescribeImages", 403),
            ImageBuildCredentialsError,
            ["refused DescribeImages", "HTTP 403"],
        ),
        (
            _client_error("RepositoryNotFoundException", "DescribeImages"),
            ImageRepositoryNotFoundError,
            [
                "ECR repository 'team/train' does not exist in account 123456789012, region eu-west-1",
                "AWS profile 'research'",
                "`pulumi refresh`",
            ],
        ),
    ],
)
def test_aws_errors_are_explained(exc: Exception, kind: type, says: list[str]) -> None:
    explained = explain_aws_error(exc, PROPS)
    assert isinstance(explained, kind)
    for text in says:
        assert text in str(explained)
    assert "`pulumi up`" in str(explained)


@pytest.mark.parametrize(
    "exc",
    [
        _client_error("ThrottlingException", "BatchGetBuilds"),
        _client_error("InvalidInputException", "StartBuild"),
        ValueError("bug"),
    ],
)
def test_other_errors_are_left_alone(exc: Exception) -> None:
    assert explain_aws_error(exc, PROPS) is None


def test_repository_account() -> None:
    assert repository_account(PROPS["repository_url"]) == "123456789012"
    assert repository_account("localhost:5000/x") is None


def test_provider_checks_and_diffs_the_settings() -> None:
    p = ImageBuildProvider()
    base = {
        "project_name": "p",
        "repository_url": PROPS["repository_url"],
        "repository_name": "team/train",
        "region": "eu-west-1",
        "image_tag": "a" * 24,
        "source_bucket": "b",
        "source_key": "contexts/a.zip",
    }
    bad = p.check({}, base | {"aws": {"assume_roles": [{"role_arn": "nope"}]}})
    assert [f.property for f in bad.failures] == ["aws"] and "not an IAM role ARN" in bad.failures[0].reason
    assert p.check({}, base | {"aws": {"profile": "x"}}).failures == []
    # State written before the input existed has no settings: the same as none, no update.
    assert p.diff("id", base, base | {"aws": {}}).changes is False
    changed = p.diff("id", base | {"aws": {}}, base | {"aws": {"profile": "research"}})
    assert changed.changes is True and changed.replaces == []  # other credentials never rebuild the image


# ---------------------------------------------------------------------------------------- the program
