"""DataLoader workers started while a stop signal arrives (real processes, the real torch DataLoader).

torchrun stops a worker group by signalling each worker's whole process group, DataLoader workers included. A worker
is forked, installs PyTorch's SIGTERM handler (which re-raises the signal with the default action), and only then runs
the trainer's ``worker_init_fn``, which ignores the stop signals. A signal in between killed the worker and the trainer
failed instead of checkpointing: CI saw it when a replacement pod joined just as an epoch's new loader started.
``train_stop.start_loader`` forks the workers with the signals blocked. The test widens the window to seconds (see
tests/programs/loader_stop_race.py) and signals the process group inside it, from another process as torchrun does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.wait import patient

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "loader_stop_race.py"


def run_with_stop(*flags: str) -> dict[str, object]:
    """Start the program, SIGTERM its process group once its workers are starting, return its last line."""
    window = round(patient(3.0), 1)  # the workers sleep in it; a loaded machine needs longer to signal within it
    proc = subprocess.Popen(
        [sys.executable, str(PROGRAM), "--window", f"{window:.1f}", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    assert first["event"] == "workers_starting"
    os.killpg(proc.pid, signal.SIGTERM)  # well inside the window
    sent = time.time()
    out, err = proc.communicate(timeout=patient(120))
    assert sent - first["time"] < window, "the signal came after the window: the test proved nothing"
    assert out.strip(), f"the program printed nothing after its workers started (exit {proc.returncode}): {err[-2000:]}"
    last = json.loads(out.strip().splitlines()[-1])
    last["returncode"] = proc.returncode
    last["stderr"] = err[-2000:]
    return last


def test_workers_started_with_the_trainers_loader_survive_a_stop_signal_and_serve_every_batch() -> None:
    served = run_with_stop()
    assert served["returncode"] == 0 and served["error"] is None, served
    assert served["batches"] == 8 and served["stop_requested"] is True, served


def test_workers_started_as_the_job_contract_shows_survive_a_stop_signal_and_serve_every_batch() -> None:
    """The job contract's example for a script of one's own (docs/reference/job-contract.md), run as written."""
    served = run_with_stop("--snippet")
    assert served["returncode"] == 0 and served["error"] is None, served
    assert served["batches"] == 64 and served["stop_requested"] is True, served


def test_the_control_workers_started_plainly_die_of_the_same_signal() -> None:
    """Without the blocked start, the same signal kills the workers: the window is real and the test reaches it."""
    served = run_with_stop("--plain")
    assert served["returncode"] == 1 and "DataLoader worker" in str(served["error"]), served
