"""Operators a rehearsal leaves running with its box (``python -m stacks.rehearse --keep``), stopped by their pids.

The MPI Operator and Kueue run out of cluster as processes of the rehearsal. When the box is kept for the user to
inspect, they keep running (Kueue's webhooks must answer, or the apiserver refuses every Job and MPIJob), and their
pids and binaries are written to ``<box>/operators.json``; ``python -m stacks.box down`` stops each of them by its pid
(only when the pid still runs that binary: a pid can be reused) and waits until it is gone, then brings the box down.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from stacks.box.cluster import Box, BoxError

if TYPE_CHECKING:
    from stacks.box.rehearse import Rehearsal

FILE = "operators.json"


def record(box: Box, rehearsal: "Rehearsal") -> list[dict[str, object]]:
    """Write the rehearsal's running operators (name, pid, binary) to the box's folder; returns them."""
    processes = {"mpi-operator": rehearsal.operator, "kueue": rehearsal.kueue.process if rehearsal.kueue else None}
    running: list[dict[str, object]] = []
    for name, process in processes.items():
        if process is not None and process.poll() is None:
            running.append({"name": name, "pid": process.pid, "binary": os.readlink(f"/proc/{process.pid}/exe")})
    (box.home / FILE).write_text(json.dumps(running, indent=1))
    return running


def _runs(pid: int, binary: str) -> bool:
    """Whether ``pid`` is a live (not zombie) process of ``binary``."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return state != "Z" and Path(exe.removesuffix(" (deleted)")) == Path(binary).resolve()


def stop_recorded(box: Box, timeout_s: float = 15.0) -> list[str]:
    """Stop the operators :func:`record` wrote for ``box`` (SIGTERM, then SIGKILL after ``timeout_s``), each waited
    for; returns the names of those that were running."""
    path = box.home / FILE
    if not path.is_file():
        return []
    stopped = []
    for op in json.loads(path.read_text()):
        pid, binary = int(op["pid"]), str(op["binary"])
        if not _runs(pid, binary):
            continue
        for sig in (signal.SIGTERM, signal.SIGKILL):
            os.kill(pid, sig)
            deadline = time.monotonic() + timeout_s
            while _runs(pid, binary) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not _runs(pid, binary):
                break
        else:
            raise BoxError(f"{op['name']} (pid {pid}) did not stop after SIGKILL")
        stopped.append(str(op["name"]))
    path.unlink()
    return stopped
