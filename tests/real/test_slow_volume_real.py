"""A slow shared volume under real training pods: every write stalled from the first step on, writes stalled at an
attempt's start, one 120 s stall with the production timeouts, and a drained pod whose stop checkpoint outlasts 30 s.

The pods are those of tests/real/test_training_faults_real.py (:mod:`tests.pod_runs`): two pods of the workshop stack
on 127.0.0.1, as the local runner starts them. The volume turns slow through an LD_PRELOAD shim
(``tests/programs/slow_fsync.c``) that stalls fsync of matching files; each stall is one ``slow_fsync`` line in the
pod's log, which the tests read as the volume's own record. These tests mostly wait out their stalls: in a module of
their own, xdist runs them on one worker while another runs the other fault scenarios.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# the repository (tests.*) and training/ (for tests.pod_runs' imports), before the imports below
for _folder in (REPO_ROOT, REPO_ROOT / "training"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

import launch  # noqa: E402

from components.workloads.pytorch import SHUTDOWN_MARGIN_S  # noqa: E402
from tests import training_support as ts  # noqa: E402
from tests.pod_runs import (  # noqa: E402
    RUN_TIMEOUT,
    TINY,
    PodRun,
    assert_no_step_lost_or_repeated,
    assert_whole_epochs,
    new_run,
    other,
)
from tests.wait import patient  # noqa: E402

#: Every checkpoint write stalls this long in fsync: half as long again as the collective timeout the run sets (10 s,
#: the lowest the configuration accepts), so a collective that waited for a write would time out and fail the attempt
#: (written in the training loop, a checkpoint did). The stall a checkpoint in the loop never survived with the
#: production settings (60 s collective timeout, then the 30 s torchrun gives its workers) is
#: test_one_120_s_stall_with_the_production_timeouts_loses_no_work's (it was 45 s here: 10 + 30 s).
STALL_S = 15.0


@pytest.fixture(scope="module")
def slow_fsync(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tests/programs/slow_fsync.c`` built with the machine's C compiler: an LD_PRELOAD shim that stalls fsync of
    matching files."""
    lib = tmp_path_factory.mktemp("slow-fsync") / "slow_fsync.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(ts.REPO_ROOT / "tests/programs/slow_fsync.c"), "-ldl"],
        check=True,
        capture_output=True,
        text=True,
    )
    return lib


#: A checkpoint's temporary file before its rename: ``.<name>.<random>.tmp`` (``cifar_io.atomic_write``).
_CHECKPOINT_TMP = re.compile(r"^\.(checkpoint-step\d+\.pt)\.[^/]+\.tmp$")


