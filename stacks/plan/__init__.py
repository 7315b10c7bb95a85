"""The plan: every decision derived from a validated stack configuration, made once.

:func:`build_plan` turns a :class:`~stacks.config.StackConfig` into a :class:`Plan`: per node group
its instance facts, EFA profile (interfaces, ``efa-only`` interfaces, huge pages, NCCL/libfabric
environment, the VPC CNI that needs), zone, subnet, labels, taints and the size of a pod that fills
a node (:func:`components.nodeplan.node_profile`); the shared file system (backend, and for FSx for
Lustre its one zone or subnet and its EFA clients); where each dataset is and whether it is staged or
imported from S3; and the health check's threshold. The node groups, the pods' placement, the storage,
preflight, the autoscaler's node-template tags and the cost model all read the plan, so they cannot
disagree.
"""

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Optional

from components.catalog import REFERENCE_ALLREDUCE, InstanceType
from components.catalog.fsx import FSX_CLIENT_HOST, HostRequirement
from components.catalog.gpus import peak_flops_per_device
from components.catalog.operations import NODE_REPAIR_GPU_DEFAULT, NODE_REPAIR_GPU_OVERRIDES
from components.catalog.platform import NodeUpdateStrategy, NoSurge
from components.code_folder import code_hash
from components.conventions import SHARED_MOUNT
from components.naming import k8s_name
from components.nodeplan import (
    EfaProfile,
    NodeProfile,
    NodeRepairSpec,
    PodSize,
    node_profile,
    node_update_strategy,
    surge_limit,
)
from components.scheduling import SYSTEM_ROLE, NodeTaint, Toleration, tolerations_for
from components.workloads import WorkerPlacement
from stacks.config import TOOLBOX_IMAGE, DatasetConfig, FsxConfig, HealthCheckConfig, JobConfig, StackConfig
from stacks.config.base import ZONE_ID_RE
from stacks.config.derive import claim_readers, fsx_location
from stacks.config.errors import ConfigError
from stacks.config.nodegroups import NodeGroupConfig
from stacks.plan.admission import (
    AdmissionPlan,
    admission_plan,
    beyond_own_queue,
    beyond_team_stages,
    idle_teams,
    never_admitted,
    with_topology,
)
from stacks.plan.images import ImagePlan, image_for, image_plans
from stacks.plan.nodes import AmiPlan, ami_plan, min_available

#: An enforced health check defaults to this share of the published two-node bus bandwidth.
HEALTH_THRESHOLD_SHARE = 0.8
#: Zone label every node carries (Kubernetes well-known label).
ZONE_LABEL = "topology.kubernetes.io/zone"
#: The zone-ID label the AWS cloud provider puts on nodes (https://kubernetes.io/docs/reference/labels-annotations-taints/).
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
#: Share of a system node a job on the system group requests (the rest stays with add-ons and controllers).
SYSTEM_JOB_SHARE = 0.25


