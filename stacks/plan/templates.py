"""Each node group's launch template as the program registers it, and its digest, which every update records.

The program gives :class:`components.nodegroup.TrainingNodeGroup` the group's plan; the component builds its launch
template with :func:`components.nodeplan.launch_template_data`. :func:`launch_template` calls the same function with
the same values, so the plan knows the template's content offline. A change of that content is a new template version,
and EKS rolls the group's nodes. The record (:func:`template_digests`, in the output ``deployedVersions``) lets the
next ``pulumi up`` see a change that only a new version of this project makes, such as a new node setup script.
"""

import hashlib
import json
from typing import Any, Mapping, Optional

from components.nodeplan import host_setup_user_data, launch_template_data
from stacks.plan.model import NodeGroupPlan, Plan
from stacks.plan.record import recorded_entry
from stacks.plan.tags import stack_tags

#: How the record names a group's launch template digest: ``<the group's config path>.launchTemplate``.
TEMPLATE_SUFFIX = ".launchTemplate"


def launch_template(plan: Plan, g: NodeGroupPlan) -> dict[str, Any]:
    """What group ``g``'s launch template holds, as the program registers it (the component is named
    ``<clusterName>-<group>``, the system group's ``<clusterName>-system``)."""
    return launch_template_data(
        f"{plan.config.cluster_name}-{g.name}",
        disk_size_gib=g.disk_size_gib,
        tags=stack_tags(plan.config),
        efa_interfaces=g.profile.efa_interfaces,
        capacity_type=g.capacity_type,
        reservation=g.capacity_reservation_id,
        instance_type=g.instance_types[0],
        user_data=host_setup_user_data(plan.host_requirements(g.name)),
    )


def template_digest(plan: Plan, g: NodeGroupPlan) -> str:
    """A short digest of :func:`launch_template`: equal digests, the same template version."""
    return digest(launch_template(plan, g))


def digest(data: Mapping[str, Any]) -> str:
    """A short digest of a launch template's settings, less the unset ones (which the template does not hold): a
    field this project adds unset changes no digest, so it names no roll."""
    text = json.dumps(_set(data), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _set(value: Any) -> Any:
    """``value`` without the ``None`` entries of its mappings, at every depth."""
    if isinstance(value, Mapping):
        return {k: _set(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_set(v) for v in value]
    return value


def template_digests(plan: Plan) -> dict[str, str]:
    """Each group's :func:`template_digest`, as the record names it (:data:`TEMPLATE_SUFFIX`)."""
    return {g.path + TEMPLATE_SUFFIX: template_digest(plan, g) for g in plan.all_groups}


def recorded_digest(recorded: Optional[Mapping[str, object]], g: NodeGroupPlan) -> Optional[str]:
    """The digest of ``g``'s launch template in the last update's record; ``None`` where it holds none."""
    return recorded_entry(recorded, g.path + TEMPLATE_SUFFIX)
