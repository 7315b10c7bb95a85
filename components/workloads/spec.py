"""What a job is, as plain values: :class:`JobSpec` (what every job shares: namespace, claim, image, output,
arguments, environment, data, order, code) and :class:`WorkerPlacement` (where its pods go and what each requests,
derived by ``stacks.plan`` from the node group's instance type, so a pod's requests match its node), with the
launcher's ports and exit codes and the names and environment derived from them. No cloud SDK: the config and the
plan read it."""

import hashlib
import json
from typing import Callable, Literal, Mapping, Optional, Sequence, TypedDict, TypeVar, cast

import pulumi
from typing_extensions import NotRequired

from components.naming import k8s_name
from components.nodeplan import NodeProfile, PodSize
from components.scheduling import Toleration, tolerations_for

#: Port of the c10d rendezvous store, on worker 0 (torchrun's ``--rdzv-endpoint``).
C10D_PORT = 29400

#: Port of a command job's ``MASTER_PORT`` (torch's env:// default).
MASTER_PORT = 29500

#: Exit code of the launcher/scripts for a usage error (argparse): retrying cannot help.
USAGE_ERROR_EXIT_CODE = 2

#: Seconds a stopped pod gets before it is killed, unless the job says otherwise.
DEFAULT_STOP_GRACE_S = 60

#: Hours a job may run once admitted (its activeDeadlineSeconds), unless it says otherwise (``timeout_hours``).
DEFAULT_TIMEOUT_HOURS = 24

#: Pod failures a job tolerates per node (an MPI job: launcher retries) unless it says otherwise (``maxRestarts``).
DEFAULT_MAX_RESTARTS = 3

#: Exit code of ``wait_for_jobs.py`` when a job waited for failed: this job cannot run.
PREDECESSOR_FAILED_EXIT_CODE = 3

#: Where downloaded code (``code_uri``) is put; the main container runs there.
WORKSPACE = "/workspace"

#: How torchrun's nodes meet: an etcd server of the stack (``etcd-v2``) or the store on worker 0 (``c10d``).
RendezvousBackend = Literal["etcd-v2", "c10d"]
T = TypeVar("T")
R = TypeVar("R")


class WorkerPlacement(TypedDict):
    """Where a multi-node job's pods go (one per node) and what each requests, from the node group's plan."""

    node_selector: Mapping[str, str]
    """Labels selecting the node group (and its zone, for single-zone groups)."""
    tolerations: Sequence[Toleration]
    """Tolerations of exactly the group's taints."""
    cpu_millis: int
    """CPU request (millicores)."""
    memory_mib: int
    """Memory request and limit (MiB)."""
    gpus: int
    """``nvidia.com/gpu`` per pod: all of the node's GPUs (0 on CPU nodes)."""
    efa_devices: int
    """``vpc.amazonaws.com/efa`` per pod: all of the node's EFA interfaces (0 without EFA)."""
    hugepages_2mi: NotRequired[str]
    """``hugepages-2Mi`` per pod on EFA nodes (e.g. ``5120Mi``)."""
    shm_mib: int
    """Size of the memory-backed ``/dev/shm``."""
    procs_per_node: int
    """Processes per pod (torchrun ``--nproc-per-node``, MPI slots; one per GPU, one on CPU nodes)."""
    threads_per_proc: int
    """``OMP_NUM_THREADS`` of each process."""
    env: NotRequired[Mapping[str, str]]
    """NCCL/libfabric environment of the node type (EFA settings of the instance family)."""


def worker_placement(
    profile: NodeProfile, pod: Optional[PodSize] = None, zone_selector: Optional[Mapping[str, str]] = None
) -> WorkerPlacement:
    """Where a job's pods go on a node group of ``profile`` (:func:`components.nodeplan.node_profile`), one per node,
    and what each requests: ``pod`` (default the whole node, ``profile.pod``); selected by the group's labels (and
    ``zone_selector``), tolerating exactly its taints, with its network environment."""
    pod = pod or profile.pod
    placement: WorkerPlacement = {
        "node_selector": {**profile.labels, **(zone_selector or {})},
        "tolerations": tolerations_for(profile.taints),
        "cpu_millis": pod.cpu_millis,
        "memory_mib": pod.memory_mib,
        "gpus": pod.gpus,
        "efa_devices": pod.efa_devices,
        "shm_mib": pod.shm_mib,
        "procs_per_node": pod.procs_per_node,
        "threads_per_proc": pod.threads_per_proc,
        "env": dict(profile.network_env),
    }
    if pod.hugepages_2mi:
        placement["hugepages_2mi"] = pod.hugepages_2mi
    return placement


