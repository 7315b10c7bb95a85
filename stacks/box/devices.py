"""Device plugins in the box: stand-ins for the charts' DaemonSets, and the kubelet's registration of their devices.

A real node reports ``nvidia.com/gpu`` or ``vpc.amazonaws.com/efa`` only once the device plugin running on it registers
with its kubelet (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/). The box
renders the charts it has the source of with ``helm template`` (:mod:`stacks.box.charts`); the two device plugins'
sources are not at hand (:data:`stacks.box.charts.NOT_AT_HAND`: neither the Go module proxy nor their Helm
repositories serve them to this project), so the box makes each chart's DaemonSet scheduling as the chart's template
renders it from the values the stack passes (nodeSelector, affinity, tolerations, and the EFA chart's own
instance-type affinity), and registers a node's devices once a plugin pod runs there. A plugin that cannot land on a
node (a missing toleration, a label the node lacks, an instance type the chart does not list) leaves that node without
the devices, and a job needing them Pending, as on EKS. A chart whose source the box gets is rendered, and its
stand-in here goes (``tests/unit/test_box_charts.py`` keeps the two lists apart)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from components.catalog import EFA_CHART_INSTANCE_TYPES
from stacks.box.cluster import Box
from stacks.box.nodes import DEVICES_ANNOTATION
from stacks.box.poller import Poller

#: Pod label of the stand-ins: the extended resource their plugin registers.
PLUGIN_LABEL = "box.eks-training/device-plugin"


@dataclass(frozen=True)
class PluginChart:
    resource: str
    version: str
    render: Callable[[Mapping[str, Any]], dict[str, Any]]
    """values -> the DaemonSet pod spec's scheduling fields, as the chart's template renders them."""


def _nvidia(values: Mapping[str, Any]) -> dict[str, Any]:
    # deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml (v0.20.0): nodeSelector, affinity and
    # tolerations are the values' (https://github.com/NVIDIA/k8s-device-plugin/tree/v0.20.0/deployments/helm).
    spec: dict[str, Any] = {"tolerations": list(values.get("tolerations") or [])}
    if values.get("nodeSelector"):
        spec["nodeSelector"] = dict(values["nodeSelector"])
    if values.get("affinity"):
        spec["affinity"] = values["affinity"]
    if values.get("priorityClassName"):
        spec["priorityClassName"] = values["priorityClassName"]
    return spec


def _efa(values: Mapping[str, Any]) -> dict[str, Any]:
    # The EFA chart's template (stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml): CriticalAddonsOnly plus
    # the values' tolerations, the values' nodeSelector, and one affinity term per key of the values'
    # supportedInstanceLabels, each "In" its values (the chart's default: EFA_CHART_INSTANCE_TYPES), the last term
    # also keeping off EKS Auto Mode nodes (compute-type NotIn auto).
    labels = values.get("supportedInstanceLabels") or {
        "keys": ["node.kubernetes.io/instance-type"],
        "values": list(EFA_CHART_INSTANCE_TYPES),
    }
    terms: list[dict[str, Any]] = [
        {"matchExpressions": [{"key": k, "operator": "In", "values": list(labels["values"])}]} for k in labels["keys"]
    ]
    terms[-1]["matchExpressions"].append(
        {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]}
    )
    spec: dict[str, Any] = {
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *(values.get("tolerations") or [])],
        "priorityClassName": "system-node-critical",
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}},
    }
    if values.get("nodeSelector"):
        spec["nodeSelector"] = dict(values["nodeSelector"])
    return spec


#: Charts the box stands in for, by chart name.
PLUGIN_CHARTS: Mapping[str, PluginChart] = {
    "nvidia-device-plugin": PluginChart("nvidia.com/gpu", "0.20.0", _nvidia),
    "aws-efa-k8s-device-plugin": PluginChart("vpc.amazonaws.com/efa", "v0.5.30", _efa),
}


def stand_ins(releases: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The DaemonSets of the device-plugin Helm releases among ``releases`` (a Release's inputs: chart, version,
    namespace, values); other charts are not the box's concern."""
    out = []
    for rel in releases:
        chart = PLUGIN_CHARTS.get(rel.get("chart", ""))
        if chart is None:
            continue
        if rel.get("version") != chart.version:
            raise ValueError(
                f"the box stands in for {rel['chart']} {chart.version}, the stack installs "
                f"{rel.get('version')}: check the chart's template and update stacks/box/devices.py"
            )
        name = rel["chart"]
        labels = {"app": name, PLUGIN_LABEL: chart.resource.replace("/", "_")}
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": name, "namespace": rel.get("namespace") or "default"},
                "spec": {
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            **chart.render(rel.get("values") or {}),
                            "containers": [{"name": name, "image": f"box.invalid/{name}:{chart.version}"}],
                        },
                    },
                },
            }
        )
    return out


def register_devices(box: Box) -> list[tuple[str, str]]:
    """One pass of the kubelets: for each running plugin pod, its node reports the plugin's devices (from the node's
    :data:`DEVICES_ANNOTATION`). Returns the (node, resource) pairs registered in this pass."""
    pods = box.get("pods", "-A", "-l", PLUGIN_LABEL)["items"]
    running = {
        (p["spec"].get("nodeName"), p["metadata"]["labels"][PLUGIN_LABEL].replace("_", "/"))
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and p["spec"].get("nodeName")
    }
    if not running:
        return []
    nodes = {n["metadata"]["name"]: n for n in box.get("nodes")["items"]}
    done, patches = [], []
    by_node: dict[str, list[str]] = {}
    for node_name, resource in sorted(running):
        by_node.setdefault(node_name, []).append(resource)
    for node_name, resources in by_node.items():
        node = nodes.get(node_name)
        if node is None:
            continue
        devices = json.loads((node["metadata"].get("annotations") or {}).get(DEVICES_ANNOTATION, "{}"))
        # Every device of every plugin running there, in one apply: a server-side apply by this field manager owns
        # exactly what it sends (a resource left out would be removed).
        counts = {r: str(devices[r]) for r in resources if devices.get(r)}  # no count: the plugin finds no device
        new = [r for r in counts if r not in (node["status"].get("allocatable") or {})]
        if not new:
            continue
        patches.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node_name},
                "status": {"capacity": counts, "allocatable": counts},
            }
        )
        done += [(node_name, r) for r in new]
    if patches:  # the status of each node that registers a device in this pass, server-side applied
        box.server_side_apply(patches, "box-device-plugins", subresource="status")
    return done


class Registrar(Poller):
    """:func:`register_devices` every ``interval_s`` in a thread, while a box runs (``with Registrar(box): ...``)."""

    def __init__(self, box: Box, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.box = box
        self.registered: list[tuple[str, str]] = []

    def poll(self) -> None:
        self.registered += register_devices(self.box)
