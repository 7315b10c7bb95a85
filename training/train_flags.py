"""The bundled trainer's flags (``train.py``): the folders, the recipe, checkpoints, reporting, sampling and fault
handling, with their defaults (some read from the pod's environment, :data:`ENV_DEFAULTS`), their ranges and their
JSON form (:func:`json_args`, for the log, the checkpoints and the summary)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Checkpoint cadence: a hard node loss recomputes at most this much training (plus one step). Staging the bundled
#: model's state costs milliseconds and the write runs in the background (checkpointer.py), so the cadence is bounded
#: by the work a loss may cost, 2 minutes, not by the write's cost.
DEFAULT_CHECKPOINT_EVERY_SECONDS = 120.0


#: A checkpoint write that has not finished after this long: the volume is gone (EFS and FSx writes of a checkpoint
#: take seconds; a stall of minutes is survived, see checkpointer.py).
DEFAULT_CHECKPOINT_DEADLINE_SECONDS = 900.0


#: Settings the pods' environment carries (the jobs set them from the stack's config; see
#: components/workloads/pytorch.py): a flag given on the command line wins over its variable.
ENV_DEFAULTS = {
    "data_dir": "DATA_DIR",
    "output_dir": "OUTPUT_DIR",
    "tensorboard_dir": "TENSORBOARD_DIR",
    "checkpoint_every_seconds": "CHECKPOINT_EVERY_SECONDS",
    "pg_timeout_seconds": "PG_TIMEOUT_SECONDS",
    "max_failed_attempts": "MAX_FAILED_ATTEMPTS",
    "peak_flops_per_device": "PEAK_FLOPS_PER_DEVICE",
}


def _env(name: str, convert: Callable[[str], Any], default: Any) -> Any:
    """The value of the environment variable behind ``name`` (:data:`ENV_DEFAULTS`), else ``default``."""
    raw = os.environ.get(ENV_DEFAULTS[name], "")
    return convert(raw) if raw else default


def add_folder_flags(parser: argparse.ArgumentParser) -> None:
    """Where the dataset is read and the outputs and TensorBoard scalars are written."""
    data_dir = _env("data_dir", Path, None)
    output_dir = _env("output_dir", Path, None)
    parser.add_argument(
        "--data-dir",
        required=data_dir is None,
        type=Path,
        default=data_dir,
        help="folder containing cifar-10-batches-py/ (or that folder itself); default $DATA_DIR",
    )
    parser.add_argument(
        "--output-dir",
        required=output_dir is None,
        type=Path,
        default=output_dir,
        help="shared folder for checkpoints, model.pt and the summary; default $OUTPUT_DIR",
    )
    parser.add_argument(
        "--tensorboard-dir",
        type=Path,
        default=_env("tensorboard_dir", Path, None),
        help="write TensorBoard scalars here (rank 0): train/loss and train/accuracy every step, "
        "test/accuracy and throughput/images_per_sec every epoch; default $TENSORBOARD_DIR "
        "(none: no event files)",
    )


def add_recipe_flags(parser: argparse.ArgumentParser) -> None:
    """The training recipe: epochs, batch, optimizer, schedule, model width and data loading."""
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256, help="images per process and step")
    parser.add_argument("--lr", type=float, default=0.4, help="peak learning rate (tuned for a global batch of 512)")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--label-smoothing", type=float, default=0.2)
    parser.add_argument(
        "--warmup-epochs", type=float, default=2.0, help="linear warm-up length (capped at half of --epochs)"
    )
    parser.add_argument("--width", type=int, default=64, help="ResNet-9 base width (channels w,2w,4w,8w)")
    parser.add_argument("--workers", type=int, default=4, help="DataLoader worker processes per rank")


def add_checkpoint_flags(parser: argparse.ArgumentParser) -> None:
    """When checkpoints are written, how long a write may take, and how many are kept."""
    parser.add_argument(
        "--checkpoint-every-steps", type=int, default=0, help="also checkpoint every N optimizer steps (0 = off)"
    )
    parser.add_argument(
        "--checkpoint-every-seconds",
        type=float,
        default=_env("checkpoint_every_seconds", float, DEFAULT_CHECKPOINT_EVERY_SECONDS),
        help="also checkpoint after this many seconds of training since the last "
        f"checkpoint (default $CHECKPOINT_EVERY_SECONDS, else {DEFAULT_CHECKPOINT_EVERY_SECONDS:g}; "
        "0 = off): about what a hard kill can lose at most (the write runs in the background)",
    )
    parser.add_argument(
        "--checkpoint-deadline-seconds",
        type=float,
        default=DEFAULT_CHECKPOINT_DEADLINE_SECONDS,
        help="a checkpoint write still unfinished after this long means the shared volume is gone: "
        "the attempt fails with that reason (the write itself never holds training)",
    )
    parser.add_argument("--keep-checkpoints", type=int, default=2, help="how many checkpoints to keep")


def add_reporting_flags(parser: argparse.ArgumentParser) -> None:
    """How often rank 0 reports progress, and the device's peak for the model FLOPs utilization."""
    parser.add_argument(
        "--progress-every-seconds",
        type=float,
        default=10.0,
        help="rank 0 prints a progress line (the step reached) this often: the resolution of the "
        "goodput accounting (goodput.py) for where a failed attempt was (default 10; 0 = every "
        "step)",
    )
    parser.add_argument(
        "--peak-flops-per-device",
        type=float,
        default=_env("peak_flops_per_device", float, None),
        help="the device's peak FLOP/s for the model's precision (default $PEAK_FLOPS_PER_DEVICE): "
        "with it, metrics.json has the model FLOPs utilization (mfu); without it, null",
    )


