"""Synthetic-data training throughput with Horovod and TensorFlow (images/s), one rank per GPU.

Run by every rank of an MPIJob (mpirun starts it)::

    mpirun ... python /opt/horovod-benchmark/horovod_benchmark.py --model ResNet50 --batch-size 64

Each rank trains a Keras application model (weights initialised randomly) on one synthetic batch repeated,
so the measurement is compute and gradient exchange only (no input pipeline), as the Horovod and
TensorFlow benchmark utilities measure it. After ``--warmup-steps`` it times ``--steps`` steps; rank 0
prints one JSON line and writes ``<OUTPUT_DIR>/benchmark.json``: images/s in total and per GPU, step time,
ranks, the final loss; and ``<OUTPUT_DIR>/metrics.json``, the same as the project's metrics files
(training/metrics.py: wall time, throughput in images/s, final loss, ranks).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="ResNet50", help="a tf.keras.applications model name")
    parser.add_argument("--batch-size", type=int, default=64, help="images per rank and step")
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--output-dir", type=Path, default=os.environ.get("OUTPUT_DIR"))
    args = parser.parse_args(argv)
    started = time.time()

    import horovod.tensorflow.keras as hvd
    import numpy as np
    import tensorflow as tf

    hvd.init()
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    model = getattr(tf.keras.applications, args.model)(weights=None, classes=1000)
    shape = (args.batch_size, *model.input_shape[1:])
    images = tf.random.uniform(shape, seed=hvd.rank())
    labels = tf.constant(np.random.default_rng(hvd.rank()).integers(0, 1000, args.batch_size))
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01 * hvd.size(), momentum=0.9))
    model.compile(optimizer=optimizer, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    class Timer(tf.keras.callbacks.Callback):
        start = 0.0

        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            if batch == args.warmup_steps:
                Timer.start = time.perf_counter()

    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), Timer()]
    history = model.fit(
        data,
        steps_per_epoch=args.warmup_steps + args.steps,
        epochs=1,
        callbacks=callbacks,
        verbose=2 if hvd.rank() == 0 else 0,
    )
    seconds = time.perf_counter() - Timer.start
    total = args.steps * args.batch_size * hvd.size() / seconds
    if hvd.rank() == 0:
        result = {
            "event": "benchmark_result",
            "model": args.model,
            "ranks": hvd.size(),
            "batch_size_per_rank": args.batch_size,
            "images_per_sec": round(total, 1),
            "images_per_sec_per_gpu": round(total / hvd.size(), 1),
            "step_time_s": round(seconds / args.steps, 4),
            "loss": float(history.history["loss"][-1]),
        }
        print(json.dumps(result), flush=True)
        if args.output_dir is not None:
            args.output_dir.mkdir(parents=True, exist_ok=True)
            (args.output_dir / "benchmark.json").write_text(json.dumps(result, indent=1))
            fields = dict.fromkeys(("final_accuracy", "busbw_gbps"))
            fields.update(
                program="horovod_benchmark.py",
                wall_time_s=round(time.time() - started, 3),
                throughput=result["images_per_sec"],
                throughput_unit="images/s",
                final_loss=result["loss"],
                world_size=hvd.size(),
                model=args.model,
            )
            (args.output_dir / "metrics.json").write_text(
                json.dumps({"schema": "eks-training.metrics/1", **fields}, indent=1)
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
