"""The program refuses every stack key it does not read, and reads the providers' and the engine's keys (the program
under Pulumi mocks)."""

from typing import Any

import pytest

from stacks.config import ConfigError
from tests.harness import PROJECT, run_program, stack_config
from tests.unit.test_config_keys import JOBS, UNREAD


@pytest.mark.parametrize("project,written,message", [pytest.param(p, k, m, id=i) for i, p, k, m in UNREAD])
def test_the_program_refuses_a_key_it_does_not_read(project: str, written: str, message: str) -> None:
    cfg = stack_config("dev")
    cfg.pop(f"{PROJECT}:jobs")
    cfg[written] = JOBS
    p = run_program("dev", config=cfg, project=project, expect_error=True)
    assert isinstance(p.error, ConfigError), p.error
    assert len(p.error.problems) == 1 and p.error.problems[0].startswith(message), p.error.problems
    assert p.registrations == []


def test_keys_of_the_providers_and_the_engine_are_read() -> None:
    """The control: settings of the AWS provider (the one provider whose default instance the program uses) and
    ``pulumi:`` (the engine's) keys pass, and so does a project of another name whose keys are ``eks-training:``."""
    cfg = stack_config("dev")
    cfg.update(
        {
            "aws:maxRetries": 5,
            "aws:defaultTags": {"tags": {"team": "ml"}},
            "pulumi:tags": {"team": "ml"},
            # the program's Kubernetes objects go through its own provider
            "pulumi:disable-default-providers": ["kubernetes"],
        }
    )
    p = run_program("dev", config=cfg, project="research")
    assert p.error is None and p.registrations


@pytest.mark.parametrize(
    "written,message",
    [
        pytest.param(
            {"aws:regin": "eu-west-1"},
            "aws:regin: pulumi-aws has no setting regin, so it would be ignored; did you mean aws:region? fix its "
            "spelling or remove it (its settings: https://www.pulumi.com/registry/packages/aws/installation-configuration/)",
            id="misspelt AWS setting",
        ),
        pytest.param(
            {"kubernetes:enableServerSideApply": "false"},
            "kubernetes:enableServerSideApply: every Kubernetes object of this program goes through its own provider, "
            "made from the cluster's kubeconfig, which reads no kubernetes: setting; remove it",
            id="a setting of the Kubernetes provider the program does not use",
        ),
        pytest.param(
            {"eks:foo": "x"},
            "eks:foo: pulumi-eks has no settings, so nothing reads eks: settings; remove it",
            id="pulumi-eks, which has no settings",
        ),
        pytest.param(
            {"pulumi:disable-default-providers": ["*"]},
            "pulumi:disable-default-providers: this program makes its AWS resources with the default aws provider "
            "(set by the stack's aws: settings), pulumi-eks's cluster with the default eks provider and its image "
            "builds with the default pulumi-python provider, so `pulumi up` would refuse them (aws, eks, "
            "pulumi-python disabled); remove * from it",
            id="every default provider disabled",
        ),
        pytest.param(
            {"pulumi:disable-default-providers": ["kubernetes", "aws"]},
            "pulumi:disable-default-providers: this program makes its AWS resources with the default aws provider",
            id="the default AWS provider disabled",
        ),
        pytest.param(
            {"pulumi:disable-default-providers": ["pulumi-python"]},
            "pulumi:disable-default-providers: this program makes its AWS resources with the default aws provider "
            "(set by the stack's aws: settings), pulumi-eks's cluster with the default eks provider and its image "
            "builds with the default pulumi-python provider, so `pulumi up` would refuse them (pulumi-python "
            "disabled); remove pulumi-python from it",
            id="the image builds' dynamic provider disabled",
        ),
        pytest.param(
            {"pulumi:disable-default-provider": ["kubernetes"]},
            "pulumi:disable-default-provider: the Pulumi engine has no setting disable-default-provider, so it would "
            "be ignored; did you mean pulumi:disable-default-providers? fix its spelling",
            id="a misspelt engine setting",
        ),
    ],
)
def test_a_provider_setting_nothing_reads_is_refused(written: dict[str, Any], message: str) -> None:
    """A provider's key is read only when the program uses that provider's default instance and the provider has the
    setting: otherwise it would be ignored (a typo ``aws:regin`` leaves the region to the environment)."""
    cfg = stack_config("dev")
    cfg.update(written)
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError) and [m[: len(message)] for m in p.error.problems] == [message]
    assert p.registrations == []


# --- messages that name the fix ---------------------------------------------------------------------------------


def test_a_setting_held_as_a_secret_is_refused_before_anything_is_registered() -> None:
    """``pulumi config set --secret --path 'eks-training:jobs.train.env.TOKEN'`` makes the whole setting a secret. The
    program reads it as plain text: the token would be in the pod spec and the stack's state in the clear. Refused,
    before anything is registered; an AWS credential held as a secret (the provider's own) passes."""
    from stacks.mocked import evaluate

    cfg = {**stack_config("dev"), f"{PROJECT}:preflight": {"enabled": False}}
    ev = evaluate("dev", cfg, secret_keys=[f"{PROJECT}:jobs", "aws:secretKey"], expect_error=True)
    assert isinstance(ev.error, ConfigError), ev.error
    assert ev.error.problems == [
        f"{PROJECT}:jobs: a secret (pulumi config set --secret), but the program writes this setting as plain text "
        "into the cluster's objects and the stack's state, so it would not stay secret (a job's env is plain text in "
        "its pod: no token or password there): set it without --secret. With --path, one secret value makes its whole "
        "setting secret: set that value again without --secret (pulumi config set --path KEY.PATH VALUE); `python -m "
        "stacks plan` names its path"
    ], ev.error.problems
    assert ev.registrations == []
    control = evaluate(
        "dev", {**cfg, "aws:secretKey": "SECRET", "aws:accessKey": "AKIA"}, secret_keys=["aws:secretKey"]
    )
    assert control.error is None and control.registrations
