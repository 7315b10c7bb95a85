"""What a rehearsal did, as a user reads it: a timeline, where each pod ran, what waited and why, each job's outcome.

:class:`Recorder` watches a box while a rehearsal runs (a thread beside it, as :class:`stacks.box.devices.Registrar`
is): every pod's scheduling, start and end (phase, exit code) and, while it is Pending, the reason it waits -- the
scheduler's (the pod's ``PodScheduled=False`` message, e.g. ``0/4 nodes are available: 2 Insufficient
nvidia.com/gpu``), its ``wait-for-jobs`` init container's (the jobs it waits for), or a pod bound to a node that has not
started it; and every Kueue Workload's state (admitted, or Kueue's reason it is not: its ``QuotaReserved=False``
condition, an eviction). :func:`report` turns that and the rehearsal's own events (what was applied when, which
operator started, each job's outcome) into the text ``python -m stacks.rehearse`` prints.
"""

from __future__ import annotations

import datetime
import http.client
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Optional

from typing_extensions import Self

from stacks.box.api import BoxError
from stacks.box.cluster import Box, crd_established
from stacks.box.jobs import outcome
from stacks.box.kueue import WORKLOAD_CRD
from stacks.box.podlogs import pod_owner
from stacks.box.pods import HELD
from stacks.box.poller import Poller
from stacks.box.watch import Changes

if TYPE_CHECKING:
    from stacks.box.rehearse import Rehearsal


@dataclass
class Wait:
    """One reason a pod or a job waited, from ``first`` to ``last`` (seconds since the rehearsal's start)."""

    first: float
    last: float
    reason: str


@dataclass
class PodRecord:
    namespace: str
    name: str
    owner: str
    """What made the pod: ``Job train``, ``MPIJob nccl (launcher)``, ``Deployment etcd``, ``DaemonSet ...``."""
    job: Optional[str]
    node: str = ""
    started: Optional[float] = None
    finished: Optional[float] = None
    outcome: str = ""
    """``Succeeded``, ``Failed (exit 69 in worker)``, ``deleted while Running`` ..."""
    waits: list[Wait] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def _exit(pod: Mapping[str, Any]) -> str:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (status.get("state") or {}).get("terminated") or {}
        if term.get("exitCode"):
            return f"exit {term['exitCode']} in {status['name']}"
    return "exit 0"


def _failure(pod: Mapping[str, Any]) -> str:
    """Why a pod failed: its disruption (``DisruptionTarget``: the pod GC of a lost node, a preemption, an eviction)
    or its exit code."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "DisruptionTarget" and c["status"] == "True":
            return f"DisruptionTarget: {c.get('reason')}: {c.get('message', '')}"
    return _exit(pod)


def pending_reason(pod: Mapping[str, Any]) -> str:
    """Why a Pending pod waits: the scheduler's message, its wait-for-jobs init container's jobs, or its node's
    start."""
    conds = (pod.get("status") or {}).get("conditions") or []
    why = next(
        (c.get("message") or c.get("reason") for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"),
        None,
    )
    if why:
        return f"not scheduled: {why}"
    held = (pod["metadata"].get("annotations") or {}).get(HELD)
    if held:
        # The hold is set when the pod is created, before the scheduler binds it: no node yet is said so.
        node = pod["spec"].get("nodeName")
        where = f"on {node}" if node else "not scheduled yet"
        refs = held.split(",")
        jobs = [r for r in refs if not r.startswith("pods/")]
        workers = [r.partition("/")[2] for r in refs if r.startswith("pods/")]
        waits = ([f"its wait-for-jobs init container waits for {', '.join(jobs)}"] if jobs else []) + (
            [f"its wait-for-workers init container waits for {', '.join(workers)}"] if workers else []
        )
        return f"{where}, {'; '.join(waits)}"
    if pod["spec"].get("nodeName"):
        return f"on {pod['spec']['nodeName']}, not started yet"
    return "not scheduled yet"


def _admitted_at(wl: Mapping[str, Any]) -> Optional[float]:
    """When Kueue admitted ``wl`` (its ``Admitted=True`` condition's time, seconds since the epoch), else ``None``."""
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c["type"] == "Admitted" and c["status"] == "True" and c.get("lastTransitionTime"):
            return datetime.datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
    return None


def workload_state(wl: Mapping[str, Any]) -> str:
    """A Kueue Workload's state in one phrase: ``admitted``, ``finished``, or Kueue's reason it is not admitted."""
    conds = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}

    def true(kind: str) -> bool:
        return (conds.get(kind) or {}).get("status") == "True"

    if true("Finished"):
        return "finished"
    if true("Evicted") and not true("Admitted"):
        c = conds["Evicted"]
        return f"evicted ({c.get('reason')}: {c.get('message', '')})"
    if true("Admitted"):
        return "admitted"
    c = conds.get("QuotaReserved")
    if c is None:
        return "queued, not yet evaluated by Kueue"
    return (
        f"queued, not admitted: QuotaReserved={c.get('status', 'Unknown')} ({c.get('reason', 'Pending')}: "
        f"{c.get('message', '')})"
    )


