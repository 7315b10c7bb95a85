"""What a change of a running stack's configuration does at the next ``pulumi up``, offline
(``python -m stacks plan --stack NAME --from OLD``): the Kubernetes minor change, the node groups that roll and why,
the running jobs those rolls stop (:mod:`stacks.plan.group_changes`), the jobs it starts again
(:mod:`stacks.plan.job_changes`), the add-on pins that move, the changes that replace the cluster or the jobs' shared
data, and how long it is expected to take.

Both configurations are loaded and planned as ``pulumi up`` does (the old one by :mod:`stacks.plan.old_config`); the
comparison reads the two plans, refuses what EKS refuses (:mod:`stacks.plan.minors`,
:mod:`stacks.plan.network_change`), what the storage cannot take (:mod:`stacks.plan.storage_change`) and what Kueue
refuses (:func:`~stacks.plan.flavor_change.flavor_problems`), and :mod:`stacks.plan.upgrade_text` says what it found.
Pulumi updates the control plane first (everything else depends on the cluster), then the add-ons and the node groups;
the groups wait for the VPC CNI and kube-proxy add-ons.
"""

import ipaddress
from dataclasses import dataclass, replace
from typing import Mapping, Optional

from components.catalog.platform import DELETE_DRAIN_LIMIT_S
from components.catalog.timings import CONTROL_PLANE_UPGRADE, CREATION, FSX_UPDATE_WAIT
from stacks.config import ConfigError, key
from stacks.plan import NodeGroupPlan, Plan, same_cluster
from stacks.plan.addon_changes import AddonChange, addon_changes, addon_notes, addon_step_problems, held_addon_notes
from stacks.plan.admission import placement_of
from stacks.plan.ami_pins import pinned_release_problems, unseen_release_notes
from stacks.plan.flavor_change import flavor_problems
from stacks.plan.group_changes import (
    GroupChange,
    added_group,
    block_deferred,
    block_start_notes,
    deleted_group,
    group_change,
    outgoing_notes,
)
from stacks.plan.job_changes import (
    NEW_DATA_RERUN,
    JobRun,
    awaited_notes,
    deadline_notes,
    run_changes,
    unrecorded_notes,
)
from stacks.plan.minors import VERSION_KEY, minor_problems, minor_step
from stacks.plan.network_change import network_notes, network_problems
from stacks.plan.storage_change import (
    data_changes,
    deleted_data_problems,
    fsx_updated_in_place,
    new_data_is_empty,
    storage_notes,
    storage_problems,
)
from stacks.zones import RegionZones

#: A node group's deletion at the end of an update: EKS drains its nodes for up to DELETE_DRAIN_LIMIT_S, then
#: terminates them (its termination is not timed).
GROUP_DELETION_MINUTES = DELETE_DRAIN_LIMIT_S / 60


@dataclass(frozen=True)
class Upgrade:
    """What moving from the old configuration to the new one does."""

    old_label: str
    old_minor: str
    new_minor: str
    groups: tuple[GroupChange, ...]
    addons: tuple[AddonChange, ...]
    notes: tuple[str, ...]
    #: The minor the control plane runs where it moved past ``old_minor`` since its record: an earlier ``pulumi up``
    #: that failed, or EKS's own upgrade (its nodes may not have moved).
    running: Optional[str] = None
    #: Changes that replace the cluster or give the jobs other shared data (:func:`data_changes`).
    data: tuple[str, ...] = ()
    #: That other shared data is a file system the update makes, with no job's folder (:func:`new_data_is_empty`).
    data_empty: bool = False
    #: What the update does that its expected duration does not count, each with its modelled time
    #: (:func:`untimed_steps`).
    untimed: tuple[str, ...] = ()
    #: The jobs whose run starts or ends (:func:`run_changes`).
    runs: tuple[JobRun, ...] = ()
    #: A jobs-only stack: its cluster, minor and node groups are another stack's, which its own summary shows.
    jobs_only: bool = False
    #: The running jobs a group put on a Capacity Block leaves out until its block starts (:func:`block_deferred`):
    #: a `pulumi up` before then deletes their Jobs.
    deferred: tuple[str, ...] = ()
    #: A new ``clusterName``: every resource is made again under it (:func:`data_changes` names what), so no group
    #: rolls and the time is a new stack's.
    cluster_replaced: bool = False
    #: The last configuration was a jobs-only stack's: the cluster it makes is its first (no old groups to delete).
    from_jobs_only: bool = False

    @property
    def minutes(self) -> float:
        """Expected duration: the control plane, then the add-ons, then the groups (which roll side by side), then the
        deletion of the groups replaced or removed."""
        total = CONTROL_PLANE_UPGRADE.minutes if (self.running or self.old_minor) != self.new_minor else 0.0
        if self.addons:
            total += CREATION["aws:eks/addon:Addon"].minutes
        if any(g.action in ("replace", "delete") for g in self.groups):
            total += GROUP_DELETION_MINUTES  # the old groups go at the end, side by side
        return total + max((g.minutes for g in self.groups), default=0.0)

    @property
    def counts_surge(self) -> bool:
        """Whether :attr:`minutes` counts a roll's first new nodes: the slowest group rolls under a strategy that
        launches them first."""
        slowest = max((g.minutes for g in self.groups), default=0.0)
        return any(g.action == "roll" and g.node_update.surge and g.minutes == slowest for g in self.groups)


