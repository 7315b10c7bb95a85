"""Multi-node data-parallel training of a ResNet-9 on CIFAR-10, launched by torchrun.

Run one ``torchrun`` per node, for example (etcd-v2 rendezvous, elastic 1..2 nodes)::

    torchrun --nnodes=1:2 --nproc-per-node=1 --rdzv-backend=etcd-v2 \\
        --rdzv-endpoint=etcd:2379 --rdzv-id=cifar10 --max-restarts=3 \\
        /app/train.py --data-dir /data --output-dir /data/run1

The script also runs without torchrun (a single process, no process group).

Recipe (defaults): ResNet-9 (width 64, BatchNorm), SGD with Nesterov momentum
0.9, weight decay 5e-4, label smoothing 0.2, peak learning rate 0.4 reached
after a linear warm-up over the first 2 epochs and followed by cosine decay,
10 epochs of 256 images per process (a global batch of 512 on two nodes),
random crop (padding 4) and horizontal flip.  On GPU it uses NCCL, channels-last
and float16 autocast with a GradScaler; on CPU it uses gloo and float32.

Fault tolerance: rank 0 writes an atomic checkpoint after every epoch (and
every ``--checkpoint-every-steps`` steps).  On start every rank loads the latest
checkpoint chosen by rank 0 and continues at the same epoch and at the same
position inside the epoch (see :class:`cifar.ResumableDistributedSampler`), so
a torchrun re-rendezvous after a worker died, even at a different world size,
continues rather than starting over.

Outputs in ``--output-dir``: ``checkpoint-step<N>.pt`` (the newest
``--keep-checkpoints``), ``model.pt`` (state_dict + model config),
``training_summary.json``, ``metrics.json`` (:mod:`metrics`: training time,
images/s, the final training loss and test accuracy) and the ``DONE`` marker.  Progress goes to stdout as
one JSON object per line (rank 0 only).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cifar  # noqa: E402  (needs the sys.path entry above)
import cifar_io  # noqa: E402
import metrics  # noqa: E402

CHECKPOINT_RE = re.compile(r"^checkpoint-step(\d+)\.pt$")
FORMAT_VERSION = 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line interface; the defaults are the production recipe."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, type=Path,
                        help="folder containing cifar-10-batches-py/ (or that folder itself)")
    parser.add_argument("--output-dir", required=True, type=Path,
                        help="shared folder for checkpoints, model.pt and the summary")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256, help="images per process and step")
    parser.add_argument("--lr", type=float, default=0.4,
                        help="peak learning rate (tuned for a global batch of 512)")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--label-smoothing", type=float, default=0.2)
    parser.add_argument("--warmup-epochs", type=float, default=2.0,
                        help="linear warm-up length (capped at half of --epochs)")
    parser.add_argument("--width", type=int, default=64, help="ResNet-9 base width (channels w,2w,4w,8w)")
    parser.add_argument("--workers", type=int, default=4, help="DataLoader worker processes per rank")
    parser.add_argument("--checkpoint-every-steps", type=int, default=0,
                        help="also checkpoint every N optimizer steps (0 = only at epoch end)")
    parser.add_argument("--keep-checkpoints", type=int, default=2, help="how many checkpoints to keep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps-per-epoch", type=int, default=0,
                        help="cap on optimizer steps per epoch at the current world size (0 = full epoch)")
    args = parser.parse_args(argv)
    positive = ("epochs", "batch_size", "width", "keep_checkpoints")
    for name in positive:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("workers", "checkpoint_every_steps", "max_steps_per_epoch"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.warmup_epochs < 0:
        parser.error("--warmup-epochs must be >= 0")
    return args


# --------------------------------------------------------------------------- #
# Distributed setup and logging
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    distributed: bool

    @property
    def is_main(self) -> bool:
        """True on global rank 0."""
        return self.rank == 0


def setup_distributed() -> DistContext:
    """Initialise the process group from the environment torchrun sets.

    Backend and device are chosen automatically: NCCL and ``cuda:LOCAL_RANK``
    when CUDA is available, gloo and CPU otherwise.  Without torchrun
    (no ``WORLD_SIZE``) the script runs as a single process.
    """
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    backend = "nccl" if use_cuda else "gloo"
    if "WORLD_SIZE" not in os.environ:
        return DistContext(0, 1, local_rank, device, backend, distributed=False)
    dist.init_process_group(
        backend=backend,
        init_method="env://",
        timeout=dt.timedelta(minutes=10),
        device_id=device if use_cuda else None,
    )
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, True)


def log_event(ctx: DistContext, event: str, **fields: Any) -> None:
    """Print one JSON line on rank 0 (flushed, so ``kubectl logs`` shows it at once)."""
    if not ctx.is_main:
        return
    record = {"event": event, "time": round(time.time(), 3), **fields}
    print(json.dumps(record, sort_keys=False, default=str), flush=True)


def all_reduce_sum(ctx: DistContext, values: list[float]) -> list[float]:
    """Sum ``values`` over all ranks (identity when not distributed)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    if ctx.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return [float(v) for v in tensor.tolist()]


