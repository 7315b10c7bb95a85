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
        if self.child is not None and self.stop_signal is not None and not self.forwarded:
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

    def run(self, command: list[str], gave_up: Callable[[], bool] | None = None, grace_s: float = 0.0) -> int:
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

    def _wait(self, child: subprocess.Popen[bytes], gave_up: Callable[[], bool] | None, grace_s: float) -> int:
        """Wait for the child. Once ``gave_up`` has been true for ``grace_s``, send it SIGTERM (once, as
        :meth:`_forward` would): the pod then ends with the run's failure, not after torchrun has waited for the
        other nodes at its exit barrier (300 s when a node's workers, started after FAILED, exited at once)."""
        if gave_up is None:
            return child.wait()
        seen: float | None = None
        while True:
            try:
                return child.wait(timeout=GAVE_UP_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            if seen is None and gave_up():
                seen = time.monotonic()
            if seen is not None and not self.forwarded and time.monotonic() - seen >= grace_s:
                log("run_gave_up", text="the run gave up (FAILED) and the command still runs: stopping it")
                self.forwarded = True
                try:
                    os.kill(child.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

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
