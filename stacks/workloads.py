"""The workloads, built on an environment from the plan (:func:`build_workloads`, :func:`build_jobs`).

They are the images, the jobs' code from folders of the project (one :class:`~components.job_code.JobCode`, only when
a job has such a folder), the training namespace's network policies, etcd, the MPI Operator, Kueue, dataset staging,
all-reduce health checks, the jobs of every kind in ``after`` order, and TensorBoard. The network policies come
first. Every job waits for the shared claim's data (:func:`_ready`), a staged dataset and its health check. Jobs on a
group whose Capacity Block has not started wait for the next ``pulumi up`` (:func:`_deferred_jobs`).

Why this order: docs/explanation/pulumi-up.md, "The workloads' order"."""

from dataclasses import dataclass, field
from typing import Optional, Sequence

import pulumi

from components.admission import Admission, AdmissionArgs, QueueFlavor
from components.conventions import check_job_name
from components.image import TrainingImage
from components.job_code import JobCode
from components.naming import fit_name
from components.ordering import ordered_after
from components.scheduling import SYSTEM_ROLE, system_node_selector
from components.workloads import (
    AllReduceHealthCheck,
    AllReduceHealthCheckArgs,
    BenchmarkCollector,
    DatasetStaging,
    DatasetStagingArgs,
    EtcdRendezvous,
    ImagePrePull,
    MpiOperator,
    TensorBoard,
    TrainingNetworkPolicies,
)
from components.workloads.disruption import JobDisruptionBudget
from stacks.collector import build_collector
from stacks.config import TOOLBOX_IMAGE
from stacks.environment import Environment
from stacks.kinds import KINDS, BuildContext, JobComponent
from stacks.plan import JobPlan, Plan, jobs_waiting_for
from stacks.plan.images import image_warnings
from stacks.plan.installs import runs_mpi_operator, uses_etcd
from stacks.plan.jobspec import check_spec, job_spec, queue_job
from stacks.plan.queues import RESOURCES, FlavorPlan
from stacks.plan.tags import stack_tags
from stacks.prepull import build_prepulls
from stacks.teams import TeamNamespace, build_team_namespaces

#: ``TrainingImage`` names its bucket and repository after itself: at most 40 characters.
IMAGE_COMPONENT_NAME_MAX = 40
#: ``JobCode`` names its bucket after itself: at most 40 characters.
JOB_CODE_COMPONENT_NAME_MAX = 40

#: A job's registered component (its kind's, :mod:`stacks.kinds`).
Job = JobComponent


@dataclass
class Workloads:
    """What :func:`build_workloads` registered."""

    image_uris: dict[str, pulumi.Output[str]]
    """Image name -> reference by digest."""
    images: dict[str, TrainingImage] = field(default_factory=dict)
    """The images built in CodeBuild."""
    network_policies: Optional[TrainingNetworkPolicies] = None
    etcd: Optional[EtcdRendezvous] = None
    mpi_operator: Optional[MpiOperator] = None
    admission: Optional[Admission] = None
    """Kueue and the stack's queues (every job is queued)."""
    staging: dict[str, DatasetStaging] = field(default_factory=dict)
    health_checks: dict[str, AllReduceHealthCheck] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    tensorboard: Optional[TensorBoard] = None
    prepulls: dict[str, ImagePrePull] = field(default_factory=dict)
    """The images pulled onto their nodes ahead of their pods, by group and image (:mod:`stacks.plan.prepull`)."""
    collector: Optional[BenchmarkCollector] = None
    """The benchmark's collector (``None`` without a benchmark)."""
    code: Optional[JobCode] = None
    """The bucket and objects of the jobs' code from folders of the project (``None``: no job has one)."""
    teams: dict[str, TeamNamespace] = field(default_factory=dict)
    """Team -> its namespace, policies and claim (:mod:`stacks.teams`)."""


