"""Pod building blocks shared by the workload components: placement, resources, environment, security,
the shared volume, a job's identity (service account, in-cluster waits, code download) and the
headless-Service + Indexed-Job pair that multi-node jobs run as.

A job's pods are placed and sized from a :class:`WorkerPlacement`: plain values the stack's plan derives
from the node group's instance type (``stacks.plan``), so what a pod requests (GPUs, EFA devices, huge
pages, CPU, memory, ``/dev/shm``) always matches the node it runs on. What every job shares (namespace,
claim, image, output folder, arguments, environment, data, order, code) is one :class:`JobSpec`.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Callable, Literal, Mapping, Optional, Sequence, TypedDict, TypeVar, cast

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.conventions import (
    COMMON_LABELS,
    IMAGE_PULL_POLICY,
    JOB_LABEL,
    NO_EVICT,
    SHARED_MOUNT,
    TRAINING_IMAGE_UID,
)
from components.iam import s3_read_object_policy, s3_read_prefix_policy
from components.naming import k8s_name
from components.partition import current_partition
from components.pod_identity import pod_identity_role
from components.scheduling import Toleration
from components.workloads.job_objects import BATCH_JOB, JOB_OBJECTS
from components.workloads.waits import await_annotations, await_seconds, await_timeouts, queue_seconds

#: UID/GID the pods run as: the training image's user, set explicitly so prebuilt images that
#: default to root also run unprivileged.
IMAGE_UID = TRAINING_IMAGE_UID
C10D_PORT = 29400
#: Port of a command job's ``MASTER_PORT`` (torch's env:// default).
MASTER_PORT = 29500
#: Exit code of the launcher/scripts for a usage error (argparse): retrying cannot help.
USAGE_ERROR_EXIT_CODE = 2
#: Seconds a stopped pod gets before it is killed, unless the job says otherwise.
DEFAULT_STOP_GRACE_S = 60
#: Exit code of ``wait_for_jobs.py`` when a job waited for failed: this job cannot run.
PREDECESSOR_FAILED_EXIT_CODE = 3
#: Name of the main container of every job's pods.
WORKER_CONTAINER = "worker"
#: Where downloaded code (``code_uri``) is put; the main container runs there.
WORKSPACE = "/workspace"
#: Scripts of the toolbox (training) image the helpers run.
WAIT_SCRIPT = "/app/wait_for_jobs.py"
FETCH_SCRIPT = "/app/fetch_code.py"
#: The init container that waits for the jobs a job reads (:func:`job_identity`).
WAIT_CONTAINER = "wait-for-jobs"
#: Size limit of a job pod's ``/tmp`` when its root file system is read-only (torch compile and Triton caches,
#: OpenMPI's session folder, ``HOME``); an eviction threshold on the node's disk, not a reservation.
JOB_SCRATCH_SIZE = "8Gi"
#: Where Kubernetes clients find the service account's token, CA and namespace (source key
#: ``k8s-service-account-token-volume``).
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
#: Where Kubernetes publishes an Indexed Job pod's index (downward API).
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

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
    """Dataset folder inside the pods (``DATA_DIR``); an Output of the staging step orders the job after it."""
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
    Default :data:`~components.workloads.waits.DEFAULT_QUEUE_TIMEOUT_HOURS`."""
    read_only_root_filesystem: NotRequired[bool]
    """Run the job's containers with a read-only root file system; ``/tmp`` (also ``HOME``) is a writable
    ``emptyDir``, outputs go to the shared volume. Default True (False for :class:`MpiJob`, whose workers' sshd
    writes to the image's file system)."""
    tensorboard_dir: NotRequired[str]
    """Folder for the job's TensorBoard event files (``TENSORBOARD_DIR``; the TensorBoard component reads it)."""
    queue_labels: NotRequired[Mapping[str, str]]
    """Kueue's labels (``kueue.x-k8s.io/queue-name``, ``kueue.x-k8s.io/priority-class``): the job is created suspended
    and waits in that queue, holding no pod, until Kueue admits all of it (``components.admission``). Pass the
    queue's Output in ``after`` so the job is created once the queue exists."""
    queue_annotations: NotRequired[Mapping[str, str]]
    """Kueue's annotations on the workers' pod template (``kueue.x-k8s.io/podset-preferred-topology``: topology-aware
    placement on the group, :mod:`stacks.plan.admission`)."""
    stop_grace_period_seconds: NotRequired[int]
    """Seconds a pod that is stopped (drain, spot interruption, scale-down) gets to checkpoint and exit before it
    is killed (``terminationGracePeriodSeconds``). Default 60."""