class Recorder(Poller):
    """Records ``box``'s pods and Workloads while a rehearsal runs (``with Recorder(box, rehearsal.start): ...``);
    times are seconds since ``start`` (a :func:`time.monotonic` value: the rehearsal's). Entered, it reads every
    change to a pod from a watch (:class:`stacks.box.watch.Watch`) and looks at the Workloads every ``interval_s``;
    a :meth:`poll` by hand, not entered, looks at the pods too."""

    last_look = True

    def __init__(self, box: Box, start: float, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.box, self.start = box, start
        self.pods: dict[str, PodRecord] = {}
        self.events: list[tuple[float, str]] = []
        #: Job -> its Workload's states in order (time, state).
        self.workloads: dict[str, list[tuple[float, str]]] = {}
        self._last: dict[str, Mapping[str, Any]] = {}  # uid -> the pod as last seen, while it exists
        self._changes: Optional[Changes] = None  # while entered

    def __enter__(self) -> Self:
        self._changes = Changes(self.box.api, "pods")
        self._changes.open()
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)  # its last look reads the watch's last events
        if self._changes is not None:
            self._changes.close()

    def _note(self, t: float, text: str) -> None:
        self.events.append((t, text))

    def _pod_changes(self) -> list[tuple[float, str, Mapping[str, Any]]]:
        """(time, ``ADDED``/``MODIFIED``/``DELETED``, pod) since the last look: the watch's, else one listing's."""
        if self._changes is not None:
            return [(at - self.start, kind, pod) for at, kind, pod in self._changes.read()]
        t = time.monotonic() - self.start
        pods = self.box.get("pods", "-A")["items"]
        uids = {pod["metadata"]["uid"] for pod in pods}
        gone = [(t, "DELETED", pod) for uid, pod in self._last.items() if uid not in uids]
        return [(t, "MODIFIED", pod) for pod in pods] + gone

    def poll(self) -> None:
        """One look at the box's pods and Workloads."""
        for t, kind, pod in self._pod_changes():
            uid = pod["metadata"]["uid"]
            rec = self.pods.get(uid)
            if rec is None:
                owner, job = pod_owner(pod)
                rec = self.pods[uid] = PodRecord(pod["metadata"]["namespace"], pod["metadata"]["name"], owner, job)
            if kind != "DELETED":
                self._last[uid] = pod
                self._pod(t, rec, pod)
                continue
            self._last.pop(uid, None)
            self._pod(t, rec, pod)  # its last state: a pod that ended, then was deleted, ended
            if not rec.outcome:
                rec.outcome = f"deleted while {'Running' if rec.started is not None else 'Pending'}"
                rec.finished = t
                self._note(t, f"pod {rec.ref} ({rec.owner}) {rec.outcome}" + (f" on {rec.node}" if rec.node else ""))
        t = time.monotonic() - self.start
        for uid, pod in self._last.items():  # still Pending now, for the same reason
            rec = self.pods[uid]
            if (pod.get("status") or {}).get("phase") == "Pending" and rec.waits:
                rec.waits[-1].last = max(rec.waits[-1].last, t)
        for wl in self._workloads():
            ref: dict[str, Any] = next(iter(wl["metadata"].get("ownerReferences") or []), {})
            job = ref.get("name", wl["metadata"]["name"])
            self._workload(t, job, ref.get("kind", "job"), wl)

    def _workloads(self) -> list[dict[str, Any]]:
        """Kueue's Workloads now; none when Kueue's CRD is not served (yet) or the apiserver is away (an upgrade)."""
        try:
            # read once Established (each read of the CRD returns its whole schema); without it, every look would
            # read the server's discovery again
            if crd_established(self.box, WORKLOAD_CRD):
                return list(self.box.get(WORKLOAD_CRD, "-A")["items"])
        except (BoxError, OSError, http.client.HTTPException):
            pass
        return []

    def _workload(self, t: float, job: str, kind: str, wl: Mapping[str, Any]) -> None:
        state = workload_state(wl)
        states = self.workloads.setdefault(job, [])
        if not states or states[-1][1] != state:
            if state == "finished" and "admitted" not in {s for _t, s in states}:
                # admitted and finished between two looks: Kueue keeps Admitted=True on a finished Workload
                admitted = _admitted_at(wl)
                if admitted is not None:
                    at = max(min(admitted - self._start_wall(), t), states[-1][0] if states else 0.0)
                    states.append((at, "admitted"))
                    self._note(at, f"{kind} {job}: admitted")
            states.append((t, state))
            self._note(t, f"{kind} {job}: {state}")

    def _start_wall(self) -> float:
        """The wall-clock time of ``start`` (the apiserver stamps objects by the wall clock)."""
        return time.time() - (time.monotonic() - self.start)

    def _pod(self, t: float, rec: PodRecord, pod: Mapping[str, Any]) -> None:
        status = pod.get("status") or {}
        phase = status.get("phase")
        if pod["spec"].get("nodeName"):
            rec.node = pod["spec"]["nodeName"]
        if phase == "Pending":
            reason = pending_reason(pod)
            if rec.waits and rec.waits[-1].reason == reason:
                rec.waits[-1].last = t
            else:
                rec.waits.append(Wait(t, t, reason))
                self._note(t, f"pod {rec.ref} ({rec.owner}) Pending: {reason}")
        elif phase == "Running" and rec.started is None:
            rec.started = t
            self._note(t, f"pod {rec.ref} ({rec.owner}) running on {rec.node}")
        elif phase in ("Succeeded", "Failed") and not rec.outcome:
            if rec.started is None:
                rec.started = t
            rec.finished = t
            rec.outcome = phase if phase == "Succeeded" else f"Failed ({_failure(pod)})"
            self._note(t, f"pod {rec.ref} ({rec.owner}) {rec.outcome} on {rec.node}")


