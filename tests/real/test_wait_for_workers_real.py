"""``training/wait_for_workers.py`` (an MPI launcher's init container) as a real process against TCP listeners on
127.0.0.1 that open late, a port nothing listens on, and a name that does not resolve. tests/real/test_mpi_sshd_real.py
runs it before a real launcher against real sshd."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from stacks.ports import free_port
from tests import training_support as ts
from tests.wait import patient

WAIT_PY = ts.TRAINING_DIR / "wait_for_workers.py"
#: A name no resolver knows (RFC 6761 reserves .invalid): a worker whose pod is not ready has no DNS record yet.
MISSING = "launcher-test-worker-9.invalid"


def _argv(port: int, *hosts: str, extra: tuple[str, ...] = ()) -> list[str]:
    fast = ("--poll-seconds", "0.05", "--slow-poll-seconds", "0.05", "--connect-seconds", "1")
    return [
        sys.executable,
        str(WAIT_PY),
        "--port",
        str(port),
        *[a for h in hosts for a in ("--host", h)],
        *fast,
        *extra,
    ]


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_waits_for_a_worker_that_listens_late_and_names_when(tmp_path: Path) -> None:
    """The second address listens 1.5 s after the start: the wait ends after that, and says when each was ready."""
    port = free_port()
    early = socket.create_server(("127.0.0.1", port))
    late = socket.socket()
    opened: list[float] = []

    def open_late() -> None:
        time.sleep(1.5)
        late.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        late.bind(("127.0.0.2", port))
        opened.append(time.time())  # before listen(): the wait may connect the moment it returns
        late.listen()

    threading.Thread(target=open_late, daemon=True).start()
    try:
        done = subprocess.run(
            _argv(port, "127.0.0.1", "127.0.0.2"), capture_output=True, text=True, timeout=patient(60)
        )
    finally:
        early.close()
        late.close()
    events = _events(done.stdout)
    assert done.returncode == 0, (done.stdout, done.stderr)
    ready = {e["host"]: e["time"] for e in events if e["event"] == "worker_ready"}
    # the late worker is ready once it listens (its time rounded to ms)
    assert set(ready) == {"127.0.0.1", "127.0.0.2"} and ready["127.0.0.2"] >= opened[0] - 0.001, (events, opened)
    assert events[0]["event"] == "waiting" and events[-1]["event"] == "all_ready", events


def test_a_worker_that_resolves_but_refuses_fails_the_wait_naming_the_port(tmp_path: Path) -> None:
    """Nothing listens on the port of a host that resolves: after ``--refused-seconds`` the wait fails (exit 1), so
    the launcher's retries end the job instead of waiting for ever."""
    port = free_port()
    done = subprocess.run(
        _argv(port, "127.0.0.1", extra=("--refused-seconds", "0.5")),
        capture_output=True,
        text=True,
        timeout=patient(60),
    )
    events = _events(done.stdout)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert events[-1]["event"] == "worker_refused" and f"port {port}" in events[-1]["text"], events


def test_a_worker_not_there_yet_is_waited_for_and_sigterm_stops_the_wait(tmp_path: Path) -> None:
    """A name that does not resolve is not a refusal: the wait goes on past ``--refused-seconds``; SIGTERM (the pod
    deleted, the job suspended) ends it at once with 143."""
    argv = _argv(free_port(), MISSING, extra=("--refused-seconds", "0.2", "--report-seconds", "0.2"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(patient(1.5))
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=patient(30))
    finally:
        if proc.poll() is None:
            proc.kill()
    events = _events(out)
    assert proc.returncode == 143, (out, err)
    assert [e["event"] for e in events][-1] == "stopped", events
    waiting = [e for e in events if e["event"] == "waiting" and isinstance(e["hosts"], dict)]
    assert waiting and MISSING in waiting[-1]["hosts"], events


def test_usage_errors_exit_2() -> None:
    done = subprocess.run([sys.executable, str(WAIT_PY), "--port", "0", "--host", "a"], capture_output=True, text=True)
    assert done.returncode == 2 and "not a TCP port" in done.stderr
