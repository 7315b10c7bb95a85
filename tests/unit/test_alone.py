"""The lock that runs a test marked ``alone`` with no other test beside it, and the order xdist hands modules out
in (tests/conftest.py). Threads stand for the xdist workers (``flock`` locks belong to each ``open``, so threads of
one process contend like processes)."""

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ModuleOrder, UnitDurations, _room, read_durations
from tests.wait import patient


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
            self.leave.wait(patient(10))


def test_an_alone_test_waits_for_the_room_to_empty_and_keeps_new_tests_out(tmp_path: Path) -> None:
    entered: list[str] = []
    first = Worker(tmp_path, "first", alone=False, entered=entered)
    first.start()
    assert first.inside.wait(patient(5))
    beside = Worker(tmp_path, "beside", alone=False, entered=entered)
    beside.start()
    assert beside.inside.wait(patient(5)), "tests that are not alone share the room"

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
    assert lone.inside.wait(patient(5))
    time.sleep(0.3)
    assert not late.inside.is_set(), "a test ran beside the alone test"
    lone.leave.set()
    assert late.inside.wait(patient(5))
    late.leave.set()
    for worker in (first, beside, lone, late):
        worker.join(patient(5))
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


def test_the_units_that_took_longest_last_time_go_first() -> None:
    """With the durations earlier runs recorded (unit -> seconds), the longest unit is handed out first after the one
    with an alone test, so no worker starts a long unit when the others are nearly done; a unit never measured
    goes after the measured ones, by its count of tests; a class is a unit of its own."""
    items = [
        FakeItem("tests/a.py::one"),
        FakeItem("tests/b.py::one"),
        FakeItem("tests/b.py::two[x]"),
        FakeItem("tests/b.py::two[y]"),
        FakeItem("tests/c.py::lost", alone=True),
        FakeItem("tests/d.py::Case::one"),
        FakeItem("tests/e.py::one"),
    ]
    durations = {"tests/a.py": 300.0, "tests/b.py": 20.0, "tests/d.py::Case": 90.0, "tests/c.py": 30.0}
    ModuleOrder(durations).pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/c.py::lost",
        "tests/a.py::one",
        "tests/d.py::Case::one",
        "tests/b.py::one",
        "tests/b.py::two[x]",
        "tests/b.py::two[y]",
        "tests/e.py::one",
    ]


def test_a_run_keeps_its_units_durations_for_the_next_run_of_the_same_expression(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EKS_TRAINING_CACHE", str(tmp_path))
    first = UnitDurations("not (unit or mock or alone)")
    for nodeid, seconds in [
        ("tests/real/a.py::t[1]", 2.0),
        ("tests/real/a.py::t[2]", 3.0),
        ("tests/real/b.py::t", 1.0),
    ]:
        first.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=seconds))  # type: ignore[arg-type]
    first.pytest_sessionfinish(pytest.ExitCode.TESTS_FAILED)
    other = UnitDurations("alone and not (unit or mock)")
    other.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/real/a.py::lost", duration=40.0))  # type: ignore[arg-type]
    other.pytest_sessionfinish(pytest.ExitCode.OK)
    interrupted = UnitDurations("not (unit or mock or alone)")
    interrupted.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/real/a.py::t", duration=0.5))  # type: ignore[arg-type]
    interrupted.pytest_sessionfinish(pytest.ExitCode.INTERRUPTED)  # an interrupted run's are not whole: not kept
    assert read_durations("not (unit or mock or alone)") == {"tests/real/a.py": 5.0, "tests/real/b.py": 1.0}
    assert read_durations("alone and not (unit or mock)") == {"tests/real/a.py": 40.0}
    assert read_durations("cluster") == {}
