"""An attempt's setup before its first step: the checkpoint it resumes from, CIFAR-10 on every rank, the model with
its optimizer and schedule, the restored state, and each epoch's DataLoader."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

import checkpointer
import cifar
import cifar_io
import run_lease
from dist_context import DistContext, broadcast_object, log_event, wait_for_main
from train_progress import EpochStats, Progress
from train_stop import _worker_init


@dataclass
class ResumePoint:
    """Where an attempt starts: the checkpoint rank 0 chose (loaded on every rank), the attempts in a row that failed
    before this one, and whether the run gives up instead."""

    chosen: str | None
    failures: int
    give_up: bool
    checkpoint: dict[str, Any] | None


def choose_resume(args: argparse.Namespace, ctx: DistContext, lease: run_lease.RunLease | None) -> ResumePoint:
    """Rank 0 picks the checkpoint, every rank loads that same file. Rank 0 records the attempt's start step in the
    lease first, so an attempt that fails in any later step counts."""
    chosen: str | None = None
    checkpoint: dict[str, Any] | None = None
    give_up = False
    failures = 0
    if ctx.is_main:
        assert lease is not None
        chosen, checkpoint = checkpointer.newest_loadable_checkpoint(args.output_dir)
        start_step = int(checkpoint["step"]) if checkpoint is not None else 0
        failures = lease.begin(start_step)
        give_up = bool(args.max_failed_attempts) and failures >= args.max_failed_attempts
    wait_for_main(ctx, "resume-chosen", args.checkpoint_deadline_seconds)  # rank 0 read checkpoints, wrote the lease
    chosen, give_up, failures = broadcast_object(ctx, (chosen, give_up, failures))
    if chosen and checkpoint is None and not give_up:
        checkpoint = checkpointer.load_checkpoint(Path(chosen))
    return ResumePoint(chosen, failures, give_up, checkpoint)


@dataclass
class CifarData:
    """CIFAR-10 as every rank holds it: the training arrays, the test tensors (pinned on a GPU), the class names."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: torch.Tensor
    test_labels: torch.Tensor
    class_names: list[str]


def load_data(args: argparse.Namespace, ctx: DistContext) -> CifarData:
    """Every rank reads both splits and the class names from ``--data-dir``."""
    train_images, train_labels = cifar_io.load_split(args.data_dir, train=True)
    test_images_np, test_labels_np = cifar_io.load_split(args.data_dir, train=False)
    class_names = cifar_io.load_label_names(args.data_dir)
    test_images = torch.from_numpy(test_images_np)
    test_labels = torch.from_numpy(test_labels_np)
    if ctx.device.type == "cuda":
        test_images, test_labels = test_images.pin_memory(), test_labels.pin_memory()
    return CifarData(train_images, train_labels, test_images, test_labels, class_names)


@dataclass
class ModelState:
    """The model and what trains it: the state a checkpoint holds besides the run's position."""

    config: cifar.ModelConfig
    model: nn.Module
    optimizer: torch.optim.SGD
    scheduler: cifar.WarmupCosineSchedule
    scaler: torch.amp.GradScaler


def make_model(
    args: argparse.Namespace, ctx: DistContext, data: CifarData, checkpoint: dict[str, Any] | None, use_amp: bool
) -> ModelState:
    """The ResNet-9 (its configuration from the checkpoint, else ``--width`` and the training images' channel
    statistics), its optimizer, learning-rate schedule and gradient scaler, before any state is restored."""
    if checkpoint is not None:
        model_config = cifar.ModelConfig.from_dict(checkpoint["model_config"])
    else:
        mean, std = cifar_io.channel_stats(data.train_images)
        model_config = cifar.ModelConfig(width=args.width, mean=tuple(mean), std=tuple(std))
    torch.manual_seed(args.seed)
    model = cifar.build_model(model_config).to(ctx.device)
    if ctx.device.type == "cuda":
        # Module.to(memory_format=...) exists at runtime but is missing from torch's overload stubs.
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=args.lr,
        momentum=args.momentum,
        nesterov=args.momentum > 0,
        weight_decay=args.weight_decay,
    )
    # Warm-up is capped at half of the run so short runs still get a decay phase.
    scheduler = cifar.WarmupCosineSchedule(
        optimizer, peak_lr=args.lr, warmup_fraction=min(args.warmup_epochs / args.epochs, 0.5)
    )
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    return ModelState(model_config, model, optimizer, scheduler, scaler)


def restore(
    args: argparse.Namespace, ctx: DistContext, state: ModelState, resume: ResumePoint
) -> tuple[Progress, list[dict[str, Any]], EpochStats]:
    """Load the chosen checkpoint into ``state``; returns the run's position, the finished epochs' records and the
    current epoch's sums so far (a fresh start without a checkpoint)."""
    checkpoint = resume.checkpoint
    if checkpoint is None:
        log_event(ctx, "fresh_start", text="no checkpoint found; starting from epoch 0")
        return Progress(), [], EpochStats()
    state.model.load_state_dict(checkpoint["model"])
    state.optimizer.load_state_dict(checkpoint["optimizer"])
    state.scheduler.load_state_dict(checkpoint["scheduler"])
    if checkpoint["scaler"]:
        state.scaler.load_state_dict(checkpoint["scaler"])
    progress = Progress(int(checkpoint["epoch"]), int(checkpoint["step"]), int(checkpoint["samples_in_epoch"]))
    history = list(checkpoint.get("history", []))
    stats = EpochStats.from_dict(checkpoint.get("epoch_stats")) if progress.samples_in_epoch else EpochStats()
    if state.config.width != args.width:
        log_event(ctx, "warning", message=f"--width {args.width} ignored: checkpoint has width {state.config.width}")
    log_event(
        ctx,
        "resumed",
        checkpoint=resume.chosen,
        epoch=progress.epoch,
        step=progress.step,
        samples_in_epoch=progress.samples_in_epoch,
        checkpoint_world_size=checkpoint.get("world_size"),
        world_size=ctx.world_size,
        failed_attempts_in_a_row=resume.failures,
    )
    assert resume.chosen is not None
    log_event(
        ctx,
        "message",
        text=f"resumed from epoch {progress.epoch} step {progress.step} (checkpoint {Path(resume.chosen).name})",
    )
    return progress, history, stats


def make_loader(
    dataset: cifar.CifarArrays,
    sampler: cifar.ResumableDistributedSampler,
    args: argparse.Namespace,
    ctx: DistContext,
    seed: int,
) -> DataLoader[Any]:
    """DataLoader over ``sampler`` with workers and (on GPU) pinned memory."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    return DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=args.workers,
        pin_memory=ctx.device.type == "cuda",
        drop_last=True,
        generator=generator,
        persistent_workers=False,
        worker_init_fn=_worker_init if args.workers else None,
    )
