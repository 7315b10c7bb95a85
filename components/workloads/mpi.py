"""MPI jobs (Horovod, nccl-tests, any MPI program) as ``MPIJob`` (kubeflow.org/v2beta1), run by the Kubeflow
MPI Operator, which :class:`~components.workloads.mpi_operator.MpiOperator` installs.

The operator creates the workers, an SSH key Secret and the hostfile (``/etc/mpi/hostfile``), then the
launcher, which runs ``mpirun``. This module builds the launcher's command line and its environment
(:func:`mpi_launcher`, :func:`mpirun_command`): ``mpirun`` by its absolute path in the image (so Open MPI finds
``orted`` on the workers, whose sshd sessions do not get the image's environment), the workers' environment and the
image's ``PATH``/``LD_LIBRARY_PATH`` forwarded with ``-x``, so every rank sees the same variables as a pod of any
other job on that node group, plus ``MASTER_ADDR``/``MASTER_PORT``
(the first worker), for programs that bootstrap over TCP (``torch.distributed``'s ``env://``) with their rank
and size from OpenMPI (``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``).
"""

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, Sequence, TypedDict, get_args

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes._utilities import get_version as k8s_sdk_version
from typing_extensions import NotRequired

from components.args import checks_args
from components.conventions import (
    COMMON_LABELS,
    IMAGE_PULL_POLICY,
    JOB_LABEL,
    LAUNCHER_CPU_MILLIS,
    LAUNCHER_MEMORY_MIB,
    NO_EVICT,
)
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.quantities import mebibytes, millicores
from components.workloads.identity import JobIdentity, job_identity
from components.workloads.job_objects import MPI_JOB
from components.workloads.pods import (
    JOB_SCRATCH_SIZE,
    SHARED_VOLUME_MOUNT,
    SMALL_HELPER_RESOURCES,
    TMP_MOUNT,
    WORKER_CONTAINER,
    camel,
    container_security,
    created_after,
    env_list,
    job_pod,
    on_group,
    output_folder_containers,
    scratch_volume,
    shared_volume,
    shm_volume,
    unique_volumes,
    worker_resources,
)
from components.workloads.spec import (
    DEFAULT_MAX_RESTARTS,
    MASTER_PORT,
    WORKSPACE,
    JobSpec,
    WorkerPlacement,
    apply_input,
    job_env,
    stop_grace_seconds,
    worker_env,
)
from components.workloads.toolbox import WORKERS_WAIT_SCRIPT
from components.workloads.waits import (
    await_annotations,
    await_seconds,
    await_timeouts,
    finished,
    job_deadline_seconds,
    queue_seconds,
)

#: What the launcher (``mpirun``, on the system nodes) requests (:data:`components.conventions.LAUNCHER_CPU_MILLIS`).
LAUNCHER_RESOURCES: k8s.core.v1.ResourceRequirementsArgsDict = {
    "requests": {"cpu": millicores(LAUNCHER_CPU_MILLIS), "memory": mebibytes(LAUNCHER_MEMORY_MIB)},
    "limits": {"memory": "1Gi"},
}
#: ``launcherCreationPolicy`` values, spelled exactly as the controller compares them: the CRD does not
#: validate the field and the controller tests for ``AtStartup`` only, so any other spelling silently
#: means "wait for workers" (https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go#L678).
LauncherCreationPolicy = Literal["AtStartup", "WaitForWorkersReady"]
LAUNCHER_CREATION_POLICIES: tuple[str, ...] = get_args(LauncherCreationPolicy)
#: The hostfile the operator mounts in the launcher.
HOSTFILE = "/etc/mpi/hostfile"
#: Our MPI images' convention (images/nccl-tests, images/horovod): user ``mpiuser`` (UID 1000) runs sshd with
#: its own configuration; the operator mounts the SSH keys in its home.
SSH_AUTH_MOUNT_PATH = "/home/mpiuser/.ssh"
SSHD_COMMAND = ("/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config")
#: The port that sshd listens on (our images' ``sshd_config`` and ``ssh_config``; a test ties them).
SSHD_PORT = 2222
#: The launcher's last init container: it waits until every worker accepts connections on its port. MPI Operator
#: v0.8.0 starts the launcher together with the workers when Kueue admits a suspended MPIJob, whatever its
#: ``launcherCreationPolicy`` (https://github.com/kubeflow/mpi-operator/issues/615).
WORKERS_WAIT_CONTAINER = "wait-for-workers"
#: The image's own variables the launcher forwards to the ranks besides the job's: sshd starts every session on a
#: worker with a fresh environment (its default PATH, no LD_LIBRARY_PATH), so without them the ranks lose the image's
#: ``ENV PATH``/``LD_LIBRARY_PATH`` (``libnccl.so.2: cannot open shared object file``). The launcher runs the same
#: image, so its values are the image's. AWS's nccl-tests MPIJob forwards the same two
#: (https://github.com/aws-samples/awsome-distributed-training/blob/7217859f67bc693c52ff175ccc6082c41dbd7a1b/micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml#L26-L37).
IMAGE_ENV_FORWARDED: tuple[str, ...] = ("LD_LIBRARY_PATH", "PATH")
#: OpenMPI settings AWS's EFA MPI jobs use: TCP for MPI's own traffic (NCCL/libfabric carries the data
#: over EFA), no UCX, not the loopback or container bridges.
OPENMPI_MCA: Mapping[str, str] = {"pml": "^ucx", "btl": "tcp,self", "btl_tcp_if_exclude": "lo,docker0,veth_def_agent"}


