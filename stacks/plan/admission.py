"""Admission (Kueue): the queues, quotas and priorities of a plan, derived once (the objects:
:mod:`stacks.plan.queues`).

Every job is created suspended in one LocalQueue, and Kueue admits it when its whole gang fits the quota.
:func:`admission_plan` makes a ResourceFlavor per node group, one ClusterQueue whose quota is each group at
``maxSize`` (:func:`per_node`), the StrictFIFO strategy, and priorities by stage, then kind (:func:`priority_value`).
With teams it adds a ClusterQueue per team in one cohort. :func:`with_topology` gives topology-aware groups a Topology;
when such a group autoscales, its flavor carries the ProvisioningRequest check. :func:`never_admitted` and
:func:`beyond_own_queue` find jobs a queue cannot hold.

Why, with Kueue's and the autoscaler's sources: docs/explanation/admission.md."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from components.catalog import (
    NETWORK_TOPOLOGY,
    TOPOLOGY_REGIONS,
    NetworkTopology,
)
from components.conventions import LAUNCHER_CPU_MILLIS, LAUNCHER_MEMORY_MIB
from components.naming import k8s_name
from components.nodeplan import node_allocatable
from components.quantities import mebibytes, mebibytes_of, millicores, millicores_of
from components.scheduling import SYSTEM_ROLE
from stacks.config.errors import key
from stacks.kinds import KINDS
from stacks.plan.model import JobPlan, NodeGroupPlan, Plan
from stacks.plan.queues import (
    CLUSTER_QUEUE,
    COHORT,
    HOSTNAME_LABEL,
    KIND_OFFSET,
    LOCAL_QUEUE,
    RESOURCES,
    STAGE_PRIORITY,
    STAGE_STEP,
    TEAM_QUEUE_PREFIX,
    TEAM_STAGES,
    AdmissionPlan,
    FlavorPlan,
    ProvisioningPlan,
    TeamPlan,
    TopologyPlan,
)


def flavor_name(group: str) -> str:
    return k8s_name(group)


def per_node(group: NodeGroupPlan) -> dict[str, int]:
    """What one node of ``group`` offers jobs, the unit of its quota: on a worker group, what the one pod a node holds
    requests (CPU in m, memory and huge pages in MiB, GPUs, EFA devices), so the quota admits at most ``maxSize`` such
    pods; on the system group, whose jobs' pods share a node, the node's allocatable CPU, memory and huge pages."""
    if group.name == SYSTEM_ROLE:
        alloc = node_allocatable(group.profile.instance, group.efa)
        cpu, memory, huge = alloc.cpu_millis, alloc.memory_mib, alloc.hugepages_2mi_mib
    else:
        pod = group.profile.pod
        cpu, memory, huge = pod.cpu_millis, pod.memory_mib, mebibytes_of(pod.hugepages_2mi or "0")
    return {
        "cpu": cpu,
        "memory": memory,
        "nvidia.com/gpu": group.profile.gpus,
        "vpc.amazonaws.com/efa": group.efa.interfaces if group.efa else 0,
        "hugepages-2Mi": huge,
    }


def quantity(resource: str, amount: int) -> str:
    if resource == "cpu":
        return millicores(amount)
    if resource in ("memory", "hugepages-2Mi"):
        return mebibytes(amount)
    return str(amount)


def stage(plan_jobs: Mapping[str, JobPlan], name: str) -> int:
    """How many levels of jobs ``name`` waits for (0: none)."""
    after = plan_jobs[name].after
    return 1 + max(stage(plan_jobs, a) for a in after) if after else 0


def priority_class(kind: str, level: int) -> str:
    """The WorkloadPriorityClass of work of ``kind`` (:data:`~stacks.plan.queues.KIND_OFFSET`) at stage ``level``."""
    return f"eks-training-{kind}-stage-{level}"


def priority_value(kind: str, level: int) -> int:
    """Stage first (a job outranks the jobs that wait for it), then kind."""
    return STAGE_PRIORITY - STAGE_STEP * level + KIND_OFFSET[kind]


def job_kind(plan: Plan, name: str) -> str:
    """``experiment`` (a benchmark experiment), else the job's ``purpose``."""
    if plan.config.benchmark is not None and name in plan.config.benchmark.experiments:
        return "experiment"
    return plan.jobs[name].config.purpose


