"""Admission (Kueue): the queues, quotas and priorities of a plan, derived once.

Every job is created suspended in one LocalQueue, and Kueue admits it when its whole gang fits the quota.
:func:`admission_plan` makes a ResourceFlavor per node group (:class:`FlavorPlan`), one ClusterQueue whose quota is
each group at ``maxSize`` (:func:`per_node`), the StrictFIFO strategy, and priorities by stage, then kind
(:func:`priority_value`, :data:`KIND_OFFSET`). With teams it adds a ClusterQueue per team in the cohort
:data:`COHORT` (:class:`TeamPlan`). :func:`with_topology` gives topology-aware groups a Topology and their pods
:data:`TOPOLOGY_ANNOTATION`; when such a group autoscales, its flavor carries the ProvisioningRequest check
(:class:`ProvisioningPlan`). Other groups do without it: on EKS it adds nothing the quota does not give (source keys
``ca-provreq-best-effort-atomic``, ``ca-aws-atomic-increase``). :func:`never_admitted` and :func:`beyond_own_queue`
find jobs a queue cannot hold.

Why, with Kueue's and the autoscaler's sources: docs/explanation/admission.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional

from components.catalog import (
    NETWORK_TOPOLOGY,
    TOPOLOGY_REGIONS,
    NetworkTopology,
)
from components.conventions import LAUNCHER_CPU_MILLIS, LAUNCHER_MEMORY_MIB
from components.naming import k8s_name
from components.nodeplan import node_allocatable
from stacks.config.errors import key
from stacks.kinds import KINDS

if TYPE_CHECKING:  # pragma: no cover
    from stacks.plan import JobPlan, NodeGroupPlan, Plan

#: The LocalQueue (in the training namespace) and the ClusterQueue every job of the stack is queued in.
LOCAL_QUEUE = "training"
CLUSTER_QUEUE = "training"
#: Kueue's job label naming the LocalQueue (https://kueue.sigs.k8s.io/docs/concepts/local_queue/).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue's job label naming the WorkloadPriorityClass.
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
QUEUEING_STRATEGY = "StrictFIFO"
#: Priority of stage 0 (jobs that wait for none) and the step down per stage.
STAGE_PRIORITY = 1000
STAGE_STEP = 100
#: The kinds of work the stacks queue, first to last within a stage, and what each adds to its stage's priority (less
#: than :data:`STAGE_STEP` apart in all, so the stage decides first: a job still outranks every job that waits for
#: it). Health checks are short and gate a job's start; evaluations are short and report on finished training;
#: training runs long; experiments (the benchmark's) measure the fleet and may wait for the rest.
KIND_OFFSET: Mapping[str, int] = {"health-check": 40, "evaluation": 30, "training": 20, "experiment": 10}
#: With teams, the priority classes exist for the stages 0..TEAM_STAGES-1 of every kind (the teams' jobs-only stacks
#: use them; their WorkloadPriorityClasses are cluster-scoped, made by the cluster stack).
TEAM_STAGES = 10
#: The Kubernetes group of a team's members is this prefix and the team's name.
TEAM_GROUP_PREFIX = "eks-training-team-"
#: waitForPodsReady: an admitted job's pods must all run within this (covers a scale-up from zero of GPU nodes,
#: 3-10 min on EKS, and pulling a multi-GiB training image), else it is evicted and requeued after
#: ``backoffBase * 2^(n-1)`` seconds (capped at the max). A job ``after`` others is admitted at once when its quota is
#: free and its pods wait for them in an init container (not Ready): while they run it is evicted and requeued in
#: this cycle, so the cap bounds how late it starts after they completed (10 min).
PODS_READY_TIMEOUT_S = 1200
REQUEUE_BACKOFF_BASE_S = 60
REQUEUE_BACKOFF_MAX_S = 600
#: Resources the ClusterQueue covers, in the order Kueue's resource group lists them.
RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi")
#: The cohort of the stack's ClusterQueue and the teams' (``spec.cohortName``; a name, no object:
#: https://kueue.sigs.k8s.io/docs/concepts/cohort/), only when there are teams.
COHORT = "eks-training"
#: A team's ClusterQueue is ``team-<name>`` (cluster-scoped: the prefix keeps it apart from the stack's ``training``).
TEAM_QUEUE_PREFIX = "team-"
#: The label every namespace carries with its own name (set by the API server, so a namespace selector on it cannot
#: be claimed by another namespace): https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, kw_only=True)
class FlavorPlan:
    """One node group as a Kueue ResourceFlavor and its nominal quota."""

    name: str
    group: str
    """The node group (``system`` for the system group)."""
    path: str
    """The group's config path (``nodeGroups.gpu``)."""
    node_labels: Mapping[str, str]
    node_taints: tuple[Mapping[str, str], ...]
    max_size: int
    quota: Mapping[str, str]
    """Resource -> quantity (Kubernetes spelling) for every resource of :data:`RESOURCES`."""
    per_node: Mapping[str, int]
    """Resource -> per-node amount (millicores, MiB, devices) the quota is ``max_size`` times."""
    topology: Optional["TopologyPlan"] = None
    """Topology-aware placement on the group (:func:`with_topology`): the Topology its ResourceFlavor names."""
    provisioned: bool = False
    """The group is topology-aware and autoscales: its workloads pass the ProvisioningRequest admission check
    (:attr:`AdmissionPlan.provisioning`) before Kueue assigns their topology."""


