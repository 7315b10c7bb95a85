"""Multi-node data-parallel training of a ResNet-9 on CIFAR-10, launched by torchrun.

One ``torchrun`` per node (in the pods: through ``launch.py``); without torchrun it runs as a single process. Rank 0
checkpoints every epoch and every ``--checkpoint-every-seconds`` (:mod:`checkpointer`), holds the run lease
(:mod:`run_lease`) and ends a crash loop (``--max-failed-attempts``) by writing ``FAILED``; a stop signal ends every
rank after the same step, with its checkpoint. Exit codes: 0 the run is over (``DONE`` or ``FAILED`` written), 75
(:data:`EXIT_STOPPED`) stopped in order at a step boundary, checkpoint written (a stop request, the lease yielded or
lost), 1 an error, 2 a usage error. Outputs in ``--output-dir``: ``checkpoint-step<N>.pt`` (the newest
``--keep-checkpoints``), ``model.pt``, ``training_summary.json``, ``metrics.json`` (:mod:`metrics`), ``DONE`` (or
``FAILED``) and ``lease/``; progress goes to stdout as one JSON object a line (rank 0 only).

The command line, the recipe and the outputs: "The bundled trainer" in docs/explanation/programs.md; what happens on
a stop, a lost node or a slow volume: docs/explanation/failures.md."""

from __future__ import annotations

import time

#: When this process started running Python code (before torch is imported), for the timings.
PROCESS_START = time.time()

import argparse
import collections
import datetime as dt
import itertools
import json
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Iterator

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cifar  # noqa: E402  (needs the sys.path entry above)
import cifar_io  # noqa: E402
import metrics  # noqa: E402
import checkpointer  # noqa: E402
import process_end  # noqa: E402
import run_script  # noqa: E402
import run_lease  # noqa: E402
from dist_context import (  # noqa: E402
    DistContext,
    all_reduce_sum,
    broadcast_object,
    effective_pg_timeout,
    gather_objects,
    hand_off,
    log_event,
    setup_distributed,
    wait_for_all,
    wait_for_main,
)
from train_flags import (  # noqa: E402
    add_checkpoint_flags,
    add_fault_flags,
    add_folder_flags,
    add_recipe_flags,
    add_reporting_flags,
    add_sampling_flags,
    check_ranges,
)

FORMAT_VERSION = checkpointer.FORMAT_VERSION
FAILED_MARKER = run_script.FAILED_MARKER

