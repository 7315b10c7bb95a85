"""Wait until other jobs of the namespace have completed: the init container of a job with ``after``.

Usage::

    python /app/wait_for_jobs.py --namespace NS --job jobs/train [--job mpijobs/bench ...]

Polls the Kubernetes API with the pod's service account (whose Role may only ``get`` those jobs) until
every job reports success: a ``batch/v1`` Job the condition ``Complete``, a ``kubeflow.org/v2beta1``
MPIJob the condition ``Succeeded``. A job that does not exist yet is waited for. Exit codes: 0 all
completed, 3 one of them failed (the job that waits cannot run: its pod failure policy fails it at
once), 1 the API could not be asked within ``--timeout-seconds``, 2 usage error, 143 stopped (SIGTERM).
Every line on stdout is one JSON object. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
from typing import Any

from kube_api import RESOURCES, Api, add_api_arguments  # beside this script in the image (/app)

EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, EXIT_PREDECESSOR_FAILED, EXIT_STOPPED = 0, 1, 2, 3, 143


def log(event: str, **fields: Any) -> None:
    """One JSON object on stdout."""
    print(
        json.dumps({"event": event, "component": "wait_for_jobs", "time": round(time.time(), 3), **fields}), flush=True
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument(
        "--job",
        action="append",
        required=True,
        metavar="RESOURCE/NAME",
        help="a job to wait for: jobs/NAME (batch/v1 Job) or mpijobs/NAME (MPIJob); repeatable",
    )
    parser.add_argument("--poll-seconds", type=float, default=20.0)
    parser.add_argument(
        "--timeout-seconds",
        type=float,
        default=0.0,
        help="give up after this long without an answer from the API (0: never)",
    )
    add_api_arguments(parser)
    args = parser.parse_args(argv)
    for job in args.job:
        resource, _, name = job.partition("/")
        if resource not in RESOURCES or not name:
            parser.error(f"--job {job!r}: use jobs/NAME or mpijobs/NAME")
    if args.poll_seconds <= 0:
        parser.error("--poll-seconds must be > 0")
    return args


def stop(signum: int, _frame: Any) -> None:
    """SIGTERM (the pod deleted, the job suspended): end at once, as the kubelet asks. ``os._exit``, not an exception:
    a handler that runs inside a finalizer (closing an HTTP error's response) would have its exception ignored."""
    log("stopped", signal=signum)
    os._exit(EXIT_STOPPED)


def job_state(obj: dict[str, Any], success: str) -> str:
    """``succeeded``, ``failed`` or ``running`` from an object's status conditions."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") == success:
            return "succeeded"
        if cond.get("status") == "True" and cond.get("type") == "Failed":
            return "failed"
    return "running"


def main(argv: list[str] | None = None) -> int:
    """Wait; returns the exit code."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    signal.signal(signal.SIGTERM, stop)
    api = Api.from_args(args)
    pending = list(dict.fromkeys(args.job))
    last_answer = time.monotonic()
    log("waiting", jobs=pending, namespace=args.namespace)
    while pending:
        for job in list(pending):
            resource, _, name = job.partition("/")
            path, success, _ = RESOURCES[resource]
            try:
                obj = api.get(path.format(ns=args.namespace, name=name))
            except (urllib.error.URLError, OSError, ValueError) as exc:
                log("api_error", job=job, error=str(exc))
                if args.timeout_seconds and time.monotonic() - last_answer > args.timeout_seconds:
                    log("gave_up", job=job, after_seconds=args.timeout_seconds)
                    return EXIT_UNREACHABLE
                continue
            last_answer = time.monotonic()
            state = "missing" if obj is None else job_state(obj, success)
            if state == "succeeded":
                log("completed", job=job)
                pending.remove(job)
            elif state == "failed":
                log("predecessor_failed", job=job, text=f"{job} failed; this job cannot run")
                return EXIT_PREDECESSOR_FAILED
        if pending:
            time.sleep(args.poll_seconds)
    log("all_completed", jobs=args.job)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
