"""The launcher's log: one JSON object a line on stdout, between the command's forwarded lines; and its error."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

#: One line at a time on stdout: the launcher's own lines and the command's, which it forwards.
STDOUT_LOCK = threading.Lock()


def log(event: str, at: float | None = None, **fields: Any) -> None:
    """Print one JSON object (``{"event": ..., "component": "launch", ...}``) on stdout; ``at``: its time (default
    now)."""
    record = {"event": event, "component": "launch", "time": round(time.time() if at is None else at, 3), **fields}
    with STDOUT_LOCK:
        print(json.dumps(record, default=str), flush=True)


class LaunchError(Exception):
    """The launch cannot go on: etcd unreachable or refusing, a marker or a stored state unreadable, python-etcd or
    torch missing (exit code 1)."""
