"""Container entrypoint of a training pod: skip a finished run, reopen a closed rendezvous, run torchrun.

It forwards the pod's stop signal to torchrun, records ``DIR/DONE`` and the goodput (:mod:`goodput`) when the command
exits 0, and prints one JSON object a line. Usage and design: "The pod's launcher" in docs/explanation/failures.md.

Exit codes (the pod's):

* 0 -- the run is complete: the command exited 0, or ``DIR/DONE`` exists, whatever the command returned;
* 143 (:data:`EXIT_STOPPED`) -- a stop signal arrived before the run completed (podFailurePolicy: Ignore);
* 3 (:data:`EXIT_RUN_FAILED`) -- ``DIR/FAILED`` exists: the run gave up (podFailurePolicy: FailJob);
* 69 (:data:`EXIT_RENDEZVOUS_LOST`) -- the command failed and etcd is unreachable right after: the rendezvous went
  with etcd (rescheduled, its node drained); the next pod waits for etcd, fails (1) if it stays away (Ignore);
* 2 -- usage error (FailJob); 127 -- the command could not be started; 1 -- etcd unreachable within
  ``--etcd-wait-seconds``, ``DIR/DONE`` or ``DIR/FAILED`` unreadable (an I/O error: whether the run is over is
  unknown), or no torch to encode a new state;
* otherwise the command's own exit code (128 + N if it died of signal N)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import goodput  # noqa: E402  (needs the sys.path entry above)
import metrics  # noqa: E402
from launch_args import LaunchArgs, UsageError, build_parser, parse_args, torchrun_part  # noqa: E402
from launch_log import LaunchError, log  # noqa: E402
from launch_markers import failed_now, read_done, read_failed, record_done  # noqa: E402
from launch_supervisor import StopRequested, Supervisor  # noqa: E402
from rendezvous_etcd import etcd_reachable, reset_closed_rendezvous  # noqa: E402

#: Beside this file: a job's command runs its script through it (``torchrun ... run_script.py SCRIPT``), which ends
#: the process without the interpreter's finalisation, where torch's threads can abort a finished rank.
RUN_SCRIPT = "run_script.py"

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_RUN_FAILED = 3
#: torchrun failed while etcd was unreachable: the rendezvous was lost with it (etcd rescheduled,
#: its node drained).  Not the run's fault; a replacement pod waits for etcd (``--etcd-wait-seconds``)
#: and exits 1 if it does not come back.  (EX_UNAVAILABLE.)
EXIT_RENDEZVOUS_LOST = 69
EXIT_EXEC_FAILED = 127
EXIT_STOPPED = 143


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the pod's exit code."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        log("usage_error", error=str(exc))
        print(f"{build_parser().format_usage().rstrip()}\nlaunch.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    launched_at = time.time()
    supervisor = Supervisor()
    supervisor.install()
    log_start(args, launched_at)
    try:
        early = finished_run_code(args)
        if early is None:
            early = reopen_rendezvous(args, supervisor)
        if early is not None:
            return early
        command_code = run_command(args, supervisor, launched_at)
    except LaunchError as exc:
        log("launch_failed", error=str(exc))
        print(f"launch.py: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except StopRequested as exc:
        log("stopped_before_start", signal=str(exc), text="stop signal before torchrun was started")
        return EXIT_STOPPED
    except OSError as exc:
        log("exec_failed", command=args.command, error=repr(exc))
        return EXIT_EXEC_FAILED
    try:
        code = pod_exit_code(args, supervisor, command_code)
    except LaunchError as exc:  # DONE or FAILED unreadable after the command: unknown whether the run is over
        log("launch_failed", error=str(exc))
        print(f"launch.py: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if code == EXIT_OK:
        record_goodput(args)
    return code


def log_start(args: LaunchArgs, launched_at: float) -> None:
    """The first line of a pod's launcher: what it launches, at the instant the goodput ledger starts the run."""
    log(
        "launch_start",
        at=launched_at,  # the goodput ledger's "launch" record: the run's start, the same instant in both
        rdzv_backend=args.rdzv_backend,
        rdzv_id=args.rdzv_id,
        rdzv_endpoint=args.rdzv_endpoint,
        output_dir=str(args.output_dir),
        pid=os.getpid(),
    )


def finished_run_code(args: LaunchArgs) -> int | None:
    """The pod's exit code when the output folder says the run is over (``DONE``: 0, ``FAILED``: 3), else None."""
    done = read_done(args.output_dir)
    if done is not None:
        log(
            "already_complete",
            output_dir=str(args.output_dir),
            done=done,
            text="run already complete (DONE exists); not starting torchrun",
        )
        return EXIT_OK
    failed = read_failed(args.output_dir)
    if failed is not None:
        log(
            "run_failed",
            output_dir=str(args.output_dir),
            failed=failed,
            text="the run gave up (FAILED exists); not starting torchrun; delete FAILED to retry",
        )
        return EXIT_RUN_FAILED
    return None


