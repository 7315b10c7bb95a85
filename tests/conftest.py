"""Shared fixtures: program runs under mocks are cached per (stack, preview)."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.harness import Program, run_program  # noqa: E402

_CACHE: dict[tuple[str, bool], Program] = {}


@pytest.fixture(scope="session")
def program_for():
    """``program_for(stack, preview)`` evaluates the real program once per stack and mode."""

    def get(stack: str, preview: bool) -> Program:
        key = (stack, preview)
        if key not in _CACHE:
            _CACHE[key] = run_program(stack, preview=preview)
        return _CACHE[key]

    return get
