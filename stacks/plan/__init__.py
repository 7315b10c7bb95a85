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

from dataclasses import replace
from typing import Any, Mapping, Optional

from components.catalog import REFERENCE_ALLREDUCE
from components.catalog.operations import NODE_REPAIR_GPU_DEFAULT, NODE_REPAIR_GPU_OVERRIDES
from components.code_folder import code_hash
from components.conventions import SHARED_MOUNT
from components.nodeplan import (
    NodeRepairSpec,
    node_profile,
)
from components.scheduling import SYSTEM_ROLE, NodeTaint, Toleration, tolerations_for
from components.workloads import WorkerPlacement
from components.workloads import run_id as job_run_id
from stacks.config import TOOLBOX_IMAGE, DatasetConfig, HealthCheckConfig, JobConfig, StackConfig
from stacks.config.derive import RUNS_DIR, claim_readers, fsx_location, imported
from stacks.config.errors import ConfigError
from stacks.config.nodegroups import NodeGroupConfig
from stacks.plan.admission import (
    admission_plan,
    beyond_own_queue,
    beyond_team_stages,
    beyond_unscaled_groups,
    idle_teams,
    never_admitted,
    with_topology,
)
from stacks.plan.images import ImagePlan, image_for, image_plans
from stacks.plan.model import (
    HEALTH_THRESHOLD_SHARE,
    ZONE_ID_LABEL,
    ZONE_LABEL,
    DatasetPlan,
    HealthCheckPlan,
    IdleAlarmPlan,
    JobPlan,
    NodeGroupPlan,
    OperationsPlan,
    Plan,
    StoragePlan,
    same_cluster,
)
from stacks.plan.nodes import ami_plan
from stacks.plan.queues import AdmissionPlan

# the plan's data (stacks.plan.model) as its readers import it
__all__ = [
    "ZONE_ID_LABEL",
    "ZONE_LABEL",
    "DatasetPlan",
    "HealthCheckPlan",
    "IdleAlarmPlan",
    "JobPlan",
    "NodeGroupPlan",
    "OperationsPlan",
    "Plan",
    "StoragePlan",
    "build_plan",
    "dataset_plan",
    "job_order",
    "job_steps",
    "jobs_waiting_for",
    "nodes_at_once",
    "operations_plan",
    "repair_spec",
    "same_cluster",
    "storage_plan",
]


def _health_plan(cfg: Optional[HealthCheckConfig], group: NodeGroupPlan) -> Optional[HealthCheckPlan]:
    if cfg is None or not cfg.enabled:
        return None
    reference = REFERENCE_ALLREDUCE.get(group.profile.instance.name)
    threshold = cfg.min_bus_bandwidth_gbytes_per_s
    if threshold is None and cfg.enforce and reference is not None and group.efa is not None:  # measured with EFA
        threshold = round(HEALTH_THRESHOLD_SHARE * reference.busbw_gbytes_per_s, 2)
    message = cfg.max_bytes if cfg.max_bytes is not None else (reference.message_bytes if reference else None)
    return HealthCheckPlan(config=cfg, threshold_gbytes_per_s=threshold, message_bytes=message)


#: A run recipe's entries (:func:`run_recipe`) as the upgrade summary names them (``after``: each input job by name).
RECIPE_WORDS = {
    "kind": "kind",
    "image": "image",
    "script": "script",
    "command": "command",
    "args": "args",
    "env": "env",
    "code": "code",
    "dataset": "dataset source",
    "instance": "instance type",
    "procs": "processes per node",
    "output": "outputDir",
}


