"""The CIFAR-10 "python version" on-disk format, plus atomic file writes.

No torch here: the data-staging job and the tests use this module alone.

The format (https://www.cs.toronto.edu/~kriz/cifar.html):
``<data-dir>/cifar-10-batches-py/`` holds ``data_batch_1`` .. ``data_batch_5``,
``test_batch`` and ``batches.meta``.  Every batch is a pickled dict with
``b"data"`` (uint8, N x 3072, each row the 1024 red, then 1024 green, then 1024
blue values of a 32x32 image in row-major order) and ``b"labels"`` (N ints in
0..9).  ``batches.meta`` holds ``b"label_names"``.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

BATCH_DIR_NAME = "cifar-10-batches-py"
TRAIN_BATCH_NAMES: tuple[str, ...] = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH_NAME = "test_batch"
META_NAME = "batches.meta"
EXPECTED_FILES: tuple[str, ...] = (*TRAIN_BATCH_NAMES, TEST_BATCH_NAME, META_NAME)
IMAGE_SHAPE: tuple[int, int, int] = (3, 32, 32)
NUM_CLASSES = 10


class DatasetError(RuntimeError):
    """Raised when the CIFAR-10 files are missing or malformed."""


# --------------------------------------------------------------------------- #
# Reading the on-disk format
# --------------------------------------------------------------------------- #
def batch_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Return the ``cifar-10-batches-py`` folder inside ``data_dir``.

    ``data_dir`` may also point at the batch folder itself.
    """
    root = Path(data_dir)
    if root.name == BATCH_DIR_NAME and (root / META_NAME).exists():
        return root
    return root / BATCH_DIR_NAME


def missing_files(data_dir: str | os.PathLike[str]) -> list[str]:
    """Names of the expected CIFAR-10 files that are absent from ``data_dir``."""
    folder = batch_dir(data_dir)
    return [name for name in EXPECTED_FILES if not (folder / name).is_file()]


def _load_pickle(path: Path) -> dict[bytes, Any]:
    """Load one CIFAR batch pickle (written by Python 2, hence ``bytes`` keys)."""
    if not path.is_file():
        raise DatasetError(f"CIFAR-10 file not found: {path}")
    with path.open("rb") as handle:
        obj = pickle.load(handle, encoding="bytes")
    if not isinstance(obj, dict):
        raise DatasetError(f"{path}: expected a pickled dict, got {type(obj).__name__}")
    return obj


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one batch file into ``(images uint8 N x 3 x 32 x 32, labels int64 N)``."""
    obj = _load_pickle(path)
    try:
        data = np.asarray(obj[b"data"], dtype=np.uint8)
        labels = np.asarray(obj[b"labels"], dtype=np.int64)
    except KeyError as exc:
        raise DatasetError(f"{path}: missing key {exc}") from exc
    if data.ndim != 2 or data.shape[1] != int(np.prod(IMAGE_SHAPE)):
        raise DatasetError(f"{path}: data has shape {data.shape}, expected N x 3072")
    if labels.shape != (data.shape[0],):
        raise DatasetError(f"{path}: {labels.shape[0]} labels for {data.shape[0]} images")
    if labels.size and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
        raise DatasetError(f"{path}: labels outside 0..{NUM_CLASSES - 1}")
    return data.reshape(-1, *IMAGE_SHAPE), labels


def load_split(data_dir: str | os.PathLike[str], train: bool) -> tuple[np.ndarray, np.ndarray]:
    """Load the training (5 batches concatenated) or the test split."""
    folder = batch_dir(data_dir)
    names = TRAIN_BATCH_NAMES if train else (TEST_BATCH_NAME,)
    parts = [read_batch(folder / name) for name in names]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    if images.shape[0] == 0:
        raise DatasetError(f"{folder}: the {'training' if train else 'test'} split is empty")
    return images, labels


def load_label_names(data_dir: str | os.PathLike[str]) -> list[str]:
    """Class names from ``batches.meta`` (``label_names``)."""
    path = batch_dir(data_dir) / META_NAME
    meta = _load_pickle(path)
    raw = meta.get(b"label_names")
    if raw is None or len(raw) != NUM_CLASSES:
        raise DatasetError(f"{path}: expected {NUM_CLASSES} label_names")
    return [n.decode() if isinstance(n, bytes) else str(n) for n in raw]


def write_batch(path: Path, images: np.ndarray, labels: Sequence[int], name: str) -> None:
    """Write ``images`` (N x 3 x 32 x 32 uint8) as a CIFAR-10 batch pickle."""
    if images.dtype != np.uint8 or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(f"images must be uint8 N x 3 x 32 x 32, got {images.dtype} {images.shape}")
    payload = {
        b"batch_label": name.encode(),
        b"labels": [int(v) for v in labels],
        b"data": np.ascontiguousarray(images.reshape(images.shape[0], -1)),
        b"filenames": [f"{name}_{i:05d}.png".encode() for i in range(images.shape[0])],
    }
    with path.open("wb") as handle:
        pickle.dump(payload, handle, protocol=2)


def write_meta(path: Path, label_names: Sequence[str], images_per_batch: int) -> None:
    """Write a ``batches.meta`` pickle with the given class names."""
    payload = {
        b"label_names": [n.encode() for n in label_names],
        b"num_cases_per_batch": images_per_batch,
        b"num_vis": int(np.prod(IMAGE_SHAPE)),
    }
    with path.open("wb") as handle:
        pickle.dump(payload, handle, protocol=2)


def channel_stats(images: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and standard deviation of uint8 images, on the 0..1 scale."""
    flat = images.reshape(images.shape[0], images.shape[1], -1).astype(np.float64) / 255.0
    mean = flat.mean(axis=(0, 2))
    std = flat.std(axis=(0, 2))
    std = np.where(std < 1e-6, 1.0, std)
    return [float(v) for v in mean], [float(v) for v in std]


# --------------------------------------------------------------------------- #
# Atomic file writes
# --------------------------------------------------------------------------- #
def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename inside it is durable (no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class NotPublished(Exception):
    """``atomic_write``'s ``before_publish`` said no: the temporary file was removed, ``path`` is unchanged."""


def atomic_write(
    path: str | os.PathLike[str],
    writer: Callable[[IO[bytes]], None],
    mode: int = 0o644,
    before_publish: Callable[[], bool] | None = None,
) -> Path:
    """Write ``path`` atomically: temp file in the same folder, fsync, ``os.replace``.

    Readers see either the old complete file or the new complete file, never
    a partial one, even if the writer is killed half-way. ``before_publish`` is asked once the
    data is on disk, just before the rename; if it returns False, :class:`NotPublished` is raised.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)  # mkstemp creates 0600; other pods (other uids) must read it
        with os.fdopen(fd, "wb") as handle:
            writer(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if before_publish is not None and not before_publish():
            raise NotPublished(str(target))
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)
    return target


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Atomically write ``data`` as pretty JSON."""
    text = (json.dumps(data, indent=2) + "\n").encode()

    def write(handle: IO[bytes]) -> None:
        handle.write(text)

    return atomic_write(path, write)