@dataclass(frozen=True, kw_only=True)
class NodeGroupPlan:
    """One node group (the system group included) as the program builds it."""

    name: str
    """The group's name (``system`` for the system group); its nodes' ``eks-training/role`` label."""
    path: str
    """Its config path: ``nodeGroups.<name>`` or ``systemNodeGroup``."""
    types: tuple[InstanceType, ...]
    """Facts of every instance type of the group, in config order."""
    profile: NodeProfile
    """Labels, taints, EFA, AMI and pod size (from the smallest type)."""
    capacity_type: str
    capacity_reservation_id: Optional[str]
    min_size: int
    desired_size: int
    max_size: int
    disk_size_gib: int
    zone: Optional[str]
    """Zone the group is pinned to (new VPC), or ``None``."""
    subnet_id: Optional[str]
    """Subnet the group is pinned to (existing VPC), or ``None``."""
    price_discount: float = 0.0
    """The share of the On-Demand price the cost estimate takes off (SPOT groups: ``spotDiscount`` or the catalog's
    assumption; 0 otherwise)."""
    spot_discount_set: bool = False
    """The discount comes from the group's ``spotDiscount`` (else from the catalog's assumption)."""
    repair: Optional[NodeRepairSpec] = None
    """EKS node auto repair (``None``: not configured, EKS's default: off): as ``nodeRepair`` sets it (``enabled``
    defaults to true there), else on for a GPU group (with the DCGM override, :func:`repair_spec`)."""
    ami: AmiPlan = AmiPlan(release_version="", pinned=False)
    """The EKS AMI release its nodes run (:func:`stacks.plan.nodes.ami_plan`)."""
    update_strategy: str = "rolling"
    """How its nodes roll: ``rolling`` or ``whenIdle`` (``nodeGroups.<g>.updateStrategy``)."""

    @property
    def instance_types(self) -> list[str]:
        """EC2 names of the group's types."""
        return [t.name for t in self.types]

    @property
    def efa(self) -> Optional[EfaProfile]:
        """The group's EFA profile, ``None`` without EFA."""
        return self.profile.efa

    @property
    def node_update(self) -> NodeUpdateStrategy:
        """How EKS rolls the group's nodes (``updateConfig.updateStrategy``, registered by the node group from the
        same capacity): ``MINIMAL`` where :attr:`no_surge` says why, else ``DEFAULT``."""
        return node_update_strategy(self.capacity_type, self.capacity_reservation_id, self.efa is not None)

    @property
    def no_surge(self) -> Optional[NoSurge]:
        """What leaves the group no room for a node beyond its size while it rolls (``None``: nothing)."""
        return surge_limit(self.capacity_type, self.capacity_reservation_id, self.efa is not None)

    @property
    def single_zone(self) -> bool:
        """Pinned to one zone (by name or by subnet)."""
        return self.zone is not None or self.subnet_id is not None

    def placement(self) -> WorkerPlacement:
        """Where a job's pods go on this group (one per node) and what each requests: the whole node on a
        worker group, a quarter of one on the system group (which keeps running the add-ons)."""
        pod = self.profile.pod
        if self.name == SYSTEM_ROLE:
            pod = _share(pod, SYSTEM_JOB_SHARE / 0.8)
        selector = dict(self.profile.labels)
        if self.zone:
            selector[ZONE_ID_LABEL if ZONE_ID_RE.match(self.zone) else ZONE_LABEL] = self.zone
        placement: WorkerPlacement = {
            "node_selector": selector,
            "tolerations": tolerations_for(self.profile.taints),
            "cpu_millis": pod.cpu_millis,
            "memory_mib": pod.memory_mib,
            "gpus": pod.gpus,
            "efa_devices": pod.efa_devices,
            "shm_mib": pod.shm_mib,
            "procs_per_node": pod.procs_per_node,
            "threads_per_proc": pod.threads_per_proc,
            "env": dict(self.profile.network_env),
        }
        peak = peak_flops_per_device(t.gpu_model for t in self.types) if pod.gpus else None
        if peak:
            # the bundled trainer's model FLOPs utilization (training/train.py); a job's own env overrides it
            placement["env"] = {**placement["env"], "PEAK_FLOPS_PER_DEVICE": f"{peak:g}"}
        if pod.hugepages_2mi:
            placement["hugepages_2mi"] = pod.hugepages_2mi
        return placement


