"""Runs a job's own Python script under torchrun as ``python SCRIPT ARGS`` would, then ends the process the way the
bundled programs end theirs (:func:`process_end.end_process`).

Every ``pytorch`` job's command puts it in front of the job's script (``torchrun ... /app/run_script.py SCRIPT
ARGS``, ``components.workloads.pytorch.RUN_SCRIPT``), so a rank that finished its work exits 0 instead of aborting in
the interpreter's finalisation, which torchrun would count as a failure. The script runs as ``__main__`` with its own
``__file__``, ``sys.argv`` and ``sys.path[0]``; then threading's exit hooks, non-daemon threads and ``atexit``
handlers run and open files and standard streams are flushed, as at a program's end. Only the rest of finalisation is
skipped. Why, and the whole list: "Your own script" in docs/explanation/programs.md. Under the launcher it also ends a
crash loop: ``MAX_FAILED_ATTEMPTS`` quick failures in a row write ``FAILED`` (:func:`end_status`;
docs/reference/job-contract.md)."""

from __future__ import annotations

import atexit
import datetime as dt
import gc
import io
import json
import os
import signal
import sys
import tempfile
import threading
import time
import tokenize
import types
from pathlib import Path

import process_end

USAGE = "usage: run_script.py SCRIPT [ARGS...]"
#: :func:`run`'s status for a script ended by Ctrl-C: the process then ends by SIGINT, as Python's does.
INTERRUPTED = -int(signal.SIGINT)
#: An attempt that fails sooner than this after it started made no progress: a crash at start, a bad argument.
QUICK_FAILURE_S = 300.0
#: The status a script exits with once it stopped in order at a step, its checkpoint written (the job contract's, the
#: bundled trainer's). Non-zero on purpose: torchrun takes a worker's 0 for "the job succeeded" (its exit barrier,
#: then the pod completes), so 0 is kept for a run that is over.
EXIT_STOPPED = 75
#: The exit statuses of a script that stopped in order, which count no failure: :data:`EXIT_STOPPED`, and 143
#: (128 + SIGTERM).
STOPPED = (EXIT_STOPPED, 128 + int(signal.SIGTERM))
#: What gloo's collectives raise when another rank's process went away (its pod stopped or crashed, which that
#: pod's own count sees): no failure of this rank's script.
PEER_LOSS = ("Connection closed by peer", "Connection reset by peer")
#: The marker a run that gave up leaves in its output folder (the launcher, launch.py, then exits 3).
FAILED_MARKER = "FAILED"
#: Set (to anything) by a program that ends its own crash loops, as the bundled trainer does (attempts in a row
#: without a new checkpoint): then no attempt of it counts here.
OWN_BUDGET_ENV = "RUN_SCRIPT_OWN_BUDGET"
#: The ``component`` of the line that says a run of the script starts (``goodput.WRAPPER``, which the launcher's
#: ledger reads): stated here, so the wrapper needs no other module of the image's than process_end.
COMPONENT = "run_script"
#: How the FAILED of arguments argparse refused begins (the local runner's report reads it).
REFUSED = "the script refused its arguments"
#: Set by the launcher (launch.py): the budget applies only where a FAILED ends the pod.
LAUNCHER_ENV = "RUN_SCRIPT_LAUNCHER"


def quick_failures_file() -> Path:
    """Where this worker's count of quick failures in a row outlives its process: the pod's ``/tmp``, one file per
    run (``TORCHELASTIC_RUN_ID``), host, torchrun agent (the parent, the same across its restarts) and local rank."""
    parts = (
        os.environ.get("TORCHELASTIC_RUN_ID", "run"),
        os.environ.get("HOSTNAME", "host"),
        str(os.getppid()),
        os.environ.get("LOCAL_RANK", "0"),
    )
    return Path(tempfile.gettempdir()) / f"run_script-{'-'.join(parts)}.quick-failures"


def read_count(state: Path) -> int:
    try:
        return int(state.read_text())
    except (OSError, ValueError):
        return 0


def write_count(state: Path, count: int) -> None:
    """Record ``count`` (a count of 0 removes the file); a file that cannot be written changes no exit status."""
    try:
        if count:
            state.write_text(str(count))
        else:
            state.unlink(missing_ok=True)
    except OSError:
        pass


