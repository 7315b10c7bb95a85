"""Preflight's check of the deploying machine: the AWS CLI the cluster's kubeconfig runs for its token, found where
the Kubernetes provider of ``pulumi up`` looks (``PATH`` without the program's own virtualenv), and recent enough to
answer in the API version the kubeconfig asks for."""

from pathlib import Path

import pytest

from stacks.plan.checklist import AWS_CLI_KEY
from stacks.preflight.machine import aws_cli_finding

pytestmark = pytest.mark.unit


def _cli(folder: Path, version: str, *, stderr: bool = False) -> Path:
    """An ``aws`` in ``folder`` that prints ``version`` as ``aws --version`` does (version 1 on stderr)."""
    folder.mkdir(parents=True, exist_ok=True)
    line = f"aws-cli/{version} Python/3.11.6 Linux/6.1 botocore/1.0"
    (folder / "aws").write_text(f"#!/bin/sh\necho '{line}'{' 1>&2' if stderr else ''}\n")
    (folder / "aws").chmod(0o755)
    return folder


def test_no_aws_command_fails_naming_path_and_the_install(tmp_path: Path) -> None:
    f = aws_cli_finding(str(tmp_path / "empty"), None)
    assert not f.ok and f.key == AWS_CLI_KEY == "PATH"
    assert "no `aws` command: the cluster's kubeconfig runs `aws eks get-token`" in f.message
    assert "getting-started-install.html" in f.message


@pytest.mark.parametrize(
    "version, stderr, ok",
    [
        ("1.23.8", True, False),
        ("1.23.9", True, True),
        ("2.6.2", False, False),
        ("2.6.3", False, True),
        ("2.31.4", False, True),
    ],
)
def test_a_cli_older_than_the_exec_info_release_fails(tmp_path: Path, version: str, stderr: bool, ok: bool) -> None:
    """Before 1.23.9 and 2.6.3, ``aws eks get-token`` answers ``v1alpha1``, which Kubernetes 1.24's clients dropped."""
    f = aws_cli_finding(str(_cli(tmp_path / "bin", version, stderr=stderr)), None)
    assert f.ok is ok, f.message
    if ok:
        assert f.message.endswith(f"(aws-cli {version})"), f.message
    else:
        assert f"is aws-cli {version}: before " in f.message and "aws/aws-cli/pull/6476" in f.message


def test_a_cli_only_in_the_programs_virtualenv_is_named_as_such(tmp_path: Path) -> None:
    """Pulumi puts the program's virtualenv first on the program's PATH, not on the providers'."""
    venv_bin = _cli(tmp_path / "venv" / "bin", "2.31.4")
    f = aws_cli_finding(f"{venv_bin}:{tmp_path / 'empty'}", venv_bin)
    assert f.ok and "is in this program's virtualenv only" in f.message, f.message
    elsewhere = _cli(tmp_path / "usr" / "bin", "2.31.4")
    f = aws_cli_finding(f"{venv_bin}:{elsewhere}", venv_bin)
    assert f.ok and f.message.startswith(f"the AWS CLI is {venv_bin / 'aws'}"), f.message