def mpirun_path(mpi_prefix: str) -> str:
    """``<prefix>/bin/mpirun``: Open MPI run by its absolute path behaves as with ``--prefix <prefix>``: on every
    remote host it starts ``<prefix>/bin/orted`` with ``<prefix>/bin`` on ``PATH`` and ``<prefix>/lib`` on
    ``LD_LIBRARY_PATH`` (orterun(1), https://github.com/open-mpi/ompi/blob/v4.1.7/orte/tools/orterun/orterun.1in#L1635-L1643;
    Open MPI 5's mpirun(1) says the same). Called by name, ``orted`` must be on the PATH sshd gives a session, which
    holds neither /opt/amazon/openmpi/bin nor the NGC images' MPI."""
    return f"{mpi_prefix.rstrip('/')}/bin/mpirun"


def mpirun_command(
    program: Sequence[str],
    *,
    nodes: int,
    slots: int,
    env_names: Sequence[str],
    mpi_prefix: str,
    hostfile: str = HOSTFILE,
    mca: Mapping[str, str] = OPENMPI_MCA,
    wdir: Optional[str] = None,
) -> list[str]:
    """The launcher's ``mpirun`` (OpenMPI) by its absolute path under ``mpi_prefix`` (:func:`mpirun_path`):
    ``slots`` ranks on each of ``nodes`` hosts of the hostfile (the hostfile is named explicitly: OpenMPI 5 ignores
    the operator's ORTE variable, https://github.com/kubeflow/mpi-operator/issues/842), not bound to cores (the
    frameworks place their threads), every variable of ``env_names`` and the image's :data:`IMAGE_ENV_FORWARDED`
    forwarded to the ranks; with ``wdir``, the ranks start in that folder (``--wdir``)."""
    cmd = [
        mpirun_path(mpi_prefix),
        "--hostfile",
        hostfile,
        "-np",
        str(nodes * slots),
        "--map-by",
        f"ppr:{slots}:node",
        "--bind-to",
        "none",
        *(["--wdir", wdir] if wdir else []),
    ]
    for k, v in mca.items():
        cmd += ["--mca", k, v]
    for name in sorted({*env_names, *IMAGE_ENV_FORWARDED}):
        cmd += ["-x", name]
    return cmd + list(program)


def mpi_worker_hosts(job_name: str, namespace: str, nodes: int) -> list[str]:
    """The hostnames the operator writes into the hostfile, in order: ``<job>-worker-<i>.<job>.<namespace>.svc``
    (worker pods ``<job>-worker-<i>`` in the subdomain of the job's headless Service ``<job>``,
    https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go#L1309)."""
    return [f"{job_name}-worker-{i}.{job_name}.{namespace}.svc" for i in range(nodes)]


