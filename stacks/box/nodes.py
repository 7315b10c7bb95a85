"""The box's simulated nodes, made from a stack's plan: one kwok node per node of every group, at the size its jobs
scale it to (:func:`initial_size`).

:func:`group_nodes` gives each node what the real one would have: the group's labels and taints, the labels EKS and
the AWS cloud provider add, and its type's allocatable resources (:func:`components.nodeplan.node_allocatable`).
Devices appear only once a device plugin registers them (:mod:`stacks.box.devices`). A type whose network topology
EC2 describes gets the topology labels (:func:`network_labels`), in a simulated layout of :data:`BLOCK_NODES` and
:data:`LAYER_FANOUT`.

Why, with the sources: docs/explanation/box.md, "Nodes from the plan"."""

from __future__ import annotations

import json
from typing import Any, Optional

from components.catalog import network_topology
from components.nodeplan import node_allocatable
from stacks.config.base import ZONE_ID_RE
from stacks.plan import ZONE_ID_LABEL, ZONE_LABEL, NodeGroupPlan, Plan

#: The annotation kwokctl's kwok controller selects the nodes it manages by (kwokctl's default
#: ``--manage-nodes-with-annotation-selector``; https://kwok.sigs.k8s.io/docs/user/kwok-manage-nodes-and-pods/).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Node annotation: the devices the node's hardware has (JSON: resource -> count), which its device plugins register
#: (:mod:`stacks.box.devices`): the group's GPUs, the EFA interfaces its launch template attaches.
DEVICES_ANNOTATION = "box.eks-training/devices"
#: Nodes per lowest-layer network node, and network nodes of a layer per network node of the layer above (a
#: simulation choice: docs/explanation/box.md, "Nodes from the plan").
BLOCK_NODES = 32
LAYER_FANOUT = 4
#: Zone suffixes an unpinned group's nodes spread over (a managed node group balances its nodes over its subnets'
#: zones).
SPREAD_ZONES = ("a", "b")


#: Direction words of region names and their letters in zone IDs (us-east-1 -> use1, ap-southeast-2 -> apse2).
_DIRECTIONS = {"north": "n", "south": "s", "east": "e", "west": "w", "central": "c"}


def zone_id_prefix(region: str) -> str:
    """The prefix of ``region``'s zone IDs (``use1`` for us-east-1, ``apse2`` for ap-southeast-2, ``cnnw1`` for
    cn-northwest-1; https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html)."""
    country, *words, number = region.split("-")
    letters = ""
    for word in words:
        for direction, letter in _DIRECTIONS.items():
            word = word.replace(direction, letter)
        letters += word
    return f"{country}{letters}{number}"


def node_zone(zone: str, region: str) -> dict[str, str]:
    """The zone labels of a node in ``zone`` (a name or an ID, as the config gives it): a real node carries both its
    zone's name (``topology.kubernetes.io/zone``) and its ID (``topology.k8s.aws/zone-id``, the AWS cloud provider's).
    Which name goes with which ID differs per account: the box pairs ``<region><letter>`` with ``<prefix>-az<n>``,
    letter a with az1 (a simulation choice)."""
    if ZONE_ID_RE.match(zone):
        number = int(zone.rsplit("az", 1)[1])
        return {ZONE_LABEL: f"{region}{chr(ord('a') + (number - 1) % 26)}", ZONE_ID_LABEL: zone}
    return {ZONE_LABEL: zone, ZONE_ID_LABEL: f"{zone_id_prefix(region)}-az{ord(zone[-1]) - ord('a') + 1}"}


def node_name(group: str, index: int) -> str:
    return f"{group}-{index}"