def reopen_rendezvous(args: LaunchArgs, supervisor: Supervisor) -> int | None:
    """Reset a closed etcd-v2 rendezvous (c10d keeps none); 0 when the run turned out to be complete, else None."""
    if args.rdzv_backend == "etcd-v2":
        if reset_closed_rendezvous(args, supervisor):
            return EXIT_OK
    else:
        log(
            "rendezvous_no_reset",
            rdzv_backend=args.rdzv_backend,
            text="c10d keeps its store in node 0's agent; nothing persistent to reset",
        )
    return None


def run_command(args: LaunchArgs, supervisor: Supervisor, launched_at: float) -> int:
    """Run the command under the supervisor, its output read into this pod's goodput ledger; its exit code."""
    ledger = goodput.Ledger(args.output_dir, goodput.source_name())
    ledger.record("launch", at=launched_at)
    supervisor.watcher = goodput.LineWatcher(ledger, os.environ.get(goodput.STEP_PATTERN_ENV) or None)
    command_code = supervisor.run(
        args.command, gave_up=lambda: failed_now(args.output_dir), grace_s=args.gave_up_grace_seconds
    )
    # whether the run gave up (its FAILED file): an exit 0 then ends no attempt as done; whether a stop signal came
    # (a drain): the attempt then ended in an orderly stop, not a failure (goodput's accounting)
    failed = read_failed(args.output_dir) is not None
    ledger.record(
        "exit", command_code=command_code, failed=failed, stop_signal=supervisor.stop_name, stop_at=supervisor.stop_at
    )
    if not ledger.close():
        log(
            "goodput_not_recorded",
            path=str(ledger.path),
            error=ledger.error,
            text="the goodput ledger could not be written; the job's accounting misses this pod",
        )
    return command_code


def pod_exit_code(args: LaunchArgs, supervisor: Supervisor, command_code: int) -> int:
    """The pod's exit code once the command ended (see the module docstring)."""
    done = read_done(args.output_dir)
    failed = read_failed(args.output_dir)
    stop = supervisor.stop_name
    if done is not None:
        code, outcome = EXIT_OK, "complete"
    elif failed is not None:
        code, outcome = EXIT_RUN_FAILED, "run_failed"
    elif command_code == 0:
        # torchrun exits 0 only when every worker did (after a stop signal it exits 1): the program finished
        done = record_done(args.output_dir, command_code)
        code, outcome = EXIT_OK, "complete"
    elif stop is not None:
        code, outcome = EXIT_STOPPED, "stopped"
    elif args.rdzv_backend == "etcd-v2" and not etcd_reachable(args):
        code, outcome = EXIT_RENDEZVOUS_LOST, "rendezvous_lost"
    else:
        code, outcome = command_code, "command_failed"
    log(
        "command_exit",
        command_code=command_code,
        exit_code=code,
        outcome=outcome,
        stop_signal=stop,
        seconds_since_stop_signal=round(time.time() - supervisor.stop_at, 3) if supervisor.stop_at else None,
        failed=failed,
        done=done,
    )
    return code


def record_goodput(args: LaunchArgs) -> dict[str, Any] | None:
    """The run is complete: account every pod's ledger (:func:`goodput.account`), add the result to the run's
    ``metrics.json`` (written for a program that wrote none) and log it. Every pod's launcher does it when the run
    completes; the last one has read the most complete ledger. Returns the fields added (None if not written)."""
    try:
        accounting = goodput.account(goodput.read_ledgers(args.output_dir))
        fields = goodput.metrics_fields(accounting)
        path = args.output_dir / metrics.FILE_NAME
        try:
            existing = json.loads(path.read_text())
        except (OSError, ValueError):
            existing = None
        base = dict(existing) if isinstance(existing, dict) else {}
        base.pop("schema", None)
        program = str(base.pop("program", None) or program_name(args.command))
        base.setdefault("wall_time_s", accounting["wall_s"])
        metrics.write_metrics(path, program, **{**base, **fields})
    except OSError as exc:
        log("goodput_not_recorded", output_dir=str(args.output_dir), error=repr(exc))
        return None
    log("goodput", **fields)
    return fields


def program_name(command: Sequence[str]) -> str:
    """The program a command runs: its script (the first ``*.py`` after torchrun's options, the one after
    :data:`RUN_SCRIPT` when the command runs it through that), else its first word."""
    rest = command[len(torchrun_part(command)) :]
    if len(rest) > 1 and Path(rest[0]).name == RUN_SCRIPT:
        rest = rest[1:]
    return Path(rest[0]).name if rest else Path(command[0]).name


if __name__ == "__main__":
    sys.exit(main())
