"""Running the fleet, under mocks for every preset: node health (the node monitoring agent, node auto repair on GPU
groups), the Container Insights add-on (its configuration against the add-on's schema, its agents tolerating every
taint the groups carry, its least-privilege Pod Identity role), the dashboard (CloudWatch's dashboard body structure;
every metric it plots exists under the namespace and dimensions the agent publishes) and the idle-GPU alarms.

The rules are encoded from their upstream sources (components/catalog/operations.py names each): the agent's EMF
metric declarations (source key ``container-insights-metrics``), the add-on chart's values
(``cloudwatch-observability-chart``), Kubernetes' toleration matching
(https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/) and CloudWatch's dashboard body
structure (``cloudwatch-dashboard-body``). Each rule has a control that shows it fails."""

import copy
import json
import re
from typing import Any, Mapping, Sequence

import pytest

from components.catalog import DEFAULT_KUBERNETES_VERSION
from components.catalog.operations import (
    ALARM_MAX_EVALUATION_SECONDS,
    APPLICATION_SIGNALS_POLICY,
    APPLICATION_SIGNALS_SECTIONS,
    CONTAINER_INSIGHTS_LOG_GROUPS,
    CONTAINER_INSIGHTS_METRICS,
    CONTAINER_INSIGHTS_NAMESPACE,
    DASHBOARD_GRID_WIDTH,
    DASHBOARD_METRIC_VIEWS,
    DASHBOARD_NAME_MAX,
    DASHBOARD_WIDGET_TYPES,
    METRICS_INSIGHTS_QUERIES_PER_REQUEST,
    METRICS_INSIGHTS_RANGE_SECONDS,
    METRICS_INSIGHTS_WHERE_JOIN,
    NODE_MONITORING_ADDON,
    NODE_MONITORING_CONFIG_SCHEMA,
    NODE_MONITORING_DEFAULT_TOLERATIONS,
    NODE_REPAIR_GPU_DEFAULT,
    OBSERVABILITY_ADDON,
    OBSERVABILITY_CONFIG_SCHEMA,
    OBSERVABILITY_NAMESPACE,
    OBSERVABILITY_POLICY,
    OBSERVABILITY_SERVICE_ACCOUNT,
    container_insights_log_group,
)
from components.scheduling import TAINT_EFFECTS_EKS
from tests.harness import PROJECT, Program, resolve, run_program, stack_config, stack_names
from tests.kube_schema import validate as validate_official

STACKS = stack_names()
K8S_EFFECT = {v: k for k, v in TAINT_EFFECTS_EKS.items()}
QUERY = re.compile(
    r"^SELECT (?P<stat>[A-Z]+)\((?P<metric>\w+)\) FROM SCHEMA\((?P<namespace>\w+), (?P<dims>[\w, ]+)\)"
    r" WHERE (?P<where>.+?)(?: GROUP BY (?P<group>\w+))?$"
)
CONDITION = re.compile(r"(\w+) = '((?:[^']|'')*)'")
STATS = {"AVG", "MAX", "MIN", "SUM", "COUNT"}


# --- the rules ------------------------------------------------------------------------------------------------------
def tolerates(toleration: Mapping[str, str], taint: Mapping[str, str]) -> bool:
    """Kubernetes' matching: an empty key with Exists matches every taint; otherwise the keys are equal, Exists or an
    equal value, and an empty effect matches every effect."""
    op = toleration.get("operator", "Equal")
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if not toleration.get("key"):
        return op == "Exists"
    if toleration["key"] != taint["key"]:
        return False
    return op == "Exists" or toleration.get("value", "") == taint.get("value", "")


def toleration_problems(
    tolerations: Sequence[Mapping[str, str]], taints: Sequence[Mapping[str, str]], exact: bool
) -> list[str]:
    """Taints no toleration matches; with ``exact``, tolerations that match no taint (wider than needed)."""
    out = [f"taint {t} is not tolerated" for t in taints if not any(tolerates(x, t) for x in tolerations)]
    if exact:
        out += [
            f"toleration {x} matches no taint of the groups"
            for x in tolerations
            if not any(tolerates(x, t) for t in taints)
        ]
    return out


