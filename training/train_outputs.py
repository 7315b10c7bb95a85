"""The run's outputs besides its checkpoints: ``model.pt``, ``training_summary.json``, ``metrics.json`` (with the
model's FLOPs) and ``DONE`` once it is over, or ``FAILED`` when it gives up."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

import checkpointer
import cifar
import cifar_io
import metrics
import run_lease
import run_script
from dist_context import DistContext, hand_off, log_event
from train_flags import json_args
from train_stop import EXIT_OK

FORMAT_VERSION = checkpointer.FORMAT_VERSION
FAILED_MARKER = run_script.FAILED_MARKER


def give_up_run(
    args: argparse.Namespace, ctx: DistContext, lease: run_lease.RunLease | None, failures: int, chosen: str | None
) -> int:
    """Rank 0 writes ``FAILED`` and releases the lease; every rank exits 0 so torchrun stops restarting."""
    if ctx.is_main:
        assert lease is not None and lease.record is not None
        reason = (
            f"{failures} attempts in a row failed without a new checkpoint "
            f"(--max-failed-attempts {args.max_failed_attempts})"
        )
        cifar_io.atomic_write_json(
            args.output_dir / FAILED_MARKER,
            {
                "reason": reason,
                "failures": failures,
                "checkpoint": chosen,
                "step": lease.record.start_step,
                "lease_generation": lease.record.generation,
                "previous": lease.record.previous,
                "failed_at": dt.datetime.now(dt.UTC).isoformat(),
            },
        )
        lease.release("gave_up", reason=reason)
        log_event(ctx, "gave_up", failures=failures, checkpoint=chosen, text=reason)
    hand_off(ctx, "gave-up", 0, args.checkpoint_deadline_seconds)  # FAILED is on the volume before anyone leaves
    return EXIT_OK


def model_flops_per_image(model_config: cifar.ModelConfig) -> float | None:
    """FLOPs of one training image (forward and backward), as torch's ``FlopCounterMode`` counts the model's
    convolutions and matrix products (2 per multiply-add; elementwise operations not counted), on a copy of the model
    on the ``meta`` device (no memory, no compute). None if it cannot be counted."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with torch.device("meta"):
            counted = cifar.build_model(model_config)
            x = torch.empty(2, 3, 32, 32)
        with FlopCounterMode(display=False) as counter:
            counted(x).sum().backward()
        return float(counter.get_total_flops()) / 2
    except Exception:  # an operator without a FLOP formula: no figure rather than a wrong one
        return None


def flops_metrics(
    history: list[dict[str, Any]], flops_per_image: float | None, peak_flops_per_device: float | None
) -> dict[str, Any]:
    """Model FLOPs: per step (at the last world size), achieved per second of training, and the model FLOPs
    utilization (achieved / peak of the devices that trained) over the epochs trained at one world size."""
    if not flops_per_image or not history:
        return {
            "model_flops_per_image": None,
            "model_flops_per_step": None,
            "model_flops_per_s": None,
            "mfu": None,
            "mfu_note": "the model's FLOPs could not be counted",
        }
    final = history[-1]
    per_step = flops_per_image * int(final.get("world_size") or 1) * int(final.get("batch_size") or 0) or None
    whole = [h for h in history if len(h.get("world_sizes") or [h.get("world_size")]) == 1]
    images = sum(int(h["images"]) for h in whole)
    device_seconds = sum(float(h["train_time_s"]) * int(h["world_size"]) for h in whole)
    train_time = sum(float(h["train_time_s"]) for h in whole)
    achieved = flops_per_image * images / train_time if train_time > 0 else None
    mfu, note = None, None
    if peak_flops_per_device is None:
        note = "no peak FLOP/s given for the device (--peak-flops-per-device, $PEAK_FLOPS_PER_DEVICE)"
    elif device_seconds > 0:
        mfu = round(flops_per_image * images / (device_seconds * peak_flops_per_device), 4)
    else:
        note = "no epoch was trained at a single world size"
    return {
        "model_flops_per_image": flops_per_image,
        "model_flops_per_step": per_step,
        "model_flops_per_s": round(achieved, 1) if achieved else None,
        "mfu": mfu,
        "mfu_note": note,
    }


def training_metrics(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's metrics over every epoch (restarts included): time spent training and evaluating, images/s over
    the training steps, the last epoch's training loss and test accuracy."""
    final = history[-1] if history else {}
    images = sum(int(h["images"]) for h in history)
    train_time = sum(float(h["train_time_s"]) for h in history)
    return {
        "wall_time_s": round(sum(float(h["epoch_time_s"]) for h in history), 3),
        "throughput": round(images / train_time, 1) if train_time > 0 else None,
        "throughput_unit": "images/s",
        "final_loss": final.get("train_loss"),
        "final_accuracy": final.get("test_accuracy"),
        "final_test_loss": final.get("test_loss"),
        "world_size": final.get("world_size"),
        "epochs": len(history),
    }


def write_final_artifacts(
    args: argparse.Namespace,
    ctx: DistContext,
    model: nn.Module,
    model_config: cifar.ModelConfig,
    class_names: list[str],
    history: list[dict[str, Any]],
    run_start: float,
) -> None:
    """Rank 0: ``model.pt``, ``training_summary.json``, ``metrics.json``, then ``DONE`` (all atomic)."""
    output_dir: Path = args.output_dir
    final = history[-1] if history else {}
    state_dict = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    model_path = cifar.atomic_torch_save(
        output_dir / "model.pt",
        {
            "format_version": FORMAT_VERSION,
            "state_dict": state_dict,
            "model_config": model_config.to_dict(),
            "class_names": class_names,
            "epochs": args.epochs,
            "test_accuracy": final.get("test_accuracy"),
        },
    )
    summary = {
        "model": str(model_path),
        "epochs": args.epochs,
        "final": final,
        "history": history,
        "world_sizes": sorted({int(h["world_size"]) for h in history}),
        "model_config": model_config.to_dict(),
        "args": json_args(args),
        "seconds_this_attempt": round(time.time() - run_start, 3),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
    }
    cifar_io.atomic_write_json(output_dir / "training_summary.json", summary)
    flops = flops_metrics(
        [{**h, "batch_size": args.batch_size} for h in history],
        model_flops_per_image(model_config),
        args.peak_flops_per_device,
    )
    metrics.write_metrics(output_dir, "train.py", **training_metrics(history), **flops)
    cifar_io.atomic_write_json(output_dir / "DONE", {"finished_at": summary["finished_at"], "model": str(model_path)})
    log_event(ctx, "done", model=str(model_path), test_accuracy=final.get("test_accuracy"), world_size=ctx.world_size)
