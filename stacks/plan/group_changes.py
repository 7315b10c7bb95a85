"""What a change of a running stack's configuration does to each of its node groups at the next ``pulumi up``: a
group replaced, rolled (a new minor, AMI release or launch template), updated in place (labels, taints) or left
alone, one added or deleted, with the notes a roll or new sizes need, and the jobs each roll or deletion stops
(:mod:`stacks.plan.job_stops`). :func:`stacks.plan.upgrade.compare` puts them in the upgrade summary."""

from dataclasses import dataclass
from typing import Mapping, NamedTuple, Optional

from components.catalog.platform import NODE_UPDATE_STRATEGIES, NodeUpdateStrategy
from components.catalog.timings import CREATION
from components.nodeplan import roll_minutes
from stacks.plan import NodeGroupPlan, Plan, jobs_waiting_for, same_cluster
from stacks.plan.admission import autoscales
from stacks.plan.ami_pins import first_pin_notes, first_pin_unseen, release_moves, running_release
from stacks.plan.group_diff import replacing, template_changes
from stacks.plan.job_stops import JobStop, job_stops


class RollSurge(NamedTuple):
    """The most nodes a ``DEFAULT`` roll launches beyond a group's size (source key ``eks-managed-node-update``)."""

    per_zone: int
    zones: Optional[int]
    """The zones of the group's nodes; ``None`` where offline cannot tell (an existing VPC's subnets)."""
    instance_type: str
    """The group's type with the most vCPUs."""
    vcpus: int


def roll_surge(plan: Plan, g: NodeGroupPlan) -> Optional[RollSurge]:
    """What a roll of ``g`` (in ``plan``) under its EKS strategy launches beyond its size: ``None`` under ``MINIMAL``.
    Its zones: one where it is pinned, else the new VPC's (an upper bound for the system group, whose subnets are the
    control plane's)."""
    if not g.node_update.surge:
        return None
    network = plan.config.network
    zones = 1 if g.single_zone else network.zone_count if network is not None else None
    largest = max(g.types, key=lambda t: t.vcpus)
    return RollSurge(g.node_update.surge_per_zone, zones, largest.name, largest.vcpus)


@dataclass(frozen=True)
class GroupChange:
    """A node group whose nodes roll, are replaced, or go."""

    path: str
    action: str
    """``roll`` (EKS replaces the nodes one at a time), ``replace`` (a new group, then the old one deleted),
    ``update`` (its labels or taints, on its nodes in place), ``shrink`` (a smaller size: nodes terminated, budgets
    or not), ``add`` (a group the stack file gains) or ``delete``."""
    reasons: tuple[str, ...]
    nodes: int
    """Its nodes now (:func:`running_nodes`; a new group's desired size)."""
    strategy: str
    jobs: tuple[JobStop, ...] = ()
    up_to: bool = False
    """``nodes`` is the most it may run: its ``maxSize``, where the cluster autoscaler owns its size."""
    maybe: bool = False
    """A ``roll`` that may not happen: its one reason is a first pin whose release the nodes may run already
    (:func:`stacks.plan.ami_pins.first_pin_unseen`). Counted in the expected duration all the same."""
    node_update: NodeUpdateStrategy = NODE_UPDATE_STRATEGIES["DEFAULT"]
    """How EKS rolls the nodes (``updateConfig.updateStrategy`` of the new configuration)."""
    no_surge: Optional[str] = None
    """Why the group has no room for an extra node (the reason for ``MINIMAL``), ``None`` for ``DEFAULT``."""
    surge: Optional[RollSurge] = None
    """The nodes a roll under ``DEFAULT`` launches beyond the group's size first; ``None`` for other changes."""

    @property
    def minutes(self) -> float:
        """The modelled time of the change: a roll as :func:`components.nodeplan.roll_minutes` models it (the node
        group's update timeout reads the same); a new group's creation."""
        if self.action == "roll":
            return roll_minutes(self.nodes, self.node_update)
        if self.action in ("replace", "add"):
            return CREATION["aws:eks/nodeGroup:NodeGroup"].minutes
        return 0.0


@dataclass(frozen=True)
class OutgoingGroup:
    """A group of the last update whose nodes run beside the new configuration's until the end of ``pulumi up``."""

    group: NodeGroupPlan
    """The group as the last update left it."""
    why: str
    """``replaced`` (a new group of the same name first) or ``removed`` (the stack file no longer has it)."""
    nodes: int
    """The nodes it runs: its ``desiredSize``, or its ``maxSize`` where the cluster autoscaler owned its size."""
    sized_by: str
    """Which of the two ``nodes`` is, and why, in words."""


