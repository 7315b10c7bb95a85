"""Multi-node data-parallel training of a ResNet-9 on CIFAR-10, launched by torchrun.

One ``torchrun`` per node (in the pods: through ``launch.py``); without torchrun it runs as a single process. Rank 0
checkpoints every epoch, every ``--checkpoint-every-seconds`` and every ``--checkpoint-every-steps``
(:mod:`checkpointer`), holds the run lease
(:mod:`run_lease`) and ends a crash loop (``--max-failed-attempts``) by writing ``FAILED``; a stop signal ends every
rank after the same step, with its checkpoint. Exit codes: 0 the run is over (``DONE`` or ``FAILED`` written), 75
(:data:`EXIT_STOPPED`) stopped in order at a step boundary, checkpoint written (a stop request, the lease yielded or
lost), 1 an error, 2 a usage error. Outputs in ``--output-dir``: ``checkpoint-step<N>.pt`` (the newest
``--keep-checkpoints``), ``model.pt``, ``training_summary.json``, ``metrics.json`` (:mod:`metrics`), ``DONE`` (or
``FAILED``) and ``lease/``; progress goes to stdout as one JSON object a line (rank 0 only).

The command line, the recipe and the outputs: "The bundled trainer" in docs/explanation/programs.md; what happens on
a stop, a lost node or a slow volume: docs/explanation/failures.md. Here: the run and its epochs (:class:`Attempt`);
beside it: :mod:`train_flags`, :mod:`train_stop`, :mod:`train_progress`, :mod:`train_lease`, :mod:`train_setup` and
:mod:`train_outputs`."""

from __future__ import annotations

import time

#: When this process started running Python code (before torch is imported), for the timings.
PROCESS_START = time.time()

import argparse
import itertools
import json
import os
import socket
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cifar  # noqa: E402  (needs the sys.path entry above)
import checkpointer  # noqa: E402
import process_end  # noqa: E402
import run_script  # noqa: E402
import run_lease  # noqa: E402
from dist_context import (  # noqa: E402
    DistContext,
    all_reduce_sum,
    broadcast_object,
    effective_pg_timeout,
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
    json_args,
)
from train_lease import acquire_lease  # noqa: E402
from launch_markers import read_failed  # noqa: E402
from train_outputs import FAILED_MARKER, FORMAT_VERSION, give_up_run, write_final_artifacts  # noqa: E402
from train_progress import EpochStats, Progress, ScalarLog  # noqa: E402
from train_setup import CifarData, ModelState, choose_resume, load_data, make_loader, make_model, restore  # noqa: E402
from run_script import EXIT_STOPPED  # noqa: E402
from train_stop import EXIT_OK, StepFlags, StepSums, StopRequest, combine_step, start_loader  # noqa: E402


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

    marker = read_failed(output_dir) if ctx.is_main else None
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


if __name__ == "__main__":
    process_end.end_process(main())
