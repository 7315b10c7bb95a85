"""Preflight asks AWS with the stack's own credentials (aws:profile, the shared files, aws:assumeRoles), as the AWS
provider of ``pulumi up`` does, not the shell's default ones; a profile that is not there is a failed check naming
the keys, not a crash."""

import copy
from pathlib import Path
from typing import Any

from stacks.config import load_config
from stacks.plan import Plan, build_plan
from stacks.preflight.checks import run_preflight
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
    # the program's read of the running cluster says why it could not ask, and stops nothing
    found, why = running_cluster(plan)
    assert found is None and why is not None and "nobody" in why