def broadcast_object(ctx: DistContext, obj: Any) -> Any:
    """Send ``obj`` from rank 0 to every rank."""
    if not ctx.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


# --------------------------------------------------------------------------- #
# Checkpoints
# --------------------------------------------------------------------------- #
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
            print(json.dumps({"event": "checkpoint_unreadable", "path": str(path), "error": repr(exc)}),
                  flush=True)
    return None, None


def remove_stale_temp_files(output_dir: Path) -> None:
    """Delete temp files left by a writer that was killed mid-write (rank 0, at start)."""
    for entry in output_dir.glob(".*.tmp"):
        entry.unlink(missing_ok=True)


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    """Keep only the ``keep`` newest checkpoints."""
    for old in list_checkpoints(output_dir)[keep:]:
        old.unlink(missing_ok=True)


def json_args(args: argparse.Namespace) -> dict[str, Any]:
    """``args`` as plain JSON-compatible values (so checkpoints load with weights_only)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}


# --------------------------------------------------------------------------- #
# Training
# --------------------------------------------------------------------------- #
@dataclass
class Progress:
    """Position in the training run (what a checkpoint restores)."""

    epoch: int = 0
    step: int = 0
    samples_in_epoch: int = 0


def make_loader(dataset: cifar.CifarArrays, sampler: cifar.ResumableDistributedSampler,
                args: argparse.Namespace, ctx: DistContext, seed: int) -> DataLoader[Any]:
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
    )


@torch.no_grad()
def sync_buffers(model: nn.Module, ctx: DistContext) -> None:
    """Copy rank 0's BatchNorm running statistics to every rank (they drift per rank)."""
    if ctx.distributed:
        for buffer in model.buffers():
            dist.broadcast(buffer, src=0)


@torch.no_grad()
def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, ctx: DistContext,
             use_amp: bool, batch_size: int = 1000) -> tuple[float, float]:
    """Test loss and accuracy; each rank scores a 1/world slice, results are summed.

    ``model`` must be the bare module, not the DDP wrapper: the slices may
    need different numbers of batches, and DDP's forward is a collective.
    """
    model.eval()
    criterion = nn.CrossEntropyLoss(reduction="sum")
    shard = torch.arange(ctx.rank, images.shape[0], ctx.world_size)
    loss_sum, correct = 0.0, 0.0
    for start in range(0, shard.numel(), batch_size):
        idx = shard[start : start + batch_size]
        x = images[idx].to(ctx.device, non_blocking=True)
        y = labels[idx].to(ctx.device, non_blocking=True)
        if ctx.device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=ctx.device.type, dtype=torch.float16, enabled=use_amp):
            logits = model(x)
        loss_sum += float(criterion(logits.float(), y))
        correct += float((logits.argmax(dim=1) == y).sum())
    total_loss, total_correct, total = all_reduce_sum(ctx, [loss_sum, correct, float(shard.numel())])
    model.train()
    return total_loss / max(total, 1.0), total_correct / max(total, 1.0)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    ctx = setup_distributed()
    try:
        return run(args, ctx)
    finally:
        if ctx.distributed and dist.is_initialized():
            dist.destroy_process_group()


