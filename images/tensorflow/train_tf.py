"""Multi-worker TensorFlow training on CIFAR-10 with ``MultiWorkerMirroredStrategy``.

Every worker runs this script with ``TF_CONFIG`` (TensorFlowJob sets it); one worker alone runs without it. A small
CNN trains on the CIFAR-10 batches staged on the shared volume, each worker on its shard of every global batch.
``BackupAndRestore`` keeps ``<output>/backup`` after every epoch (and every ``--backup-every-steps``), so restarted
workers resume from it. The chief (worker 0) writes ``<output>/tensorboard``, ``<output>/model.keras`` and
``<output>/summary.json``; every worker writes ``<output>/worker-<index>.json`` with a checksum of its final weights
and logs one JSON line per epoch. A lost peer ends the survivors with exit 1 within a bounded time, so the Job
replaces every pod. Uses ``tf_keras`` (``TF_USE_LEGACY_KERAS=1``): Keras 3 does not work with the strategy. Why, and
what was measured: "The TensorFlow trainer" in docs/explanation/programs.md."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line; ``--data-dir`` and ``--output-dir`` default to ``DATA_DIR`` and ``OUTPUT_DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=os.environ.get("DATA_DIR"),
        help="folder holding cifar-10-batches-py/ (default $DATA_DIR)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=os.environ.get("OUTPUT_DIR"),
        help="shared output folder (default $OUTPUT_DIR)",
    )
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128, help="images per worker and step")
    parser.add_argument("--learning-rate", type=float, default=0.05, help="for a global batch of 256, scaled linearly")
    parser.add_argument("--steps-per-epoch", type=int, default=0, help="cap on steps per epoch (0: the whole epoch)")
    parser.add_argument("--backup-every-steps", type=int, default=0, help="also back up every N steps (0: per epoch)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.data_dir is None or args.output_dir is None:
        parser.error("--data-dir and --output-dir are required (or DATA_DIR and OUTPUT_DIR)")
    for name in ("epochs", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def load_split(data_dir: Path, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 32, 32, 3) float32 in [0, 1] and labels of the CIFAR-10 python batches."""
    root = data_dir / "cifar-10-batches-py" if (data_dir / "cifar-10-batches-py").is_dir() else data_dir
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    images, labels = [], []
    for name in names:
        with open(root / name, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(np.asarray(batch[b"labels"], dtype=np.int64))
    return np.concatenate(images).astype(np.float32) / 255.0, np.concatenate(labels)


def task() -> tuple[int, int]:
    """(this worker's index, number of workers) from TF_CONFIG."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    workers = (config.get("cluster") or {}).get("worker") or [""]
    return int((config.get("task") or {}).get("index", 0)), len(workers)


def weights_digest(weights: list[np.ndarray]) -> str:
    """sha256 of the model's weights (identical across workers after synchronous training)."""
    h = hashlib.sha256()
    for w in weights:
        h.update(np.ascontiguousarray(w, dtype=np.float32).tobytes())
    return h.hexdigest()


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Atomic write (readable by the jobs after this one: mkstemp creates 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(tmp, path)


def log_event(event: str, **fields: Any) -> None:
    """One JSON object on stdout."""
    print(json.dumps({"event": event, "time": round(time.time(), 3), **fields}), flush=True)


def epoch_log(keras: Any, index: int, epochs: int) -> Any:
    """A Keras callback logging one JSON line per epoch: ``train_start`` with the epoch training starts at
    (> 0 when ``BackupAndRestore`` restored a backup), then ``epoch`` with its loss and accuracy. Its
    ``initial_epoch`` is that first epoch (``None`` when no epoch was left to run)."""

    class EpochLog(keras.callbacks.Callback):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.initial_epoch: int | None = None

        def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            if self.initial_epoch is None:
                self.initial_epoch = epoch
                log_event("train_start", worker=index, initial_epoch=epoch, epochs=epochs)

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            log_event("epoch", worker=index, epoch=epoch, **{k: float(v) for k, v in (logs or {}).items()})

    return EpochLog()


@dataclass
class Trained:
    """What a worker's training left: Keras' history, the epoch log, the seconds it took and its private folder."""

    history: Any
    progress: Any
    seconds: float
    private: Path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import tensorflow as tf
    import tf_keras as keras

    index, workers = task()
    chief = index == 0
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    tf.keras.utils.set_random_seed(args.seed)
    x_train, y_train = load_split(args.data_dir, train=True)
    x_test, y_test = load_split(args.data_dir, train=False)
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    steps = steps_per_epoch(len(x_train), global_batch, args.steps_per_epoch)
    if steps < 1:
        print(
            f"train_tf.py: error: a global batch of {global_batch} is larger than the {len(x_train)} images",
            file=sys.stderr,
        )
        return 2
    train = train_dataset(tf, x_train, y_train, global_batch, args.seed)
    model = compiled_model(keras, strategy, args.learning_rate, global_batch)
    trained = train_model(keras, model, train, args, index, steps)
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=512, verbose=0)
    digest = weights_digest(model.get_weights())
    out = args.output_dir
    model.save(str((out if chief else trained.private) / "model.keras"))
    write_json(
        out / f"worker-{index}.json",
        {
            "index": index,
            "workers": workers,
            "weights_sha256": digest,
            "initial_epoch": trained.progress.initial_epoch,
            "test_accuracy": float(accuracy),
        },
    )
    shutil.rmtree(trained.private, ignore_errors=True)
    if chief:
        write_summary(out, args.epochs, trained, steps, global_batch, workers, loss, accuracy, digest)
        print(json.dumps({"event": "done", "test_accuracy": float(accuracy), "weights_sha256": digest}), flush=True)
    return 0


def steps_per_epoch(images: int, global_batch: int, cap: int) -> int:
    """Whole global batches in an epoch of ``images``, at most ``cap`` (0: no cap)."""
    steps = images // global_batch
    if cap:
        steps = min(steps, cap)
    return steps


def train_dataset(tf: Any, x_train: np.ndarray, y_train: np.ndarray, global_batch: int, seed: int) -> Any:
    """The shuffled, flipped, repeated training set in global batches, sharded by data across the workers."""

    def augment(x: Any, y: Any) -> tuple[Any, Any]:
        x = tf.image.random_flip_left_right(x)
        return x, y

    train = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(x_train), seed=seed)
        .map(augment)
        .repeat()
        .batch(global_batch, drop_remainder=True)
        .prefetch(2)
    )
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return train.with_options(options)