def run_recipe(
    job: JobConfig,
    image: ImagePlan,
    dataset: Optional[DatasetConfig],
    group: NodeGroupPlan,
    procs: int,
    code_hash: Optional[str] = None,
    inputs: Optional[Mapping[str, str]] = None,
) -> dict[str, Any]:
    """What defines a job's run, the run id's input: a change of any of it is a new run in a new folder. Each entry
    but ``after`` has its words in :data:`RECIPE_WORDS`."""
    recipe: dict[str, Any] = {
        "kind": job.kind,
        "image": image.version,
        "script": job.script,
        "command": job.command,
        "args": job.args,
        "env": job.env,
        # a folder of the project by its content (where it is does not matter, what is in it does)
        "code": f"sha256:{code_hash}" if code_hash else job.code,
        "dataset": dataset.source if dataset else None,
        "instance": group.profile.instance.name,
        "procs": procs,
        "output": job.output_dir,
    }
    if inputs:  # the output folders of the jobs in its after: a new run of one is a new run of this job
        recipe["after"] = dict(inputs)
    return recipe


#: A run id's length at most: the job's name (shortened when longer) and the recipe's hash (:func:`run_id`).
RUN_ID_LIMIT = 52


def jobs_waiting_for(plan: Plan, groups: set[str]) -> list[str]:
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


def job_steps(plan: Plan) -> dict[str, int]:
    """Each job's step: 1 for a job that waits for nothing, else one more than the latest job it waits for. Jobs of
    one step start together (a benchmark's experiments all run in step 1, side by side)."""
    steps: dict[str, int] = {}
    for name in job_order({n: j.config for n, j in plan.jobs.items()}):
        steps[name] = 1 + max((steps[a] for a in plan.jobs[name].after if a in steps), default=0)
    return steps


def nodes_at_once(plan: Plan, group: NodeGroupPlan) -> int:
    """The most nodes the jobs of one step ask of a worker ``group`` at once (each worker pod takes a whole node): what
    the cluster autoscaler scales the group towards, up to its ``maxSize``."""
    steps = job_steps(plan)
    asked: dict[int, int] = {}
    for name, job in plan.jobs.items():
        if job.group.name == group.name:
            asked[steps[name]] = asked.get(steps[name], 0) + job.nodes
    return max(asked.values(), default=0)


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
    jobs: dict[str, JobPlan] = {}
    for name in job_order(cfg.jobs):  # a job after the jobs it waits for: its run follows their folders
        jobs[name] = _job_plan(plan, name, images, datasets, jobs)
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


def _job_plan(
    plan: Plan,
    name: str,
    images: dict[str, ImagePlan],
    datasets: dict[str, DatasetPlan],
    earlier: Mapping[str, JobPlan],
) -> JobPlan:
    """One job's plan: its group, processes, image, run id, output folder, placement and health check. ``earlier``:
    the plans of the jobs before it in :func:`job_order`, among them every job in its ``after``."""
    cfg = plan.config
    job = cfg.jobs[name]
    assert job.node_group is not None  # filled in by the loader
    group = plan.group(job.node_group)
    procs = job.processes_per_node or group.profile.pod.procs_per_node
    dataset = cfg.datasets.get(job.dataset) if job.dataset else None
    code_folder = cfg.code_folders.get(name)
    digest = code_hash(str(code_folder)) if code_folder is not None else None
    image = image_for(images[job.image], group.types)
    inputs = {a: earlier[a].output_dir for a in job.after}
    recipe = run_recipe(job, image, dataset, group, procs, digest, inputs)
    run_id = job_run_id(name, recipe, limit=RUN_ID_LIMIT)
    output_dir = f"{SHARED_MOUNT}/{job.output_dir or f'{RUNS_DIR}/{run_id}'}"
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
        run_recipe=recipe,
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
    problems += beyond_unscaled_groups(plan)
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
    if imported(cfg.storage, d):
        linked = cfg.storage.fsx_settings.data_repository.linked_path(d.source)
        assert linked is not None  # the loader rejected prefixes the file system does not import
        return DatasetPlan(name=name, config=d, path=linked, imported=True)
    return DatasetPlan(name=name, config=d, path=d.folder(name), imported=False)