#: The group changes that move a group's pods off their nodes: a roll, a replacement, a shrink or a deletion.
MOVES_PODS = frozenset({"roll", "replace", "shrink", "delete"})


def compare(
    old_plan: Plan,
    new_plan: Plan,
    old_label: str = "old",
    running: Optional[str] = None,
    *,
    unread: Optional[str] = None,
    region: Optional[RegionZones] = None,
    deployed_zones: Optional[list[str]] = None,
    deployed_dirs: Optional[Mapping[str, str]] = None,
    deployed_versions: Optional[Mapping[str, object]] = None,
    from_file: bool = False,
    eks_defaults: Optional[Mapping[str, tuple[str, str]]] = None,
) -> Upgrade:
    """What ``pulumi up`` does moving a running stack from ``old_plan`` to ``new_plan``; :class:`ConfigError` when
    the move breaks an upgrade rule (:func:`minor_problems`, :func:`~stacks.plan.network_change.network_problems`,
    :func:`pinned_release_problems`, :func:`~stacks.plan.flavor_change.flavor_problems`; ``running``: a control plane
    that moved past the record; ``unread``: why its minor was not read; ``region``: the region's zones, where known
    (``pulumi up``); ``deployed_zones``: the zones the old VPC was made in, where recorded; ``deployed_dirs``: the
    jobs' output folders the last update exported, where recorded; ``deployed_versions``: what it recorded it
    installed, the add-ons' versions, the launch templates' digests, the groups' AMI releases and the Kueue flavors
    among them); ``from_file``: ``old_label`` names a stack file (``plan --from``), not the last update;
    ``eks_defaults``: the version the cluster runs and EKS's default now of each add-on the new configuration leaves
    to EKS's default, where ``pulumi up`` read them (:func:`stacks.preflight.cluster.eks_defaults`)."""
    _refuse_breaking_moves(
        old_plan,
        new_plan,
        running,
        unread=unread,
        region=region,
        deployed_zones=deployed_zones,
        deployed_versions=deployed_versions,
        compared=old_label if from_file else None,
    )
    runs = run_changes(old_plan, new_plan, deployed_dirs, deployed_versions)
    new_cluster = not (same_cluster(old_plan.config, new_plan.config) or new_plan.config.jobs_only)
    groups, notes = _group_changes(old_plan, new_plan, runs, deployed_versions, from_file, new_cluster)
    addons = addon_changes(old_plan, new_plan, deployed_versions, eks_defaults)
    deferred = block_deferred(old_plan, new_plan)
    notes += _update_notes(
        old_plan, new_plan, groups, runs, addons, deferred, deployed_versions, eks_defaults, region=region
    )
    empty = new_data_is_empty(old_plan, new_plan, deployed_versions)
    if empty:  # the jobs start again on a new file system: nothing there to resume from
        runs = tuple(replace(r, rerun=NEW_DATA_RERUN) if r.rerun else r for r in runs)
    old_minor, new_minor, running, minor_notes = _minors(old_plan, new_plan, running, new_cluster)
    return Upgrade(
        old_label=old_label,
        old_minor=old_minor,
        new_minor=new_minor,
        groups=tuple(groups),
        addons=addons,
        notes=(*notes, *minor_notes),
        running=running,
        data=data_changes(old_plan, new_plan, deployed_versions),
        data_empty=empty,
        untimed=untimed_steps(old_plan, new_plan, empty),
        runs=runs,
        jobs_only=new_plan.config.jobs_only,
        deferred=tuple(n for _, jobs in deferred for n in jobs),
        cluster_replaced=new_cluster,
        from_jobs_only=old_plan.config.jobs_only,
    )


