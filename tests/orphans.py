"""Processes a killed test run left running, stopped when the next run starts.

A run that is killed (a CI timeout, a second Ctrl-C) never reaches its teardowns: its boxes' servers (kwokctl starts
them in sessions of their own), etcd, torchrun and Kueue go on using the cores. Each run tags every process it starts
through the environment (:data:`RUN_ENV`: the controller's pid and start time); the next run stops every process of
this user whose tag names a run that is no longer alive, and says so (Linux's ``/proc``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

#: The environment variable that tags a test run's processes: ``<pid>:<start time>`` of its pytest controller.
RUN_ENV = "EKS_TRAINING_TEST_RUN"
PROC = Path("/proc")


def start_time(pid: int, proc: Path = PROC) -> str | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat`` field 22), ``None`` if it is gone;
    with the pid, it names one process even after the pid is reused."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # the fields after the command's name start at field 3


def this_run() -> str:
    """The tag of the run this process controls."""
    return f"{os.getpid()}:{start_time(os.getpid())}"


def alive(tag: str, proc: Path = PROC) -> bool:
    """The run ``tag`` names is still running."""
    pid, _, started = tag.partition(":")
    return pid.isdigit() and start_time(int(pid), proc) == started


def _tag(pid: int, proc: Path) -> str | None:
    """The run tag in the environment of process ``pid`` (another user's process, or one gone: ``None``)."""
    try:
        if (proc / str(pid)).stat().st_uid != os.getuid():
            return None
        environ = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = f"{RUN_ENV}=".encode()
    return next((v[len(prefix) :].decode() for v in environ.split(b"\0") if v.startswith(prefix)), None)


def orphans(proc: Path = PROC) -> dict[int, str]:
    """Pid -> command of every process of this user tagged by a run that is no longer alive."""
    found: dict[int, str] = {}
    dead: dict[str, bool] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        tag = _tag(int(entry.name), proc)
        if tag is None or not dead.setdefault(tag, not alive(tag, proc)):
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found[int(entry.name)] = command
    return found


def stop(pids: list[int], grace_s: float = 5.0) -> None:
    """SIGTERM to each of ``pids``, SIGKILL to those still there after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(_running(p) for p in pids):
            time.sleep(0.1)


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop_orphans() -> list[str]:
    """Stop what killed runs left (:func:`orphans`); their commands, shortened, for the run's report."""
    found = orphans()
    stop(list(found))
    return [command[:120] for command in found.values()]
