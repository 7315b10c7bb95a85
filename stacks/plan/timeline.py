"""How long `pulumi up` takes from an empty account to a stack's first training step, modelled on what the program
registers: its own resource graph (every registration's type, parent, dependencies and providers, as the program
evaluated under :mod:`stacks.mocked` sends them) and a duration per kind of resource
(:mod:`components.catalog.timings`).

The model follows how Pulumi orders creation (https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/,
and the Python SDK's ``prepare_resource``): a resource starts once everything it depends on is done: its explicit
``depends_on`` and the resources its inputs come from (a component's children: the SDK expands a component into
them), its provider (a Kubernetes object waits for the cluster's provider, whose kubeconfig resolves late), and its
parent's registration, which waits for the parent's own dependencies and, for a component, for every provider in its
options. A resource is done once created; Pulumi waits for a Job to complete and a Deployment to be available, not for
a Job it is told to skip. The first training step is the moment the pods of the first training job that waits for no
other job (``after``) start: its Job created, then the pods' start (their image pulled, unless the job's health check
ran the same image on the same nodes just before). The floor is what no ordering can save: the cluster, one node
group and the pods' start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Protocol, Sequence

from components.catalog.charts import IMAGES, MANIFESTS
from components.catalog.timings import (
    AWS_RESOURCE,
    CREATION,
    FINISHED_HELPER_JOB,
    FINISHED_JOB,
    FINISHED_JOB_CACHED,
    KUBERNETES_OBJECT,
    OTHER,
    PODS_START,
    PODS_START_CACHED,
    Duration,
)
from stacks.kinds import KINDS

if TYPE_CHECKING:
    from stacks.plan import JobPlan, Plan

#: The type of the EKS cluster and of a managed node group: the floor is one of each and the pods' start.
CLUSTER_TYPE = "eks:index:Cluster"
NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup"
#: pulumi-kubernetes' annotations: skip the wait on an object, or wait on a custom resource's condition.
SKIP_AWAIT = "pulumi.com/skipAwait"
WAIT_FOR = "pulumi.com/waitFor"
#: The component that pulls an image onto a group's nodes ahead of its pods (a DaemonSet, :mod:`stacks.plan.prepull`).
PREPULL_TYPE = "eks-training:index:ImagePrePull"
DAEMON_SET_TYPE = "kubernetes:apps/v1:DaemonSet"


class Registered(Protocol):
    """What the model reads of a registration (:class:`stacks.mocked.Registration` has it)."""

    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    remote: bool
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict[str, Any]
    providers: dict[str, str]


@dataclass(frozen=True)
class Step:
    """One step of a path: a resource created (or a component registered), or the training pods' start."""

    type: str
    name: str
    start: float
    """Minutes after ``pulumi up`` began."""
    minutes: float
    what: str
    """What the duration is (the catalog row's ``what``)."""

    @property
    def end(self) -> float:
        return self.start + self.minutes


@dataclass(frozen=True)
class FirstStep:
    """The modelled time to a stack's first training step, and the path that sets it."""

    job: str
    """The training job whose pods start first."""
    minutes: float
    floor: float
    """What no ordering saves: :func:`floor_minutes`."""
    path: tuple[Step, ...]
    """From the first resource to the pods' start, each step starting when the one before it ends."""

    @property
    def ratio(self) -> float:
        return self.minutes / self.floor


def floor_minutes() -> float:
    """The cluster, one node group and the training pods' start, one after the other."""
    return CREATION[CLUSTER_TYPE].minutes + CREATION[NODE_GROUP_TYPE].minutes + PODS_START.minutes


def _annotations(reg: Registered) -> Mapping[str, Any]:
    metadata = reg.inputs.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _images(value: Any) -> set[str]:
    """The container images of an object's pod template (or a Helm value tree), wherever they sit."""
    found: set[str] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            image = v.get("image")
            if isinstance(image, str):
                found.add(image)
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
    return found


def _pod_specs(value: Any) -> list[Mapping[str, Any]]:
    """The pod specs (a mapping with ``containers``) of an object's spec, wherever they sit (an MPIJob has two)."""
    found: list[Mapping[str, Any]] = []
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            if isinstance(v.get("containers"), list):
                found.append(v)
                continue
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
    return found


def _selector(pod: Mapping[str, Any]) -> dict[str, str]:
    selector = pod.get("nodeSelector")
    return {str(k): str(v) for k, v in selector.items()} if isinstance(selector, dict) else {}