def _group_changes(
    old_plan: Plan,
    new_plan: Plan,
    runs: tuple[JobRun, ...],
    deployed_versions: Optional[Mapping[str, object]],
    from_file: bool,
    new_cluster: bool,
) -> tuple[list[GroupChange], list[str]]:
    """The node groups the update rolls, updates, adds or deletes, with their notes. A new cluster (the first, or one
    under a new ``clusterName``) makes every group with it: none rolls. A jobs-only stack's groups copy the cluster
    stack's, whose own summary says what they do."""
    replaced = frozenset(r.name for r in runs if r.action not in ("added", "removed"))
    groups, notes = _kept_group_changes(old_plan, new_plan, deployed_versions, replaced, from_file)
    old_groups = {g.name: g for g in old_plan.all_groups}
    new_names = {g.name for g in new_plan.all_groups}
    groups += [added_group(g) for g in new_plan.all_groups if g.name not in old_groups]
    groups += [
        deleted_group(old_plan, new_plan, was, replaced, deployed_versions)
        for name, was in old_groups.items()
        if name not in new_names
    ]
    if new_cluster:
        groups, notes = [], []
    notes += outgoing_notes(old_plan, new_plan)
    if new_plan.config.jobs_only:
        groups, notes = [], _copied_group_notes(old_plan, new_plan)
    return groups, notes


def _update_notes(
    old_plan: Plan,
    new_plan: Plan,
    groups: list[GroupChange],
    runs: tuple[JobRun, ...],
    addons: tuple[AddonChange, ...],
    deferred: list[tuple[NodeGroupPlan, list[str]]],
    deployed_versions: Optional[Mapping[str, object]],
    eks_defaults: Optional[Mapping[str, tuple[str, str]]],
    *,
    region: Optional[RegionZones],
) -> list[str]:
    """The notes of the update beside its node groups': the jobs, the add-ons and the network, then the cluster
    stack's own settings (its service range, endpoint, teams and storage)."""
    notes = block_start_notes(deferred)
    notes += _kueue_move_notes(new_plan, groups, runs) + _kueue_restart_notes(old_plan, new_plan)
    notes += _team_notes(new_plan, groups)
    notes += [] if new_plan.config.jobs_only else _own_quota_notes(old_plan, new_plan)
    notes += held_addon_notes(old_plan, new_plan)
    notes += deadline_notes(old_plan, new_plan, runs)
    notes += awaited_notes(old_plan, new_plan, runs)
    notes += unrecorded_notes(new_plan, runs, deployed_versions)
    notes += addon_notes(old_plan, new_plan, addons, eks_defaults)
    notes += network_notes(old_plan, new_plan) if region is None else []
    if not new_plan.config.jobs_only:
        notes += _service_range_notes(old_plan, new_plan)
        notes += _endpoint_notes(old_plan, new_plan)
        notes += _removed_team_notes(old_plan, new_plan)
        notes += storage_notes(old_plan, new_plan, deployed_versions)
    return notes


def _minors(
    old_plan: Plan, new_plan: Plan, running: Optional[str], new_cluster: bool
) -> tuple[str, str, Optional[str], list[str]]:
    """The minor the update moves the control plane from and to, the minor it runs where that moved past the record
    (``running``), and the notes of a new name's cluster that exists already. A stack that had no cluster starts
    the new one at its minor; a jobs-only stack moves none; a new ``clusterName`` starts its cluster at its minor,
    or goes on with the new name's cluster that already runs (:func:`_renamed_onto_notes`)."""
    old_minor, new_minor = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    if old_plan.config.jobs_only:
        return new_minor, new_minor, running, []
    if new_plan.config.jobs_only:
        return old_minor, old_minor, running, []
    if new_cluster:
        return running or new_minor, new_minor, None, _renamed_onto_notes(old_plan, new_plan, running)
    return old_minor, new_minor, running, []