def query_problems(sql: str, cluster: str) -> list[str]:
    """A Metrics Insights query reads a metric the agent publishes, under a dimension set it publishes it with,
    filtered to ``cluster``, with every WHERE and GROUP BY key in the schema."""
    m = QUERY.match(sql)
    if not m:
        return [f"not a Metrics Insights query of the expected form: {sql}"]
    problems = []
    if m["stat"] not in STATS:
        problems.append(f"{m['stat']} is not a Metrics Insights function")
    if m["namespace"] != CONTAINER_INSIGHTS_NAMESPACE:
        problems.append(f"namespace {m['namespace']} is not {CONTAINER_INSIGHTS_NAMESPACE}")
    dims = frozenset(d.strip() for d in m["dims"].split(","))
    metric = CONTAINER_INSIGHTS_METRICS.get(m["metric"])
    if metric is None:
        problems.append(f"{m['metric']} is not a metric the agent publishes")
    elif dims not in metric.dimension_sets:
        problems.append(f"{m['metric']} is not published under {sorted(dims)}")
    conditions = CONDITION.findall(m["where"])
    parts = m["where"].split(METRICS_INSIGHTS_WHERE_JOIN)
    if any(not re.fullmatch(CONDITION, part) for part in parts):
        problems.append(f"WHERE {m['where']!r}: only key = 'value' conditions joined by AND (the documented grammar)")
    if not conditions:
        problems.append(f"no WHERE condition in {sql}")
    for dim, _ in conditions:
        if dim not in dims:
            problems.append(f"WHERE {dim}: not a dimension of the schema {sorted(dims)}")
    if ("ClusterName", cluster) not in conditions:
        problems.append(f"not filtered to ClusterName = '{cluster}': {sql}")
    if m["group"] and m["group"] not in dims:
        problems.append(f"GROUP BY {m['group']}: not a dimension of the schema")
    return problems


def dashboard_problems(body: Mapping[str, Any], cluster: str, region: str) -> list[str]:
    """CloudWatch's dashboard body structure, and every query against what the agent publishes."""
    problems: list[str] = []
    cells: set[tuple[int, int]] = set()
    for i, w in enumerate(body.get("widgets") or [None]):
        if not isinstance(w, dict):
            return [f"widget {i} is not an object"]
        if w.get("type") not in DASHBOARD_WIDGET_TYPES:
            problems.append(f"widget {i}: type {w.get('type')!r}")
        x, y, width, height = (w.get(k) for k in ("x", "y", "width", "height"))
        if not all(isinstance(v, int) for v in (x, y, width, height)) or x + width > DASHBOARD_GRID_WIDTH:
            problems.append(
                f"widget {i}: position {x},{y} size {width}x{height} off the {DASHBOARD_GRID_WIDTH}-unit grid"
            )
            continue
        mine = {(cx, cy) for cx in range(x, x + width) for cy in range(y, y + height)}
        if mine & cells:
            problems.append(f"widget {i} overlaps another")
        cells |= mine
        props = w.get("properties") or {}
        if w["type"] == "text":
            if not props.get("markdown"):
                problems.append(f"widget {i}: a text widget needs markdown")
            continue
        if w["type"] != "metric":
            continue
        if props.get("region") != region:
            problems.append(f"widget {i}: region {props.get('region')!r} is not the stack's {region}")
        if props.get("view") not in DASHBOARD_METRIC_VIEWS:
            problems.append(f"widget {i}: view {props.get('view')!r}")
        ids: set[str] = set()
        entries = [e for row in props.get("metrics") or [] for e in row]
        if not entries:
            problems.append(f"widget {i}: no metrics")
        selects = sum(str(e.get("expression", "")).upper().count("SELECT") for e in entries)
        if selects > METRICS_INSIGHTS_QUERIES_PER_REQUEST:
            problems.append(
                f"widget {i}: {selects} Metrics Insights queries; a request (a widget) takes "
                f"{METRICS_INSIGHTS_QUERIES_PER_REQUEST}"
            )
        for e in entries:
            qid, expression = e.get("id", ""), e.get("expression", "")
            if not re.match(r"^[a-z][A-Za-z0-9_]*$", qid) or qid in ids:
                problems.append(f"widget {i}: id {qid!r} must start with a lowercase letter and be unique")
            ids.add(qid)
            if expression.startswith("SELECT"):
                problems += [f"widget {i}: {p}" for p in query_problems(expression, cluster)]
            else:
                unknown = set(re.findall(r"\b[a-z][A-Za-z0-9_]*\b", expression)) - ids
                if not expression or unknown:
                    problems.append(f"widget {i}: math expression {expression!r} names {sorted(unknown)}")
    return problems


# --- what the program registers ---------------------------------------------------------------------------------------
def addons(p: Program) -> dict[str, Any]:
    return {a.inputs["addonName"]: a for a in p.of_type("aws:eks/addon:Addon")}


def group_taints(p: Program) -> list[dict[str, str]]:
    """Every taint of every registered node group, Kubernetes spelling."""
    return [
        {"key": t["key"], "value": t.get("value", ""), "effect": K8S_EFFECT[t["effect"]]}
        for ng in p.of_type("aws:eks/nodeGroup:NodeGroup")
        for t in ng.inputs.get("taints") or []
    ]


