"""What a change of a running stack's configuration does at the next ``pulumi up``, offline
(``python -m stacks plan --stack NAME --from OLD``): the Kubernetes minor change, the node groups that roll and why,
the running jobs those rolls stop, the add-on pins that move, the changes that replace the cluster or the jobs' shared
data, and how long it is expected to take.

OLD is the stack file the running stack was deployed from: a path, or a git revision (``REV`` reads
``Pulumi.<NAME>.yaml`` as it was at that revision, with ``git show REV:<path>``). Both configurations are loaded and
planned as ``pulumi up`` does; the comparison reads the two plans.

The upgrade rules, each from :mod:`components.catalog.platform` with its source: the control plane moves one minor per
``pulumi up`` and never down (``eks-update-cluster``; EKS also moves it only while every managed node group runs its
minor, which preflight asks EKS); a node's kubelet may be up to three minors older than the API server and never
newer (``kubernetes-version-skew``). Pulumi updates the control plane first (everything else depends on the cluster),
then the add-ons and the node groups; the groups wait for the VPC CNI and kube-proxy add-ons.
"""

import json
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from components.catalog.addons import addon_version_for
from components.catalog.amis import RELEASE_VERSION_RE
from components.catalog.charts import CLUSTER_AUTOSCALER
from components.catalog.platform import (
    DEFAULT_KUBERNETES_VERSION,
    EKS_ADDONS,
    KUBELET_MAX_SKEW,
    MINOR_STEP,
    NODE_UPDATE_STRATEGIES,
    SUPPORTED_KUBERNETES_VERSIONS,
    NodeUpdateStrategy,
    minor_number,
)
from components.catalog.timings import CONTROL_PLANE_UPGRADE, CREATION, NODE_ROLL, NODE_SURGE
from components.nodeplan import roll_minutes
from stacks.config import ConfigError, key, load_config
from stacks.config.cluster import support_windows_ignored
from stacks.plan import NodeGroupPlan, Plan, build_plan
from stacks.plan.network_change import ZonesOf, network_notes, network_problems
from stacks.plan.nodes import EVICTION_LIMIT_MINUTES
from stacks.stackfile import (
    StackFileError,
    StackLoadError,
    load_stack_yaml,
    project_config,
    project_name,
    read_stack_config,
    stack_file_for,
)

VERSION_KEY = key("cluster.kubernetesVersion")
CLUSTER_KEY = key("cluster")
#: The catalog file that gives this project's default minor (:func:`newest_minor`), as a path in the project's
#: repository: ``--from REV`` reads it at REV when the stack file there leaves the minor unset.
PLATFORM_SOURCE = "components/catalog/platform.py"
_MINOR_ENTRY = re.compile(r'KubernetesVersion\(\s*minor="(\d+\.\d+)"')
#: The default written as a literal, as the catalog once had it.
_DEFAULT_LITERAL = re.compile(r'^DEFAULT_KUBERNETES_VERSION\s*=\s*"(\d+\.\d+)"', re.MULTILINE)


@dataclass(frozen=True)
class JobStop:
    """A running job (of the old configuration) on a group that rolls or goes."""

    name: str
    group: str
    pods: int
    strategy: str
    """The group's ``updateStrategy`` in the new configuration: ``rolling`` or ``whenIdle``."""
    keeps: int
    """Of its pods, how many its PodDisruptionBudget keeps through the roll."""
    surge: bool = True
    """EKS launches a node's replacement before the node goes (``DEFAULT``); else (``MINIMAL``) after it."""
    capacity_block: bool = False
    """The group runs on a Capacity Block, which frees a terminated instance's slot only after several minutes."""

    @property
    def what(self) -> str:
        """What the roll does to it, in words."""
        if self.strategy == "whenIdle":
            return (
                f"keeps all {self.pods} pod(s): EKS cannot drain its nodes and fails the group's update after "
                f"{EVICTION_LIMIT_MINUTES} minutes; run `pulumi up --refresh` once it is done"
            )
        stop = (
            f"one pod at a time is stopped (SIGTERM and its grace period), its PodDisruptionBudget keeping "
            f"{self.keeps} of {self.pods} running"
        )
        if self.surge:
            return stop
        return (
            f"{stop}; the pod stops before the node that replaces its own is up (EKS terminates a node before "
            f"launching its replacement), so it waits for that node's launch (about {NODE_SURGE.minutes:g} min"
            + (
                ", longer on its Capacity Block, which frees a terminated instance's slot after several minutes"
                if self.capacity_block
                else ""
            )
            + f") while EKS drains the next node: a wait past {EVICTION_LIMIT_MINUTES} minutes fails the group's "
            "update"
        )