def running_nodes(old_plan: Plan, was: NodeGroupPlan) -> int:
    """The nodes a group of the last update may run: its ``maxSize`` where the cluster autoscaler owns its size (the
    record holds only the first ``desiredSize``), else its ``desiredSize``."""
    return was.max_size if old_plan.autoscale else was.desired_size


def outgoing_groups(old_plan: Plan, new_plan: Plan) -> list[OutgoingGroup]:
    """The old configuration's groups that run until the end of the update beside the new one's: Pulumi creates a
    replaced group's successor first and deletes the old group, like a removed one, after every other change (source
    keys ``pulumi-replace-order``, ``pulumi-aws-node-group-replace``). A new ``clusterName`` replaces every group; a
    jobs-only stack's groups were another stack's, which this update does not delete."""
    if old_plan.config.jobs_only:
        return []
    renamed = not (new_plan.config.jobs_only or same_cluster(old_plan.config, new_plan.config))
    new_groups = {g.name: g for g in new_plan.all_groups}
    if old_plan.autoscale:  # the autoscaler owns desiredSize (ignore_changes): the record holds only its first value
        sized_by = "its maxSize: the cluster autoscaler owns its size and may have grown it that far"
    else:
        sized_by = "its desiredSize, which Pulumi keeps it at"
    out = []
    for was in old_plan.all_groups:
        now = new_groups.get(was.name)
        if now is not None and not renamed and not replacing(was, now):
            continue
        nodes = running_nodes(old_plan, was)
        out.append(OutgoingGroup(was, "removed" if now is None else "replaced", nodes, sized_by))
    return out


def block_deferred(old_plan: Plan, new_plan: Plan) -> list[tuple[NodeGroupPlan, list[str]]]:
    """Each group this update puts on a Capacity Block (a new block, or a group that had none) with the running jobs
    that go with it: until the block starts, `pulumi up` does not create the jobs on it or after them
    (:func:`stacks.workloads._deferred_jobs`), so it deletes the Jobs it made before. Whether the block has started
    is known only at `pulumi up`."""
    old_groups = {g.name: g for g in old_plan.groups.values()}
    out = []
    for g in new_plan.groups.values():
        was = old_groups.get(g.name)
        if g.capacity_type != "CAPACITY_BLOCK" or (
            was is not None
            and was.capacity_type == "CAPACITY_BLOCK"
            and was.capacity_reservation_id == g.capacity_reservation_id
        ):
            continue
        running = [n for n in jobs_waiting_for(new_plan, {g.name}) if n in old_plan.jobs]
        if running:
            out.append((g, running))
    return out


def block_start_notes(deferred: list[tuple[NodeGroupPlan, list[str]]]) -> list[str]:
    """What the summary says of each group :func:`block_deferred` found."""
    return [
        f"{g.path}: Capacity Block {g.capacity_reservation_id} has no nodes until it starts. A `pulumi up` before then "
        f"does not create the jobs on it (or after them) and deletes their Jobs ({', '.join(jobs)}): a run in "
        "progress stops, and what the jobs wrote stays on the shared volume. The first `pulumi up` after the block's "
        "start creates them again"
        for g, jobs in deferred
    ]


def outgoing_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """What the summary says of each group that runs until the end of the update (:func:`outgoing_groups`): a removed
    one only where the update also creates a group, whose nodes then start beside its own."""
    outgoing = [o for o in outgoing_groups(old_plan, new_plan) if o.group.capacity_type != "CAPACITY_BLOCK" and o.nodes]
    old_names = {g.name for g in old_plan.all_groups}
    creates = any(o.why == "replaced" for o in outgoing) or any(g.name not in old_names for g in new_plan.all_groups)
    blocks = {g.name for g in new_plan.all_groups if g.capacity_type == "CAPACITY_BLOCK"}
    notes = []
    for o in outgoing:
        runs = f"{o.nodes} node(s) ({o.sized_by})"
        if o.why == "replaced" and o.group.name in blocks:
            notes.append(
                f"{o.group.path}: the new group runs nodes only while its Capacity Block is active, none before it "
                f"starts; the old group's {runs} run until the end of this `pulumi up`, when Pulumi deletes it"
            )
        elif o.why == "replaced":
            notes.append(
                f"{o.group.path}: the new group's nodes start beside the old group's {runs}. Both groups run until the "
                "end of this `pulumi up`, when Pulumi deletes the old one. Your vCPU quota and your budget need room "
                "for both (preflight counts them at `pulumi up`)"
            )
        elif creates:
            notes.append(
                f"{o.group.path}: the group's {runs} run until the end of this `pulumi up`, when Pulumi deletes it, "
                "beside the nodes of the groups the update creates. Your vCPU quota and your budget need room for both "
                "(preflight counts them at `pulumi up`)"
            )
    return notes