def run(args: argparse.Namespace, ctx: DistContext) -> int:
    """Train (or resume) until ``--epochs`` are done and write the final artifacts."""
    run_start = time.time()
    use_amp = ctx.device.type == "cuda"
    if use_amp:
        torch.backends.cudnn.benchmark = True
    output_dir: Path = args.output_dir
    if ctx.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_temp_files(output_dir)

    log_event(ctx, "start", world_size=ctx.world_size, backend=ctx.backend, device=str(ctx.device),
              restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
              run_id=os.environ.get("TORCHELASTIC_RUN_ID"), host=socket.gethostname(),
              torch=torch.__version__, args=json_args(args))

    train_images, train_labels = cifar_io.load_split(args.data_dir, train=True)
    test_images_np, test_labels_np = cifar_io.load_split(args.data_dir, train=False)
    class_names = cifar_io.load_label_names(args.data_dir)
    test_images = torch.from_numpy(test_images_np)
    test_labels = torch.from_numpy(test_labels_np)
    if ctx.device.type == "cuda":
        test_images, test_labels = test_images.pin_memory(), test_labels.pin_memory()

    # Resume: rank 0 picks the checkpoint, every rank loads that same file.
    chosen: str | None = None
    checkpoint: dict[str, Any] | None = None
    if ctx.is_main:
        chosen, checkpoint = newest_loadable_checkpoint(output_dir)
    chosen = broadcast_object(ctx, chosen)
    if chosen and checkpoint is None:
        checkpoint = load_checkpoint(Path(chosen))

    if checkpoint is not None:
        model_config = cifar.ModelConfig.from_dict(checkpoint["model_config"])
    else:
        mean, std = cifar_io.channel_stats(train_images)
        model_config = cifar.ModelConfig(width=args.width, mean=tuple(mean), std=tuple(std))
    torch.manual_seed(args.seed)
    model = cifar.build_model(model_config).to(ctx.device)
    if ctx.device.type == "cuda":
        # Module.to(memory_format=...) exists at runtime but is missing from torch's overload stubs.
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                nesterov=args.momentum > 0, weight_decay=args.weight_decay)
    # Warm-up is capped at half of the run so short runs still get a decay phase.
    scheduler = cifar.WarmupCosineSchedule(optimizer, peak_lr=args.lr,
                                           warmup_fraction=min(args.warmup_epochs / args.epochs, 0.5))
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    progress = Progress()
    history: list[dict[str, Any]] = []

    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        if checkpoint["scaler"]:
            scaler.load_state_dict(checkpoint["scaler"])
        progress = Progress(int(checkpoint["epoch"]), int(checkpoint["step"]),
                            int(checkpoint["samples_in_epoch"]))
        history = list(checkpoint.get("history", []))
        if model_config.width != args.width:
            log_event(ctx, "warning", message=f"--width {args.width} ignored: checkpoint has width "
                                              f"{model_config.width}")
        log_event(ctx, "resumed", checkpoint=chosen, epoch=progress.epoch, step=progress.step,
                  samples_in_epoch=progress.samples_in_epoch,
                  checkpoint_world_size=checkpoint.get("world_size"), world_size=ctx.world_size)
        log_event(ctx, "message", text=f"resumed from epoch {progress.epoch} step {progress.step} "
                                       f"(checkpoint {Path(chosen).name})")
    else:
        log_event(ctx, "fresh_start", text="no checkpoint found; starting from epoch 0")
    del checkpoint

    ddp_model: nn.Module = model
    if ctx.distributed:
        ddp_model = DistributedDataParallel(
            model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)

    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    dataset = cifar.CifarArrays(train_images, train_labels, augment=True)
    sampler = cifar.ResumableDistributedSampler(len(dataset), ctx.world_size, ctx.rank, args.seed)
    global_batch = args.batch_size * ctx.world_size
    if global_batch > len(dataset):
        raise SystemExit(f"global batch {global_batch} exceeds the {len(dataset)} training images")

    def save(epoch: int, samples_in_epoch: int) -> None:
        """Rank 0: atomic checkpoint of the full training state."""
        if not ctx.is_main:
            return
        state = {
            "format_version": FORMAT_VERSION,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
            "epoch": epoch,
            "step": progress.step,
            "samples_in_epoch": samples_in_epoch,
            "world_size": ctx.world_size,
            "model_config": model_config.to_dict(),
            "history": history,
            "args": json_args(args),
        }
        path = cifar.atomic_torch_save(checkpoint_path(output_dir, progress.step), state)
        prune_checkpoints(output_dir, args.keep_checkpoints)
        log_event(ctx, "checkpoint", path=str(path), epoch=epoch, step=progress.step,
                  samples_in_epoch=samples_in_epoch)

    ddp_model.train()
    while progress.epoch < args.epochs:
        epoch = progress.epoch
        epoch_budget = len(dataset)
        if args.max_steps_per_epoch:
            epoch_budget = min(epoch_budget, args.max_steps_per_epoch * global_batch)
        sampler.set_epoch(epoch)
        sampler.set_start(min(progress.samples_in_epoch, len(dataset)))
        steps_available = len(sampler) // args.batch_size
        steps_to_run = max(0, min(steps_available,
                                  (epoch_budget - progress.samples_in_epoch) // global_batch))
        torch.manual_seed(args.seed * 100003 + epoch * 1009 + ctx.rank * 7 + progress.step)
        loader = make_loader(dataset, sampler, args, ctx,
                             seed=args.seed + 1_000_003 * epoch + 7919 * ctx.rank + progress.step)

        epoch_start = time.time()
        loss_sum = torch.zeros((), dtype=torch.float64, device=ctx.device)
        correct = torch.zeros((), dtype=torch.float64, device=ctx.device)
        seen = 0
        for steps_done, (x, y) in enumerate(itertools.islice(loader, steps_to_run), start=1):
            scheduler.set_progress((epoch + progress.samples_in_epoch / epoch_budget) / args.epochs)
            x = x.to(ctx.device, non_blocking=True)
            y = y.to(ctx.device, non_blocking=True)
            if ctx.device.type == "cuda":
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device_type=ctx.device.type, dtype=torch.float16, enabled=use_amp):
                logits = ddp_model(x)
                loss = criterion(logits, y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            loss_sum += loss.detach().double() * y.shape[0]
            correct += (logits.detach().argmax(dim=1) == y).sum().double()
            seen += y.shape[0]
            progress.step += 1
            progress.samples_in_epoch += global_batch
            if (args.checkpoint_every_steps and progress.step % args.checkpoint_every_steps == 0
                    and steps_done < steps_to_run):
                save(epoch, progress.samples_in_epoch)
        del loader
        if ctx.device.type == "cuda":
            torch.cuda.synchronize(ctx.device)  # count queued kernels in the epoch time
        train_time = time.time() - epoch_start

        total_loss, total_correct, total_seen = all_reduce_sum(
            ctx, [float(loss_sum), float(correct), float(seen)])
        sync_buffers(model, ctx)
        test_loss, test_acc = evaluate(model, test_images, test_labels, ctx, use_amp)
        epoch_time = time.time() - epoch_start
        record = {
            "epoch": epoch + 1,
            "epochs": args.epochs,
            "step": progress.step,
            "world_size": ctx.world_size,
            "train_loss": round(total_loss / max(total_seen, 1.0), 5),
            "train_accuracy": round(total_correct / max(total_seen, 1.0), 5),
            "test_loss": round(test_loss, 5),
            "test_accuracy": round(test_acc, 5),
            "images": int(total_seen),
            "images_per_sec": round(total_seen / max(train_time, 1e-9), 1),
            "train_time_s": round(train_time, 3),
            "epoch_time_s": round(epoch_time, 3),
            "lr": round(scheduler.get_last_lr()[0], 6),
        }
        history.append(record)
        log_event(ctx, "epoch", **record)
        progress.epoch += 1
        progress.samples_in_epoch = 0
        save(progress.epoch, 0)

    if ctx.is_main:
        write_final_artifacts(args, ctx, model, model_config, class_names, history, run_start)
    if ctx.distributed:
        dist.barrier()
    return 0


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


def write_final_artifacts(args: argparse.Namespace, ctx: DistContext, model: nn.Module,
                          model_config: cifar.ModelConfig, class_names: list[str],
                          history: list[dict[str, Any]], run_start: float) -> None:
    """Rank 0: ``model.pt``, ``training_summary.json`` and ``DONE`` (all atomic)."""
    output_dir: Path = args.output_dir
    final = history[-1] if history else {}
    state_dict = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    model_path = cifar.atomic_torch_save(output_dir / "model.pt", {
        "format_version": FORMAT_VERSION,
        "state_dict": state_dict,
        "model_config": model_config.to_dict(),
        "class_names": class_names,
        "epochs": args.epochs,
        "test_accuracy": final.get("test_accuracy"),
    })
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
    metrics.write_metrics(output_dir, "train.py", **training_metrics(history))
    cifar_io.atomic_write_json(output_dir / "DONE", {"finished_at": summary["finished_at"],
                                                  "model": str(model_path)})
    log_event(ctx, "done", model=str(model_path), test_accuracy=final.get("test_accuracy"),
              world_size=ctx.world_size)


if __name__ == "__main__":
    sys.exit(main())
