"""Runs a job's own Python script under torchrun as ``python SCRIPT ARGS`` would, then ends the process the way the
bundled programs end theirs (:func:`process_end.end_process`).

The launcher (``launch.py``) puts it in front of the script of every ``pytorch`` job: ``torchrun ... run_script.py
SCRIPT ARGS``. Why: a distributed program that finished its work, destroyed its process group and returned can still
abort in the interpreter's finalisation (``terminate called without an active exception``, exit -6): torch's C++
threads (gloo's, DDP's reducer holding its process group, the TCPStore client) outlive ``destroy_process_group`` and
need the GIL once finalisation has begun (https://github.com/pytorch/pytorch/pull/179291,
https://github.com/pytorch/pytorch/issues/190489). Under torchrun such a rank counts as a failed worker group: its
agent restarts a finished run while the other nodes wait at torchrun's exit barrier (300 s) for it. The job contract
is "exit 0 on every rank", so the launcher, not the user's script, keeps a finished rank from aborting.

What runs as under ``python SCRIPT``: the script as ``__main__`` with its own ``__file__``, ``sys.argv`` (the script,
then its arguments) and ``sys.path[0]`` (its folder, so its sibling modules import); ``multiprocessing``'s spawn finds
it as the main module; an uncaught exception prints its traceback and exits 1, ``SystemExit`` exits with its code.
Then, as the interpreter does when a program ends: non-daemon threads are joined and ``atexit`` handlers run (logging's
flush, experiment trackers' final uploads). What is skipped: the rest of finalisation (module teardown, finalizers of
objects still alive), where the abort happens; files the script wrote and closed are on disk, and standard output and
error, Python's and C's, are flushed.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
import threading

import process_end

USAGE = "usage: run_script.py SCRIPT [ARGS...]"


def exit_code(code: object) -> int:
    """The exit status ``sys.exit(code)`` gives: ``None`` 0, an int itself, anything else printed to stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run(argv: list[str]) -> int:
    """Run ``argv[0]`` with arguments ``argv[1:]`` as ``python`` runs a script; return its exit status."""
    if not argv or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    script = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        # run_name "__main__" runs the script's main block; runpy makes the script sys.modules["__main__"] while it
        # runs (multiprocessing's spawn starts children from its __file__).
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = 130
    except BaseException:  # noqa: BLE001  (as the interpreter: print it, exit 1)
        sys.excepthook(*sys.exc_info())
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    return code


if __name__ == "__main__":
    process_end.end_process(run(sys.argv[1:]))