def add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    """The seed, and a cap on an epoch's steps (short runs)."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-steps-per-epoch",
        type=int,
        default=0,
        help="cap on optimizer steps per epoch at the current world size (0 = full epoch)",
    )


def add_fault_flags(parser: argparse.ArgumentParser) -> None:
    """Fault handling: the collectives' timeout, the run lease's lifetime and the failure budget."""
    parser.add_argument(
        "--pg-timeout-seconds",
        type=float,
        default=_env("pg_timeout_seconds", float, 60.0),
        help="timeout of every collective (init_process_group(timeout=...)): how long "
        "a hung or frozen peer can stall the group before the workers fail and "
        "torchrun re-rendezvouses (default $PG_TIMEOUT_SECONDS, else 60)",
    )
    parser.add_argument(
        "--lease-ttl-seconds",
        type=float,
        default=120.0,
        help="the run lease expires this long after its last renewal (renewed every "
        "TTL/12, at least every 5 s); another group may then take the run over "
        "(default 120)",
    )
    parser.add_argument(
        "--max-failed-attempts",
        type=int,
        default=_env("max_failed_attempts", int, 5),
        help="give up (write FAILED, exit 0) when this many attempts in a row failed "
        "without a new checkpoint (0 = never give up; default $MAX_FAILED_ATTEMPTS, else 5)",
    )


def check_ranges(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse a value out of its range (a usage error, exit 2, naming the flag)."""
    positive = ("epochs", "batch_size", "width", "keep_checkpoints")
    for name in positive:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in (
        "workers",
        "checkpoint_every_steps",
        "max_steps_per_epoch",
        "checkpoint_every_seconds",
        "max_failed_attempts",
        "progress_every_seconds",
    ):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    for name in ("pg_timeout_seconds", "lease_ttl_seconds", "checkpoint_deadline_seconds"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0")
    if args.warmup_epochs < 0:
        parser.error("--warmup-epochs must be >= 0")
    if args.peak_flops_per_device is not None and args.peak_flops_per_device <= 0:
        parser.error("--peak-flops-per-device (or $PEAK_FLOPS_PER_DEVICE) must be > 0")


def json_args(args: argparse.Namespace) -> dict[str, Any]:
    """``args`` as plain JSON-compatible values (so checkpoints load with weights_only)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