@dataclass
class JobTarget:
    """Where a stack's jobs go: the cluster stack's own (:func:`target_of`), or a team's namespace and queue on a
    cluster another stack made (a jobs-only stack, :mod:`stacks.jobs_only`)."""

    plan: Plan
    k8s_opts: pulumi.ResourceOptions
    namespace: pulumi.Output[str]
    """The jobs' namespace (its network policies come first)."""
    pvc_name: pulumi.Output[str]
    data_ready: pulumi.Output[str]
    """Resolves once the shared file system's data can be read."""
    cluster_name: pulumi.Output[str]
    """The EKS cluster (the jobs' Pod Identity associations)."""
    waiting_groups: set[str] = field(default_factory=set)
    """Node groups whose Capacity Block is not active (not started yet, or ended)."""
    workload_opts: Optional[pulumi.ResourceOptions] = None
    """The options of objects whose pods resolve names (jobs, staging, health checks, etcd, TensorBoard): the cluster
    stack's :attr:`~stacks.environment.Environment.workload_opts`; ``None``: :attr:`k8s_opts` (a jobs-only stack's
    cluster runs its DNS already)."""
    local_queue: Optional[pulumi.Output[str]] = None
    """A team's LocalQueue, resolved once it exists (jobs-only: Kueue, the MPI Operator and the queues are the
    cluster stack's); ``None``: this stack installs them (:class:`~components.admission.Admission`)."""
    env: Optional[Environment] = None
    """The cluster stack's environment (the benchmark's collector reads it); ``None`` in a jobs-only stack."""


def target_of(env: Environment) -> JobTarget:
    """The cluster stack's own jobs: its training namespace and claim."""
    return JobTarget(
        plan=env.plan,
        k8s_opts=env.k8s_opts,
        workload_opts=env.workload_opts,
        namespace=env.storage.namespace,
        pvc_name=env.storage.pvc_name,
        data_ready=env.storage.data_ready,
        cluster_name=env.cluster.cluster_name,
        waiting_groups={n for n, g in env.node_groups.items() if g.waits_for_capacity},
        env=env,
    )


def _ready(target: JobTarget, data_dir: str) -> pulumi.Output[str]:
    """``data_dir`` once the shared file system's data can be read."""

    def at(_: str) -> str:
        return data_dir

    return target.data_ready.apply(at)


def build_workloads(env: Environment) -> Optional[Workloads]:
    """Register the workloads of the plan (``None`` when the stack has no jobs and no teams). With teams, the teams'
    namespaces (:mod:`stacks.teams`), the MPI Operator (their jobs may be MPIJobs) and Kueue with their queues are
    registered even when the stack has no jobs of its own."""
    plan = env.plan
    cfg = plan.config
    if not plan.jobs:
        if not cfg.teams:
            return None
        out = Workloads(image_uris={})
        _cluster_services(env, plan, env.storage.namespace, out, env.k8s_opts)
        return out
    return build_jobs(target_of(env))


def build_jobs(target: JobTarget) -> Workloads:
    """The jobs of the plan and what they need, into ``target``'s namespace and queue."""
    plan = target.plan
    name = plan.config.cluster_name
    pod_opts = target.workload_opts or target.k8s_opts
    etcd = uses_etcd(plan)

    out = Workloads(image_uris={})
    out.network_policies = _network_policies(target, etcd)
    # Everything in the namespace is created after the policies (the name resolves once they exist).
    namespace = out.network_policies.namespace
    _images(plan, out)
    # the images onto their nodes while the volume, the queues and the awaited Jobs are made
    out.prepulls = build_prepulls(
        plan,
        namespace=namespace,
        image_uris=out.image_uris,
        opts=target.k8s_opts,
        node_groups=_node_group_names(target),
        waiting_groups=frozenset(target.waiting_groups),
    )
    out.code = _job_code(plan)
    if etcd:
        # etcd keeps its data on the shared volume: rescheduled, it comes back with the rendezvous it had
        out.etcd = EtcdRendezvous(
            f"{name}-etcd",
            {"namespace": namespace, "node_selector": system_node_selector(), "pvc_name": target.pvc_name},
            opts=pod_opts,
        )
    if target.env is not None:  # the cluster stack: the MPI Operator, the teams' namespaces, Kueue and the queues
        _cluster_services(target.env, plan, namespace, out, target.k8s_opts)
    # a jobs-only stack without jobs builds no toolbox (Plan.used_images): no dataset to stage, no TensorBoard
    toolbox = out.image_uris.get(TOOLBOX_IMAGE)
    if toolbox is not None:
        out.staging.update(_staging(target, ordered_after(namespace, _queue_name(target, out)), toolbox, pod_opts))
    deferred = _deferred_jobs(plan, target.waiting_groups)
    for job in plan.jobs.values():
        if job.name in deferred:
            continue
        out.jobs[job.name] = _job(target, plan, job, out, namespace, target.pvc_name)
    if plan.config.benchmark is not None and target.env is not None:  # a jobs-only stack has none (config rules)
        if any(e.name in deferred for e in plan.experiments):
            pulumi.log.warn(
                "the benchmark's collector waits for every experiment, and some wait for their Capacity Block: it is "
                "created with them, by the first `pulumi up` after the block's start"
            )
        else:
            out.collector = build_collector(target.env, out.jobs, out.image_uris, namespace)
    out.tensorboard = _tensorboard(target, namespace, toolbox, pod_opts) if toolbox is not None else None
    return out