def _rolling(
    old_plan: Plan,
    new_plan: Plan,
    old: NodeGroupPlan,
    new: NodeGroupPlan,
    recorded: Optional[Mapping[str, object]] = None,
) -> list[str]:
    """What rolls a group's nodes: the Kubernetes minor, a pinned AMI release other than the one it runs
    (:func:`stacks.plan.ami_pins.running_release`), its launch template
    (:func:`stacks.plan.group_diff.template_changes`)."""
    out = []
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    if a != b:
        release = new.ami.release_version if new.ami.pinned else f"EKS's newest release for {b}"
        out.append(f"Kubernetes {a} -> {b} (AMI release {release})")
    elif first_pin_unseen(old, new, recorded):
        out.append(
            f"AMI release pinned to {new.ami.release_version}: its nodes roll unless they run it already (which "
            "release they run is not recorded here)"
        )
    elif release_moves(old, new, recorded):
        out.append(f"AMI release {running_release(old, recorded)} -> {new.ami.release_version}")
    template = template_changes(old_plan, new_plan, old, new, recorded)
    if template and not out:
        # the provider sends releaseVersion only when it changed, and EKS then takes its newest release for the
        # group's minor (source keys ``tf-eks-node-group-release-version``, ``eks-update-nodegroup-release``)
        template.append(f"AMI release -> EKS's newest for {b}")
    return out + template


def group_change(
    old_plan: Plan,
    new_plan: Plan,
    was: NodeGroupPlan,
    g: NodeGroupPlan,
    recorded: Optional[Mapping[str, object]] = None,
    replaced: frozenset[str] = frozenset(),
    *,
    budgets_late: bool = False,
) -> tuple[Optional[GroupChange], list[str]]:
    """What happens to a group the stack keeps: replaced, rolled, its labels or taints updated in place, or left alone,
    with the notes its roll needs (``recorded``: the last update's record of what it installed; ``replaced``: the jobs
    whose object the update replaces; ``budgets_late``: the jobs' budgets change only after the system group's update,
    so a roll runs under the old ones)."""
    replace_why = replacing(was, g)
    if replace_why:
        return _replaced_group(old_plan, new_plan, was, g, replace_why, replaced, recorded), []
    sizes = _size_notes(old_plan, new_plan, was, g)
    shrink = _shrinking(old_plan, new_plan, was, g)
    why = _rolling(old_plan, new_plan, was, g, recorded)
    if not why:
        change, notes = _updated_group(old_plan, was, g)
        if shrink is None:
            return change, sizes + notes
        if change is None:
            return _shrunk_group(old_plan, new_plan, was, g, shrink), sizes + notes
        return change, sizes + notes + [f"{g.path}: {shrink}; its jobs' pods there end, whatever their budget"]
    change = _rolled_group(old_plan, new_plan, was, g, why, recorded, budgets_late)
    notes = _roll_notes(old_plan, new_plan, was, g, change, recorded)
    if resized_under_autoscaler(old_plan, new_plan, was, g):
        # the provider updates the version first and waits for the roll, then sends the sizes (source key
        # ``eks-scaling-config``: resourceNodeGroupUpdate)
        notes.append(
            f"{g.path}: its new sizes are sent after its roll, with the desired size `pulumi up` read when it started: "
            "a size the autoscaler sets during the roll is undone. Give the group its new sizes in a `pulumi up` of "
            "their own"
        )
    if shrink is not None:
        notes.append(f"{g.path}: {shrink}, besides its roll; its jobs' pods there end, whatever their budget")
    return change, sizes + notes


