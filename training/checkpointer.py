"""Rank 0's checkpoints: their files in the run folder (``checkpoint-step<step>.pt``, newest first, pruned), and
the writer, which a slow shared volume never lets hold training, nor the other ranks, in a collective.

:func:`to_host` stages the state in host memory at a step boundary (the only part training waits for), then a
background thread writes it to a temporary file, fsyncs it and publishes it with an atomic rename
(``cifar_io.atomic_write``) while training goes on. One periodic write is in flight at a time: a checkpoint that falls
due meanwhile is skipped; the stop's own checkpoint is written beside a stalled one. A write unfinished after
``deadline_s`` (``--checkpoint-deadline-seconds``) fails the trainer with :class:`CheckpointError`. It is PyTorch
Distributed Checkpoint's ``async_save`` design for one writer; why: "The shared volume is slow" in
docs/explanation/failures.md."""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import cifar
import cifar_io


#: A checkpoint's file name, ``checkpoint-step<step>.pt``, and the format its state has (``format_version``).
CHECKPOINT_RE = re.compile(r"^checkpoint-step(\d+)\.pt$")
FORMAT_VERSION = 1


def checkpoint_path(output_dir: Path, step: int) -> Path:
    """File name of the checkpoint taken after global optimizer step ``step``."""
    return output_dir / f"checkpoint-step{step:08d}.pt"


def list_checkpoints(output_dir: Path) -> list[Path]:
    """Checkpoint files in ``output_dir``, newest (highest step) first."""
    if not output_dir.is_dir():
        return []
    found = []
    for entry in output_dir.iterdir():
        match = CHECKPOINT_RE.match(entry.name)
        if match and entry.is_file():
            found.append((int(match.group(1)), entry))
    return [path for _, path in sorted(found, reverse=True)]


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint onto the CPU (tensors only, no pickled code)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: not a checkpoint of format {FORMAT_VERSION}")
    return state


def newest_loadable_checkpoint(output_dir: Path) -> tuple[str | None, dict[str, Any] | None]:
    """Newest checkpoint that loads (path and state), or ``(None, None)``.  Rank 0 only."""
    for path in list_checkpoints(output_dir):
        try:
            return str(path), load_checkpoint(path)
        except Exception as exc:  # a damaged file must not block the restart
            print(json.dumps({"event": "checkpoint_unreadable", "path": str(path), "error": repr(exc)}), flush=True)
    return None, None


def remove_stale_temp_files(output_dir: Path) -> None:
    """Delete temp files left by a writer that was killed mid-write (rank 0, holding the lease)."""
    for entry in output_dir.glob(".*.tmp"):
        entry.unlink(missing_ok=True)


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    """Keep only the ``keep`` newest checkpoints."""
    for old in list_checkpoints(output_dir)[keep:]:
        old.unlink(missing_ok=True)


class CheckpointError(RuntimeError):
    """A checkpoint write failed, or has not finished within its deadline (the volume is gone)."""


def to_host(obj: Any) -> Any:
    """A copy of ``obj`` whose tensors are detached copies in host memory (what the background write reads while
    training changes the originals)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_host(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_host(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(to_host(v) for v in obj)
    return copy.deepcopy(obj)


@dataclass
class _Write:
    path: Path
    started: float
    thread: threading.Thread
    error: BaseException | None = None


class Checkpointer:
    """Writes staged checkpoints in background threads.

    One periodic write is in flight at a time (:meth:`busy`); the stop's own checkpoint is written beside a write
    still in flight (``alongside=True``): a stalled older write must not keep the newest state from the volume (the
    trainer resumes from the highest step, so which one lands first does not matter).
    ``may_publish()`` is asked in the writer thread just before the rename (a run taken over by another group
    publishes nothing); ``published(path, info)`` is called in the writer thread once the file is in place, with
    ``info`` extended by ``write_s`` (pruning old checkpoints and logging belong there)."""

    def __init__(
        self, deadline_s: float, may_publish: Callable[[], bool], published: Callable[[Path, dict[str, Any]], None]
    ) -> None:
        self.deadline_s = deadline_s
        self._may_publish = may_publish
        self._published = published
        self._writes: list[_Write] = []

    def busy(self) -> bool:
        """A write is in flight."""
        return any(w.thread.is_alive() for w in self._writes)

    def submit(self, path: Path, staged: dict[str, Any], info: dict[str, Any], *, alongside: bool = False) -> bool:
        """Start writing ``staged`` (already in host memory) to ``path``; False (nothing started) while a write is
        in flight, unless ``alongside`` (the stop's own checkpoint: written whatever became of earlier writes)."""
        if not alongside:
            self.check()
        if self.busy() and not alongside:
            return False
        self._writes = [w for w in self._writes if w.thread.is_alive() or w.error is not None]  # errors: for check()
        write = _Write(path, time.monotonic(), threading.Thread(name="checkpoint-writer", daemon=True))

        def run() -> None:
            try:
                cifar.atomic_torch_save(path, staged, before_publish=self._may_publish)
                self._published(path, {**info, "write_s": round(time.monotonic() - write.started, 3)})
            except cifar_io.NotPublished:
                return  # the run was taken over while this was being written: nothing published
            except BaseException as exc:  # noqa: BLE001  (reported to the training loop by check())
                write.error = exc

        write.thread = threading.Thread(target=run, name="checkpoint-writer", daemon=True)
        self._writes.append(write)
        write.thread.start()
        return True

    def check(self, path: Path | None = None) -> None:
        """Raise :class:`CheckpointError` if a write (of ``path``, or any) failed, or one in flight is past its
        deadline."""
        now = time.monotonic()
        for w in self._writes:
            if path is not None and w.path != path:
                continue
            if w.error is not None:
                error, w.error = w.error, None
                raise CheckpointError(f"writing checkpoint {w.path} failed: {error!r}") from error
            if w.thread.is_alive() and now - w.started > self.deadline_s:
                raise CheckpointError(
                    f"checkpoint {w.path} is still being written after {self.deadline_s:g}s "
                    "(--checkpoint-deadline-seconds): the shared volume does not answer"
                )

    def wait(self, path: Path | None = None) -> None:
        """Wait for the write of ``path`` (or every write in flight) until its deadline, then :meth:`check` it (only
        it: a stop checkpoint written fine is not failed by an earlier periodic write that failed or stalled)."""
        for w in self._writes:
            if path is None or w.path == path:
                w.thread.join(max(0.0, self.deadline_s - (time.monotonic() - w.started)))
        self.check(path)
