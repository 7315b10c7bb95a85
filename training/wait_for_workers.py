"""Wait until every worker of an MPI job accepts connections: the init container of the job's launcher.

Usage::

    python /app/wait_for_workers.py --port 2222 --host HOST [--host HOST ...]

``mpirun`` reaches the workers over ssh as soon as it starts, so the launcher must not start before their sshd
listens. Each host's name is resolved again at every try (its DNS record appears once its pod is ready). A worker
not there yet is waited for (Kueue evicts a job whose pods are not all running in time); one whose name resolves but
that refuses connections for ``--refused-seconds`` listens on another port, and the wait fails. Every line on stdout
is one JSON object. Exit codes: 0 every worker accepted a connection, 1 a worker refused, 2 usage error, 143
stopped (SIGTERM). Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from typing import Any

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_STOPPED = 0, 1, 2, 143
#: After this long, the tries come every ``--slow-poll-seconds`` (each try of a name not there yet is a few DNS
#: queries, through the pod's search list).
FAST_POLL_S = 60.0


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
    parser.add_argument("--poll-seconds", type=float, default=2.0, help="time between two tries, the first minute")
    parser.add_argument("--slow-poll-seconds", type=float, default=10.0, help="time between two tries, later")
    parser.add_argument(
        "--refused-seconds", type=float, default=120.0, help="how long a resolved worker may refuse connections"
    )
    parser.add_argument("--connect-seconds", type=float, default=3.0, help="how long one connection attempt may take")
    parser.add_argument("--report-seconds", type=float, default=30.0, help="time between two 'waiting' lines")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port {args.port}: not a TCP port")
    for name in ("poll_seconds", "slow_poll_seconds", "refused_seconds", "connect_seconds", "report_seconds"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    return args


def reachable(host: str, port: int, timeout_s: float) -> tuple[str, bool]:
    """(``""`` when ``host`` accepts a TCP connection on ``port`` now, else why not; whether it refused it)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return "", False
    except ConnectionRefusedError as exc:  # resolved, nothing listens there
        return f"{type(exc).__name__}: {exc}", True
    except OSError as exc:  # socket.gaierror (no DNS record yet), timed out, unreachable
        return f"{type(exc).__name__}: {exc}", False


def stop(signum: int, _frame: Any) -> None:
    """SIGTERM (the pod deleted, the job suspended): end at once with :data:`EXIT_STOPPED`, as the kubelet asks."""
    log("stopped", signal=signum)
    os._exit(EXIT_STOPPED)


def main(argv: list[str] | None = None) -> int:
    """Wait; returns the exit code."""
    signal.signal(signal.SIGTERM, stop)
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    return wait(args)


def wait(args: argparse.Namespace) -> int:
    """Try every host until each accepted a connection or one refused for too long."""
    started = time.monotonic()
    pending: dict[str, str] = dict.fromkeys(dict.fromkeys(args.host), "not tried")
    refused_since: dict[str, float] = {}
    log("waiting", hosts=list(pending), port=args.port)
    reported = started
    while pending:
        for host in list(pending):
            why, refused = reachable(host, args.port, args.connect_seconds)
            now = time.monotonic()
            if not why:
                del pending[host]
                log("worker_ready", host=host, after_seconds=round(now - started, 1))
                continue
            pending[host] = why
            since = refused_since.setdefault(host, now) if refused else refused_since.pop(host, now)
            if refused and now - since >= args.refused_seconds:
                log(
                    "worker_refused",
                    host=host,
                    port=args.port,
                    after_seconds=round(now - since, 1),
                    text=f"{host} is up but nothing listens on port {args.port}: is that the workers' sshd port?",
                )
                return EXIT_REFUSED
        if not pending:
            break
        if time.monotonic() - reported >= args.report_seconds:
            reported = time.monotonic()
            log("waiting", hosts=pending, after_seconds=round(reported - started, 1))
        slow = time.monotonic() - started >= FAST_POLL_S
        time.sleep(args.slow_poll_seconds if slow else args.poll_seconds)
    log("all_ready", hosts=args.host, after_seconds=round(time.monotonic() - started, 1))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
