"""The tests' safety bounds stretch on a busy machine (tests/wait.py ``patient``), and every run of the box's
rehearsal and every multi-node wait in the tests goes through it."""

import re

import pytest

from tests import wait
from tests.harness import REPO


@pytest.mark.parametrize(("load", "cores", "stretched"), [(0.3, 2, 90), (2.0, 2, 90), (5.0, 2, 225), (40.0, 2, 360)])
def test_a_bound_stretches_with_the_load_per_core_up_to_four_times(
    monkeypatch: pytest.MonkeyPatch, load: float, cores: int, stretched: float
) -> None:
    monkeypatch.setattr(wait.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(wait.os, "cpu_count", lambda: cores)
    assert wait.patient(90) == pytest.approx(stretched)


def test_no_rehearsal_in_the_tests_runs_on_a_bare_number_of_seconds() -> None:
    bare = re.compile(r"(?:rehearsal\.run\(binaries|_run\(box, rehearsal), timeout_s=\d")
    found = [
        f"{p.relative_to(REPO)}:{n}"
        for p in sorted((REPO / "tests").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if bare.search(line)
    ]
    assert found == [], "wrap the bound in tests.wait.patient"
    uses = sum(p.read_text().count("timeout_s=patient(") for p in (REPO / "tests" / "cluster").glob("test_*.py"))
    assert uses >= 15
