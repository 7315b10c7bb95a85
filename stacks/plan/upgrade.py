"""What a change of a running stack's configuration does at the next ``pulumi up``, offline
(``python -m stacks plan --stack NAME --from OLD``): the Kubernetes minor change, the node groups that roll and why,
the running jobs those rolls stop (:mod:`stacks.plan.group_changes`), the jobs it starts again
(:mod:`stacks.plan.job_changes`), the add-on pins that move, the changes that replace the cluster or the jobs' shared
data, and how long it is expected to take.

Both configurations are loaded and planned as ``pulumi up`` does (the old one by :mod:`stacks.plan.old_config`); the
comparison reads the two plans, refuses what EKS refuses (:mod:`stacks.plan.minors`,
:mod:`stacks.plan.network_change`) and what Kueue refuses (:func:`~stacks.plan.flavor_change.flavor_problems`), and
:mod:`stacks.plan.upgrade_text` says what it found. Pulumi updates the control plane first (everything else depends on
the cluster), then the add-ons and the node groups; the groups wait for the VPC CNI and kube-proxy add-ons.
"""

from dataclasses import dataclass, replace
from typing import Mapping, Optional

from components.catalog.addons import ONE_MINOR_STEP_ADDONS, addon_version_for, addon_version_tuple
from components.catalog.platform import STORAGE_ADDON
from components.catalog.timings import CONTROL_PLANE_UPGRADE, CREATION
from stacks.config import ConfigError, key
from stacks.config.base import quantity_value
from stacks.config.storage import FsxConfig, StorageConfig
from stacks.plan import Plan
from stacks.plan.flavor_change import flavor_problems
from stacks.plan.group_changes import (
    GroupChange,
    added_group,
    block_deferred,
    block_start_notes,
    deleted_group,
    group_change,
    outgoing_notes,
    pinned_release_problems,
    unseen_release_notes,
)
from stacks.plan.installs import EKS_DEFAULT, autoscaler_version
from stacks.plan.job_changes import NEW_DATA_RERUN, JobRun, deadline_notes, run_changes, unrecorded_notes
from stacks.plan.minors import minor_problems
from stacks.plan.network_change import network_notes, network_problems
from stacks.plan.nodes import DELETE_DRAIN_LIMIT_S
from stacks.plan.record import recorded_entry
from stacks.zones import RegionZones

#: A node group's deletion at the end of an update: EKS drains its nodes for up to DELETE_DRAIN_LIMIT_S, then
#: terminates them (its termination is not timed).
GROUP_DELETION_MINUTES = DELETE_DRAIN_LIMIT_S / 60