def run_id(job_name: str, recipe: Mapping[str, object]) -> str:
    """A stable id for a run: the job name plus a hash of everything that defines the run, but not its size."""
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    return k8s_name(job_name, digest, limit=40)


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


def env_name(job: str) -> str:
    """``<JOB>_OUTPUT_DIR``: the variable that carries a job's output folder to the jobs after it."""
    return "".join(c if c.isalnum() else "_" for c in job.upper()) + "_OUTPUT_DIR"


def pod_security() -> k8s.core.v1.PodSecurityContextArgsDict:
    """Pod security context: the image's unprivileged user, RuntimeDefault seccomp."""
    return {
        "run_as_non_root": True,
        "run_as_user": IMAGE_UID,
        "run_as_group": IMAGE_UID,
        "seccomp_profile": {"type": "RuntimeDefault"},
    }


def container_security(read_only_root: bool) -> k8s.core.v1.SecurityContextArgsDict:
    """Container security context: no privilege escalation, no capabilities, and the root file system read-only
    or (for programs that write to the image's file system) explicitly writable."""
    return {
        "allow_privilege_escalation": False,
        "capabilities": {"drop": ["ALL"]},
        "read_only_root_filesystem": read_only_root,
    }


def shared_volume(pvc_name: pulumi.Input[str]) -> k8s.core.v1.VolumeArgsDict:
    """The shared ReadWriteMany claim as a pod volume named ``shared``."""
    return {"name": "shared", "persistent_volume_claim": {"claim_name": pvc_name}}


#: Where the ``shared`` volume is mounted.
SHARED_VOLUME_MOUNT: k8s.core.v1.VolumeMountArgsDict = {"name": "shared", "mount_path": SHARED_MOUNT}


def scratch_volume(size_limit: str = "1Gi") -> k8s.core.v1.VolumeArgsDict:
    """A writable scratch folder (``emptyDir``) named ``tmp`` for containers with a read-only root file system."""
    return {"name": "tmp", "empty_dir": {"size_limit": size_limit}}


#: The scratch folder of the project's helpers (staging, TensorBoard), mounted at ``/tmp`` (their ``HOME``).
TMP_VOLUME: k8s.core.v1.VolumeArgsDict = scratch_volume()
TMP_MOUNT: k8s.core.v1.VolumeMountArgsDict = {"name": "tmp", "mount_path": "/tmp"}


def unique_volumes(volumes: Sequence[k8s.core.v1.VolumeArgsDict]) -> list[k8s.core.v1.VolumeArgsDict]:
    """``volumes`` without repeated names (the first of a name is kept): containers share one ``tmp``."""
    seen: set[str] = set()
    out: list[k8s.core.v1.VolumeArgsDict] = []
    for v in volumes:
        if str(v["name"]) not in seen:
            seen.add(str(v["name"]))
            out.append(v)
    return out


def worker_resources(placement: WorkerPlacement) -> k8s.core.v1.ResourceRequirementsArgsDict:
    """Requests and limits of one pod of the job (one per node)."""
    requests: dict[str, str] = {"cpu": f"{placement['cpu_millis']}m", "memory": f"{placement['memory_mib']}Mi"}
    limits: dict[str, str] = {"memory": f"{placement['memory_mib']}Mi"}
    extended: dict[str, str] = {}
    if placement["gpus"]:
        extended["nvidia.com/gpu"] = str(placement["gpus"])
    if placement["efa_devices"]:
        extended["vpc.amazonaws.com/efa"] = str(placement["efa_devices"])
        extended["hugepages-2Mi"] = placement.get("hugepages_2mi") or "0"
    requests.update(extended)
    limits.update(extended)
    return {"requests": requests, "limits": limits}


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


