"""How a distributed training program ends its process: :func:`end_process`.

Used by ``train.py``, ``allreduce_bench.py`` and ``synthetic_benchmark.py``, and by ``run_script.py`` for a job's own
script."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import NoReturn


def end_process(code: int) -> NoReturn:
    """End the process with ``code``, skipping the interpreter's finalisation.

    Call it once the program's work is on disk (checkpoints, ``DONE``, metrics and TensorBoard files written and
    closed; DataLoader iterators dropped, which joins their worker processes) and the process group has been
    destroyed. What is still alive then is torch's C++ state: the process group's threads (gloo's worker and
    transport threads; DDP's reducer holds its process group past ``destroy_process_group``), the TCPStore client,
    the intra-op thread pool. Python's finalisation tears these down in no set order, and a C++ thread that needs
    the GIL once finalisation has begun is ended by the interpreter with a forced unwind through code that cannot
    unwind, which aborts the process: ``terminate called without an active exception``, exit -6 (the mechanism,
    for gloo: https://github.com/pytorch/pytorch/pull/179291 and https://github.com/pytorch/pytorch/issues/190489).
    Under torchrun a finished rank that aborts counts as a failed worker group: the agent restarts the group while
    the finished node waits for it at its exit barrier, a completed run turned into a restart. ``os._exit`` skips
    finalisation, so the exit code is always the program's own."""
    sys.stdout.flush()
    sys.stderr.flush()
    # C stdio's buffers too: NCCL logs with fwrite to stdout and never flushes it, and a pod's stdout is a pipe, so
    # its last lines (the WARN lines that explain a failure) would go with the process (NCCL src/debug.cc).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)
    os._exit(code)
