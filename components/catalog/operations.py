"""Facts about running a GPU fleet on EKS: node health (the node monitoring agent and node auto repair), the Amazon
CloudWatch Observability add-on (Container Insights with enhanced observability) and the metrics it publishes, and the
CloudWatch limits the dashboard and the idle-GPU alarms live within.

Each table names its source key (:mod:`components.catalog.sources`).
"""

from dataclasses import dataclass
from typing import Mapping

# --- node health -------------------------------------------------------------------------------------------------
#: The EKS managed add-on that reads node logs and sets node conditions (AcceleratedHardwareReady, KernelReady,
#: NetworkingReady, StorageReady, ContainerRuntimeReady) that node auto repair acts on (source key ``eks-node-health``).
NODE_MONITORING_ADDON = "eks-node-monitoring-agent"
#: Tolerations of the agent's DaemonSet when the add-on is given no configuration: every taint (the chart's
#: ``nodeAgent.tolerations``; source key ``eks-node-monitoring-agent-chart``).
NODE_MONITORING_DEFAULT_TOLERATIONS: tuple[Mapping[str, str], ...] = ({"operator": "Exists"},)
#: The add-on's second DaemonSet, ``dcgm-server`` (the DCGM host engine, ``nv-hostengine`` on hostPort 5555, on NVIDIA
#: instance types only), tolerates only ``dcgmAgent.tolerations``, which default to none: on a tainted GPU node (every
#: GPU group here carries ``nvidia.com/gpu=true:NoSchedule``) it never runs, the agent cannot reach DCGM and reports
#: ``DCGMError`` (severity Fatal) on ``AcceleratedHardwareReady``, the condition node repair reboots or replaces a node
#: for (source keys ``eks-node-monitoring-agent-chart``, ``eks-node-monitoring-agent-dcgm``).
NODE_MONITORING_DCGM_SERVER = "dcgm-server"
#: The agent's configuration values: the host engine goes wherever the agent goes (the agent's own tolerations), so
#: on every node the agent watches, the DCGM it reads runs too (source key ``eks-node-monitoring-agent-dcgm``).
NODE_MONITORING_CONFIGURATION: Mapping[str, Mapping[str, object]] = {
    "dcgmAgent": {"tolerations": [dict(t) for t in NODE_MONITORING_DEFAULT_TOLERATIONS]},
}
#: The add-on's configuration schema (``charts/configuration.schema.json``; ``additionalProperties: false`` at each
#: level): top-level keys and the keys each takes (source key ``eks-node-monitoring-agent-dcgm``).
NODE_MONITORING_CONFIG_SCHEMA: Mapping[str, frozenset[str]] = {
    "global": frozenset({"podLabels", "podAnnotations"}),
    "nodeAgent": frozenset(
        {
            "affinity",
            "additionalArgs",
            "podAnnotations",
            "podLabels",
            "nodeSelector",
            "priorityClassName",
            "probePort",
            "resources",
            "resizePolicy",
            "tolerations",
            "monitors",
        }
    ),
    "dcgmAgent": frozenset(
        {
            "affinity",
            "podAnnotations",
            "podLabels",
            "nodeSelector",
            "priorityClassName",
            "resources",
            "resizePolicy",
            "tolerations",
        }
    ),
    "extraObjects": frozenset(),
}
#: Node auto repair is on by default on GPU groups (a group turns it off with ``nodeGroups.<name>.nodeRepair.enabled:
#: false``), as AWS's own EKS ML patterns run it: a GPU that throws a critical XID, double-bit or NVLink error is
#: rebooted or replaced after 10 minutes instead of failing every job that lands on it (source key ``eks-node-repair``).
NODE_REPAIR_GPU_DEFAULT = True


@dataclass(frozen=True, kw_only=True)
class RepairOverride:
    """One entry of a managed node group's ``nodeRepairConfigOverrides``: what repair does when the node monitoring
    agent reports ``condition`` with ``reason`` for ``wait_minutes`` (EKS requires all four; source key
    ``eks-node-repair``)."""

    condition: str
    reason: str
    wait_minutes: int
    action: str
    why: str