def stalled_checkpoints(
    checkpoints: list[dict[str, Any]], stalls: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(checkpoint event, the shim's ``slow_fsync`` event of its write) for each published checkpoint whose fsync
    the volume stalled, in order of publication: what the trainer and the volume recorded, whenever the test looked."""
    stalled_at = {}
    for stall in stalls:
        match = _CHECKPOINT_TMP.match(Path(stall["path"]).name)
        if match:
            stalled_at.setdefault(match.group(1), stall)  # one run's folder: a checkpoint's name is unique
    return [(e, stalled_at[Path(e["path"]).name]) for e in checkpoints if Path(e["path"]).name in stalled_at]


def test_a_stalled_checkpoint_volume_loses_no_work(
    runs: list[PodRun], etcd_server: ts.EtcdServer, digits: Path, tmp_path: Path, slow_fsync: Path
) -> None:
    """From the first step on, every write to the shared volume that the trainer makes while it trains (checkpoints
    and the run lease's renewals) stalls :data:`STALL_S` in fsync, persistently (so once, too). Training goes on while
    a write is in flight, checkpoints due meanwhile are skipped, each stalled write is published when the volume
    answers, and the run finishes whole: no restart, no failed attempt, no lost step. (Written in the training loop,
    the first stalled write held the other rank in a collective until it timed out: the work since the previous
    checkpoint was lost, and a volume that stayed slow used up the failure budget. Renewed in the loop, the lease did
    the same.)"""
    epochs = 10  # about 10 s of training here: long enough for a renewal of the lease (every 5 s) to stall in it
    run = new_run(
        runs,
        etcd_server,
        digits,
        tmp_path,
        [*TINY, "--epochs", str(epochs), "--checkpoint-every-seconds", "1"],
        collectiveTimeoutSeconds=10,
    )
    gate = tmp_path / "volume-turns-slow"
    run.host_env = {
        "LD_PRELOAD": str(slow_fsync),
        "SLOW_FSYNC_MATCH": "checkpoint-step:.lease.",
        "SLOW_FSYNC_SECONDS": f"{STALL_S:g}",
        "SLOW_FSYNC_GATE": str(gate),
    }
    run.start_pod("a")
    run.start_pod("b")
    run.wait_event("first_step", patient(RUN_TIMEOUT))
    gate.touch()
    opened_at = time.time()  # once the gate is open: whatever is staged from now on is written through it
    # Up to four stalls in a row on rank 0's way out: the write in flight, the final checkpoint, the final release.
    assert ts.wait_all(run.pods, patient(RUN_TIMEOUT + 4 * STALL_S)) == [0, 0], run.report()
    summary = assert_whole_epochs(run.output_dir, epochs)
    assert summary["world_sizes"] == [2]
    events = run.events()
    names = [e["event"] for e in events]
    assert "resumed" not in names and "stopping" not in names and names.count("start") == 1, names
    stalls = [e for e in events if e["event"] == "slow_fsync"]
    checkpoints = [e for e in events if e["event"] == "checkpoint"]
    # The checkpoints the volume stalled, by the shim's record of each stalled fsync (of the checkpoint's temporary
    # file), not by when the gate opened: a checkpoint staged just before it can reach its fsync after it.
    stalled = stalled_checkpoints(checkpoints, stalls)
    assert stalled and all(e["write_s"] >= STALL_S for e, _ in stalled), (stalled, checkpoints)
    # Every checkpoint staged once the gate was open was stalled (none reached the volume another way).
    through_gate = [e for e in checkpoints if e["staged_at"] >= opened_at]
    assert all(any(e is s for s, _ in stalled) for e in through_gate), (through_gate, stalled)
    # Training went on during the first stalled checkpoint write (from the stall's start to the file's publication):
    # steps were taken (the loop's progress records, every 0.2 s, whatever an epoch lasts on a busy machine), and the
    # checkpoints that fell due were skipped.
    first, first_stall = stalled[0]
    print(
        f"\n[timing] stalled volume: {len(stalled)} checkpoint write(s) stalled, the first staged "
        f"{first['staged_at'] - opened_at:+.2f}s from the gate's opening and stalled "
        f"{first_stall['time'] - opened_at:.2f}s after it; {len(stalls)} stalls in all"
    )
    window = first_stall["time"], first["time"]
    during = [e for e in events if e["event"] in ("progress", "epoch") and window[0] < e["time"] < window[1]]
    assert during, f"no step was taken while the first stalled checkpoint was being written\n{run.report()}"
    assert [e for e in events if e["event"] == "checkpoint_skipped" and first_stall["time"] < e["time"] < first["time"]]
    # ... and during a stalled renewal of the lease (one the keeper started while training went on, not the release
    # on the way out): steps were taken while it was held.
    last_epoch = max(e["time"] for e in events if e["event"] == "epoch")
    renewals = [e for e in stalls if ".lease." in e["path"] and e["time"] < last_epoch]
    assert renewals, f"no write of the lease was stalled while training went on: {stalls}"
    held = renewals[0]["time"], renewals[0]["time"] + STALL_S
    in_loop = ("progress", "epoch", "checkpoint_skipped")  # each written by the training loop, after a step
    assert [e for e in events if e["event"] in in_loop and held[0] < e["time"] < held[1]], (
        "training stopped while the lease's renewal was stalled"
    )
    assert_no_step_lost_or_repeated(run)


def test_a_slow_volume_at_the_start_of_an_attempt_fails_nothing(
    runs: list[PodRun], etcd_server: ts.EtcdServer, digits: Path, tmp_path: Path, slow_fsync: Path
) -> None:
    """Rank 0 takes the run lease and records the attempt's start on the volume while the other ranks wait for it.
    Every lease write stalls 15 s, past the 10 s collective timeout the run sets: the other rank waits on the
    process group's store (``wait_for_main``), not in a collective, so the attempt starts, trains and finishes with
    no restart. (Waiting in the collective, it timed out during the first stalled write and the attempt failed.)"""
    stall_s = 15.0
    run = new_run(runs, etcd_server, digits, tmp_path, [*TINY, "--epochs", "2"], collectiveTimeoutSeconds=10)
    run.host_env = {"LD_PRELOAD": str(slow_fsync), "SLOW_FSYNC_MATCH": ".lease.", "SLOW_FSYNC_SECONDS": f"{stall_s:g}"}
    run.start_pod("a")
    run.start_pod("b")
    assert ts.wait_all(run.pods, patient(RUN_TIMEOUT + 4 * stall_s)) == [0, 0], run.report()
    events = run.events()
    names = [e["event"] for e in events]
    assert names.count("start") == 1 and "resumed" not in names and "fatal" not in names, names
    stalls = [e for e in events if e["event"] == "slow_fsync"]
    acquired = next(e for e in events if e["event"] == "lease_acquired")
    assert stalls and stalls[0]["time"] < acquired["time"], "the lease's first write was not stalled"
    assert_whole_epochs(run.output_dir, 2)


#: The stall the issue measured with the production settings: past the default collective timeout (60 s) plus
#: torchrun's 30 s, so a checkpoint written in the training loop lost the epoch.
PRODUCTION_STALL_S = 120.0


def test_one_120_s_stall_with_the_production_timeouts_loses_no_work(
    runs: list[PodRun], etcd_server: ts.EtcdServer, digits: Path, tmp_path: Path, slow_fsync: Path
) -> None:
    """With the job's default ``collectiveTimeoutSeconds`` (60 s): the first
    checkpoint write (the run's first checkpoint comes after its first step) stalls :data:`PRODUCTION_STALL_S` in
    fsync, then the volume recovers (the shim closes its gate at that write). Training goes on through the stall, the
    write is published when the volume answers, the final checkpoint and ``DONE`` follow, and no step is lost or
    repeated, no restart."""
    epochs = 3  # a few seconds of training, all of it within the stall: the stall, not the run, sets the test's length
    run = new_run(
        runs, etcd_server, digits, tmp_path, [*TINY, "--epochs", str(epochs), "--checkpoint-every-seconds", "1"]
    )
    gate = tmp_path / "volume-turns-slow"
    gate.touch()
    run.host_env = {
        "LD_PRELOAD": str(slow_fsync),
        "SLOW_FSYNC_MATCH": "checkpoint-step",
        "SLOW_FSYNC_SECONDS": f"{PRODUCTION_STALL_S:g}",
        "SLOW_FSYNC_GATE": str(gate),
        "SLOW_FSYNC_ONCE": "1",
    }
    run.start_pod("a")
    run.start_pod("b")
    assert ts.wait_all(run.pods, patient(RUN_TIMEOUT + PRODUCTION_STALL_S)) == [0, 0], run.report()
    summary = assert_whole_epochs(run.output_dir, epochs)
    assert summary["world_sizes"] == [2]
    events = run.events()
    names = [e["event"] for e in events]
    assert "resumed" not in names and "stopping" not in names and names.count("start") == 1, names
    assert next(e for e in events if e["event"] == "start")["pg_timeout_s"] == 60.0  # the default, read back
    checkpoints = [e for e in events if e["event"] == "checkpoint"]
    stalls = [e for e in events if e["event"] == "slow_fsync"]
    # one stall, of the run's first checkpoint: its write took the stall, no other write did
    found = stalled_checkpoints(checkpoints, stalls)
    assert len(stalls) == len(found) == 1, (stalls, checkpoints)
    ((stalled, stall),) = found
    assert stalled["staged_at"] == min(e["staged_at"] for e in checkpoints), (stalled, checkpoints)
    assert stalled["write_s"] >= PRODUCTION_STALL_S
    assert [e for e in checkpoints if e is not stalled and e["write_s"] >= PRODUCTION_STALL_S] == [], checkpoints
    first_step = next(e for e in events if e["event"] == "first_step")
    assert first_step["time"] < stall["time"], (first_step, stall)
    # steps taken during the stall, by the loop's own records (an epoch's length depends on the machine's load)
    steps = {
        e["step"] for e in events if e["event"] in ("progress", "epoch") and stall["time"] < e["time"] < stalled["time"]
    }
    assert len(steps) >= 2, "training did not go on during the stalled write"
    assert_no_step_lost_or_repeated(run)


#: How long the stop checkpoint's write stalls in the drain below: longer than the fixed 30 s torch < 2.12's
#: torchrun waited for its workers after SIGTERM, shorter than the grace period the job gives them.
SLOW_STOP_S = 40.0


def test_a_drain_whose_stop_checkpoint_outlasts_30_s_loses_no_step(
    runs: list[PodRun], etcd_server: ts.EtcdServer, digits: Path, tmp_path: Path, slow_fsync: Path
) -> None:
    """A node drained by a node group update (SIGTERM to the pod, the job's grace period) while the volume is slow:
    the stop checkpoint takes :data:`SLOW_STOP_S`; torchrun waits for it (``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``, the
    grace period less 15 s, which the torch the image ships reads) instead of killing the worker at 30 s, so the
    survivor resumes at exactly the step the drained pod stopped after. The pod exits within its grace period."""
    grace = 120
    run = new_run(runs, etcd_server, digits, tmp_path, [*TINY, "--epochs", "6"], stopGracePeriodSeconds=grace)
    assert run.env()["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == str(grace - SHUTDOWN_MARGIN_S)
    gate = tmp_path / "volume-turns-slow"
    run.host_env = {
        "LD_PRELOAD": str(slow_fsync),
        "SLOW_FSYNC_MATCH": "checkpoint-step",
        "SLOW_FSYNC_SECONDS": f"{SLOW_STOP_S:g}",
        "SLOW_FSYNC_GATE": str(gate),
    }
    run.start_pod("a")
    run.start_pod("b")
    run.wait_event("epoch", patient(RUN_TIMEOUT))
    time.sleep(0.5)
    victim = run.rank0_pod()
    survivor = other(run, victim)
    gate.touch()  # from now on every checkpoint write stalls
    term_at = time.time()
    os.kill(victim.pid, signal.SIGTERM)
    assert victim.wait(grace) == launch.EXIT_STOPPED, run.report()
    exit_s = time.time() - term_at
    stop = run.wait_event("stopping", patient(10), after=term_at, pod=victim)
    checkpoint = run.wait_event(
        "checkpoint", patient(10), after=term_at, pod=victim, where=lambda e: e["step"] == stop["step"]
    )
    assert checkpoint["write_s"] >= SLOW_STOP_S > 30, checkpoint
    assert SLOW_STOP_S < exit_s < grace, exit_s
    resumed = run.wait_event("resumed", patient(RUN_TIMEOUT), after=term_at, pod=survivor)
    assert resumed["step"] == stop["step"], "the stop checkpoint was lost"
    print(
        f"\n[timing] drain with a {SLOW_STOP_S:g} s stop checkpoint: pod exit (143) {exit_s:.1f}s after SIGTERM, "
        f"survivor resumed at step {resumed['step']} (stopped after {stop['step']})"
    )
    gate.unlink()
    assert survivor.wait(patient(RUN_TIMEOUT + 4 * SLOW_STOP_S)) == 0, run.report()
    assert_no_step_lost_or_repeated(run)