def is_gpu_group(ng: Any) -> bool:
    return str(ng.inputs.get("amiType", "")).endswith("NVIDIA")


def cluster_name(stack: str) -> str:
    return stack_config(stack).get(f"{PROJECT}:clusterName") or f"{PROJECT}-{stack}"


def agent_configuration_problems(config: Mapping[str, Any], taints: Sequence[Mapping[str, str]]) -> list[str]:
    """The node monitoring agent's configuration values: only keys of its configuration schema; its DCGM host engine
    (``dcgm-server``, tolerating only ``dcgmAgent.tolerations``, default none) tolerates every taint of the groups and
    every taint the agent itself tolerates, so wherever the agent watches GPUs the engine it reads runs (else the agent
    reports DCGMError, Fatal, on AcceleratedHardwareReady; source key ``eks-node-monitoring-agent-dcgm``)."""
    problems = []
    for top, value in config.items():
        if top not in NODE_MONITORING_CONFIG_SCHEMA:
            problems.append(f"{top}: not a key of the add-on's configuration schema")
        elif isinstance(value, dict):
            problems += [
                f"{top}.{k}: not a key of the schema" for k in value if k not in NODE_MONITORING_CONFIG_SCHEMA[top]
            ]
    agent = (config.get("nodeAgent") or {}).get("tolerations", list(NODE_MONITORING_DEFAULT_TOLERATIONS))
    dcgm = (config.get("dcgmAgent") or {}).get("tolerations", [])
    problems += [f"dcgmAgent: {p}" for p in toleration_problems(dcgm, taints, exact=False)]
    problems += [f"nodeAgent: {p}" for p in toleration_problems(agent, taints, exact=False)]
    # a taint the agent tolerates and the engine does not: the agent would run there without its DCGM
    probes = [{"key": "any.example/taint", "value": "x", "effect": e} for e in K8S_EFFECT.values()]
    problems += [
        f"dcgmAgent: tolerates less than the agent: {t}"
        for t in probes
        if any(tolerates(x, t) for x in agent) and not any(tolerates(x, t) for x in dcgm)
    ]
    return problems


@pytest.mark.parametrize("stack", STACKS)
def test_node_health_and_repair(program_for: Any, stack: str) -> None:
    """The node monitoring agent runs on every node and its DCGM host engine on every GPU node (the engine tolerates
    what the agent tolerates); node repair is on on GPU groups (NODE_REPAIR_GPU_DEFAULT) and takes no action on the
    agent's DCGMError, and EKS's default on CPU groups."""
    p = program_for(stack, False)
    agent = addons(p)[NODE_MONITORING_ADDON]
    config = json.loads(agent.inputs.get("configurationValues") or "{}")
    taints = group_taints(p)
    assert agent_configuration_problems(config, taints) == []
    gpu_groups = [ng for ng in p.of_type("aws:eks/nodeGroup:NodeGroup") if is_gpu_group(ng)]
    if gpu_groups:
        assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in taints
    assert not any("nodeRepair" in g for g in (stack_config(stack).get(f"{PROJECT}:nodeGroups") or {}).values())
    for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
        repair = ng.inputs.get("nodeRepairConfig")
        if ng in gpu_groups:
            assert NODE_REPAIR_GPU_DEFAULT is True and repair["enabled"] is True, (ng.name, repair)
            assert repair_problems(repair) == [], (ng.name, repair)
        else:
            assert repair is None, (ng.name, repair)


#: The reasons the node monitoring agent reports when its DCGM host engine, not a GPU, failed: with two engines on a
#: GPU node (the metrics add-on's exporter beside the agent's dcgm-server) it may report them on healthy GPUs
#: (https://github.com/aws/containers-roadmap/issues/2763, https://github.com/aws/eks-node-monitoring-agent/issues/266;
#: the reason names: the agent's pkg/reasons/reasons.yaml, https://docs.aws.amazon.com/eks/latest/userguide/node-health-nma.html).
ENGINE_REASONS = {("AcceleratedHardwareReady", "DCGMError")}


def repair_problems(repair: dict) -> list[str]:
    """What is wrong with a GPU group's ``nodeRepairConfig`` as registered: repair on without a ``NoAction`` override
    for each of :data:`ENGINE_REASONS`, or an override EKS refuses (every field set, ``minRepairWaitTimeMins`` >= 1,
    an action EKS knows: https://docs.aws.amazon.com/eks/latest/APIReference/API_NodeRepairConfigOverrides.html)."""
    if not repair.get("enabled"):
        return []
    problems = []
    overrides = repair.get("nodeRepairConfigOverrides") or []
    for o in overrides:
        if set(o) != {"nodeMonitoringCondition", "nodeUnhealthyReason", "minRepairWaitTimeMins", "repairAction"}:
            problems.append(f"override without every field: {o}")
        elif o["repairAction"] not in ("Replace", "Reboot", "NoAction") or o["minRepairWaitTimeMins"] < 1:
            problems.append(f"override EKS refuses: {o}")
    quiet = {
        (o.get("nodeMonitoringCondition"), o.get("nodeUnhealthyReason"))
        for o in overrides
        if o.get("repairAction") == "NoAction"
    }
    problems += [f"repair acts on {c}/{r}, a lost DCGM host engine, not a GPU fault" for c, r in ENGINE_REASONS - quiet]
    return problems


