"""``FleetObservability``: GPU and EFA metrics, a CloudWatch dashboard and idle-GPU alarms for a training cluster.

- Metrics: the Amazon CloudWatch Observability EKS add-on, with its own Pod Identity role holding only
  ``CloudWatchAgentServerPolicy``. Its DaemonSets get exactly the tolerations the caller passes.
- A dashboard built from plain values (:func:`components.dashboard.dashboard_body`): CloudWatch Metrics Insights
  queries over ``ContainerInsights``, filtered to the cluster.
- One alarm per GPU group (:func:`components.dashboard.idle_alarm_query`), optionally with an encrypted SNS topic and an
  e-mail.

Nothing is created inside an ``apply``. Why: docs/explanation/operations.md."""

import functools
import json
from typing import Any, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired

from components.addons import addon_version
from components.args import checks_args
from components.catalog.addons import DCGM_INSTANCE_TYPES, POD_IDENTITY, addon_version_for, configuration_settings
from components.catalog.operations import (
    AGENT_CONFIG_WITHOUT_APPLICATION_SIGNALS,
    APPLICATION_SIGNALS_POLICY,
    CONTAINER_INSIGHTS_LOG_GROUPS,
    CONTAINER_INSIGHTS_NAMESPACE,
    OBSERVABILITY_ADDON,
    OBSERVABILITY_NAMESPACE,
    OBSERVABILITY_POLICY,
    OBSERVABILITY_SERVICE_ACCOUNT,
    PIPELINE_ALARM_PERIOD_SECONDS,
    PIPELINE_ALARM_PERIODS,
    container_insights_log_group,
)
from components.conventions import DEFAULT_CLUSTER_LOG_RETENTION_DAYS
from components.dashboard import (
    ALARM_PERIOD_SECONDS,
    GpuGroupSpec,
    dashboard_body,
    dashboard_url,
    idle_alarm_query,
    idle_alarm_series,
)
from components.iam import alarm_topic_key_policy, managed_policy_arn
from components.partition import current_partition
from components.pod_identity import pod_identity_role
from components.scheduling import Toleration


class IdleAlarmSpec(TypedDict):
    """The alarm on one GPU group whose GPUs all stay near zero utilization."""

    group: GpuGroupSpec
    """The group."""
    minutes: int
    """How long every GPU stays below ``utilization_percent`` before the alarm fires."""
    utilization_percent: float
    """A GPU below this utilization (percent) is idle."""


class FleetObservabilityArgs(TypedDict):
    """Inputs of :class:`FleetObservability`."""

    cluster_name: str
    """The EKS cluster's name (a plain string: the dashboard and the alarms filter on it)."""
    cluster: pulumi.Input[str]
    """The same name as an output of the cluster component, so the add-on waits for the cluster."""
    kubernetes_version: str
    """Kubernetes minor, to resolve the add-on's default version."""
    region: str
    """The region the dashboard's widgets read."""
    metrics: bool
    """Install the Amazon CloudWatch Observability add-on."""
    tolerations: NotRequired[Sequence[Toleration]]
    """What the agent's DaemonSets tolerate (the node groups' taints)."""
    application_signals: NotRequired[bool]
    """Keep the add-on's Application Signals (auto-instrumentation of Java, Python, .NET and Node.js workloads, billed
    per request; the role gets X-Ray writes). Default False: the agent collects Container Insights only."""
    addon_version: NotRequired[str]
    """The add-on's version; default this project's pin for the Kubernetes version, else EKS's default."""
    dashboard: NotRequired[bool]
    """Create the dashboard. Default False."""
    gpu_groups: NotRequired[Sequence[GpuGroupSpec]]
    """The GPU groups (dashboard rows)."""
    efa: NotRequired[bool]
    """Some group uses EFA (the dashboard plots EFA traffic)."""
    job_namespace: NotRequired[str]
    """The namespace of the training jobs (the dashboard plots their pods' GPU utilization)."""
    idle_alarms: NotRequired[Sequence[IdleAlarmSpec]]
    """Idle-GPU alarms."""
    alarm_email: NotRequired[str]
    """Subscribe this address to the alarms' topic."""
    log_retention_days: NotRequired[int]
    """Retention of the add-on's log groups, in days (a CloudWatch retention value). Default 30."""
    tags: NotRequired[dict[str, str]]
    """AWS tags."""