#: The repair actions EKS takes (``repairAction``; source key ``eks-node-repair``).
REPAIR_ACTIONS = ("Replace", "Reboot", "NoAction")
#: What repair of a GPU group must never act on. With the metrics on, a GPU node runs two DCGM host engines: the
#: agent's ``dcgm-server`` (``nv-hostengine`` on port 5555, which the agent reads) and the embedded engine of the
#: CloudWatch Observability add-on's DCGM exporter (which also reads the profiling field
#: DCGM_FI_PROF_PIPE_TENSOR_ACTIVE); neither add-on can make one use the other's engine (source keys
#: ``eks-node-monitoring-agent-dcgm``, ``cloudwatch-observability-dcgm-exporter``). AWS tracks reports of the agent
#: marking such nodes ``AcceleratedHardwareReady=False`` (source key ``dcgm-one-host-engine``), and a lost connection
#: to an engine latches ``DCGMError`` until the agent's pod restarts (source key ``nma-dcgm-error-latched``). That
#: reason is not a GPU fault: EKS's table gives it no repair action (source key ``eks-node-health-nma``), and the
#: override says so in the node group itself, so a change of EKS's default cannot turn the two engines into a loop of
#: node replacements killing the jobs on them. Real GPU faults (``NvidiaXID<code>Error``, ``NvidiaDoubleBitError``,
#: ``NvidiaNVLinkError``) keep EKS's actions.
NODE_REPAIR_GPU_OVERRIDES: tuple[RepairOverride, ...] = (
    RepairOverride(
        condition="AcceleratedHardwareReady",
        reason="DCGMError",
        wait_minutes=10,
        action="NoAction",
        why="the agent lost (or never reached) its DCGM host engine: the engine, not the GPU, failed",
    ),
)


@dataclass(frozen=True, kw_only=True)
class RepairCondition:
    """A node condition node auto repair acts on, after how long and how (source key ``eks-node-repair``)."""

    condition: str
    repair_after_minutes: int
    actions: str
    detects: str


#: What node auto repair of a managed node group does by default (source key ``eks-node-repair``).
NODE_REPAIR_CONDITIONS: tuple[RepairCondition, ...] = (
    RepairCondition(
        condition="AcceleratedHardwareReady",
        repair_after_minutes=10,
        actions="Replace or Reboot",
        detects="GPU faults: NVIDIA XID errors (e.g. 48 double-bit ECC, 74 NVLink, 79 fallen off the bus), "
        "double-bit errors, NVLink errors",
    ),
    RepairCondition(
        condition="NetworkingReady",
        repair_after_minutes=30,
        actions="Replace",
        detects="interfaces down or not running, the VPC CNI (IPAMD) not running or not ready",
    ),
    RepairCondition(
        condition="KernelReady",
        repair_after_minutes=30,
        actions="Replace",
        detects="fork/exec failing for want of PIDs or memory",
    ),
    RepairCondition(
        condition="StorageReady",
        repair_after_minutes=30,
        actions="Replace",
        detects="disk, file system and I/O failures",
    ),
    RepairCondition(
        condition="ContainerRuntimeReady",
        repair_after_minutes=30,
        actions="Replace",
        detects="containerd failing, pods stuck terminating",
    ),
    RepairCondition(
        condition="Ready",
        repair_after_minutes=30,
        actions="Replace",
        detects="the kubelet stops reporting (a hung or lost node)",
    ),
)
#: Managed node groups stop repairing (repairs under way continue) when a group of more than this many nodes has more
#: than :data:`NODE_REPAIR_HALT_PERCENT` percent unhealthy, or after an ARC zonal shift (source key
#: ``eks-node-repair``).
NODE_REPAIR_HALT_NODES = 5
NODE_REPAIR_HALT_PERCENT = 20
#: The percentage settings of ``nodeRepairConfig`` (``maxUnhealthyNodeThresholdPercentage``,
#: ``maxParallelNodesRepairedPercentage``) range over 0-100; a count and a percentage of the same setting exclude
#: each other (source key ``eks-node-repair``).
NODE_REPAIR_PERCENT_RANGE = (0, 100)

