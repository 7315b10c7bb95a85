"""The CloudWatch side of a training cluster's GPU metrics, as plain values: the Metrics Insights queries over
Container Insights (:func:`insights_query`), the idle-GPU alarms' series (:func:`idle_alarm_series`) and the dashboard
(:func:`dashboard_body`). ``FleetObservability`` (:mod:`components.observability`) makes the resources from them.
Why: docs/explanation/operations.md."""

import json
from typing import Any, Mapping, Optional, Sequence, TypedDict

from components.catalog.operations import CONSOLE_HOSTS, CONTAINER_INSIGHTS_NAMESPACE, DASHBOARD_GRID_WIDTH

#: Seconds between the points an alarm evaluates (the agent publishes every 60 s).
ALARM_PERIOD_SECONDS = 60
#: Widget size on the dashboard's 24-unit grid: two widgets per row.
WIDGET_WIDTH, WIDGET_HEIGHT = DASHBOARD_GRID_WIDTH // 2, 6


class GpuGroupSpec(TypedDict):
    """A GPU node group, as the dashboard and the idle alarm see it."""

    name: str
    """The group's name."""
    instance_types: Sequence[str]
    """Its instance types (Container Insights' per-GPU series carry InstanceType, not the group)."""
    gpus_per_node: int
    """GPUs per node (counts nodes from the GPUs that report)."""


def sql_string(value: str) -> str:
    """A Metrics Insights string literal."""
    return "'" + value.replace("'", "''") + "'"


def insights_query(
    stat: str, metric: str, dimensions: Sequence[str], where: Mapping[str, str], group_by: Optional[str] = None
) -> str:
    """``SELECT stat(metric) FROM SCHEMA(ContainerInsights, dims) WHERE k = 'v' AND ... [GROUP BY ...]``: the series of
    ``metric`` published under exactly ``dimensions``, each key equal to its value (``=`` and ``AND`` only, what the
    documented WHERE grammar shows; source key ``cloudwatch-metrics-insights-grammar``)."""
    conditions = [f"{dim} = {sql_string(value)}" for dim, value in where.items()]
    text = (
        f"SELECT {stat}({metric}) FROM SCHEMA({CONTAINER_INSIGHTS_NAMESPACE}, {', '.join(sorted(dimensions))}) "
        f"WHERE {' AND '.join(conditions)}"
    )
    return f"{text} GROUP BY {group_by}" if group_by else text


#: The dimension sets the queries read (each is one the agent publishes the metric under; tests check it).
NODE_DIMENSIONS = ("ClusterName", "InstanceId", "NodeName")
GPU_DEVICE_DIMENSIONS = ("ClusterName", "GpuDevice", "InstanceId", "InstanceType", "NodeName")
POD_DIMENSIONS = ("ClusterName", "Namespace", "PodName")


def _per_gpu_query(stat: str, cluster_name: str, instance_type: str) -> str:
    """``stat`` over the per-GPU utilization series of the cluster's nodes of one instance type."""
    where = {"ClusterName": cluster_name, "InstanceType": instance_type}
    return insights_query(stat, "node_gpu_utilization", GPU_DEVICE_DIMENSIONS, where)


def idle_alarm_query(cluster_name: str, instance_type: str) -> str:
    """The busiest GPU of the cluster's nodes of one instance type: below the threshold means every one is idle."""
    return _per_gpu_query("MAX", cluster_name, instance_type)


def gpu_count_query(cluster_name: str, instance_type: str) -> str:
    """How many GPUs of the cluster's nodes of one instance type report (a node reports each of its GPUs)."""
    return _per_gpu_query("COUNT", cluster_name, instance_type)


def idle_alarm_series(cluster_name: str, groups: Sequence[GpuGroupSpec]) -> dict[str, tuple[str, list[str]]]:
    """The idle alarms, one per instance type of the GPU groups: ``type -> (alarm name, groups)``. Container Insights'
    per-GPU series carry ClusterName, NodeName, InstanceId, InstanceType and GpuDevice and no node group (source key
    ``container-insights-metrics``), so the nodes of two groups of one type are one series: they get one alarm that
    names both groups, rather than two alarms that each claim the other's nodes. An alarm of a type only one group
    has is named after the group (and the type when the group has several)."""
    owners: dict[str, list[GpuGroupSpec]] = {}
    for g in groups:
        for t in g["instance_types"]:
            owners.setdefault(t, []).append(g)
    out: dict[str, tuple[str, list[str]]] = {}
    for t, gs in owners.items():
        names = [g["name"] for g in gs]
        if len(gs) > 1:
            out[t] = (f"{cluster_name}-{t.replace('.', '-')}-idle-gpus", names)
        elif len(gs[0]["instance_types"]) == 1:
            out[t] = (f"{cluster_name}-{names[0]}-idle-gpus", names)
        else:
            out[t] = (f"{cluster_name}-{names[0]}-{t.replace('.', '-')}-idle-gpus", names)
    return out


def _metric_widget(
    title: str, region: str, metrics: list[list[dict[str, Any]]], *, unit_label: str, stat_view: str = "timeSeries"
) -> dict[str, Any]:
    return {
        "type": "metric",
        "width": WIDGET_WIDTH,
        "height": WIDGET_HEIGHT,
        "properties": {
            "title": title,
            "region": region,
            "view": stat_view,
            "stacked": False,
            "period": ALARM_PERIOD_SECONDS,
            "metrics": metrics,
            "yAxis": {"left": {"label": unit_label, "showUnits": False}},
        },
    }


def _query(expression: str, qid: str, label: str, visible: bool = True) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"expression": expression, "id": qid, "label": label}
    if not visible:
        entry["visible"] = False
    return [entry]


