"""Running the fleet (key ``operations``): GPU and EFA metrics (the Amazon CloudWatch Observability add-on), the
stack's CloudWatch dashboard, and the alarm on idle GPU groups with its optional e-mail subscription.

Node health needs no key: every stack runs the EKS node monitoring agent, and node auto repair is set per group
(``nodeGroups.<name>.nodeRepair``: on by default on GPU groups, EKS's default, off, on CPU groups)."""

import re
from typing import Mapping, Optional

from pydantic import Field, model_validator

from components.catalog import Catalog
from components.catalog.operations import ALARM_MAX_EVALUATION_SECONDS, METRICS_INSIGHTS_RANGE_SECONDS
from stacks.config.base import Model, Number
from stacks.config.errors import check, key
from stacks.config.nodegroups import NodeGroupConfig

#: An e-mail address SNS can deliver to: one ``@``, a dotted domain, no spaces or angle brackets (a name and
#: ``<address>`` is not an address).
EMAIL_RE = re.compile(
    r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$"
)
#: Shortest idle time the alarm watches: GPUs between two steps of a job or while a checkpoint loads are briefly idle.
IDLE_MIN_MINUTES = 5
#: Longest: the alarm reads a Metrics Insights query, which reads the recent hours only (and CloudWatch evaluates an
#: alarm over at most a day).
IDLE_MAX_MINUTES = min(ALARM_MAX_EVALUATION_SECONDS, METRICS_INSIGHTS_RANGE_SECONDS) // 60
#: A GPU is idle below this utilization; above it the alarm would fire on GPUs that work (a data-loading-bound job).
IDLE_MAX_PERCENT = 50.0


class IdleGpuAlarmConfig(Model):
    """The alarm on a GPU group whose GPUs all stay near zero utilization (key ``operations.idleGpuAlarm``)."""

    enabled: Optional[bool] = None
    """Default: on when the stack collects metrics and has GPU groups."""
    minutes: int = Field(default=30, ge=IDLE_MIN_MINUTES, le=IDLE_MAX_MINUTES)
    """How long every GPU of the group stays below ``utilizationPercent`` before the alarm fires."""
    utilization_percent: Number = Field(default=1.0, gt=0, le=IDLE_MAX_PERCENT)
    """Below this GPU utilization (percent) a GPU counts as idle."""


class OperationsConfig(Model):
    """Metrics, dashboard and alarms of the fleet (key ``operations``)."""

    metrics: Optional[bool] = None
    """Install the Amazon CloudWatch Observability add-on (Container Insights with GPU and EFA metrics). Default: on
    when the stack has GPU groups."""
    dashboard: Optional[bool] = None
    """Create the stack's CloudWatch dashboard (its URL is the ``dashboardUrl`` output). Default: with ``metrics``."""
    idle_gpu_alarm: IdleGpuAlarmConfig = Field(default_factory=IdleGpuAlarmConfig)
    """Per GPU group and instance type, an alarm when every GPU of that type stays idle."""
    alarm_email: Optional[str] = None
    """Subscribe this address to the alarms' SNS topic (SNS sends a confirmation mail first)."""
    application_signals: bool = False
    """Keep the add-on's CloudWatch Application Signals, on in the add-on's default configuration: its operator
    instruments Java, Python, .NET and Node.js workloads and the agent sends their metrics (billed per request) and
    traces (X-Ray). Off by default: the agent collects Container Insights only."""

    @model_validator(mode="after")
    def _email(self) -> "OperationsConfig":
        if self.alarm_email is not None and not EMAIL_RE.match(self.alarm_email):
            check([("alarmEmail", f"{self.alarm_email!r} is not an e-mail address (name@example.com)")])
        return self

    def metrics_enabled(self, gpu: bool) -> bool:
        """Whether the stack installs the Container Insights add-on: ``metrics`` when set, else on with GPU groups."""
        return self.metrics if self.metrics is not None else gpu


def has_gpu_groups(groups: Mapping[str, NodeGroupConfig], catalog: Catalog) -> bool:
    """Some worker group's first instance type has GPUs (the catalog knows every type once the config loaded)."""
    return any((t := catalog.get(g.instance_types[0])) is not None and t.gpus > 0 for g in groups.values())


def operations_problems(ops: OperationsConfig, gpu: bool) -> list[str]:
    """What the section asks that the stack cannot do: a dashboard or an alarm without the metrics they read, an
    idle-GPU alarm without GPU groups, an e-mail or an alarm's settings without an alarm to read them."""
    problems = []
    metrics = ops.metrics_enabled(gpu)
    needs = (
        f"set {key('operations.metrics')}: true (the Container Insights add-on publishes what it reads), or remove it"
    )
    if ops.dashboard and not metrics:
        problems.append(
            f"{key('operations.dashboard')}: plots the metrics of the Container Insights add-on, which "
            f"this stack does not install; {needs}"
        )
    if ops.application_signals and not metrics:
        problems.append(
            f"{key('operations.applicationSignals')}: is part of the Container Insights add-on, which this "
            f"stack does not install; {needs}"
        )
    alarm = ops.idle_gpu_alarm.enabled
    if alarm and not gpu:
        problems.append(f"{key('operations.idleGpuAlarm.enabled')}: the stack has no GPU group to watch; remove it")
    elif alarm and not metrics:
        problems.append(
            f"{key('operations.idleGpuAlarm.enabled')}: watches node_gpu_utilization, which the Container "
            f"Insights add-on publishes and this stack does not install; {needs}"
        )
    alarms = (alarm if alarm is not None else metrics) and gpu
    off = "the idle-GPU alarm is off: it needs GPU groups, operations.metrics on and idleGpuAlarm.enabled not false"
    if ops.alarm_email is not None and not alarms:
        problems.append(f"{key('operations.alarmEmail')}: no alarm would send to it ({off}); remove it")
    if not alarms and alarm is not True:  # an alarm asked for and impossible is the one problem above
        problems += [
            f"{key(f'operations.idleGpuAlarm.{name}')}: not read ({off}); remove it"
            for field, name in (("minutes", "minutes"), ("utilization_percent", "utilizationPercent"))
            if field in ops.idle_gpu_alarm.model_fields_set
        ]
    return problems
