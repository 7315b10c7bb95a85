"""The pre-pulls of the stack's images onto their nodes (:mod:`stacks.plan.prepull` decides which), registered
as soon as the namespace, the image and the group's nodes exist: beside the shared volume and the Jobs ``pulumi up``
waits for, not behind them."""

from typing import Mapping, Optional

import pulumi

from components.naming import k8s_name
from components.workloads import ImagePrePull, ImagePrePullArgs
from stacks.plan import Plan, jobs_waiting_for
from stacks.plan.prepull import prepulls


def build_prepulls(
    plan: Plan,
    *,
    namespace: pulumi.Input[str],
    image_uris: Mapping[str, pulumi.Input[str]],
    opts: pulumi.ResourceOptions,
    node_groups: Optional[Mapping[str, pulumi.Input[str]]] = None,
    waiting_groups: frozenset[str] = frozenset(),
) -> dict[str, ImagePrePull]:
    """One :class:`~components.workloads.ImagePrePull` per pre-pull of the plan, by its name; each created once its
    node group exists when ``node_groups`` (group -> the EKS node group's name) has it.
    Groups in ``waiting_groups`` (a Capacity Block not started) and the jobs on them are left out."""
    out: dict[str, ImagePrePull] = {}
    deferred = jobs_waiting_for(plan, set(waiting_groups))
    for p in prepulls(plan, deferred):
        if p.group in waiting_groups:
            continue
        args: ImagePrePullArgs = {
            "namespace": namespace,
            "image": image_uris[p.image],
            "command": list(p.command),
            "node_selector": dict(p.node_selector),
            "tolerations": list(p.tolerations),
            "daemon_set_name": k8s_name("prepull", p.name),
        }
        group = (node_groups or {}).get(p.group)
        if group is not None:
            args["node_group"] = group
        out[p.name] = ImagePrePull(f"{plan.config.cluster_name}-prepull-{p.name}", args, opts=opts)
    return out