def network_labels(group: str, instance_type: str, region: str, index: int) -> dict[str, str]:
    """The network-topology labels of node ``index`` of ``group`` (none for a type or region EC2 describes no topology
    of): its block is ``index // BLOCK_NODES``, each layer above groups :data:`LAYER_FANOUT` of the one below."""
    network = network_topology(instance_type, region)
    if network is None:
        return {}
    out = {}
    for depth, label in enumerate(reversed(network.labels)):  # the lowest layer first
        domain = index // (BLOCK_NODES * LAYER_FANOUT**depth)
        out[label] = f"nn-{group}-l{network.layers - depth}-{domain}"
    return out


def group_nodes(group: NodeGroupPlan, region: str, count: Optional[int] = None, first: int = 0) -> list[dict[str, Any]]:
    """``count`` (default: the group's desired size) Node objects of ``group``, numbered from ``first``."""
    facts = group.types[0]
    alloc = node_allocatable(group.profile.instance, group.efa)
    resources = {
        "cpu": f"{alloc.cpu_millis}m",
        "memory": f"{alloc.memory_mib}Mi",
        "pods": str(alloc.pods),
        "ephemeral-storage": f"{group.disk_size_gib}Gi",
    }
    if alloc.hugepages_2mi_mib:
        resources["hugepages-2Mi"] = f"{alloc.hugepages_2mi_mib}Mi"
    devices = {}
    if group.profile.gpus:
        devices["nvidia.com/gpu"] = group.profile.gpus
    if group.efa is not None:
        devices["vpc.amazonaws.com/efa"] = group.efa.interfaces
    taints = [{"key": t["key"], "value": t["value"], "effect": t["effect"]} for t in group.profile.taints]
    nodes = []
    for i in range(first, first + (group.desired_size if count is None else count)):
        name = node_name(group.name, i)
        zone = group.zone or f"{region}{SPREAD_ZONES[i % len(SPREAD_ZONES)]}"
        labels = {
            **group.profile.labels,
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "arm64" if facts.arch == "arm64" else "amd64",
            "node.kubernetes.io/instance-type": facts.name,
            "topology.kubernetes.io/region": region,
            **node_zone(zone, region),
            "eks.amazonaws.com/nodegroup": group.name,
            "eks.amazonaws.com/capacityType": group.capacity_type,
            "type": "kwok",
            **network_labels(group.name, facts.name, region, i),
        }
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": labels,
                    "annotations": {KWOK_NODE_ANNOTATION: "fake", DEVICES_ANNOTATION: json.dumps(devices)},
                },
                "spec": {"taints": taints} if taints else {},
                "status": {"capacity": dict(resources), "allocatable": dict(resources)},
            }
        )
    return nodes


def initial_size(plan: Plan, group: NodeGroupPlan) -> int:
    """The nodes ``group`` has when the box comes up: a group Kueue provisions nodes for, its ``minSize`` (the
    autoscaler's stand-in adds the rest); the system group, its ``desiredSize`` or the nodes its widest job's pods
    need (one each); any other, the most the cluster autoscaler could scale it to for its jobs: its ``desiredSize`` or
    every node its jobs ask, up to its ``maxSize``. Kueue may admit jobs of later steps beside earlier ones (their pods
    wait for those on nodes), and the box has no autoscaler to add a node for them."""
    a = plan.admission
    if a is not None and any(f.provisioned and f.group == group.name for f in a.flavors):
        return group.min_size
    if group.name == plan.system.name:  # its jobs' pods share a node, each job's on nodes of their own
        widest = max((job.nodes for job in plan.jobs.values() if job.group.name == group.name), default=0)
        return min(group.max_size, max(group.desired_size, widest))
    asked = sum(job.nodes for job in plan.jobs.values() if job.group.name == group.name)
    return min(group.max_size, max(group.desired_size, asked))


def plan_nodes(plan: Plan, region: str, sizes: Optional[dict[str, int]] = None) -> list[dict[str, Any]]:
    """The Node objects of every group of ``plan`` (``sizes`` overrides a group's node count)."""
    sizes = sizes or {}
    return [n for g in plan.all_groups for n in group_nodes(g, region, sizes.get(g.name, initial_size(plan, g)))]