@dataclass(frozen=True)
class GroupChange:
    """A node group whose nodes roll, are replaced, or go."""

    path: str
    action: str
    """``roll`` (EKS replaces the nodes one at a time), ``replace`` (a new group, then the old one deleted) or
    ``delete``."""
    reasons: tuple[str, ...]
    nodes: int
    """Its nodes now (the old desired size)."""
    strategy: str
    jobs: tuple[JobStop, ...] = ()
    node_update: NodeUpdateStrategy = NODE_UPDATE_STRATEGIES["DEFAULT"]
    """How EKS rolls the nodes (``updateConfig.updateStrategy`` of the new configuration)."""
    no_surge: Optional[str] = None
    """Why the group has no room for an extra node (the reason for ``MINIMAL``), ``None`` for ``DEFAULT``."""

    @property
    def minutes(self) -> float:
        """The modelled time of the change: a roll as :func:`components.nodeplan.roll_minutes` models it (the node
        group's update timeout reads the same); a new group's creation."""
        if self.action == "roll":
            return roll_minutes(self.nodes, self.node_update)
        if self.action == "replace":
            return CREATION["aws:eks/nodeGroup:NodeGroup"].minutes
        return 0.0


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
    #: The minor the control plane runs where it moved past ``old_minor`` outside Pulumi (its nodes did not).
    running: Optional[str] = None
    #: Changes that replace the cluster or give the jobs other shared data (:func:`data_changes`).
    data: tuple[str, ...] = ()

    @property
    def minutes(self) -> float:
        """Expected duration: the control plane, then the add-ons, then the groups (which roll side by side)."""
        total = CONTROL_PLANE_UPGRADE.minutes if (self.running or self.old_minor) != self.new_minor else 0.0
        if self.addons:
            total += CREATION["aws:eks/addon:Addon"].minutes
        return total + max((g.minutes for g in self.groups), default=0.0)


def kubelet_minor(g: NodeGroupPlan, cluster_minor: str) -> str:
    """The kubelet minor of a group's nodes: its AMI release version's minor (else the cluster's)."""
    m = RELEASE_VERSION_RE.match(g.ami.release_version)
    return m.group("minor") if m else cluster_minor


def unset_minor(plan: Plan) -> bool:
    """Whether the stack planned as ``plan`` leaves its minor to this project's default (a jobs-only stack has none)."""
    cluster = plan.config.cluster
    return "kubernetes_version" not in cluster.model_fields_set and cluster.stack_reference is None


def minor_step(old: str, new: str) -> str:
    """How EKS takes a control plane from ``old`` to ``new``: ``same``, ``up`` (one minor), ``down`` (never) or
    ``skip`` (more than one minor, or another major: one at a time)."""
    (amaj, amin), (bmaj, bmin) = minor_number(old), minor_number(new)
    if (bmaj, bmin) == (amaj, amin):
        return "same"
    if (bmaj, bmin) < (amaj, amin):
        return "down"
    return "up" if bmaj == amaj and bmin - amin <= MINOR_STEP else "skip"


def moved_default_problem(deployed: str, default: str, outside: bool = False) -> str:
    """Why an update must stop: the stack leaves its minor unset, and this project's ``default`` is not the minor the
    cluster runs (``deployed``: its last finished update's, or the control plane's where it moved ``outside``
    Pulumi); the message names the key and both choices."""
    runs = "the cluster runs" if outside else "the stack's last finished update deployed"
    (dmaj, dmin), newer = minor_number(deployed), minor_number(default) > minor_number(deployed)
    why = "a new version of the project moved it" if newer else "`pulumi up` never moves a cluster down a minor"
    upgrade = f", or to '{dmaj}.{dmin + 1}' to upgrade it one minor" if newer else ""
    return (
        f"{VERSION_KEY} is not set, and this project's default, {default}, is not the minor {runs}, {deployed}: "
        f"{why}. Set it to '{deployed}' to keep the cluster as it runs{upgrade}"
    )


