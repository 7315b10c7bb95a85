"""The lock that runs a test marked ``alone`` with no other test beside it (tests/conftest.py): threads stand for
the xdist workers (``flock`` locks belong to each ``open``, so threads of one process contend like processes)."""

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import _room

pytestmark = pytest.mark.unit


class Worker(threading.Thread):
    """Enters the room (alone or not), records when, and stays until told to leave."""

    def __init__(self, folder: Path, name: str, alone: bool, entered: list[str]) -> None:
        super().__init__(name=name, daemon=True)
        self.folder, self.alone, self.entered = folder, alone, entered
        self.inside = threading.Event()
        self.leave = threading.Event()

    def run(self) -> None:
        with _room(self.folder, self.alone):
            self.entered.append(self.name)
            self.inside.set()
            self.leave.wait(10)


def test_an_alone_test_waits_for_the_room_to_empty_and_keeps_new_tests_out(tmp_path: Path) -> None:
    entered: list[str] = []
    first = Worker(tmp_path, "first", alone=False, entered=entered)
    first.start()
    assert first.inside.wait(5)
    beside = Worker(tmp_path, "beside", alone=False, entered=entered)
    beside.start()
    assert beside.inside.wait(5), "tests that are not alone share the room"

    lone = Worker(tmp_path, "alone", alone=True, entered=entered)
    lone.start()
    time.sleep(0.3)
    assert not lone.inside.is_set(), "the alone test entered while others ran"
    late = Worker(tmp_path, "late", alone=False, entered=entered)
    late.start()
    time.sleep(0.3)
    assert not late.inside.is_set(), "a new test slipped in ahead of the waiting alone test"

    first.leave.set()
    beside.leave.set()
    assert lone.inside.wait(5)
    time.sleep(0.3)
    assert not late.inside.is_set(), "a test ran beside the alone test"
    lone.leave.set()
    assert late.inside.wait(5)
    late.leave.set()
    for worker in (first, beside, lone, late):
        worker.join(5)
    assert entered == ["first", "beside", "alone", "late"]