def _shrinking(old_plan: Plan, new_plan: Plan, was: NodeGroupPlan, g: NodeGroupPlan) -> Optional[str]:
    """Why EKS terminates some of a kept group's nodes (source key ``eks-scaling-config``: a desired size below the
    nodes running, PodDisruptionBudgets or not): a fixed size made smaller, or the autoscaler's size given up for a
    fixed one below the group's old ``maxSize``. The provider sends a desired size only when it differs from the one
    in Pulumi's state, which the autoscaler's changes do not reach until a refresh (source key
    ``pulumi-ignore-changes``). ``None`` when no node goes so."""
    if g.capacity_type == "CAPACITY_BLOCK" or autoscales(new_plan, g):
        return None  # the autoscaler or the block keeps owning the desired size (pulumi up leaves it alone)
    if not autoscales(old_plan, was):
        if g.desired_size >= was.desired_size:
            return None
        return (
            f"desiredSize {was.desired_size} -> {g.desired_size}: EKS terminates "
            f"{was.desired_size - g.desired_size} of its {was.desired_size} nodes, whatever the budgets"
        )
    if g.desired_size >= was.max_size:
        return None
    return (
        f"the autoscaler no longer sets its size, and desiredSize is {g.desired_size}: if it runs more nodes (up to "
        f"{was.max_size}), EKS terminates the others, whatever the budgets. Run this update as `pulumi up --refresh`: "
        "without it, Pulumi may send no new size, and the extra nodes stay until a later update ends them"
    )


def _shrunk_group(old_plan: Plan, new_plan: Plan, was: NodeGroupPlan, g: NodeGroupPlan, why: str) -> GroupChange:
    """A kept group that only gets smaller (:func:`_shrinking`): its jobs may lose pods, whatever their budget."""
    return GroupChange(
        path=g.path,
        action="shrink",
        reasons=(why,),
        nodes=running_nodes(old_plan, was),
        strategy="shrink",
        jobs=job_stops(old_plan, new_plan, g.name, "shrink"),
        up_to=autoscales(old_plan, was),
    )


def _replaced_group(
    old_plan: Plan,
    new_plan: Plan,
    was: NodeGroupPlan,
    g: NodeGroupPlan,
    why: list[str],
    replaced: frozenset[str],
    recorded: Optional[Mapping[str, object]],
) -> GroupChange:
    """A group EKS cannot update in place (:func:`stacks.plan.group_diff.replacing`): a new group first, then the old
    one deleted."""
    # the old group's nodes are deleted once the new group is up: its jobs stop whatever the budget
    jobs = job_stops(old_plan, new_plan, g.name, "delete", replaced=replaced, recorded=recorded)
    return GroupChange(
        path=g.path,
        action="replace",
        reasons=tuple(why),
        nodes=running_nodes(old_plan, was),
        strategy=g.update_strategy,
        jobs=jobs,
        up_to=autoscales(old_plan, was),
    )


def _updated_group(old_plan: Plan, was: NodeGroupPlan, g: NodeGroupPlan) -> tuple[Optional[GroupChange], list[str]]:
    """A group that does not roll: its labels or taints updated on its nodes in place, else no change; a new
    ``updateStrategy`` changes only its jobs' budgets, as its note says."""
    # labels and taints are the node group's own settings: EKS updates them on its nodes in place, no roll
    # (source key ``tf-eks-node-group-update-order``)
    config = [k for k in ("labels", "taints") if getattr(was.profile, k) != getattr(g.profile, k)]
    notes = []
    if was.update_strategy != g.update_strategy:
        notes.append(
            f"{g.path}: updateStrategy {was.update_strategy} -> {g.update_strategy}: its jobs' "
            f"PodDisruptionBudgets change, no roll; its next roll runs under {g.update_strategy}"
        )
    if not config:
        return None, notes
    nodes = running_nodes(old_plan, was)
    return GroupChange(
        g.path, "update", tuple(config), nodes, g.update_strategy, up_to=autoscales(old_plan, was)
    ), notes


def _rolled_group(
    old_plan: Plan,
    new_plan: Plan,
    was: NodeGroupPlan,
    g: NodeGroupPlan,
    why: list[str],
    recorded: Optional[Mapping[str, object]],
    budgets_late: bool,
) -> GroupChange:
    """A group whose nodes roll, for the reasons ``why`` (:func:`_rolling`), under the strategies it had."""
    # pulumi-aws (Terraform's aws_eks_node_group) sends the version update before the update config (source key
    # ``tf-eks-node-group-update-order``): the roll runs under the strategy the group had
    rolls_under = was.node_update
    strategy = was.update_strategy if budgets_late else g.update_strategy
    if was.capacity_type == g.capacity_type == "CAPACITY_BLOCK":
        # an active block keeps the group's version and launch template, and a block not active has no nodes
        # (components.nodegroup.TrainingNodeGroup._ignored_changes): the roll stops no running pod
        return GroupChange(
            path=g.path,
            action="roll",
            reasons=(*why, "only at 0 nodes, its Capacity Block not active (a note says why)"),
            nodes=0,
            strategy=strategy,
            node_update=rolls_under,
            no_surge=was.no_surge.why if was.no_surge is not None else None,
        )
    return GroupChange(
        path=g.path,
        action="roll",
        reasons=tuple(why),
        maybe=len(why) == 1 and first_pin_unseen(was, g, recorded),
        nodes=running_nodes(old_plan, was),
        strategy=strategy,
        jobs=job_stops(old_plan, new_plan, g.name, strategy, rolls_under.surge, old_budgets=budgets_late),
        node_update=rolls_under,
        no_surge=was.no_surge.why if was.no_surge is not None else None,
        up_to=autoscales(old_plan, was),
        surge=roll_surge(old_plan, was),
    )


