"""Wait until every worker of an MPI job accepts connections: the init container of the job's launcher.

Usage::

    python /app/wait_for_workers.py --port 2222 --host HOST [--host HOST ...]

``mpirun`` reaches the workers over ssh as soon as it starts, so the launcher must not start before their sshd
listens. Each host's name is resolved again at every try (its DNS record appears with its pod). There is no
deadline here: the job's own deadline bounds the wait. Every line on stdout is one JSON object. Exit codes: 0 every
worker accepted a connection, 2 usage error. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from typing import Any

EXIT_OK, EXIT_USAGE = 0, 2


def log(event: str, **fields: Any) -> None:
    """One JSON object on stdout."""
    print(
        json.dumps({"event": event, "component": "wait_for_workers", "time": round(time.time(), 3), **fields}),
        flush=True,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", action="append", required=True, help="a worker's host name; repeatable")
    parser.add_argument("--port", type=int, required=True, help="the port the workers listen on (their sshd)")
    parser.add_argument("--poll-seconds", type=float, default=2.0, help="time between two tries of a host")
    parser.add_argument("--connect-seconds", type=float, default=3.0, help="how long one connection attempt may take")
    parser.add_argument("--report-seconds", type=float, default=30.0, help="time between two 'waiting' lines")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port {args.port}: not a TCP port")
    for name in ("poll_seconds", "connect_seconds", "report_seconds"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    return args


def reachable(host: str, port: int, timeout_s: float) -> str:
    """``""`` when ``host`` accepts a TCP connection on ``port`` now, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return ""
    except OSError as exc:  # socket.gaierror (no DNS record yet), refused, timed out, unreachable
        return f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    """Wait; returns the exit code."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    started = time.monotonic()
    pending: dict[str, str] = dict.fromkeys(dict.fromkeys(args.host), "not tried")
    log("waiting", hosts=list(pending), port=args.port)
    reported = started
    while pending:
        for host in list(pending):
            why = reachable(host, args.port, args.connect_seconds)
            if why:
                pending[host] = why
            else:
                del pending[host]
                log("worker_ready", host=host, after_seconds=round(time.monotonic() - started, 1))
        if not pending:
            break
        if time.monotonic() - reported >= args.report_seconds:
            reported = time.monotonic()
            log("waiting", hosts=pending, after_seconds=round(reported - started, 1))
        time.sleep(args.poll_seconds)
    log("all_ready", hosts=args.host, after_seconds=round(time.monotonic() - started, 1))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
