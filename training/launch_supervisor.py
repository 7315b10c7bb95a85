"""The command run as the launcher's child: the pod's first stop signal forwarded to it, its output to the pod's log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable

import goodput
from launch_log import STDOUT_LOCK, log
from run_script import LAUNCHER_ENV  # run_script.py's crash-loop budget applies only under it

#: Signals that ask the pod to stop (forwarded once to the command).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: How often the launcher looks whether the run gave up while the command runs (:meth:`Supervisor.run`).
GAVE_UP_POLL_S = 1.0
#: torchrun's wait for its workers after a stop when the pod does not set ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` (torch's
#: own default, ``torch.distributed.launcher.api``).
TORCH_SHUTDOWN_DEFAULT_S = 30.0
#: After the SIGTERM of a run that gave up, how long beyond torchrun's wait for its workers the launcher waits before
#: SIGKILL: the pod's grace period less that wait (components/workloads/pytorch.py ``SHUTDOWN_MARGIN_S``).
GAVE_UP_KILL_MARGIN_S = 15.0


class StopRequested(Exception):
    """A stop signal arrived before the command was started (exit code 143)."""


class Supervisor:
    """Runs the command as a child and forwards the pod's first stop signal to it.

    Signal handlers only record the signal (and forward it once the child
    exists); a stop before the child is started ends the launcher with 143.
    """

    def __init__(self, watcher: goodput.LineWatcher | None = None) -> None:
        self.watcher = watcher
        self.child: subprocess.Popen[bytes] | None = None
        self.stop_signal: int | None = None
        self.stop_at: float | None = None
        self.forwarded = False
        self._sending = False

    @property
    def stop_name(self) -> str | None:
        """The stop signal's name (``SIGTERM``), or None before one arrived."""
        return signal.Signals(self.stop_signal).name if self.stop_signal is not None else None

    def install(self) -> None:
        """Install the handlers for :data:`STOP_SIGNALS`."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal, self.stop_at = signum, time.time()
        self._forward()

    def _forward(self) -> None:
        """Send the stop signal to the child, once (a second one would cut torchrun's shutdown short)."""
        if self.child is not None and self.stop_signal is not None and not self.forwarded and not self._sending:
            self.forwarded = True
            try:
                os.kill(self.child.pid, self.stop_signal)
            except ProcessLookupError:
                pass

    def check_stop(self) -> None:
        """Raise :class:`StopRequested` if a stop signal arrived."""
        if self.stop_name is not None:
            raise StopRequested(self.stop_name)

    def sleep(self, seconds: float) -> None:
        """Sleep, but end at once (StopRequested) when a stop signal arrives."""
        deadline = time.monotonic() + seconds
        while True:
            self.check_stop()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(0.1, remaining))

    def run(self, command: list[str], gave_up: Callable[[], bool | None] | None = None, grace_s: float = 0.0) -> int:
        """Start ``command`` (own session), wait for it; return its exit code (128 + N for signal N). When ``gave_up``
        turns true while it runs (a rank wrote FAILED), the command has ``grace_s`` to end, then it is stopped as a
        pod's stop would stop it (:meth:`_wait`)."""
        self.check_stop()
        log("spawn", command=command)
        sys.stdout.flush()
        sys.stderr.flush()
        # The command's stdout comes through a pipe: every line is forwarded to the pod's log as it is and read for
        # the goodput ledger (goodput.LineWatcher). Its stderr goes to the pod's log directly.
        env = dict(os.environ, **{LAUNCHER_ENV: "1"})  # run_script.py: a FAILED it writes ends the pod here (exit 3)
        child = subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE, env=env)
        assert child.stdout is not None
        reader = threading.Thread(target=self._forward_output, args=(child.stdout,), name="command-output", daemon=True)
        reader.start()
        # A signal that arrived while the child was being started is forwarded now; signals are
        # blocked meanwhile so the handler and this code cannot both forward it.
        blocked = set(STOP_SIGNALS)
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            self.child = child
            self._forward()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        code = self._wait(child, gave_up, grace_s)
        self.child = None  # reaped: its pid may be reused, a late signal must not be sent there
        # The pipe ends when the last process holding it exits (a worker's orphan may hold it a little longer).
        reader.join(10.0)
        return 128 - code if code < 0 else code

    def _wait(self, child: subprocess.Popen[bytes], gave_up: Callable[[], bool | None] | None, grace_s: float) -> int:
        """Wait for the child. Once ``gave_up`` has been true for ``grace_s`` (and still is), stop it as the pod's
        stop would: SIGTERM, once, then SIGKILL when it outlasts the pod's grace period. The pod then ends with the
        run's failure, not after torchrun waited up to 300 s at its exit barrier for a node in the next round: on
        c10d that wait is in TCPStore's C++ code, where torchrun's signal handler does not run."""
        if gave_up is None:
            return child.wait()
        watch = _GaveUpWatch(gave_up)
        try:
            return self._wait_watched(child, watch, grace_s)
        finally:
            watch.stop()

    def _wait_watched(self, child: subprocess.Popen[bytes], watch: _GaveUpWatch, grace_s: float) -> int:
        sigterm_at: float | None = None
        while True:
            try:
                return child.wait(timeout=GAVE_UP_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if sigterm_at is None and watch.for_s(now) >= grace_s and self._send_once(child, signal.SIGTERM):
                sigterm_at = now
                log("run_gave_up", text="the run gave up (FAILED) and the command still runs: stopping it")
            elif sigterm_at is not None and now - sigterm_at >= _kill_after_s():
                log("run_gave_up_kill", text="the command outlasted its grace period after the stop: killing it")
                _kill_tree(child.pid)
                return child.wait()

    def _send_once(self, child: subprocess.Popen[bytes], sig: int) -> bool:
        """Send ``sig`` to the child unless a stop was forwarded already (then False). A pod's stop arriving
        meanwhile is recorded, not forwarded (:meth:`_forward`): this signal is its one signal."""
        self._sending = True  # a Python signal handler runs in this thread, between any two of these lines
        try:
            if self.forwarded:
                return False
            self.forwarded = True
            try:
                os.kill(child.pid, sig)
            except ProcessLookupError:
                pass
            return True
        finally:
            self._sending = False

    def _forward_output(self, stream: Any) -> None:
        """Copy the command's stdout to ours line by line, and show each line to the goodput watcher."""
        out = sys.stdout.buffer
        for raw in iter(stream.readline, b""):
            try:
                with STDOUT_LOCK:
                    out.write(raw)
                    out.flush()
            except (OSError, ValueError):
                # Our own stdout failed (EPIPE, EIO): keep draining, or the command blocks on a full pipe while it
                # holds its log lock, and a rank that cannot print stalls its whole group.
                pass
            if self.watcher is not None:
                try:
                    self.watcher.line(raw.decode("utf-8", "replace"))
                except Exception as exc:  # the accounting must never cost the job its output
                    log("goodput_line_error", error=repr(exc))


def _kill_tree(pid: int) -> None:
    """SIGKILL the command's process group and every process it started (torch's workers run in sessions of their
    own): outside a pod, where PID 1's end takes nothing with it, none is left running."""
    for p in [*_descendants(pid), pid]:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs, now, from /proc (none where there is no /proc)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])  # after the name, which may hold spaces and ")"
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_after_s() -> float:
    """How long a command stopped because the run gave up has before SIGKILL: torchrun's wait for its workers
    (``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``) and :data:`GAVE_UP_KILL_MARGIN_S`, the pod's grace period."""
    try:
        shutdown_s = float(os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", TORCH_SHUTDOWN_DEFAULT_S))
    except ValueError:
        shutdown_s = TORCH_SHUTDOWN_DEFAULT_S
    return max(shutdown_s, 0.0) + GAVE_UP_KILL_MARGIN_S


class _GaveUpWatch:
    """Looks at ``gave_up`` every :data:`GAVE_UP_POLL_S` from a thread of its own: a look at the shared volume can
    block (a stalled NFS or Lustre mount), and the main thread must stay free to forward the pod's stop."""

    def __init__(self, gave_up: Callable[[], bool | None]) -> None:
        self._gave_up = gave_up
        self._since: float | None = None
        self._stopped = threading.Event()
        threading.Thread(target=self._poll, name="gave-up-watch", daemon=True).start()

    def _poll(self) -> None:
        while not self._stopped.is_set():
            try:
                seen = self._gave_up()
            except Exception as exc:  # a look that fails says nothing; the watch goes on
                log("gave_up_look_error", error=repr(exc))
                seen = None
            if seen and self._since is None:
                self._since = time.monotonic()
            elif seen is False:
                self._since = None  # removed (a user retrying by hand): the grace starts again if it comes back
            self._stopped.wait(GAVE_UP_POLL_S)

    def stop(self) -> None:
        """Look no more (the command ended)."""
        self._stopped.set()

    def for_s(self, now: float) -> float:
        """How long the run has given up, as of the last look; -1 when it has not."""
        since = self._since
        return -1.0 if since is None else now - since