# --- Container Insights --------------------------------------------------------------------------------------------
#: The EKS managed add-on that installs the CloudWatch agent (with the DCGM exporter on NVIDIA nodes and EFA metrics),
#: Fluent Bit and the agent's operator (source key ``cloudwatch-observability-addon``).
OBSERVABILITY_ADDON = "amazon-cloudwatch-observability"
#: Where the agent runs and the service account its Pod Identity association names (source key
#: ``cloudwatch-observability-addon``).
OBSERVABILITY_NAMESPACE = "amazon-cloudwatch"
OBSERVABILITY_SERVICE_ACCOUNT = "cloudwatch-agent"
#: The AWS managed policy the add-on's documentation gives the agent's role: PutMetricData (with the
#: ``cloudwatch:namespace`` it writes), the Logs calls Fluent Bit and EMF need, EC2 Describe* and the SSM parameter
#: ``AmazonCloudWatch-*`` (source key ``cloudwatch-agent-server-policy``).
OBSERVABILITY_POLICY = "CloudWatchAgentServerPolicy"
#: The add-on's configuration values this program sets, as the chart's values (``aws eks describe-addon-configuration``
#: prints the chart's values schema; the chart has no ``values.schema.json``): key -> its type, or the keys a mapping
#: takes. ``tolerations`` is a list of Kubernetes Tolerations applied to the agent's DaemonSets (agent, Fluent Bit, DCGM
#: exporter, ...), defaulting to ``[{operator: Exists}]``; ``agent.config`` is the CloudWatch agent's JSON
#: configuration, replacing the chart's default one (``agent.config`` is in every chart version; source key
#: ``cloudwatch-observability-chart``).
OBSERVABILITY_CONFIG_SCHEMA: Mapping[str, object] = {"tolerations": list, "agent": {"config": dict}}
#: The chart's default agent configuration turns Application Signals on: ``logs.metrics_collected.application_signals``
#: and ``traces.traces_collected.application_signals`` (the agent receives metrics and traces of instrumented
#: workloads), and the operator then auto-instruments Java, Python, .NET and Node.js workloads (``monitorAllServices``;
#: billed per request, traces to X-Ray). A configuration of the agent without either section turns it off: the agent
#: then collects Container Insights only, and the chart sets the operator's ``monitorAllServices`` to false when the
#: agent's configuration has no ``application_signals`` (``manager.modify-auto-monitor-config`` in
#: ``templates/_helpers.tpl``; before that helper, from chart 4.0 to 4.7, ``monitorAllServices`` defaulted to false).
#: The chart's newer switch ``applicationSignals.enabled`` (chart 6.2.0 and later) is not used: EKS's default add-on
#: version for a Kubernetes version may predate it, and an add-on rejects keys its schema lacks (source key
#: ``cloudwatch-observability-chart``).
APPLICATION_SIGNALS_SECTIONS: tuple[tuple[str, str], ...] = (
    ("logs", "metrics_collected"),
    ("traces", "traces_collected"),
)
#: The agent's configuration without Application Signals: Container Insights with enhanced observability (GPU and EFA
#: metrics; ``accelerated_compute_metrics`` defaults to true), the chart's default minus Application Signals (the
#: chart fills in the region and the cluster name; source key ``cloudwatch-observability-chart``).
AGENT_CONFIG_WITHOUT_APPLICATION_SIGNALS: Mapping[str, object] = {
    "logs": {"metrics_collected": {"kubernetes": {"enhanced_container_insights": True}}},
}
#: With Application Signals on, the agent's role also needs the AWS managed policy the add-on's guide adds for it
#: (X-Ray traces; source key ``cloudwatch-observability-addon``).
APPLICATION_SIGNALS_POLICY = "AWSXrayWriteOnlyAccess"

#: The log groups the add-on writes to, ``/aws/containerinsights/<cluster>/<suffix>``: Fluent Bit's ``application``,
#: ``dataplane`` and ``host`` (``auto_create_group true``, no retention; source key ``cloudwatch-observability-chart``)
#: and the agent's EMF ``performance`` group (source key ``container-insights-log-groups``). Created by the stack with
#: a retention, before the add-on, so ``pulumi destroy`` removes them and they do not grow forever.
CONTAINER_INSIGHTS_LOG_GROUPS = ("application", "dataplane", "host", "performance")


def container_insights_log_group(cluster_name: str, suffix: str) -> str:
    """The name of one of :data:`CONTAINER_INSIGHTS_LOG_GROUPS` for a cluster."""
    return f"/aws/containerinsights/{cluster_name}/{suffix}"


#: The CloudWatch namespace Container Insights publishes to (source key ``container-insights-metrics``).
CONTAINER_INSIGHTS_NAMESPACE = "ContainerInsights"


@dataclass(frozen=True, kw_only=True)
class PublishedMetric:
    """A metric the CloudWatch agent publishes with enhanced observability and accelerated-compute metrics on, and the
    dimension sets it publishes it under (source key ``container-insights-metrics``)."""

    name: str
    dimension_sets: tuple[frozenset[str], ...]


def _metrics(names: str, *dimension_sets: tuple[str, ...]) -> dict[str, PublishedMetric]:
    sets = tuple(frozenset(d) for d in dimension_sets)
    return {n: PublishedMetric(name=n, dimension_sets=sets) for n in names.split()}


