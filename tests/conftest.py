"""Shared fixtures and the test tiers.

Every test belongs to exactly one tier (a module-level ``pytestmark``): ``unit`` (pure functions),
``mock`` (the program evaluated under Pulumi mocks), ``moto`` (boto3 code against a real moto
server) or ``real`` (real processes: torchrun, etcd, ...). ``pytest`` alone runs the fast tiers
(``unit`` and ``mock``); ``.ci/run`` runs all of them.
"""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.harness import Program, run_program  # noqa: E402

TIERS = ("unit", "mock", "moto", "real")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test without exactly one tier marker is an error (it would silently never run, or run twice)."""
    wrong = [item.nodeid for item in items if sum(1 for t in TIERS if item.get_closest_marker(t)) != 1]
    if wrong:
        raise pytest.UsageError(f"tests without exactly one tier marker ({', '.join(TIERS)}): {wrong[:5]}")


@pytest.fixture(scope="session")
def program_for():
    """``program_for(stack, preview)`` evaluates the real program once per stack and mode."""

    def get(stack: str, preview: bool) -> Program:
        return run_program(stack, preview=preview)

    return get
