"""The image builds' AWS settings as the program passes them: every stack's builds get the stack's settings, and bad
settings stop the program naming the key (the program under Pulumi mocks)."""

import json
from pathlib import Path

import pulumi
import pytest

from components.cluster import with_token_credentials
from components.image.aws_settings import (
    AwsSettingsError,
)
from stacks.config import ConfigError
from stacks.mocked import resolve
from tests.harness import run_program, stack_config

IMAGE_BUILD = "pulumi-python:dynamic/eks-training:ImageBuild"
ROLE = "arn:aws:iam::111111111111:role/deployer"


# ------------------------------------------------------------------------------------------------ reading


# ------------------------------------------------------------------------------------- error messages


# ---------------------------------------------------------------------------------------- the program

SETTINGS_CONFIG = {
    "aws:profile": "research",
    "aws:assumeRoles": [{"roleArn": ROLE, "sessionName": "pulumi-up", "externalId": "ext-7", "duration": "1h"}],
}
EXPECTED = {
    "profile": "research",
    "region": "us-east-1",
    "assume_roles": [{"role_arn": ROLE, "session_name": "pulumi-up", "external_id": "ext-7", "duration_seconds": 3600}],
}


@pytest.mark.parametrize("stack", ["dev", "mpi-horovod"])
def test_the_program_passes_the_stack_settings_to_every_image_build(stack: str) -> None:
    cfg = stack_config(stack) | SETTINGS_CONFIG
    assert cfg["aws:region"] == "us-east-1"
    p = run_program(stack, config=cfg)
    builds = p.of_type(IMAGE_BUILD)
    assert builds, "the stack builds images"
    for build in builds:
        assert build.inputs["aws"] == EXPECTED, build.name


def test_without_settings_the_builds_get_only_the_region() -> None:
    p = run_program("dev")
    assert [b.inputs["aws"] for b in p.of_type(IMAGE_BUILD)] == [{"region": "us-east-1"}]


def test_the_pulumi_aws_6_key_stops_the_program_before_anything_is_created() -> None:
    cfg = stack_config("dev") | {"aws:assumeRole": {"roleArn": ROLE}}
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError) and p.registrations == []
    assert "aws:assumeRole: pulumi-aws 7 (this project's AWS provider) reads aws:assumeRoles" in str(p.error)


def test_a_bad_role_stops_the_program_naming_the_key() -> None:
    cfg = stack_config("dev") | {"aws:assumeRoles": [{"roleArn": ROLE, "duration": "5m"}]}
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError) and p.registrations == []
    assert "aws:assumeRoles[0].duration: 300 s is outside STS's 900-43200 s" in str(p.error)


def test_the_component_reads_the_stack_settings_by_default(tmp_path: Path) -> None:
    """TrainingImage used on its own (another program): its build gets the stack's aws: settings."""
    main = tmp_path / "__main__.py"
    main.write_text(
        "from components import TrainingImage\n"
        "TrainingImage('img', {'context_dir': 'training'})\n"
        "TrainingImage('img2', {'context_dir': 'training', 'aws': {'profile': 'explicit'}})\n"
    )
    p = run_program("dev", config={"aws:region": "eu-west-1", **SETTINGS_CONFIG}, main=main)
    by_name = {b.name: b.inputs["aws"] for b in p.of_type(IMAGE_BUILD)}
    assert by_name == {"img-image": EXPECTED | {"region": "eu-west-1"}, "img2-image": {"profile": "explicit"}}


def test_the_component_rejects_bad_settings(tmp_path: Path) -> None:
    main = tmp_path / "__main__.py"
    main.write_text(
        "from components import TrainingImage\n"
        "TrainingImage('img', {'context_dir': 'training', 'aws': {'assume_roles': [{'role_arn': 'nope'}]}})\n"
    )
    p = run_program("dev", config={"aws:region": "eu-west-1"}, main=main, expect_error=True)
    assert isinstance(p.error, AwsSettingsError)
    assert "aws.assume_roles[0].role_arn: 'nope' is not an IAM role ARN" in str(p.error)


# ------------------------------------------------------------------------------ the cluster's kubeconfig


def _token_exec(p) -> dict:
    """The ``exec`` of the kubeconfig the stack's Kubernetes provider signs its requests with."""
    kubeconfig = p.one("pulumi:providers:kubernetes").inputs["kubeconfig"]
    (user,) = json.loads(kubeconfig if isinstance(kubeconfig, str) else kubeconfig["value"])["users"]
    return user["user"]["exec"]


def test_the_clusters_kubeconfig_signs_as_the_stacks_aws_provider() -> None:
    """pulumi-eks's ``kubeconfig_json`` carries no profile: the Kubernetes provider's ``aws eks get-token`` gets the
    stack's profile and shared files in its environment and assumes the one role the provider assumes; the
    ``updateKubeconfigCommand`` output does the same."""
    files = {"aws:sharedConfigFiles": ["/cfg/config"], "aws:sharedCredentialsFiles": ["/cfg/credentials"]}
    role = {"aws:assumeRoles": [{"roleArn": ROLE, "sessionName": "pulumi-up"}]}
    p = run_program("dev", config=stack_config("dev") | SETTINGS_CONFIG | files | role)
    run = _token_exec(p)
    assert run["env"] == [
        {"name": "AWS_CONFIG_FILE", "value": "/cfg/config"},
        {"name": "AWS_SHARED_CREDENTIALS_FILE", "value": "/cfg/credentials"},
    ]
    assert run["args"][:2] == ["eks", "get-token"] and run["args"][-4:] == ["--profile", "research", "--role-arn", ROLE]
    command = resolve(pulumi.Output.from_input(p.outputs["updateKubeconfigCommand"]))
    assert command.endswith(f" --profile research --role-arn {ROLE}"), command


def test_a_role_that_asks_an_external_id_is_not_given_to_get_token() -> None:
    """``aws eks get-token --role-arn`` passes no external id: such a role it could never assume."""
    p = run_program("dev", config=stack_config("dev") | SETTINGS_CONFIG)
    assert "--role-arn" not in _token_exec(p)["args"]


def test_without_settings_the_kubeconfig_is_pulumi_eks_own() -> None:
    p = run_program("dev")
    run = _token_exec(p)
    assert "env" not in run and "--role-arn" not in run["args"]
    assert "--profile" not in resolve(pulumi.Output.from_input(p.outputs["updateKubeconfigCommand"]))


def test_with_token_credentials_adds_to_every_exec_user_only() -> None:
    kubeconfig = {
        "users": [
            {"name": "aws", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"], "env": [{"name": "A"}]}}},
            {"name": "static", "user": {"token": "t"}},
        ]
    }
    text = json.dumps(kubeconfig)
    assert with_token_credentials(text, {}, None) == text
    out = json.loads(with_token_credentials(text, {"AWS_PROFILE": "p"}, "arn:aws:iam::1:role/r"))
    assert out["users"][0]["user"]["exec"] == {
        "command": "aws",
        "args": ["eks", "get-token", "--profile", "p", "--role-arn", "arn:aws:iam::1:role/r"],
        "env": [{"name": "A"}],
    }
    assert out["users"][1] == kubeconfig["users"][1]
