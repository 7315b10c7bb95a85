"""Pod building blocks shared by the workload components: placement, resources, environment,
security contexts, the shared volume, and the headless-Service + Indexed-Job pair that multi-node jobs run as.

A multi-node job's pods are placed and sized from a :class:`WorkerPlacement`: plain values the
stack's plan derives from the node group's instance type (``stacks.plan``), so what a pod requests
(GPUs, EFA devices, huge pages, CPU, memory, ``/dev/shm``) always matches the node it runs on.
"""

import hashlib
import json
import math
from typing import Literal, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.conventions import COMMON_LABELS, NO_EVICT, SHARED_MOUNT, TRAINING_IMAGE_UID
from components.naming import k8s_name
from components.scheduling import Toleration

#: UID/GID the pods run as: the training image's user, set explicitly so prebuilt images that
#: default to root also run unprivileged.
IMAGE_UID = TRAINING_IMAGE_UID
C10D_PORT = 29400
#: Exit code of the launcher/scripts for a usage error (argparse): retrying cannot help.
USAGE_ERROR_EXIT_CODE = 2
#: Name of the container of every multi-node job's pods.
WORKER_CONTAINER = "worker"

RendezvousBackend = Literal["etcd-v2", "c10d"]


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
    """Processes per pod (torchrun ``--nproc-per-node``; one per GPU, one on CPU nodes)."""
    threads_per_proc: int
    """``OMP_NUM_THREADS`` of each process."""
    env: NotRequired[Mapping[str, str]]
    """NCCL/libfabric environment of the node type (EFA settings of the instance family)."""


def run_id(job_name: str, recipe: Mapping[str, object]) -> str:
    """A stable id for a training run: the job name plus a hash of everything that defines the run
    (image, hyper-parameters), but not the worker count, so resizing resumes the same run."""
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

    Rendezvous settings measured with real processes (tests/test_training_faults_real.py: two nodes,
    etcd-v2, the node hosting rank 0 SIGKILLed): a lost node is declared dead
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


def pod_security() -> k8s.core.v1.PodSecurityContextArgsDict:
    """Pod security context: the image's unprivileged user, RuntimeDefault seccomp."""
    return {
        "run_as_non_root": True,
        "run_as_user": IMAGE_UID,
        "run_as_group": IMAGE_UID,
        "seccomp_profile": {"type": "RuntimeDefault"},
    }


def container_security() -> k8s.core.v1.SecurityContextArgsDict:
    """Container security context: no privilege escalation, no capabilities."""
    return {"allow_privilege_escalation": False, "capabilities": {"drop": ["ALL"]}}


def shared_volume(pvc_name: pulumi.Input[str]) -> k8s.core.v1.VolumeArgsDict:
    """The shared ReadWriteMany claim as a pod volume named ``shared``."""
    return {"name": "shared", "persistent_volume_claim": {"claim_name": pvc_name}}


#: Where the ``shared`` volume is mounted.
SHARED_VOLUME_MOUNT: k8s.core.v1.VolumeMountArgsDict = {"name": "shared", "mount_path": SHARED_MOUNT}


def worker_resources(placement: WorkerPlacement) -> k8s.core.v1.ResourceRequirementsArgsDict:
    """Requests and limits of one worker pod (one per node)."""
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