def minor_problems(old: Plan, new: Plan, running: Optional[str] = None, *, unread: Optional[str] = None) -> list[str]:
    """Why ``pulumi up`` must not move from ``old`` to ``new``: a minor skipped or gone back, a group's kubelet outside
    the skew Kubernetes supports; each message names the key and the steps to take instead. Whether each group runs
    the minor the control plane moves from, as EKS requires, only EKS knows: preflight asks it. ``running`` is the
    control plane's minor where it moved past ``old``'s outside Pulumi (its nodes did not); ``unread``: why EKS was
    not asked (a skip may then be a move EKS already made), and what to do, a clause added to a skip's refusal."""
    deployed, b = old.config.cluster.kubernetes_version, new.config.cluster.kubernetes_version
    if running is not None and minor_number(running) <= minor_number(deployed):
        running = None
    a = running or deployed
    (amaj, amin), (bmaj, bmin) = minor_number(a), minor_number(b)
    if a != b and unset_minor(new):
        return [moved_default_problem(a, b, outside=running is not None)]
    if running is not None and minor_step(a, b) == "down":
        return [
            f"{VERSION_KEY}: {b} is older than the {a} the cluster runs: it moved outside Pulumi (EKS upgrades a "
            f"cluster itself at the end of standard or extended support), and `pulumi up` never moves a cluster "
            f"down. Set it to '{a}' and run `pulumi up --refresh` (the refresh reads that minor into Pulumi's state)"
        ]
    if minor_step(a, b) == "down":
        return [
            f"{VERSION_KEY}: {b} is older than the running {a}; `pulumi up` never moves a cluster down a minor (its "
            f"nodes run {a}, and a kubelet newer than the API server is outside Kubernetes' skew): set it back to {a}; "
            f"to run {b}, create a new stack at {b} and move the jobs there"
        ]
    problems = []
    if minor_step(a, b) == "skip":
        steps = [f"{amaj}.{m}" for m in range(amin + 1, bmin + 1)] if bmaj == amaj else [b]
        known = [s for s in steps if s in SUPPORTED_KUBERNETES_VERSIONS]
        chain = " -> ".join([a, *known])
        problems.append(
            f"{VERSION_KEY}: {a} -> {b} skips {len(steps) - 1} minor(s); EKS updates the control plane one minor at a "
            f"time, and node groups follow it: set {steps[0]}, run `pulumi up`, and repeat for each minor ({chain}), "
            "one minor per `pulumi up`" + (f". {unread}" if unread else "")
        )
    for g in new.all_groups:
        was = next((o for o in old.all_groups if o.name == g.name), None)
        if was is None:
            continue
        kubelet = kubelet_minor(was, deployed)
        gap = bmin - minor_number(kubelet)[1]
        if minor_number(kubelet)[0] != bmaj or gap > KUBELET_MAX_SKEW or gap < 0:
            problems.append(
                f"{key(g.path)}: its nodes run kubelet {kubelet} until they roll, outside the skew Kubernetes supports "
                f"against a {b} API server (kubelet at most {KUBELET_MAX_SKEW} minors older, never newer): move "
                f"{key(g.path)}.amiRelease and the cluster one minor at a time"
            )
    return problems


def _launch_template(plan: Plan, g: NodeGroupPlan) -> dict[str, Any]:
    """The settings of a group that its launch template carries: a change is a new version, and the nodes roll."""
    return {
        "root volume size": g.disk_size_gib,
        "EFA interfaces": g.profile.efa_interfaces,
        "capacity reservation": g.capacity_reservation_id,
        "host setup": [r.name for r in plan.host_requirements(g.name)],
    }


def _replacing(old: NodeGroupPlan, new: NodeGroupPlan) -> list[str]:
    """What makes a new group: EKS updates none of these in place (source key ``eks-update-nodegroup``)."""
    out = []
    if old.instance_types != new.instance_types:
        out.append(f"instance types {', '.join(old.instance_types)} -> {', '.join(new.instance_types)}")
    if old.capacity_type != new.capacity_type:
        out.append(f"capacity type {old.capacity_type} -> {new.capacity_type}")
    if old.profile.ami_type != new.profile.ami_type:
        out.append(f"AMI type {old.profile.ami_type} -> {new.profile.ami_type}")
    if (old.zone, old.subnet_id) != (new.zone, new.subnet_id):
        out.append(f"zone {old.zone or old.subnet_id or 'every zone'} -> {new.zone or new.subnet_id or 'every zone'}")
    return out