def untimed_steps(old_plan: Plan, new_plan: Plan, new_data: bool) -> tuple[str, ...]:
    """The update's steps the expected duration leaves out, each with its time from the catalog
    (:mod:`components.catalog.timings`): a new file system (``new_data``) and the datasets staged on it, a dataset
    staged anew (added, or another source or folder), an FSx file system's update in place, the builds of the images
    whose folders changed."""
    out = []
    if new_data and new_plan.storage.fsx is not None:
        fsx = CREATION["aws:fsx/lustreFileSystem:LustreFileSystem"].minutes
        out.append(f"a new FSx file system (about {fsx:g} min) and the datasets staged on it again")
    elif new_data:
        out.append("a new EFS file system and the datasets staged on it again")
    # a staging Job skips a folder that holds its source already (training/stage_data.py): only another source or
    # folder, or other shared data, stages again
    staged = [
        name
        for name, d in new_plan.datasets.items()
        if not d.imported
        and not new_data
        and ((was := old_plan.datasets.get(name)) is None or (was.path, was.config.source) != (d.path, d.config.source))
    ]
    if staged:
        out.append(f"the staging of {', '.join(staged)} (up to each one's timeoutMinutes)")
    elif not new_data and data_changes(old_plan, new_plan) and any(not d.imported for d in new_plan.datasets.values()):
        out.append("the datasets staged again where the other shared data lacks them")
    if fsx_updated_in_place(old_plan, new_plan):
        out.append(f"the FSx file system's update (`pulumi up` waits up to {FSX_UPDATE_WAIT.minutes:g} min)")
    # by build: the configured images and those the jobs use (another torch build of one is a variant of its own)
    before = {i.variant: i.version for i in (*old_plan.used_images, *old_plan.images.values())}
    now = {i.variant: i for i in (*new_plan.used_images, *new_plan.images.values())}
    built = [v for v, i in now.items() if i.context is not None and before.get(v) != i.version]
    if built:
        build = CREATION["pulumi-python:dynamic/eks-training:ImageBuild"].minutes
        out.append(f"the build of {', '.join(built)} (about {build:g} min each, side by side)")
    return tuple(out)


def _refuse_breaking_moves(
    old_plan: Plan,
    new_plan: Plan,
    running: Optional[str],
    *,
    unread: Optional[str],
    region: Optional[RegionZones],
    deployed_zones: Optional[list[str]],
    deployed_versions: Optional[Mapping[str, object]],
    compared: Optional[str],
) -> None:
    """:class:`ConfigError` with every upgrade rule the move breaks: the minor's steps first (the add-ons' follow
    them), then the network, the pinned AMI releases and the Kueue flavors. Only an update of one cluster in place
    moves a minor, an add-on or a group (:func:`~stacks.plan.model.same_cluster`): a new ``clusterName`` makes a new
    cluster, and a jobs-only stack makes none."""
    own = same_cluster(old_plan.config, new_plan.config)
    problems: list[str] = []
    if own:
        problems = minor_problems(
            old_plan, new_plan, running, unread=unread, recorded=deployed_versions, compared=compared
        )
        problems = problems or addon_step_problems(old_plan, new_plan, deployed_versions)
    problems += network_problems(old_plan, new_plan, region, deployed_zones)
    problems += pinned_release_problems(old_plan, new_plan, deployed_versions) if own else []
    problems += flavor_problems(old_plan, new_plan, deployed_versions)
    if not new_plan.config.jobs_only:  # a jobs-only stack makes neither cluster nor storage
        problems += _service_range_problems(old_plan, new_plan) + storage_problems(
            old_plan, new_plan, deployed_versions
        )
        problems += _renamed_onto_problems(old_plan, new_plan, running)
    else:  # a cluster stack that becomes jobs-only deletes what it made
        problems += deleted_data_problems(old_plan, new_plan)
    if problems:
        raise ConfigError(problems)