def duration(reg: Registered) -> Duration:
    """How long creating ``reg`` takes (a component: nothing; its children take the time)."""
    if not reg.custom and not reg.remote:
        return OTHER
    annotations = _annotations(reg)
    awaited_job = (reg.type == "kubernetes:batch/v1:Job" and str(annotations.get(SKIP_AWAIT)) != "true") or (
        reg.type.startswith("kubernetes:") and WAIT_FOR in annotations
    )
    if awaited_job:
        helpers = {i.ref for i in IMAGES.values()}
        images = _images(reg.inputs.get("spec"))
        return FINISHED_HELPER_JOB if images and images <= helpers else FINISHED_JOB
    if reg.type.startswith("kubernetes:") and str(annotations.get(SKIP_AWAIT)) == "true":
        return KUBERNETES_OBJECT
    if reg.type == "kubernetes:yaml/v2:ConfigFile":
        files = {str(f) for f in (reg.inputs.get("files") or [])} | {str(reg.inputs.get("file") or "")}
        runs_controller = any(m.controller is not None for m in MANIFESTS.values() if m.url in files)
        return CREATION[reg.type] if runs_controller else KUBERNETES_OBJECT
    if reg.type in CREATION:
        return CREATION[reg.type]
    if reg.type.startswith("pulumi:providers:"):
        return OTHER
    if reg.type.startswith("kubernetes:"):
        return KUBERNETES_OBJECT
    if reg.type.startswith("aws:"):
        return AWS_RESOURCE
    return OTHER


