"""The image builds' AWS settings as the program passes them: every stack's builds get the stack's settings, and bad
settings stop the program naming the key (the program under Pulumi mocks)."""

from pathlib import Path

import pytest

from components.image.aws_settings import (
    AwsSettingsError,
)
from stacks.config import ConfigError
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