def _renamed_onto(old_plan: Plan, new_plan: Plan, running: Optional[str]) -> str:
    """``"clusterName a -> b: a cluster named b already runs Kubernetes r"`` where a new name's cluster exists already
    (``running``, as preflight read it by the new name), else ``""``. An earlier ``pulumi up`` of this stack that
    failed after making it left it in the stack's state, so this one updates it; another stack's makes EKS refuse
    the name."""
    a, b = old_plan.config, new_plan.config
    if running is None or a.jobs_only or b.jobs_only or same_cluster(a, b):
        return ""
    return (
        f"{key('clusterName')} {a.cluster_name} -> {b.cluster_name}: a cluster named {b.cluster_name} already runs "
        f"Kubernetes {running}"
    )


def _renamed_onto_problems(old_plan: Plan, new_plan: Plan, running: Optional[str]) -> list[str]:
    """A new name's existing cluster (:func:`_renamed_onto`) at a minor this update cannot reach in one step."""
    said, minor = _renamed_onto(old_plan, new_plan, running), new_plan.config.cluster.kubernetes_version
    if not said or minor_step(str(running), minor) not in ("skip", "down"):
        return []
    return [
        f"{said}, and {VERSION_KEY} {minor} is neither that minor nor the next. If an earlier `pulumi up` of this "
        f"stack made it, this update moves it as any other, one minor at most: set {running}, or the next minor. If "
        "another stack made it, EKS cannot make a second cluster of that name: choose another clusterName"
    ]


def _renamed_onto_notes(old_plan: Plan, new_plan: Plan, running: Optional[str]) -> list[str]:
    """A new name's existing cluster the update may go on with (:func:`_renamed_onto`)."""
    said = _renamed_onto(old_plan, new_plan, running)
    if not said:
        return []
    return [
        f"{said}. If an earlier `pulumi up` of this stack made it, this update goes on with it. If another stack made "
        "it, EKS refuses to make a second cluster of that name: choose another clusterName"
    ]


