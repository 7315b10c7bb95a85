"""The trainer's TensorBoard scalars never hold the training loop (training/train_progress.py ``ScalarLog``).

The event file is on the shared volume; ``SummaryWriter.add_scalar`` blocks once its small queue is full while the
volume stalls, and ``flush`` waits for the volume. Called in the training loop, that held rank 0 while the other
ranks waited in their next collective. Here a writer whose every call stalls stands in for the stalled volume (the
real writer's files are read back in tests/real/test_jobs_real.py's TensorBoard test).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"
if str(TRAINING_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINING_DIR))

import train_progress  # noqa: E402
import train_stop  # noqa: E402
from dist_context import DistContext  # noqa: E402

from tests.wait import patient  # noqa: E402


class StalledWriter:
    """A SummaryWriter on a volume that does not answer until ``volume`` is set."""

    volume = threading.Event()
    written: list[tuple[str, float, int]] = []
    closed = False

    def __init__(self, log_dir: str, purge_step: Any = None, flush_secs: int = 30) -> None:
        self.log_dir = log_dir

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        StalledWriter.volume.wait()
        StalledWriter.written.append((tag, value, step))

    def flush(self) -> None:
        StalledWriter.volume.wait()

    def close(self) -> None:
        StalledWriter.volume.wait()
        StalledWriter.closed = True


def test_a_stalled_volume_never_holds_the_loop_and_loses_only_the_oldest_scalars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch.utils.tensorboard

    monkeypatch.setattr(torch.utils.tensorboard, "SummaryWriter", StalledWriter)
    monkeypatch.setattr(train_progress.ScalarLog, "QUEUE_LIMIT", 100)
    ctx = DistContext(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"), backend="gloo", distributed=False)
    log = train_progress.ScalarLog(tmp_path / "tb", ctx, 0)
    sums = train_stop.StepSums(loss_sum=2.0, correct=1.0, images=2.0, signalled=0, yielding=False, lease_lost=False)
    started = time.monotonic()
    for step in range(1, 501):  # 1000 scalars while the volume stalls
        log.step(step, sums)
    log.epoch(500, {"test_accuracy": 0.5, "test_loss": 1.0, "images_per_sec": 10.0})
    assert time.monotonic() - started < 2.0, "the loop waited for the volume"
    assert log.dropped > 0
    closing = time.monotonic()
    assert log.close(0.5) is False  # the volume did not answer: close gives up in time
    assert time.monotonic() - closing < 2.0
    StalledWriter.volume.set()  # the volume answers: the writer's thread drains what it kept, newest last
    deadline = time.monotonic() + patient(10)
    while not StalledWriter.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert StalledWriter.closed
    steps = [step for _, _, step in StalledWriter.written]
    assert steps and steps[-1] == 500 and len(steps) <= 100 + 1  # the newest kept, the oldest dropped