class JobSpec(TypedDict):
    """What every job shares: where it runs, its image, arguments, data, output and order."""

    job_name: str
    """Kubernetes name of the job (a DNS label; pods are ``<job>-<index>``)."""
    namespace: pulumi.Input[str]
    """Namespace of the job (holds the shared claim)."""
    pvc_name: pulumi.Input[str]
    """The shared ReadWriteMany claim, mounted at ``/data``."""
    image: pulumi.Input[str]
    """The job's image, by digest."""
    output_dir: str
    """The job's output folder inside the pods (``OUTPUT_DIR``)."""
    args: NotRequired[Sequence[str]]
    """Arguments of the program; ``$(VAR)`` references to the pod's environment are expanded by Kubernetes."""
    env: NotRequired[Mapping[str, str]]
    """Extra environment of the main container."""
    data_dir: NotRequired[pulumi.Input[str]]
    """Dataset folder inside the pods (``DATA_DIR``), a path under the shared volume's mount, ``/data``
    (``DatasetStaging.data_dir`` is one); an Output of the staging step orders the job after it."""
    input_dirs: NotRequired[Mapping[str, str]]
    """Environment name -> output folder of a job this one reads (``<JOB>_OUTPUT_DIR``)."""
    after_jobs: NotRequired[Sequence[str]]
    """Jobs in the namespace that must complete first (``jobs/<name>`` or ``mpijobs/<name>``): the pods wait in
    an init container, so ``pulumi up`` does not."""
    after: NotRequired[Sequence[pulumi.Input[str]]]
    """Outputs the job is created after (awaited setup steps: staging, the health check)."""
    helper_image: NotRequired[pulumi.Input[str]]
    """The project's toolbox image (waits, code download); required with ``after_jobs`` or ``code_uri``."""
    code_uri: NotRequired[pulumi.Input[str]]
    """Downloaded into ``/workspace`` at start, through the job's own Pod Identity role: ``s3://bucket/prefix/`` (every
    object under it; the role may list and read the prefix) or ``s3://bucket/key.zip`` (one zip, extracted; the role
    may read that object only), such as a :class:`~components.job_code.JobCode`'s."""
    cluster_name: NotRequired[pulumi.Input[str]]
    """EKS cluster name; required with ``code_uri`` (Pod Identity)."""
    timeout_hours: NotRequired[float]
    """Deadline of the job (activeDeadlineSeconds): it runs while the job is admitted. Default 24."""
    wait_for_completion: NotRequired[bool]
    """Make ``pulumi up`` wait until the job completes, or fails with its reason. Default False."""
    queue_timeout_hours: NotRequired[float]
    """When ``pulumi up`` waits for the job: how long it may wait in its queue and for nodes, on top of its deadline.
    Default one hour (``DEFAULT_QUEUE_TIMEOUT_HOURS``, :mod:`components.workloads.waits`)."""
    read_only_root_filesystem: NotRequired[bool]
    """Run the job's containers with a read-only root file system; ``/tmp`` (also ``HOME``) is a writable
    ``emptyDir``, outputs go to the shared volume. Default True (False for :class:`MpiJob`, whose workers' sshd
    writes to the image's file system)."""
    tensorboard_dir: NotRequired[str]
    """Folder for the job's TensorBoard event files (``TENSORBOARD_DIR``; the TensorBoard component reads it)."""
    queue_labels: NotRequired[Mapping[str, str]]
    """Kueue's labels (``kueue.x-k8s.io/queue-name``, ``kueue.x-k8s.io/priority-class``): the job is created suspended
    and waits in that queue, holding no pod, until Kueue admits all of it. The cluster needs Kueue and that
    LocalQueue: :class:`~components.admission.Admission` makes them. Pass its ``queue_name`` in ``after`` so the job
    is created once the queue exists."""
    queue_annotations: NotRequired[Mapping[str, str]]
    """Kueue's annotations on the workers' pod template (``kueue.x-k8s.io/podset-preferred-topology``: topology-aware
    placement on the group, :mod:`stacks.plan.admission`)."""
    stop_grace_period_seconds: NotRequired[int]
    """Seconds a pod that is stopped (drain, spot interruption, scale-down) gets to checkpoint and exit before it
    is killed (``terminationGracePeriodSeconds``). Default 60."""