def reset_after_progress(state: Path) -> threading.Timer:
    """An attempt that has run :data:`QUICK_FAILURE_S` made progress, however it ends later (a failure, or a stop
    by a signal, which no accounting here sees): the count restarts at 0 then."""
    timer = threading.Timer(QUICK_FAILURE_S, write_count, args=(state, 0))
    timer.daemon = True
    timer.start()
    return timer


#: argparse's functions on the way out of a refusal (``error`` calls ``exit``); any other of its frames parses.
ERROR_PATH = ("error", "exit")


def refused_arguments(exc: SystemExit) -> str | None:
    """argparse's message when ``exc`` is its refusal of the command line (``ArgumentParser.error`` while it parses:
    exit 2 from its ``exit``), else ``None``. The same arguments fail every attempt, so no attempt is worth another.
    A script's own ``parser.error()`` (a check of its own, outside the parse) and a file an argument names that is
    not there yet (``FileType``, ``@file``: ``[Errno``) are failures like any other."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    if exc.code != 2 or not frames:
        return None
    last = frames[-1]
    if last.f_code.co_name != "exit" or last.f_globals.get("__name__") != "argparse":
        return None
    parsing = [f for f in frames if f.f_globals.get("__name__") == "argparse" and f.f_code.co_name not in ERROR_PATH]
    if not parsing:  # error() called by the script itself
        return None
    message = last.f_locals.get("message")
    text = message.strip() if isinstance(message, str) and message.strip() else "exit 2 from argparse"
    return None if "[Errno" in text else text


def quick_failures(state: Path, code: int, elapsed_s: float, peer_lost: bool = False) -> int:
    """Record an attempt that ended with ``code`` after ``elapsed_s``; return the quick failures in a row so far
    (0 after a success, a stop (:data:`STOPPED`), Ctrl-C or a failure past :data:`QUICK_FAILURE_S`; unchanged when
    the attempt failed because another rank went away, ``peer_lost``)."""
    if peer_lost:
        return read_count(state)
    count = read_count(state) + 1 if code not in (0, INTERRUPTED, *STOPPED) and elapsed_s < QUICK_FAILURE_S else 0
    write_count(state, count)
    return count


def lost_peer(exc: BaseException) -> bool:
    """Whether the script failed because another rank's process went away (:data:`PEER_LOSS`), or on
    torch.distributed's network error, which a lost peer raises too."""
    dist = sys.modules.get("torch.distributed")
    network_error = getattr(dist, "DistNetworkError", None)
    if isinstance(network_error, type) and isinstance(exc, network_error):
        return True
    return any(text in str(exc) for text in PEER_LOSS)


def give_up(output_dir: Path, failures: int, reason: str) -> None:
    """Write ``FAILED`` in ``output_dir`` (atomically; every failing rank writes the same reason). The launcher then
    ends the pod with exit 3 and the Job fails at once."""
    record = {"reason": reason, "failures": failures, "failed_at": dt.datetime.now(dt.UTC).isoformat()}
    tmp = output_dir / f".{FAILED_MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, output_dir / FAILED_MARKER)
    print(f"run_script: giving up: {reason}; wrote {output_dir / FAILED_MARKER}", file=sys.stderr, flush=True)


def budget() -> tuple[int, Path | None]:
    """(``MAX_FAILED_ATTEMPTS``, the ``OUTPUT_DIR`` a FAILED goes to) when the crash-loop budget applies: under the
    launcher (:data:`LAUNCHER_ENV`, which turns FAILED into the Job's failure), for a program that keeps none of its
    own (:data:`OWN_BUDGET_ENV`); else (0, None)."""
    limit, folder = int(os.environ.get("MAX_FAILED_ATTEMPTS") or 0), os.environ.get("OUTPUT_DIR")
    if not limit or not folder or not os.environ.get(LAUNCHER_ENV) or os.environ.get(OWN_BUDGET_ENV):
        return 0, None
    return limit, Path(folder)