def test_the_repair_rule_catches_a_gpu_group_that_would_repair_a_lost_dcgm_engine() -> None:
    good = {
        "enabled": True,
        "nodeRepairConfigOverrides": [
            {
                "nodeMonitoringCondition": "AcceleratedHardwareReady",
                "nodeUnhealthyReason": "DCGMError",
                "minRepairWaitTimeMins": 10,
                "repairAction": "NoAction",
            }
        ],
    }
    assert repair_problems(good) == []
    assert repair_problems({"enabled": False}) == []
    assert repair_problems({"enabled": True}), "EKS's defaults alone"
    replace = {
        **good,
        "nodeRepairConfigOverrides": [{**good["nodeRepairConfigOverrides"][0], "repairAction": "Replace"}],
    }
    assert repair_problems(replace)
    partial = {
        **good,
        "nodeRepairConfigOverrides": [
            {
                "nodeMonitoringCondition": "AcceleratedHardwareReady",
                "nodeUnhealthyReason": "DCGMError",
                "repairAction": "NoAction",
            }
        ],
    }
    assert repair_problems(partial)


def test_the_agent_rule_catches_a_dcgm_server_that_misses_the_gpu_taint() -> None:
    gpu = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert agent_configuration_problems({"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}, gpu) == []
    assert agent_configuration_problems({}, gpu), "the chart's default: dcgm-server tolerates nothing"
    only_gpu = {"dcgmAgent": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
    assert agent_configuration_problems(only_gpu, gpu), "narrower than the agent"
    assert agent_configuration_problems({"dcgmAgent": {"tolerations": [{"operator": "Exists"}], "enabled": False}}, gpu)
    assert agent_configuration_problems(
        {"dcgmExporter": {}, "dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}, gpu
    )


def schema_problems(values: Mapping[str, Any], schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Keys of the add-on's configuration values that the chart's values do not have, or of another type."""
    problems = []
    for k, v in values.items():
        where = f"{path}{k}"
        if k not in schema:
            problems.append(f"{where}: not a key of the chart's values")
        elif isinstance(schema[k], Mapping):
            problems += (
                schema_problems(v, schema[k], where + ".") if isinstance(v, dict) else [f"{where}: not a mapping"]
            )
        elif not isinstance(v, schema[k]):
            problems.append(f"{where}: not a {schema[k].__name__}")
    return problems


def application_signals_on(values: Mapping[str, Any]) -> bool:
    """What the chart does with the values: no ``agent.config`` keeps its default agent configuration, which has
    Application Signals; a configuration of the agent has it when either section names ``application_signals``
    (``manager.modify-auto-monitor-config``, source key ``cloudwatch-observability-chart``)."""
    config = (values.get("agent") or {}).get("config")
    if not config or config in ("default", "default:otel"):
        return True
    return any(
        "application_signals" in ((config.get(top) or {}).get(sub) or {}) for top, sub in APPLICATION_SIGNALS_SECTIONS
    )


def test_the_addon_rules_catch_a_wrong_key_or_application_signals_left_on() -> None:
    off = {"tolerations": [], "agent": {"config": {"logs": {"metrics_collected": {"kubernetes": {}}}}}}
    assert schema_problems(off, OBSERVABILITY_CONFIG_SCHEMA) == [] and not application_signals_on(off)
    assert application_signals_on({"tolerations": []}), "the chart's default agent configuration"
    assert application_signals_on({"agent": {"config": {"traces": {"traces_collected": {"application_signals": {}}}}}})
    assert application_signals_on({"agent": {"config": {"logs": {"metrics_collected": {"application_signals": {}}}}}})
    # keys the chart's values do not have (a typo, the 6.2.0-only switch, a wrong shape)
    assert schema_problems({"agent": {"configuration": {}}}, OBSERVABILITY_CONFIG_SCHEMA)
    assert schema_problems({"applicationSignals": {"enabled": False}}, OBSERVABILITY_CONFIG_SCHEMA)
    assert schema_problems({"agent": {"config": "{}"}}, OBSERVABILITY_CONFIG_SCHEMA)
    assert schema_problems({"tolerations": {}}, OBSERVABILITY_CONFIG_SCHEMA)


@pytest.mark.parametrize("stack", STACKS)
def test_metrics_addon_configuration_role_and_tolerations(program_for: Any, stack: str) -> None:
    p = program_for(stack, False)
    gpu = any(is_gpu_group(ng) for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"))
    addon = addons(p).get(OBSERVABILITY_ADDON)
    assert (addon is not None) == gpu, "on by default exactly where the stack has GPU groups"
    if addon is None:
        return
    config = json.loads(addon.inputs["configurationValues"])
    assert schema_problems(config, OBSERVABILITY_CONFIG_SCHEMA) == []
    assert not application_signals_on(config), "Application Signals stays off unless operations.applicationSignals"
    assert config["agent"]["config"]["logs"]["metrics_collected"]["kubernetes"]["enhanced_container_insights"] is True
    # each toleration is a Kubernetes Toleration (the chart puts them into the DaemonSets' pod specs)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "agent"},
        "spec": {"containers": [{"name": "a", "image": "a"}], "tolerations": config["tolerations"]},
    }
    validate_official(copy.deepcopy(pod), DEFAULT_KUBERNETES_VERSION + ".0")
    assert toleration_problems(config["tolerations"], group_taints(p), exact=True) == []
    # least privilege: its own role, only the managed policy the add-on's documentation names, for its service account
    (assoc,) = addon.inputs["podIdentityAssociations"]
    assert assoc["serviceAccount"] == OBSERVABILITY_SERVICE_ACCOUNT
    role = next(
        r
        for r in p.of_type("aws:iam/role:Role")
        if r.inputs.get("arn") == assoc["roleArn"] or r.urn in addon.deps_of("podIdentityAssociations")
    )
    trust = json.dumps(role.inputs["assumeRolePolicy"])
    assert (
        f"{OBSERVABILITY_NAMESPACE}" in trust
        and OBSERVABILITY_SERVICE_ACCOUNT in trust
        and "pods.eks.amazonaws.com" in trust
    )
    attached = [
        a.inputs["policyArn"]
        for a in p.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.urn and role.urn in a.deps_of("role")
    ]
    assert attached == [f"arn:aws:iam::aws:policy/{OBSERVABILITY_POLICY}"]
    assert not [r for r in p.of_type("aws:iam/rolePolicy:RolePolicy") if role.urn in r.deps_of("role")]


@pytest.mark.parametrize("stack", STACKS)
def test_the_addons_log_groups_are_the_stacks_with_a_retention(program_for: Any, stack: str) -> None:
    """Fluent Bit and the agent create their log groups with no retention, outside the stack, and pulumi destroy left
    them growing: the stack creates every one of them first, with the cluster's log retention."""
    p = program_for(stack, False)
    addon = addons(p).get(OBSERVABILITY_ADDON)
    groups = {g.inputs.get("name"): g for g in p.of_type("aws:cloudwatch/logGroup:LogGroup")}
    control_plane = next(g for n, g in groups.items() if re.fullmatch(r"/aws/eks/[^/]+/cluster", str(n)))
    cluster_name = str(control_plane.inputs["name"]).split("/")[3]
    wanted = {container_insights_log_group(cluster_name, s) for s in CONTAINER_INSIGHTS_LOG_GROUPS}
    if addon is None:
        assert not wanted & set(groups)
        return
    retention = control_plane.inputs["retentionInDays"]  # the cluster's logRetentionDays
    for name in sorted(wanted):
        assert name in groups, f"{name} is not created by the stack"
        assert groups[name].inputs["retentionInDays"] == retention
        assert groups[name].urn in addon.dependencies, f"the add-on may start before {name} exists"


@pytest.mark.parametrize("stack", STACKS)
def test_dashboard_and_alarms_read_what_the_agent_publishes(program_for: Any, stack: str) -> None:
    p = program_for(stack, False)
    cluster = cluster_name(stack)
    region = stack_config(stack)["aws:region"]
    gpu_groups = [ng for ng in p.of_type("aws:eks/nodeGroup:NodeGroup") if is_gpu_group(ng)]
    dashboards = p.of_type("aws:cloudwatch/dashboard:Dashboard")
    assert len(dashboards) == (1 if gpu_groups else 0)
    every_alarm = p.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
    alarms = idle_alarms(p)
    assert len(alarms) == len({t for ng in gpu_groups for t in ng.inputs["instanceTypes"]})
    assert len(every_alarm) == len(alarms) + (1 if alarms else 0)  # and the metrics pipeline's
    if not dashboards:
        assert "dashboardUrl" not in p.outputs
        return
    (d,) = dashboards
    assert (
        re.match(r"^[A-Za-z0-9_-]+$", d.inputs["dashboardName"])
        and len(d.inputs["dashboardName"]) <= DASHBOARD_NAME_MAX
    )
    body = json.loads(d.inputs["dashboardBody"])
    assert dashboard_problems(body, cluster, region) == []
    metrics = {
        m
        for w in body["widgets"]
        for row in w.get("properties", {}).get("metrics", [])
        for e in row
        for m in re.findall(r"\((\w+)\) FROM", e.get("expression", ""))
    }
    assert {
        "node_gpu_utilization",
        "node_gpu_memory_utilization",
        "cluster_node_count",
        "pod_gpu_utilization",
    } <= metrics
    efa = any(ng.inputs.get("launchTemplate") and "efa" in json.dumps(ng.inputs.get("labels", {})) for ng in gpu_groups)
    assert ({"node_efa_rx_bytes", "node_efa_tx_bytes"} <= metrics) == efa
    assert resolve(p.outputs["dashboardUrl"]) == (
        f"https://console.aws.amazon.com/cloudwatch/home?region={region}"
        f"#dashboards/dashboard/{d.inputs['dashboardName']}"
    )
    minutes = ((stack_config(stack).get(f"{PROJECT}:operations") or {}).get("idleGpuAlarm") or {}).get("minutes", 30)
    for a in alarms:
        queries = a.inputs["metricQueries"]
        assert (
            sum(str(x.get("expression", "")).upper().count("SELECT") for x in queries)
            <= METRICS_INSIGHTS_QUERIES_PER_REQUEST
        )
        (q,) = queries
        assert query_problems(q["expression"], cluster) == []
        assert q["expression"].startswith("SELECT MAX(node_gpu_utilization)")
        assert (
            q["period"] * a.inputs["evaluationPeriods"]
            == minutes * 60
            <= min(ALARM_MAX_EVALUATION_SECONDS, METRICS_INSIGHTS_RANGE_SECONDS)
        )
        assert a.inputs["comparisonOperator"] == "LessThanThreshold" and a.inputs["treatMissingData"] == "notBreaching"
    assert sorted(resolve(p.outputs["alarms"])) == sorted(a.inputs["name"] for a in every_alarm)
    assert shared_series_problems(alarms) == []
    # The metrics pipeline: the cluster's node count, published while the agent runs, missing = breaching (the idle
    # alarms treat missing data as idle nodes absent, so a silent agent would silence them).
    if alarms:
        (pipeline,) = [a for a in every_alarm if a not in alarms]
        assert pipeline.inputs["metricName"] == "cluster_node_count"
        assert pipeline.inputs["namespace"] == CONTAINER_INSIGHTS_NAMESPACE
        assert (
            frozenset(pipeline.inputs["dimensions"]) in CONTAINER_INSIGHTS_METRICS["cluster_node_count"].dimension_sets
        )
        assert pipeline.inputs["dimensions"] == {"ClusterName": cluster}
        assert pipeline.inputs["treatMissingData"] == "breaching"
        (addon,) = [
            r for r in p.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "amazon-cloudwatch-observability"
        ]
        assert addon.urn in pipeline.dependencies, "created before the agent runs, it would report a stack being built"
        assert pipeline.inputs["comparisonOperator"] == "LessThanThreshold" and pipeline.inputs["threshold"] == 1
        assert pipeline.inputs["period"] * pipeline.inputs["evaluationPeriods"] <= ALARM_MAX_EVALUATION_SECONDS
        system_min = (stack_config(stack).get(f"{PROJECT}:systemNodeGroup") or {}).get("minSize", 2)
        assert system_min >= 1, "the node count it watches would be 0 legitimately"


def idle_alarms(p: Any) -> list[Any]:
    """The idle-GPU alarms (a Metrics Insights query each), without the metrics pipeline's."""
    return [a for a in p.of_type("aws:cloudwatch/metricAlarm:MetricAlarm") if a.inputs.get("metricQueries")]


def shared_series_problems(alarms: Sequence[Any]) -> list[str]:
    """Two alarms reading one series (Container Insights' GPU series have no node-group dimension, so two groups of
    one instance type are one series): each would claim the other's nodes."""
    seen: dict[str, str] = {}
    out = []
    for a in alarms:
        for q in a.inputs["metricQueries"]:
            if q.get("expression") in seen:
                out.append(f"{a.inputs['name']} and {seen[q['expression']]} read one series: {q['expression']}")
            seen[q.get("expression")] = a.inputs["name"]
    return out


def test_two_groups_of_one_type_get_one_alarm_naming_both() -> None:
    cfg_groups = stack_config("g6")[f"{PROJECT}:nodeGroups"]
    (gpu_name, gpu) = next((n, g) for n, g in cfg_groups.items() if "g6" in g["instanceTypes"][0])
    groups = {**cfg_groups, f"{gpu_name}b": dict(gpu)}
    p = _with("g6", nodeGroups=groups)
    alarms = idle_alarms(p)
    assert shared_series_problems(alarms) == []
    (alarm,) = [a for a in alarms if gpu["instanceTypes"][0] in a.inputs["metricQueries"][0]["expression"]]
    assert f"{gpu_name}, {gpu_name}b" in alarm.inputs["alarmDescription"]
    assert alarm.inputs["name"] == f"{cluster_name('g6')}-{gpu['instanceTypes'][0].replace('.', '-')}-idle-gpus"
    # the rule catches what the program did before: one alarm per group over the same series
    assert shared_series_problems([alarm, alarm])


# --- the rules can fail -------------------------------------------------------------------------------------------
def test_the_query_rule_catches_a_wrong_metric_dimension_or_cluster() -> None:
    good = (
        "SELECT AVG(node_gpu_utilization) FROM SCHEMA(ContainerInsights, ClusterName, InstanceId, NodeName) "
        "WHERE ClusterName = 'c' GROUP BY NodeName"
    )
    assert query_problems(good, "c") == []
    assert query_problems(good.replace("node_gpu_utilization", "node_gpu_utilisation"), "c")
    assert query_problems(good.replace(", InstanceId", ""), "c")  # not a dimension set the agent publishes it under
    assert query_problems(good.replace("GROUP BY NodeName", "GROUP BY PodName"), "c")
    assert query_problems(good, "other")
    assert query_problems(good.replace("ContainerInsights", "AWS/EC2"), "c")
    assert query_problems(good.replace("WHERE ClusterName = 'c'", "WHERE ClusterName = 'c' OR ClusterName = 'd'"), "c")
    two = good.replace(" GROUP BY NodeName", "")
    assert (
        query_problems(
            two.replace(", InstanceId, NodeName", ", GpuDevice, InstanceId, InstanceType, NodeName")
            + " AND InstanceType = 'p5.48xlarge'",
            "c",
        )
        == []
    )


def test_the_dashboard_rule_catches_structure_errors(program_for: Any) -> None:
    p = program_for("p5", False)
    body = json.loads(p.one("aws:cloudwatch/dashboard:Dashboard").inputs["dashboardBody"])
    for change in (
        lambda b: b["widgets"][1].update(x=20),  # off the grid
        lambda b: b["widgets"][2].update(y=b["widgets"][1]["y"], x=b["widgets"][1]["x"]),  # overlap
        lambda b: b["widgets"][1]["properties"].update(view="line"),
        lambda b: b["widgets"][1]["properties"].update(region="eu-west-1"),
        lambda b: b["widgets"][1]["properties"]["metrics"][0][0].update(id="Gpu"),
        lambda b: b["widgets"][-2]["properties"]["metrics"][-1][0].update(expression="gpus9 / 8"),
        # a second query in one widget (what the nodes widget once held: one per GPU group)
        lambda b: b["widgets"][1]["properties"]["metrics"].append(
            [dict(b["widgets"][1]["properties"]["metrics"][0][0], id="again")]
        ),
        # alternatives with OR (not in the documented grammar)
        lambda b: b["widgets"][1]["properties"]["metrics"][0][0].update(
            expression=b["widgets"][1]["properties"]["metrics"][0][0]["expression"].replace(
                "WHERE ClusterName = 'eks-training-p5'", "WHERE (ClusterName = 'eks-training-p5' OR ClusterName = 'x')"
            )
        ),
    ):
        bad = copy.deepcopy(body)
        change(bad)
        assert dashboard_problems(bad, "eks-training-p5", "us-east-1"), change


def test_the_toleration_rule_catches_a_missing_or_wider_toleration() -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    team = {"key": "team", "value": "ml", "effect": "NoExecute"}
    exact = [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    assert toleration_problems(exact, [gpu], exact=True) == []
    assert toleration_problems(exact, [gpu, team], exact=True)
    assert toleration_problems([*exact, {"key": "x", "operator": "Exists"}], [gpu], exact=True)
    assert toleration_problems([{"operator": "Exists"}], [gpu, team], exact=False) == []
    assert toleration_problems([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}], [gpu], exact=False)


# --- configuration changes the registrations ----------------------------------------------------------------------
def _with(stack: str, **keys: Any) -> Program:
    cfg = stack_config(stack)
    for k, v in keys.items():
        cfg[f"{PROJECT}:{k}"] = v
    p = run_program(stack, config=cfg)
    assert p.error is None, p.error
    return p


def test_a_user_taint_is_tolerated_by_the_agents() -> None:
    cfg_groups = stack_config("g5")[f"{PROJECT}:nodeGroups"]
    name = next(iter(cfg_groups))
    groups = {name: {**cfg_groups[name], "taints": [{"key": "team", "value": "vision", "effect": "NoExecute"}]}}
    p = _with("g5", nodeGroups=groups)
    config = json.loads(addons(p)[OBSERVABILITY_ADDON].inputs["configurationValues"])
    assert {"key": "team", "operator": "Equal", "value": "vision", "effect": "NoExecute"} in config["tolerations"]
    assert toleration_problems(config["tolerations"], group_taints(p), exact=True) == []


def test_metrics_off_removes_the_addon_dashboard_and_alarms() -> None:
    p = _with("p5", operations={"metrics": False})
    assert OBSERVABILITY_ADDON not in addons(p)
    assert not p.of_type("aws:cloudwatch/dashboard:Dashboard") and not p.of_type(
        "aws:cloudwatch/metricAlarm:MetricAlarm"
    )
    assert "dashboardUrl" not in p.outputs
    assert NODE_MONITORING_ADDON in addons(p), "node health does not depend on the metrics"


def test_repair_settings_reach_the_node_group() -> None:
    cfg_groups = stack_config("p5")[f"{PROJECT}:nodeGroups"]
    groups = {n: {**g, "nodeRepair": {"maxUnhealthyPercent": 10, "maxParallelNodes": 1}} for n, g in cfg_groups.items()}
    p = _with("p5", nodeGroups=groups)
    (ng,) = [ng for ng in p.of_type("aws:eks/nodeGroup:NodeGroup") if is_gpu_group(ng)]
    assert ng.inputs["nodeRepairConfig"] == {
        "enabled": True,
        "maxUnhealthyNodeThresholdPercentage": 10,
        "maxParallelNodesRepairedCount": 1,
        "nodeRepairConfigOverrides": [
            {
                "nodeMonitoringCondition": "AcceleratedHardwareReady",
                "nodeUnhealthyReason": "DCGMError",
                "minRepairWaitTimeMins": 10,
                "repairAction": "NoAction",
            }
        ],
    }
    groups = {n: {**g, "nodeRepair": {"enabled": False}} for n, g in cfg_groups.items()}
    (ng,) = [ng for ng in _with("p5", nodeGroups=groups).of_type("aws:eks/nodeGroup:NodeGroup") if is_gpu_group(ng)]
    assert ng.inputs["nodeRepairConfig"] == {"enabled": False}


def test_alarm_email_gets_an_encrypted_topic_cloudwatch_can_use() -> None:
    p = _with(
        "p5", operations={"alarmEmail": "ops@example.com", "idleGpuAlarm": {"minutes": 45, "utilizationPercent": 2}}
    )
    topic = p.one("aws:sns/topic:Topic")
    key = p.one("aws:kms/key:Key", lambda k: k.urn in topic.deps_of("kmsMasterKeyId"))
    policy = json.loads(key.inputs["policy"])
    (cw,) = [s for s in policy["Statement"] if s.get("Principal", {}).get("Service") == "cloudwatch.amazonaws.com"]
    # the statement AWS documents (https://repost.aws/knowledge-center/cloudwatch-configure-alarm-sns), no condition
    # CloudWatch is not documented to meet
    assert {k: v for k, v in cw.items() if k != "Sid"} == {
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
        "Resource": "*",
    }
    sub = p.one("aws:sns/topicSubscription:TopicSubscription")
    assert sub.inputs["protocol"] == "email" and sub.inputs["endpoint"] == "ops@example.com"
    (alarm,) = idle_alarms(p)
    assert topic.urn in alarm.deps_of("alarmActions")
    (pipeline,) = [a for a in p.of_type("aws:cloudwatch/metricAlarm:MetricAlarm") if a is not alarm]
    assert topic.urn in pipeline.deps_of("alarmActions")
    assert alarm.inputs["threshold"] == 2 and alarm.inputs["evaluationPeriods"] == 45


def test_application_signals_on_keeps_the_charts_agent_configuration_and_gives_xray() -> None:
    p = _with("p5", operations={"applicationSignals": True})
    config = json.loads(addons(p)[OBSERVABILITY_ADDON].inputs["configurationValues"])
    assert schema_problems(config, OBSERVABILITY_CONFIG_SCHEMA) == [] and application_signals_on(config)
    attached = sorted(
        a.inputs["policyArn"]
        for a in p.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if "cloudwatch-agent" in a.name or "-ops-agent" in a.name
    )
    assert attached == sorted(
        f"arn:aws:iam::aws:policy/{n}" for n in (OBSERVABILITY_POLICY, APPLICATION_SIGNALS_POLICY)
    )
