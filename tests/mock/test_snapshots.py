"""What each stack registers equals its stored snapshot (tests/snapshots/<stack>.json).

A deliberate change regenerates the snapshots (``python -m tests.snapshot``) in the same commit,
so the commit's diff shows what the change does to every stack; an accidental one fails here."""

import difflib

import pytest

from tests.harness import stack_names
from tests.snapshot import SNAPSHOT_DIR, render

STACKS = stack_names()


def test_every_stack_has_a_snapshot() -> None:
    assert {p.stem for p in SNAPSHOT_DIR.glob("*.json")} == set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_registrations_equal_the_snapshot(program_for, stack: str) -> None:
    expected = (SNAPSHOT_DIR / f"{stack}.json").read_text()
    actual = render(stack, program_for(stack, False))
    if actual != expected:
        diff = "".join(
            list(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), "snapshot", "now", n=2))[:80]
        )
        pytest.fail(
            f"{stack} registers something else than its snapshot (regenerate with python -m tests.snapshot "
            f"if the change is deliberate):\n{diff}"
        )
