"""The machine's processes and locks the boxes share: whether a process runs, its stop, the machine-wide locks."""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from stacks.box import build as box_build


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (exists and is no zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def terminate(process: Optional["subprocess.Popen[bytes]"], grace_s: float = 15.0) -> None:
    """Stop a child process that still runs: SIGTERM, SIGKILL after ``grace_s``; reaped either way."""
    if process and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_process(pid_file: Path, grace_s: float) -> None:
    """Stop the process whose pid ``pid_file`` holds: SIGTERM once (a Kubernetes server shuts down gracefully on the
    first and exits at once on a second, k8s.io/apiserver ``pkg/server/signal.go``), SIGKILL after ``grace_s``; then
    remove the file."""
    pid = int(pid_file.read_text().strip())
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        while process_alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = math.inf
            time.sleep(0.1)
    pid_file.unlink()


def host_lock_path(name: str) -> Path:
    """The file of the machine-wide lock ``name`` (:func:`host_lock`), beside the binaries."""
    folder = box_build.cache_root() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.lock"


@contextmanager
def host_lock(name: str) -> Iterator[None]:
    """Hold the machine-wide lock ``name`` (every box of every process on this machine agrees through it)."""
    with open(host_lock_path(name), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
