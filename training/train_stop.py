"""How a stop reaches every rank at the same step: the signal flag (:class:`StopRequest`), DataLoader workers that
ignore the signal, the per-step all-reduce that carries every rank's stop reasons, and ``EXIT_OK``."""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any, Iterator

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from dist_context import DistContext

EXIT_OK = 0


class StopRequest:
    """SIGTERM/SIGINT only set a flag; the training loop acts on it at a step boundary."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.received_at: float | None = None
        self.logged = False

    def install(self) -> None:
        """Install the handlers (main thread, before anything slow)."""
        for sig in self.SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum, self.received_at = signum, time.time()

    @property
    def requested(self) -> bool:
        """A stop signal arrived."""
        return self.signum is not None

    def log_once(self, ctx: DistContext, step: int) -> None:
        """The rank that received the signal says so (once, on its own stdout)."""
        if self.signum is not None and not self.logged:
            self.logged = True
            print(
                json.dumps(
                    {
                        "event": "stop_requested",
                        "time": round(time.time(), 3),
                        "rank": ctx.rank,
                        "signal": signal.Signals(self.signum).name,
                        "received_at": self.received_at,
                        "step": step,
                    }
                ),
                flush=True,
            )


def _worker_init(_worker_id: int) -> None:
    """DataLoader workers ignore the stop signals, so they keep serving batches until the trainer has written its
    stop checkpoint. torchrun stops a worker by signalling its whole process group (``os.killpg`` in
    ``torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py``), so the kubelet's
    SIGTERM, forwarded by the launcher, reaches the DataLoader workers too; a DataLoader worker that died of it made
    the trainer fail on its next batch ("DataLoader worker ... killed by signal: Terminated") before it could
    checkpoint: the steps since the last checkpoint were lost and the stop counted as a failed attempt. The workers
    still end: the trainer drops its loader at the stop (workers are joined), and a worker whose trainer is gone
    exits on its own (PyTorch's DataLoader worker loop watches its parent); SIGKILL ends them as it ends the
    trainer."""
    for sig in StopRequest.SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # also discards one that arrived while blocked (see start_loader)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, StopRequest.SIGNALS)


def start_loader(loader: DataLoader[Any]) -> Iterator[Any]:
    """``iter(loader)``, its worker processes started with the stop signals blocked.

    Why: a DataLoader worker is forked, then installs PyTorch's own SIGTERM handler
    (``_set_worker_signal_handlers`` in ``torch/utils/data/_utils/worker.py``; ``handler_SIGTERM`` in
    ``torch/csrc/DataLoader.cpp`` re-raises with the default action, so the worker dies, unless the sender is its
    parent), and only later runs ``worker_init_fn``. A stop signal sent to the process group in between (torchrun's
    SIGTERM on a membership change, landing as an epoch's new loader starts) killed a worker, and the trainer
    failed on its next batch instead of checkpointing (seen in CI under load). Blocked, the signal stays pending in the
    new worker until :func:`_worker_init` ignores it (which discards it). The trainer itself loses nothing: its other
    threads keep the signals unblocked, and one pending on this thread is delivered when the mask is restored, a few
    milliseconds later."""
    if not loader.num_workers:
        return iter(loader)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, StopRequest.SIGNALS)
    try:
        return iter(loader)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@dataclass
class StepFlags:
    """What rank 0 learned from the lease since the last step (sent with the next step's sums)."""

    yield_to_other_group: bool = False
    lease_lost: bool = False

    def update(self, outcome: str) -> None:
        """Fold in a :meth:`run_lease.RunLease.renew` outcome."""
        self.yield_to_other_group |= outcome == "yield"
        self.lease_lost |= outcome == "lost"


@dataclass(frozen=True)
class StepSums:
    """One step's all-reduced sums: training statistics and stop reasons."""

    loss_sum: float
    correct: float
    images: float
    signalled: int
    yielding: bool
    lease_lost: bool

    @property
    def stop(self) -> bool:
        """Every rank stops after this step."""
        return bool(self.signalled or self.yielding or self.lease_lost)

    def reasons(self) -> dict[str, Any]:
        """Why the group stops (for the log)."""
        return {"ranks_signalled": self.signalled, "yield_to_other_group": self.yielding, "lease_lost": self.lease_lost}


def combine_step(
    ctx: DistContext,
    loss_sum: torch.Tensor | float,
    correct: torch.Tensor | float,
    images: int,
    stop: StopRequest,
    flags: StepFlags,
) -> StepSums:
    """The per-step all-reduce: loss, accuracy, images and every rank's stop flag in one tensor."""
    parts = [
        torch.as_tensor(loss_sum, dtype=torch.float64, device=ctx.device).reshape(1),
        torch.as_tensor(correct, dtype=torch.float64, device=ctx.device).reshape(1),
        torch.tensor(
            [float(images), float(stop.requested), float(flags.yield_to_other_group), float(flags.lease_lost)],
            dtype=torch.float64,
            device=ctx.device,
        ),
    ]
    tensor = torch.cat(parts)
    if ctx.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    values = tensor.tolist()
    return StepSums(values[0], values[1], values[2], int(values[3]), values[4] > 0, values[5] > 0)
