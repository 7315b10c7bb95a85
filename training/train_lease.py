"""The run lease at an attempt's start: rank 0 takes it (:mod:`run_lease`) before anything is written to the output
folder, and every rank waits for the verdict."""

from __future__ import annotations

import argparse
import os
import time

import run_lease
from dist_context import DistContext, all_reduce_sum, gather_objects, log_event, wait_for_main
from run_script import EXIT_STOPPED
from train_stop import StopRequest

#: Seconds between two looks at the lease while another group holds it.
LEASE_POLL_S = 1.0


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