def mpi_launcher(
    spec: JobSpec,
    placement: WorkerPlacement,
    *,
    nodes: int,
    slots: int,
    program: Sequence[str],
    hosts: pulumi.Input[Sequence[str]],
    mpi_prefix: str,
    launcher_command: Sequence[str] = (),
    hostfile: str = HOSTFILE,
    mca: Mapping[str, str] = OPENMPI_MCA,
    port: int = MASTER_PORT,
    wdir: Optional[str] = None,
) -> tuple[list[str], dict[str, pulumi.Input[str]]]:
    """The launcher's command and environment (the workers get the same environment): ``launcher_command``
    followed by :func:`mpirun_command` running ``program`` and the job's ``args`` on ``slots`` ranks of each
    of ``nodes`` hosts (``<mpi_prefix>/bin/mpirun``, so the workers' ``orted`` is found), forwarding the image's
    ``PATH`` and ``LD_LIBRARY_PATH`` and every variable of the environment: the node type's settings
    (:func:`worker_env`), ``MASTER_ADDR`` (the first of ``hosts``, the hostfile's hosts in order: on the cluster
    :func:`mpi_worker_hosts`) and ``MASTER_PORT``, then the job's variables (:func:`job_env`, which win); the ranks
    start in ``wdir`` when given."""
    env: dict[str, pulumi.Input[str]] = {
        **worker_env(placement),
        "MASTER_ADDR": apply_input(hosts, lambda h: h[0]),
        "MASTER_PORT": str(port),
        **job_env(spec, nodes=nodes, procs_per_node=slots),
    }
    mpirun = mpirun_command(
        [*program, *(spec.get("args") or [])],
        nodes=nodes,
        slots=slots,
        env_names=list(env),
        mpi_prefix=mpi_prefix,
        hostfile=hostfile,
        mca=mca,
        wdir=wdir,
    )
    return [*launcher_command, *mpirun], env


class MpiJobObject(pulumi.CustomResource):
    """An ``MPIJob`` registered as pulumi-kubernetes' ``apiextensions.CustomResource`` registers one, with the object's
    ``status`` as an output: the provider returns the object it awaited."""

    status: pulumi.Output[Any]
    """The MPIJob's status when it was created (awaited: when it succeeded or failed)."""

    def __init__(
        self,
        name: str,
        metadata: pulumi.Input[Mapping[str, Any]],
        spec: pulumi.Input[Mapping[str, Any]],
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        props = {"apiVersion": MPI_JOB.api_version, "kind": MPI_JOB.kind, "metadata": metadata, "spec": spec}
        super().__init__(
            MPI_JOB.type_token,
            name,
            {**props, "status": None},
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_sdk_version())),
        )


class MpiJobArgs(TypedDict):
    """Inputs of :class:`MpiJob`."""

    job: JobSpec
    """Namespace, claim, image, output folder, arguments, data, order and code of the job."""
    placement: WorkerPlacement
    """The workers' node selection, tolerations and per-pod requests (from the node group's plan)."""
    launcher_node_selector: Mapping[str, str]
    """Where the launcher (which only runs ``mpirun``) goes: the system nodes."""
    command: Sequence[str]
    """The program every rank runs (``args`` of the job follow it)."""
    nodes: int
    """Workers (one pod per node)."""
    operator_ready: pulumi.Input[str]
    """An Output of the installed operator (``MpiOperator.crd_name``): the MPIJob is created after it."""
    mpi_prefix: str
    """Where the image's Open MPI is installed, its ``OPAL_PREFIX`` (``/opt/hpcx/ompi`` in the shipped
    ``images/horovod``, ``/opt/amazon/openmpi`` in images with the EFA installer's): the launcher runs
    ``<mpi_prefix>/bin/mpirun`` so the workers' ``orted`` is found over ssh (:func:`mpirun_path`)."""
    launcher_command: NotRequired[Sequence[str]]
    """A command the launcher runs with ``mpirun ...`` appended (e.g. a parser of the benchmark's output)."""
    slots_per_worker: NotRequired[int]
    """Ranks per worker; default the placement's processes per node (one per GPU)."""
    launcher_creation_policy: NotRequired[str]
    """``WaitForWorkersReady`` (default: the launcher starts once every worker runs sshd; with the job's
    ``helper_image`` its init container also waits for them, as a queued job needs) or ``AtStartup`` (refused with
    the job's ``code_uri``: the workers download it before their sshd starts)."""
    worker_command: NotRequired[Sequence[str]]
    """What workers run (sshd for the launcher's ``mpirun``); default our images' non-root sshd."""
    worker_port: NotRequired[int]
    """The port the workers' command listens on; the launcher waits until every worker accepts connections there
    (with the job's ``helper_image``). Default our images' sshd port, 2222."""
    ssh_auth_mount_path: NotRequired[str]
    """Where the operator mounts the SSH keys; default our images' ``/home/mpiuser/.ssh``."""
    backoff_limit: NotRequired[int]
    """Failed launcher pods the MPIJob retries before it fails (each runs the program again). Default 3."""


