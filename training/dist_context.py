"""Where a rank sits in the job and what the ranks do together (``train.py``): the process group, rank 0's log lines,
the collectives, and the waits on the process group's store that outlast a collective's timeout."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


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


def local_device(local_rank: int) -> tuple[torch.device, str]:
    """The device of the rank with ``local_rank`` on its node, made current, and the process group's backend: NCCL
    on ``cuda:LOCAL_RANK`` when CUDA is available, gloo on the CPU otherwise."""
    if not torch.cuda.is_available():
        return torch.device("cpu"), "gloo"
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank), "nccl"


def setup_distributed(timeout_s: float) -> DistContext:
    """Initialise the process group from the environment torchrun sets.

    Backend and device are chosen automatically: NCCL and ``cuda:LOCAL_RANK``
    when CUDA is available, gloo and CPU otherwise.  Without torchrun
    (no ``WORLD_SIZE``) the script runs as a single process.  ``timeout_s``
    bounds every collective (gloo: each send/recv; NCCL: the watchdog).
    """
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device, backend = local_device(local_rank)
    if "WORLD_SIZE" not in os.environ:
        return DistContext(0, 1, local_rank, device, backend, distributed=False)
    dist.init_process_group(
        backend=backend,
        init_method="env://",
        timeout=dt.timedelta(seconds=timeout_s),
        device_id=device if device.type == "cuda" else None,
    )
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, True)


def effective_pg_timeout(ctx: DistContext) -> float | None:
    """The collective timeout the default process group really uses (read back; None if unknown)."""
    if not ctx.distributed:
        return None
    try:
        group = dist.distributed_c10d._get_default_group()
        backend = group._get_backend(ctx.device)
        return float(backend.options._timeout.total_seconds())
    except (AttributeError, RuntimeError, TypeError):
        return None


_LOG_LOCK = threading.Lock()


def log_event(ctx: DistContext, event: str, **fields: Any) -> None:
    """Print one JSON line on rank 0 (flushed, so ``kubectl logs`` shows it at once; one write under a lock, as the
    checkpoint writer thread logs too)."""
    if not ctx.is_main:
        return
    record = {"event": event, "time": round(time.time(), 3), **fields}
    line = json.dumps(record, sort_keys=False, default=str) + "\n"
    with _LOG_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


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


def gather_objects(ctx: DistContext, obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order."""
    if not ctx.distributed:
        return [obj]
    found: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(found, obj)
    return found


def hand_off(ctx: DistContext, phase: str, step: int, timeout_s: float) -> None:
    """Every rank leaves together once rank 0 has written what ``phase`` needs (the stop's checkpoint, the final
    model and ``DONE``): rank 0 sets a key on the process group's store, the other ranks wait for it there.

    Not a collective: a collective gives up after ``collectiveTimeoutSeconds`` (and NCCL's watchdog then aborts the
    process), while a write to a slow shared volume may take longer; the store (TCP, torchrun's agent's) waits as
    long as the write may. Leaving early is not an option either: a node whose ranks are done leaves torchrun's exit
    barrier after 300 s (``exit_barrier_timeout`` in ``torch/distributed/elastic/agent/server/api.py``), its launcher
    would find no ``DONE`` yet, and the job's other pods would re-rendezvous into a restart of the finished run."""
    if not ctx.distributed:
        return
    # The step tells the phases of one attempt apart and every rank agrees on it.
    wait_for_main(ctx, f"{phase}/{step}", timeout_s)
    # Everyone has read the key before anyone leaves: rank 0 may be the store's host (a group started without
    # torchrun's agent store), and its exit would cut a slower rank's wait. Quick: every rank is here already.
    dist.barrier()


def wait_for_main(ctx: DistContext, phase: str, timeout_s: float) -> None:
    """The other ranks wait, on the process group's store, until rank 0 has done ``phase`` (its reads and writes of
    the shared volume); rank 0 says so. Used before the collective that follows such a phase: a collective gives up
    after ``collectiveTimeoutSeconds`` (and NCCL's watchdog then aborts the process), while the volume may take
    longer; the store waits up to ``timeout_s`` (the checkpoint deadline). The default group's store is the attempt's
    own (torch prefixes it per attempt), so a phase name is unique within an attempt."""
    if not ctx.distributed:
        return
    store = dist.distributed_c10d._get_default_store()
    key = f"eks-training/{phase}"
    if ctx.is_main:
        store.set(key, "1")
    else:
        store.wait([key], dt.timedelta(seconds=timeout_s))


def wait_for_all(ctx: DistContext, phase: str, timeout_s: float) -> None:
    """Every rank waits, on the store, until every rank has done ``phase`` (each its own reads of the volume: the
    checkpoint, the dataset), before the collective that follows; see :func:`wait_for_main`. One counter and one key
    (``store.add`` returns the count), so the cost does not grow with the world size."""
    if not ctx.distributed:
        return
    store = dist.distributed_c10d._get_default_store()
    key = f"eks-training/{phase}"
    if store.add(f"{key}/count", 1) == ctx.world_size:
        store.set(f"{key}/all", "1")
    store.wait([f"{key}/all"], dt.timedelta(seconds=timeout_s))