def admission_plan(plan: Plan) -> AdmissionPlan:
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
        own_nodes=own_nodes,
        own_quota=_quota(flavors, own_nodes),
        flavors=tuple(flavors),
        priorities={priority_class(k, s): priority_value(k, s) for k, s in sorted(classes)},
        job_priority={n: priority_class(kinds[n], s) for n, s in stages.items()},
        check_priority={
            n: priority_class("health-check", stages[n]) for n, j in plan.jobs.items() if j.health_check is not None
        },
    )


def _quota(flavors: list[FlavorPlan], nodes: Mapping[str, int]) -> dict[str, dict[str, str]]:
    """Flavor -> resource -> ``nodes[flavor]`` nodes' worth of it."""
    return {f.name: {r: quantity(r, f.per_node[r] * nodes[f.name]) for r in RESOURCES} for f in flavors}


def job_requests(job: JobPlan) -> dict[str, dict[str, int]]:
    """Flavor group -> resource -> what ``job``'s workers request (one pod per node): its ``nodes``, its Job's
    parallelism, which Kueue admits. An elastic job does not grow past it without a ``pulumi up`` that sets a larger
    ``nodes`` (and checks it again)."""
    p = job.placement
    per_pod = {
        "cpu": p["cpu_millis"],
        "memory": p["memory_mib"],
        "nvidia.com/gpu": p["gpus"],
        "vpc.amazonaws.com/efa": p["efa_devices"],
        "hugepages-2Mi": mebibytes_of(p.get("hugepages_2mi") or "0"),
    }
    return {job.group.name: {r: v * job.nodes for r, v in per_pod.items()}}


def never_admitted(plan: Plan, admission: AdmissionPlan) -> list[str]:
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
                    per_pod = job_requests(job)[group][resource] // job.nodes
                    launcher = (
                        " and its MPI launcher" if launcher_requests(plan, job).get(group, {}).get(resource) else ""
                    )
                    problems.append(
                        f"{key(f'jobs.{name}.nodes')}: the job asks {quantity(resource, amount)} {resource} "
                        f"({job.nodes} pods of {quantity(resource, per_pod)}{launcher}) on {flavor.path}, more "
                        f"than its quota, what the group holds at {key(flavor.path + '.maxSize')} ({flavor.max_size} x "
                        f"{quantity(resource, flavor.per_node[resource])} = {quantity(resource, have)}): Kueue would "
                        f"never admit it; raise maxSize or lower nodes"
                    )
    return problems


def beyond_unscaled_groups(plan: Plan) -> list[str]:
    """Jobs with more pods than their group's nodes where nothing scales the group (the autoscaler off, or not
    installed on a stack without worker groups): one pod takes a whole node, so the rest would wait for ever. A
    Capacity Block group is left out: its block's start sets its size."""
    if plan.config.jobs_only:
        return []
    problems = []
    for name, job in plan.jobs.items():
        g = job.group
        if autoscales(plan, g) or g.capacity_type == "CAPACITY_BLOCK" or job.nodes <= g.desired_size:
            continue
        why, fix = (
            (f"with {key('autoscaler.enabled')} false nothing adds nodes to it", "or turn the autoscaler on")
            if not plan.config.autoscaler.enabled
            else (
                "a stack without worker groups runs no cluster autoscaler",
                "or add a worker group (the cluster autoscaler then runs)",
            )
        )
        problems.append(
            f"{key(f'jobs.{name}.nodes')}: {job.nodes} pods, one per node, on {g.path}, which keeps its "
            f"{key(g.path + '.desiredSize')} ({g.desired_size}) nodes: {why}, so {job.nodes - g.desired_size} of "
            f"its pods would never get a node and the job would never finish; raise desiredSize (at most maxSize, "
            f"{g.max_size}), lower nodes, {fix}"
        )
    return problems