def _service_range_problems(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A cluster's service range moved from one set value to another: EKS cannot change it, so the provider would
    replace the cluster, its nodes and every Kubernetes object (terraform-provider-aws ``aws_eks_cluster``:
    ``kubernetes_network_config.service_ipv4_cidr`` forces a new one). Unset, EKS chose one at creation, which the
    setting keeps (:func:`_service_range_notes`)."""
    a, b = old_plan.config.cluster.service_cidr, new_plan.config.cluster.service_cidr
    if a is None or b is None or a == b:
        return []
    return [
        f"{key('cluster.serviceCidr')}: {a} -> {b} would replace the EKS cluster, with its nodes, jobs and every "
        f"Kubernetes object (EKS cannot change a cluster's service range): set it back to {a}, or make a new stack"
    ]


def _service_range_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A service range set where the old configuration left it to EKS: the cluster is replaced unless it is the range
    EKS chose (10.100.0.0/16 or 172.20.0.0/16, by the VPC's own range)."""
    a, b = old_plan.config.cluster.service_cidr, new_plan.config.cluster.service_cidr
    if a is not None or b is None:
        return []
    return [
        f"{key('cluster.serviceCidr')} unset -> {b}: EKS chose the cluster's service range when it made it, and "
        f"cannot change it: unless {b} is that range, the cluster is replaced with its nodes, jobs and every "
        f"Kubernetes object. `aws eks describe-cluster --name {new_plan.config.cluster_name} --query "
        "cluster.kubernetesNetworkConfig.serviceIpv4Cidr` prints it"
    ]


def _kept_group_changes(
    old_plan: Plan,
    new_plan: Plan,
    deployed_versions: Optional[Mapping[str, object]],
    replaced: frozenset[str],
    from_file: bool,
) -> tuple[list[GroupChange], list[str]]:
    """What the update does to each group both plans have (the system first), and their notes. The jobs' budgets
    change through the cluster's Kubernetes provider, once the system group's update ended: its own roll, and those
    of the groups beside it, run under the budgets the jobs had."""
    old_groups = {g.name: g for g in old_plan.all_groups}
    groups: list[GroupChange] = []
    notes: list[str] = []
    system_moves = False
    for g in new_plan.all_groups:
        if g.name in old_groups:
            late = g.name == new_plan.system.name or system_moves
            change, group_notes = group_change(
                old_plan, new_plan, old_groups[g.name], g, deployed_versions, replaced, budgets_late=late
            )
            system_moves = system_moves or (g.name == new_plan.system.name and change is not None)
            groups += [change] if change is not None else []
            notes += group_notes
            if from_file:
                notes += unseen_release_notes(old_groups[g.name], g)
    return groups, notes


def _copied_group_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A jobs-only stack's groups, a copy of the cluster stack's, whose placement of its jobs changed (what
    :func:`stacks.jobs_only.team_of` compares with the cluster stack's: instance types, maxSize, labels, taints and
    topology, of the groups its jobs use). The stack registers no group: a change there is the cluster stack's."""
    before, after = placement_of(old_plan), placement_of(new_plan)
    used = sorted({j.group.name for j in new_plan.jobs.values()})
    changed = [new_plan.group(n).path for n in used if before.get(n) != after.get(n)]
    if not changed:
        return []
    return [
        f"{', '.join(key(p) for p in changed)}: a jobs-only stack's groups are a copy of the cluster stack's, which "
        "places its jobs; this stack changes no node group, and `pulumi up` stops where the copy differs from that "
        "stack's groups. Change the cluster stack first (its own summary says what its groups do), then copy its "
        "nodeGroups here"
    ]


def _endpoint_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """The API server's public endpoint turned off, or some address it allowed no longer allowed: EKS updates the
    cluster's endpoint access in place, in minutes, and a machine outside the networks ``privateAccessCidrs`` lets in
    and the new CIDRs loses the API, for the rest of this `pulumi up` too. Wider or reordered CIDRs lose nothing."""
    a, b = old_plan.config.cluster, new_plan.config.cluster
    if a.public_cidrs is None:
        return []  # no public endpoint to lose
    if b.public_cidrs is not None:
        was = [ipaddress.ip_network(c, strict=False) for c in a.public_cidrs]
        now = [ipaddress.ip_network(c, strict=False) for c in b.public_cidrs]
        if all(any(n.version == m.version and n.subnet_of(m) for m in now) for n in was):  # type: ignore[arg-type]
            return []
    what = (
        f"{key('cluster.endpointPublicAccess')} true -> false"
        if b.public_cidrs is None
        else f"{key('cluster.publicAccessCidrs')} {a.public_cidrs} -> {b.public_cidrs}"
    )
    private = f"{key('cluster.privateAccessCidrs')} ({', '.join(b.private_access_cidrs) or 'none'})"
    where = f"the networks {private} lets in on port 443" + ("" if b.public_cidrs is None else ", or the new CIDRs")
    return [
        f"{what}: EKS updates the endpoint access in place, in minutes. From then on `kubectl` and `pulumi up`, the "
        f"rest of this one included, reach the cluster only from {where}: run it from there"
    ]


def _removed_team_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A team the cluster stack's file no longer has: its namespace goes, and Kubernetes deletes everything in it."""
    old, new = old_plan.config.teams, new_plan.config.teams
    return [
        f"team {name} removed: `pulumi up` deletes its claim of the shared volume first, which waits for the pods that "
        "mount it (10 minutes at most, then the update fails), then its namespace "
        f"{team.namespace_name(name)} with everything in it: its queue and the jobs its jobs-only stack runs there. "
        "Destroy that stack first"
        for name, team in old.items()
        if name not in new
    ]


def _own_nodes(plan: Plan) -> dict[str, int]:
    """Group -> the whole nodes of it in the stack's own ClusterQueue's quota
    (:attr:`stacks.plan.queues.AdmissionPlan.own_nodes`)."""
    a = plan.admission
    return {} if a is None else {f.group: a.own_nodes[f.name] for f in a.flavors}


def _own_quota_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A job of the stack whose group's share in the stack's own quota falls below the nodes it uses (teams added, or
    given more): it then runs on quota borrowed from the teams that lend (``mayLend``), which a team takes back by
    preempting it (``reclaimWithinCohort: Any``, components/admission.py). A job the lenders cannot cover is refused
    before (:func:`stacks.plan.admission.beyond_own_queue`)."""
    before, after = _own_nodes(old_plan), _own_nodes(new_plan)
    lenders = ", ".join(t.name for t in new_plan.admission.teams if t.may_lend) if new_plan.admission else ""
    out = []
    for name, job in new_plan.jobs.items():
        group = job.group.name
        was, now = before.get(group), after.get(group)
        if was is None or now is None or now >= was or now >= job.max_nodes:
            continue
        out.append(
            f"job {name}: the stack's own quota on {job.group.path} goes from {was} to {now} node(s) (the teams' "
            f"share), below the {job.max_nodes} it uses: it then runs on quota borrowed from the teams that lend "
            f"({lenders}), and Kueue stops it when one of their jobs needs that quota back"
        )
    return out


def _team_notes(new_plan: Plan, groups: list[GroupChange]) -> list[str]:
    """A cluster stack with teams: their jobs-only stacks run jobs on its groups, which this summary cannot list."""
    stopping = [g.path for g in groups if g.action in MOVES_PODS]
    if not new_plan.config.teams or not stopping:
        return []
    return [
        f"the teams' jobs-only stacks ({', '.join(new_plan.config.teams)}) may run jobs on {', '.join(stopping)}: "
        "this summary lists only this stack file's jobs, and theirs stop as their kinds do when a group rolls, "
        "shrinks or goes. `kubectl get jobs,mpijobs -A` lists them; let them finish first"
    ]


def _kueue_move_notes(new_plan: Plan, groups: list[GroupChange], runs: tuple[JobRun, ...]) -> list[str]:
    """Kueue's controller moving with the system nodes: the chart runs one replica without a disruption budget, and
    its Job webhooks fail closed (source key ``kueue-chart-values``), so a Job created or changed meanwhile is
    refused: the jobs ``runs`` creates or replaces are named. A jobs-only stack installs no Kueue."""
    if new_plan.config.jobs_only:
        return []
    moved = [g for g in groups if g.path == new_plan.system.path and g.action in MOVES_PODS]
    changed = [r.name for r in runs if r.action != "removed"]
    effect = (
        f"this update creates or replaces job(s) {', '.join(changed)}, so `pulumi up` may fail on them"
        if changed
        else "if this update also changes one, `pulumi up` may fail on it"
    )
    return [
        f"{g.path} {g.action}: Kueue's one controller pod moves with it. Until its new pod is ready, no job is "
        f"admitted, and Kueue's webhooks refuse a Job or MPIJob, or a Kueue queue or flavor, created or changed: "
        f"{effect}. Run it again once `kubectl -n kueue-system get deploy` shows Kueue ready"
        for g in moved
    ]


def _kueue_restart_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """Kueue's manager started again by new settings of its chart (:func:`components.admission.chart_values`): the
    topology feature gate, set while a group is placed by topology, and the ProvisioningRequest annotation, set while
    the autoscaler scales such a group from zero; the cluster autoscaler, where it runs before and after, starts again
    with its ProvisioningRequest flag. Running jobs keep running. Neither stack jobs-only: one installs no Kueue, the
    other makes a new cluster."""
    a, b = old_plan.admission, new_plan.admission
    if a is None or b is None or old_plan.config.jobs_only or new_plan.config.jobs_only:
        return []
    if not same_cluster(old_plan.config, new_plan.config):
        return []
    topology = (bool(a.topologies), bool(b.topologies))
    provisioning = (a.provisioning is not None, b.provisioning is not None)
    why = []
    if topology[0] != topology[1]:
        why.append(
            "topology-aware scheduling on (the first group placed by topology)"
            if topology[1]
            else "topology-aware scheduling off (no group placed by topology)"
        )
    if provisioning[0] != provisioning[1]:
        why.append(
            "the ProvisioningRequest check on (a topology-aware group the autoscaler scales from zero)"
            if provisioning[1]
            else "the ProvisioningRequest check off (no topology-aware group the autoscaler scales from zero)"
        )
    if not why:
        return []
    # a new pod template: the Deployment's default rollout starts the new pod beside the old one (one replica:
    # maxSurge 1, maxUnavailable 0), which serves the webhooks and admits jobs until the new one is ready
    notes = [
        f"Kueue starts again with {' and '.join(why)}. Running jobs keep running. Its new pod starts beside the old "
        "one, which admits jobs until then; admission then pauses for some seconds while the new pod takes over. The "
        "system nodes need room for the second pod, or `pulumi up` waits for it until Kueue's release times out"
    ]
    if provisioning[0] != provisioning[1] and old_plan.autoscale and new_plan.autoscale:
        notes.append(
            "the cluster autoscaler starts again with ProvisioningRequests "
            f"{'on' if provisioning[1] else 'off'}: a scale-up waits for its new pod"
        )
    return notes