def stop_grace_seconds(spec: JobSpec) -> int:
    """The seconds a stopped pod of the job gets before it is killed: ``stop_grace_period_seconds``, or
    :data:`DEFAULT_STOP_GRACE_S`."""
    return int(spec.get("stop_grace_period_seconds", DEFAULT_STOP_GRACE_S))


def run_id(job_name: str, recipe: Mapping[str, object], *, limit: int = 40) -> str:
    """A stable id for a run: the job name plus a hash of everything that defines the run, but not its size; at most
    ``limit`` characters (the name shortened, the hash kept)."""
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    return k8s_name(job_name, digest, limit=limit)


def torchrun_command(
    *,
    min_nodes: int,
    max_nodes: int,
    procs_per_node: int,
    backend: RendezvousBackend,
    endpoint: str,
    rdzv_id: str,
    max_restarts: int,
    script: str,
    script_args: Sequence[str],
) -> list[str]:
    """The container command: torchrun elastic (``--nnodes=MIN:MAX``) running ``script``.

    Rendezvous settings measured with real processes (two nodes, etcd-v2, the node hosting rank 0 SIGKILLed;
    docs/explanation/verified.md): a lost node is declared dead
    ``keep_alive_interval x keep_alive_max_attempt`` = 3 s after its last heartbeat (a false positive
    only drops a live node from a finished round; it rejoins at the next one), each surviving agent
    sees its worker fail within ``--monitor-interval=1`` s, and the new round completes
    ``last_call_timeout=2`` s after the first survivor joins it (enough for survivors that notice the
    failure up to one monitor interval apart).  Training resumes 7-10 s after the node is lost, against
    60 s with keep-alive 5 s x 6, last call 30 s and monitor interval 5 s.
    """
    conf = "join_timeout=1800,last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=3"
    return [
        "torchrun",
        f"--nnodes={min_nodes}:{max_nodes}",
        f"--nproc-per-node={procs_per_node}",
        f"--rdzv-backend={backend}",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={rdzv_id}",
        f"--rdzv-conf={conf}",
        f"--max-restarts={max_restarts}",
        "--monitor-interval=1",
        script,
        *script_args,
    ]


def service_name(job_name: str) -> str:
    """The headless Service of a multi-node job (its pods' DNS subdomain)."""
    return k8s_name(job_name, "workers")


def peer_hosts(job_name: str, namespace: str, nodes: int) -> list[str]:
    """Stable hostnames of an Indexed Job's pods: ``<job>-<i>.<service>.<namespace>.svc.cluster.local``."""
    return [f"{job_name}-{i}.{service_name(job_name)}.{namespace}.svc.cluster.local" for i in range(nodes)]


def expand_variables(text: str, lookup: Callable[[str], Optional[str]]) -> str:
    """``text`` as Kubernetes expands a command, an argument or an env value: each ``$(NAME)`` (any characters up to
    the first ``)``) becomes ``lookup(NAME)``, or stays as written when that is ``None``; ``$$`` becomes ``$``
    (kubernetes ``third_party/forked/golang/expansion/expand.go``)."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
        elif text[i + 1] == "(" and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2 : end]
            value = lookup(name)
            out.append(f"$({name})" if value is None else value)
            i = end + 1
        else:  # "$$" is an escaped "$"; "$" and any other character stay as written
            out.append("$" if text[i + 1] == "$" else text[i : i + 2])
            i += 2
    return "".join(out)


def variable_references(text: str) -> list[str]:
    """The names ``text`` refers to as Kubernetes expands it (:func:`expand_variables`), in order."""
    names: list[str] = []

    def note(name: str) -> None:
        names.append(name)

    expand_variables(text, note)
    return names


def env_name(job: str) -> str:
    """``<JOB>_OUTPUT_DIR``: the variable that carries a job's output folder to the jobs after it."""
    return "".join(c if c.isalnum() else "_" for c in job.upper()) + "_OUTPUT_DIR"