def _seconds(t: Optional[float]) -> str:
    return "-" if t is None else f"{t:.1f} s"


def report(rehearsal: "Rehearsal", recorder: Recorder) -> str:
    """The rehearsal as text: its timeline, where each pod ran, what waited and why, and each job's outcome."""
    lines = ["Timeline (seconds since the rehearsal started):"]
    events = sorted([(e.t, e.text) for e in rehearsal.events] + recorder.events, key=lambda e: e[0])
    lines += [f"  {t:7.1f} s  {text}" for t, text in events]
    lines += ["", "Where each pod ran:"]
    pods = dict(recorder.pods)
    for uid, pod in rehearsal.pods.items():  # a pod the rehearsal saw start that came and went between two looks
        if uid in pods and not pods[uid].node:
            pods[uid] = replace(pods[uid], node=pod["spec"].get("nodeName") or "")
        elif uid not in pods:
            owner, job = pod_owner(pod)
            pods[uid] = PodRecord(
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                owner,
                job,
                node=pod["spec"].get("nodeName") or "",
                outcome="seen running by the rehearsal only",
            )
    ran = sorted(
        (r for r in pods.values() if r.node), key=lambda r: (r.started if r.started is not None else 1e9, r.ref)
    )
    for r in ran:
        took = f"{r.finished - r.started:.1f} s" if r.finished is not None and r.started is not None else "running"
        lines.append(
            f"  {r.ref} ({r.owner}) on {r.node}: started {_seconds(r.started)}, {r.outcome or 'still running'} ({took})"
        )
    lines += ["", "What waited, and why:"]
    waited = False
    for r in sorted(recorder.pods.values(), key=lambda r: (r.waits[0].first if r.waits else 1e9, r.ref)):
        for w in r.waits:
            waited = True
            lines.append(f"  pod {r.ref} ({r.owner}) {w.first:.1f}-{w.last:.1f} s: {w.reason}")
    for job, states in sorted(recorder.workloads.items()):
        for i, (t, state) in enumerate(states):
            if state.startswith(("queued", "evicted")):
                waited = True
                until = states[i + 1][0] if i + 1 < len(states) else None
                lines.append(f"  job {job} {t:.1f}-{_seconds(until).removesuffix(' s')} s: {state}")
    if not waited:
        lines.append("  nothing waited")
    lines += ["", "Jobs:"]
    for name, rec in sorted(rehearsal.jobs.items(), key=lambda kv: (kv[1].get("started", 1e9), kv[0])):
        started, finished = rec.get("started"), rec.get("finished")
        took = f"{finished - started:.1f} s" if started is not None and finished is not None else "-"
        lines.append(
            f"  {name} ({rec['kind']}): {outcome(rec)}, started {_seconds(started)}, "
            f"finished {_seconds(finished)}, took {took}"
        )
    return "\n".join(lines)