def agent_configuration(tolerations: Sequence[Toleration], application_signals: bool = False) -> str:
    """The add-on's configuration values: the DaemonSets tolerate exactly ``tolerations``; without
    ``application_signals`` the agent's configuration is Container Insights only (Application Signals off; see
    :data:`components.catalog.operations.APPLICATION_SIGNALS_SECTIONS`)."""
    values: dict[str, Any] = {"tolerations": [dict(t) for t in tolerations]}
    if not application_signals:
        values["agent"] = {"config": json.loads(json.dumps(AGENT_CONFIG_WITHOUT_APPLICATION_SIGNALS))}
    return json.dumps(values, sort_keys=True)


def dcgm_uncovered(kubernetes_version: str, pinned: Optional[str], gpu_groups: Sequence[GpuGroupSpec]) -> str:
    """Why a known version of the add-on cannot publish GPU metrics for some GPU group ("" when it can, or when the
    version is EKS's default, which the stack's preflight checks): its DCGM exporter's node affinity lacks the type."""
    version = addon_version_for(
        OBSERVABILITY_ADDON, kubernetes_version, {OBSERVABILITY_ADDON: pinned} if pinned else {}
    )
    coverage = DCGM_INSTANCE_TYPES[OBSERVABILITY_ADDON]
    missing = sorted(
        {t for g in gpu_groups for t in g["instance_types"] if version and coverage.covers(t, version) is False}
    )
    if not missing:
        return ""
    return (
        f"{OBSERVABILITY_ADDON} {version} does not run {coverage.daemonset} on {', '.join(missing)}; pin a version "
        "whose DCGM exporter lists them (components.catalog.addons.DCGM_INSTANCE_TYPES)"
    )


def _policy_arn(partition: str, name: str) -> str:
    return managed_policy_arn(partition, name)


