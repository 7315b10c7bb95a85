"""The local processes standing in for a job's pods: what each one is (:class:`Pod`), the environment it starts
with, and how it is stopped, as the kubelet stops a pod's containers."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from components.workloads.waits import KUBERNETES_GRACE_S


@dataclass
class Pod:
    """One local process standing in for a pod."""

    job: str
    index: int
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log: Path
    bin_dir: Optional[Path] = None
    """The folder first on the process's ``PATH`` (its ``python``): the image's virtualenv (default: this Python's)."""
    grace_s: float = KUBERNETES_GRACE_S
    """The seconds it gets to exit once stopped, as its pod would: the job's ``stopGracePeriodSeconds`` (a dataset's
    staging: Kubernetes' default)."""
    process: Optional[subprocess.Popen[bytes]] = None


#: What the images set for every process (``ENV`` in the Dockerfiles): output unbuffered, so a pod's log shows each
#: line at once.
IMAGE_ENV = {"PYTHONUNBUFFERED": "1"}

#: This machine's variables a pod's processes do not get, as a pod has its image's environment: the shell's
#: ``PYTHONPATH`` (the tutorials export this project's folder) would import locally what the image lacks.
NOT_IN_PODS = ("PYTHONPATH",)


#: ``torchrun`` is torch's console script for ``python -m torch.distributed.run`` (``[project.scripts]`` of torch's
#: packaging); a Python that has torch without the script (a virtualenv reusing another's packages) gets this stand-in.
TORCHRUN_SHIM = '#!/bin/sh\nexec python -m torch.distributed.run "$@"\n'


def process_env(pod: Pod) -> dict[str, str]:
    """The environment ``pod``'s process starts with here: this machine's (less :data:`NOT_IN_PODS`), the images'
    :data:`IMAGE_ENV`, the pod's own, and its ``bin_dir`` (default: this Python's ``bin`` folder) first on ``PATH``:
    it stands for the image's virtual environment, where ``python`` and ``torchrun`` are found (``torchrun`` from
    :data:`TORCHRUN_SHIM`, after the folder's own, when the folder lacks it)."""
    bin_dir = pod.bin_dir or Path(sys.executable).parent
    path = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    if not (bin_dir / "torchrun").exists():
        shim = Path(pod.env.get("HOME") or pod.log.parent) / ".torchrun-shim"
        shim.mkdir(parents=True, exist_ok=True)
        script = shim / "torchrun"
        if not script.exists():
            script.write_text(TORCHRUN_SHIM)
            script.chmod(0o755)
        path = f"{bin_dir}:{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    machine = {k: v for k, v in os.environ.items() if k not in NOT_IN_PODS}
    return {**machine, **IMAGE_ENV, **pod.env, "PATH": path}


def stop(processes: Sequence[Optional["subprocess.Popen[bytes]"]], grace_s: float = 10.0) -> None:
    """Stop pods' processes as the kubelet stops their containers: SIGTERM each one's group, all at once, then, once
    ``grace_s`` is over (or at a second Ctrl-C meanwhile), SIGKILL what runs on: each group and every process it had
    started, in sessions of their own too (the launcher's torchrun and its workers)."""
    running = [p for p in processes if p is not None and p.poll() is None]
    started: dict[int, dict[int, Optional[int]]] = {}  # a process -> what it started: their sessions
    try:
        for p in running:
            started[p.pid] = {pid: _session(pid) for pid in descendants(p.pid)}
            _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in running:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        _kill(running, started)


def _kill(running: Sequence["subprocess.Popen[bytes]"], started: Mapping[int, Mapping[int, Optional[int]]]) -> None:
    """SIGKILL the groups of ``running`` and the processes they had started (``started``: each one's session then;
    one in another session now is a new process that took its pid), then reap them. A Ctrl-C meanwhile waits until
    they are gone: a process in a session of its own would outlive the runner."""
    interrupted = False
    while True:
        try:
            for p in running:
                if p.poll() is None:
                    _signal_group(p.pid, signal.SIGKILL)
                for pid, session in started.get(p.pid, {}).items():
                    if session is not None and _session(pid) == session:
                        _signal(pid, signal.SIGKILL)
            for p in running:
                p.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt


def _session(pid: int) -> Optional[int]:
    """The session of process ``pid``, or ``None`` once it is gone."""
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs, now (``ps``, on Linux and macOS alike); none where ``ps`` fails."""
    try:
        listing = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    children: dict[int, list[int]] = {}
    for line in listing.stdout.splitlines():
        fields = line.split()
        if len(fields) == 2 and all(f.isdigit() for f in fields):
            children.setdefault(int(fields[1]), []).append(int(fields[0]))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


__all__ = ["IMAGE_ENV", "TORCHRUN_SHIM", "Pod", "descendants", "process_env", "stop"]