EXIT_OK = 0
#: Stopped in order at a step boundary with the checkpoint written; the run continues elsewhere.
#: Non-zero on purpose: torchrun treats a worker's 0 as "the job succeeded" (exit barrier, then
#: the pod would complete), so 0 is reserved for a run that is over.
EXIT_STOPPED = 75
#: Seconds between two looks at the lease while another group holds it.
LEASE_POLL_S = 1.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line interface; the defaults are the production recipe, some read from the environment
    (:data:`train_flags.ENV_DEFAULTS`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_folder_flags(parser)
    add_recipe_flags(parser)
    add_checkpoint_flags(parser)
    add_reporting_flags(parser)
    add_sampling_flags(parser)
    add_fault_flags(parser)
    args = parser.parse_args(argv)
    check_ranges(parser, args)
    return args


# --------------------------------------------------------------------------- #
# Stop requests (the distributed setup, the collectives and rank 0's log lines: dist_context.py)
# --------------------------------------------------------------------------- #


class StopRequest:
    """SIGTERM/SIGINT only set a flag; the training loop acts on it at a step boundary."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.received_at: float | None = None
        self.logged = False

    def install(self) -> None:
        """Install the handlers (main thread, before anything slow)."""
        for sig in self.SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum, self.received_at = signum, time.time()

    @property
    def requested(self) -> bool:
        """A stop signal arrived."""
        return self.signum is not None

    def log_once(self, ctx: DistContext, step: int) -> None:
        """The rank that received the signal says so (once, on its own stdout)."""
        if self.signum is not None and not self.logged:
            self.logged = True
            print(
                json.dumps(
                    {
                        "event": "stop_requested",
                        "time": round(time.time(), 3),
                        "rank": ctx.rank,
                        "signal": signal.Signals(self.signum).name,
                        "received_at": self.received_at,
                        "step": step,
                    }
                ),
                flush=True,
            )


def _worker_init(_worker_id: int) -> None:
    """DataLoader workers ignore the stop signals, so they keep serving batches until the trainer has written its
    stop checkpoint. torchrun stops a worker by signalling its whole process group (``os.killpg`` in
    ``torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py``), so the kubelet's
    SIGTERM, forwarded by the launcher, reaches the DataLoader workers too; a DataLoader worker that died of it made the trainer fail on its next batch
    ("DataLoader worker ... killed by signal: Terminated") before it could checkpoint: the steps since the last
    checkpoint were lost and the stop counted as a failed attempt. The workers still end: the trainer drops its
    loader at the stop (workers are joined), and a worker whose trainer is gone exits on its own (PyTorch's
    DataLoader worker loop watches its parent); SIGKILL ends them as it ends the trainer."""
    for sig in StopRequest.SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # also discards one that arrived while blocked (see start_loader)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, StopRequest.SIGNALS)


def start_loader(loader: DataLoader[Any]) -> Iterator[Any]:
    """``iter(loader)``, its worker processes started with the stop signals blocked.

    Why: a DataLoader worker is forked, then installs PyTorch's own SIGTERM handler
    (``_set_worker_signal_handlers`` in ``torch/utils/data/_utils/worker.py``; ``handler_SIGTERM`` in
    ``torch/csrc/DataLoader.cpp`` re-raises with the default action, so the worker dies, unless the sender is its
    parent), and only later runs ``worker_init_fn``. A stop signal sent to the process group in between (torchrun's
    SIGTERM on a membership change, landing as an epoch's new loader starts) killed a worker, and the trainer
    failed on its next batch instead of checkpointing (seen in CI under load). Blocked, the signal stays pending in the
    new worker until :func:`_worker_init` ignores it (which discards it). The trainer itself loses nothing: its other
    threads keep the signals unblocked, and one pending on this thread is delivered when the mask is restored, a few
    milliseconds later."""
    if not loader.num_workers:
        return iter(loader)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, StopRequest.SIGNALS)
    try:
        return iter(loader)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@dataclass
class StepFlags:
    """What rank 0 learned from the lease since the last step (sent with the next step's sums)."""

    yield_to_other_group: bool = False
    lease_lost: bool = False

    def update(self, outcome: str) -> None:
        """Fold in a :meth:`run_lease.RunLease.renew` outcome."""
        self.yield_to_other_group |= outcome == "yield"
        self.lease_lost |= outcome == "lost"


@dataclass(frozen=True)
class StepSums:
    """One step's all-reduced sums: training statistics and stop reasons."""

    loss_sum: float
    correct: float
    images: float
    signalled: int
    yielding: bool
    lease_lost: bool

    @property
    def stop(self) -> bool:
        """Every rank stops after this step."""
        return bool(self.signalled or self.yielding or self.lease_lost)

    def reasons(self) -> dict[str, Any]:
        """Why the group stops (for the log)."""
        return {"ranks_signalled": self.signalled, "yield_to_other_group": self.yielding, "lease_lost": self.lease_lost}


def combine_step(
    ctx: DistContext,
    loss_sum: torch.Tensor | float,
    correct: torch.Tensor | float,
    images: int,
    stop: StopRequest,
    flags: StepFlags,
) -> StepSums:
    """The per-step all-reduce: loss, accuracy, images and every rank's stop flag in one tensor."""
    parts = [
        torch.as_tensor(loss_sum, dtype=torch.float64, device=ctx.device).reshape(1),
        torch.as_tensor(correct, dtype=torch.float64, device=ctx.device).reshape(1),
        torch.tensor(
            [float(images), float(stop.requested), float(flags.yield_to_other_group), float(flags.lease_lost)],
            dtype=torch.float64,
            device=ctx.device,
        ),
    ]
    tensor = torch.cat(parts)
    if ctx.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    values = tensor.tolist()
    return StepSums(values[0], values[1], values[2], int(values[3]), values[4] > 0, values[5] > 0)


def json_args(args: argparse.Namespace) -> dict[str, Any]:
    """``args`` as plain JSON-compatible values (so checkpoints load with weights_only)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}


def read_failed_marker(output_dir: Path) -> dict[str, Any] | None:
    """Contents of ``FAILED`` (``{}`` if not JSON), or None when the run has not given up."""
    try:
        data = json.loads((output_dir / FAILED_MARKER).read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


# --------------------------------------------------------------------------- #
# Training
# --------------------------------------------------------------------------- #
@dataclass
class Progress:
    """Position in the training run (what a checkpoint restores)."""

    epoch: int = 0
    step: int = 0
    samples_in_epoch: int = 0


@dataclass
class EpochStats:
    """Sums over the current epoch so far, across resumes (stored in mid-epoch checkpoints)."""

    loss_sum: float = 0.0
    correct: float = 0.0
    images: int = 0
    train_time_s: float = 0.0
    segments: int = 0
    world_sizes: list[int] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EpochStats:
        """Restore from a checkpoint (an empty epoch for checkpoints without it)."""
        if not data:
            return cls()
        return cls(
            float(data["loss_sum"]),
            float(data["correct"]),
            int(data["images"]),
            float(data["train_time_s"]),
            int(data["segments"]),
            [int(w) for w in data["world_sizes"]],
        )

    def start_segment(self, world_size: int) -> None:
        """A new stretch of this epoch begins (first start or a resume)."""
        self.segments += 1
        if world_size not in self.world_sizes:
            self.world_sizes.append(world_size)

    def add(self, sums: StepSums) -> None:
        """Fold in one step's all-reduced sums."""
        self.loss_sum += sums.loss_sum
        self.correct += sums.correct
        self.images += int(sums.images)


class ScalarLog:
    """Rank 0's TensorBoard scalars (nothing without a folder, or on other ranks).

    The step is the global optimizer step, so the curves continue across resumes and world sizes; on a
    resume, events an interrupted attempt wrote at or after the resumed step are purged (``purge_step``),
    so every step shows once.

    The event file is on the shared volume, and ``SummaryWriter`` blocks its caller once its small queue is full
    while its own thread waits on the volume (``tensorboard/summary/writer/event_file_writer.py``); ``flush`` waits
    for the volume too. So the training loop only appends to a bounded queue here, a thread of its own owns the
    writer, and when the volume stalls long enough for the queue to fill, the oldest scalars are dropped (counted):
    a stalled volume costs curve points, never the collective the other ranks wait in.
    """

    #: Scalars held while the volume stalls (about 5 minutes of steps at 60 steps/s, with two scalars per step).
    QUEUE_LIMIT = 40_000

    def __init__(self, log_dir: Path | None, ctx: DistContext, resume_step: int) -> None:
        self._queue: collections.deque[tuple[str, float, int] | None] = collections.deque(maxlen=self.QUEUE_LIMIT)
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        if log_dir is None or not ctx.is_main:
            return
        self._thread = threading.Thread(
            target=self._run, args=(log_dir, resume_step), name="scalar-writer", daemon=True
        )
        self._thread.start()

    def _put(self, item: tuple[str, float, int] | None) -> None:
        if self._thread is None:
            return
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
        self._queue.append(item)
        self._ready.set()

    def _run(self, log_dir: Path, resume_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package (requirements.txt)

        log_dir.mkdir(parents=True, exist_ok=True)
        writer = SummaryWriter(str(log_dir), purge_step=resume_step or None, flush_secs=30)
        while True:
            self._ready.wait()
            self._ready.clear()
            while self._queue:
                item = self._queue.popleft()
                if item is None:
                    writer.close()
                    return
                tag, value, step = item
                if tag == "":
                    writer.flush()
                else:
                    writer.add_scalar(tag, value, step)

    def step(self, step: int, sums: StepSums) -> None:
        """Training loss and accuracy of one step (all ranks' images)."""
        if sums.images:
            self._put(("train/loss", sums.loss_sum / sums.images, step))
            self._put(("train/accuracy", sums.correct / sums.images, step))

    def epoch(self, step: int, record: dict[str, Any]) -> None:
        """Held-out accuracy and loss, and the epoch's training throughput, at the epoch's last step."""
        self._put(("test/accuracy", record["test_accuracy"], step))
        self._put(("test/loss", record["test_loss"], step))
        self._put(("throughput/images_per_sec", record["images_per_sec"], step))
        self._put(("", 0.0, step))  # flush, in the writer's thread

    def close(self, timeout_s: float = 10.0) -> bool:
        """Write what is pending, waiting at most ``timeout_s``; False if the volume did not take it in time (the
        thread is a daemon: what it still holds is lost with the process)."""
        if self._thread is None:
            return True
        self._put(None)
        self._thread.join(timeout_s)
        done = not self._thread.is_alive()
        self._thread = None
        return done


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


@torch.no_grad()
def sync_buffers(model: nn.Module, ctx: DistContext) -> None:
    """Copy rank 0's BatchNorm running statistics to every rank (they drift per rank)."""
    if ctx.distributed:
        for buffer in model.buffers():
            dist.broadcast(buffer, src=0)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    ctx: DistContext,
    use_amp: bool,
    batch_size: int = 1000,
    tick: Callable[[], None] | None = None,
) -> tuple[float, float]:
    """Test loss and accuracy; each rank scores a 1/world slice, results are summed.

    ``model`` must be the bare module, not the DDP wrapper: the slices may
    need different numbers of batches, and DDP's forward is a collective.
    ``tick`` runs after every batch (rank 0 renews the lease there).
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
        if tick is not None:
            tick()
    total_loss, total_correct, total = all_reduce_sum(ctx, [loss_sum, correct, float(shard.numel())])
    model.train()
    return total_loss / max(total, 1.0), total_correct / max(total, 1.0)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code, which ``__main__`` ends the process with (``process_end.end_process``).

    An error (typically a collective that failed because a peer died or hung) ends the process at
    once with exit code 1 after printing the traceback: the process group is broken, and tearing it
    down can take seconds, which would delay the agent's re-rendezvous that the surviving ranks are
    waiting for. Otherwise the process group is destroyed first (every rank has passed the run's last
    hand-off, :func:`hand_off`), so NCCL's communicators are shut down rather than dropped.
    """
    os.environ[run_script.OWN_BUDGET_ENV] = "1"  # this trainer ends its crash loops itself (--max-failed-attempts)
    args = parse_args(argv)
    stop = StopRequest()
    stop.install()
    ctx = setup_distributed(args.pg_timeout_seconds)
    try:
        code = run(args, ctx, stop)
    except Exception as exc:
        traceback.print_exc()
        print(
            json.dumps({"event": "fatal", "time": round(time.time(), 3), "rank": ctx.rank, "error": repr(exc)[:500]}),
            flush=True,
        )
        process_end.end_process(1)
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()
    return code


def acquire_lease(args: argparse.Namespace, ctx: DistContext, stop: StopRequest) -> run_lease.RunLease | None | int:
    """Take the run lease (rank 0) before touching the output folder; every rank waits for the verdict.

    Returns the lease on rank 0 and None on other ranks once it is held, or
    :data:`EXIT_STOPPED` if a stop was requested while another group held it.
    """
    members = [str(m) for m in gather_objects(ctx, run_lease.node_id())]
    lease = None
    if ctx.is_main:
        lease = run_lease.RunLease(
            args.output_dir,
            members,
            args.lease_ttl_seconds,
            ctx.world_size,
            restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        )
    waiting_since: float | None = None
    last_wait_log = 0.0
    attempt = -1
    while True:  # mypy knows this loop only ends by a return (it does not know that of itertools.count())
        attempt += 1
        acquired = 0.0
        if lease is not None:
            verdict = lease.try_acquire()
            if verdict.acquired:
                acquired = 1.0
                assert lease.record is not None
                log_event(
                    ctx,
                    "lease_acquired",
                    generation=lease.record.generation,
                    members=members,
                    why=verdict.why,
                    previous=verdict.holder.summary() if verdict.holder else None,
                    waited_s=round(time.monotonic() - waiting_since, 2) if waiting_since else 0.0,
                )
            else:
                if verdict.holder is not None:
                    lease.post_request(verdict.holder)
                now = time.monotonic()
                if waiting_since is None:
                    waiting_since = now
                if now - last_wait_log >= 30.0:
                    last_wait_log = now
                    log_event(
                        ctx,
                        "lease_wait",
                        why=verdict.why,
                        members=members,
                        holder=verdict.holder.summary() if verdict.holder else None,
                        waited_s=round(now - waiting_since, 2),
                        text="another group owns this run; waiting (it was asked to yield)",
                    )
        wait_for_main(ctx, f"lease/{attempt}", args.checkpoint_deadline_seconds)  # rank 0's look at the volume
        got, stopping = all_reduce_sum(ctx, [acquired, float(stop.requested)])
        if got:
            return lease
        if stopping:
            stop.log_once(ctx, 0)
            if lease is not None:
                lease.withdraw_request()
            log_event(
                ctx,
                "stopping",
                step=None,
                reasons={"ranks_signalled": int(stopping)},
                text="stop requested while waiting for the lease; nothing to save",
            )
            return EXIT_STOPPED
        time.sleep(LEASE_POLL_S)


def run(args: argparse.Namespace, ctx: DistContext, stop: StopRequest) -> int:
    """Train (or resume) until ``--epochs`` are done and write the final artifacts."""
    run_start = time.time()
    output_dir: Path = args.output_dir
    if ctx.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)

    log_event(
        ctx,
        "start",
        world_size=ctx.world_size,
        backend=ctx.backend,
        device=str(ctx.device),
        restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        run_id=os.environ.get("TORCHELASTIC_RUN_ID"),
        host=socket.gethostname(),
        node=run_lease.node_id(),
        pg_timeout_s=effective_pg_timeout(ctx),
        setup_s=round(time.time() - PROCESS_START, 3),
        torch=torch.__version__,
        args=json_args(args),
    )

    marker = read_failed_marker(output_dir) if ctx.is_main else None
    wait_for_main(ctx, "failed-marker", args.checkpoint_deadline_seconds)
    failed = broadcast_object(ctx, marker)
    if failed is not None:
        log_event(
            ctx,
            "run_failed_earlier",
            failed=failed,
            text=f"{output_dir / FAILED_MARKER} exists: the run gave up; delete it to retry",
        )
        return EXIT_OK

    held = acquire_lease(args, ctx, stop)
    if isinstance(held, int):
        return held
    lease = held
    try:
        return train(args, ctx, stop, lease, run_start)
    except BaseException as exc:
        if lease is not None:
            lease.release(run_lease.FAILED, reason=repr(exc)[:500])
        raise


def train(
    args: argparse.Namespace, ctx: DistContext, stop: StopRequest, lease: run_lease.RunLease | None, run_start: float
) -> int:
    """The training run proper, with the lease held by rank 0 (``lease`` is None on other ranks): the resume point,
    the data, the model and its restored state, then the epochs (:class:`Attempt`)."""
    use_amp = ctx.device.type == "cuda"
    if use_amp:
        torch.backends.cudnn.benchmark = True
    if ctx.is_main:
        checkpointer.remove_stale_temp_files(args.output_dir)
    resume = choose_resume(args, ctx, lease)
    if resume.give_up:
        return give_up_run(args, ctx, lease, resume.failures, resume.chosen)
    data = load_data(args, ctx)
    state = make_model(args, ctx, data, resume.checkpoint, use_amp)
    progress, history, stats = restore(args, ctx, state, resume)
    del resume  # the checkpoint's tensors are in the model and optimizer now
    wait_for_all(ctx, "loaded", args.checkpoint_deadline_seconds)  # every rank read the dataset and the checkpoint
    attempt = Attempt(args, ctx, stop, lease, run_start, use_amp, data, state, progress, history, stats)
    return attempt.run()


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


class Attempt:
    """This attempt's training, from its first step to the end of the run or the group's stop: every rank runs the
    same steps; rank 0 also writes the checkpoints and keeps the lease (``lease`` and ``keeper`` are None on other
    ranks)."""

    def __init__(
        self,
        args: argparse.Namespace,
        ctx: DistContext,
        stop: StopRequest,
        lease: run_lease.RunLease | None,
        run_start: float,
        use_amp: bool,
        data: CifarData,
        state: ModelState,
        progress: Progress,
        history: list[dict[str, Any]],
        stats: EpochStats,
    ) -> None:
        self.args, self.ctx, self.stop, self.lease, self.run_start = args, ctx, stop, lease, run_start
        self.use_amp, self.data, self.state = use_amp, data, state
        self.progress, self.history, self.stats = progress, history, stats
        self.output_dir: Path = args.output_dir
        self.ddp_model: nn.Module = state.model
        if ctx.distributed:
            device_ids = [ctx.local_rank] if ctx.device.type == "cuda" else None
            self.ddp_model = DistributedDataParallel(state.model, device_ids=device_ids)
        self.criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
        self.dataset = cifar.CifarArrays(data.train_images, data.train_labels, augment=True)
        self.sampler = cifar.ResumableDistributedSampler(len(self.dataset), ctx.world_size, ctx.rank, args.seed)
        self.global_batch = args.batch_size * ctx.world_size
        if self.global_batch > len(self.dataset):
            raise SystemExit(f"global batch {self.global_batch} exceeds the {len(self.dataset)} training images")
        self.flags = StepFlags()
        self.scalars = ScalarLog(args.tensorboard_dir, ctx, progress.step)
        self.saved_step = progress.step  # the step of the newest checkpoint, written or being written
        self.saved_at = time.monotonic()  # when its state was staged: the cadence's clock
        self.writer = checkpointer.Checkpointer(
            args.checkpoint_deadline_seconds,
            may_publish=lambda: lease is None or lease.still_owner(),
            published=self.published,
        )
        # Rank 0: the lease is renewed by a thread of its own (a slow volume must not hold this loop, see
        # run_lease.LeaseKeeper); the loop tells it that it is alive and reads what it learned.
        self.keeper = run_lease.LeaseKeeper(lease).start() if lease is not None else None
        self.first_step_logged = False
        self.progress_at = 0.0  # when rank 0 last printed a progress line (monotonic)

    def run(self) -> int:
        """The epochs until ``--epochs`` are done (then the end of the run), or until the group agrees to stop."""
        self.renew()
        setup_sums = combine_step(self.ctx, 0.0, 0.0, 0, self.stop, self.flags)  # a stop requested during the setup
        if setup_sums.stop:
            return self.stop_here(setup_sums, self.progress.epoch, self.stats)
        self.progress_at = time.monotonic()
        self.ddp_model.train()
        while self.progress.epoch < self.args.epochs:
            epoch = self.progress.epoch
            stopping, segment_start, train_time = self.train_epoch(epoch)
            if stopping is not None:
                return self.stop_here(stopping, epoch, self.stats)
            self.end_epoch(epoch, segment_start, train_time)
            sums = combine_step(self.ctx, 0.0, 0.0, 0, self.stop, self.flags)
            if sums.stop:
                return self.stop_here(sums, self.progress.epoch, self.stats)
        return self.finish()

    def epoch_loader(self, epoch: int) -> tuple[DataLoader[Any], int, int]:
        """The epoch's loader from where the epoch stands (a resume starts mid-epoch), its budget of images and the
        steps to run at this world size."""
        args, ctx, progress = self.args, self.ctx, self.progress
        epoch_budget = len(self.dataset)
        if args.max_steps_per_epoch:
            epoch_budget = min(epoch_budget, args.max_steps_per_epoch * self.global_batch)
        self.sampler.set_epoch(epoch)
        self.sampler.set_start(min(progress.samples_in_epoch, len(self.dataset)))
        steps_available = len(self.sampler) // args.batch_size
        steps_to_run = max(0, min(steps_available, (epoch_budget - progress.samples_in_epoch) // self.global_batch))
        torch.manual_seed(args.seed * 100003 + epoch * 1009 + ctx.rank * 7 + progress.step)
        loader = make_loader(
            self.dataset, self.sampler, args, ctx, seed=args.seed + 1_000_003 * epoch + 7919 * ctx.rank + progress.step
        )
        return loader, epoch_budget, steps_to_run

    def train_epoch(self, epoch: int) -> tuple[StepSums | None, float, float]:
        """The epoch's steps; returns the sums the group stops at (None: go on to the evaluation), when this
        stretch of the epoch started and how long it trained."""
        loader, epoch_budget, steps_to_run = self.epoch_loader(epoch)
        self.stats.start_segment(self.ctx.world_size)
        segment_start = time.time()
        stopping: StepSums | None = None
        for steps_done, (x, y) in enumerate(itertools.islice(start_loader(loader), steps_to_run), start=1):
            sums = self.step(x, y, epoch, epoch_budget)
            if sums.stop:
                stopping = sums
                break
            self.between_steps(epoch, more=steps_done < steps_to_run)
        del loader
        if self.ctx.device.type == "cuda":
            torch.cuda.synchronize(self.ctx.device)  # count queued kernels in the epoch time
        train_time = time.time() - segment_start
        self.stats.train_time_s += train_time
        if stopping is None:  # flags raised at the epoch's last step (or by its last renewal) count too
            end_sums = combine_step(self.ctx, 0.0, 0.0, 0, self.stop, self.flags)
            stopping = end_sums if end_sums.stop else None
        return stopping, segment_start, train_time

    def step(self, x: torch.Tensor, y: torch.Tensor, epoch: int, epoch_budget: int) -> StepSums:
        """One optimizer step, then its all-reduce (statistics and every rank's stop flags) and its scalars."""
        ctx, state, progress = self.ctx, self.state, self.progress
        state.scheduler.set_progress((epoch + progress.samples_in_epoch / epoch_budget) / self.args.epochs)
        x = x.to(ctx.device, non_blocking=True)
        y = y.to(ctx.device, non_blocking=True)
        if ctx.device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=ctx.device.type, dtype=torch.float16, enabled=self.use_amp):
            logits = self.ddp_model(x)
            loss = self.criterion(logits, y)
        state.optimizer.zero_grad(set_to_none=True)
        state.scaler.scale(loss).backward()
        state.scaler.step(state.optimizer)
        state.scaler.update()
        progress.step += 1
        progress.samples_in_epoch += self.global_batch
        sums = combine_step(
            ctx,
            loss.detach().double() * y.shape[0],
            (logits.detach().argmax(dim=1) == y).sum(),
            int(y.shape[0]),
            self.stop,
            self.flags,
        )
        self.stats.add(sums)
        self.scalars.step(progress.step, sums)
        if not self.first_step_logged:
            self.first_step_logged = True
            log_event(
                ctx,
                "first_step",
                step=progress.step,
                epoch=epoch,
                world_size=ctx.world_size,
                seconds_since_start=round(time.time() - self.run_start, 3),
                seconds_since_process_start=round(time.time() - PROCESS_START, 3),
            )
        return sums

    def between_steps(self, epoch: int, more: bool) -> None:
        """After a step the group goes on from: rank 0's progress line, the writer's health and a checkpoint due
        (only if ``more`` steps follow in this epoch: its end writes one), then the lease's news."""
        ctx = self.ctx
        if ctx.is_main and time.monotonic() - self.progress_at >= self.args.progress_every_seconds:
            self.progress_at = time.monotonic()
            log_event(ctx, "progress", step=self.progress.step, epoch=epoch)
        if ctx.is_main:
            self.writer.check()  # a failed write, or one past its deadline, ends the attempt with the reason
            if more and self.checkpoint_due():
                self.save(epoch, self.progress.samples_in_epoch, self.stats)
        self.renew()

    def end_epoch(self, epoch: int, segment_start: float, train_time: float) -> None:
        """The epoch's evaluation and record (history, TensorBoard, log); then the next epoch starts, checkpointed."""
        ctx, progress = self.ctx, self.progress
        eval_from = time.time()
        sync_buffers(self.state.model, ctx)
        test_loss, test_acc = evaluate(
            self.state.model, self.data.test_images, self.data.test_labels, ctx, self.use_amp, tick=self.renew
        )
        eval_s = time.time() - eval_from
        epoch_time = self.stats.train_time_s + (time.time() - segment_start - train_time)
        record = self.epoch_record(epoch, test_loss, test_acc, epoch_time)
        self.history.append(record)
        self.scalars.epoch(progress.step, record)
        log_event(ctx, "epoch", **record, eval_s=round(eval_s, 3))
        progress.epoch += 1
        progress.samples_in_epoch = 0
        self.stats = EpochStats()
        self.save(progress.epoch, 0, self.stats)

    def epoch_record(self, epoch: int, test_loss: float, test_acc: float, epoch_time: float) -> dict[str, Any]:
        """The finished epoch's line in the history (and its ``epoch`` event)."""
        stats = self.stats
        return {
            "epoch": epoch + 1,
            "epochs": self.args.epochs,
            "step": self.progress.step,
            "world_size": self.ctx.world_size,
            "world_sizes": sorted(stats.world_sizes),
            "segments": stats.segments,
            "train_loss": round(stats.loss_sum / max(stats.images, 1), 5),
            "train_accuracy": round(stats.correct / max(stats.images, 1), 5),
            "test_loss": round(test_loss, 5),
            "test_accuracy": round(test_acc, 5),
            "images": stats.images,
            "images_per_sec": round(stats.images / max(stats.train_time_s, 1e-9), 1),
            "train_time_s": round(stats.train_time_s, 3),
            "epoch_time_s": round(epoch_time, 3),
            "lr": round(self.state.scheduler.get_last_lr()[0], 6),
        }

    def renew(self) -> None:
        """Rank 0: the loop is alive at this step; a yield request or a lost lease stops the group."""
        if self.keeper is not None:
            self.keeper.beat(self.progress.step)
            for outcome in self.keeper.news():
                if not (self.flags.yield_to_other_group or self.flags.lease_lost):
                    log_event(
                        self.ctx,
                        "lease_" + outcome,
                        step=self.progress.step,
                        requests=self.lease.requests() if self.lease is not None and outcome == "yield" else [],
                    )
                self.flags.update(outcome)

    def checkpoint_due(self) -> bool:
        """``--checkpoint-every-steps`` or ``--checkpoint-every-seconds`` says this step checkpoints."""
        args = self.args
        by_steps = bool(args.checkpoint_every_steps) and self.progress.step % args.checkpoint_every_steps == 0
        by_time = (
            bool(args.checkpoint_every_seconds) and time.monotonic() - self.saved_at >= args.checkpoint_every_seconds
        )
        return by_steps or by_time

    def save(self, epoch: int, samples_in_epoch: int, epoch_stats: EpochStats, *, wait: bool = False) -> None:
        """Rank 0: stage the full training state in host memory and have it written in the background
        (:mod:`checkpointer`: training goes on while the volume writes; only while this group owns the run).
        A checkpoint due while the previous one is still being written is skipped; ``wait`` (the stop's own
        checkpoint) is written beside a write still in flight, and waited for."""
        ctx, progress = self.ctx, self.progress
        if not ctx.is_main:
            return
        assert self.keeper is not None
        if self.keeper.lost:
            self.flags.lease_lost = True
            log_event(ctx, "lease_lost", step=progress.step, text="another group took the run over; not writing")
            return
        if self.writer.busy() and not wait:
            log_event(
                ctx,
                "checkpoint_skipped",
                step=progress.step,
                text="the previous checkpoint is still being written; training goes on",
            )
            return
        staged_at, started = time.time(), time.monotonic()
        state = checkpointer.to_host(self.checkpoint_state(epoch, samples_in_epoch, epoch_stats))
        self.saved_step, self.saved_at = progress.step, time.monotonic()
        path = checkpointer.checkpoint_path(self.output_dir, progress.step)
        self.writer.submit(
            path,
            state,
            {
                "epoch": epoch,
                "step": progress.step,
                "samples_in_epoch": samples_in_epoch,
                "staged_at": round(staged_at, 3),
                "stage_s": round(self.saved_at - started, 4),
            },
            alongside=wait,
        )
        if wait:
            self.writer.wait(path)
        self.renew()

    def checkpoint_state(self, epoch: int, samples_in_epoch: int, epoch_stats: EpochStats) -> dict[str, Any]:
        """What a checkpoint holds (:func:`checkpointer.load_checkpoint` and :func:`restore` read it back)."""
        state = self.state
        return {
            "format_version": FORMAT_VERSION,
            "model": state.model.state_dict(),
            "optimizer": state.optimizer.state_dict(),
            "scheduler": state.scheduler.state_dict(),
            "scaler": state.scaler.state_dict(),
            "epoch": epoch,
            "step": self.progress.step,
            "samples_in_epoch": samples_in_epoch,
            "epoch_stats": asdict(epoch_stats),
            "world_size": self.ctx.world_size,
            "model_config": state.config.to_dict(),
            "history": self.history,
            "args": json_args(self.args),
        }

    def published(self, path: Path, info: dict[str, Any]) -> None:
        """(The writer thread) a checkpoint is in place: prune the old ones, say so."""
        checkpointer.prune_checkpoints(self.output_dir, self.args.keep_checkpoints)
        log_event(self.ctx, "checkpoint", path=str(path), **info)

    def close_scalars(self, timeout_s: float) -> None:
        """Rank 0: write the pending TensorBoard scalars, waiting at most ``timeout_s`` for the volume."""
        if not self.scalars.close(timeout_s) or self.scalars.dropped:
            log_event(
                self.ctx,
                "tensorboard_incomplete",
                dropped=self.scalars.dropped,
                text="the shared volume was too slow for the TensorBoard event file; some scalars are missing",
            )

    def stop_here(self, sums: StepSums, epoch: int, epoch_stats: EpochStats) -> int:
        """Every rank: the group agreed to stop after this step; rank 0 checkpoints it, then all exit."""
        ctx, progress = self.ctx, self.progress
        self.stop.log_once(ctx, progress.step)
        if ctx.is_main:
            assert self.lease is not None
            wait_from = time.time()
            if not sums.lease_lost and progress.step > self.saved_step:
                self.save(epoch, progress.samples_in_epoch, epoch_stats, wait=True)
            elif not sums.lease_lost:
                # this step's: on disk before the pod goes
                self.writer.wait(checkpointer.checkpoint_path(self.output_dir, self.saved_step))
            state = "yielded" if sums.yielding else "stopped"
            assert self.keeper is not None
            self.keeper.stop()
            if not (sums.lease_lost or self.flags.lease_lost):
                self.lease.release(state, progress.step, reason=json.dumps(sums.reasons()))
            log_event(
                ctx,
                "stopping",
                step=progress.step,
                epoch=epoch,
                samples_in_epoch=progress.samples_in_epoch,
                checkpoint_step=self.saved_step,
                reasons=sums.reasons(),
                lease_state=state,
                checkpoint_wait_s=round(time.time() - wait_from, 3),
                seconds_since_signal=round(time.time() - self.stop.received_at, 3) if self.stop.received_at else None,
            )
        self.close_scalars(5.0)  # after the checkpoint: the curves must not spend the stop's grace period
        # nobody leaves before it is on disk
        hand_off(ctx, "stopped", progress.step, self.args.checkpoint_deadline_seconds)
        return EXIT_STOPPED

    def finish(self) -> int:
        """Every rank: the run is over; rank 0 writes the final artifacts (:func:`write_final_artifacts`) and releases
        the lease, and nobody leaves before ``DONE`` is on the volume."""
        ctx, args = self.ctx, self.args
        self.close_scalars(30.0)
        if ctx.is_main:
            assert self.lease is not None
            self.writer.wait()
            state = self.state
            write_final_artifacts(
                args, ctx, state.model, state.config, self.data.class_names, self.history, self.run_start
            )
            assert self.keeper is not None
            self.keeper.stop()
            self.lease.release("done", self.progress.step)
        hand_off(ctx, "done", self.progress.step, 2 * args.checkpoint_deadline_seconds)  # nobody leaves before DONE
        return EXIT_OK


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
    """Rank 0: ``model.pt``, ``training_summary.json`` and ``DONE`` (all atomic)."""
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


if __name__ == "__main__":
    process_end.end_process(main())
