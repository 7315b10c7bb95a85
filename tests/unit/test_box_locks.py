"""The box's machine-wide locks (stacks.box.processes): what two boxes on one machine must not do at once (kwokctl's
port choice, the MPI Operator's fixed port 8080) waits for the other instead of breaking it."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from stacks.box import processes
from stacks.box.api import BoxError
from stacks.box.processes import hold_for_child, host_lock
from tests.wait import patient


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EKS_TRAINING_BOX_CACHE", str(tmp_path))


def _child(fd: int) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, pass_fds=(fd,)
    )
    os.close(fd)
    return child


def test_the_lock_lives_as_long_as_the_child_it_was_passed_to() -> None:
    """Held by the operator process, not by the rehearsal that started it: a kept box's operator keeps it after the
    rehearsal's process is gone; the next one waits (told once), and gets it as soon as the first child ends."""
    first = _child(hold_for_child("op", 5, lambda: None))
    told: list[str] = []
    with pytest.raises(BoxError, match="op.lock for 1 s"):
        hold_for_child("op", 1, lambda: told.append("waiting"))
    assert told == ["waiting"]
    ender = threading.Timer(0.5, lambda: first.communicate(b""))
    ender.start()
    started = time.monotonic()
    second = _child(hold_for_child("op", 10, lambda: told.append("waiting")))
    waited = time.monotonic() - started
    # the lock is free once the child's process is gone, maybe before the timer's thread has reaped it
    ender.join(patient(5))
    assert 0.3 < waited < 5 and first.returncode == 0
    second.communicate(b"")


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
