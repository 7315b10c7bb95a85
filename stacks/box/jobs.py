"""A rehearsal's jobs as it sees them: when each Job and MPIJob started and ended, its outcome, and whether every job
of the stack is over.

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

import datetime
import time
from typing import Any, Callable, Mapping

from components.workloads.job_objects import JOB_OBJECTS
from stacks.box.api import BoxError
from stacks.box.cluster import Box, crd_established
from stacks.box.steps import RehearsalError, Step


def watch_jobs(
    box: Box, jobs: dict[str, dict[str, Any]], start: float, start_wall: float, note: Callable[[str], None]
) -> None:
    """Record each job's (``jobs``: name -> kind, started, finished seconds since the start, outcome, and a failed
    job's reason from its condition)."""
    for job_object in JOB_OBJECTS.values():
        if job_object.crd is not None and not crd_established(box, job_object.crd):
            continue
        try:
            items = box.get(job_object.resource, "-A")["items"]
        except BoxError:
            if job_object.crd is None:
                raise
            continue  # Established, not yet in discovery (updated asynchronously): the next pass reads them
        for obj in items:
            if obj["metadata"].get("ownerReferences"):
                continue  # an MPI launcher Job: its MPIJob is the job
            name = obj["metadata"]["name"]
            rec = jobs.setdefault(name, {"kind": obj["kind"]})
            conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
            conds = {kind: c.get("status") for kind, c in conditions.items()}
            if "started" not in rec and (obj.get("status") or {}).get("active") or conds.get("Running") == "True":
                rec.setdefault("started", time.monotonic() - start)
            for done in (job_object.succeeded, job_object.failed):
                if conds.get(done) == "True" and "outcome" not in rec:
                    rec["outcome"] = done
                    if done == job_object.failed and conditions[done].get("reason"):
                        rec["reason"] = conditions[done]["reason"]  # DeadlineExceeded, BackoffLimitExceeded, ...
                    rec["finished"] = time.monotonic() - start
                    if "started" not in rec:  # ran between two passes: its controller's own start stamp
                        rec["started"] = stamped_start(obj, rec["finished"], start_wall)
                    note(f"{obj['kind']} {name}: {outcome(rec)}")


def outcome(rec: Mapping[str, Any]) -> str:
    """A job's outcome as the report says it: ``Failed (DeadlineExceeded)``, ``Succeeded``, ``not finished``."""
    if "outcome" not in rec:
        return "not finished"
    return rec["outcome"] + (f" ({rec['reason']})" if rec.get("reason") else "")


def stamped_start(obj: Mapping[str, Any], finished: float, start_wall: float) -> float:
    """Seconds since the start at which ``obj``'s controller says it started (``status.startTime``: the Job
    controller's and the MPI Operator's, whole seconds), for a job that started and ended between two passes;
    kept within the rehearsal and no later than ``finished``."""
    stamp = (obj.get("status") or {}).get("startTime")
    if not stamp:
        return finished
    started = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - start_wall
    return min(max(started, 0.0), finished)


def all_done(applied: Mapping[str, Step], ready: set[str], jobs: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether every job of the steps applied has an outcome (else a stack without jobs: every step ready); a failed
    job raises :class:`stacks.box.steps.RehearsalError`."""
    ours = {d["metadata"]["name"] for s in applied.values() for d in s.docs if d["kind"] in JOB_OBJECTS}
    failed = [n for n in ours if jobs.get(n, {}).get("outcome") == "Failed"]
    if failed:
        raise RehearsalError(f"job(s) failed: {', '.join(sorted(failed))}")
    if not ours:  # a stack without jobs (the environment only): done once every object it applied is ready
        return all(urn in ready for urn in applied)
    return all("outcome" in jobs.get(n, {}) for n in ours)