def beyond_team_stages(plan: Plan) -> list[str]:
    """A jobs-only stack's jobs use the priority classes the cluster stack made, stages 0..TEAM_STAGES-1: a job that
    waits through more levels of ``after`` names a class that does not exist, and Kueue creates no Workload for it
    (``GetPriorityFromWorkloadPriorityClass`` fails, kubernetes-sigs/kueue v0.19.1
    pkg/controller/jobframework/reconciler.go ``ExtractPriority``): it would stay suspended for ever."""
    if not plan.config.jobs_only:
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


def launcher_requests(plan: Plan, job: JobPlan) -> dict[str, dict[str, int]]:
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


def job_and_launcher_requests(plan: Plan, job: JobPlan) -> dict[str, dict[str, int]]:
    """Group -> resource -> what the whole workload asks: the workers (:func:`job_requests`) and
    the MPI launcher (:func:`launcher_requests`), summed where they share a group."""
    out = {g: dict(r) for g, r in job_requests(job).items()}
    for group, asks in launcher_requests(plan, job).items():
        mine = out.setdefault(group, {})
        for resource, amount in asks.items():
            mine[resource] = mine.get(resource, 0) + amount
    return out


def amount(resource: str, value: str) -> int:
    """The inverse of :func:`quantity`: millicores, MiB or a count (a record of an earlier version's ``6000m`` too)."""
    if resource == "cpu":
        return millicores_of(str(value))
    if resource in ("memory", "hugepages-2Mi"):
        return mebibytes_of(str(value))
    return int(value)


def launcher_beyond_team(plan: Plan, team: str, quota: Mapping[str, Mapping[str, str]], where: str) -> list[str]:
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


def beyond_own_queue(plan: Plan, admission: AdmissionPlan) -> list[str]:
    """With teams, the stack's own jobs go to its own ClusterQueue, whose nominal quota is the fleet less the teams'
    shares (``own_quota``) and which may borrow only what the other queues of the cohort lend: the
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
                        "lend, or make the job smaller"
                    )
                    break
    return problems


# --- topology-aware placement -----------------------------------------------------------------------------------------


def topology_plan(network: NetworkTopology) -> TopologyPlan:
    return TopologyPlan(name=f"ec2-network-{network.layers}-layers", levels=(*network.labels, HOSTNAME_LABEL))


def autoscales(plan: Plan, group: NodeGroupPlan) -> bool:
    """The cluster autoscaler runs and may change ``group``'s size (``minSize`` < ``maxSize``); else its nodes are the
    ones it has (a fixed fleet, or a group nobody scales)."""
    return plan.autoscale and group.min_size < group.max_size


def group_network(plan: Plan, group: NodeGroupPlan) -> Optional[NetworkTopology]:
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


def with_topology(plan: Plan, admission: AdmissionPlan) -> AdmissionPlan:
    """``admission`` with each topology-aware group's flavor naming its Topology (:func:`group_network`), those that
    autoscale ``provisioned``, and the admission check they need (:func:`provisioning_plan`).

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


def provisioning_plan(flavors: tuple[FlavorPlan, ...]) -> Optional[ProvisioningPlan]:
    names = tuple(f.name for f in flavors if f.provisioned)
    return ProvisioningPlan(flavors=names) if names else None


def topology_region_problems(plan: Plan, region: str) -> list[str]:
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


def placement_of(plan: Plan) -> dict[str, Any]:
    """Group -> the facts a job's placement is derived from (its instance types, maxSize, labels and taints, and the
    Topology of a topology-aware group: a job's pods must ask for a level exactly when its flavor has one)."""
    return {
        g.name: {
            "instanceTypes": list(g.instance_types),
            "maxSize": g.max_size,
            "labels": dict(g.profile.labels),
            "taints": [dict(t) for t in g.profile.taints],
            **_topology_of(plan, g.name),
        }
        for g in plan.all_groups
    }


def _topology_of(plan: Plan, group: str) -> dict[str, Any]:
    t = plan.admission.flavor(group).topology if plan.admission is not None else None
    return {} if t is None else {"topology": t.name}
