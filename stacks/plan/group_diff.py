"""What differs between a running node group and its new plan that EKS cannot take in place (a new group) or that
makes a new launch template version (its nodes roll): the comparisons :mod:`stacks.plan.group_changes` and
:mod:`stacks.plan.ami_pins` read."""

from typing import Any, Mapping, Optional

from stacks.plan import NodeGroupPlan, Plan
from stacks.plan.templates import recorded_digest, template_digest


def template_settings(plan: Plan, g: NodeGroupPlan) -> dict[str, Any]:
    """The settings of a group that its launch template carries (:func:`stacks.plan.templates.launch_template`): a
    change is a new version (source key ``tf-launch-template-version``), and the nodes roll."""
    return {
        "root volume size": g.disk_size_gib,
        "EFA interfaces": g.profile.efa_interfaces,
        "capacity reservation": g.capacity_reservation_id,
        "host setup": [r.name for r in plan.host_requirements(g.name)],
        "instance tags": ", ".join(f"{k}={v}" for k, v in sorted(plan.config.tags.items())) or "none",
    }


def template_changes(
    old_plan: Plan, new_plan: Plan, old: NodeGroupPlan, new: NodeGroupPlan, recorded: Optional[Mapping[str, object]]
) -> list[str]:
    """What changes a group's launch template: its settings in the stack file, else this version of the project, where
    the last update's record (``recorded``) holds another digest than the recorded configuration has under it."""
    lt_old, lt_new = template_settings(old_plan, old), template_settings(new_plan, new)
    out = [f"launch template: {k} {lt_old[k]} -> {lt_new[k]}" for k in lt_old if lt_old[k] != lt_new[k]]
    deployed = recorded_digest(recorded, new)
    if not out and deployed not in (None, template_digest(old_plan, old), template_digest(new_plan, new)):
        out.append("launch template: this version of the project changes it")
    return out


def replacing(old: NodeGroupPlan, new: NodeGroupPlan) -> list[str]:
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