@dataclass(frozen=True, kw_only=True)
class TeamPlan:
    """One team's queues (:mod:`stacks.config.teams`): its namespace, its LocalQueue, its ClusterQueue in the cohort."""

    name: str
    path: str
    """``teams.<name>``."""
    namespace: str
    local_queue: str
    cluster_queue: str
    nodes: Mapping[str, int]
    """Flavor -> the team's nominal quota in whole nodes of that group (``quotaPercent`` of maxSize, rounded down)."""
    quota: Mapping[str, Mapping[str, str]]
    """Flavor -> resource -> quantity: ``nodes`` times a node's amount."""
    may_borrow: bool
    may_lend: bool
    member_role_arns: tuple[str, ...] = ()
    """IAM roles of the team's members (access to the team's namespace, :data:`TEAM_GROUP_PREFIX` + name)."""

    @property
    def kubernetes_group(self) -> str:
        """The Kubernetes group of the team's members (their access entries; bound in the team's namespace)."""
        return f"{TEAM_GROUP_PREFIX}{self.name}"


@dataclass(frozen=True, kw_only=True)
class AdmissionPlan:
    """The stack's queues, quotas and priorities (see the module docstring)."""

    local_queue: str
    cluster_queue: str
    flavors: tuple[FlavorPlan, ...]
    priorities: Mapping[str, int]
    """WorkloadPriorityClass name -> value."""
    job_priority: Mapping[str, str] = field(default_factory=dict)
    """Job name -> its WorkloadPriorityClass."""
    check_priority: Mapping[str, str] = field(default_factory=dict)
    """Job name -> its health check's WorkloadPriorityClass (kind ``health-check``, the job's stage)."""
    queueing_strategy: str = QUEUEING_STRATEGY
    pods_ready_timeout_s: int = PODS_READY_TIMEOUT_S
    requeue_backoff_base_s: int = REQUEUE_BACKOFF_BASE_S
    requeue_backoff_max_s: int = REQUEUE_BACKOFF_MAX_S
    namespace: str = "training"
    """The stack's training namespace (its LocalQueue's)."""
    cohort: Optional[str] = None
    """The cohort of every ClusterQueue (``None`` without teams: one ClusterQueue, no cohort)."""
    teams: tuple[TeamPlan, ...] = ()
    own_quota: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Flavor -> resource -> the stack's own ClusterQueue's nominal quota: the fleet less the teams' nodes (the whole
    fleet without teams), so the cohort's quota is the fleet."""
    provisioning: Optional["ProvisioningPlan"] = None
    """The ProvisioningRequest admission check, when some flavor is :attr:`FlavorPlan.provisioned` (else none)."""

    def labels(self, job: str, team: Optional[str] = None) -> dict[str, str]:
        """The labels that queue ``job`` (in ``team``'s LocalQueue, named after the team, in a jobs-only stack)."""
        return {QUEUE_LABEL: team or self.local_queue, PRIORITY_LABEL: self.job_priority[job]}

    def check_labels(self, job: str, team: Optional[str] = None) -> dict[str, str]:
        """The labels that queue ``job``'s health check."""
        return {QUEUE_LABEL: team or self.local_queue, PRIORITY_LABEL: self.check_priority[job]}

    def flavor(self, group: str) -> FlavorPlan:
        return next(f for f in self.flavors if f.group == group)

    @property
    def topologies(self) -> tuple["TopologyPlan", ...]:
        """The Kueue Topologies the flavors name, one per distinct set of levels."""
        return tuple({f.topology.name: f.topology for f in self.flavors if f.topology is not None}.values())

    def pod_annotations(self, group: str) -> dict[str, str]:
        """The pod-template annotations of a job's pods on ``group`` (:func:`with_topology`): on a topology-aware
        group, share the lowest network layer they fit in; none elsewhere."""
        t = self.flavor(group).topology
        return {} if t is None else {TOPOLOGY_ANNOTATION: t.placement_level}