def _rolling(old_plan: Plan, new_plan: Plan, old: NodeGroupPlan, new: NodeGroupPlan) -> list[str]:
    """What rolls a group's nodes: the Kubernetes minor, a pinned AMI release, a launch template setting."""
    out = []
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    if a != b:
        release = new.ami.release_version if new.ami.pinned else f"EKS's newest release for {b}"
        out.append(f"Kubernetes {a} -> {b} (AMI release {release})")
    elif new.ami.pinned and old.ami.release_version != new.ami.release_version:
        out.append(f"AMI release {old.ami.release_version} -> {new.ami.release_version}")
    lt_old, lt_new = _launch_template(old_plan, old), _launch_template(new_plan, new)
    out += [f"launch template: {k} {lt_old[k]} -> {lt_new[k]}" for k in lt_old if lt_old[k] != lt_new[k]]
    return out


def _stops(old_plan: Plan, new_plan: Plan, group: str, strategy: str, surge: bool = True) -> tuple[JobStop, ...]:
    """The old configuration's jobs on ``group`` (the ones running), with what the new budget keeps."""
    out = []
    for name, job in old_plan.jobs.items():
        if job.group.name != group:
            continue
        now = new_plan.jobs.get(name)
        keeps = now.min_available if now is not None and now.group.name == group else job.min_available
        block = job.group.capacity_type == "CAPACITY_BLOCK"
        out.append(
            JobStop(
                name=name,
                group=group,
                pods=job.nodes,
                strategy=strategy,
                keeps=keeps,
                surge=surge,
                capacity_block=block,
            )
        )
    return tuple(out)


def compare(
    old_plan: Plan,
    new_plan: Plan,
    old_label: str = "old",
    running: Optional[str] = None,
    *,
    unread: Optional[str] = None,
    zones_of: Optional[ZonesOf] = None,
    deployed_zones: Optional[list[str]] = None,
) -> Upgrade:
    """What ``pulumi up`` does moving a running stack from ``old_plan`` to ``new_plan``; :class:`ConfigError` when
    the move breaks an upgrade rule (:func:`minor_problems`, :func:`~stacks.plan.network_change.network_problems`;
    ``running``: a control plane moved outside Pulumi; ``unread``: why its minor was not read; ``zones_of``: the VPC's
    zones of each, where the region's zones are known; ``deployed_zones``: the zones the old VPC was made in, where
    recorded)."""
    problems = minor_problems(old_plan, new_plan, running, unread=unread)
    problems += network_problems(old_plan, new_plan, zones_of, deployed_zones)
    if problems:
        raise ConfigError(problems)
    old_groups = {g.name: g for g in old_plan.all_groups}
    new_names = {g.name for g in new_plan.all_groups}
    groups: list[GroupChange] = []
    notes: list[str] = []
    for g in new_plan.all_groups:
        if g.name in old_groups:
            change, group_notes = _group_change(old_plan, new_plan, old_groups[g.name], g)
            groups += [change] if change is not None else []
            notes += group_notes
    notes += _held_addon_notes(old_plan, new_plan)
    notes += network_notes(old_plan, new_plan) if zones_of is None else []
    groups += [_deleted(old_plan, new_plan, was) for name, was in old_groups.items() if name not in new_names]
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    return Upgrade(
        old_label=old_label,
        old_minor=a,
        new_minor=b,
        groups=tuple(groups),
        addons=_addon_changes(old_plan, new_plan),
        notes=tuple(notes),
        running=running,
        data=data_changes(old_plan, new_plan),
    )