class MpiJob(pulumi.ComponentResource):
    """An ``MPIJob``: a launcher on the system nodes running ``mpirun`` (after waiting for the jobs it depends
    on), and ``nodes`` workers with the node group's GPUs, EFA devices, huge pages and NCCL/libfabric
    environment, one per node. Needs a ``kubernetes`` provider in ``opts`` and the MPI Operator."""

    job_name: pulumi.Output[str]
    """Name of the MPIJob."""
    output_dir: pulumi.Output[str]
    """The job's output folder inside the pods; resolves after the MPIJob is created."""

    @checks_args
    def __init__(self, name: str, args: MpiJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:MpiJob", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        shape = _shape(name, args)
        spec = args["job"]
        identity = job_identity(self, name, spec)
        job_name, nodes = shape.job_name, shape.nodes
        hosts = pulumi.Output.from_input(spec["namespace"]).apply(lambda ns: mpi_worker_hosts(job_name, ns, nodes))
        command, env = mpi_launcher(
            spec,
            args["placement"],
            nodes=nodes,
            slots=shape.slots,
            program=args["command"],
            hosts=hosts,
            mpi_prefix=args["mpi_prefix"],
            launcher_command=args.get("launcher_command") or (),
            wdir=WORKSPACE if identity.code else None,  # the job's code, in the launcher and in every worker
        )
        mpi_spec = _mpi_spec(
            args,
            shape,
            _launcher_template(args, shape, identity, command, env, hosts),
            _worker_template(args, shape, identity, env),
        )
        job = self._mpijob(name, args, shape, identity, mpi_spec)
        # resolves once created (and, when awaited, succeeded); an awaited MPIJob that failed stops `pulumi up` here
        created = finished(MPI_JOB, job_name, job, awaited=bool(spec.get("wait_for_completion")))
        self.job_name = created
        self.output_dir = created.apply(lambda _: spec["output_dir"])
        self.register_outputs({"job_name": self.job_name, "output_dir": self.output_dir})

    def _mpijob(
        self, name: str, args: MpiJobArgs, shape: "_Shape", identity: JobIdentity, mpi_spec: Mapping[str, Any]
    ) -> MpiJobObject:
        """The MPIJob object, created after the operator and the job's setup, awaited as the job asks."""
        spec = args["job"]
        # pulumi-kubernetes awaits a custom resource only as its waitFor annotation says: until the MPIJob succeeded or
        # failed, for its deadline and the time it may queue
        annotations = await_annotations(MPI_JOB, bool(spec.get("wait_for_completion")))
        # the launcher Job's deadline starts with the Job: after admission when queued (its wait for the workers is
        # inside it), else once every worker runs with WaitForWorkersReady (mpi-operator v0.8.0
        # pkg/controller/mpi_job_controller.go); the time before is outside it
        waits_s = await_seconds(
            shape.timeout_s,
            queue_s=queue_seconds(
                bool(shape.queue) or shape.policy == "WaitForWorkersReady", spec.get("queue_timeout_hours")
            ),
            grace_s=shape.grace_s,
        )
        after = spec.get("after") or []
        return MpiJobObject(
            f"{name}-mpijob",
            metadata={
                "name": shape.job_name,
                "namespace": spec["namespace"],
                "labels": {**shape.labels, **shape.queue},
                "annotations": annotations,
            },
            spec=mpi_spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[created_after({**spec, "after": [*after, args["operator_ready"]]}, identity.waits)],
                delete_before_replace=True,
                custom_timeouts=await_timeouts(waits_s, shape.grace_s),
                ignore_changes=[MPI_JOB.suspend] if shape.queue else None,
                # pulumi-kubernetes changes a custom resource in place, and the MPI Operator acts on no change of a
                # finished MPIJob, nor of a running one's launcher (v0.8.0 pkg/controller/mpi_job_controller.go:
                # syncHandler returns for a finished job; a resumed launcher Job keeps its template): a new spec, a
                # new run's above all, must be a new MPIJob, as a batch/v1 Job's new pod template is
                replace_on_changes=["spec"],
            ),
        )