def flavor_name(group: str) -> str:
    return k8s_name(group)


def per_node(group: "NodeGroupPlan") -> dict[str, int]:
    """What one node of ``group`` offers jobs: allocatable CPU (m), memory and huge pages (MiB), GPUs, EFA devices."""
    alloc = node_allocatable(group.profile.instance, group.efa)
    return {
        "cpu": alloc.cpu_millis,
        "memory": alloc.memory_mib,
        "nvidia.com/gpu": group.profile.gpus,
        "vpc.amazonaws.com/efa": group.efa.interfaces if group.efa else 0,
        "hugepages-2Mi": alloc.hugepages_2mi_mib,
    }


def quantity(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"{amount}m"
    if resource in ("memory", "hugepages-2Mi"):
        return f"{amount}Mi"
    return str(amount)


def stage(plan_jobs: Mapping[str, "JobPlan"], name: str) -> int:
    """How many levels of jobs ``name`` waits for (0: none)."""
    after = plan_jobs[name].after
    return 1 + max(stage(plan_jobs, a) for a in after) if after else 0


def priority_class(kind: str, level: int) -> str:
    """The WorkloadPriorityClass of work of ``kind`` (:data:`KIND_OFFSET`) at stage ``level``."""
    return f"eks-training-{kind}-stage-{level}"


def priority_value(kind: str, level: int) -> int:
    """Stage first (a job outranks the jobs that wait for it), then kind."""
    return STAGE_PRIORITY - STAGE_STEP * level + KIND_OFFSET[kind]


def job_kind(plan: "Plan", name: str) -> str:
    """``experiment`` (a benchmark experiment), else the job's ``purpose``."""
    if plan.config.benchmark is not None and name in plan.config.benchmark.experiments:
        return "experiment"
    return plan.jobs[name].config.purpose


def admission_plan(plan: "Plan") -> AdmissionPlan:
    flavors = []
    for g in plan.all_groups:
        node = per_node(g)
        flavors.append(
            FlavorPlan(
                name=flavor_name(g.name),
                group=g.name,
                path=g.path,
                node_labels=dict(g.profile.labels),
                node_taints=tuple(
                    {"key": t["key"], "value": t["value"], "effect": t["effect"]} for t in g.profile.taints
                ),
                max_size=g.max_size,
                per_node=node,
                quota={r: quantity(r, node[r] * g.max_size) for r in RESOURCES},
            )
        )
    stages = {n: stage(plan.jobs, n) for n in plan.jobs}
    kinds = {n: job_kind(plan, n) for n in plan.jobs}
    cfg = plan.config
    classes = {(kinds[n], s) for n, s in stages.items()}
    classes |= {("health-check", stages[n]) for n, j in plan.jobs.items() if j.health_check is not None}
    if cfg.teams:
        classes |= {(k, s) for k in KIND_OFFSET for s in range(TEAM_STAGES)}
    teams = []
    for name, t in cfg.teams.items():
        nodes = {f.name: f.max_size * t.quota_percent // 100 for f in flavors}
        teams.append(
            TeamPlan(
                name=name,
                path=f"teams.{name}",
                namespace=t.namespace_name(name),
                local_queue=name,
                cluster_queue=f"{TEAM_QUEUE_PREFIX}{name}",
                nodes=nodes,
                quota=_quota(flavors, nodes),
                may_borrow=t.may_borrow,
                may_lend=t.may_lend,
                member_role_arns=tuple(t.member_role_arns),
            )
        )
    own_nodes = {f.name: f.max_size - sum(t.nodes[f.name] for t in teams) for f in flavors}
    return AdmissionPlan(
        local_queue=LOCAL_QUEUE,
        cluster_queue=CLUSTER_QUEUE,
        namespace=cfg.storage.namespace,
        cohort=COHORT if teams else None,
        teams=tuple(teams),
        own_quota=_quota(flavors, own_nodes),
        flavors=tuple(flavors),
        priorities={priority_class(k, s): priority_value(k, s) for k, s in sorted(classes)},
        job_priority={n: priority_class(kinds[n], s) for n, s in stages.items()},
        check_priority={
            n: priority_class("health-check", stages[n]) for n, j in plan.jobs.items() if j.health_check is not None
        },
    )


def _quota(flavors: "list[FlavorPlan]", nodes: Mapping[str, int]) -> dict[str, dict[str, str]]:
    """Flavor -> resource -> ``nodes[flavor]`` nodes' worth of it."""
    return {f.name: {r: quantity(r, f.per_node[r] * nodes[f.name]) for r in RESOURCES} for f in flavors}


def job_requests(job: "JobPlan") -> dict[str, dict[str, int]]:
    """Flavor group -> resource -> what ``job``'s workers request at its largest size (one pod per node)."""
    p = job.placement
    huge = p.get("hugepages_2mi") or "0"
    per_pod = {
        "cpu": p["cpu_millis"],
        "memory": p["memory_mib"],
        "nvidia.com/gpu": p["gpus"],
        "vpc.amazonaws.com/efa": p["efa_devices"],
        "hugepages-2Mi": int(str(huge).removesuffix("Mi") or 0),
    }
    return {job.group.name: {r: v * job.max_nodes for r, v in per_pod.items()}}


def never_admitted(plan: "Plan", admission: AdmissionPlan) -> list[str]:
    """Jobs that ask more than their group's quota (its maximum size), or whose MPI launcher asks more than the system
    group's (:func:`launcher_requests`): Kueue would keep them waiting for ever."""
    problems = []
    for name, job in plan.jobs.items():
        for group, asks in job_and_launcher_requests(plan, job).items():
            flavor = admission.flavor(group)
            for resource, amount in asks.items():
                have = flavor.per_node[resource] * flavor.max_size
                if amount > have and group != job.group.name:
                    problems.append(
                        f"{key(f'jobs.{name}.kind')}: the job's MPI launcher asks {quantity(resource, amount)} "
                        f"{resource} on {flavor.path}, more than its quota, what the group holds at "
                        f"{key(flavor.path + '.maxSize')} ({flavor.max_size} x "
                        f"{quantity(resource, flavor.per_node[resource])} = {quantity(resource, have)}): Kueue would "
                        f"never admit it; raise {key(flavor.path + '.maxSize')} or its instance type"
                    )
                elif amount > have:
                    per_pod = job_requests(job)[group][resource] // job.max_nodes
                    launcher = (
                        " and its MPI launcher" if launcher_requests(plan, job).get(group, {}).get(resource) else ""
                    )
                    problems.append(
                        f"{key(f'jobs.{name}.nodes')}: the job asks {quantity(resource, amount)} {resource} "
                        f"({job.max_nodes} pods of {quantity(resource, per_pod)}{launcher}) on {flavor.path}, more "
                        f"than its quota, what the group holds at {key(flavor.path + '.maxSize')} ({flavor.max_size} x "
                        f"{quantity(resource, flavor.per_node[resource])} = {quantity(resource, have)}): Kueue would "
                        f"never admit it; raise maxSize or lower nodes"
                    )
    return problems


def beyond_team_stages(plan: "Plan") -> list[str]:
    """A jobs-only stack's jobs use the priority classes the cluster stack made, stages 0..TEAM_STAGES-1: a job that
    waits through more levels of ``after`` names a class that does not exist, and Kueue creates no Workload for it
    (``GetPriorityFromWorkloadPriorityClass`` fails, kubernetes-sigs/kueue v0.19.1
    pkg/controller/jobframework/reconciler.go ``ExtractPriority``): it would stay suspended for ever."""
    if plan.config.cluster.stack_reference is None:
        return []
    return [
        f"{key(f'jobs.{name}.after')}: the job waits through {stage(plan.jobs, name)} levels of jobs; a jobs-only "
        f"stack's jobs may wait through at most {TEAM_STAGES - 1} (the cluster stack makes the priority classes of "
        f"stages 0-{TEAM_STAGES - 1}): Kueue would never queue it; shorten the chain"
        for name in plan.jobs
        if stage(plan.jobs, name) >= TEAM_STAGES
    ]


def idle_teams(admission: AdmissionPlan) -> list[str]:
    """Teams that may not borrow and whose share is no whole node of any worker group: their jobs could never run on
    one (Kueue would keep them waiting for ever)."""
    problems = []
    workers = [f for f in admission.flavors if f.path != "systemNodeGroup"]
    for t in admission.teams:
        if t.may_borrow or not workers or any(t.nodes[f.name] for f in workers):
            continue
        groups = ", ".join(f"{key(f.path + '.maxSize')} {f.max_size}" for f in workers)
        problems.append(
            f"{key(t.path + '.quotaPercent')}: the team's share is no whole node of any worker group "
            f"({groups}) and {key(t.path + '.mayBorrow')} is false: its jobs could never run on one; "
            f"raise quotaPercent or let it borrow"
        )
    return problems


def launcher_requests(plan: "Plan", job: "JobPlan") -> dict[str, dict[str, int]]:
    """The system group -> resource -> what ``job``'s MPI launcher requests (none for other kinds). An MPIJob's
    launcher pod runs ``mpirun`` on the system nodes (:class:`components.workloads.MpiJob`): Kueue admits it as the
    workload's second pod set, against the system group's flavor (the only one whose node labels its node selector
    agrees with and whose taints it tolerates), so a job is admitted only when its workers' quota and its launcher's
    are both free (https://kueue.sigs.k8s.io/docs/concepts/workload/#podsets). Its init containers (the wait and
    code download, :func:`components.workloads.identity.job_identity`) request less than its container, so the
    container's requests are the pod's (Kubernetes' effective requests: the larger of the init containers' and the
    sum of the containers', https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers)."""
    if not KINDS[job.kind].launcher_on_system_group:
        return {}
    return {plan.system.name: {"cpu": LAUNCHER_CPU_MILLIS, "memory": LAUNCHER_MEMORY_MIB}}


def job_and_launcher_requests(plan: "Plan", job: "JobPlan") -> dict[str, dict[str, int]]:
    """Group -> resource -> what the whole workload asks at its largest size: the workers (:func:`job_requests`) and
    the MPI launcher (:func:`launcher_requests`), summed where they share a group."""
    out = {g: dict(r) for g, r in job_requests(job).items()}
    for group, asks in launcher_requests(plan, job).items():
        mine = out.setdefault(group, {})
        for resource, amount in asks.items():
            mine[resource] = mine.get(resource, 0) + amount
    return out


def amount(resource: str, value: str) -> int:
    """The inverse of :func:`quantity`: millicores, MiB or a count."""
    return int(str(value).removesuffix("Mi").removesuffix("m"))


def launcher_beyond_team(plan: "Plan", team: str, quota: Mapping[str, Mapping[str, str]], where: str) -> list[str]:
    """A jobs-only stack's MPI jobs whose launcher does not fit ``team``'s quota on the system group's flavor
    (``quota``: flavor -> resource -> quantity, the cluster stack's ``teams.<team>.quota`` output) when the team may
    not borrow: Kueue admits the launcher's pod set against that quota only, so the job would wait for ever."""
    system = flavor_name(plan.system.name)
    have = quota.get(system) or {}
    problems = []
    for name, job in sorted(plan.jobs.items()):
        for resource, asks in launcher_requests(plan, job).get(plan.system.name, {}).items():
            holds = amount(resource, have.get(resource, "0"))
            if asks > holds:
                problems.append(
                    f"{key(f'jobs.{name}.kind')}: the job's MPI launcher asks {quantity(resource, asks)} {resource} on "
                    f"the system group; team {team} may not borrow and its quota there is {quantity(resource, holds)} "
                    f"({where}): Kueue would never admit it; run the job as another kind, or raise the team's "
                    f"quotaPercent (a whole system node) or set mayBorrow there"
                )
    return problems


def beyond_own_queue(plan: "Plan", admission: AdmissionPlan) -> list[str]:
    """With teams, the stack's own jobs go to its own ClusterQueue, whose nominal quota is the fleet less the teams'
    shares (:attr:`AdmissionPlan.own_quota`) and which may borrow only what the other queues of the cohort lend: the
    teams with ``mayLend: false`` lend nothing (``lendingLimit: 0``). A job (workers and MPI launcher,
    :func:`job_and_launcher_requests`) larger than that, though within the fleet (:func:`never_admitted` reports the
    rest), would wait for ever (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#lendinglimit)."""
    if not admission.teams:
        return []
    problems = []
    for name, job in plan.jobs.items():
        for group, asks in job_and_launcher_requests(plan, job).items():
            flavor = admission.flavor(group)
            lenders = [t for t in admission.teams if t.may_lend]
            for resource, asked in asks.items():
                fleet = flavor.per_node[resource] * flavor.max_size
                own = amount(resource, admission.own_quota[flavor.name][resource])
                lent = sum(amount(resource, t.quota[flavor.name][resource]) for t in lenders)
                if fleet >= asked > own + lent:
                    keeps = ", ".join(key(f"{t.path}.mayLend") for t in admission.teams if not t.may_lend) or "none"
                    what = f"jobs.{name}.nodes" if group == job.group.name else f"jobs.{name}.kind"
                    problems.append(
                        f"{key(what)}: the job asks {quantity(resource, asked)} {resource} on {flavor.path}; the "
                        f"stack's own queue holds {quantity(resource, own)} there (the fleet less the teams' "
                        f"quotaPercent) and may borrow only what the teams that lend hold ({quantity(resource, lent)}; "
                        f"not lending: {keeps}): Kueue would never admit it; lower the teams' quotaPercent, let them "
                        f"lend, or make the job smaller"
                    )
                    break
    return problems


# --- topology-aware placement -----------------------------------------------------------------------------------------

#: Kueue's pod-template annotation that asks for one domain of a Topology level, else the level above, and so on up,
#: else spread (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/#user-facing-apis). Preferred, not
#: ``kueue.x-k8s.io/podset-required-topology``: a job larger than one lowest-layer domain (or one that finds none
#: free) still starts, on the fewest domains Kueue finds, instead of waiting for ever.
TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
#: Kueue's other TAS annotations: a pod set carrying any of them asks for topology-aware placement.
TAS_ANNOTATIONS = (
    TOPOLOGY_ANNOTATION,
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
)
#: The lowest level of every Topology: one domain per node, so Kueue assigns each pod its node and respects the
#: nodes' taints (Kueue's sample GPU Topology, site/static/examples/tas/sample-gpu-queues.yaml at v0.19.1).
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, kw_only=True)
class TopologyPlan:
    """A Kueue ``Topology``: the EC2 network layers' node labels, top first, then :data:`HOSTNAME_LABEL`."""

    name: str
    levels: tuple[str, ...]

    @property
    def placement_level(self) -> str:
        """What a job's pods ask to share: the lowest network layer (the network node the instances connect to)."""
        return self.levels[-2]


def topology_plan(network: NetworkTopology) -> TopologyPlan:
    return TopologyPlan(name=f"ec2-network-{network.layers}-layers", levels=(*network.labels, HOSTNAME_LABEL))


def autoscales(plan: "Plan", group: "NodeGroupPlan") -> bool:
    """The cluster autoscaler runs and may change ``group``'s size (``minSize`` < ``maxSize``); else its nodes are the
    ones it has (a fixed fleet, or a group nobody scales)."""
    return plan.autoscale and group.min_size < group.max_size


def group_network(plan: "Plan", group: "NodeGroupPlan") -> Optional[NetworkTopology]:
    """The network layers ``group``'s nodes are labelled with when its placement can be topology-aware: a worker
    group whose types all have the same layers in the catalog (:data:`~components.catalog.NETWORK_TOPOLOGY`), unless
    its ``topology`` is false. The system group never is (its pods are small and talk little). The default is on,
    whether the group's size is fixed or the autoscaler scales it, in the regions where EC2 describes instance topology
    (off elsewhere, where ``true`` is refused: :func:`topology_region_problems`): it depends on the group's types and
    the stack's region only, never on its jobs (:func:`with_topology`).

    Kueue's topology-aware scheduling counts only the nodes that exist (and are Ready), and a job it has not admitted
    has no pod, so the cluster autoscaler would add no node for it; on a group that autoscales the flavor therefore
    carries the ProvisioningRequest admission check (:func:`provisioning_plan`): Kueue reserves the quota, the
    autoscaler scales the group up for the whole job, and Kueue assigns the topology on the nodes that then exist
    (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/#clusterautoscaler-support)."""
    cfg = plan.config.node_groups.get(group.name) if group.path != "systemNodeGroup" else None
    if cfg is None or cfg.topology is False:
        return None
    if cfg.topology is None and plan.config.region not in TOPOLOGY_REGIONS:
        return None  # the default is off where EC2 labels no node (a stack's region never changes); true is refused
    layers = {NETWORK_TOPOLOGY[t.name] if t.name in NETWORK_TOPOLOGY else None for t in group.types}
    if None in layers or len({n.layers for n in layers if n is not None}) != 1:
        return None
    return NETWORK_TOPOLOGY[group.types[0].name]


def with_topology(plan: "Plan", admission: AdmissionPlan) -> AdmissionPlan:
    """``admission`` with each topology-aware group's flavor naming its Topology (:func:`group_network`), those that
    autoscale :attr:`~FlavorPlan.provisioned`, and the admission check they need (:func:`provisioning_plan`).

    Whether a group is topology-aware is derived from the group alone (its types, its ``topology``), never from its
    jobs: Kueue refuses to change or remove a ResourceFlavor's ``topologyName`` once set (``topologyName is immutable
    when topologyName is set``, apis/kueue/v1beta2/resourceflavor_types.go at v0.19.1), so a default a job edit could
    flip would make a later ``pulumi up`` fail. Autoscaled groups are topology-aware by default since the pinned Kueue
    places a job of any size through the ProvisioningRequest check (its second pass no longer counts the job's own
    quota twice: source key ``kueue-second-pass-fix``, :data:`~components.catalog.KUEUE_SECOND_PASS_FIX`)."""
    from dataclasses import replace

    groups = {g.name: g for g in plan.all_groups}
    flavors = []
    for f in admission.flavors:
        g = groups[f.group]
        n = group_network(plan, g)
        if n is None:
            flavors.append(f)
            continue
        flavors.append(replace(f, topology=topology_plan(n), provisioned=autoscales(plan, g)))
    return replace(admission, flavors=tuple(flavors), provisioning=provisioning_plan(tuple(flavors)))


# --- topology-aware placement on groups that autoscale: Kueue's ProvisioningRequest admission check -------------------

#: The cluster autoscaler's class that scales up for a whole ProvisioningRequest at once (within the node groups'
#: maximum) and marks it Provisioned once the scale-up is requested (source key ``ca-provreq-best-effort-atomic``).
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: The AdmissionCheck and the ProvisioningRequestConfig it names (both cluster-scoped).
PROVISIONING_CHECK = "cluster-autoscaler"
PROVISIONING_CONFIG = "best-effort-atomic-scale-up"
#: Kueue's retries of a request the autoscaler gave up on (``Failed``: 7 days without capacity, or pods it could not
#: make) or whose booking expired before Kueue admitted the job (``BookingExpired``: 10 minutes after Provisioned, e.g.
#: nodes not yet Ready or fewer than asked for): each retry evicts the workload (its quota freed, it holds nothing),
#: requeues it after ``base * 2^(n-1)`` seconds capped at the max, and makes a new request. The same base and cap as
#: waitForPodsReady's requeueing; and as there, no limit: Kueue's default (3) deactivates the job after about 40
#: minutes of a short EC2 supply, and it would wait for a person to reactivate it. The limit is the CRD's largest
#: (``format: int32``): the retry count never reaches it.
PROVISIONING_RETRY_LIMIT = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class ProvisioningPlan:
    """Kueue's ProvisioningRequest admission check for the flavors of topology-aware groups that autoscale
    (``onFlavors``: fixed groups and the system group are not affected).

    ``managedResources`` is left empty (every resource managed), so the request holds every pod set of the
    workload: a job is admitted whole, the MPI launcher included (the autoscaler finds room for it on the nodes that
    exist, or scales its group in the same decision); a pod set on such a group that asked for none of a narrower list
    would count as ready without a node, and Kueue would wait for nodes that never come (``requiredPodSets``,
    pkg/controller/admissionchecks/provisioning/controller.go at v0.19.1)."""

    check: str = PROVISIONING_CHECK
    config: str = PROVISIONING_CONFIG
    provisioning_class: str = PROVISIONING_CLASS
    flavors: tuple[str, ...]
    """The flavors whose workloads pass the check."""
    backoff_base_s: int = REQUEUE_BACKOFF_BASE_S
    backoff_max_s: int = REQUEUE_BACKOFF_MAX_S
    backoff_limit_count: int = PROVISIONING_RETRY_LIMIT


def provisioning_plan(flavors: tuple[FlavorPlan, ...]) -> Optional[ProvisioningPlan]:
    names = tuple(f.name for f in flavors if f.provisioned)
    return ProvisioningPlan(flavors=names) if names else None


def topology_region_problems(plan: "Plan", region: str) -> list[str]:
    """Topology-aware groups in a region where EC2 describes no instance topology: their nodes would get no labels
    and Kueue would never place their jobs (source key ``ec2-instance-topology-prerequisites``)."""
    if plan.admission is None or region in TOPOLOGY_REGIONS:
        return []
    return [
        f"{key(f.path + '.topology')}: EC2 describes no instance topology in {region}, so the group's nodes get no "
        f"topology.k8s.aws/network-node-layer labels and Kueue would never place its jobs; set topology: false"
        for f in plan.admission.flavors
        if f.topology is not None
    ]