class Timeline:
    """When each registration starts and ends under the model."""

    def __init__(self, registrations: Sequence[Registered]) -> None:
        self.by_urn: dict[str, Registered] = {}
        self.children: dict[str, list[Registered]] = {}
        for r in registrations:
            self.by_urn.setdefault(r.urn, r)
            self.children.setdefault(r.parent, []).append(r)
        self._start: dict[str, tuple[float, Optional[str]]] = {}
        self._end: dict[str, tuple[float, Optional[str]]] = {}
        # the pre-pulls: (node selector, image, DaemonSet's URN)
        self.prepulls: list[tuple[dict[str, str], str, str]] = []
        helpers = {i.ref for i in IMAGES.values()}
        for r in registrations:
            parent = self.by_urn.get(r.parent)
            if r.type != DAEMON_SET_TYPE or parent is None or parent.type != PREPULL_TYPE:
                continue
            for pod in _pod_specs(r.inputs.get("spec")):
                for image in _images(pod.get("initContainers")) - helpers:
                    self.prepulls.append((_selector(pod), image, r.urn))
        self._pulled: dict[str, Optional[tuple[float, str]]] = {}
        self._took: dict[str, Duration] = {}

    def image_ready(self, reg: Registered) -> Optional[tuple[float, str]]:
        """When every image ``reg``'s pods run (the catalog's small helpers aside) is on their nodes through a
        pre-pull: the pre-pull's DaemonSet created, then the pull (:data:`PODS_START`); with the DaemonSet whose pull
        ends last. ``None``: some image of its pods is not pre-pulled onto their nodes."""
        helpers = {i.ref for i in IMAGES.values()}
        latest: Optional[tuple[float, str]] = None
        for pod in _pod_specs(reg.inputs.get("spec")):
            selector = _selector(pod).items()
            for image in _images(pod) - helpers:
                ready = [
                    (self._ended(urn)[0] + PODS_START.minutes, urn)
                    for sel, pulled, urn in self.prepulls
                    if pulled == image and sel.items() <= selector
                ]
                if not ready:
                    return None
                first = min(ready)
                if latest is None or first[0] > latest[0]:
                    latest = first
        return latest

    def pull_bound(self, urn: str) -> Optional[tuple[float, str]]:
        """For an awaited Job whose images a pre-pull brings: ``(when the pull ends, the DaemonSet's URN)`` when its
        pods wait for that pull (it ends after the Job is created); ``None`` otherwise."""
        self._ended(urn)
        return self._pulled.get(urn)

    def cached_run(
        self, reg: Registered, start: float, cached: Duration, uncached: Duration
    ) -> Optional[tuple[float, Optional[tuple[float, str]]]]:
        """When an object created at ``start`` whose images are pre-pulled starts: ``(time, pull)``, ``pull`` the
        pre-pull it waits for (``None``: the image was there at ``start``). ``None`` when it pulls its images itself:
        not pre-pulled, or waiting for the pre-pull and then taking ``cached`` would end later than ``uncached``."""
        ready = self.image_ready(reg)
        if ready is None or max(ready[0], start) + cached.minutes > start + uncached.minutes:
            return None
        return (ready[0], ready) if ready[0] > start else (start, None)

    def _waits_for(self, reg: Registered) -> list[str]:
        """What ``reg``'s registration waits for to be done, in a stable order: providers, dependencies (explicit
        and of its inputs), and its parent (as ``parent:<urn>``: its registration, not its end)."""
        out = [p.rsplit("::", 1)[0] for p in ([reg.provider] if reg.provider else [])]
        out += [p.rsplit("::", 1)[0] for _, p in sorted(reg.providers.items())]
        deps = set(reg.dependencies)
        for urns in reg.property_dependencies.values():
            deps.update(urns)
        out += sorted(deps)
        if reg.parent in self.by_urn:
            out.append("parent:" + reg.parent)
        return out

    def start(self, urn: str) -> float:
        """When the resource's registration is sent (a component's: when it is registered)."""
        return self._started(urn)[0]

    def end(self, urn: str) -> float:
        """When the resource is done (a component: when all its children are)."""
        return self._ended(urn)[0]

    def _started(self, urn: str) -> tuple[float, Optional[str]]:
        if urn not in self._start:
            self._start[urn] = (0.0, None)  # a cycle (none in a valid program) stops here
            best: tuple[float, Optional[str]] = (0.0, None)
            for w in self._waits_for(self.by_urn[urn]):
                if w.startswith("parent:"):
                    parent = w.removeprefix("parent:")
                    reg = self.by_urn[parent]
                    t = self._started(parent)[0] if not reg.custom and not reg.remote else self._ended(parent)[0]
                    when = (t, w)
                elif w in self.by_urn:
                    when = (self._ended(w)[0], w)
                else:
                    continue
                if when[0] > best[0]:
                    best = when
            self._start[urn] = best
        return self._start[urn]

    def _ended(self, urn: str) -> tuple[float, Optional[str]]:
        if urn not in self._end:
            reg = self.by_urn[urn]
            if not reg.custom and not reg.remote:
                best: tuple[float, Optional[str]] = (self._started(urn)[0], None)
                for child in self.children.get(urn, []):
                    t = self._ended(child.urn)[0]
                    if t > best[0]:
                        best = (t, child.urn)
                self._end[urn] = best
            else:
                start = self._started(urn)[0]
                d = duration(reg)
                self._end[urn] = (start + d.minutes, None)
                self._pulled[urn] = None
                if d is FINISHED_JOB:
                    run = self.cached_run(reg, start, FINISHED_JOB_CACHED, FINISHED_JOB)
                    if run is not None:
                        self._end[urn] = (run[0] + FINISHED_JOB_CACHED.minutes, None)
                        self._pulled[urn] = run[1]
                        self._took[urn] = FINISHED_JOB_CACHED
        return self._end[urn]

    def took(self, urn: str) -> Duration:
        """What a resource's creation took: its kind's duration, or for an awaited Job whose images were pre-pulled,
        the run without the pull."""
        self._ended(urn)
        return self._took.get(urn) or duration(self.by_urn[urn])

    def pull_step(self, ds_urn: str) -> Step:
        """A pre-pull's DaemonSet created (nothing waits for it), then its image pulled onto the group's nodes."""
        ds = self.by_urn[ds_urn]
        return Step(
            ds.type,
            ds.name,
            self.start(ds_urn),
            self.end(ds_urn) - self.start(ds_urn) + PODS_START.minutes,
            "the pre-pull: its DaemonSet created (nothing waits for it), then the image pulled onto the group's nodes "
            f"({PODS_START.minutes:g} min, as the training pods' pull)",
        )

    def path(self, urn: str) -> list[Step]:
        """The chain of registrations that sets ``urn``'s start, first to last, ``urn`` included. An awaited Job whose
        pods waited for a pre-pull is reached through it: the pre-pull's chain, its pull, then the Job's run."""
        steps: list[Step] = []
        current: Optional[str] = urn
        while current is not None:
            reg = self.by_urn[current]
            component = not reg.custom and not reg.remote
            start = self.start(current)
            pull = None if component or current == urn else self.pull_bound(current)
            if component:
                steps.append(
                    Step(reg.type, reg.name, start, 0.0, "a component: registered once what it waits for exists")
                )
            elif pull is not None:
                steps.append(
                    Step(
                        reg.type,
                        reg.name,
                        pull[0],
                        FINISHED_JOB_CACHED.minutes,
                        f"{FINISHED_JOB_CACHED.what} (created at minute {start:.2f}, its pods waited for the pre-pull)",
                    )
                )
                steps.append(self.pull_step(pull[1]))
                current = pull[1]
            else:
                d = self.took(current)
                steps.append(Step(reg.type, reg.name, start, d.minutes, d.what))
            via = self._started(current)[1]
            if via is None:
                break
            current = via.removeprefix("parent:")
            if not via.startswith("parent:"):
                # a dependency ends when its last descendant does: follow that one down to a resource
                while current is not None:
                    r = self.by_urn[current]
                    if r.custom or r.remote:
                        break
                    nxt = self._ended(current)[1]
                    if nxt is None:
                        break
                    current = nxt
        return list(reversed(steps))


