"""Where the run stands and what it measured: its position (:class:`Progress`), the current epoch's sums
(:class:`EpochStats`) and rank 0's TensorBoard scalars (:class:`ScalarLog`)."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dist_context import DistContext
from train_stop import StepSums


@dataclass
class Progress:
    """Position in the training run (what a checkpoint restores)."""

    epoch: int = 0
    step: int = 0
    samples_in_epoch: int = 0


@dataclass
class EpochStats:
    """Sums over the current epoch so far, across resumes (stored in mid-epoch checkpoints)."""

    loss_sum: float = 0.0
    correct: float = 0.0
    images: int = 0
    train_time_s: float = 0.0
    segments: int = 0
    world_sizes: list[int] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EpochStats:
        """Restore from a checkpoint (an empty epoch for checkpoints without it)."""
        if not data:
            return cls()
        return cls(
            float(data["loss_sum"]),
            float(data["correct"]),
            int(data["images"]),
            float(data["train_time_s"]),
            int(data["segments"]),
            [int(w) for w in data["world_sizes"]],
        )

    def start_segment(self, world_size: int) -> None:
        """A new stretch of this epoch begins (first start or a resume)."""
        self.segments += 1
        if world_size not in self.world_sizes:
            self.world_sizes.append(world_size)

    def add(self, sums: StepSums) -> None:
        """Fold in one step's all-reduced sums."""
        self.loss_sum += sums.loss_sum
        self.correct += sums.correct
        self.images += int(sums.images)


class ScalarLog:
    """Rank 0's TensorBoard scalars (nothing without a folder, or on other ranks).

    The step is the global optimizer step, so the curves continue across resumes and world sizes; on a
    resume, events an interrupted attempt wrote at or after the resumed step are purged (``purge_step``),
    so every step shows once.

    The event file is on the shared volume, and ``SummaryWriter`` blocks its caller once its small queue is full
    while its own thread waits on the volume (``tensorboard/summary/writer/event_file_writer.py``); ``flush`` waits
    for the volume too. So the training loop only appends to a bounded queue here, a thread of its own owns the
    writer, and when the volume stalls long enough for the queue to fill, the oldest scalars are dropped (counted):
    a stalled volume costs curve points, never the collective the other ranks wait in.
    """

    #: Scalars held while the volume stalls (about 5 minutes of steps at 60 steps/s, with two scalars per step).
    QUEUE_LIMIT = 40_000

    def __init__(self, log_dir: Path | None, ctx: DistContext, resume_step: int) -> None:
        self._queue: collections.deque[tuple[str, float, int] | None] = collections.deque(maxlen=self.QUEUE_LIMIT)
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        if log_dir is None or not ctx.is_main:
            return
        self._thread = threading.Thread(
            target=self._run, args=(log_dir, resume_step), name="scalar-writer", daemon=True
        )
        self._thread.start()

    def _put(self, item: tuple[str, float, int] | None) -> None:
        if self._thread is None:
            return
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        self._queue.append(item)
        self._ready.set()

    def _run(self, log_dir: Path, resume_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package (requirements.txt)

        log_dir.mkdir(parents=True, exist_ok=True)
        writer = SummaryWriter(str(log_dir), purge_step=resume_step or None, flush_secs=30)
        while True:
            self._ready.wait()
            self._ready.clear()
            while self._queue:
                item = self._queue.popleft()
                if item is None:
                    writer.close()
                    return
                tag, value, step = item
                if tag == "":
                    writer.flush()
                else:
                    writer.add_scalar(tag, value, step)

    def step(self, step: int, sums: StepSums) -> None:
        """Training loss and accuracy of one step (all ranks' images)."""
        if sums.images:
            self._put(("train/loss", sums.loss_sum / sums.images, step))
            self._put(("train/accuracy", sums.correct / sums.images, step))

    def epoch(self, step: int, record: dict[str, Any]) -> None:
        """Held-out accuracy and loss, and the epoch's training throughput, at the epoch's last step."""
        self._put(("test/accuracy", record["test_accuracy"], step))
        self._put(("test/loss", record["test_loss"], step))
        self._put(("throughput/images_per_sec", record["images_per_sec"], step))
        self._put(("", 0.0, step))  # flush, in the writer's thread

    def close(self, timeout_s: float = 10.0) -> bool:
        """Write what is pending, waiting at most ``timeout_s``; False if the volume did not take it in time (the
        thread is a daemon: what it still holds is lost with the process)."""
        if self._thread is None:
            return True
        self._put(None)
        self._thread.join(timeout_s)
        done = not self._thread.is_alive()
        self._thread = None
        return done
