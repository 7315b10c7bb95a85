"""Rehearse a stack on a box: its objects applied as ``pulumi up`` would, its jobs scheduled, run and completed.

:class:`Rehearsal` runs passes until every job is over, each a list of named steps. It plays the parts of a real
deployment the box does not run itself, one module each: ``pulumi up``'s order, clocks and waits
(:mod:`stacks.box.steps`, :mod:`stacks.box.progress`, :mod:`stacks.box.apply`, :mod:`stacks.box.readiness`), the EFS
CSI provisioner (:mod:`stacks.box.efs`), the pods' runs and the init containers' holds (:mod:`stacks.box.pods`), the
operators out of cluster (:mod:`stacks.box.operators`) and the autoscaler (:mod:`stacks.box.provisioner`). What it
sees of the jobs is :mod:`stacks.box.jobs`; what it says when stuck, :mod:`stacks.box.waiting`.

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from components.workloads.job_objects import MPIJOB_CRD
from stacks.box.apply import Refusal, apply_steps
from stacks.box.awaits import Awaiter
from stacks.box.cluster import Box
from stacks.box.efs import EFS_PROVISIONER
from stacks.box.jobs import all_done, watch_jobs
from stacks.box.operators import Operators
from stacks.box.pods import (
    EXIT_CODE,
    HELD,
    RUN_MS,
    START_MS,
    PodRuns,
    peer_pods,
    pod_templates,
    predecessors,
    record_started,
    release_held,
)
from stacks.box.progress import Progress
from stacks.box.provisioner import Provisioner
from stacks.box.readiness import is_ready, rolled_out
from stacks.box.steps import RehearsalError, Step, provisioning_checks, steps_of
from stacks.box.waiting import pending_reasons, retrying
from stacks.box.watch import Changes

#: The names other modules import from here (their homes: the modules above).
__all__ = [
    "EFS_PROVISIONER",
    "EXIT_CODE",
    "HELD",
    "RUN_MS",
    "START_MS",
    "Event",
    "Rehearsal",
    "RehearsalError",
    "Step",
    "peer_pods",
    "pod_templates",
    "predecessors",
    "rolled_out",
    "steps_of",
]


@dataclass
class Event:
    t: float
    text: str


class Rehearsal:
    """Drive one stack's steps on ``box`` (nodes already there)."""

    def __init__(
        self,
        box: Box,
        steps: list[Step],
        *,
        run_ms: Optional[Mapping[str, int]] = None,
        exit_codes: Optional[Mapping[str, tuple[int, str]]] = None,
        default_run_ms: int = 1000,
        log_dir: Optional[Path] = None,
        await_jobs: Iterable[str] = (),
        provisioner: Optional[Provisioner] = None,
        time_scale: float = 1.0,
        worker_start_ms: int = 0,
    ) -> None:
        checks = provisioning_checks(steps)
        if checks and provisioner is None:  # else every job it guards waits for a request nothing answers
            raise RehearsalError(
                f"the stack's admission check {', '.join(checks)} asks the cluster autoscaler for "
                "ProvisioningRequests: give the rehearsal the autoscaler's stand-in "
                "(stacks.box.provisioner.provisioner_for)"
            )
        self.box, self.steps = box, steps
        self.start = time.monotonic()
        #: The same instant on the wall clock, which the box's apiserver stamps its objects with (same machine).
        self.start_wall = time.time()
        self.events: list[Event] = []
        #: How long each job's pods run and how they end (the annotations the box's Stages read).
        self.pod_runs = PodRuns(dict(run_ms or {}), dict(exit_codes or {}), default_run_ms, worker_start_ms)
        #: The steps applied and ready, and the clocks their timeouts run on (``time_scale``: a job object's).
        self.progress = Progress(time_scale)
        self.log_dir = log_dir or box.home
        #: The MPI Operator and Kueue, run out of cluster.
        self.operators = Operators(box, self.log_dir, self.note, self.progress.host_waited)
        #: The provider's await code (``pulumi-await``), started by :meth:`run`.
        self.awaiter: Optional[Awaiter] = None
        #: The cluster autoscaler's stand-in for ProvisioningRequests, polled on every pass of :meth:`run`.
        self.provisioner = provisioner
        self.refused: list[Refusal] = []
        #: Jobs and MPIJobs awaited to completion although pulumi would not (a test's order).
        self.await_jobs = set(await_jobs)
        self.jobs: dict[str, dict[str, Any]] = {}
        #: Every pod started on a node (uid -> the pod as last seen), kept after the pod is gone (the MPI Operator
        #: deletes its workers when the job ends). Read from a watch while :meth:`run` runs: no pod is missed.
        self.pods: dict[str, dict[str, Any]] = {}
        self._pod_changes: Optional[Changes] = None  # while run() runs

    def note(self, text: str) -> None:
        self.events.append(Event(time.monotonic() - self.start, text))

    def timeline(self) -> str:
        return "\n".join(f"{e.t:7.1f} s  {e.text}" for e in self.events)

    def stop_operator(self) -> None:
        """Stop the operators the box runs (the MPI Operator, Kueue)."""
        self.operators.stop_operator()

    def pending_reasons(self) -> list[str]:
        """:func:`stacks.box.waiting.pending_reasons` of the steps applied."""
        return pending_reasons(self.box, self.progress.applied, self.operators.kueue is not None)

    def retrying(self) -> list[str]:
        """:func:`stacks.box.waiting.retrying` of the steps applied."""
        return retrying(self.box, self.progress.applied)

    def run(
        self,
        binaries: Mapping[str, Path],
        *,
        timeout_s: float = 120.0,
        stuck: Optional[Callable[[list[str]], bool]] = None,
    ) -> None:
        """Apply every step in dependency order, then wait until every job completed (else :class:`RehearsalError`
        naming what waits and the scheduler's reasons). ``stuck(reasons)``, given :meth:`pending_reasons` after each
        pass (an empty list when nothing is pending), may end the wait early: true means what waits will not move (a
        job Kueue will never admit, a failure the caller waited for), and the error is raised then, not at the
        deadline."""
        deadline = time.monotonic() + timeout_s
        todo = list(self.steps)
        if self.awaiter is None:
            self.awaiter = Awaiter(binaries["pulumi-await"])
        self._pod_changes = Changes(self.box.api, "pods")
        self._pod_changes.open()
        interrupted = False
        try:
            self._run(binaries, todo, deadline, timeout_s, stuck)
        except KeyboardInterrupt:
            interrupted = True  # stop now: no last look at a box that may take a minute to answer
            raise
        finally:
            try:
                if not interrupted:
                    self._last_look()
            finally:
                self.awaiter.close()
                self.awaiter = None
                record_started(self._pod_changes, self.pods)
                self._pod_changes.close()
                self._pod_changes = None
        self.note("every job completed" if self.jobs else "every object is ready (the stack has no jobs)")

    def _run(
        self,
        binaries: Mapping[str, Path],
        todo: list[Step],
        deadline: float,
        timeout_s: float,
        stuck: Optional[Callable[[list[str]], bool]],
    ) -> None:
        """One pass after another until every job is over (or a step is late, or the rehearsal stuck)."""
        while todo or not all_done(self.progress.applied, self.progress.ready, self.jobs):
            progressed = False
            now = self.progress.due(todo, self.box)
            if now:
                self._apply(now)
                todo = [step for step in todo if step not in now]
                progressed = True
            progressed |= self._mark_ready(binaries)
            progressed |= self._start_kueue(binaries)
            record_started(self._pod_changes, self.pods)
            release_held(self.box, self.note)
            progressed |= self._poll_provisioner()
            watch_jobs(self.box, self.jobs, self.start, self.start_wall, self.note)
            self._stop_if_late()
            self.operators.check_operator(binaries["mpi-operator"])
            self._stop_if_stuck(todo, deadline, timeout_s, stuck)
            if not progressed:
                time.sleep(0.3)

    def _last_look(self) -> None:
        """Record the jobs' outcomes once more as the run ends: a failure that stopped it (a failed awaited job, which
        the provider's wait reports before a pass records it) is then in the report, not ``not finished``."""
        # the box gone or stopping: the report keeps what the passes saw, and the run's own error stands
        try:
            watch_jobs(self.box, self.jobs, self.start, self.start_wall, self.note)
        except Exception:  # noqa: BLE001
            pass

    def _apply(self, steps: Sequence[Step]) -> None:
        """:func:`stacks.box.apply.apply_steps`, its time the box's work: steps already waiting are not charged."""
        started = time.monotonic()
        try:
            apply_steps(self.box, steps, self.progress, self.pod_runs.annotate, self.note, self.refused)
        finally:
            self.progress.host_waited(time.monotonic() - started, exclude={s.urn for s in steps})

    def _mark_ready(self, binaries: Mapping[str, Path]) -> bool:
        """Mark the applied steps now ready (the MPI Operator starts once its CRD is); whether any was."""
        progressed = False
        for urn, step in self.progress.applied.items():
            if urn in self.progress.ready:
                continue
            seen = time.monotonic()
            if is_ready(
                self.box,
                step,
                self.awaiter,
                kueue_started=self.operators.kueue is not None,
                await_jobs=self.await_jobs,
                jobs=self.jobs,
                note=self.note,
                timeline=self.timeline,
            ):
                self.progress.ready.add(urn)
                progressed = True
                if any(
                    d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == MPIJOB_CRD for d in step.docs
                ):
                    self.operators.start_operator(binaries["mpi-operator"])
            else:
                self.progress.seen_waiting[urn] = seen
        return progressed

    def _start_kueue(self, binaries: Mapping[str, Path]) -> bool:
        """Start Kueue's manager once its release is applied (once per box); whether it started now."""
        started = False
        for step in self.progress.applied.values():
            if step.kueue is not None and self.operators.kueue is None:
                self.operators.start_kueue(binaries, step)
                started = True
        return started

    def _poll_provisioner(self) -> bool:
        """Let the autoscaler's stand-in answer the ProvisioningRequests; whether it decided any."""
        if self.provisioner is None:
            return False
        done = len(self.provisioner.decisions)
        self.provisioner.poll()
        for d in self.provisioner.decisions[done:]:
            added = ", ".join(f"{k} node(s) of {g}" for g, k in d.added.items())
            self.note(
                f"ProvisioningRequest {d.request}: Provisioned={d.status} ({d.reason})"
                + (f", added {added}" if added else "")
            )
        return len(self.provisioner.decisions) > done

    def _stop_if_late(self) -> None:
        """Stop as ``pulumi up`` stops when a step is not ready within its timeout."""
        late_steps = self.progress.late()
        if late_steps:
            raise RehearsalError(
                f"{', '.join(late_steps)}: not ready within the time pulumi up waits for it (pulumi up stops "
                "here); pending pods:\n" + "\n".join(self.pending_reasons()) + "\ntimeline:\n" + self.timeline()
            )

    def _stop_if_stuck(
        self, todo: list[Step], deadline: float, timeout_s: float, stuck: Optional[Callable[[list[str]], bool]]
    ) -> None:
        """Stop past the deadline (moved on by the time the machine held the box), or when ``stuck`` says so."""
        reasons = self.pending_reasons() if stuck is not None else None
        late = time.monotonic() > deadline + self.progress.host_wait_s
        if late or (reasons is not None and stuck is not None and stuck(reasons)):
            waiting = [s.name for s in todo] + [s.name for s in self.progress.waiting()]
            when = f"not done after {timeout_s:.0f} s" if late else f"stuck after {time.monotonic() - self.start:.0f} s"
            backing_off = self.retrying()
            raise RehearsalError(
                f"{when}; waiting: {', '.join(waiting) or 'the jobs'}; pending pods:\n"
                + "\n".join(reasons if reasons is not None else self.pending_reasons())
                + ("\nretrying:\n" + "\n".join(backing_off) if backing_off else "")
                + "\ntimeline:\n"
                + self.timeline()
            )
