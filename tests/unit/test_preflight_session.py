"""Preflight asks AWS with the stack's own credentials (aws:profile, the shared files, aws:assumeRoles), as the AWS
provider of ``pulumi up`` does, not the shell's default ones; a profile that is not there is a failed check naming
the keys, not a crash."""

import contextlib
import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacks.config import load_config
from stacks.config.namespaces import eks_regions
from stacks.plan import Plan, build_plan
from stacks.preflight.checks import run_preflight
from stacks.preflight.cli import main as preflight_main
from stacks.preflight.cluster import running_cluster
from stacks.preflight.session import stack_session
from stacks.stackfile import REPO
from tests.harness import stack_config


def _plan(**aws: Any) -> Plan:
    config = copy.deepcopy(stack_config("dev")) | aws
    return build_plan(load_config("eks-training", "dev", config, project_dir=REPO))


def _files(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "config").write_text("[profile research]\nregion = eu-west-1\n")
    (tmp_path / "credentials").write_text(
        "[research]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = example\n"
    )
    return {
        "aws:sharedConfigFiles": [str(tmp_path / "config")],
        "aws:sharedCredentialsFiles": [str(tmp_path / "credentials")],
    }


def test_the_session_is_the_stacks_profile_in_the_stacks_region(tmp_path: Path) -> None:
    plan = _plan(**_files(tmp_path), **{"aws:profile": "research"})
    session = stack_session(plan)
    assert session.profile_name == "research"
    assert session.region_name == plan.config.region
    assert session.get_credentials().access_key == "AKIAEXAMPLE"


def test_a_missing_profile_fails_the_check_naming_the_keys(tmp_path: Path) -> None:
    plan = _plan(**_files(tmp_path), **{"aws:profile": "nobody"})
    findings = run_preflight(plan, None)
    failed = [f for f in findings if not f.ok and f.key != "PATH"]  # (the AWS CLI's check is this machine's)
    assert len(failed) == 1 and findings[-1] == failed[0], findings  # no check asks AWS after it
    assert failed[0].key == "aws:profile"
    assert failed[0].message.startswith("cannot use the stack's AWS credentials (aws:profile, aws:sharedConfigFiles")
    assert "nobody" in failed[0].message
    # the fix names the stack's profile and files: the AWS CLI's commands without them would set up and check the
    # default profile of the default files
    cli = f"AWS_CONFIG_FILE={tmp_path / 'config'} AWS_SHARED_CREDENTIALS_FILE={tmp_path / 'credentials'} aws"
    assert failed[0].message.endswith(
        f"(`{cli} configure --profile nobody`, `{cli} sso login --profile nobody`), and check them with "
        f"`{cli} sts get-caller-identity --profile nobody`"
    ), failed[0].message
    # the program's read of the running cluster says why it could not ask, and stops nothing
    found, why = running_cluster(plan)
    assert found is None and why is not None and "nobody" in why


def test_the_fix_names_the_stacks_own_files_and_its_first_role(tmp_path: Path) -> None:
    """A stack that assumes roles: the fix also checks the first role the provider assumes with the credentials, with
    what its trust policy may require (here an external id)."""
    role = "arn:aws:iam::123456789012:role/deployer"
    roles = [{"roleArn": role, "sessionName": "pulumi-up", "externalId": "ext-7"}]
    plan = _plan(**_files(tmp_path), **{"aws:profile": "nobody", "aws:assumeRoles": roles})
    (failed,) = [f for f in run_preflight(plan, None) if not f.ok and f.key != "PATH"]
    cli = f"AWS_CONFIG_FILE={tmp_path / 'config'} AWS_SHARED_CREDENTIALS_FILE={tmp_path / 'credentials'} aws"
    assert failed.message.endswith(
        f"(`{cli} configure --profile nobody`, `{cli} sso login --profile nobody`), and check them with "
        f"`{cli} sts get-caller-identity --profile nobody`, then that they may assume aws:assumeRoles' first role: "
        f"`{cli} sts assume-role --profile nobody --role-arn {role} --role-session-name pulumi-up --external-id "
        "ext-7`"
    ), failed.message


def _failed(findings: list) -> list:
    return [f for f in findings if not f.ok and f.key != "PATH"]  # (the AWS CLI's check is this machine's)


@pytest.mark.parametrize(
    "profile, says",
    [
        # a credential_process that fails (botocore's CredentialRetrievalError)
        ("[profile research]\ncredential_process = false\n", "custom-process"),
        # a role whose source_profile no file holds (botocore's InvalidConfigError)
        ("[profile research]\nrole_arn = arn:aws:iam::123456789012:role/r\nsource_profile = ghost\n", "ghost"),
        # a role whose source profile asks for an MFA code: said, not prompted for (on Pulumi's display, or no terminal)
        (
            "[profile research]\nrole_arn = arn:aws:iam::123456789012:role/r\nsource_profile = base\n"
            "[profile base]\nmfa_serial = arn:aws:iam::123456789012:mfa/me\naws_access_key_id = AKIAEXAMPLE\n"
            "aws_secret_access_key = example\n",
            "profile base asks for an MFA code (mfa_serial), which neither preflight nor the AWS provider",
        ),
    ],
    ids=["credential_process", "source_profile", "mfa_serial"],
)
def test_credentials_that_cannot_be_resolved_are_one_finding(tmp_path: Path, profile: str, says: str) -> None:
    (tmp_path / "config").write_text(profile)
    plan = _plan(**{"aws:profile": "research", "aws:sharedConfigFiles": [str(tmp_path / "config")]})
    findings = run_preflight(plan, None)
    (failed,) = _failed(findings)
    assert findings[-1] is failed and failed.key == "aws:profile", findings  # no check asked AWS after it
    assert failed.message.startswith("cannot use the stack's AWS credentials (aws:profile,") and says in failed.message


def test_credentials_aws_refuses_are_one_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys that resolve but that AWS does not take (here: no AWS answers at all) fail the first call, who the
    caller is, and no check runs after it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    plan = _plan(**_files(tmp_path), **{"aws:profile": "research"})
    findings = run_preflight(plan, None)
    (failed,) = _failed(findings)
    assert findings[-1] is failed and failed.key == "aws:profile", findings
    assert failed.message.startswith("AWS did not say who the stack's credentials are (aws:profile,")
    assert f"STS in {plan.config.region}" in failed.message and "preflight.enabled: false" in failed.message
    assert "get_caller_identity failed: EndpointConnectionError" in failed.message


def test_the_region_check_ignores_a_shell_profile_no_file_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    eks_regions.cache_clear()
    try:
        assert "us-east-1" in eks_regions() and "eu-west-1" in eks_regions()
    finally:
        eks_regions.cache_clear()


def test_the_command_says_so_before_it_lists_the_zones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m stacks preflight`` for a stack with a new VPC asks who the credentials are before it lists the
    zones: one error line, the same as the finding."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(
        yaml.safe_dump({"config": {**stack_config("dev"), **_files(tmp_path), "aws:profile": "research"}})
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = preflight_main(["--stack", "dev", "--stack-file", str(stack_file)])
        except SystemExit as exc:
            code = exc.code
    assert code == 1, err.getvalue()
    assert err.getvalue().startswith("error: AWS did not say who the stack's credentials are (aws:profile,")