def _network_policies(target: JobTarget, uses_etcd: bool) -> TrainingNetworkPolicies:
    """The namespace's network policies: the jobs' pods (and etcd's) may talk to each other."""
    plan = target.plan
    # Jobs whose pods talk to each other: every job and its health check.
    peer_jobs = [n for j in plan.jobs.values() for n in (j.name, *([check_job_name(j.name)] if j.health_check else []))]
    return TrainingNetworkPolicies(
        f"{plan.config.cluster_name}-network-policies",
        {"namespace": target.namespace, "jobs": peer_jobs, "etcd": uses_etcd},
        opts=target.k8s_opts,
    )


def _images(plan: Plan, out: Workloads) -> None:
    """Each image the jobs use into ``out``: a prebuilt one as it is, the others built in CodeBuild."""
    cfg = plan.config
    for image in plan.used_images:
        if image.prebuilt:
            for note in image_warnings(image, plan.jobs.values()):
                pulumi.log.warn(note)
            out.image_uris[image.variant] = pulumi.Output.from_input(image.prebuilt)
            continue
        assert image.context is not None
        built = TrainingImage(
            fit_name(f"{cfg.cluster_name}-image-{image.variant}", IMAGE_COMPONENT_NAME_MAX),
            {
                "context_dir": str(image.context),
                "dockerfile": image.dockerfile,
                "build_args": image.build_args,
                "keep_images": cfg.image_build.keep_images,
                "build_timeout_minutes": cfg.image_build.build_timeout_minutes,
                "compute_type": cfg.image_build.compute_type,
                "tags": stack_tags(cfg),
                "aws": cfg.aws,  # the stack's AWS provider settings: build where the repository is
            },
        )
        out.images[image.variant] = built
        out.image_uris[image.variant] = built.image_uri


def _job_code(plan: Plan) -> Optional[JobCode]:
    """The jobs' code folders, uploaded for their pods to fetch (none when no job has one)."""
    code_folders = {j.name: str(j.code_folder) for j in plan.jobs.values() if j.code_folder is not None}
    if not code_folders:
        return None
    return JobCode(
        fit_name(f"{plan.config.cluster_name}-job-code", JOB_CODE_COMPONENT_NAME_MAX),
        {"folders": code_folders, "tags": stack_tags(plan.config)},
    )


def _cluster_services(
    cluster_env: Environment,
    plan: Plan,
    namespace: pulumi.Output[str],
    out: Workloads,
    k8s_opts: pulumi.ResourceOptions,
) -> None:
    """The cluster stack's MPI Operator (when a job or a team needs it), the teams' namespaces, Kueue and the queues."""
    cfg = plan.config
    if runs_mpi_operator(plan):
        out.mpi_operator = MpiOperator(f"{cfg.cluster_name}-mpi-operator", {}, opts=k8s_opts)
    out.teams = build_team_namespaces(cluster_env)
    out.admission = _admission(plan, namespace, out, k8s_opts, cluster_env.provisioning_crd)


def _staging(
    target: JobTarget, namespace: pulumi.Output[str], toolbox: pulumi.Output[str], pod_opts: pulumi.ResourceOptions
) -> dict[str, DatasetStaging]:
    """A staging Job per dataset the file system does not import, in ``namespace``: an Output that resolves once the
    queue exists, so after Kueue's release is ready. Kueue's webhook checks every batch Job created (failurePolicy
    Fail) and refuses them while Kueue starts."""
    plan = target.plan
    staging: dict[str, DatasetStaging] = {}
    for ds_name, ds in plan.datasets.items():
        if ds.imported:
            continue  # the FSx data repository imports it: nothing to stage
        d = ds.config
        staging_args: DatasetStagingArgs = {
            "namespace": namespace,
            "pvc_name": target.pvc_name,
            "image": toolbox,
            "source": d.source,
            "dest_path": ds.path,
            "node_selector": system_node_selector(),
            "cluster_name": target.cluster_name,
            "timeout_minutes": d.timeout_minutes,
        }
        if d.md5:
            staging_args["md5"] = d.md5
        if d.expected_bytes:
            staging_args["expected_bytes"] = d.expected_bytes
        staging[ds_name] = DatasetStaging(f"{plan.config.cluster_name}-stage-{ds_name}", staging_args, opts=pod_opts)
    return staging