def _job_object(plan: "Plan", job: "JobPlan", timeline: Timeline) -> Optional[Registered]:
    """The Kubernetes object of ``job`` (its kind's: a Job, an MPIJob) among its component's descendants."""
    obj = KINDS[job.kind].job_object
    name = f"{plan.config.cluster_name}-{job.name}"
    components = [r for r in timeline.by_urn.values() if r.name == name and not r.custom]
    todo = list(components)
    while todo:
        r = todo.pop()
        group, _, rest = r.type.removeprefix("kubernetes:").partition("/")
        if r.type.startswith("kubernetes:") and group == obj.group and rest.rsplit(":", 1)[-1] == obj.kind:
            return r
        todo.extend(timeline.children.get(r.urn, []))
    return None


def _check_object(plan: "Plan", job: "JobPlan", timeline: Timeline) -> Optional[Registered]:
    """The Job of ``job``'s health check, if it has one."""
    name = f"{plan.config.cluster_name}-{job.name}-allreduce"
    for r in timeline.by_urn.values():
        if r.name == name and not r.custom:
            return next((c for c in timeline.children.get(r.urn, []) if c.type == "kubernetes:batch/v1:Job"), None)
    return None


def _depends_on(timeline: Timeline, reg: Registered, target: str) -> bool:
    seen: set[str] = set()
    todo = [reg.urn]
    while todo:
        u = todo.pop()
        if u in seen or u not in timeline.by_urn:
            continue
        seen.add(u)
        for w in timeline._waits_for(timeline.by_urn[u]):
            w = w.removeprefix("parent:")
            if w == target:
                return True
            todo.append(w)
            todo.extend(c.urn for c in timeline.children.get(w, []))
    return False


def pods_start(
    plan: "Plan", job: "JobPlan", obj: Registered, timeline: Timeline
) -> tuple[float, Duration, Optional[tuple[float, str]]]:
    """The training pods' start: ``(when, what it took, the pre-pull they waited for)``. Short once the image is on the
    nodes: pre-pulled there (from the pull's end, never before it), or run there just before by the job's health check
    (the job's own node group and size, the same image, pulled IfNotPresent)."""
    created = timeline.start(obj.urn)
    run = timeline.cached_run(obj, created, PODS_START_CACHED, PODS_START)
    if run is not None:
        return run[0] + PODS_START_CACHED.minutes, PODS_START_CACHED, run[1]
    start = PODS_START
    check = _check_object(plan, job, timeline)
    if check is not None and _depends_on(timeline, obj, check.urn):
        mine = _images(obj.inputs.get("spec"))
        if mine and mine <= _images(check.inputs.get("spec")):
            start = PODS_START_CACHED
    return created + start.minutes, start, None


def first_step(plan: "Plan", registrations: Sequence[Registered]) -> Optional[FirstStep]:
    """The modelled first training step of ``plan``'s stack from what its program registered (``None`` when no
    training job of the plan is among the registrations: no training job, all of them deferred, or each waits for
    another job to complete (``after``), which takes as long as that job runs)."""
    timeline = Timeline(registrations)
    found: list[tuple[float, str, Registered, Duration, Optional[tuple[float, str]]]] = []
    for job in plan.jobs.values():
        if job.config.purpose != "training" or job.config.after:
            continue
        obj = _job_object(plan, job, timeline)
        if obj is None:
            continue
        when, took, pull = pods_start(plan, job, obj, timeline)
        found.append((when, job.name, obj, took, pull))
    if not found:
        return None
    minutes, name, obj, took, pull = min(found, key=lambda f: (f[0], f[1]))
    created = timeline.start(obj.urn)
    if pull is None:
        path = timeline.path(obj.urn)
        # the job's own object: created, then its pods start (the object's creation is part of that)
        path[-1] = Step(obj.type, obj.name, created, took.minutes, took.what)
    else:
        # the pods waited for the pre-pull: its chain, its pull, then the pods' start
        path = timeline.path(pull[1])
        path[-1] = timeline.pull_step(pull[1])
        what = f"{took.what} (created at minute {created:.2f}, its pods waited for the pre-pull)"
        path.append(Step(obj.type, obj.name, pull[0], took.minutes, what))
    return FirstStep(job=name, minutes=minutes, floor=floor_minutes(), path=tuple(path))