@dataclass(frozen=True)
class _Shape:
    """What an MPIJob's arguments decide before any resource exists (validated: a bad argument fails here)."""

    job_name: str
    nodes: int
    slots: int
    policy: str
    worker_port: int
    labels: dict[str, str]
    read_only: bool
    timeout_s: int
    grace_s: int
    backoff_limit: int
    queue: dict[str, str]

    @property
    def scratch_mounts(self) -> list[k8s.core.v1.VolumeMountArgsDict]:
        """``/tmp`` on a scratch volume, for a read-only root file system."""
        return [TMP_MOUNT] if self.read_only else []

    @property
    def scratch(self) -> list[k8s.core.v1.VolumeArgsDict]:
        """The scratch volume of :attr:`scratch_mounts`."""
        return [scratch_volume(JOB_SCRATCH_SIZE)] if self.read_only else []


def _shape(name: str, args: MpiJobArgs) -> _Shape:
    """The validated settings of an MPIJob: ranks per worker, the launcher's creation policy, labels, deadline."""
    spec = args["job"]
    placement = args["placement"]
    policy = args.get("launcher_creation_policy", "WaitForWorkersReady")
    if policy not in LAUNCHER_CREATION_POLICIES:
        raise ValueError(f"{name}: launcher_creation_policy must be one of {', '.join(LAUNCHER_CREATION_POLICIES)}")
    if policy == "AtStartup" and spec.get("code_uri") is not None:
        raise ValueError(
            f"{name}: launcher_creation_policy AtStartup with code_uri: mpirun would reach workers still downloading "
            "the code, before their sshd starts; leave the policy at WaitForWorkersReady"
        )
    worker_port = args.get("worker_port", SSHD_PORT)
    if isinstance(worker_port, bool) or not isinstance(worker_port, int) or not 0 < worker_port < 65536:
        raise ValueError(f"{name}: worker_port {worker_port!r} is not a TCP port (1-65535)")
    job_name = spec["job_name"]
    return _Shape(
        job_name=job_name,
        nodes=args["nodes"],
        slots=int(args.get("slots_per_worker") or placement["procs_per_node"]),
        policy=policy,
        worker_port=worker_port,
        labels={**COMMON_LABELS, "app.kubernetes.io/name": "mpi-job", JOB_LABEL: job_name},
        # sshd (the workers) writes its pid and session files to the image's file system unless told otherwise
        read_only=bool(spec.get("read_only_root_filesystem", False)),
        timeout_s=job_deadline_seconds(spec),
        grace_s=stop_grace_seconds(spec),
        backoff_limit=int(args.get("backoff_limit", DEFAULT_MAX_RESTARTS)),
        queue=dict(spec.get("queue_labels") or {}),
    )


def _launcher_template(
    args: MpiJobArgs,
    shape: _Shape,
    identity: JobIdentity,
    command: list[str],
    env: Mapping[str, pulumi.Input[str]],
    hosts: pulumi.Input[Sequence[str]],
) -> k8s.core.v1.PodTemplateSpecArgsDict:
    """The launcher's pod: ``mpirun`` on the system nodes, with the job's identity (its waits and code), after its
    wait for the workers."""
    spec = args["job"]
    launcher: k8s.core.v1.ContainerArgsDict = {
        "name": "launcher",
        "image": spec["image"],
        "image_pull_policy": IMAGE_PULL_POLICY,
        "command": command,
        "env": env_list(env),
        "resources": LAUNCHER_RESOURCES,
        "volume_mounts": [SHARED_VOLUME_MOUNT, *identity.mounts, *shape.scratch_mounts],
        "security_context": container_security(read_only_root=shape.read_only),
    }
    if identity.code:
        launcher["working_dir"] = WORKSPACE
    return {
        "metadata": {"labels": shape.labels},
        "spec": {
            "service_account_name": identity.service_account.metadata.name,
            **job_pod(spec),
            "node_selector": dict(args["launcher_node_selector"]),
            "init_containers": [
                *identity.init_containers,
                *output_folder_containers(spec),  # before mpirun starts the ranks, which write there
                *_workers_wait(args, shape, hosts),
            ],
            "containers": [launcher],
            "volumes": unique_volumes([shared_volume(spec["pvc_name"]), *identity.volumes, *shape.scratch]),
        },
    }


def workers_wait_command(hosts: Sequence[str], port: int) -> list[str]:
    """The command of :data:`WORKERS_WAIT_CONTAINER`: wait until each of ``hosts`` accepts connections on ``port``."""
    return ["python", WORKERS_WAIT_SCRIPT, "--port", str(port), *[a for h in hosts for a in ("--host", h)]]


