"""A finished two-rank run ends cleanly, every time (real processes, no mocks).

A rank that finished its training and then died at interpreter exit (``terminate called without an active
exception``, SIGABRT) made torchrun count the worker group as failed and restart it while the finished node waited
for it at the exit barrier: a completed run turned into a restart and a 5-minute wait. ``train.py`` now ends its
process with ``process_end.end_process`` (no interpreter finalisation, where C++ threads of torch's process group
could abort the process). This test ends a short two-rank run :data:`RUNS` times in a row (each rank forked from a
process that imported torch once, then running ``train.py`` as ``__main__``), ranks started with the
environment torchrun gives its workers (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT``: the default
process group over gloo and a TCPStore, as on a CPU node), and asserts every rank of every run exits 0 with no
abort, ``DONE`` written. What torchrun does with a worker's exit code (any non-zero code restarts the group) is
shown with real agents in ``tests/real/test_launch_real.py``, whose two-node run also asserts that no restart happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from stacks.ports import free_port
from tests import training_support as ts
from tests.wait import patient

#: Short runs in a row. The abort ended 2 of 3 two-rank runs before ``end_process``: 8 runs all miss it with a
#: chance of (1/3)**8, under 1 in 6,000.
RUNS = 8
#: Runs at a time (two ranks each): the 2-core machine stays busy, as a loaded CI runner is.
CONCURRENT = 2
#: All the runs of one forking process: two ranks each, two optimizer steps, the test-set evaluation, under load.
RUNS_TIMEOUT = 600.0
#: What an aborted C++ runtime prints, and the signal's name in the exit status.
ABORT_MARKERS = ("terminate called", "Aborted", "core dumped", "Fatal Python error")
FORK_RANKS = ts.REPO_ROOT / "tests" / "programs" / "fork_ranks.py"


def rank_spec(index: int, rank: int, port: int, data: Path, work: Path) -> dict[str, object]:
    """One rank of run ``index``: train.py's arguments, the environment torchrun gives a worker, its log."""
    env = {
        **ts.torchrun_env(),
        "RANK": str(rank),
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_RUN_ID": f"end-{index}",
        "PYTHONUNBUFFERED": "1",
    }
    argv = [
        "--data-dir",
        str(data),
        "--output-dir",
        str(work / f"run{index}" / "output"),
        *ts.TINY_RECIPE,
        "--workers",
        "0",
        "--epochs",
        "1",
        "--max-steps-per-epoch",
        "2",
    ]
    return {"argv": argv, "env": env, "log": str(work / f"run{index}-rank{rank}.log")}


def test_a_finished_run_ends_cleanly_every_time(tmp_path: Path) -> None:
    """:data:`RUNS` two-rank runs of ``train.py`` as ``python train.py`` runs it (``tests/programs/fork_ranks.py``
    forks each rank from a process that imported torch once, then runs the script as ``__main__``: a rank that
    returned would end through the interpreter's finalisation), :data:`CONCURRENT` at a time."""
    data = ts.make_digits_cifar(tmp_path / "digits")
    batches = [list(range(b, RUNS, CONCURRENT)) for b in range(CONCURRENT)]
    procs = []
    started = time.monotonic()
    for b, indices in enumerate(batches):
        runs = [
            {"ranks": [rank_spec(i, r, port, data, tmp_path) for r in range(2)]}
            for i in indices
            for port in [free_port()]
        ]
        spec = tmp_path / f"spec{b}.json"
        spec.write_text(json.dumps({"script": str(ts.TRAIN_PY), "runs": runs}))
        procs.append(
            subprocess.Popen(
                [sys.executable, str(FORK_RANKS), str(spec)], stdout=subprocess.PIPE, text=True, cwd=tmp_path
            )
        )
    outputs = [p.communicate(timeout=patient(RUNS_TIMEOUT))[0] for p in procs]
    seconds = time.monotonic() - started
    codes = {
        indices[line["run"]]: line["codes"]
        for indices, out in zip(batches, outputs)
        for line in map(json.loads, out.splitlines())
    }
    assert sorted(codes) == list(range(RUNS)), outputs

    def log(i: int) -> str:
        return "\n".join((tmp_path / f"run{i}-rank{r}.log").read_text() for r in range(2))

    bad = [
        (i, codes[i], [m for m in ABORT_MARKERS if m in log(i)])
        for i in range(RUNS)
        if codes[i] != [0, 0] or any(m in log(i) for m in ABORT_MARKERS)
    ]
    assert not bad, f"runs that did not end cleanly (index, exit codes, markers): {bad}\n" + log(bad[0][0])[-4000:]
    for i in range(RUNS):
        assert (tmp_path / f"run{i}" / "output" / "DONE").is_file(), log(i)[-2000:]
        assert [e["event"] for e in ts.json_events(log(i)) if e["event"] == "done"] == ["done"]
    print(f"\n[timing] {RUNS} two-rank runs, {CONCURRENT} at a time: {seconds:.1f}s")


def test_a_forked_rank_that_returns_goes_through_finalisation(tmp_path: Path) -> None:
    """Control for the harness: a script that returns (no ``end_process``) ends through the interpreter's
    finalisation in a forked rank (its ``atexit`` handler runs), so an abort there would show above."""
    script = tmp_path / "returns.py"
    script.write_text("import atexit\natexit.register(lambda: print('FINALISED', flush=True))\nprint('ran')\n")
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "script": str(script),
                "runs": [{"ranks": [{"argv": [], "env": {}, "log": str(tmp_path / f"r{r}.log")} for r in range(2)]}],
            }
        )
    )
    out = subprocess.run(
        [sys.executable, str(FORK_RANKS), str(spec)], capture_output=True, text=True, timeout=patient(120)
    )
    assert json.loads(out.stdout) == {"run": 0, "codes": [0, 0]}, out.stderr
    assert [(tmp_path / f"r{r}.log").read_text().split() for r in range(2)] == [["ran", "FINALISED"]] * 2


def test_the_trainer_skips_interpreter_finalisation(tmp_path: Path) -> None:
    """The trainer's process ends without Python's finalisation (``atexit`` handlers never run), after flushing its
    output: a ``sitecustomize`` registers a handler that would print a marker at finalisation."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import atexit\natexit.register(lambda: print('FINALISED', flush=True))\n")
    data = ts.make_digits_cifar(tmp_path / "digits")
    env = {**ts.torchrun_env(), "PYTHONPATH": str(site), "PYTHONUNBUFFERED": "0"}
    env.pop("WORLD_SIZE", None)
    cmd = [
        sys.executable,
        str(ts.TRAIN_PY),
        "--data-dir",
        str(data),
        "--output-dir",
        str(tmp_path / "out"),
        "--width",
        "8",
        "--batch-size",
        "32",
        "--workers",
        "0",
        "--epochs",
        "1",
        "--max-steps-per-epoch",
        "1",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=patient(120), env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "FINALISED" not in done.stdout
    assert [e["event"] for e in ts.json_events(done.stdout)][-1] == "done"  # flushed before the process ended
    control = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True, env=env)
    assert control.stdout.split() == ["ok", "FINALISED"]  # the marker works
