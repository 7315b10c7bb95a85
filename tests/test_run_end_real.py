"""A finished two-rank run ends cleanly, every time (real processes, no mocks).

A rank that finished its training and then died at interpreter exit (``terminate called without an active
exception``, SIGABRT) made torchrun count the worker group as failed and restart it while the finished node waited
for it at the exit barrier: a completed run turned into a restart and a 5-minute wait. ``train.py`` now ends its
process with ``process_end.end_process`` (no interpreter finalisation, where C++ threads of torch's process group
could abort the process). This test ends a short two-rank run :data:`RUNS` times in a row, ranks started with the
environment torchrun gives its workers (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``: the default
process group over gloo and a TCPStore, as on a CPU node), and asserts every rank of every run exits 0 with no
abort, ``DONE`` written. What torchrun does with a worker's exit code (any non-zero code restarts the group) is
shown with real agents in ``tests/test_launch_real.py``, whose two-node run also asserts that no restart happened.
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import training_support as ts
from tests.aws_support import free_port

pytestmark = pytest.mark.real

#: Short runs in a row ("dozens"): an abort that happened in 2 of 3 CI runs' shared two-node run would show here.
RUNS = 24
#: Runs at a time (two ranks each): the 2-core machine stays busy, as a loaded CI runner is.
CONCURRENT = 2
#: One run: two ranks importing torch, two optimizer steps, the test-set evaluation, under load.
RUN_TIMEOUT = 90.0
#: What an aborted C++ runtime prints, and the signal's name in the exit status.
ABORT_MARKERS = ("terminate called", "Aborted", "core dumped", "Fatal Python error")


def run_once(index: int, data: Path, work: Path) -> tuple[list[int], str, float]:
    """One two-rank run to completion: the ranks' exit codes, their output, and the seconds it took."""
    out = work / f"run{index}" / "output"
    port = free_port()
    procs = []
    started = time.monotonic()
    for rank in range(2):
        env = {**ts.torchrun_env(), "RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1",
               "GROUP_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_RUN_ID": f"end-{index}", "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, str(ts.TRAIN_PY), "--data-dir", str(data), "--output-dir", str(out),
               "--width", "8", "--batch-size", "32", "--lr", "0.2", "--warmup-epochs", "1", "--seed", "0",
               "--workers", "0", "--epochs", "1", "--max-steps-per-epoch", "2"]
        procs.append(ts.ManagedProcess(cmd, work / f"run{index}-rank{rank}.log", env=env, cwd=work))
    try:
        codes = ts.wait_all(procs, RUN_TIMEOUT)
    finally:
        for proc in procs:
            proc.kill()
    return codes, "\n".join(p.output() for p in procs), time.monotonic() - started


def test_a_finished_run_ends_cleanly_every_time(tmp_path: Path) -> None:
    data = ts.make_digits_cifar(tmp_path / "digits")
    with ThreadPoolExecutor(CONCURRENT) as pool:
        results = list(pool.map(lambda i: run_once(i, data, tmp_path), range(RUNS)))
    bad = [(i, codes, [m for m in ABORT_MARKERS if m in log]) for i, (codes, log, _) in enumerate(results)
           if codes != [0, 0] or any(m in log for m in ABORT_MARKERS)]
    assert not bad, f"runs that did not end cleanly (index, exit codes, markers): {bad}\n" + (
        results[bad[0][0]][1][-4000:])
    for i, (_, log, _) in enumerate(results):
        assert (tmp_path / f"run{i}" / "output" / "DONE").is_file(), log[-2000:]
        assert [e["event"] for e in ts.json_events(log) if e["event"] == "done"] == ["done"]
    seconds = sorted(s for _, _, s in results)
    print(f"\n[timing] {RUNS} two-rank runs, {CONCURRENT} at a time: median {seconds[RUNS // 2]:.1f}s, "
          f"slowest {seconds[-1]:.1f}s")


def test_the_trainer_skips_interpreter_finalisation(tmp_path: Path) -> None:
    """The trainer's process ends without Python's finalisation (``atexit`` handlers never run), after flushing its
    output: a ``sitecustomize`` registers a handler that would print a marker at finalisation."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import atexit\natexit.register(lambda: print('FINALISED', flush=True))\n")
    data = ts.make_digits_cifar(tmp_path / "digits")
    env = {**ts.torchrun_env(), "PYTHONPATH": str(site), "PYTHONUNBUFFERED": "0"}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, str(ts.TRAIN_PY), "--data-dir", str(data), "--output-dir", str(tmp_path / "out"),
           "--width", "8", "--batch-size", "32", "--workers", "0", "--epochs", "1", "--max-steps-per-epoch", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "FINALISED" not in done.stdout
    assert [e["event"] for e in ts.json_events(done.stdout)][-1] == "done"  # flushed before the process ended
    control = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True, env=env)
    assert control.stdout.split() == ["ok", "FINALISED"]  # the marker works
