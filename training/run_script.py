"""Runs a job's own Python script under torchrun as ``python SCRIPT ARGS`` would, then ends the process the way the
bundled programs end theirs (:func:`process_end.end_process`).

Every ``pytorch`` job's command puts it in front of the job's script (``torchrun ... /app/run_script.py SCRIPT
ARGS``, ``components.workloads.training.RUN_SCRIPT``), so a rank that finished its work exits 0 instead of aborting in
the interpreter's finalisation, which torchrun would count as a failure. The script runs as ``__main__`` with its own
``__file__``, ``sys.argv`` and ``sys.path[0]``; then threading's exit hooks, non-daemon threads and ``atexit``
handlers run and open files and standard streams are flushed, as at a program's end. Only the rest of finalisation is
skipped. Why, and the whole list: "Your own script" in docs/explanation/programs.md."""

from __future__ import annotations

import atexit
import gc
import io
import os
import signal
import sys
import threading
import tokenize
import types

import process_end

USAGE = "usage: run_script.py SCRIPT [ARGS...]"
#: :func:`run`'s status for a script ended by Ctrl-C: the process then ends by SIGINT, as Python's does.
INTERRUPTED = -int(signal.SIGINT)


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


def run(argv: list[str]) -> int:
    """Run ``argv[0]`` with arguments ``argv[1:]`` as ``python`` runs a script; return its exit status
    (:data:`INTERRUPTED` after Ctrl-C)."""
    if not argv or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
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
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = INTERRUPTED
    except BaseException:  # noqa: BLE001  (as the interpreter: print it, exit 1)
        sys.excepthook(*sys.exc_info())
        code = 1
    # What the interpreter does at the end before its finalisation: threading's exit hooks (they stop the workers of
    # concurrent.futures' pools) and the join of every non-daemon thread, then the atexit handlers.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    flush_open_files()
    return code


if __name__ == "__main__":
    status = run(sys.argv[1:])
    if status == INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    process_end.end_process(status)
