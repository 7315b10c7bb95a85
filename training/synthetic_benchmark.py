"""Training throughput on synthetic images (images/s): ResNet-50 (or ResNet-18/34/101) under torchrun, DDP.

Every rank trains on one random batch repeated, so it measures the GPU's compute and the gradient all-reduce, no input
pipeline; after ``--warmup-steps`` it times ``--steps`` steps (the slowest rank's time). Without torchrun it runs as
one process. The models are torchvision's ResNet v1.5, written out here (the image has no torchvision). Rank 0
prints one JSON line per phase and a ``benchmark_result`` line, and writes into ``--output-dir`` (default
``$OUTPUT_DIR``) ``synthetic_benchmark.json``, ``metrics.json`` (:mod:`metrics`) and ``DONE``. Collectives time out
after ``--pg-timeout-seconds`` (default ``$PG_TIMEOUT_SECONDS``, else 60 s). Exit codes: 0 done, 2 usage error.
More: "The synthetic benchmark" in docs/explanation/programs.md."""

from __future__ import annotations

import time

#: When this process started running Python code (before torch is imported), for the goodput accounting.
PROCESS_START = time.time()

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent))

import metrics  # noqa: E402  (needs the sys.path entry above)
import process_end  # noqa: E402

#: ResNet depths: block type and blocks per stage (He et al. 2015, Table 1; torchvision's resnet.py).
ARCHITECTURES: dict[str, tuple[str, tuple[int, int, int, int]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
}
DONE_MARKER = "DONE"


def conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions (ResNet-18/34)."""

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int, downsample: nn.Module | None) -> None:
        super().__init__()
        self.conv1, self.bn1 = conv3x3(cin, width, stride), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv3x3(width, width), nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    """1x1, 3x3 (strided: ResNet v1.5), 1x1 convolutions with 4x expansion (ResNet-50/101)."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int, downsample: nn.Module | None) -> None:
        super().__init__()
        self.conv1, self.bn1 = conv1x1(cin, width), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = conv3x3(width, width, stride), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = conv1x1(width, width * 4), nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


def resnet(name: str, classes: int = 1000) -> nn.Module:
    """The ResNet ``name`` (a key of :data:`ARCHITECTURES`) for ``classes`` classes, randomly initialised."""
    kind, blocks = ARCHITECTURES[name]
    block: Callable[..., nn.Module] = Bottleneck if kind == "bottleneck" else BasicBlock
    expansion = 4 if kind == "bottleneck" else 1
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
    ]
    cin = 64
    for stage, (width, count) in enumerate(zip((64, 128, 256, 512), blocks)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            downsample = None
            if stride != 1 or cin != width * expansion:
                downsample = nn.Sequential(conv1x1(cin, width * expansion, stride), nn.BatchNorm2d(width * expansion))
            layers.append(block(cin, width, stride, downsample))
            cin = width * expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    model = nn.Sequential(*layers)
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50", choices=sorted(ARCHITECTURES))
    parser.add_argument("--batch-size", type=int, default=64, help="images per process and step")
    parser.add_argument("--image-size", type=int, default=224, help="height and width of the synthetic images")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50, help="timed steps")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=os.environ.get("OUTPUT_DIR"),
        help="where the result, metrics.json and DONE go (default $OUTPUT_DIR)",
    )
    # The job's collectiveTimeoutSeconds reaches the pods as PG_TIMEOUT_SECONDS (components/workloads/pytorch.py),
    # read here as train.py reads it: a hung peer stalls the other ranks (and every GPU of the run) this long.
    env_timeout = os.environ.get("PG_TIMEOUT_SECONDS", "")
    parser.add_argument(
        "--pg-timeout-seconds",
        type=float,
        default=float(env_timeout) if env_timeout else 60.0,
        help="timeout of every collective (init_process_group(timeout=...)): how long a hung peer "
        "stalls the others before the ranks fail (default $PG_TIMEOUT_SECONDS, else 60, as train.py)",
    )
    args = parser.parse_args(argv)
    for name in ("batch_size", "image_size", "classes", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup_steps < 0:
        parser.error("--warmup-steps must be >= 0")
    if args.pg_timeout_seconds <= 0:
        parser.error("--pg-timeout-seconds must be > 0")
    if args.image_size < 32:
        parser.error("--image-size must be >= 32 (five stride-2 stages)")
    return args


def emit(rank: int, event: str, **fields: Any) -> None:
    """One JSON line on rank 0."""
    if rank == 0:
        print(json.dumps({"event": event, "time": round(time.time(), 3), **fields}), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.time()
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group(
            "nccl" if use_cuda else "gloo",
            timeout=dt.timedelta(seconds=args.pg_timeout_seconds),
            device_id=device if use_cuda else None,
        )
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    try:
        return run(args, device, rank, world, distributed, started)
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def run(
    args: argparse.Namespace, device: torch.device, rank: int, world: int, distributed: bool, started: float
) -> int:
    torch.manual_seed(rank)
    model = build_model(args.model, args.classes, device)
    params = sum(p.numel() for p in model.parameters())
    emit(
        rank,
        "start",
        setup_s=round(time.time() - PROCESS_START, 3),
        model=args.model,
        parameters=params,
        world_size=world,
        device=str(device),
        batch_size=args.batch_size,
        image_size=args.image_size,
        torch=torch.__version__,
    )
    step = training_step(model, args, device, distributed)
    for _ in range(args.warmup_steps):
        step()
    synchronize(device, distributed)
    emit(rank, "warmed_up", steps=args.warmup_steps)
    # For the launcher's goodput accounting (goodput.py): the warm-up is starting time, the timed steps are training.
    emit(rank, "first_step", step=args.warmup_steps)
    elapsed, loss = timed_steps(step, args.steps, device)
    elapsed, mean_loss = across_ranks(elapsed, loss, device, distributed, world)
    result = benchmark_result(args, params, world, elapsed, mean_loss, device)
    emit(rank, "progress", step=args.warmup_steps + args.steps)
    emit(rank, "benchmark_result", **result)
    if rank == 0 and args.output_dir is not None:
        write_outputs(args.output_dir, result, args, world, started)
        emit(rank, "done")
    if distributed:
        dist.barrier()
    return 0


def build_model(name: str, classes: int, device: torch.device) -> nn.Module:
    """The ResNet on ``device`` (channels-last on a GPU, for mixed precision)."""
    model: nn.Module = resnet(name, classes).to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return model


def training_step(
    model: nn.Module, args: argparse.Namespace, device: torch.device, distributed: bool
) -> Callable[[], torch.Tensor]:
    """One SGD step on one random batch, the same every step (DDP when ``distributed``; fp16 autocast on a GPU)."""
    use_amp = device.type == "cuda"
    ddp: nn.Module = (
        DistributedDataParallel(model, device_ids=[device.index] if use_amp else None) if distributed else model
    )
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    criterion = nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    if use_amp:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, args.classes, (args.batch_size,), device=device)

    def step() -> torch.Tensor:
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
            loss = criterion(ddp(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return step


def synchronize(device: torch.device, distributed: bool) -> None:
    """Wait for the GPU's queued work, then for every rank."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if distributed:
        dist.barrier()


def timed_steps(step: Callable[[], torch.Tensor], steps: int, device: torch.device) -> tuple[float, torch.Tensor]:
    """Seconds ``steps`` steps took on this rank, and the last step's loss."""
    t0 = time.perf_counter()
    loss = torch.zeros((), device=device)
    for _ in range(steps):
        loss = step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, loss


def across_ranks(
    elapsed: float, loss: torch.Tensor, device: torch.device, distributed: bool, world: int
) -> tuple[float, float]:
    """The slowest rank's time, and the loss averaged over ranks."""
    totals = torch.tensor([elapsed, float(loss)], dtype=torch.float64, device=device)
    if distributed:
        slowest = totals[:1].clone()
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        return float(slowest[0]), float(totals[1]) / world
    return elapsed, float(totals[1])


def benchmark_result(
    args: argparse.Namespace, params: int, world: int, elapsed: float, mean_loss: float, device: torch.device
) -> dict[str, Any]:
    """The ``benchmark_result`` line's fields, also ``synthetic_benchmark.json``."""
    images_per_sec = args.steps * args.batch_size * world / elapsed
    return {
        "model": args.model,
        "parameters": params,
        "world_size": world,
        "batch_size_per_process": args.batch_size,
        "image_size": args.image_size,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "timed_s": round(elapsed, 4),
        "step_time_s": round(elapsed / args.steps, 5),
        "images_per_sec": round(images_per_sec, 2),
        "images_per_sec_per_process": round(images_per_sec / world, 2),
        "final_loss": round(mean_loss, 5),
        "device": device.type,
        "amp": device.type == "cuda",
    }


def write_outputs(out: Path, result: dict[str, Any], args: argparse.Namespace, world: int, started: float) -> None:
    """Rank 0's ``synthetic_benchmark.json``, ``metrics.json`` and ``DONE`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "synthetic_benchmark.json").write_text(json.dumps(result, indent=1) + "\n")
    metrics.write_metrics(
        out,
        "synthetic_benchmark.py",
        wall_time_s=round(time.time() - started, 3),
        throughput=result["images_per_sec"],
        throughput_unit="images/s",
        final_loss=result["final_loss"],
        world_size=world,
        model=args.model,
        timed_s=result["timed_s"],
        images_per_sec_per_process=result["images_per_sec_per_process"],
    )
    (out / DONE_MARKER).write_text(json.dumps({"finished_at": dt.datetime.now(dt.UTC).isoformat()}) + "\n")


if __name__ == "__main__":
    process_end.end_process(main())