def compiled_model(keras: Any, strategy: Any, learning_rate: float, global_batch: int) -> Any:
    """The CNN (three blocks of two convolutions), compiled in the strategy's scope; ``learning_rate`` is for a global
    batch of 256, scaled linearly."""
    with strategy.scope():
        layers = keras.layers
        # BatchNormalization's moving averages with momentum 0.9 (PyTorch's default; Keras' 0.99 needs
        # hundreds of steps before evaluation with the moving averages is meaningful)
        model = keras.Sequential(
            [
                keras.Input((32, 32, 3)),
                *[
                    layer
                    for width in (32, 64, 128)
                    for layer in (
                        layers.Conv2D(width, 3, padding="same", use_bias=False),
                        layers.BatchNormalization(momentum=0.9),
                        layers.ReLU(),
                        layers.Conv2D(width, 3, padding="same", use_bias=False),
                        layers.BatchNormalization(momentum=0.9),
                        layers.ReLU(),
                        layers.MaxPooling2D(),
                    )
                ],
                layers.GlobalAveragePooling2D(),
                layers.Dense(10),
            ]
        )
        lr = learning_rate * global_batch / 256
        model.compile(
            optimizer=keras.optimizers.SGD(lr, momentum=0.9, nesterov=True),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    return model


def train_model(keras: Any, model: Any, train: Any, args: argparse.Namespace, index: int, steps: int) -> Trained:
    """Fit ``args.epochs`` epochs of ``steps`` steps, resuming from ``<output>/backup`` when a backup is there, with
    the epoch log and TensorBoard."""
    chief = index == 0
    out = args.output_dir
    backup = keras.callbacks.BackupAndRestore(
        str(out / "backup"), save_freq=args.backup_every_steps or "epoch", delete_checkpoint=False
    )
    # only the chief writes where TensorBoard and the next jobs read; the others write to a private folder
    # (every worker must save: saving runs collective ops)
    private = Path(tempfile.mkdtemp(prefix=f"train-tf-worker-{index}-"))
    tb_dir = out / "tensorboard" if chief else private / "tensorboard"
    progress = epoch_log(keras, index, args.epochs)
    started = time.time()
    history = model.fit(
        train,
        epochs=args.epochs,
        steps_per_epoch=steps,
        verbose=2 if chief else 0,
        callbacks=[backup, progress, keras.callbacks.TensorBoard(str(tb_dir), update_freq="epoch")],
    )
    return Trained(history, progress, time.time() - started, private)


def write_summary(
    out: Path,
    epochs: int,
    trained: Trained,
    steps: int,
    global_batch: int,
    workers: int,
    loss: Any,
    accuracy: Any,
    digest: str,
) -> None:
    """The chief's ``<output>/summary.json``: the run's shape, its test loss and accuracy, weights and speed."""
    seconds, history = trained.seconds, trained.history
    write_json(
        out / "summary.json",
        {
            "epochs": epochs,
            "initial_epoch": trained.progress.initial_epoch,
            "steps_per_epoch": steps,
            "global_batch": global_batch,
            "workers": workers,
            "test_loss": float(loss),
            "test_accuracy": float(accuracy),
            "weights_sha256": digest,
            "seconds": round(seconds, 3),
            "images_per_sec": round(len(history.epoch) * steps * global_batch / max(seconds, 1e-9), 1),
            "history": {k: [float(v) for v in vals] for k, vals in history.history.items()},
        },
    )


if __name__ == "__main__":
    try:
        exit_code = main()
    except Exception as error:  # typically a collective aborted because a peer was lost
        traceback.print_exc()
        print(
            json.dumps(
                {"event": "fatal", "time": round(time.time(), 3), "error": f"{type(error).__name__}: {error}"[:500]}
            ),
            flush=True,
        )
        sys.stderr.flush()
        os._exit(1)
    sys.exit(exit_code)