def _roll_notes(
    old_plan: Plan,
    new_plan: Plan,
    was: NodeGroupPlan,
    g: NodeGroupPlan,
    change: GroupChange,
    recorded: Optional[Mapping[str, object]],
) -> list[str]:
    """What a roll (``change``) needs said: a first pin's risk, strategies that move only after it, a Capacity
    Block's wait."""
    strategy, rolls_under = change.strategy, change.node_update
    notes = first_pin_notes(old_plan, new_plan, was, g, recorded)
    if strategy != g.update_strategy:
        notes.append(
            f"{g.path}: its updateStrategy moves {strategy} -> {g.update_strategy} in the same `pulumi up` as the "
            f"system group's update, and its jobs' PodDisruptionBudgets change only once that ended: this roll starts "
            f"under {strategy}. To roll under {g.update_strategy}, set it in a `pulumi up` of its own first"
        )
    if rolls_under != g.node_update:
        notes.append(
            f"{g.path}: its EKS update strategy moves {rolls_under.name} -> {g.node_update.name} in the "
            f"same `pulumi up` as the roll, and the provider starts the roll first: this roll runs under "
            f"{rolls_under.name}"
            + (
                f", which first launches up to {rolls_under.surge_per_zone} nodes per zone of the group beyond its "
                "size: its capacity must have room for them"
                if rolls_under.surge
                else ""
            )
        )
    if g.capacity_type == "CAPACITY_BLOCK":
        notes.append(_capacity_block_note(old_plan, new_plan, g))
    return notes


def resized_under_autoscaler(old_plan: Plan, new_plan: Plan, was: NodeGroupPlan, g: NodeGroupPlan) -> bool:
    """A kept group whose ``minSize`` or ``maxSize`` moves while the autoscaler owns its desired size before and after
    (not a Capacity Block's): the provider would send the desired size Pulumi recorded with them, so ``pulumi up``
    reads the one EKS holds first and sends it (:func:`resized_groups`)."""
    return (
        g.capacity_type != "CAPACITY_BLOCK"
        and autoscales(old_plan, was)
        and autoscales(new_plan, g)
        and (was.min_size, was.max_size) != (g.min_size, g.max_size)
    )


def desired_within(g: NodeGroupPlan, held: int) -> int:
    """The desired size sent for a group whose sizes move under the autoscaler: the one EKS holds, ``held``, moved
    within the group's new minSize-maxSize."""
    return min(max(held, g.min_size), g.max_size)


def resized_groups(old_plan: Plan, new_plan: Plan) -> tuple[str, ...]:
    """The names of the groups the stack keeps (not replaced) whose sizes move under the autoscaler
    (:func:`resized_under_autoscaler`); none where the update makes a new cluster or either side makes none."""
    if not same_cluster(old_plan.config, new_plan.config):
        return ()
    old = {w.name: w for w in old_plan.all_groups}
    return tuple(
        g.name
        for g in new_plan.all_groups
        if (was := old.get(g.name)) is not None
        and not replacing(was, g)
        and resized_under_autoscaler(old_plan, new_plan, was, g)
    )