def worker_env(placement: WorkerPlacement, extra: Optional[Mapping[str, str]] = None) -> list[k8s.core.v1.EnvVarArgsDict]:
    """Worker environment. ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` is required: without it torchrun's
    elastic restarts hang (https://github.com/pytorch/pytorch/issues/135712; measured by
    tests/test_training_real.py). Nodes' NCCL/libfabric settings come from the placement."""
    env = {
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "OMP_NUM_THREADS": str(placement["threads_per_proc"]),
        "PYTHONUNBUFFERED": "1",
        "HOME": "/tmp",
        "LOGLEVEL": "INFO",
    }
    if placement["gpus"]:
        env.update({"NCCL_DEBUG": "WARN", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})
    env.update(dict(placement.get("env") or {}))
    env.update(dict(extra or {}))
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def worker_job(
    name: str,
    parent: pulumi.Resource,
    *,
    namespace: pulumi.Input[str],
    job_name: str,
    labels: Mapping[str, str],
    placement: WorkerPlacement,
    image: pulumi.Input[str],
    command: pulumi.Input[Sequence[str]],
    pvc_name: pulumi.Input[str],
    workers: int,
    backoff_limit: int,
    timeout_s: int,
    await_completion: bool,
    extra_env: Optional[Mapping[str, str]] = None,
    run_once: bool = False,
) -> tuple[k8s.core.v1.Service, k8s.batch.v1.Job]:
    """A headless Service and an Indexed Job of ``workers`` pods, one per node of the group (required
    anti-affinity), with stable hostnames ``<job>-<index>.<service>``."""
    svc_name = k8s_name(job_name, "workers")
    selector = {"eks-training/job": job_name}
    # The Service outlives runs: it carries no run-specific label.
    service_labels = {k: v for k, v in labels.items() if k != "eks-training/run"}
    service = k8s.core.v1.Service(
        f"{name}-service",
        metadata={"name": svc_name, "namespace": namespace, "labels": service_labels},
        spec={
            "cluster_ip": "None",
            "publish_not_ready_addresses": True,
            "selector": selector,
            "ports": [{"name": "c10d", "port": C10D_PORT, "target_port": C10D_PORT}],
        },
        opts=pulumi.ResourceOptions(parent=parent),
    )
    annotations = {} if await_completion else {"pulumi.com/skipAwait": "true"}
    minutes = f"{math.ceil(timeout_s / 60)}m"
    tolerations: list[k8s.core.v1.TolerationArgsDict] = [dict(t) for t in placement["tolerations"]]  # type: ignore[misc]
    job = k8s.batch.v1.Job(
        f"{name}-job",
        metadata={"name": job_name, "namespace": namespace, "labels": dict(labels), "annotations": annotations},
        spec={
            "completion_mode": "Indexed",
            "completions": workers,
            "parallelism": workers,
            "backoff_limit": backoff_limit,
            "active_deadline_seconds": timeout_s,
            "pod_failure_policy": {
                "rules": [
                    {"action": "Ignore", "on_pod_conditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    {
                        "action": "FailJob",
                        "on_exit_codes": {
                            "container_name": WORKER_CONTAINER,
                            "operator": "In",
                            "values": [USAGE_ERROR_EXIT_CODE],
                        },
                    },
                ]
            },
            "template": {
                # cluster-autoscaler must not evict a running training pod to consolidate nodes
                "metadata": {"labels": {**labels, **selector}, "annotations": dict(NO_EVICT)},
                "spec": {
                    "restart_policy": "Never",
                    "subdomain": svc_name,
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
                    "termination_grace_period_seconds": 60,
                    "security_context": pod_security(),
                    "containers": [
                        {
                            "name": WORKER_CONTAINER,
                            "image": image,
                            "command": command,
                            "env": worker_env(placement, extra_env),
                            "ports": [{"name": "c10d", "container_port": C10D_PORT}],
                            "resources": worker_resources(placement),
                            "volume_mounts": [SHARED_VOLUME_MOUNT, {"name": "dshm", "mount_path": "/dev/shm"}],
                            "security_context": container_security(),
                        }
                    ],
                    "volumes": [
                        shared_volume(pvc_name),
                        {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": f"{placement['shm_mib']}Mi"}},
                    ],
                },
            },
        },
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[service],
            delete_before_replace=True,
            custom_timeouts=pulumi.CustomTimeouts(create=minutes, update=minutes),
            ignore_changes=["spec", "metadata"] if run_once else None,
        ),
    )
    return service, job


def c10d_endpoint(job_name: str, namespace: pulumi.Input[str]) -> pulumi.Output[str]:
    """``<job>-0.<service>.<namespace>.svc.cluster.local:29400``: worker 0 hosts the c10d store."""
    return pulumi.Output.concat(
        job_name,
        "-0.",
        k8s_name(job_name, "workers"),
        ".",
        pulumi.Output.from_input(namespace),
        ".svc.cluster.local:",
        str(C10D_PORT),
    )