class FleetObservability(pulumi.ComponentResource):
    """The Container Insights add-on and its role, the dashboard, the idle-GPU alarms and their topic."""

    dashboard_url: pulumi.Output[str]
    """The dashboard in the CloudWatch console ("" without one)."""
    alarm_names: list[str]
    """Names of the alarms: the idle-GPU alarms and the metrics pipeline's."""
    alarm_topic_arn: pulumi.Output[str]
    """The SNS topic the alarms publish to ("" without an e-mail)."""
    installed_addon: pulumi.Output[str]
    """The Container Insights add-on's version as EKS installed it ("" without ``metrics``); resolves once it is
    installed (or updated) at that version."""

    @checks_args
    def __init__(self, name: str, args: FleetObservabilityArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:FleetObservability", name, None, opts)
        tags = dict(args.get("tags") or {})
        partition = current_partition(self)
        addon = self._agent(name, args, tags, partition) if args["metrics"] else None
        self.dashboard_url = (
            self._dashboard(name, args, partition) if args.get("dashboard") else pulumi.Output.from_input("")
        )
        email = args.get("alarm_email")
        alarms = list(args.get("idle_alarms") or [])
        topic = self._alarm_topic(name, args, tags, partition, email) if email and alarms else None
        actions: list[pulumi.Input[str]] = [topic.arn] if topic is not None else []
        self.alarm_topic_arn = topic.arn if topic is not None else pulumi.Output.from_input("")
        self.alarm_names = []
        if alarms:
            self._idle_alarms(name, args, tags, alarms, actions)
            if args["metrics"]:
                self._pipeline_alarm(name, args, tags, actions, addon)
        self.installed_addon = addon.addon_version if addon is not None else pulumi.Output.from_input("")
        self.register_outputs(
            {
                "dashboard_url": self.dashboard_url,
                "alarm_topic_arn": self.alarm_topic_arn,
                "installed_addon": self.installed_addon,
                "alarm_names": self.alarm_names,
            }
        )

    def _agent(
        self, name: str, args: FleetObservabilityArgs, tags: dict[str, str], partition: pulumi.Output[str]
    ) -> aws.eks.Addon:
        """The CloudWatch Observability add-on, its agent's Pod Identity role and its log groups."""
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = args["cluster_name"]
        signals = bool(args.get("application_signals"))
        policies = [OBSERVABILITY_POLICY, *([APPLICATION_SIGNALS_POLICY] if signals else [])]
        identity = pod_identity_role(
            self,
            f"{name}-agent",
            cluster_name=args["cluster"],
            namespace=OBSERVABILITY_NAMESPACE,
            service_account=OBSERVABILITY_SERVICE_ACCOUNT,
            description="CloudWatch agent (EKS Pod Identity, "
            f"{OBSERVABILITY_NAMESPACE}/{OBSERVABILITY_SERVICE_ACCOUNT})",
            role_name=f"{cluster_name}-cloudwatch-agent",
            managed_policy_arns=[partition.apply(functools.partial(_policy_arn, name=n)) for n in policies],
            associate=False,  # the add-on associates the role with its service account itself
            tags=tags,
        )
        configuration = agent_configuration(list(args.get("tolerations") or []), signals)
        settings = {POD_IDENTITY, *configuration_settings(OBSERVABILITY_ADDON, json.loads(configuration))}
        version = addon_version(
            self, OBSERVABILITY_ADDON, args["kubernetes_version"], args.get("addon_version"), settings
        )
        uncovered = dcgm_uncovered(
            args["kubernetes_version"], args.get("addon_version"), list(args.get("gpu_groups") or [])
        )
        if uncovered:
            raise ValueError(uncovered)
        # The add-on's log groups, created first with a retention (Fluent Bit and the agent would create them
        # without one, outside the stack, and pulumi destroy would leave them growing).
        log_groups = [
            aws.cloudwatch.LogGroup(
                f"{name}-logs-{suffix}",
                name=container_insights_log_group(cluster_name, suffix),
                retention_in_days=int(args.get("log_retention_days", DEFAULT_CLUSTER_LOG_RETENTION_DAYS)),
                tags=tags,
                opts=child,
            )
            for suffix in CONTAINER_INSIGHTS_LOG_GROUPS
        ]
        return aws.eks.Addon(
            f"{name}-addon",
            cluster_name=args["cluster"],
            addon_name=OBSERVABILITY_ADDON,
            addon_version=version,
            configuration_values=configuration,
            pod_identity_associations=[
                {"role_arn": identity.role.arn, "service_account": OBSERVABILITY_SERVICE_ACCOUNT}
            ],
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*identity.policies, *log_groups]),
        )

    def _alarm_topic(
        self,
        name: str,
        args: FleetObservabilityArgs,
        tags: dict[str, str],
        partition: pulumi.Output[str],
        email: str,
    ) -> aws.sns.Topic:
        """The alarms' encrypted SNS topic with its email subscription."""
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = args["cluster_name"]
        caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        key = aws.kms.Key(
            f"{name}-alarms-key",
            description=f"SNS topic of the {cluster_name} alarms (CloudWatch may encrypt with it)",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            policy=pulumi.Output.all(partition, caller.account_id).apply(
                lambda v: alarm_topic_key_policy(str(v[0]), str(v[1]))
            ),
            tags=tags,
            opts=child,
        )
        topic = aws.sns.Topic(f"{name}-alarms", kms_master_key_id=key.arn, tags=tags, opts=child)
        aws.sns.TopicSubscription(f"{name}-alarms-email", topic=topic.arn, protocol="email", endpoint=email, opts=child)
        return topic

    def _idle_alarms(
        self,
        name: str,
        args: FleetObservabilityArgs,
        tags: dict[str, str],
        alarms: list[IdleAlarmSpec],
        actions: list[pulumi.Input[str]],
    ) -> None:
        """One idle-GPU alarm per instance type of the groups with ``idle_alarms``."""
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = args["cluster_name"]
        minutes = int(alarms[0]["minutes"])
        percent = float(alarms[0]["utilization_percent"])
        for instance_type, (alarm_name, group_names) in idle_alarm_series(
            cluster_name, [a["group"] for a in alarms]
        ).items():
            label = (
                f"node group {group_names[0]}"
                if len(group_names) == 1
                else f"node groups {', '.join(group_names)}, whose nodes of one type are one series"
            )
            aws.cloudwatch.MetricAlarm(
                f"{name}-{alarm_name[len(cluster_name) + 1 : -len('-gpus')]}",
                name=alarm_name,
                alarm_description=(
                    f"Every {instance_type} GPU of {cluster_name} ({label}; the series covers every "
                    f"{instance_type} node of the cluster) has been below {percent:g}% utilization for "
                    f"{minutes} minutes: the nodes cost money and do nothing. Scale the group down or start a job."
                ),
                comparison_operator="LessThanThreshold",
                threshold=percent,
                evaluation_periods=minutes * 60 // ALARM_PERIOD_SECONDS,
                datapoints_to_alarm=minutes * 60 // ALARM_PERIOD_SECONDS,
                metric_queries=[
                    {
                        "id": "busiest",
                        "expression": idle_alarm_query(cluster_name, instance_type),
                        "period": ALARM_PERIOD_SECONDS,
                        "label": f"busiest {instance_type} GPU of {'/'.join(group_names)} (%)",
                        "return_data": True,
                    }
                ],
                # no GPU reports when the group has no nodes: nothing is idle then
                treat_missing_data="notBreaching",
                alarm_actions=actions,
                ok_actions=actions,
                tags=tags,
                opts=child,
            )
            self.alarm_names.append(alarm_name)

    def _pipeline_alarm(
        self,
        name: str,
        args: FleetObservabilityArgs,
        tags: dict[str, str],
        actions: list[pulumi.Input[str]],
        addon: Optional[aws.eks.Addon],
    ) -> None:
        """An alarm on the missing metrics series: the idle alarms treat missing data as not idle, so a broken metrics
        pipeline would silence them."""
        cluster_name = args["cluster_name"]
        pipeline = f"{cluster_name}-metrics-missing"
        aws.cloudwatch.MetricAlarm(
            f"{name}-metrics-missing",
            name=pipeline,
            alarm_description=(
                f"No Container Insights node count for {cluster_name} for "
                f"{PIPELINE_ALARM_PERIODS * PIPELINE_ALARM_PERIOD_SECONDS // 60} minutes: the CloudWatch agent "
                f"(add-on {OBSERVABILITY_ADDON}) publishes nothing, so the idle-GPU alarms cannot fire. Check "
                f"the add-on's status and the pods in {OBSERVABILITY_NAMESPACE}."
            ),
            namespace=CONTAINER_INSIGHTS_NAMESPACE,
            metric_name="cluster_node_count",
            dimensions={"ClusterName": cluster_name},
            statistic="Maximum",
            period=PIPELINE_ALARM_PERIOD_SECONDS,
            evaluation_periods=PIPELINE_ALARM_PERIODS,
            datapoints_to_alarm=PIPELINE_ALARM_PERIODS,
            comparison_operator="LessThanThreshold",
            threshold=1,
            treat_missing_data="breaching",
            alarm_actions=actions,
            ok_actions=actions,
            tags=tags,
            # after the add-on (its agent starts publishing then): created earlier it would report the
            # missing data of a stack still being built
            opts=pulumi.ResourceOptions(parent=self, depends_on=[addon] if addon is not None else []),
        )
        self.alarm_names.append(pipeline)

    def _dashboard(self, name: str, args: FleetObservabilityArgs, partition: pulumi.Output[str]) -> pulumi.Output[str]:
        """The CloudWatch dashboard; returns its URL."""
        child = pulumi.ResourceOptions(parent=self)
        cluster_name, region = args["cluster_name"], args["region"]
        gpu_groups = list(args.get("gpu_groups") or [])
        body = dashboard_body(cluster_name, region, gpu_groups, bool(args.get("efa")), args.get("job_namespace"))
        dashboard = aws.cloudwatch.Dashboard(
            f"{name}-dashboard", dashboard_name=cluster_name, dashboard_body=body, opts=child
        )
        return pulumi.Output.all(partition, dashboard.dashboard_name).apply(
            lambda v: dashboard_url(str(v[0]), region, str(v[1]))
        )
