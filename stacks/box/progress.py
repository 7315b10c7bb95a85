"""Where a rehearsal's steps are: which are applied and ready, and the clocks their timeouts run on.

A step is applied once every step it depends on is ready (and its gate, a test's, is open), as ``pulumi up`` applies
a resource; it is late when it waited longer than ``pulumi up`` would (:meth:`Progress.late`).

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from components.workloads.job_objects import JOB_OBJECTS
from stacks.box.cluster import Box
from stacks.box.steps import Step


@dataclass
class Progress:
    """The steps applied and ready, and each one's clock (monotonic seconds)."""

    #: How many times faster than the wall clock ``pulumi up``'s wait for a job object runs out (its timeout /
    #: time_scale): the box runs its pods for ``run_ms``, a duration it stands in for. The other objects (a
    #: DaemonSet's pods, a Deployment's) are ready in the machine's time, on a busy machine many seconds.
    time_scale: float = 1.0
    applied: dict[str, Step] = field(default_factory=dict)
    ready: set[str] = field(default_factory=set)
    #: When each step was applied (monotonic seconds).
    applied_at: dict[str, float] = field(default_factory=dict)
    #: Where each step's timeout runs from: when it was applied, moved on by the time the machine held the box.
    waits_from: dict[str, float] = field(default_factory=dict)
    #: When each step applied and not ready was last seen not ready: it is late only if it was late then.
    seen_waiting: dict[str, float] = field(default_factory=dict)
    #: Seconds the machine, not the cluster, held the rehearsal (the box's own work).
    host_wait_s: float = 0.0

    def due(self, todo: Sequence[Step], box: Box) -> list[Step]:
        """The steps of ``todo`` to apply now: what each depends on is ready and its gate is open."""
        return [
            step for step in todo if all(d in self.ready for d in step.deps) and (step.gate is None or step.gate(box))
        ]

    def mark_applied(self, step: Step) -> None:
        """``step`` is applied: its clock starts now."""
        self.applied[step.urn] = step
        self.applied_at[step.urn] = self.waits_from[step.urn] = time.monotonic()

    def waiting(self) -> list[Step]:
        """The steps applied and not ready."""
        return [s for u, s in self.applied.items() if u not in self.ready]

    def late(self) -> list[str]:
        """Steps not ready within their timeout (on the scaled clock) when last seen: ``pulumi up`` would stop there.
        A step is judged by when it was last seen waiting, not by when the pass ends (a busy machine's pass is long)."""
        return [
            f"{s.name} (timeout {s.timeout_s:.0f} s"
            + (f", {self.limit_s(s):.1f} s on the box's clock" if self.limit_s(s) != s.timeout_s else "")
            + ")"
            for urn, s in self.applied.items()
            if urn not in self.ready
            and urn in self.seen_waiting
            and self.seen_waiting[urn] - self.waits_from[urn] > self.limit_s(s)
        ]

    def limit_s(self, step: Step) -> float:
        """Seconds the rehearsal waits for ``step``: its timeout, on the scaled clock if it registers a job object."""
        scaled = any(d["kind"] in JOB_OBJECTS for d in step.docs)
        return step.timeout_s / self.time_scale if scaled else step.timeout_s

    def host_waited(self, seconds: float, exclude: Iterable[str] = ()) -> None:
        """The machine, not the cluster, held the rehearsal ``seconds``: the box's own work (applying, starting
        Kueue), which on a busy machine takes many seconds and on the scaled clock many minutes no cluster spends. The
        rehearsal's deadline and the clock of each step waiting then move by them; a step applied later (or in
        ``exclude``: applied by that work) is awaited for its own timeout."""
        self.host_wait_s += seconds
        skip = set(exclude)
        for urn in self.applied:
            if urn not in self.ready and urn not in skip:
                self.waits_from[urn] += seconds