def _size_notes(old_plan: Plan, new_plan: Plan, was: NodeGroupPlan, g: NodeGroupPlan) -> list[str]:
    """A kept group whose ``maxSize`` (or ``minSize``) changes while ``pulumi up`` leaves its desired size to the
    autoscaler or its Capacity Block (:meth:`components.nodegroup.TrainingNodeGroup._ignored_changes`), as it did at
    the last update. Left ignored, the provider would send the sizes with the desired size Pulumi last recorded
    (source key ``pulumi-ignore-changes``), and EKS would scale the group to it at once, PodDisruptionBudgets or not
    (source key ``eks-scaling-config``), or refuse it outside the new minSize-maxSize (an InvalidParameterException).
    So ``pulumi up`` reads the desired size EKS holds and sends it (:func:`resized_under_autoscaler`); a Capacity
    Block's group still sends the recorded one. A desiredSize alone is not sent at all. A group that had a fixed size
    recorded the one it has."""
    block = g.capacity_type == "CAPACITY_BLOCK"  # its minSize is ignored too
    if not block and not autoscales(old_plan, was) and autoscales(new_plan, g):
        # the autoscaler takes the size over: the provider sends the fixed size the group had, as the desired one
        if g.min_size <= was.desired_size <= g.max_size:
            return []
        return [
            f"{g.path}: the autoscaler takes over its size, and the provider sends the new sizes with the desired size "
            f"Pulumi recorded, {was.desired_size}, outside the new {g.min_size}-{g.max_size}: EKS refuses it. First "
            f"give the group one size within {g.min_size}-{g.max_size} (minSize, desiredSize and maxSize) in a "
            "`pulumi up` of its own"
        ]
    if not block and not (autoscales(old_plan, was) and autoscales(new_plan, g)):
        return []
    sizes = (
        (("maxSize", was.max_size, g.max_size),)
        if block
        else (
            ("minSize", was.min_size, g.min_size),
            ("maxSize", was.max_size, g.max_size),
        )
    )
    changed = [f"{k} {a} -> {b}" for k, a, b in sizes if a != b]
    if not changed and not block and g.desired_size != was.desired_size:
        return [
            f"{g.path}: desiredSize {was.desired_size} -> {g.desired_size}: left as it is, since the autoscaler owns "
            "the group's size (desiredSize is its size at creation only). Its pending pods scale it up, its idle nodes "
            "down"
        ]
    if not changed:
        return []
    if block:
        return [
            f"{g.path}: {', '.join(changed)}: the provider sends the new sizes with the desired size Pulumi recorded "
            "at the group's creation or last refresh, not the one its Capacity Block set since, and EKS scales the "
            "group to it at once: the pods of the nodes it removes end, whatever their PodDisruptionBudget. Run this "
            "update as `pulumi up --refresh`, which reads the group's desired size first"
        ]
    note = (
        f"{g.path}: {', '.join(changed)}: `pulumi up` reads the desired size EKS holds for the group and sends it "
        f"with the new sizes, moved within {g.min_size}-{g.max_size}"
    )
    if g.max_size < was.max_size:
        note += (
            f"; a group running more than {g.max_size} node(s) loses the others at once, and their pods end whatever "
            "their PodDisruptionBudget"
        )
    note += (
        ". Without preflight, or where EKS does not answer (a warning says so), the provider sends the desired size "
        "Pulumi recorded at the group's creation or last refresh, and EKS scales the group to it at once (or refuses "
        "it outside the new sizes): then run this update as `pulumi up --refresh`, which reads it first"
    )
    return [note]


def _capacity_block_note(old_plan: Plan, new_plan: Plan, g: NodeGroupPlan) -> str:
    """What a Capacity Block group's roll waits for: while its block is active the node group ignores a change of its
    version, AMI release and launch template (:meth:`components.nodegroup.TrainingNodeGroup._ignored_changes`), every
    reason :func:`_rolling` names."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    return (
        f"{g.path}: while its Capacity Block is active the group keeps its version, AMI release and launch template, "
        "and rolls at the next `pulumi up` at 0 nodes"
        + (f"; EKS updates the cluster past {b} only once every group runs {b}" if a != b else "")
    )


def added_group(g: NodeGroupPlan) -> GroupChange:
    """A group the stack file gains: created, with its desired size, before any group goes."""
    return GroupChange(path=g.path, action="add", reasons=("a new group",), nodes=g.desired_size, strategy="create")


def deleted_group(
    old_plan: Plan,
    new_plan: Plan,
    was: NodeGroupPlan,
    replaced: frozenset[str] = frozenset(),
    recorded: Optional[Mapping[str, object]] = None,
) -> GroupChange:
    """A group the new configuration no longer has: its nodes go, and its jobs stop (``recorded``: the last update's
    record of what it installed)."""
    return GroupChange(
        path=was.path,
        action="delete",
        reasons=("removed from the stack file",),
        nodes=running_nodes(old_plan, was),
        strategy="delete",
        jobs=job_stops(old_plan, new_plan, was.name, "delete", replaced=replaced, recorded=recorded),
        up_to=autoscales(old_plan, was),
    )