def _group_change(
    old_plan: Plan, new_plan: Plan, was: NodeGroupPlan, g: NodeGroupPlan
) -> tuple[Optional[GroupChange], list[str]]:
    """What happens to a group the stack keeps: replaced, rolled or left alone, with the notes its roll needs."""
    replace_why = _replacing(was, g)
    if replace_why:
        # the old group's nodes are deleted once the new group is up: its jobs stop whatever the budget
        jobs = _stops(old_plan, new_plan, g.name, "delete")
        change = GroupChange(
            path=g.path,
            action="replace",
            reasons=tuple(replace_why),
            nodes=was.desired_size,
            strategy=g.update_strategy,
            jobs=jobs,
        )
        return change, []
    why = _rolling(old_plan, new_plan, was, g)
    if not why:
        return None, []
    # pulumi-aws (Terraform's aws_eks_node_group) sends the version update before the update config (source key
    # ``tf-eks-node-group-update-order``): the roll runs under the strategy the group had
    rolls_under = was.node_update
    change = GroupChange(
        path=g.path,
        action="roll",
        reasons=tuple(why),
        nodes=was.desired_size,
        strategy=g.update_strategy,
        jobs=_stops(old_plan, new_plan, g.name, g.update_strategy, rolls_under.surge),
        node_update=rolls_under,
        no_surge=was.no_surge.why if was.no_surge is not None else None,
    )
    notes = []
    if rolls_under != g.node_update:
        notes.append(
            f"{g.path}: its EKS update strategy moves {rolls_under.name} -> {g.node_update.name} in the "
            f"same `pulumi up` as the roll, and the provider starts the roll first: this roll runs under "
            f"{rolls_under.name}"
            + (
                ", which first launches up to two nodes per zone of the group beyond its size: its "
                "capacity must have room for them"
                if rolls_under.surge
                else ""
            )
        )
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    if g.capacity_type == "CAPACITY_BLOCK" and a != b:
        notes.append(
            f"{g.path}: while its Capacity Block is active the group keeps its version and rolls at the next "
            f"`pulumi up` at 0 nodes; EKS updates the cluster past {b} only once every group runs {b}"
        )
    return change, notes


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
        if version and held.get(addon) == version
    ]


def _deleted(old_plan: Plan, new_plan: Plan, was: NodeGroupPlan) -> GroupChange:
    """A group the new configuration no longer has: its nodes go, and its jobs stop."""
    return GroupChange(
        path=was.path,
        action="delete",
        reasons=("removed from the stack file",),
        nodes=was.desired_size,
        strategy="delete",
        jobs=_stops(old_plan, new_plan, was.name, "delete"),
    )


