"""The lock that runs a test marked ``alone`` with no other test beside it, and the order xdist hands modules out
in (tests/conftest.py). Threads stand for the xdist workers (``flock`` locks belong to each ``open``, so threads of
one process contend like processes)."""

import threading
import time
from pathlib import Path

from tests.conftest import ModuleOrder, _room


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


class FakeItem:
    """What :class:`tests.conftest.ModuleOrder` reads of a test: its node id and its ``alone`` marker."""

    def __init__(self, nodeid: str, alone: bool = False) -> None:
        self.nodeid, self.alone = nodeid, alone

    def get_closest_marker(self, name: str) -> object:
        return object() if name == "alone" and self.alone else None


def test_the_module_with_an_alone_test_is_handed_out_first_then_the_largest() -> None:
    items = [
        FakeItem("tests/a.py::one"),
        FakeItem("tests/b.py::one"),
        FakeItem("tests/b.py::two"),
        FakeItem("tests/c.py::one"),
        FakeItem("tests/c.py::lost", alone=True),
        FakeItem("tests/d.py::one"),
        FakeItem("tests/d.py::two"),
        FakeItem("tests/d.py::three"),
    ]
    ModuleOrder().pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/c.py::one",
        "tests/c.py::lost",
        "tests/d.py::one",
        "tests/d.py::two",
        "tests/d.py::three",
        "tests/b.py::one",
        "tests/b.py::two",
        "tests/a.py::one",
    ]
