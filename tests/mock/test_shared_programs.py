"""The presets' evaluations the xdist workers share (tests.harness.shared): evaluated once per run whoever asks first,
read back by the others as the same plain data, with nothing of the Pulumi runtime left in it."""

import dataclasses
import threading
import time

import pulumi
import pytest

from tests.harness import PROGRAMS_FOLDER, SHARED_FOLDER, Program, run_program, shared
from tests.wait import patient


def _walk(value):
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk(v)


def test_workers_asking_at_once_evaluate_once_and_read_the_same_program(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(PROGRAMS_FOLDER, raising=False)
    monkeypatch.setenv(SHARED_FOLDER, str(tmp_path))
    calls: list[str] = []

    def evaluate() -> Program:
        calls.append(threading.current_thread().name)
        time.sleep(0.3)  # the other asker arrives while this one evaluates
        return Program("dev", False, [], {"clusterName": "c"}, [], secret_outputs=frozenset({"kubeconfig"}))

    got: dict[str, Program] = {}
    askers = [threading.Thread(target=lambda n=n: got.__setitem__(n, shared("k", evaluate)), name=n) for n in "ab"]
    for t in askers:
        t.start()
    for t in askers:
        t.join(patient(10))
    assert len(calls) == 1, calls
    assert got["a"] == got["b"] and got["a"].secret_outputs == frozenset({"kubeconfig"})
    assert shared("k", lambda: pytest.fail("evaluated again")) == got["a"]
    assert shared("other", evaluate) is not None and len(calls) == 2  # another key is evaluated on its own


def test_the_runs_of_one_ci_run_read_what_the_first_evaluated(monkeypatch, tmp_path) -> None:
    """With PROGRAMS_FOLDER set (.ci/run's three pytest runs), a program is kept there, not in the run's own folder,
    and a later run (another run's folder) reads it instead of evaluating it again."""
    monkeypatch.setenv(PROGRAMS_FOLDER, str(tmp_path / "programs"))
    (tmp_path / "programs").mkdir()
    monkeypatch.setenv(SHARED_FOLDER, str(tmp_path / "fast"))
    program = Program("dev", False, [], {"clusterName": "c"}, [])
    assert shared("dev-up", lambda: program) == program
    assert [p.name for p in (tmp_path / "programs").glob("*.pickle")] == ["program-dev-up.pickle"]
    monkeypatch.setenv(SHARED_FOLDER, str(tmp_path / "slow"))
    assert shared("dev-up", lambda: pytest.fail("evaluated again")) == program
    assert not (tmp_path / "fast").exists() and not (tmp_path / "slow").exists()


def test_a_presets_program_is_plain_data_and_reads_back_equal(monkeypatch, tmp_path) -> None:
    """What a worker reads is what the worker that evaluated it holds: no Output in the exports (their secrecy kept
    aside), and a pickled round trip equal to the evaluation."""
    import pickle

    program = run_program("p5", fresh=True)
    assert not [v for v in _walk(program.outputs) if isinstance(v, pulumi.Output)]
    assert "kubeconfig" in program.secret_outputs and program.outputs["clusterName"]
    back = pickle.loads(pickle.dumps(program))
    assert _comparable(back) == _comparable(program)


def _comparable(value):
    """``value`` with Pulumi's assets and archives (equal only to themselves) as their type and fields."""
    if isinstance(value, (pulumi.Asset, pulumi.Archive)):
        return (type(value).__name__, _comparable(vars(value)))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, _comparable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}))
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value