def data_changes(old_plan: Plan, new_plan: Plan) -> tuple[str, ...]:
    """The changes that replace the cluster or give the jobs other shared data than they had, each as a line that
    names its key. A jobs-only stack has neither of its own."""
    old, new = old_plan.config, new_plan.config
    if new.cluster.stack_reference is not None:
        return ()
    a, b = old.storage, new.storage
    # a file system the stack made goes when the stack stops registering it, unless its state says to keep it
    # (retainOnDelete, as last applied); one it adopted (fileSystemId) was never the stack's to delete
    deleted = (
        ""
        if a.file_system_id is not None
        else "; storage.retainOnDelete keeps the old file system in AWS"
        if a.retain_on_delete
        else "; the old file system is deleted with its data (storage.retainOnDelete was not applied)"
    )
    found = []
    if old.cluster_name != new.cluster_name:
        # every resource's name starts with clusterName (stacks/environment.py)
        made = ["the cluster, its nodes and jobs"] + ["the VPC"] * (new.network is not None)
        made += ["the file system"] * (a.file_system_id is None)
        found.append(
            f"{key('clusterName')} {old.cluster_name} -> {new.cluster_name}: every resource of the stack is "
            f"replaced under the new name ({', '.join(made)}){deleted}"
        )
    elif a.backend != b.backend:
        found.append(f"{key('storage.backend')} {a.backend} -> {b.backend}: a new, empty file system{deleted}")
    elif a.file_system_id != b.file_system_id:
        found.append(
            f"{key('storage.fileSystemId')} {a.file_system_id or 'unset'} -> {b.file_system_id or 'unset'}: the jobs "
            f"get another file system{deleted}"
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
    return found


def _addon_changes(old_plan: Plan, new_plan: Plan) -> tuple[AddonChange, ...]:
    """The EKS add-ons whose version moves (an add-on at EKS's default moves with the minor), and the cluster
    autoscaler's chart and image where its minor's release differs."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    addons = []
    for addon in EKS_ADDONS:
        before = addon_version_for(addon, a, old_plan.config.cluster.addon_versions)
        after = addon_version_for(addon, b, new_plan.config.cluster.addon_versions)
        if before != after or (a != b and after is None):
            addons.append(AddonChange(addon, before, after))
    if new_plan.autoscale and a != b:
        ca_old, ca_new = (
            f"chart {r.chart.version}, image {r.image.ref.split('@')[0].rsplit(':', 1)[1]}"
            for r in (CLUSTER_AUTOSCALER[a], CLUSTER_AUTOSCALER[b])
        )
        if ca_old != ca_new:
            addons.append(AddonChange("cluster-autoscaler", ca_old, ca_new))
    return tuple(addons)


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)


def unpinned_note(plan: Plan) -> Optional[str]:
    """What an unset ``cluster.kubernetesVersion`` means for a stack planned as ``plan``; ``None`` when it is set."""
    if not unset_minor(plan):
        return None
    return (
        f"{VERSION_KEY} is not set, so a new stack gets this project's default ({DEFAULT_KUBERNETES_VERSION}); after "
        "a project update that raises the default, `pulumi up` stops until you choose the minor; to choose now, pin "
        f"it ({VERSION_KEY}: '{plan.config.cluster.kubernetes_version}')"
    )


def default_minor_at(folder: Path, catalog: str, rev: str) -> Optional[str]:
    """This project's default Kubernetes minor at git revision ``rev`` of the repository holding ``folder``, as its
    catalog (``catalog``, a path from the repository's top) gives it (:func:`newest_minor`); ``None`` where that
    revision has no catalog to read (another project's repository, with this library installed)."""
    shown = _git(folder, "show", f"{rev}:{catalog}")
    return newest_minor(shown.stdout) if shown.returncode == 0 else None


def newest_minor(catalog_source: str) -> Optional[str]:
    """The default minor the source of :data:`PLATFORM_SOURCE` gives: its ``DEFAULT_KUBERNETES_VERSION`` where that is
    a literal, else the newest minor it lists; ``None`` if it gives neither."""
    literal = _DEFAULT_LITERAL.search(catalog_source)
    if literal:
        return literal.group(1)
    minors = _MINOR_ENTRY.findall(catalog_source)
    return max(minors, key=minor_number) if minors else None


def leaves_minor_unset(cluster: Any) -> bool:
    """Whether a stack's ``cluster`` setting, a mapping (a stack file's YAML, or the JSON Pulumi passes, parsed) or
    none, leaves the minor to the project's default. A jobs-only stack has none to set; a setting that is no mapping
    is the loader's to report."""
    if cluster is None:
        return True
    return isinstance(cluster, dict) and "kubernetesVersion" not in cluster and "stackReference" not in cluster


def with_minor(cluster: Optional[Mapping[str, Any]], minor: str) -> dict[str, Any]:
    """The ``cluster`` setting with ``minor`` as its ``kubernetesVersion``."""
    return {**(cluster or {}), "kubernetesVersion": minor}


def _sets_minor(config: dict[str, Any]) -> bool:
    return not leaves_minor_unset(config.get(CLUSTER_KEY))


def _with_minor(config: dict[str, Any], minor: str) -> dict[str, Any]:
    return {**config, CLUSTER_KEY: with_minor(config.get(CLUSTER_KEY), minor)}


@dataclass(frozen=True)
class OldConfig:
    """The configuration ``--from`` names, as :func:`read_old_config` read it."""

    label: str
    path: Path
    """The stack file it stands for (the new one's path for a git revision)."""
    config: dict[str, Any]
    notes: tuple[str, ...] = ()
    """How an unset ``cluster.kubernetesVersion`` was read."""


def read_old_config(old: str, stack: str, stack_file: Optional[Path]) -> OldConfig:
    """The old configuration ``--from`` names: a stack file's path, else a git revision of the stack's file. A minor
    left unset is the default of that revision (:func:`default_minor_at`), else today's, with a note saying which."""
    try:
        path = (stack_file or stack_file_for(stack)).resolve()
    except StackFileError as exc:
        raise StackLoadError(f"error: {exc}") from exc
    if Path(old).is_file():
        try:
            old_path, config = read_stack_config(stack, Path(old))
        except StackFileError as exc:
            raise StackLoadError(f"error: --from {old}: {exc}") from exc
        notes: tuple[str, ...] = ()
        if not _sets_minor(config):
            notes = (
                f"{old} does not set {VERSION_KEY}: read as this version's default, {DEFAULT_KUBERNETES_VERSION}; "
                "if the running cluster runs another minor, set it there (or give the git revision deployed, whose "
                "default is read from its catalog)",
            )
        return OldConfig(str(old), old_path, config, notes)
    top = _git(path.parent, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise StackLoadError(
            f"error: --from {old}: not a file, and {path.parent} is not in a git repository; give the old stack file's "
            "path, or a git revision of a stack file that git tracks"
        )
    rel = path.relative_to(Path(top.stdout.strip()).resolve())
    shown = _git(path.parent, "show", f"{old}:{rel.as_posix()}")
    if shown.returncode != 0:
        raise StackLoadError(
            f"error: --from {old}: not a file, and git has no {rel.as_posix()} at revision {old!r} "
            f"({shown.stderr.strip()}); give a revision where the stack file exists (git log -- {rel.as_posix()}), "
            "or the old file's path"
        )
    try:
        data = load_stack_yaml(shown.stdout) or {}
    except yaml.YAMLError as exc:
        raise StackLoadError(f"error: --from {old}: cannot read {rel.as_posix()} at {old}: {exc}") from exc
    values = data.get("config") if isinstance(data, dict) else None
    if not isinstance(values, dict):
        raise StackLoadError(f"error: --from {old}: {rel.as_posix()} at {old} has no config: mapping")
    label = f"{old}:{rel.as_posix()}"
    config = {**project_config(path.parent / "Pulumi.yaml"), **values}
    if _sets_minor(config):
        return OldConfig(label, path, config)
    catalog = (rel.parent / PLATFORM_SOURCE).as_posix()
    minor = default_minor_at(path.parent, catalog, old)
    if minor is None:
        return OldConfig(
            label,
            path,
            config,
            (
                f"{label} does not set {VERSION_KEY}, and {catalog} at {old} cannot be read for the default "
                f"then: read as this version's default, {DEFAULT_KUBERNETES_VERSION}",
            ),
        )
    note = f"{label} does not set {VERSION_KEY}: {minor}, the default at {old}" + (
        f", and the default now is {DEFAULT_KUBERNETES_VERSION}" if minor != DEFAULT_KUBERNETES_VERSION else ""
    )
    return OldConfig(label, path, _with_minor(config, minor), (note,))


def plan_old(old: str, stack: str, stack_file: Optional[Path]) -> tuple[OldConfig, Plan]:
    """The old configuration and its plan, validated with today's rules (:class:`StackLoadError` otherwise), but not
    today's support windows: its minor was supported when it was deployed, and a minor that left support since is
    the one an upgrade moves from."""
    read = read_old_config(old, stack, stack_file)
    project = project_name(read.path)
    try:
        with support_windows_ignored():
            plan = build_plan(load_config(project, stack, read.config, project_dir=read.path.parent.resolve()))
    except ConfigError as exc:
        notes = "".join(f"\nnote: {n}" for n in read.notes)
        raise StackLoadError(f"the old configuration ({read.label}) does not load: {exc}{notes}") from exc
    return read, plan


def upgrade_report(u: Upgrade) -> dict[str, Any]:
    """The comparison as a JSON-ready mapping."""
    return {
        "from": u.old_label,
        "kubernetesVersion": {"from": u.old_minor, "to": u.new_minor, **({"running": u.running} if u.running else {})},
        "nodeGroups": [
            {
                "key": g.path,
                "action": g.action,
                "reasons": list(g.reasons),
                "nodes": g.nodes,
                "updateStrategy": g.strategy,
                "eksUpdateStrategy": {"name": g.node_update.name, "why": g.no_surge},
                "minutes": g.minutes,
                "jobs": [
                    {"name": j.name, "pods": j.pods, "keeps": j.keeps, "strategy": j.strategy, "what": _stop_text(j)}
                    for j in g.jobs
                ],
            }
            for g in u.groups
        ],
        "addons": [{"name": a.name, "from": a.old, "to": a.new} for a in u.addons],
        "data": list(u.data),
        "expectedMinutes": u.minutes,
        "durations": {
            "controlPlane": {"minutes": CONTROL_PLANE_UPGRADE.minutes, "estimate": CONTROL_PLANE_UPGRADE.estimate},
            "nodeRoll": {"minutes": NODE_ROLL.minutes, "estimate": NODE_ROLL.estimate},
            "nodeSurge": {"minutes": NODE_SURGE.minutes, "estimate": NODE_SURGE.estimate},
            "source": "components/catalog/timings.py",
        },
        "notes": list(u.notes),
    }


def _stop_text(j: JobStop) -> str:
    if j.strategy == "delete":
        return f"stopped: all {j.pods} pod(s) go with the old group's nodes"
    return j.what


def _eks_strategy(g: dict[str, Any]) -> str:
    """The group's EKS update strategy and, for ``MINIMAL``, why."""
    eks = g["eksUpdateStrategy"]
    if eks["why"] is None:
        return f"EKS strategy {eks['name']} (new nodes first)"
    return f"EKS strategy {eks['name']} ({eks['why']}: each node goes before its replacement launches)"


def _version(v: Optional[str], minor: str) -> str:
    return v if v is not None else f"EKS's default for {minor}"


def render_upgrade(r: dict[str, Any]) -> str:
    """The comparison as text."""
    k = r["kubernetesVersion"]
    lines = [f"upgrade from {r['from']}:"]
    if k.get("running"):
        moves = f", which moves to {k['to']} first" if k["running"] != k["to"] else ""
        lines.append(
            f"  Kubernetes {k['from']} -> {k['to']}: the control plane already runs {k['running']}{moves}; then the "
            "add-ons, then the node groups"
        )
    elif k["from"] != k["to"]:
        lines.append(
            f"  Kubernetes {k['from']} -> {k['to']}: the control plane first (about "
            f"{r['durations']['controlPlane']['minutes']:g} min, an estimate), then the add-ons, then the node groups"
        )
    else:
        lines.append(f"  Kubernetes {k['from']}: unchanged")
    if r["addons"]:
        lines.append("  add-ons:")
        for a in r["addons"]:
            lines.append(f"    {a['name']}: {_version(a['from'], k['from'])} -> {_version(a['to'], k['to'])}")
    lines.extend(f"  data: {d}" for d in r["data"])
    if not r["nodeGroups"]:
        lines.append("  node groups: none rolls")
    for g in r["nodeGroups"]:
        verb = {"roll": "rolls", "replace": "is replaced (a new group, then the old one deleted)", "delete": "goes"}
        lines.append(
            f"  {g['key']} {verb[g['action']]}: {'; '.join(g['reasons'])}; {g['nodes']} node(s)"
            + (f", updateStrategy {g['updateStrategy']}, {_eks_strategy(g)}" if g["action"] == "roll" else "")
        )
        for j in g["jobs"]:
            lines.append(f"    job {j['name']}: {j['what']}")
        if not g["jobs"]:
            lines.append("    no running job on it")
    lines.append(
        f"  expected duration: about {r['expectedMinutes']:g} min (a model: control plane, add-ons, then the "
        f"slowest group at {r['durations']['nodeRoll']['minutes']:g} min a node, "
        f"{r['durations']['nodeSurge']['minutes']:g} more for DEFAULT's first new nodes; {r['durations']['source']})"
    )
    lines.extend(f"  note: {n}" for n in r["notes"])
    return "\n".join(lines)


def compare_stacks(old: str, stack: str, stack_file: Optional[Path], plan: Plan, *, as_json: bool = False) -> str:
    """The ``--from`` summary of the stack planned as ``plan`` against ``old``, as text or JSON; a broken upgrade
    rule raises :class:`StackLoadError` with the configuration error's message (the command exits 2)."""
    read, old_plan = plan_old(old, stack, stack_file)
    try:
        u = compare(old_plan, plan, read.label)
    except ConfigError as exc:
        raise StackLoadError("\n".join([str(exc), *(f"note: {n}" for n in read.notes)])) from exc
    unpinned = unpinned_note(plan)
    r = upgrade_report(replace(u, notes=(*read.notes, *u.notes, *([unpinned] if unpinned else []))))
    return json.dumps({"upgrade": r}, indent=2) if as_json else render_upgrade(r)


__all__ = [
    "AddonChange",
    "GroupChange",
    "JobStop",
    "OldConfig",
    "Upgrade",
    "compare",
    "compare_stacks",
    "default_minor_at",
    "minor_problems",
    "moved_default_problem",
    "newest_minor",
    "plan_old",
    "read_old_config",
    "render_upgrade",
    "unpinned_note",
    "unset_minor",
    "upgrade_report",
]