def _workers_wait(
    args: MpiJobArgs, shape: _Shape, hosts: pulumi.Input[Sequence[str]]
) -> list[k8s.core.v1.ContainerArgsDict]:
    """The launcher's :data:`WORKERS_WAIT_CONTAINER`, in the toolbox image (none without it, or with ``AtStartup``):
    it ends once every worker accepts connections on the workers' port."""
    helper = args["job"].get("helper_image")
    if helper is None or shape.policy != "WaitForWorkersReady":
        return []
    port = shape.worker_port
    return [
        {
            "name": WORKERS_WAIT_CONTAINER,
            "image": helper,
            "image_pull_policy": IMAGE_PULL_POLICY,
            "command": apply_input(hosts, lambda hs: workers_wait_command(hs, port)),
            "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
            "resources": SMALL_HELPER_RESOURCES,
            # only the standard library: nothing to write
            "security_context": container_security(read_only_root=True),
        }
    ]


def _worker_template(
    args: MpiJobArgs, shape: _Shape, identity: JobIdentity, env: Mapping[str, pulumi.Input[str]]
) -> k8s.core.v1.PodTemplateSpecArgsDict:
    """A worker's pod: sshd on a node of the group, with its GPUs, EFA devices, huge pages and ``/dev/shm``; with
    the job's code, the job's service account (its Pod Identity reads the code) and the code's download."""
    spec = args["job"]
    placement = args["placement"]
    code = identity.code
    pod: k8s.core.v1.PodSpecArgsDict = {
        **job_pod(spec),
        **on_group(placement),
        "containers": [
            {
                "name": WORKER_CONTAINER,
                "image": spec["image"],
                "image_pull_policy": IMAGE_PULL_POLICY,
                "command": list(args.get("worker_command") or SSHD_COMMAND),
                "env": env_list(env),
                "resources": worker_resources(placement),
                "volume_mounts": [
                    SHARED_VOLUME_MOUNT,
                    {"name": "dshm", "mount_path": "/dev/shm"},
                    *(identity.mounts if code else []),
                    *shape.scratch_mounts,
                ],
                "security_context": container_security(read_only_root=shape.read_only),
            }
        ],
        "volumes": unique_volumes(
            [
                shared_volume(spec["pvc_name"]),
                shm_volume(placement),
                *(code.volumes if code else []),
                *shape.scratch,
            ]
        ),
    }
    if code:  # the ranks run the job's code here too
        pod["service_account_name"] = identity.service_account.metadata.name
        pod["init_containers"] = [code.init_container]
    # the autoscaler must not evict a running rank to consolidate nodes
    annotations = {**NO_EVICT, **(spec.get("queue_annotations") or {})}
    return {"metadata": {"labels": shape.labels, "annotations": annotations}, "spec": pod}


def _mpi_spec(
    args: MpiJobArgs,
    shape: _Shape,
    launcher: k8s.core.v1.PodTemplateSpecArgsDict,
    worker: k8s.core.v1.PodTemplateSpecArgsDict,
) -> dict[str, Any]:
    """The MPIJob's spec: slots, SSH keys' mount, launcher policy, run policy (suspended when queued), replicas. A
    worker restarts in place (its code's download, its sshd): MPI Operator v0.8.0 never replaces a failed worker pod
    (it recreates only missing ones,
    https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go#L1014), and the
    launcher waits for every worker. A failed launcher is a new pod (``Never``) that waits for the workers again, one
    failed pod against ``backoffLimit`` (docs/explanation/failures.md, "An MPI job's launcher")."""
    return {
        "slotsPerWorker": shape.slots,
        "sshAuthMountPath": args.get("ssh_auth_mount_path", SSH_AUTH_MOUNT_PATH),
        "launcherCreationPolicy": shape.policy,
        "mpiImplementation": "OpenMPI",
        "runPolicy": {
            **({"suspend": True} if shape.queue else {}),
            "cleanPodPolicy": "Running",
            "backoffLimit": shape.backoff_limit,
            "activeDeadlineSeconds": shape.timeout_s,
        },
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": camel(launcher)},
            "Worker": {"replicas": shape.nodes, "restartPolicy": "OnFailure", "template": camel(worker)},
        },
    }