def _share(pod: PodSize, share: float) -> PodSize:
    cpu = int(pod.cpu_millis * share) // 100 * 100
    mem = int(pod.memory_mib * share) // 256 * 256
    return replace(
        pod, cpu_millis=cpu, memory_mib=mem, shm_mib=min(pod.shm_mib, mem // 4), threads_per_proc=max(1, cpu // 1000)
    )


@dataclass(frozen=True, kw_only=True)
class IdleAlarmPlan:
    """The alarm on one GPU group whose GPUs all stay near zero utilization."""

    group: str
    instance_types: tuple[str, ...]
    """The group's types: the alarm reads the GPUs of nodes of these types (Container Insights has no group
    dimension; its per-GPU series carry InstanceType)."""
    minutes: int
    utilization_percent: float
    max_nodes: int
    """The group's maximum size: at most this many nodes sit idle (the plan report prices them)."""


@dataclass(frozen=True, kw_only=True)
class OperationsPlan:
    """Metrics, dashboard and alarms, decided once from ``operations`` and the groups."""

    metrics: bool = False
    """The Amazon CloudWatch Observability add-on runs (Container Insights with GPU and EFA metrics)."""
    agent_tolerations: tuple[Toleration, ...] = ()
    """What the add-on's DaemonSets tolerate: exactly the taints the plan puts on the groups (every group's, the
    system group's included, each once), so the agent reaches every node and no other taint."""
    application_signals: bool = False
    """The add-on keeps Application Signals (``operations.applicationSignals``)."""
    dashboard: bool = False
    idle_alarms: tuple[IdleAlarmPlan, ...] = ()
    alarm_email: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class StoragePlan:
    """The shared file system: EFS (multi-zone, a mount target per private subnet) or FSx for Lustre in
    one zone (new VPC) or subnet (existing VPC): that of the pinned groups whose jobs mount it."""

    backend: str
    """``efs`` or ``fsx``."""
    fsx: Optional[FsxConfig] = None
    """FSx settings (``None`` for EFS)."""
    zone: Optional[str] = None
    """FSx with a new VPC: the zone whose private subnet holds the file system."""
    subnet_id: Optional[str] = None
    """FSx with an existing VPC: the private subnet of the file system."""
    zone_key: Optional[str] = None
    """The config key the FSx zone/subnet comes from (for messages)."""
    client_groups: tuple[str, ...] = ()
    """Worker groups pinned where the file system is (the groups of the jobs first)."""
    efa_client_groups: tuple[str, ...] = ()
    """Those of them that use EFA: their EFA security groups reach an EFA-enabled file system."""
    mount_groups: tuple[str, ...] = ()
    """FSx: the groups whose pods mount the file system: the system group (the volume's one-shot Job, staging,
    TensorBoard, MPI launchers) and every worker group that runs a job (every job mounts the claim)."""

    @property
    def is_fsx(self) -> bool:
        """FSx for Lustre (else EFS)."""
        return self.backend == "fsx"


@dataclass(frozen=True, kw_only=True)
class DatasetPlan:
    """One dataset: staged onto the shared volume by a Job, or imported from S3 by the FSx file system's
    data repository (an S3 prefix under the linked path: nothing to stage, readable once the data is ready)."""

    name: str
    config: DatasetConfig
    path: str
    """Its folder relative to the shared mount (``datasets/cifar10``)."""
    imported: bool
    """Imported by the FSx data repository (no staging Job)."""

    @property
    def data_dir(self) -> str:
        """Its folder inside the pods."""
        return f"{SHARED_MOUNT}/{self.path}"


@dataclass(frozen=True, kw_only=True)
class HealthCheckPlan:
    """The all-reduce check before a job."""

    config: HealthCheckConfig
    threshold_gbytes_per_s: Optional[float]
    """Fail below this bus bandwidth (GB/s); ``None``: report only."""
    message_bytes: Optional[int]
    """Largest message; ``None``: the benchmark's default."""


@dataclass(frozen=True, kw_only=True)
class JobPlan:
    """One job as the program runs it."""

    name: str
    config: JobConfig
    group: NodeGroupPlan
    nodes: int
    min_nodes: int
    max_nodes: int
    procs_per_node: int
    image: ImagePlan
    """The job's image, in the build for its group's GPUs (:func:`stacks.plan.images.image_for`)."""
    toolbox: ImagePlan
    """The bundled image in the build for the job's group: its health check and its pods' helper containers."""
    dataset: Optional[str]
    data_dir: Optional[str]
    """Where the dataset is inside the pods."""
    after: tuple[str, ...]
    run_id: str
    """Stable id of the run: the job, its image, code and arguments, not its size (resizing resumes it)."""
    output_dir: str
    """The job's output folder inside the pods."""
    tensorboard_dir: Optional[str]
    placement: WorkerPlacement
    read_only_root_filesystem: bool
    """The job's containers run with a read-only root file system (``/tmp`` writable)."""
    health_check: Optional[HealthCheckPlan] = None
    code_folder: Optional[Path] = None
    """The folder of the project its ``code`` names (the program uploads it; ``None``: no code, or ``s3://``)."""
    code_hash: Optional[str] = None
    """The content hash of :attr:`code_folder` (its object's key; part of the run id: new code, a new run)."""

    @property
    def kind(self) -> str:
        """A registered kind's name (:data:`stacks.kinds.KINDS`)."""
        return self.config.kind

    @property
    def min_available(self) -> int:
        """Of the job's pods on its group, how many its PodDisruptionBudget keeps through a voluntary disruption (a
        node drained by an update, cordon and drain by hand): all but one when the group rolls (an elastic job: at most
        its ``minNodes``), all of them when it waits for its jobs (:func:`stacks.plan.nodes.min_available`)."""
        return min_available(self.group.update_strategy, self.nodes, self.min_nodes)


def _health_plan(cfg: Optional[HealthCheckConfig], group: NodeGroupPlan) -> Optional[HealthCheckPlan]:
    if cfg is None or not cfg.enabled:
        return None
    reference = REFERENCE_ALLREDUCE.get(group.profile.instance.name)
    threshold = cfg.min_bus_bandwidth_gbytes_per_s
    if threshold is None and cfg.enforce and reference is not None:
        threshold = round(HEALTH_THRESHOLD_SHARE * reference.busbw_gbytes_per_s, 2)
    message = cfg.max_bytes if cfg.max_bytes is not None else (reference.message_bytes if reference else None)
    return HealthCheckPlan(config=cfg, threshold_gbytes_per_s=threshold, message_bytes=message)


def _run_id(
    name: str,
    job: JobConfig,
    image: ImagePlan,
    dataset: Optional[DatasetConfig],
    group: NodeGroupPlan,
    procs: int,
    code_hash: Optional[str] = None,
) -> str:
    recipe = {
        "kind": job.kind,
        "image": image.version,
        "script": job.script,
        "command": job.command,
        "args": job.args,
        # a folder of the project by its content (where it is does not matter, what is in it does)
        "env": job.env,
        "code": f"sha256:{code_hash}" if code_hash else job.code,
        "dataset": dataset.source if dataset else None,
        "instance": group.profile.instance.name,
        "procs": procs,
        "output": job.output_dir,
    }
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    return k8s_name(name, digest, limit=52)


def jobs_waiting_for(plan: "Plan", groups: set[str]) -> list[str]:
    """The jobs that cannot start before ``groups`` have nodes (groups whose Capacity Block has not started): the
    jobs on them and the jobs after those, in job order."""
    out: list[str] = []
    for name, job in plan.jobs.items():
        if job.group.name in groups or any(a in out for a in job.after):
            out.append(name)
    return out


def job_order(jobs: Mapping[str, JobConfig]) -> list[str]:
    """Job names with every job after the jobs it waits for (config order otherwise)."""
    done: list[str] = []
    pending = list(jobs)
    while pending:
        for n in pending:
            if all(a in done for a in jobs[n].after):
                done.append(n)
                pending.remove(n)
                break
        else:  # pragma: no cover - the config loader rejects cycles
            raise ValueError(f"jobs wait for each other in a cycle: {pending}")
    return done


@dataclass(frozen=True)
class Plan:
    """Everything the program builds, derived from the configuration."""

    config: StackConfig
    system: NodeGroupPlan
    groups: Mapping[str, NodeGroupPlan]
    """Worker groups by name."""
    autoscale: bool
    """cluster-autoscaler runs (enabled and there are worker groups): it owns the groups' desired sizes."""
    storage: StoragePlan = StoragePlan(backend="efs")
    """The shared file system."""
    images: Mapping[str, ImagePlan] = field(default_factory=dict)
    datasets: Mapping[str, DatasetPlan] = field(default_factory=dict)
    """The datasets jobs read, by name."""
    jobs: Mapping[str, JobPlan] = field(default_factory=dict)
    """Jobs in an order where every job comes after the jobs it waits for."""
    operations: OperationsPlan = OperationsPlan()
    """Metrics, dashboard and alarms."""
    admission: Optional[AdmissionPlan] = None
    """Kueue's queues, quotas and priorities (:mod:`stacks.plan.admission`); ``None`` without jobs and teams."""

    @property
    def all_groups(self) -> list[NodeGroupPlan]:
        """The system group, then the worker groups."""
        return [self.system, *self.groups.values()]

    @property
    def gpu(self) -> bool:
        """Some worker group has NVIDIA GPUs (the NVIDIA device plugin is needed)."""
        return any(g.profile.gpus for g in self.groups.values())

    @property
    def efa(self) -> bool:
        """Some worker group uses EFA (the EFA device plugin is needed)."""
        return any(g.efa is not None for g in self.groups.values())

    @property
    def used_images(self) -> list[ImagePlan]:
        """The images the stack runs: the toolbox (staging, waits, checks) and every job's image."""
        used = [self.images[TOOLBOX_IMAGE], *(i for j in self.jobs.values() for i in (j.image, j.toolbox))]
        return list({i.variant: i for i in used}.values())

    @property
    def experiments(self) -> list[JobPlan]:
        """The benchmark's experiments (jobs of :attr:`jobs`), in config order; empty without a benchmark."""
        bench = self.config.benchmark
        return [self.jobs[n] for n in bench.experiments] if bench is not None else []

    def host_requirements(self, group: str) -> tuple[HostRequirement, ...]:
        """What the nodes of ``group`` must have on the host for the stack's features (catalog facts with their
        sources), in the order their bootstrap provides them: the Lustre client where pods mount FSx. The node
        groups' launch templates derive their user data from this, and only from this."""
        if self.storage.is_fsx and group in self.storage.mount_groups:
            return (FSX_CLIENT_HOST,)
        return ()

    def group(self, name: str) -> NodeGroupPlan:
        """A worker group, or the system group (``system``)."""
        return self.system if name == SYSTEM_ROLE else self.groups[name]


def build_plan(cfg: StackConfig) -> Plan:
    """The plan of a validated configuration (pure: no AWS, no Pulumi)."""
    system = _system_group_plan(cfg)
    groups = {name: _node_group_plan(cfg, name, g) for name, g in cfg.node_groups.items()}
    plan = Plan(
        config=cfg,
        system=system,
        groups=groups,
        autoscale=cfg.autoscaler.enabled and bool(groups),
        storage=storage_plan(cfg),
    )
    images = image_plans(cfg)
    datasets = {n: dataset_plan(cfg, n) for n in dict.fromkeys(j.dataset for j in cfg.jobs.values() if j.dataset)}
    jobs = {name: _job_plan(plan, name, images, datasets) for name in job_order(cfg.jobs)}
    plan = replace(plan, images=images, datasets=datasets, jobs=jobs, operations=operations_plan(plan))
    if not jobs and not cfg.teams:
        return plan
    return replace(plan, admission=_checked_admission(plan))


def _system_group_plan(cfg: StackConfig) -> NodeGroupPlan:
    """The system node group's plan: on-demand, one instance type, no EFA."""
    s = cfg.system_node_group
    system_type = cfg.instance(s.instance_type)
    return NodeGroupPlan(
        name=SYSTEM_ROLE,
        path="systemNodeGroup",
        types=(system_type,),
        profile=node_profile(SYSTEM_ROLE, [system_type], efa=False),
        capacity_type="ON_DEMAND",
        capacity_reservation_id=None,
        min_size=s.min_size,
        desired_size=s.desired_size,
        max_size=s.max_size,
        disk_size_gib=s.disk_size_gib,
        zone=None,
        subnet_id=None,
        ami=ami_plan(cfg.cluster, s.ami_release),
        update_strategy=s.update_strategy,
    )


def _node_group_plan(cfg: StackConfig, name: str, g: NodeGroupConfig) -> NodeGroupPlan:
    """One configured node group's plan: its instance types, node profile, capacity, repair and AMI."""
    types = tuple(cfg.instance(t) for t in g.instance_types)
    taints: tuple[NodeTaint, ...] = tuple({"key": t.key, "value": t.value, "effect": t.effect} for t in g.taints)
    return NodeGroupPlan(
        name=name,
        path=f"nodeGroups.{name}",
        types=types,
        profile=node_profile(name, types, efa=g.uses_efa(cfg.catalog), labels=g.labels, taints=taints),
        capacity_type=g.capacity_type,
        capacity_reservation_id=g.capacity_reservation_id,
        min_size=g.min_size,
        desired_size=g.desired_size,
        max_size=g.max_size,
        disk_size_gib=g.disk_size_gib,
        zone=g.availability_zone,
        subnet_id=g.subnet_id,
        price_discount=g.price_discount,
        spot_discount_set=g.spot_discount is not None,
        repair=repair_spec(g, types[0].gpus > 0),
        ami=ami_plan(cfg.cluster, g.ami_release),
        update_strategy=g.update_strategy,
    )


def _job_plan(plan: Plan, name: str, images: dict[str, ImagePlan], datasets: dict[str, DatasetPlan]) -> JobPlan:
    """One job's plan: its group, processes, image, run id, output folder, placement and health check."""
    cfg = plan.config
    job = cfg.jobs[name]
    assert job.node_group is not None  # filled in by the loader
    group = plan.group(job.node_group)
    procs = job.processes_per_node or group.profile.pod.procs_per_node
    dataset = cfg.datasets.get(job.dataset) if job.dataset else None
    code_folder = cfg.code_folders.get(name)
    digest = code_hash(str(code_folder)) if code_folder is not None else None
    image = image_for(images[job.image], group.types)
    run_id = _run_id(name, job, image, dataset, group, procs, digest)
    output_dir = f"{SHARED_MOUNT}/{job.output_dir or f'runs/{run_id}'}"
    tb = job.tensorboard_dir
    return JobPlan(
        name=name,
        config=job,
        group=group,
        nodes=job.nodes,
        min_nodes=job.node_range[0],
        max_nodes=job.node_range[1],
        procs_per_node=procs,
        image=image,
        toolbox=image_for(images[TOOLBOX_IMAGE], group.types),
        dataset=job.dataset,
        data_dir=datasets[job.dataset].data_dir if job.dataset else None,
        after=tuple(job.after),
        run_id=run_id,
        output_dir=output_dir,
        tensorboard_dir=f"{output_dir}/{tb}" if tb else None,
        placement=_job_placement(job, group, procs),
        read_only_root_filesystem=job.read_only_root,
        health_check=_health_plan(job.health_check, group),
        code_folder=code_folder,
        code_hash=digest,
    )


def _job_placement(job: JobConfig, group: NodeGroupPlan, procs: int) -> WorkerPlacement:
    """Where a job's workers go: its group's placement, with the job's own processes per node if it sets them."""
    placement = group.placement()
    if job.processes_per_node is None:
        return placement
    return {
        **placement,
        "procs_per_node": procs,
        "threads_per_proc": max(1, placement["cpu_millis"] // 1000 // procs),
    }


def _checked_admission(plan: Plan) -> AdmissionPlan:
    """The plan's Kueue admission; a :class:`ConfigError` when a job or a team's jobs could never be admitted."""
    admission = with_topology(plan, admission_plan(plan))
    problems = never_admitted(plan, admission) + idle_teams(admission) + beyond_team_stages(plan)
    problems += beyond_own_queue(plan, admission)
    if problems:
        raise ConfigError(problems)
    return admission


def repair_spec(g: NodeGroupConfig, gpu: bool) -> Optional[NodeRepairSpec]:
    """A group's node repair: ``nodeRepair`` as set, else on for a GPU group
    (:data:`~components.catalog.operations.NODE_REPAIR_GPU_DEFAULT`) and EKS's default (off) for a CPU one. A GPU
    group that repairs carries :data:`~components.catalog.operations.NODE_REPAIR_GPU_OVERRIDES` (no action on the
    agent's lost DCGM host engine, which is not a GPU fault)."""
    r = g.node_repair
    if r is None and not gpu:
        return None
    spec: NodeRepairSpec = {"enabled": NODE_REPAIR_GPU_DEFAULT if r is None else r.enabled}
    for name in ("max_unhealthy_nodes", "max_unhealthy_percent", "max_parallel_nodes", "max_parallel_percent"):
        value = None if r is None else getattr(r, name)
        if value is not None:
            spec[name] = int(value)
    if gpu and spec["enabled"]:
        spec["overrides"] = [
            {"condition": o.condition, "reason": o.reason, "wait_minutes": o.wait_minutes, "action": o.action}
            for o in NODE_REPAIR_GPU_OVERRIDES
        ]
    return spec


def operations_plan(plan: Plan) -> OperationsPlan:
    """Metrics on by default with GPU groups; the dashboard with the metrics; an idle alarm per GPU group with them;
    the agent tolerating exactly the taints of the groups."""
    ops = plan.config.operations
    gpu_groups = [g for g in plan.groups.values() if g.profile.gpus]
    metrics = ops.metrics_enabled(bool(gpu_groups))
    seen: dict[tuple[str, str, str], Toleration] = {}
    for g in plan.all_groups:
        for t in tolerations_for(g.profile.taints):
            seen.setdefault((t["key"], t.get("value", ""), t.get("effect", "")), t)
    alarm = ops.idle_gpu_alarm
    alarm_on = alarm.enabled if alarm.enabled is not None else metrics
    idle = (
        tuple(
            IdleAlarmPlan(
                group=g.name,
                instance_types=tuple(g.instance_types),
                minutes=alarm.minutes,
                utilization_percent=alarm.utilization_percent,
                max_nodes=g.max_size,
            )
            for g in gpu_groups
        )
        if alarm_on and metrics
        else ()
    )
    return OperationsPlan(
        metrics=metrics,
        agent_tolerations=tuple(seen.values()) if metrics else (),
        application_signals=ops.application_signals and metrics,
        dashboard=(ops.dashboard if ops.dashboard is not None else metrics) and metrics,
        idle_alarms=idle,
        alarm_email=ops.alarm_email if idle else None,
    )


def storage_plan(cfg: StackConfig) -> StoragePlan:
    """Where the shared file system goes (a validated configuration: the location exists)."""
    if cfg.storage.backend != "fsx":
        return StoragePlan(backend=cfg.storage.backend)
    fsx = cfg.storage.fsx_settings
    location, problems = fsx_location(
        fsx, cfg.node_groups, claim_readers(cfg.jobs), cfg.existing_vpc is not None, cfg.catalog
    )
    assert location is not None and not problems, problems  # the loader rejected such configurations
    return StoragePlan(
        backend="fsx",
        fsx=fsx,
        zone=location.zone,
        subnet_id=location.subnet_id,
        zone_key=location.key,
        client_groups=location.client_groups,
        efa_client_groups=location.efa_client_groups,
        mount_groups=(SYSTEM_ROLE, *claim_readers(cfg.jobs)),
    )


def dataset_plan(cfg: StackConfig, name: str) -> DatasetPlan:
    """A dataset's folder and whether the FSx data repository imports it (an S3 prefix under the linked
    path) or a staging Job puts it there."""
    d = cfg.datasets[name]
    if cfg.storage.backend == "fsx" and d.is_prefix:
        linked = cfg.storage.fsx_settings.data_repository.linked_path(d.source)
        assert linked is not None  # the loader rejected prefixes the file system does not import
        return DatasetPlan(name=name, config=d, path=linked, imported=True)
    return DatasetPlan(name=name, config=d, path=d.path.strip("/"), imported=False)
