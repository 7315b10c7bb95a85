"""The box's machine-wide locks (stacks.box.processes): what two boxes on one machine must not do at once (kwokctl's
port choice) waits for the other instead of breaking it."""

import threading
import time
from pathlib import Path

import pytest

from stacks.box import processes
from stacks.box.processes import host_lock
from tests.wait import patient


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EKS_TRAINING_BOX_CACHE", str(tmp_path))


def test_host_lock_excludes_other_holders() -> None:
    order: list[str] = []

    def take() -> None:
        with host_lock("create"):
            order.append("other")

    with host_lock("create"):
        other = threading.Thread(target=take)
        other.start()
        time.sleep(0.3)
        order.append("first")
    other.join(patient(5))
    assert order == ["first", "other"]
    assert processes.host_lock_path("create").parent.name == "locks"