#: The settings :func:`worker_env` writes besides the node type's (``NCCL_DEBUG`` on GPU nodes only).
WORKER_SETTINGS = frozenset({"OMP_NUM_THREADS", "PYTHONUNBUFFERED", "HOME", "NCCL_DEBUG"})


def worker_env(placement: WorkerPlacement, extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """Environment of a job's main container: threads per process, the node type's NCCL/libfabric
    settings, then ``extra``."""
    env = {
        "OMP_NUM_THREADS": str(placement["threads_per_proc"]),
        "PYTHONUNBUFFERED": "1",
        "HOME": "/tmp",
    }
    if placement["gpus"]:
        env["NCCL_DEBUG"] = "WARN"
    env.update(dict(placement.get("env") or {}))
    env.update(dict(extra or {}))
    return env


#: The variables :func:`job_env` sets (``DATA_DIR`` with a dataset, ``TENSORBOARD_DIR`` with TensorBoard).
JOB_VARIABLES = frozenset({"OUTPUT_DIR", "DATA_DIR", "TENSORBOARD_DIR", "JOB_NAME", "JOB_SIZE", "PROCS_PER_NODE"})
#: The device's peak FLOP/s the plan puts in a GPU job's pods (the bundled trainer's model FLOPs utilization).
PEAK_FLOPS_VARIABLE = "PEAK_FLOPS_PER_DEVICE"
#: The variables :func:`peer_env` sets.
PEER_VARIABLES = frozenset({"JOB_PEERS", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NODE_RANK", "RANK"})


def job_env(spec: JobSpec, *, nodes: int, procs_per_node: int) -> dict[str, pulumi.Input[str]]:
    """The variables every job's program gets: ``OUTPUT_DIR``, ``DATA_DIR``, ``TENSORBOARD_DIR`` (with TensorBoard),
    ``JOB_NAME``, ``JOB_SIZE``, ``PROCS_PER_NODE``, the output folders of the jobs it reads, and the job's own
    ``env``."""
    env: dict[str, pulumi.Input[str]] = {
        "OUTPUT_DIR": spec["output_dir"],
        "JOB_NAME": spec["job_name"],
        "JOB_SIZE": str(nodes),
        "PROCS_PER_NODE": str(procs_per_node),
    }
    if spec.get("data_dir") is not None:
        env["DATA_DIR"] = spec["data_dir"]
    if spec.get("tensorboard_dir"):
        env["TENSORBOARD_DIR"] = spec["tensorboard_dir"]
    env.update(dict(spec.get("input_dirs") or {}))
    env.update(dict(spec.get("env") or {}))
    return env


def apply_input(value: "pulumi.Input[T]", fn: Callable[[T], R]) -> "pulumi.Input[R]":
    """``fn`` of ``value``: applied to an Output (a component's inputs), called at once on a plain value
    (so the pure environment builders give plain values to callers that pass plain values, such as tests
    that run a pod's process on this machine)."""
    if isinstance(value, pulumi.Output):
        return value.apply(fn)
    return fn(cast(T, value))


def peer_env(peers: "pulumi.Input[Sequence[str]]", nodes: int, port: int = MASTER_PORT) -> dict[str, pulumi.Input[str]]:
    """Where a multi-node job's pods find each other, for frameworks this project does not know:
    ``JOB_PEERS`` (the pods' addresses, comma-separated; on the cluster their stable hostnames,
    :func:`peer_hosts`), ``MASTER_ADDR``/``MASTER_PORT`` (pod 0), ``WORLD_SIZE`` (pods) and
    ``NODE_RANK``/``RANK`` (this pod's index, ``$(JOB_INDEX)``)."""
    return {
        "JOB_PEERS": apply_input(peers, ",".join),
        "MASTER_ADDR": apply_input(peers, lambda p: p[0]),
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(nodes),
        "NODE_RANK": "$(JOB_INDEX)",
        "RANK": "$(JOB_INDEX)",
    }


def c10d_endpoint(job_name: str, namespace: pulumi.Input[str]) -> pulumi.Output[str]:
    """``<job>-0.<service>.<namespace>.svc.cluster.local:29400``: worker 0 hosts the c10d store."""
    return pulumi.Output.concat(
        job_name,
        "-0.",
        service_name(job_name),
        ".",
        pulumi.Output.from_input(namespace),
        ".svc.cluster.local:",
        str(C10D_PORT),
    )
