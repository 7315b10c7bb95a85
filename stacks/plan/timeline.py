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
a Job it is told to skip. The first training step is the moment the pods of the first training job start: its Job
created, then the pods' start (their image pulled, unless the job's health check ran the same image on the same nodes
just before). The floor is what no ordering can save: the cluster, one node group and the pods' start.
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
    if reg.type == "kubernetes:yaml/v2:ConfigFile":
        files = {str(f) for f in (reg.inputs.get("files") or [])} | {str(reg.inputs.get("file") or "")}
        runs_controller = any(m.workloads for m in MANIFESTS.values() if m.url in files)
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
                self._end[urn] = (self._started(urn)[0] + duration(reg).minutes, None)
        return self._end[urn]

    def path(self, urn: str) -> list[Step]:
        """The chain of registrations that sets ``urn``'s start, first to last, ``urn`` included."""
        steps: list[Step] = []
        current: Optional[str] = urn
        while current is not None:
            reg = self.by_urn[current]
            component = not reg.custom and not reg.remote
            d = duration(reg)
            start = self.start(current)
            steps.append(
                Step(
                    reg.type,
                    reg.name,
                    start,
                    0.0 if component else d.minutes,
                    "a component: registered once what it waits for exists" if component else d.what,
                )
            )
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
    kind = KINDS[job.kind]
    name = f"{plan.config.cluster_name}-{job.name}"
    components = [r for r in timeline.by_urn.values() if r.name == name and not r.custom]
    todo = list(components)
    while todo:
        r = todo.pop()
        group, _, rest = r.type.removeprefix("kubernetes:").partition("/")
        if r.type.startswith("kubernetes:") and group == kind.api_group:
            if rest.rsplit(":", 1)[-1].lower() + "s" == kind.resource:
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


def pods_start(plan: "Plan", job: "JobPlan", obj: Registered, timeline: Timeline) -> Duration:
    """The training pods' start: shorter when the job's health check, which ran before it on the same nodes (the
    job's own node group and size), ran the same image, so the nodes have it (pulled IfNotPresent)."""
    check = _check_object(plan, job, timeline)
    if check is None or not _depends_on(timeline, obj, check.urn):
        return PODS_START
    mine = _images(obj.inputs.get("spec"))
    return PODS_START_CACHED if mine and mine <= _images(check.inputs.get("spec")) else PODS_START


def first_step(plan: "Plan", registrations: Sequence[Registered]) -> Optional[FirstStep]:
    """The modelled first training step of ``plan``'s stack from what its program registered (``None`` when no
    training job of the plan is among the registrations: no training job, or all of them deferred)."""
    timeline = Timeline(registrations)
    found: list[tuple[float, str, Registered, Duration]] = []
    for job in plan.jobs.values():
        if job.config.purpose != "training":
            continue
        obj = _job_object(plan, job, timeline)
        if obj is None:
            continue
        start = pods_start(plan, job, obj, timeline)
        found.append((timeline.start(obj.urn) + start.minutes, job.name, obj, start))
    if not found:
        return None
    minutes, name, obj, start = min(found, key=lambda f: (f[0], f[1]))
    path = timeline.path(obj.urn)
    # the job's own object: created, then its pods start (the object's creation is part of that)
    path[-1] = Step(obj.type, obj.name, timeline.start(obj.urn), start.minutes, start.what)
    return FirstStep(job=name, minutes=minutes, floor=floor_minutes(), path=tuple(path))
