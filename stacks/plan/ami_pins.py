"""A node group's ``amiRelease`` pin across an update: the release a group runs, whether the pin moves it, the pins
EKS would refuse (older than what runs, or kept while the launch template changes), and the notes where the release
the nodes run is not known. :mod:`stacks.plan.group_changes` and :mod:`stacks.plan.upgrade` read them."""

import re
from typing import Mapping, Optional

from stacks.config import key
from stacks.plan import NodeGroupPlan, Plan
from stacks.plan.group_diff import replacing, template_changes
from stacks.plan.nodes import recorded_release


def running_release(old: NodeGroupPlan, recorded: Optional[Mapping[str, object]] = None) -> str:
    """The AMI release a group runs: the last update's record of it, as EKS reported it (``recorded``), else the old
    plan's (its pin, or for a group without one the release a new group would start on, which EKS may have moved
    past)."""
    return recorded_release(recorded, old.path) or old.ami.release_version


def first_pin_unseen(old: NodeGroupPlan, new: NodeGroupPlan, recorded: Optional[Mapping[str, object]] = None) -> bool:
    """A group pinned for the first time whose running release nobody recorded (``plan --from``, or a record older
    than the releases' entries): its nodes run the release EKS had newest when the group was created or last updated,
    which may be the pin or not, so whether they roll is not known here."""
    return new.ami.pinned and not old.ami.pinned and recorded_release(recorded, old.path) is None


def release_moves(old: NodeGroupPlan, new: NodeGroupPlan, recorded: Optional[Mapping[str, object]] = None) -> bool:
    """The group's ``amiRelease`` pins a release other than the one it runs (:func:`running_release`): the provider
    compares the pin with the release in its state, EKS's, and sends it."""
    return new.ami.pinned and running_release(old, recorded) != new.ami.release_version


def release_key(release: str) -> Optional[tuple[tuple[int, ...], str]]:
    """An EKS AMI release (``1.36.2-20260714``) in the order EKS makes them: Kubernetes patch, then build date; None
    for a release not of that form."""
    match = re.fullmatch(r"(?:(\d+(?:\.\d+)*)-)?v?(\d{8})", release)
    if match is None:
        return None
    return tuple(int(p) for p in (match.group(1) or "").split(".") if p), match.group(2)


def pin_key(plan: Plan, g: NodeGroupPlan) -> str:
    """The key that pins ``g``'s AMI release: its own ``amiRelease``, else ``cluster.amiRelease``."""
    own = (
        plan.config.system_node_group.ami_release
        if g.path == "systemNodeGroup"
        else plan.config.node_groups[g.name].ami_release
    )
    return key(f"{g.path}.amiRelease" if own is not None else "cluster.amiRelease")


def pinned_release_problems(
    old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None
) -> list[str]:
    """A group whose ``amiRelease`` pins the release it runs while its launch template changes: EKS would take its
    newest release (a roll), and refuse every later update, which asks it to go back; a pin older than the release the
    group runs, which EKS refuses too (source key ``eks-update-nodegroup-release``). ``recorded``: the last update's
    record, for what this version changes and the release each group runs (:func:`running_release`; without it, a
    group without a pin is not known to run one)."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    old_groups = {g.name: g for g in old_plan.all_groups}
    problems = []
    for g in new_plan.all_groups:
        was = old_groups.get(g.name)
        if was is None or replacing(was, g):
            continue
        known = was.ami.pinned or recorded_release(recorded, was.path) is not None
        if known and release_moves(was, g, recorded):
            runs = running_release(was, recorded)
            new_key, old_key = release_key(g.ami.release_version), release_key(runs)
            if new_key is not None and old_key is not None and new_key < old_key:
                problems.append(
                    f"{pin_key(new_plan, g)}: {g.ami.release_version} is older than the release {g.path} runs, "
                    f"{runs}; EKS cannot roll a node group back to an earlier AMI release. Keep {runs} or set a "
                    "newer one"
                )
            continue
        if not g.ami.pinned or a != b or release_moves(was, g, recorded) or first_pin_unseen(was, g, recorded):
            continue  # a first pin: its nodes may run another release, which the pin moves (first_pin_notes)
        changes = template_changes(old_plan, new_plan, was, g, recorded)
        if not changes:
            continue
        pin = pin_key(new_plan, g)
        what = "; ".join(c.removeprefix("launch template: ") for c in changes)
        # an active Capacity Block's group ignores the change (TrainingNodeGroup._ignored_changes) until it is at 0
        # nodes, and then takes it without the release all the same: the refusal holds there too
        when = (
            " (on its Capacity Block, once the group is at 0 nodes: while the block is active it keeps the change "
            "for later)"
            if g.capacity_type == "CAPACITY_BLOCK"
            else ""
        )
        problems.append(
            f"{pin}: pins {g.path} to AMI release {g.ami.release_version}, and this update changes its launch "
            f"template ({what}) but not its release. EKS would then move its nodes to its newest release for {b}"
            f"{when}, and refuse every later `pulumi up`, which asks it to go back to {g.ami.release_version}. Set "
            f"{pin} to a newer release in this same update, or remove it (the group then takes EKS's newest release "
            "and keeps it)"
        )
    return problems


def first_pin_notes(
    old_plan: Plan, new_plan: Plan, was: NodeGroupPlan, g: NodeGroupPlan, recorded: Optional[Mapping[str, object]]
) -> list[str]:
    """A first pin beside a launch template change, the release the nodes run unknown (:func:`first_pin_unseen`):
    the provider sends the pin with the new template where the nodes run another release; where they run the pin
    already it sends the template alone, and EKS takes its newest release (:func:`pinned_release_problems`)."""
    if not first_pin_unseen(was, g, recorded) or old_plan.config.cluster.kubernetes_version != (
        minor := new_plan.config.cluster.kubernetes_version
    ):
        return []
    if not template_changes(old_plan, new_plan, was, g, recorded):
        return []
    return [
        f"{g.path}: if its nodes run {g.ami.release_version} already, its launch template change moves them to EKS's "
        f"newest release for {minor}, and the next `pulumi up` refuses the pin: then raise {pin_key(new_plan, g)}"
    ]


def unseen_release_notes(was: NodeGroupPlan, g: NodeGroupPlan) -> list[str]:
    """A group pinned for the first time, compared with a stack file (``plan --from``), which holds no record of the
    release its nodes run (:func:`first_pin_unseen`). ``pulumi up`` reads that release from the last update's
    record, where it holds one."""
    if not g.ami.pinned or was.ami.pinned:
        return []
    return [
        f"{g.path}: its nodes run the AMI release EKS had newest when the group was created or last updated, which "
        f"may be other than {was.ami.release_version} (the one this version of the project knows newest) and which "
        "this comparison cannot see: the pin rolls nodes on an older release, and `pulumi up` refuses it for nodes "
        "on a newer one. `pulumi preview` reads the release they run where the last update recorded it; `aws eks "
        "describe-nodegroup` shows it (releaseVersion)"
    ]