def env_list(env: Mapping[str, pulumi.Input[str]], *, with_index: bool = False) -> list[k8s.core.v1.EnvVarArgsDict]:
    """Sorted ``EnvVar`` entries; with ``with_index`` a ``JOB_INDEX`` from the downward API comes first so the
    others can use ``$(JOB_INDEX)`` (Kubernetes expands references to variables defined before)."""
    out: list[k8s.core.v1.EnvVarArgsDict] = []
    if with_index:
        out.append({"name": "JOB_INDEX", "value_from": {"field_ref": {"field_path": COMPLETION_INDEX_FIELD}}})
    out += [{"name": k, "value": v} for k, v in sorted(env.items())]
    return out


@dataclass
class JobIdentity:
    """What :func:`job_identity` created: the pods' service account and the init containers they run first."""

    service_account: k8s.core.v1.ServiceAccount
    init_containers: list[k8s.core.v1.ContainerArgsDict]
    volumes: list[k8s.core.v1.VolumeArgsDict]
    mounts: list[k8s.core.v1.VolumeMountArgsDict]
    """Mounts of the main container (the downloaded code)."""
    waits: list[pulumi.Resource]


def job_identity(parent: pulumi.Resource, name: str, spec: JobSpec) -> JobIdentity:
    """The job's own service account; with ``after_jobs`` a Role that may only read those jobs and an init
    container that waits for them to complete (it fails the pod at once when one failed); with ``code_uri`` a
    Pod Identity role that may only read that prefix and an init container that downloads it.

    The pods never mount the service account's API token (``automountServiceAccountToken: false``): only the
    wait container gets it, through the same projected volume Kubernetes would add to every container, so the
    job's own program holds no credential for the API."""
    helper = spec.get("helper_image")
    after_jobs = list(spec.get("after_jobs") or [])
    code = spec.get("code_uri")
    if after_jobs and helper is None:
        raise ValueError(f"{name}: after_jobs needs helper_image (the toolbox image with {WAIT_SCRIPT})")
    if code and (helper is None or spec.get("cluster_name") is None):
        raise ValueError(f"{name}: code_uri needs helper_image and cluster_name")
    sa = k8s.core.v1.ServiceAccount(
        f"{name}-sa",
        metadata={
            "name": k8s_name(spec["job_name"], "job"),
            "namespace": spec["namespace"],
            "labels": {**COMMON_LABELS, JOB_LABEL: spec["job_name"]},
        },
        automount_service_account_token=False,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    identity = JobIdentity(sa, [], [], [], waits=[])
    if helper is not None:  # both steps run the toolbox image (checked above when they need it)
        if after_jobs:
            _wait_for_jobs(parent, name, spec, identity, helper, after_jobs)
        if code:
            _fetch_code(parent, name, spec, identity, helper, code)
    return identity


def _wait_for_jobs(
    parent: pulumi.Resource,
    name: str,
    spec: JobSpec,
    identity: JobIdentity,
    helper: pulumi.Input[str],
    after_jobs: list[str],
) -> None:
    """Adds to ``identity`` a Role that may only read ``after_jobs``, its binding, and the init container that waits
    for them with the service account's token."""
    namespace = spec["namespace"]
    labels = {**COMMON_LABELS, JOB_LABEL: spec["job_name"]}
    rules: list[k8s.rbac.v1.PolicyRuleArgsDict] = []
    for obj in JOB_OBJECTS.values():
        resource, group = obj.resource, obj.group
        names = [j.split("/", 1)[1] for j in after_jobs if j.split("/", 1)[0] == resource]
        if names:
            rules.append({"api_groups": [group], "resources": [resource], "resource_names": names, "verbs": ["get"]})
    role = k8s.rbac.v1.Role(
        f"{name}-wait-role",
        metadata={"name": k8s_name(spec["job_name"], "wait"), "namespace": namespace, "labels": labels},
        rules=rules,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    binding = k8s.rbac.v1.RoleBinding(
        f"{name}-wait-binding",
        metadata={"name": k8s_name(spec["job_name"], "wait"), "namespace": namespace, "labels": labels},
        role_ref={"api_group": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
        subjects=[{"kind": "ServiceAccount", "name": identity.service_account.metadata.name, "namespace": namespace}],
        opts=pulumi.ResourceOptions(parent=parent),
    )
    identity.waits.append(binding)
    identity.init_containers.append(
        {
            "name": WAIT_CONTAINER,
            "image": helper,
            "image_pull_policy": IMAGE_PULL_POLICY,
            "command": [
                "python",
                WAIT_SCRIPT,
                "--namespace",
                namespace,
                *[a for j in after_jobs for a in ("--job", j)],
            ],
            "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "volume_mounts": [{"name": "kube-api-access", "mount_path": SERVICE_ACCOUNT_MOUNT, "read_only": True}],
            # only the standard library, reading the service account's token: nothing to write
            "security_context": container_security(read_only_root=True),
        }
    )
    identity.volumes.append(api_access_volume())


def _fetch_code(
    parent: pulumi.Resource,
    name: str,
    spec: JobSpec,
    identity: JobIdentity,
    helper: pulumi.Input[str],
    code: pulumi.Input[str],
) -> None:
    """Adds to ``identity`` a Pod Identity role that may only read ``code``, and the init container that downloads it
    to the workspace the main container mounts."""
    role = pod_identity_role(
        parent,
        f"{name}-code",
        cluster_name=spec["cluster_name"],
        namespace=spec["namespace"],
        service_account=identity.service_account.metadata.name,
        description=f"{spec['job_name']}: read its code from {code if isinstance(code, str) else 'S3'}",
        role_name=f"{name}-code",
        policy=pulumi.Output.all(current_partition(parent), code).apply(
            lambda v: code_read_policy(str(v[0]), str(v[1]))
        ),
    )
    assert role.association is not None
    identity.waits.append(role.association)
    identity.volumes.append({"name": "workspace", "empty_dir": {"size_limit": "10Gi"}})
    identity.mounts.append({"name": "workspace", "mount_path": WORKSPACE})
    identity.init_containers.append(
        {
            "name": "fetch-code",
            "image": helper,
            "image_pull_policy": IMAGE_PULL_POLICY,
            "command": ["python", FETCH_SCRIPT, "--source", code, "--dest", WORKSPACE],
            "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "HOME", "value": "/tmp"}],
            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            "volume_mounts": [{"name": "workspace", "mount_path": WORKSPACE}, TMP_MOUNT],
            # boto3 writes only the downloaded files (to /workspace); HOME (/tmp) for its caches
            "security_context": container_security(read_only_root=True),
        }
    )
    identity.volumes.append(scratch_volume(JOB_SCRATCH_SIZE))


def code_read_policy(partition: str, uri: str) -> str:
    """What a job's code role may read: every object under ``s3://bucket/prefix/`` (and list it), or exactly the
    object ``s3://bucket/key`` (a zip)."""
    if not uri.startswith("s3://"):
        raise ValueError(f"code_uri {uri!r} is not an s3:// URI")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not key or key.endswith("/"):
        return s3_read_prefix_policy(partition, bucket, key)
    return s3_read_object_policy(partition, bucket, key)


def api_access_volume() -> k8s.core.v1.VolumeArgsDict:
    """The service account's token (rotated by the kubelet), the cluster's CA and the namespace: the volume the
    service account admission controller adds when a pod automounts its token (source key
    ``k8s-service-account-token-volume``), for the one container that needs it."""
    return {
        "name": "kube-api-access",
        "projected": {
            "default_mode": 0o444,
            "sources": [
                {"service_account_token": {"path": "token", "expiration_seconds": 3607}},
                {"config_map": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downward_api": {"items": [{"path": "namespace", "field_ref": {"field_path": "metadata.namespace"}}]}},
            ],
        },
    }


def created_after(spec: JobSpec, name: pulumi.Input[str], extra: Sequence[pulumi.Resource] = ()) -> pulumi.Output[str]:
    """``name`` as an Output that resolves once the job's setup Outputs (``after``, ``data_dir``) have:
    the Kubernetes object named with it is created after them (a component's ``depends_on`` does not
    reach its children; data dependencies do)."""
    outputs = [*(spec.get("after") or []), spec.get("data_dir") or "", *[r.urn for r in extra]]
    return pulumi.Output.all(name, *outputs).apply(lambda v: str(v[0]))


def exit_code_values(codes: Sequence[int]) -> list[int]:
    """The ``values`` of a pod failure policy's ``onExitCodes``: the API server accepts them only ascending and without
    repeats, and never 0 with ``In`` (``validatePodFailurePolicyRuleOnExitCodes`` in kubernetes
    ``pkg/apis/batch/validation/validation.go``: "must be ordered", duplicates, "must not be 0 for the In operator")."""
    if 0 in codes:
        raise ValueError(f"exit code 0 cannot select a failed pod: {list(codes)}")
    return sorted(set(codes))


def indexed_job(
    name: str,
    parent: pulumi.Resource,
    spec: JobSpec,
    *,
    labels: Mapping[str, str],
    placement: WorkerPlacement,
    nodes: int,
    command: pulumi.Input[Sequence[pulumi.Input[str]]],
    env: Mapping[str, pulumi.Input[str]],
    backoff_limit: int,
    ports: Sequence[tuple[str, int]] = (("c10d", C10D_PORT),),
    fail_exit_codes: Sequence[int] = (USAGE_ERROR_EXIT_CODE,),
    ignore_exit_codes: Sequence[int] = (),
    run_once: bool = False,
    await_completion: Optional[bool] = None,
) -> tuple[k8s.core.v1.Service, k8s.batch.v1.Job]:
    """A headless Service and an Indexed Job of ``nodes`` pods, one per node of the group (required
    anti-affinity), with stable hostnames ``<job>-<index>.<service>``, the shared volume at ``/data``, a
    memory-backed ``/dev/shm``, and the job's identity (waits, code). Node drains and spot interruptions
    (``DisruptionTarget``) never count against the backoff, nor do ``ignore_exit_codes`` of the main container
    (a program that reports being stopped); ``fail_exit_codes`` of the main container and a failed predecessor
    fail the Job at once. Stopped pods get the job's ``stop_grace_period_seconds``."""
    rules = _failure_rules(fail_exit_codes, ignore_exit_codes, waits_for_jobs=bool(spec.get("after_jobs")))
    queue = dict(spec.get("queue_labels") or {})
    timeout_s = int(float(spec.get("timeout_hours", 24)) * 3600)
    grace_s = int(spec.get("stop_grace_period_seconds", DEFAULT_STOP_GRACE_S))
    identity = job_identity(parent, name, spec)
    service = _headless_service(name, parent, spec, labels, ports)
    wait = spec.get("wait_for_completion", False) if await_completion is None else await_completion
    waits_s = await_seconds(
        timeout_s, queue_s=queue_seconds(bool(queue), spec.get("queue_timeout_hours")), grace_s=grace_s
    )
    job = k8s.batch.v1.Job(
        f"{name}-job",
        metadata={
            "name": created_after(spec, spec["job_name"], identity.waits),
            "namespace": spec["namespace"],
            "labels": {**labels, **queue},
            "annotations": await_annotations(BATCH_JOB, bool(wait)),
        },
        spec={
            "suspend": True if queue else None,
            "completion_mode": "Indexed",
            "completions": nodes,
            "parallelism": nodes,
            "backoff_limit": backoff_limit,
            "active_deadline_seconds": timeout_s,
            "pod_failure_policy": {"rules": rules},
            "template": _indexed_pod(spec, labels, placement, identity, command, env, ports, grace_s),
        },
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[service],
            delete_before_replace=True,
            custom_timeouts=await_timeouts(waits_s, grace_s),
            ignore_changes=["spec", "metadata"] if run_once else ([BATCH_JOB.suspend] if queue else None),
        ),
    )
    return service, job


def _failure_rules(
    fail_exit_codes: Sequence[int], ignore_exit_codes: Sequence[int], *, waits_for_jobs: bool
) -> list[k8s.batch.v1.PodFailurePolicyRuleArgsDict]:
    """An Indexed Job's pod failure policy: disruptions and ``ignore_exit_codes`` ignored, ``fail_exit_codes`` and
    (with ``after_jobs``, whose wait container :func:`job_identity` adds) a failed predecessor fail the Job."""

    def on_exit(action: str, container: str, values: list[int]) -> k8s.batch.v1.PodFailurePolicyRuleArgsDict:
        return {"action": action, "on_exit_codes": {"container_name": container, "operator": "In", "values": values}}

    fail = on_exit("FailJob", WORKER_CONTAINER, exit_code_values(fail_exit_codes))
    rules: list[k8s.batch.v1.PodFailurePolicyRuleArgsDict] = [
        {"action": "Ignore", "on_pod_conditions": [{"type": "DisruptionTarget", "status": "True"}]}
    ]
    if ignore_exit_codes:
        rules.append(on_exit("Ignore", WORKER_CONTAINER, exit_code_values(ignore_exit_codes)))
    rules.append(fail)
    if waits_for_jobs:
        rules.append(on_exit("FailJob", WAIT_CONTAINER, [PREDECESSOR_FAILED_EXIT_CODE]))
    return rules


def _headless_service(
    name: str, parent: pulumi.Resource, spec: JobSpec, labels: Mapping[str, str], ports: Sequence[tuple[str, int]]
) -> k8s.core.v1.Service:
    """The headless Service that gives the job's pods their stable hostnames (ready or not)."""
    # The Service outlives runs: it carries no run-specific label.
    service_labels = {k: v for k, v in labels.items() if k != "eks-training/run"}
    return k8s.core.v1.Service(
        f"{name}-service",
        metadata={"name": service_name(spec["job_name"]), "namespace": spec["namespace"], "labels": service_labels},
        spec={
            "cluster_ip": "None",
            "publish_not_ready_addresses": True,
            "selector": {JOB_LABEL: spec["job_name"]},
            "ports": [{"name": p, "port": n, "target_port": n} for p, n in ports],
        },
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _indexed_pod(
    spec: JobSpec,
    labels: Mapping[str, str],
    placement: WorkerPlacement,
    identity: JobIdentity,
    command: pulumi.Input[Sequence[pulumi.Input[str]]],
    env: Mapping[str, pulumi.Input[str]],
    ports: Sequence[tuple[str, int]],
    grace_s: int,
) -> k8s.core.v1.PodTemplateSpecArgsDict:
    """The pod of each index: on its own node of the group, in the job's Service's subdomain, with the job's
    identity, the shared volume, ``/dev/shm`` and, with a read-only root, a scratch ``/tmp``."""
    selector = {JOB_LABEL: spec["job_name"]}
    read_only = bool(spec.get("read_only_root_filesystem", True))
    tolerations: list[k8s.core.v1.TolerationArgsDict] = [dict(t) for t in placement["tolerations"]]  # type: ignore[misc]
    return {
        # cluster-autoscaler must not evict a running job's pod to consolidate nodes
        "metadata": {
            "labels": {**labels, **selector},
            "annotations": {**NO_EVICT, **(spec.get("queue_annotations") or {})},
        },
        "spec": {
            "restart_policy": "Never",
            "subdomain": service_name(spec["job_name"]),
            "service_account_name": identity.service_account.metadata.name,
            "automount_service_account_token": False,
            "node_selector": dict(placement["node_selector"]),
            "tolerations": tolerations,
            "affinity": {
                "pod_anti_affinity": {
                    "required_during_scheduling_ignored_during_execution": [
                        {"label_selector": {"match_labels": selector}, "topology_key": "kubernetes.io/hostname"}
                    ]
                }
            },
            "termination_grace_period_seconds": grace_s,
            "security_context": pod_security(),
            "init_containers": identity.init_containers,
            "containers": [_main_container(spec, placement, identity, command, env, ports, read_only)],
            "volumes": unique_volumes(
                [
                    shared_volume(spec["pvc_name"]),
                    {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": f"{placement['shm_mib']}Mi"}},
                    *identity.volumes,
                    *([scratch_volume(JOB_SCRATCH_SIZE)] if read_only else []),
                ]
            ),
        },
    }


def _main_container(
    spec: JobSpec,
    placement: WorkerPlacement,
    identity: JobIdentity,
    command: pulumi.Input[Sequence[pulumi.Input[str]]],
    env: Mapping[str, pulumi.Input[str]],
    ports: Sequence[tuple[str, int]],
    read_only: bool,
) -> k8s.core.v1.ContainerArgsDict:
    """The pod's main container: the job's command with its index, ports, the node's devices, its mounts."""
    main: k8s.core.v1.ContainerArgsDict = {
        "name": WORKER_CONTAINER,
        "image": spec["image"],
        "image_pull_policy": IMAGE_PULL_POLICY,
        "command": command,
        "env": env_list(env, with_index=True),
        "ports": [{"name": p, "container_port": n} for p, n in ports],
        "resources": worker_resources(placement),
        "volume_mounts": [
            SHARED_VOLUME_MOUNT,
            {"name": "dshm", "mount_path": "/dev/shm"},
            *identity.mounts,
            *([TMP_MOUNT] if read_only else []),
        ],
        "security_context": container_security(read_only_root=read_only),
    }
    if spec.get("code_uri"):
        main["working_dir"] = WORKSPACE
    return main


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
