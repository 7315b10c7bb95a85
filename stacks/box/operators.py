"""The operators a rehearsal runs out of cluster (:class:`Operators`), and those it leaves running with its box
(``python -m stacks.rehearse --keep``), stopped by their pids.

The MPI Operator and Kueue run out of cluster as processes of the rehearsal. When the box is kept for the user to
inspect, they keep running (Kueue's webhooks must answer, or the apiserver refuses every Job and MPIJob), and their
pids and binaries are written to ``<box>/operators.json``; ``python -m stacks.box down`` stops each of them by its pid
(only when the pid still runs that binary: a pid can be reused) and waits until it is gone, then brings the box down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping, Optional

from stacks.box.api import BoxError
from stacks.box.build import SUFFIXES
from stacks.box.cluster import Box
from stacks.box.kueue import Kueue
from stacks.box.processes import terminate
from stacks.box.steps import RehearsalError, Step

FILE = "operators.json"


class Operators:
    """The MPI Operator and Kueue's manager, run by a rehearsal as processes beside its box."""

    def __init__(
        self, box: Box, log_dir: Path, note: Callable[[str], None], host_waited: Callable[[float], None]
    ) -> None:
        self.box, self.log_dir, self.note = box, log_dir, note
        #: Called with the seconds the machine, not the cluster, held the rehearsal (Kueue's start).
        self.host_waited = host_waited
        self.operator: Optional[subprocess.Popen[bytes]] = None
        self.restarts = 0
        self.kueue: Optional[Kueue] = None
        #: Seconds Kueue took to start (its webhooks serving and registered).
        self.kueue_start_s: Optional[float] = None

    def check_operator(self, binary: Path) -> None:
        """The operator's Deployment restarts its pod when it exits; so does the box (at most 5 times). A component
        of the box's control plane that exited ends the rehearsal at once, naming it (nothing would move again)."""
        gone = self.box.exited()
        if gone:
            raise RehearsalError(self.box.exit_report(gone))
        if self.operator is None or self.operator.poll() is None:
            return
        self.restarts += 1
        tail = (self.log_dir / "mpi-operator.log").read_text(errors="replace")[-600:]
        if self.restarts > 5:
            raise RehearsalError(f"the MPI Operator exited {self.restarts} times; its log ends:\n{tail}")
        self.note(f"the MPI Operator exited ({self.operator.returncode}); restarting it: ...{tail[-200:]}")
        self.start_operator(binary)

    def start_operator(self, binary: Path) -> None:
        """The MPI Operator, out of cluster: the release's controller without the health check server on its fixed
        port (``box/mpi-operator/main.go``), so every box runs its own at once."""
        with open(self.log_dir / "mpi-operator.log", "ab") as log:
            self.operator = subprocess.Popen(
                [
                    str(binary),
                    "-kubeConfig",
                    str(self.box.kubeconfig),
                    "--kube-api-qps",
                    "100",
                    "--kube-api-burst",
                    "200",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.note(f"started the MPI Operator (pid {self.operator.pid}, out of cluster)")

    def start_kueue(self, binaries: Mapping[str, Path], step: Step) -> None:
        """Kueue's release: its CRDs are applied; the manager starts once they are Established (once per box)."""
        binary = binaries["kueue" + SUFFIXES.get(step.kueue_module, "")]
        assert step.kueue is not None
        kueue = Kueue(
            self.box, binary, step.kueue, log_dir=self.log_dir, feature_gates=step.kueue_gates, folder=step.kueue_module
        )
        self.kueue_start_s = kueue.start()
        self.kueue = kueue
        # A real cluster starts Kueue's pod in seconds, within its release's wait; the box's start is its own work.
        self.host_waited(self.kueue_start_s)
        self.note(
            f"started Kueue (pid {kueue.process.pid if kueue.process else '?'}, out of cluster) in "
            f"{self.kueue_start_s:.1f} s"
        )

    def stop_operator(self) -> None:
        """Stop the operators the box runs (the MPI Operator, Kueue)."""
        if self.kueue is not None:
            self.kueue.stop()
        terminate(self.operator)


def record(box: Box, operators: Operators) -> list[dict[str, object]]:
    """Write the rehearsal's running operators (name, pid, binary) to the box's folder; returns them."""
    processes = {"mpi-operator": operators.operator, "kueue": operators.kueue.process if operators.kueue else None}
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