def end_status(code: int, elapsed_s: float, peer_lost: bool = False, refused: str | None = None) -> int:
    """Count this attempt's end against the budget (:func:`budget`); at the limit, or at once when argparse
    ``refused`` the arguments (:func:`refused_arguments`), write ``FAILED``. The status stays ``code``: a failed rank
    makes torchrun stop its siblings and every agent start the workers again, and each new worker finds ``FAILED`` and
    exits 0 at once (``__main__``), so every pod ends in the same round."""
    limit, output_dir = budget()
    if output_dir is None:
        return code
    state = quick_failures_file()
    failures = quick_failures(state, code, elapsed_s, peer_lost)
    if refused is not None:
        give_up(output_dir, failures, f"{REFUSED} ({refused}): fix the job's args")
        write_count(state, 0)
    elif failures >= limit:
        reason = (
            f"the script failed {failures} attempts in a row, each within {QUICK_FAILURE_S:g} s of its start "
            f"(the job's maxRestarts: {limit - 1}, MAX_FAILED_ATTEMPTS {limit}; the last exit status {code})"
        )
        give_up(output_dir, failures, reason)
        write_count(state, 0)  # the run is over: leave nothing behind
    return code


def exit_code(code: object) -> int:
    """The exit status ``sys.exit(code)`` gives: ``None`` 0, an int itself, anything else printed to stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main_module(script: str) -> types.ModuleType:
    """A ``__main__`` module for ``script``, as ``python SCRIPT`` makes it (``__file__`` set, ``__spec__`` None: what
    multiprocessing's spawn and forkserver start children from), installed in ``sys.modules`` for good: a class the
    script defines stays picklable after its main block (in its late threads and ``atexit`` handlers)."""
    module = types.ModuleType("__main__")
    module.__dict__.update(
        {
            "__file__": script,
            "__builtins__": __builtins__,
            "__spec__": None,
            "__loader__": None,
            "__package__": None,
            "__cached__": None,
        }
    )
    sys.modules["__main__"] = module
    return module


def flush_open_files() -> None:
    """Flush every file object still open, as finalisation would when it frees them (a script that never closed its
    CSV writer's file loses nothing); runs no finalizer."""
    for obj in gc.get_objects():
        # type(obj), not isinstance: an ABC's isinstance reads obj.__class__ through the object's own __getattribute__,
        # which a deprecated alias overrides to warn (torch.distributed.reduce_op printed a FutureWarning in every
        # rank's log at the end of a script that imports torch.distributed)
        if issubclass(type(obj), io.IOBase):
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:  # noqa: BLE001  (a file that cannot flush any more: as finalisation, go on)
                pass


def announce_start() -> None:
    """On rank 0, the line the launcher's goodput ledger reads as a new attempt (``goodput.WRAPPER``): torchrun
    starting the script again after a failure is otherwise seen only when its steps go back."""
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps({"event": "attempt", "component": COMPONENT, "time": round(time.time(), 3)}), flush=True)


def run(argv: list[str]) -> tuple[int, bool, str | None]:
    """Run ``argv[0]`` with arguments ``argv[1:]`` as ``python`` runs a script; return its exit status
    (:data:`INTERRUPTED` after Ctrl-C), whether it failed because another rank went away (:func:`lost_peer`), and
    argparse's message when it refused the arguments (:func:`refused_arguments`)."""
    peer_lost, refused = False, None
    if not argv or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2, False, None
    script = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        with tokenize.open(script) as f:  # the script's own encoding declaration, as python reads it
            source = f.read()
        code_object = compile(source, script, "exec")
        exec(code_object, main_module(script).__dict__)
        code = 0
    except SystemExit as exc:
        code = exit_code(exc.code)
        refused = refused_arguments(exc)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = INTERRUPTED
    except BaseException as exc:  # noqa: BLE001  (as the interpreter: print it, exit 1)
        sys.excepthook(*sys.exc_info())
        peer_lost = lost_peer(exc)
        code = 1
    # What the interpreter does at the end before its finalisation: threading's exit hooks (they stop the workers of
    # concurrent.futures' pools) and the join of every non-daemon thread, then the atexit handlers.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    flush_open_files()
    return code, peer_lost, refused


if __name__ == "__main__":
    if os.environ.get(LAUNCHER_ENV) and (folder := os.environ.get("OUTPUT_DIR")):
        if (Path(folder) / FAILED_MARKER).exists():
            print(f"run_script: the run gave up ({Path(folder) / FAILED_MARKER} exists); not running", file=sys.stderr)
            process_end.end_process(0)  # so torchrun stops restarting this worker; the launcher then exits 3
    if budget()[1] is not None:
        reset_after_progress(quick_failures_file())
    announce_start()
    started = time.monotonic()
    status, peer_lost, refused = run(sys.argv[1:])
    status = end_status(status, time.monotonic() - started, peer_lost, refused)
    if status == INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    process_end.end_process(status)