def dashboard_widgets(
    cluster_name: str, region: str, gpu_groups: Sequence[GpuGroupSpec], efa: bool, job_namespace: Optional[str]
) -> list[dict[str, Any]]:
    """The dashboard's widgets, top to bottom (positions are set by :func:`dashboard_body`): the header, the
    utilization per node, EFA traffic, the node counts, then the GPU utilization of the jobs' pods. One Metrics
    Insights query per widget: a GetMetricData request (what a widget sends) takes only one (source key
    ``cloudwatch-metrics-insights-limits``); metric math over that query is fine."""
    cluster = {"ClusterName": cluster_name}
    widgets = [_header_widget(cluster_name)]
    if gpu_groups:
        widgets.append(_per_node(region, cluster, "GPU utilization per node (%)", "AVG", "node_gpu_utilization", "%"))
        widgets.append(
            _per_node(region, cluster, "GPU memory utilization per node (%)", "AVG", "node_gpu_memory_utilization", "%")
        )
    else:
        widgets.append(_per_node(region, cluster, "CPU utilization per node (%)", "AVG", "node_cpu_utilization", "%"))
    if efa:
        widgets.append(
            _per_node(region, cluster, "EFA received per node (bytes/s)", "SUM", "node_efa_rx_bytes", "bytes")
        )
        widgets.append(_per_node(region, cluster, "EFA sent per node (bytes/s)", "SUM", "node_efa_tx_bytes", "bytes"))
    widgets += _node_count_widgets(cluster_name, region, gpu_groups)
    if job_namespace and gpu_groups:
        widgets.append(_job_pods_widget(region, cluster, job_namespace))
    return widgets


def _header_widget(cluster_name: str) -> dict[str, Any]:
    """The dashboard's title, and where node health shows."""
    return {
        "type": "text",
        "width": DASHBOARD_GRID_WIDTH,
        "height": 2,
        "properties": {
            "markdown": (
                f"## {cluster_name}\n"
                "GPU and EFA metrics from Container Insights (the amazon-cloudwatch-observability add-on). Node "
                "health: `kubectl get nodes -o custom-columns=NAME:.metadata.name,"
                "GPU:.status.conditions[?(@.type==\"AcceleratedHardwareReady\")].status` "
                "and `kubectl get events -A | grep -i NvidiaXID`."
            )
        },
    }


#: The query id of each per-node metric's widget.
_PER_NODE_IDS = {
    "node_gpu_utilization": "gpu",
    "node_gpu_memory_utilization": "gpumem",
    "node_cpu_utilization": "cpu",
    "node_efa_rx_bytes": "efarx",
    "node_efa_tx_bytes": "efatx",
}


def _per_node(region: str, cluster: dict[str, str], title: str, stat: str, metric: str, unit: str) -> dict[str, Any]:
    """A widget with one line per node of ``metric``."""
    query = insights_query(stat, metric, NODE_DIMENSIONS, cluster, "NodeName")
    return _metric_widget(title, region, [_query(query, _PER_NODE_IDS[metric], "")], unit_label=unit)


def _node_count_widgets(cluster_name: str, region: str, gpu_groups: Sequence[GpuGroupSpec]) -> list[dict[str, Any]]:
    """The nodes in the cluster, then per GPU group and instance type the nodes whose GPUs all report."""
    cluster = {"ClusterName": cluster_name}
    count = insights_query("AVG", "cluster_node_count", ("ClusterName",), cluster)
    widgets = [
        _metric_widget(
            "Nodes in the cluster", region, [_query(count, "nodes", "nodes in the cluster")], unit_label="nodes"
        )
    ]
    for g in gpu_groups:
        per_node = int(g["gpus_per_node"])
        for t in g["instance_types"]:
            widgets.append(
                _metric_widget(
                    f"Nodes of {g['name']} ({t}: GPUs reporting / {per_node})",
                    region,
                    [
                        _query(gpu_count_query(cluster_name, t), "gpus", f"GPUs of {t} reporting", visible=False),
                        _query(f"gpus / {per_node}", "nodes", f"{t} nodes"),
                    ],
                    unit_label="nodes",
                )
            )
    return widgets


def _job_pods_widget(region: str, cluster: dict[str, str], job_namespace: str) -> dict[str, Any]:
    """The GPU utilization of each pod in the jobs' namespace."""
    query = insights_query(
        "AVG", "pod_gpu_utilization", POD_DIMENSIONS, {**cluster, "Namespace": job_namespace}, "PodName"
    )
    return _metric_widget(
        f"GPU utilization per job pod ({job_namespace}) (%)", region, [_query(query, "pods", "")], unit_label="%"
    )


def dashboard_body(
    cluster_name: str, region: str, gpu_groups: Sequence[GpuGroupSpec], efa: bool, job_namespace: Optional[str] = None
) -> str:
    """The dashboard body (CloudWatch's dashboard body structure, JSON with sorted keys): widgets laid out two per
    row on the 24-unit grid."""
    placed = []
    x = y = row_height = 0
    for w in dashboard_widgets(cluster_name, region, gpu_groups, efa, job_namespace):
        if x + w["width"] > DASHBOARD_GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        placed.append({**w, "x": x, "y": y})
        x += w["width"]
        row_height = max(row_height, w["height"])
    return json.dumps({"widgets": placed}, sort_keys=True)


def dashboard_url(partition: str, region: str, name: str) -> str:
    """Where the dashboard opens in the console."""
    host = CONSOLE_HOSTS.get(partition, CONSOLE_HOSTS["aws"])
    return f"https://{host}/cloudwatch/home?region={region}#dashboards/dashboard/{name}"