def _deferred_jobs(plan: Plan, waiting: set[str]) -> list[str]:
    """The jobs not created now, on groups whose Capacity Block is not active (or after such jobs), with a warning."""
    deferred = jobs_waiting_for(plan, waiting)
    if deferred:
        pulumi.log.warn(
            f"jobs {', '.join(deferred)} run on {', '.join(sorted(plan.groups[g].path for g in waiting))} (or after "
            "jobs that do), whose Capacity Block has not started (or has ended): the group has no nodes, so they are "
            "not created now (their health checks and deadlines would run out); the environment, images and datasets "
            "are ready, and the first `pulumi up` while a block of the group is active creates them"
        )
    return deferred


def _tensorboard(
    target: JobTarget, namespace: pulumi.Output[str], toolbox: pulumi.Output[str], pod_opts: pulumi.ResourceOptions
) -> Optional[TensorBoard]:
    """TensorBoard over the jobs' log folders (none when no job sets ``tensorboard``)."""
    log_dirs = {j.name: j.tensorboard_dir for j in target.plan.jobs.values() if j.tensorboard_dir}
    if not log_dirs:
        return None
    return TensorBoard(
        f"{target.plan.config.cluster_name}-tensorboard",
        {
            "namespace": namespace,
            "pvc_name": target.pvc_name,
            "image": toolbox,
            "log_dirs": log_dirs,
            "node_selector": system_node_selector(),
        },
        opts=pod_opts,
    )


def _node_group_names(target: JobTarget) -> Optional[dict[str, pulumi.Output[str]]]:
    """Group -> its EKS node group's name, on the cluster stack (a jobs-only stack's groups exist already)."""
    if target.env is None:
        return None
    names = {g: ng.node_group_name for g, ng in target.env.node_groups.items()}
    names[SYSTEM_ROLE] = target.env.cluster.system_node_group_name
    return names


def _queue_name(target: JobTarget, out: Workloads) -> pulumi.Output[str]:
    """The LocalQueue the jobs go to, resolved once it exists."""
    if target.local_queue is not None:
        return target.local_queue
    assert out.admission is not None
    return out.admission.queue_name


def _flavor_args(f: FlavorPlan) -> QueueFlavor:
    out: QueueFlavor = {"name": f.name, "node_labels": f.node_labels, "node_taints": f.node_taints, "quota": f.quota}
    if f.topology is not None:
        out["topology_name"] = f.topology.name
    return out


def _admission(
    plan: Plan,
    namespace: pulumi.Output[str],
    out: Workloads,
    opts: pulumi.ResourceOptions,
    provisioning_crd: Optional[pulumi.Resource] = None,
) -> Admission:
    """Kueue and the plan's queues (:mod:`stacks.plan.admission`), after the MPI Operator when there is one and after
    the ProvisioningRequest CRD when its admission check is used."""
    a = plan.admission
    assert a is not None  # a plan with jobs has one
    args: AdmissionArgs = {
        "namespace": namespace,
        "local_queue": a.local_queue,
        "cluster_queue": a.cluster_queue,
        "flavors": [_flavor_args(f) for f in a.flavors],
        "resources": list(RESOURCES),
        "priorities": dict(a.priorities),
        "queueing_strategy": a.queueing_strategy,
        "pods_ready_timeout_s": a.pods_ready_timeout_s,
        "requeue_backoff_base_s": a.requeue_backoff_base_s,
        "requeue_backoff_max_s": a.requeue_backoff_max_s,
        "node_selector": system_node_selector(),
    }
    if a.cohort is not None:
        args["cohort"] = a.cohort
        args["own_quota"] = a.own_quota
        args["namespace_name"] = a.namespace
        args["teams"] = [
            {
                "namespace": out.teams[t.name].namespace,
                "namespace_name": t.namespace,
                "local_queue": t.local_queue,
                "cluster_queue": t.cluster_queue,
                "quota": t.quota,
                "may_borrow": t.may_borrow,
                "may_lend": t.may_lend,
            }
            for t in a.teams
        ]
    if a.topologies:
        args["topologies"] = [{"name": t.name, "levels": list(t.levels)} for t in a.topologies]
    if a.provisioning is not None:
        assert provisioning_crd is not None, "the environment registers the CRD whenever the plan uses the check"
        p = a.provisioning
        args["provisioning"] = {
            "check": p.check,
            "config": p.config,
            "provisioning_class": p.provisioning_class,
            "flavors": list(p.flavors),
            "backoff_base_s": p.backoff_base_s,
            "backoff_max_s": p.backoff_max_s,
            "backoff_limit_count": p.backoff_limit_count,
        }
    after = [r.urn for r in (out.mpi_operator, provisioning_crd) if r is not None]
    if after:
        args["after"] = after
    return Admission(f"{plan.config.cluster_name}-admission", args, opts=opts)


