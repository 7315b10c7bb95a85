"""The program refuses every stack key it does not read, and reads the providers' and the engine's keys (the program under Pulumi mocks)."""

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
    """The control: ``aws:``, ``kubernetes:``, ``eks:`` (the providers') and ``pulumi:`` (the engine's) keys pass, and
    so does a project of another name whose keys are ``eks-training:``."""
    cfg = stack_config("dev")
    cfg.update({"kubernetes:enableServerSideApply": "true", "eks:foo": "x", "pulumi:tags": {"team": "ml"}})
    p = run_program("dev", config=cfg, project="research")
    assert p.error is None and p.registrations


# --- finding 6: messages that name the fix ------------------------------------------------------------------------
