"""The background checkpoint writer's rules (training/checkpointer.py), called directly on a temporary folder.

The real-process scenarios (tests/real/test_slow_volume_real.py) show it inside train.py with a stalled volume;
these check the rules that decide whether a stop loses its checkpoint: a stop checkpoint is written and waited for
whatever became of an earlier periodic write (one that failed, or one still stalled), and a failed write is reported
once.
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

import checkpointer  # noqa: E402

from tests.wait import patient  # noqa: E402


def writer(published: list[Path], *, deadline_s: float = 30.0) -> checkpointer.Checkpointer:
    return checkpointer.Checkpointer(
        deadline_s, may_publish=lambda: True, published=lambda path, info: published.append(path)
    )


def test_a_stop_checkpoint_is_written_and_waited_for_although_an_earlier_write_failed(tmp_path: Path) -> None:
    published: list[Path] = []
    w = writer(published)
    (tmp_path / "gone").write_text("a file where the folder should be")
    failing = tmp_path / "gone" / "checkpoint-step00000010.pt"  # the write fails
    assert w.submit(failing, {"step": 10}, {"step": 10})
    w._writes[0].thread.join(patient(10))
    stop = tmp_path / "checkpoint-step00000012.pt"
    assert w.submit(stop, {"step": 12}, {"step": 12}, alongside=True)  # no check of the earlier write first
    w.wait(stop)  # only the stop's own write is checked
    assert stop.exists() and published == [stop]
    with pytest.raises(checkpointer.CheckpointError, match="step00000010"):
        w.check()  # the training loop still hears of the failed write, once
    w.check()


def test_a_stop_checkpoint_does_not_wait_for_a_stalled_periodic_write(tmp_path: Path) -> None:
    published: list[Path] = []
    w = writer(published, deadline_s=0.5)
    release = threading.Event()
    original = checkpointer.cifar.atomic_torch_save

    def stalled(path: Any, obj: Any, before_publish: Any = None) -> Path:
        if "step00000010" in str(path):
            release.wait(patient(20))  # the volume does not answer for this write
        return original(path, obj, before_publish=before_publish)

    checkpointer.cifar.atomic_torch_save = stalled  # type: ignore[assignment]
    try:
        periodic = tmp_path / "checkpoint-step00000010.pt"
        assert w.submit(periodic, {"step": 10}, {"step": 10})
        assert not w.submit(tmp_path / "checkpoint-step00000011.pt", {"step": 11}, {"step": 11})  # skipped: busy
        time.sleep(0.6)  # the periodic write is past its deadline now
        stop = tmp_path / "checkpoint-step00000012.pt"
        assert w.submit(stop, {"step": 12}, {"step": 12}, alongside=True)
        w.wait(stop)
        assert stop.exists() and published == [stop]
        with pytest.raises(checkpointer.CheckpointError, match="still being written"):
            w.check()  # the loop, had it gone on, would end the attempt with the reason
    finally:
        release.set()
        checkpointer.cifar.atomic_torch_save = original  # type: ignore[assignment]