def _team(target: JobTarget, plan: Plan) -> Optional[str]:
    """The team whose queue a jobs-only stack's jobs go to; ``None`` in the cluster stack (its own queues)."""
    return (plan.config.cluster.team or None) if target.local_queue is not None else None


def _health_check(
    target: JobTarget,
    plan: Plan,
    job: JobPlan,
    name: str,
    namespace: pulumi.Output[str],
    pvc: pulumi.Output[str],
    toolbox: pulumi.Output[str],
    after: Sequence[pulumi.Input[str]],
) -> AllReduceHealthCheck:
    """The all-reduce check a job runs on its nodes before it starts (``jobs.<name>.healthCheck``), created after
    ``after`` (the queue and the jobs the job waits for)."""
    hc = job.health_check
    assert hc is not None
    check_args: AllReduceHealthCheckArgs = {
        "job": check_spec(
            plan, job, namespace=namespace, pvc=pvc, image=toolbox, team=_team(target, plan), after=list(after)
        ),
        "placement": job.placement,
        "nodes": job.nodes,
        "timeout_minutes": hc.config.timeout_minutes,
    }
    if hc.message_bytes is not None:
        check_args["max_bytes"] = hc.message_bytes
    if hc.threshold_gbytes_per_s is not None:
        check_args["min_bus_bandwidth_gbytes_per_s"] = hc.threshold_gbytes_per_s
    return AllReduceHealthCheck(f"{name}-allreduce", check_args, opts=target.workload_opts or target.k8s_opts)


def _job(
    target: JobTarget,
    plan: Plan,
    job: JobPlan,
    out: Workloads,
    namespace: pulumi.Output[str],
    pvc: pulumi.Output[str],
) -> Job:
    """One job (and its health check) from its plan."""
    cfg = plan.config
    name = f"{cfg.cluster_name}-{job.name}"
    c = job.config
    toolbox = out.image_uris[job.toolbox.variant]
    image = out.image_uris[job.image.variant]
    spec = job_spec(plan, job, namespace=namespace, pvc=pvc, image=image, helper_image=toolbox)
    # how many of the job's pods a drained node (a node group update) may take at once
    JobDisruptionBudget(
        f"{name}-disruption",
        {
            "namespace": namespace,
            "job_name": spec["job_name"],
            "min_available": job.min_available,
            "selector": dict(KINDS[job.kind].worker_selector),
        },
        opts=target.k8s_opts,
    )
    queue_name = _queue_name(target, out)
    queue_job(spec, plan, job, _team(target, plan))
    # created once every job it waits for exists (an awaited one: completed), as its health check is, so Kueue sees
    # them first; one whose predecessor is never made (a failed health check stops pulumi up) is not made either
    after: list[pulumi.Input[str]] = [out.jobs[a].job_name for a in job.after]
    after.append(queue_name)
    if job.dataset:
        ds = plan.datasets[job.dataset]
        # an imported dataset can be read once the file system's data is ready; a staged one once its Job completed.
        # An input, not only an order: a staging made again (another source, into the folder the job reads) replaces
        # the job first (tests/mock/test_replacement_cascade.py)
        spec["data_dir"] = _ready(target, ds.data_dir) if ds.imported else out.staging[job.dataset].data_dir
    if job.code_folder is not None:
        assert out.code is not None
        spec["code_uri"] = out.code.uris.apply(lambda uris: uris[job.name])
        spec["cluster_name"] = target.cluster_name
    elif c.code:
        spec["code_uri"] = c.code
        spec["cluster_name"] = target.cluster_name
    if job.health_check is not None:
        check = _health_check(target, plan, job, name, namespace, pvc, toolbox, list(after))
        out.health_checks[job.name] = check
        after.append(check.report_path)
    spec["after"] = after

    return KINDS[job.kind].build(
        BuildContext(
            name=name,
            job=job,
            spec=spec,
            opts=target.workload_opts or target.k8s_opts,
            etcd_endpoint=out.etcd.endpoint if out.etcd is not None else None,
            mpi_operator_ready=out.mpi_operator.crd_name if out.mpi_operator is not None else None,
        )
    )