@dataclass(frozen=True)
class AddonChange:
    """An add-on (or chart) whose version changes; ``None``: EKS's default for the minor."""

    name: str
    old: Optional[str]
    new: Optional[str]


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
    replaced = frozenset(r.name for r in runs if r.action not in ("added", "removed"))
    groups, notes = _kept_group_changes(old_plan, new_plan, deployed_versions, replaced, from_file)
    addons = _addon_changes(old_plan, new_plan, deployed_versions, eks_defaults)
    new_minor = new_plan.config.cluster.kubernetes_version
    old_groups = {g.name: g for g in old_plan.all_groups}
    new_names = {g.name for g in new_plan.all_groups}
    groups += [added_group(g) for g in new_plan.all_groups if g.name not in old_groups]
    groups += [
        deleted_group(old_plan, new_plan, was, replaced) for name, was in old_groups.items() if name not in new_names
    ]
    notes += outgoing_notes(old_plan, new_plan)
    deferred = block_deferred(old_plan, new_plan)
    notes += block_start_notes(deferred)
    notes += _kueue_move_notes(new_plan, groups, runs)
    notes += _team_notes(new_plan, groups)
    notes += _held_addon_notes(old_plan, new_plan)
    notes += deadline_notes(old_plan, new_plan, runs)
    notes += unrecorded_notes(new_plan, runs, deployed_versions)
    notes += _default_addon_notes(addons, new_minor)
    notes += _raised_default_notes(old_plan, new_plan, addons, eks_defaults)
    notes += _mount_addon_notes(addons)
    notes += network_notes(old_plan, new_plan) if region is None else []
    if new_plan.config.cluster.stack_reference is None:  # the cluster stack's own settings
        notes += _service_range_notes(old_plan, new_plan)
        notes += _removed_team_notes(old_plan, new_plan)
        notes += _storage_class_notes(old_plan, new_plan)
        notes += _fsx_growth_notes(old_plan, new_plan)
        notes += _fsx_bucket_notes(old_plan, new_plan)
        notes += _fsx_metadata_notes(old_plan, new_plan)
        notes += _fsx_throughput_notes(old_plan, new_plan)
    data = data_changes(old_plan, new_plan)
    if data:  # the jobs start again on other shared data: nothing there to resume from
        runs = tuple(replace(r, rerun=NEW_DATA_RERUN) if r.rerun else r for r in runs)
        groups = [replace(g, jobs=tuple(replace(j, new_data=True) for j in g.jobs)) for g in groups]
    return Upgrade(
        old_label=old_label,
        old_minor=old_plan.config.cluster.kubernetes_version,
        new_minor=new_minor,
        groups=tuple(groups),
        addons=addons,
        notes=tuple(notes),
        running=running,
        data=data,
        runs=runs,
        jobs_only=new_plan.config.cluster.stack_reference is not None,
        deferred=tuple(n for _, jobs in deferred for n in jobs),
        cluster_replaced=old_plan.config.cluster_name != new_plan.config.cluster_name
        and new_plan.config.cluster.stack_reference is None,
    )


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
    them), then the network, the pinned AMI releases and the Kueue flavors."""
    problems = minor_problems(old_plan, new_plan, running, unread=unread, recorded=deployed_versions, compared=compared)
    problems = problems or addon_step_problems(old_plan, new_plan, deployed_versions)
    problems += network_problems(old_plan, new_plan, region, deployed_zones)
    problems += pinned_release_problems(old_plan, new_plan, deployed_versions)
    problems += flavor_problems(old_plan, new_plan, deployed_versions)
    if new_plan.config.cluster.stack_reference is None:  # a jobs-only stack makes neither cluster nor storage
        problems += _service_range_problems(old_plan, new_plan) + _efs_mode_problems(old_plan, new_plan)
        problems += _claim_size_problems(old_plan, new_plan)
    if problems:
        raise ConfigError(problems)


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


def _efs_mode_problems(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new performance mode of the EFS file system the stack made: EFS cannot change it, so the provider would
    replace the file system (terraform-provider-aws ``aws_efs_file_system``: ``performance_mode`` forces a new one),
    deleting its data, while the shared claim stays bound to the old one."""
    a, b = old_plan.config.storage, new_plan.config.storage
    made = a.backend == b.backend == "efs" and a.file_system_id is None and b.file_system_id is None
    if not made or a.performance_mode == b.performance_mode:
        return []
    return [
        f"{key('storage.performanceMode')}: {a.performance_mode} -> {b.performance_mode} would replace the EFS file "
        "system this stack made, and its data with it (EFS cannot change a file system's performance mode): set it "
        f"back to {a.performance_mode}, or make a new stack"
    ]