_NODE_DEVICE_GPU = ("ClusterName", "NodeName", "InstanceId", "InstanceType", "GpuDevice")
_NODE_DEVICE_EFA = ("ClusterName", "NodeName", "InstanceId", "InstanceType", "NetworkInterfaceId")
#: Metrics the dashboard and alarms may plot, by name, with the dimension sets the agent emits them under (the agent's
#: EMF metric declarations for Kubernetes; source key ``container-insights-metrics``).
CONTAINER_INSIGHTS_METRICS: Mapping[str, PublishedMetric] = {
    **_metrics("cluster_node_count cluster_failed_node_count", ("ClusterName",)),
    **_metrics(
        "node_cpu_utilization node_memory_utilization node_gpu_limit node_efa_limit",
        ("NodeName", "InstanceId", "ClusterName"),
        ("ClusterName",),
    ),
    **_metrics(
        "node_gpu_utilization node_gpu_memory_utilization node_gpu_memory_used node_gpu_power_draw "
        "node_gpu_temperature node_gpu_tensor_core_utilization",
        ("ClusterName",),
        ("ClusterName", "NodeName", "InstanceId"),
        _NODE_DEVICE_GPU,
    ),
    **_metrics(
        "pod_gpu_utilization pod_gpu_memory_utilization",
        ("ClusterName",),
        ("ClusterName", "Namespace"),
        ("ClusterName", "Namespace", "Service"),
        ("ClusterName", "Namespace", "PodName"),
        ("ClusterName", "Namespace", "PodName", "FullPodName"),
        ("ClusterName", "Namespace", "PodName", "FullPodName", "GpuDevice"),
    ),
    **_metrics(
        "node_efa_rx_bytes node_efa_tx_bytes node_efa_rx_dropped node_efa_rdma_read_bytes "
        "node_efa_rdma_write_bytes node_efa_retrans_pkts node_efa_impaired_remote_conn_events "
        "node_efa_unresponsive_remote_events",
        ("ClusterName",),
        ("ClusterName", "NodeName", "InstanceId"),
        _NODE_DEVICE_EFA,
    ),
}

#: The metrics pipeline's alarm: ``cluster_node_count`` (the agent publishes it for the cluster while it runs; the
#: system group, minSize >= 1, always has nodes) below 1, or missing, for this many periods of 5 minutes. Missing data
#: counts as breaching (TreatMissingData ``breaching``, source key ``cloudwatch-alarm-evaluation``): no data is the
#: failure watched for.
PIPELINE_ALARM_PERIOD_SECONDS = 300
PIPELINE_ALARM_PERIODS = 3

# --- CloudWatch limits ---------------------------------------------------------------------------------------------
#: An alarm's period times its evaluation periods may not exceed one day (source key ``cloudwatch-alarm-evaluation``).
ALARM_MAX_EVALUATION_SECONDS = 24 * 3600
#: How far back a Metrics Insights query reads, which bounds what an alarm on one can evaluate: the most recent three
#: hours (source key ``cloudwatch-metrics-insights-limits``; later documentation allows more, three hours holds for
#: both).
METRICS_INSIGHTS_RANGE_SECONDS = 3 * 3600
#: Metrics Insights queries a GetMetricData request may hold: one (a widget or an alarm sends one request; metric math
#: over the query is fine; source key ``cloudwatch-metrics-insights-limits``).
METRICS_INSIGHTS_QUERIES_PER_REQUEST = 1
#: The WHERE operators used here, the ones the documented grammar shows: conditions ``key = 'value'`` joined by
#: ``AND`` (source key ``cloudwatch-metrics-insights-grammar``).
METRICS_INSIGHTS_WHERE_JOIN = " AND "
#: Dashboard names: up to 255 of A-Z, a-z, 0-9, "-" and "_" (source key ``cloudwatch-dashboard-body``).
DASHBOARD_NAME_MAX = 255
#: The dashboard body's grid is 24 units wide (source key ``cloudwatch-dashboard-body``).
DASHBOARD_GRID_WIDTH = 24
#: Widget types and the metric widget's ``view`` values a dashboard body may use (source key
#: ``cloudwatch-dashboard-body``).
DASHBOARD_WIDGET_TYPES: tuple[str, ...] = ("metric", "text", "log", "alarm", "explorer")
DASHBOARD_METRIC_VIEWS: tuple[str, ...] = ("timeSeries", "singleValue", "gauge", "bar", "pie", "table")
#: The console host per partition (dashboard URLs; source key ``cloudwatch-dashboard-url``).
CONSOLE_HOSTS: Mapping[str, str] = {
    "aws": "console.aws.amazon.com",
    "aws-us-gov": "console.amazonaws-us-gov.com",
    "aws-cn": "console.amazonaws.cn",
}