def _claim_size_problems(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new ``storage.capacity`` for EFS claims that stay (the shared claim, the teams'): Kubernetes grows a bound
    claim only when its StorageClass allows expansion, and the EFS one does not (EFS is elastic); it never shrinks one
    (kubernetes plugin/pkg/admission/storage/persistentvolume/resize, and the claim's update validation). `pulumi up`
    would fail at the claim."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if not a.backend == b.backend == "efs" or quantity_value(a.capacity) == quantity_value(b.capacity):
        return []
    if (a.pvc_name, a.storage_class_name) != (b.pvc_name, b.storage_class_name):
        return []  # new claims (pulumi-kubernetes replaces a claim whose storageClassName changes)
    plans = (old_plan, new_plan)
    spaces = set.intersection(*({t.namespace for t in p.admission.teams} if p.admission else set() for p in plans))
    if a.namespace == b.namespace:
        spaces.add(b.namespace)
    if not spaces:
        return []
    claims = ", ".join(f"{ns}/{b.pvc_name}" for ns in sorted(spaces))
    return [
        f"{key('storage.capacity')}: {a.capacity} -> {b.capacity}: Kubernetes cannot resize the claims {claims} "
        "(a bound claim grows only when its StorageClass allows expansion, and the EFS one does not; it never "
        f"shrinks), so `pulumi up` would fail there: set it back to {a.capacity}. EFS is elastic: the capacity is "
        "nominal and limits nothing"
    ]


def _fsx_updated(old_plan: Plan, new_plan: Plan) -> Optional[tuple[FsxConfig, FsxConfig]]:
    """The old and new FSx settings of a file system the stack made and updates in place: kept on FSx, not an
    adopted one, not replaced (:func:`_fsx_replaced`)."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if a.backend != "fsx" or b.backend != "fsx" or a.fsx is None or b.fsx is None or b.file_system_id is not None:
        return None
    return None if _fsx_replaced(old_plan, new_plan) else (a.fsx, b.fsx)


def _fsx_bucket_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """An FSx file system the stack keeps, linked now to a bucket of the user's (``dataRepository.s3Path``): the data
    bucket the stack made for it goes (components/storage/fsx.py), unless the state says to keep it. The file system
    keeps its files, so the jobs keep their data."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if b.backend != "fsx" or a.file_system_id or b.file_system_id or not a.makes_data_bucket or b.makes_data_bucket:
        return []  # leaving FSx, or another file system: data_changes names the bucket with the file system
    fate = (
        "storage.retainOnDelete keeps it in AWS"
        if a.retain_on_delete
        else "it is deleted with everything in it, the datasets and what was exported (storage.retainOnDelete was not "
        "applied): copy what you need first (aws s3 sync)"
    )
    return [
        f"{key('storage.fsx.dataRepository.s3Path')} unset -> {b.fsx_settings.data_repository.s3_path}: the file "
        f"system links to that bucket instead of the one the stack made, and {fate}"
    ]


def _fsx_growth_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A larger FSx file system the stack made grows in place (FSx's UpdateFileSystem): what the jobs see meanwhile.
    Its claim keeps the size it was made with (:func:`components.storage.csi.shared_claim`)."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None or both[1].storage_capacity_gib <= both[0].storage_capacity_gib:
        return []
    fa, fb = both
    return [
        f"{key('storage.fsx.storageCapacityGib')} {fa.storage_capacity_gib} -> {fb.storage_capacity_gib}: FSx grows "
        "the file system in place. It may be unavailable for a few minutes (the jobs' file operations wait, then go "
        "on), then it spreads the data over the new servers for hours to days, slower meanwhile. FSx refuses another "
        "increase within 6 hours of this one. The claim keeps its first size; `kubectl get pv` shows the new one"
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


def _storage_class_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new ``storageClassName``: the StorageClass and the shared claim are made anew (a claim's class cannot
    change); the old claim goes only once no pod mounts it."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if a.backend != "efs" or b.backend != "efs" or a.storage_class_name == b.storage_class_name:
        return []
    return [
        f"{key('storage.storageClassName')} {a.storage_class_name} -> {b.storage_class_name}: the StorageClass and "
        "the shared claim are made anew, on the same folder of the file system (the class's subPathPattern). "
        "The teams' claims are made anew too. Kubernetes deletes an old claim only once no pod mounts it, so `pulumi "
        "up` waits for the running jobs' pods, the teams' too (10 minutes at most, then the update fails): let them "
        "finish first"
    ]


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


def deployed_version(name: str, planned: Optional[str], recorded: Optional[Mapping[str, object]]) -> Optional[str]:
    """The version of ``name`` the last update installed: its record's (``recorded``), where that names one, else
    ``planned``, the old configuration's under this version of the project (no record, or EKS's default)."""
    was = recorded_entry(recorded, name)
    return was if was is not None and was != EKS_DEFAULT else planned


def addon_step_problems(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> list[str]:
    """An add-on EKS moves one minor at a time (:data:`ONE_MINOR_STEP_ADDONS`) whose version would move further from
    the one installed (:func:`deployed_version`): EKS would refuse it, after the control plane moved. A version left
    to EKS's default is not known here."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    problems = []
    for addon in ONE_MINOR_STEP_ADDONS:
        before = deployed_version(addon, addon_version_for(addon, a, old_plan.config.cluster.addon_versions), recorded)
        after = addon_version_for(addon, b, new_plan.config.cluster.addon_versions)
        was, will = (addon_version_tuple(v) if v else None for v in (before, after))
        if was is None or will is None or was[0] != will[0] or abs(will[1] - was[1]) <= 1:
            continue
        step = f"v{was[0]}.{was[1] + (1 if will[1] > was[1] else -1)}"
        then = "set the version you want" if new_plan.config.cluster.addon_versions.get(addon) else "remove it"
        problems.append(
            f"{key('cluster.addonVersions.' + addon)}: {before} -> {after} moves {abs(will[1] - was[1])} minors, and "
            f"EKS moves {addon} one minor at a time: set it to a {step} release EKS offers for Kubernetes {b} (aws eks "
            f"describe-addon-versions --addon-name {addon} --kubernetes-version {b}), run `pulumi up`, then {then} "
            "and run `pulumi up` again"
        )
    return problems


def _held_addon_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """The add-on pins kept as they were across a minor move (EKS may not offer them for the new minor)."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    if a == b:
        return []
    held = old_plan.config.cluster.addon_versions
    return [
        f"{key('cluster.addonVersions.' + addon)}: held at {version} across {a} -> {b}; preflight checks that EKS "
        f"offers it for {b}"
        for addon, version in sorted(new_plan.config.cluster.addon_versions.items())
        if version and held.get(addon) == version and addon in new_plan.addons
    ]


def _default_addon_notes(addons: tuple[AddonChange, ...], minor: str) -> list[str]:
    """An add-on that moves from a version to EKS's default for ``minor``, which ``pulumi up`` reads then
    (``aws.eks.get_addon_version``) and which may be older than the one it runs."""
    return [
        f"{a.name}: EKS's default for {minor} is read at `pulumi up` and may be older than {a.old}. To keep "
        f"{a.old} or newer, set {key('cluster.addonVersions.' + a.name)} to a version EKS offers for {minor} (aws eks "
        f"describe-addon-versions --addon-name {a.name} --kubernetes-version {minor})"
        for a in addons
        if a.old is not None and a.new is None
    ]


def _kueue_move_notes(new_plan: Plan, groups: list[GroupChange], runs: tuple[JobRun, ...]) -> list[str]:
    """Kueue's controller moving with the system nodes: the chart runs one replica without a disruption budget, and
    its Job webhooks fail closed (source key ``kueue-chart-values``), so a Job created or changed meanwhile is
    refused: the jobs ``runs`` creates or replaces are named. A jobs-only stack installs no Kueue."""
    if new_plan.config.cluster.stack_reference is not None:
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


def _mount_addon_notes(addons: tuple[AddonChange, ...]) -> list[str]:
    """The EFS CSI driver moving: its node pods carry the mounts' TLS tunnels, so a running job's file access may
    stall while they restart (source key ``efs-csi-node-restart``)."""
    return [
        f"{a.name}: its node pods restart on every node and carry the EFS mounts' TLS tunnels, so a running job's file "
        "access may stall until the new pod restarts them: take this update between jobs"
        for a in addons
        if a.name == STORAGE_ADDON["efs"]
    ]


def _raised_default_notes(
    old_plan: Plan,
    new_plan: Plan,
    addons: tuple[AddonChange, ...],
    eks_defaults: Optional[Mapping[str, tuple[str, str]]],
) -> list[str]:
    """An add-on left to EKS's default at the same minor that still moves: EKS raised its default since the add-on
    was installed (``aws.eks.get_addon_version`` reads it at every `pulumi up`)."""
    minor = new_plan.config.cluster.kubernetes_version
    if not eks_defaults or old_plan.config.cluster.kubernetes_version != minor:
        return []
    pins = old_plan.config.cluster.addon_versions
    return [
        f"{a.name}: EKS raised its default for {minor} to {a.new} since {a.old} was installed, so this update moves "
        f"it. To keep {a.old}, set {key('cluster.addonVersions.' + a.name)} to it"
        for a in addons
        if a.name in eks_defaults
        and a.new is not None
        and a.old is not None
        and addon_version_for(a.name, minor, pins) is None  # not a pin the stack file or this project dropped
    ]


def _deleted(a: StorageConfig, *, bucket: bool) -> str:
    """What becomes of the old file system (and, with ``bucket``, the data bucket the stack made for it) when the
    stack stops registering it: deleted, unless its state says to keep it (retainOnDelete, as last applied); one it
    adopted (fileSystemId) was never the stack's to delete."""
    if a.file_system_id is not None:
        return ""
    if a.retain_on_delete:
        return f"; storage.retainOnDelete keeps the old file system{' and its data bucket' * bucket} in AWS"
    return (
        "; the old file system is deleted with its data"
        + (", and the data bucket the stack made, with everything in it (the datasets and what was exported)" * bucket)
        + " (storage.retainOnDelete was not applied)"
    )


def data_changes(old_plan: Plan, new_plan: Plan) -> tuple[str, ...]:
    """The changes that replace the cluster or give the jobs other shared data than they had, each as a line that
    names its key. A jobs-only stack has neither of its own."""
    old, new = old_plan.config, new_plan.config
    if new.cluster.stack_reference is not None:
        return ()
    a, b = old.storage, new.storage
    deleted = _deleted(a, bucket=False)
    # where the stack stops making its FSx storage, the data bucket it made (no dataRepository.s3Path) goes too
    # (components/storage/fsx.py); a new FSx file system keeps it
    gone = _deleted(a, bucket=a.makes_data_bucket)
    found = []
    if old.cluster_name != new.cluster_name:
        # every resource's name starts with clusterName (stacks/environment.py)
        made = ["the cluster, its nodes and jobs"] + ["the VPC"] * (new.network is not None)
        made += ["the file system"] * (a.file_system_id is None)
        found.append(
            f"{key('clusterName')} {old.cluster_name} -> {new.cluster_name}: every resource of the stack is "
            f"replaced under the new name ({', '.join(made)}){gone}"
        )
    elif a.backend != b.backend:
        found.append(f"{key('storage.backend')} {a.backend} -> {b.backend}: a new, empty file system{gone}")
    elif a.file_system_id != b.file_system_id:
        found.append(
            f"{key('storage.fileSystemId')} {a.file_system_id or 'unset'} -> {b.file_system_id or 'unset'}: the jobs "
            f"get another file system{gone}"
        )
    elif b.backend == "efs" and (a.namespace, a.pvc_name) != (b.namespace, b.pvc_name):
        # the EFS StorageClass's subPathPattern ${.PVC.namespace}/${.PVC.name} (components/storage/efs.py)
        changed = [
            k for k, x, y in (("namespace", a.namespace, b.namespace), ("pvcName", a.pvc_name, b.pvc_name)) if x != y
        ]
        found.append(
            f"{' and '.join(key('storage.' + k) for k in changed)}: the claim {a.namespace}/{a.pvc_name} -> "
            f"{b.namespace}/{b.pvc_name}; on EFS each claim has a folder of its own, so the jobs get that claim's "
            "folder, empty unless the claim was used before (the old folder stays)"
        )
    elif b.backend == "fsx" and a.file_system_id is None and b.file_system_id is None:
        found += [f"{what}: a new, empty file system{deleted}" for what in _fsx_replaced(old_plan, new_plan)]
    return tuple(found)


def _fsx_replaced(old_plan: Plan, new_plan: Plan) -> list[str]:
    """The changes of a file system the stack made that make the provider replace it (terraform-provider-aws
    ``aws_fsx_lustre_file_system``: ``subnet_ids`` forces a new one, and so do a smaller ``storage_capacity`` and
    fewer provisioned metadata IOPS: FSx grows them but never shrinks them), each naming its key."""
    a, b = old_plan.storage, new_plan.storage
    fa, fb = a.fsx, b.fsx
    found: list[str] = []
    if fa is None or fb is None:
        return found
    if (a.zone, a.subnet_id) != (b.zone, b.subnet_id):
        where = f"{a.zone or a.subnet_id} -> {b.zone or b.subnet_id}"
        found.append(f"{b.zone_key} {where}: FSx keeps a file system in the subnet it was made in")
    if fb.storage_capacity_gib < fa.storage_capacity_gib:
        found.append(
            f"{key('storage.fsx.storageCapacityGib')} {fa.storage_capacity_gib} -> {fb.storage_capacity_gib}: FSx "
            "grows a file system but never shrinks it"
        )
    if fa.metadata_mode == fb.metadata_mode == "USER_PROVISIONED" and (fb.metadata_iops or 0) < (fa.metadata_iops or 0):
        found.append(
            f"{key('storage.fsx.metadataIops')} {fa.metadata_iops} -> {fb.metadata_iops}: FSx raises a file system's "
            "metadata IOPS but never lowers them"
        )
    if fa.metadata_mode == "AUTOMATIC" and fb.metadata_mode == "USER_PROVISIONED":
        # the provider compares the new IOPS with those in its state, which AUTOMATIC's read filled in
        found.append(
            f"{key('storage.fsx.metadataMode')} AUTOMATIC -> USER_PROVISIONED at {fb.metadata_iops} IOPS, if that is "
            "below the IOPS AUTOMATIC gave the file system (FSx raises them with its capacity; "
            f"`{_METADATA_IOPS_COMMAND}` prints them): set {key('storage.fsx.metadataIops')} to at least those"
        )
    return found


#: The AWS CLI command that prints an FSx file system's metadata IOPS (FSx's DescribeFileSystems).
_METADATA_IOPS_COMMAND = (
    "aws fsx describe-file-systems --file-system-ids FS_ID "
    "--query FileSystems[0].LustreConfiguration.MetadataConfiguration.Iops"
)
#: The AWS CLI command that switches an FSx file system's metadata to AUTOMATIC (FSx's UpdateFileSystem, no IOPS).
_AUTOMATIC_COMMAND = (
    "aws fsx update-file-system --file-system-id FS_ID --lustre-configuration 'MetadataConfiguration={Mode=AUTOMATIC}'"
)


def _fsx_throughput_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new throughput tier of a file system the stack made: FSx switches its file servers in place
    (UpdateFileSystem), and the file system may be unavailable meanwhile."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None or both[0].throughput_per_tib == both[1].throughput_per_tib:
        return []
    fa, fb = both
    return [
        f"{key('storage.fsx.throughputPerTib')} {fa.throughput_per_tib} -> {fb.throughput_per_tib}: FSx switches the "
        "file system's servers in place. It may be unavailable meanwhile, from moments up to an hour (`pulumi up` "
        "waits up to 90 min), and the jobs' file operations wait: change it between jobs. The price follows the new "
        "tier"
    ]


def _fsx_metadata_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A file system the stack made switched from USER_PROVISIONED metadata IOPS back to AUTOMATIC: the provider
    sends the IOPS its state holds with the mode, where FSx takes none (terraform-provider-aws
    ``expandLustreMetadataUpdateConfiguration``; FSx's UpdateFileSystemLustreMetadataConfiguration), and FSx refuses
    the switch while the IOPS exceed AUTOMATIC's for the capacity."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None or (both[0].metadata_mode, both[1].metadata_mode) != ("USER_PROVISIONED", "AUTOMATIC"):
        return []
    fa, fb = both
    return [
        f"{key('storage.fsx.metadataMode')} USER_PROVISIONED -> AUTOMATIC: the provider sends the {fa.metadata_iops} "
        "IOPS with the new mode, which FSx refuses, so `pulumi up` would fail at the file system. Switch it yourself "
        f"first: `{_AUTOMATIC_COMMAND}`, then `pulumi refresh`. FSx also refuses while the IOPS exceed what AUTOMATIC "
        f"gives {fb.storage_capacity_gib} GiB: it never lowers them, so keep USER_PROVISIONED then"
    ]


def _addon_changes(
    old_plan: Plan,
    new_plan: Plan,
    recorded: Optional[Mapping[str, object]] = None,
    eks_defaults: Optional[Mapping[str, tuple[str, str]]] = None,
) -> tuple[AddonChange, ...]:
    """The EKS add-ons the stack installs before and after whose version the change moves (an add-on at EKS's default
    moves with the minor, and with EKS's default where ``eks_defaults`` holds what the cluster runs and that default),
    and the cluster autoscaler's chart and image where its minor's release differs. Each starts from the version
    installed (:func:`deployed_version`), and one the record already holds at the new version is left out."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    live = eks_defaults or {}
    moves: list[tuple[str, Optional[str], Optional[str]]] = []
    for addon in (x for x in new_plan.addons if x in old_plan.addons):
        before = addon_version_for(addon, a, old_plan.config.cluster.addon_versions)
        after = addon_version_for(addon, b, new_plan.config.cluster.addon_versions)
        if after is None and addon in live:  # what the cluster runs, and the default EKS installs now
            runs, default = live[addon]
            if runs != default:
                moves.append((addon, runs, default))
        elif before != after or (a != b and after is None):
            moves.append((addon, before, after))
    if new_plan.autoscale and a != b and autoscaler_version(a) != autoscaler_version(b):
        moves.append(("cluster-autoscaler", autoscaler_version(a), autoscaler_version(b)))
    changes = (
        AddonChange(n, before if n in live else deployed_version(n, before, recorded), after)
        for n, before, after in moves
    )
    return tuple(c for c in changes if c.old != c.new or c.new is None)
