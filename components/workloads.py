"""Training workloads on the cluster: etcd for rendezvous, dataset staging, elastic PyTorch
training (torchrun in a Kubernetes Indexed Job) and evaluation.

All need a ``kubernetes`` provider in ``opts``. The pod specs are built by pure functions
(``training_pod_spec`` and friends) from an instance type's catalog row, so what a pod requests
(GPUs, CPU, memory, ``/dev/shm``) always matches the node group it runs on.

Job ordering: the staging Job is awaited by Pulumi until it completes (the training Job is only
created after the data is verified on the shared volume); the training Job is created after it and
after etcd is ready; the evaluation Job is created after the training Job and waits in an init
container for the training run's ``DONE`` marker, so ``pulumi up`` does not block for the length
of a training run (set ``wait_for_completion`` to make it).
"""

import hashlib
import json
import math
import shlex
from dataclasses import dataclass
from typing import Literal, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.catalog import (
    EFA_ENV_BY_FAMILY,
    EFA_ENV_COMMON,
    EFA_HUGEPAGES_2MI,
    IMAGES,
    NODE_ROLE_LABEL,
    TRAINING_IMAGE_UID,
    InstanceType,
)
from components.iam import pod_identity_trust_policy

#: Where the shared volume is mounted in every pod.
SHARED_MOUNT = "/data"
#: UID/GID the pods run as: the training image's user, set explicitly so prebuilt images that
#: default to root also run unprivileged.
IMAGE_UID = TRAINING_IMAGE_UID
C10D_PORT = 29400
ETCD_CLIENT_PORT = 2379
#: Exit code of train.py/evaluate.py for a usage error (argparse): retrying cannot help.
USAGE_ERROR_EXIT_CODE = 2
#: Fraction of a node's allocatable CPU and memory a training pod requests (the rest is left for
#: DaemonSets: VPC CNI, kube-proxy, EFS CSI node, Pod Identity agent, device plugins).
NODE_SHARE = 0.8

RendezvousBackend = Literal["etcd-v2", "c10d"]

_LABELS = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": "eks-training"}
_NO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


def k8s_name(*parts: str, limit: int = 63) -> str:
    """A DNS-1123 label from ``parts``; long names keep a hash suffix so they stay unique."""
    name = "-".join(p.strip("-").lower() for p in parts if p)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def run_id(job_name: str, recipe: Mapping[str, object]) -> str:
    """A stable id for a training run: the job name plus a hash of everything that defines the run
    (image, hyper-parameters), but not the worker count, so resizing resumes the same run."""
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    return k8s_name(job_name, digest, limit=40)


@dataclass(frozen=True)
class PodSize:
    """Requests of one training pod on one node of a given instance type."""

    cpu_millis: int
    memory_mib: int
    gpus: int
    shm_mib: int
    procs_per_node: int
    threads_per_proc: int


def pod_size(facts: InstanceType) -> PodSize:
    """What one training pod (one per node) requests on ``facts``' instance type."""
    alloc_cpu = facts.allocatable_cpu_m or int(facts.vcpus * 1000 * 0.95)
    alloc_mem = facts.allocatable_memory_mib or int(facts.memory_mib * 0.85)
    cpu = int(alloc_cpu * NODE_SHARE) // 100 * 100
    mem = int(alloc_mem * NODE_SHARE) // 256 * 256
    procs = max(1, facts.gpus)
    return PodSize(
        cpu_millis=cpu,
        memory_mib=mem,
        gpus=facts.gpus,
        # Data-loader workers pass batches through /dev/shm; a quarter of the pod's memory, at most 64 GiB.
        shm_mib=min(mem // 4, 64 * 1024),
        procs_per_node=procs,
        threads_per_proc=max(1, (cpu // 1000) // procs),
    )


def tolerations_for(taints: Sequence[Mapping[str, str]]) -> list[k8s.core.v1.TolerationArgsDict]:
    """Tolerations that match ``taints`` (Kubernetes spelling) exactly."""
    return [{"key": t["key"], "operator": "Equal", "value": t.get("value", ""), "effect": t["effect"]} for t in taints]


def torchrun_command(
    *,
    min_nodes: int,
    max_nodes: int,
    procs_per_node: int,
    backend: RendezvousBackend,
    endpoint: str,
    rdzv_id: str,
    max_restarts: int,
    script_args: Sequence[str],
) -> list[str]:
    """The container command: torchrun elastic (``--nnodes=MIN:MAX``) running train.py."""
    conf = "join_timeout=1800,last_call_timeout=30,keep_alive_interval=5,keep_alive_max_attempt=6"
    return [
        "torchrun",
        f"--nnodes={min_nodes}:{max_nodes}",
        f"--nproc-per-node={procs_per_node}",
        f"--rdzv-backend={backend}",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={rdzv_id}",
        f"--rdzv-conf={conf}",
        f"--max-restarts={max_restarts}",
        "--monitor-interval=5",
        "/app/train.py",
        *script_args,
    ]


def _pod_security() -> k8s.core.v1.PodSecurityContextArgsDict:
    return {
        "run_as_non_root": True,
        "run_as_user": IMAGE_UID,
        "run_as_group": IMAGE_UID,
        "seccomp_profile": {"type": "RuntimeDefault"},
    }


def _container_security() -> k8s.core.v1.SecurityContextArgsDict:
    return {"allow_privilege_escalation": False, "capabilities": {"drop": ["ALL"]}}


def _shared_volume(pvc_name: pulumi.Input[str]) -> k8s.core.v1.VolumeArgsDict:
    return {"name": "shared", "persistent_volume_claim": {"claim_name": pvc_name}}


_SHARED_MOUNT: k8s.core.v1.VolumeMountArgsDict = {"name": "shared", "mount_path": SHARED_MOUNT}


# --------------------------------------------------------------------------------------- etcd
class EtcdRendezvousArgs(TypedDict):
    """Inputs of :class:`EtcdRendezvous`."""

    namespace: pulumi.Input[str]
    """Namespace (the training namespace)."""
    node_selector: NotRequired[Mapping[str, str]]
    """Where etcd runs (the system nodes)."""
    image: NotRequired[str]
    """etcd image; default the catalog's etcd 3.5 (the last release with the v2 API)."""


class EtcdRendezvous(pulumi.ComponentResource):
    """A single-member etcd 3.5 with the v2 API enabled (torchrun's etcd-v2 rendezvous), as a
    Deployment and a ClusterIP Service.

    Rendezvous state is ephemeral (an ``emptyDir``): if etcd restarts, running agents lose their
    rendezvous keys, fail their keep-alives and exit; the Job restarts those pods (within its
    backoff limit) and they re-rendezvous against the fresh etcd and resume from the latest
    checkpoint on the shared volume. ``tests/test_training_real.py`` measures this.
    """

    service_name: pulumi.Output[str]
    """Name of the etcd Service."""
    endpoint: pulumi.Output[str]
    """``<service>.<namespace>.svc.cluster.local:2379``: the rendezvous endpoint."""

    def __init__(self, name: str, args: EtcdRendezvousArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:EtcdRendezvous", name, None, opts)
        labels = {**_LABELS, "app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": name}
        container: k8s.core.v1.ContainerArgsDict = {
            "name": "etcd",
            "image": args.get("image") or IMAGES["etcd"],
            "command": ["/usr/local/bin/etcd"],
            "args": [
                "--name=rendezvous",
                "--data-dir=/var/lib/etcd",
                "--enable-v2=true",
                f"--listen-client-urls=http://0.0.0.0:{ETCD_CLIENT_PORT}",
                f"--advertise-client-urls=http://{name}:{ETCD_CLIENT_PORT}",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster-state=new",
                "--auto-compaction-retention=1",
                "--quota-backend-bytes=1073741824",
            ],
            "ports": [{"name": "client", "container_port": ETCD_CLIENT_PORT}],
            "readiness_probe": {
                "http_get": {"path": "/health", "port": ETCD_CLIENT_PORT},
                "period_seconds": 5,
                "failure_threshold": 3,
            },
            "liveness_probe": {
                "http_get": {"path": "/health", "port": ETCD_CLIENT_PORT},
                "initial_delay_seconds": 15,
                "period_seconds": 10,
                "failure_threshold": 6,
            },
            "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
            "volume_mounts": [{"name": "data", "mount_path": "/var/lib/etcd"}],
            "security_context": _container_security(),
        }
        deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata={"name": name, "namespace": args["namespace"], "labels": labels},
            spec={
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"match_labels": {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": name}},
                "template": {
                    # losing etcd makes every torchrun agent exit: keep the autoscaler from moving it
                    "metadata": {"labels": labels, "annotations": dict(_NO_EVICT)},
                    "spec": {
                        "node_selector": dict(args.get("node_selector") or {}),
                        "automount_service_account_token": False,
                        "security_context": {
                            "run_as_non_root": True,
                            "run_as_user": 65532,
                            "run_as_group": 65532,
                            "fs_group": 65532,
                            "seccomp_profile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container],
                        "volumes": [{"name": "data", "empty_dir": {"size_limit": "2Gi"}}],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        service = k8s.core.v1.Service(
            f"{name}-service",
            metadata={"name": name, "namespace": args["namespace"], "labels": labels},
            spec={
                "type": "ClusterIP",
                "selector": {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": name},
                "ports": [{"name": "client", "port": ETCD_CLIENT_PORT, "target_port": ETCD_CLIENT_PORT}],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[deployment]),
        )
        self.service_name = service.metadata.name
        self.endpoint = pulumi.Output.concat(
            service.metadata.name, ".", service.metadata.namespace, ".svc.cluster.local:", str(ETCD_CLIENT_PORT)
        )
        self.register_outputs({"service_name": self.service_name, "endpoint": self.endpoint})


# ------------------------------------------------------------------------------- data staging
class DatasetStagingArgs(TypedDict):
    """Inputs of :class:`DatasetStaging`."""

    namespace: pulumi.Input[str]
    """Training namespace (holds the PVC)."""
    pvc_name: pulumi.Input[str]
    """The shared ReadWriteMany claim."""
    image: pulumi.Input[str]
    """Training image (contains /app/stage_data.py)."""
    source: str
    """``https://...`` or ``s3://bucket/key`` of the dataset tarball."""
    dest_path: str
    """Folder under the shared volume, e.g. ``datasets/cifar10``."""
    md5: NotRequired[str]
    """Expected MD5 of the tarball."""
    expected_bytes: NotRequired[int]
    """Expected size of the tarball."""
    node_selector: NotRequired[Mapping[str, str]]
    """Where the Job runs (the system nodes)."""
    cluster_name: NotRequired[pulumi.Input[str]]
    """EKS cluster name; required for an ``s3://`` source (Pod Identity association)."""
    cluster_name_plain: NotRequired[str]
    """The cluster name as a plain string (IAM trust policy); required for ``s3://``."""
    timeout_minutes: NotRequired[int]
    """How long Pulumi waits for the Job to complete. Default 30."""


class DatasetStaging(pulumi.ComponentResource):
    """A Job that downloads, verifies and extracts the dataset onto the shared volume (idempotent:
    it exits at once when the marker of a verified copy is there). For an ``s3://`` source it runs
    as its own service account with a Pod Identity role that may read only that object."""

    job_name: pulumi.Output[str]
    """Name of the staging Job."""
    data_dir: pulumi.Output[str]
    """Path of the dataset inside the pods (``/data/<dest_path>``); resolves once the staging Job
    completed, so consumers built from it are created after the data is verified."""

    def __init__(self, name: str, args: DatasetStagingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:DatasetStaging", name, None, opts)
        source = args["source"]
        data_dir = f"{SHARED_MOUNT}/{args['dest_path'].strip('/')}"
        labels = {**_LABELS, "app.kubernetes.io/name": "dataset-staging", "app.kubernetes.io/instance": name}
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": k8s_name(name, "sa"), "namespace": args["namespace"], "labels": labels},
            automount_service_account_token=False,
            opts=pulumi.ResourceOptions(parent=self),
        )
        depends: list[pulumi.Resource] = []
        if source.startswith("s3://"):
            bucket, _, key = source[len("s3://") :].partition("/")
            cluster_plain = args.get("cluster_name_plain")
            cluster_name = args.get("cluster_name")
            if not cluster_plain or cluster_name is None:
                raise ValueError(f"{name}: an s3:// source needs cluster_name and cluster_name_plain")
            sa_name = k8s_name(name, "sa")
            caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
            role = aws.iam.Role(
                f"{name}-role",
                name=k8s_name(cluster_plain, "dataset-stager", limit=64),
                description=f"Dataset staging job: read {source}",
                assume_role_policy=pulumi.Output.all(caller.account_id, args["namespace"]).apply(
                    lambda v: pod_identity_trust_policy(v[0], cluster_plain, v[1], [sa_name])
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            aws.iam.RolePolicy(
                f"{name}-read",
                role=role.id,
                policy=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": f"arn:aws:s3:::{bucket}/{key}"}
                        ],
                    }
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            association = aws.eks.PodIdentityAssociation(
                f"{name}-pod-identity",
                cluster_name=cluster_name,
                namespace=args["namespace"],
                service_account=sa.metadata.name,
                role_arn=role.arn,
                opts=pulumi.ResourceOptions(parent=self),
            )
            depends.append(association)

        command = ["python", "/app/stage_data.py", "--source", source, "--dest", data_dir]
        if args.get("md5"):
            command += ["--md5", str(args["md5"])]
        if args.get("expected_bytes"):
            command += ["--expected-bytes", str(args["expected_bytes"])]
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata={"name": k8s_name(name), "namespace": args["namespace"], "labels": labels},
            spec={
                "backoff_limit": 4,
                "active_deadline_seconds": 60 * int(args.get("timeout_minutes", 30)),
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restart_policy": "OnFailure",
                        "service_account_name": sa.metadata.name,
                        "automount_service_account_token": False,
                        "node_selector": dict(args.get("node_selector") or {}),
                        "security_context": _pod_security(),
                        "containers": [
                            {
                                "name": "stage",
                                "image": args["image"],
                                "command": command,
                                "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
                                "resources": {
                                    "requests": {"cpu": "500m", "memory": "1Gi"},
                                    "limits": {"cpu": "2", "memory": "2Gi"},
                                },
                                "volume_mounts": [_SHARED_MOUNT],
                                "security_context": _container_security(),
                            }
                        ],
                        "volumes": [_shared_volume(args["pvc_name"])],
                    },
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=depends,
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=f"{int(args.get('timeout_minutes', 30))}m"),
            ),
        )
        self.job_name = job.metadata.name
        # Resolves when the Job has completed (Pulumi awaits it): jobs that read the data wait for it.
        self.data_dir = job.metadata.apply(lambda _: data_dir)
        self.register_outputs({"job_name": self.job_name, "data_dir": self.data_dir})


# ----------------------------------------------------------------------------------- training
class TrainingHyperparameters(TypedDict):
    """train.py's recipe (see training/train.py)."""

    epochs: int
    batch_size: int
    learning_rate: float
    width: int
    data_loader_workers: int
    checkpoint_every_steps: int


class WorkerPlacement(TypedDict):
    """Where a multi-node job's pods go and what each requests, derived from one catalog row."""

    instance: InstanceType
    """Catalog row of the worker nodes' instance type (sizes the pods)."""
    node_labels: Mapping[str, str]
    """Labels selecting the worker node group."""
    node_taints: Sequence[Mapping[str, str]]
    """Taints of the worker node group (Kubernetes spelling); the pods tolerate exactly these."""
    efa: NotRequired[bool]
    """The group is EFA-enabled: pods request all of the node's EFA interfaces and huge pages and get
    the NCCL/libfabric environment for the instance family."""
    zone: NotRequired[str]
    """Zone of the group; pods are pinned to it (EFA groups are single-zone)."""


def worker_resources(placement: WorkerPlacement) -> k8s.core.v1.ResourceRequirementsArgsDict:
    """Requests and limits of one worker pod (one per node), from the catalog row."""
    facts = placement["instance"]
    size = pod_size(facts)
    requests: dict[str, str] = {"cpu": f"{size.cpu_millis}m", "memory": f"{size.memory_mib}Mi"}
    limits: dict[str, str] = {"memory": f"{size.memory_mib}Mi"}
    extended: dict[str, str] = {}
    if size.gpus:
        extended["nvidia.com/gpu"] = str(size.gpus)
    if placement.get("efa"):
        extended["vpc.amazonaws.com/efa"] = str(facts.max_efa_interfaces)
        extended["hugepages-2Mi"] = EFA_HUGEPAGES_2MI
    requests.update(extended)
    limits.update(extended)
    return {"requests": requests, "limits": limits}


def worker_env(
    placement: WorkerPlacement, extra: Optional[Mapping[str, str]] = None
) -> list[k8s.core.v1.EnvVarArgsDict]:
    """Worker environment. ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` is required: without it
    torchrun's elastic restarts hang (pytorch/pytorch#135712; measured in ../shared/field-notes.md).
    EFA workers get the NCCL/libfabric settings of their instance family from the catalog."""
    facts = placement["instance"]
    size = pod_size(facts)
    env = {
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "OMP_NUM_THREADS": str(size.threads_per_proc),
        "PYTHONUNBUFFERED": "1",
        "HOME": "/tmp",
        "LOGLEVEL": "INFO",
    }
    if size.gpus:
        env.update({"NCCL_DEBUG": "WARN", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"})
    if placement.get("efa"):
        env.update(EFA_ENV_COMMON)
        env.update(EFA_ENV_BY_FAMILY.get(facts.family, {}))
    elif size.gpus:
        env.update({k: v for k, v in EFA_ENV_BY_FAMILY.get(facts.family, {}).items() if k.startswith("NCCL_")})
    env.update(dict(extra or {}))
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def _worker_job(
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
    """A headless Service and an Indexed Job of ``workers`` pods, one per node of the group."""
    svc_name = k8s_name(job_name, "workers")
    facts = placement["instance"]
    size = pod_size(facts)
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
    node_selector = dict(placement["node_labels"])
    if placement.get("zone"):
        node_selector["topology.kubernetes.io/zone"] = str(placement.get("zone"))
    annotations = {} if await_completion else {"pulumi.com/skipAwait": "true"}
    minutes = f"{math.ceil(timeout_s / 60)}m"
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
                            "container_name": "worker",
                            "operator": "In",
                            "values": [USAGE_ERROR_EXIT_CODE],
                        },
                    },
                ]
            },
            "template": {
                # cluster-autoscaler must not evict a running training pod to consolidate nodes
                "metadata": {"labels": {**labels, **selector}, "annotations": dict(_NO_EVICT)},
                "spec": {
                    "restart_policy": "Never",
                    "subdomain": svc_name,
                    "automount_service_account_token": False,
                    "node_selector": node_selector,
                    "tolerations": tolerations_for(placement["node_taints"]),
                    "affinity": {
                        "pod_anti_affinity": {
                            "required_during_scheduling_ignored_during_execution": [
                                {"label_selector": {"match_labels": selector}, "topology_key": "kubernetes.io/hostname"}
                            ]
                        }
                    },
                    "termination_grace_period_seconds": 60,
                    "security_context": _pod_security(),
                    "containers": [
                        {
                            "name": "worker",
                            "image": image,
                            "command": command,
                            "env": worker_env(placement, extra_env),
                            "ports": [{"name": "c10d", "container_port": C10D_PORT}],
                            "resources": worker_resources(placement),
                            "volume_mounts": [_SHARED_MOUNT, {"name": "dshm", "mount_path": "/dev/shm"}],
                            "security_context": _container_security(),
                        }
                    ],
                    "volumes": [
                        _shared_volume(pvc_name),
                        {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": f"{size.shm_mib}Mi"}},
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


class ElasticTrainingJobArgs(TypedDict):
    """Inputs of :class:`ElasticTrainingJob`."""

    namespace: pulumi.Input[str]
    """Training namespace."""
    pvc_name: pulumi.Input[str]
    """Shared claim (data, checkpoints, model)."""
    image: pulumi.Input[str]
    """Training image, by digest."""
    job_name: str
    """Kubernetes name of the Job (and prefix of the headless Service)."""
    run_id: str
    """Stable id of the run: rendezvous id and output folder ``/data/runs/<run_id>``."""
    placement: WorkerPlacement
    """Node group, instance facts, EFA and zone of the workers."""
    workers: int
    """Number of worker pods (one per node)."""
    min_workers: int
    """torchrun's minimum node count (``--nnodes=MIN:MAX``)."""
    max_workers: int
    """torchrun's maximum node count; the worker count can be raised up to this without a new run."""
    rendezvous_backend: RendezvousBackend
    """``etcd-v2`` (default; needs ``etcd_endpoint``) or ``c10d`` (hosted by worker 0)."""
    etcd_endpoint: NotRequired[pulumi.Input[str]]
    """``host:port`` of etcd for ``etcd-v2``."""
    data_dir: pulumi.Input[str]
    """Dataset folder inside the pods (an Output of the staging step: the Job waits for it)."""
    hyperparameters: TrainingHyperparameters
    """train.py's recipe."""
    max_restarts: NotRequired[int]
    """torchrun restarts per agent, and the Job's pod backoff per worker. Default 3."""
    wait_for_completion: NotRequired[bool]
    """Make ``pulumi up`` wait until the Job completes. Default False."""
    timeout_hours: NotRequired[float]
    """Deadline of the Job (activeDeadlineSeconds), and Pulumi's wait when waiting. Default 24."""
    extra_env: NotRequired[Mapping[str, str]]
    """Additional environment for the workers."""


class ElasticTrainingJob(pulumi.ComponentResource):
    """PyTorch DDP with torchrun elastic as a Kubernetes Indexed Job plus a headless Service.

    One pod per node (required anti-affinity), stable hostnames ``<job>-<index>.<service>``, the
    shared volume at ``/data``, a memory-backed ``/dev/shm``, ``nvidia.com/gpu`` equal to the
    node's GPUs, and on EFA groups ``vpc.amazonaws.com/efa`` equal to the node's interfaces plus
    huge pages and the family's NCCL/libfabric settings, all from one catalog row. Pods start
    through ``/app/launch.py``, which exits at once when the run is already complete and resets a
    rendezvous that an earlier failed attempt closed. A failed pod is replaced by the Job (same
    index) and its torchrun agent re-joins the rendezvous; train.py resumes from the latest
    checkpoint. Node drains and spot interruptions (``DisruptionTarget``) don't count against the
    backoff; a launcher usage error (exit code 2: an inconsistent command) fails the Job at once.
    Changing ``workers`` replaces the Job (pulumi-kubernetes replaces a Job whose completions,
    parallelism or template change; the old one is deleted first): the new pods keep the run id and
    output folder, so torchrun re-rendezvouses at the new size and train.py resumes from the latest
    checkpoint.
    """

    job_name: pulumi.Output[str]
    """Name of the Job."""
    service_name: pulumi.Output[str]
    """Name of the headless Service."""
    output_dir: pulumi.Output[str]
    """Where checkpoints, ``model.pt`` and ``DONE`` are written inside the pods; resolves after the
    Job is created, so an evaluation built from it comes after it."""
    rendezvous_endpoint: pulumi.Output[str]
    """The ``--rdzv-endpoint`` used."""

    def __init__(self, name: str, args: ElasticTrainingJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:ElasticTrainingJob", name, None, opts)
        job_name = args["job_name"]
        placement = args["placement"]
        size = pod_size(placement["instance"])
        workers = args["workers"]
        if not 1 <= args["min_workers"] <= workers <= args["max_workers"]:
            raise ValueError(f"{name}: need 1 <= min_workers <= workers <= max_workers")
        max_restarts = int(args.get("max_restarts", 3))
        hp = args["hyperparameters"]
        output_dir = f"{SHARED_MOUNT}/runs/{args['run_id']}"
        labels = {**_LABELS, "app.kubernetes.io/name": "trainer", "eks-training/run": args["run_id"]}
        backend = args["rendezvous_backend"]

        if backend == "etcd-v2":
            if args.get("etcd_endpoint") is None:
                raise ValueError(f"{name}: etcd-v2 rendezvous needs etcd_endpoint")
            endpoint: pulumi.Output[str] = pulumi.Output.from_input(args["etcd_endpoint"])
        else:
            endpoint = c10d_endpoint(job_name, args["namespace"])

        def command(ep: str, data_dir: str) -> list[str]:
            launcher = [
                "python",
                "/app/launch.py",
                "--output-dir",
                output_dir,
                "--rdzv-backend",
                backend,
                "--rdzv-endpoint",
                ep,
                "--rdzv-id",
                args["run_id"],
                "--",
            ]
            return launcher + torchrun_command(
                min_nodes=args["min_workers"],
                max_nodes=args["max_workers"],
                procs_per_node=size.procs_per_node,
                backend=backend,
                endpoint=ep,
                rdzv_id=args["run_id"],
                max_restarts=max_restarts,
                script_args=[
                    "--data-dir",
                    data_dir,
                    "--output-dir",
                    output_dir,
                    "--epochs",
                    str(hp["epochs"]),
                    "--batch-size",
                    str(hp["batch_size"]),
                    "--lr",
                    str(hp["learning_rate"]),
                    "--width",
                    str(hp["width"]),
                    "--workers",
                    str(hp["data_loader_workers"]),
                    "--checkpoint-every-steps",
                    str(hp["checkpoint_every_steps"]),
                ],
            )

        service, job = _worker_job(
            name,
            self,
            namespace=args["namespace"],
            job_name=job_name,
            labels=labels,
            placement=placement,
            image=args["image"],
            command=pulumi.Output.all(endpoint, args["data_dir"]).apply(lambda v: command(str(v[0]), str(v[1]))),
            pvc_name=args["pvc_name"],
            workers=workers,
            backoff_limit=max_restarts * args["max_workers"],
            timeout_s=int(float(args.get("timeout_hours", 24)) * 3600),
            await_completion=bool(args.get("wait_for_completion")),
            extra_env=args.get("extra_env"),
        )
        self.job_name = job.metadata.name
        self.service_name = service.metadata.name
        self.output_dir = job.metadata.apply(lambda _: output_dir)
        self.rendezvous_endpoint = endpoint
        self.register_outputs(
            {
                "job_name": self.job_name,
                "service_name": self.service_name,
                "output_dir": self.output_dir,
                "rendezvous_endpoint": self.rendezvous_endpoint,
            }
        )


# ------------------------------------------------------------------------------- health check
class AllReduceHealthCheckArgs(TypedDict):
    """Inputs of :class:`AllReduceHealthCheck`."""

    namespace: pulumi.Input[str]
    """Training namespace."""
    pvc_name: pulumi.Input[str]
    """Shared claim (the report is written there)."""
    image: pulumi.Input[str]
    """Training image (contains /app/allreduce_bench.py)."""
    job_name: str
    """Kubernetes name of the Job."""
    report_path: str
    """Where the JSON report goes inside the pods (on the shared volume)."""
    placement: WorkerPlacement
    """The training nodes: same group, same requests as the training pods."""
    workers: int
    """Nodes to test (the training job's worker count)."""
    min_bus_bandwidth_gbytes_per_s: NotRequired[float]
    """Fail the Job (and so stop training from being created) below this bus bandwidth."""
    max_bytes: NotRequired[int]
    """Largest all-reduce message. Default 1 GiB on GPU, 64 MiB on CPU."""
    timeout_minutes: NotRequired[int]
    """How long Pulumi waits for the Job (including nodes scaling up). Default 60."""
    after: NotRequired[pulumi.Input[str]]
    """An Output the Job waits for (e.g. the staged data), to serialise it after earlier steps."""


class AllReduceHealthCheck(pulumi.ComponentResource):
    """An Indexed Job that runs ``allreduce_bench.py`` under torchrun across the training nodes
    (NCCL over EFA on GPU nodes, gloo on CPU nodes) and reports the all-reduce bus bandwidth.
    Pulumi waits for it; with a threshold a low bandwidth fails the Job, ``pulumi up`` stops and the
    training Job (which waits for ``report_path``) is never created."""

    job_name: pulumi.Output[str]
    """Name of the Job."""
    report_path: pulumi.Output[str]
    """Path of the JSON report; resolves once the Job completed (passed)."""

    # The check gates the first start of training. Later updates (a new worker count, a new image)
    # leave the completed Job alone: re-running it would need the nodes the running training holds.

    def __init__(
        self, name: str, args: AllReduceHealthCheckArgs, opts: Optional[pulumi.ResourceOptions] = None
    ) -> None:
        super().__init__("eks-training:index:AllReduceHealthCheck", name, None, opts)
        job_name = args["job_name"]
        placement = args["placement"]
        size = pod_size(placement["instance"])
        workers = args["workers"]
        report = args["report_path"]
        labels = {**_LABELS, "app.kubernetes.io/name": "allreduce-health-check"}
        endpoint = c10d_endpoint(job_name, args["namespace"])
        max_bytes = int(args.get("max_bytes") or ((1 << 30) if size.gpus else (64 << 20)))

        def command(v: list[object]) -> list[str]:
            # every node must take part, so the link between nodes is what gets measured
            script = [
                "--max-bytes", str(max_bytes),
                "--expect-world-size", str(workers * size.procs_per_node),
                "--output-json", report,
            ]
            if placement.get("efa"):
                # fail, rather than measure TCP, when a node lacks its EFA devices or the OFI plugin
                script += ["--require-efa", str(placement["instance"].max_efa_interfaces)]
            if args.get("min_bus_bandwidth_gbytes_per_s") is not None:
                # allreduce_bench.py's --min-busbw-gbps is in GB/s (1e9 bytes/s), like nccl-tests
                script += ["--min-busbw-gbps", str(args["min_bus_bandwidth_gbytes_per_s"])]
            cmd = torchrun_command(
                min_nodes=workers,
                max_nodes=workers,
                procs_per_node=size.procs_per_node,
                backend="c10d",
                endpoint=str(v[0]),
                rdzv_id=job_name,
                max_restarts=0,
                script_args=script,
            )
            return [c if c != "/app/train.py" else "/app/allreduce_bench.py" for c in cmd]

        timeout_s = 60 * int(args.get("timeout_minutes", 60))
        _, job = _worker_job(
            name,
            self,
            namespace=args["namespace"],
            job_name=job_name,
            labels=labels,
            placement=placement,
            image=args["image"],
            command=pulumi.Output.all(endpoint, args.get("after", "")).apply(command),
            pvc_name=args["pvc_name"],
            workers=workers,
            # a low bandwidth fails deterministically: retry once (for transient pod failures), not per node
            backoff_limit=1,
            timeout_s=timeout_s,
            await_completion=True,
            run_once=True,
            # NCCL logs its transport ("NET/OFI ... Libfabric" on EFA) in the check's pod logs
            extra_env={"NCCL_DEBUG": "INFO"} if size.gpus else None,
        )
        self.job_name = job.metadata.name
        self.report_path = job.metadata.apply(lambda _: report)
        self.register_outputs({"job_name": self.job_name, "report_path": self.report_path})


# --------------------------------------------------------------------------------- evaluation
class EvaluationJobArgs(TypedDict):
    """Inputs of :class:`EvaluationJob`."""

    namespace: pulumi.Input[str]
    """Training namespace."""
    pvc_name: pulumi.Input[str]
    """Shared claim."""
    image: pulumi.Input[str]
    """Training image (contains /app/evaluate.py)."""
    job_name: str
    """Kubernetes name of the Job."""
    run_dir: pulumi.Input[str]
    """The training run's output folder (holds ``model.pt`` and ``DONE``)."""
    data_dir: pulumi.Input[str]
    """Dataset folder."""
    node_selector: NotRequired[Mapping[str, str]]
    """Where the Job runs (CPU is enough: the system nodes)."""
    min_accuracy: NotRequired[float]
    """Fail the Job when the overall accuracy is below this."""
    wait_for_completion: NotRequired[bool]
    """Make ``pulumi up`` wait for the result. Default False."""
    timeout_hours: NotRequired[float]
    """Deadline, including the wait for training. Default 24."""


class EvaluationJob(pulumi.ComponentResource):
    """A Job that waits for the training run's ``DONE`` marker, then evaluates ``model.pt`` on the
    10,000 test images and writes overall and per-class accuracy to ``<run>/evaluation.json`` (the
    last log line carries the same JSON)."""

    job_name: pulumi.Output[str]
    """Name of the Job."""
    result_path: pulumi.Output[str]
    """Path of the JSON result on the shared volume (inside the pods)."""

    def __init__(self, name: str, args: EvaluationJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:EvaluationJob", name, None, opts)
        labels = {**_LABELS, "app.kubernetes.io/name": "evaluation", "app.kubernetes.io/instance": name}
        timeout_s = int(float(args.get("timeout_hours", 24)) * 3600)
        result = pulumi.Output.concat(args["run_dir"], "/evaluation.json")

        def commands(v: list[object]) -> dict[str, list[str]]:
            run_dir, data_dir = str(v[0]), str(v[1])
            evaluate = [
                "python",
                "/app/evaluate.py",
                "--model",
                f"{run_dir}/model.pt",
                "--data-dir",
                data_dir,
                "--output-json",
                f"{run_dir}/evaluation.json",
            ]
            if args.get("min_accuracy") is not None:
                evaluate += ["--min-accuracy", str(args["min_accuracy"])]
            wait = ["sh", "-c", f"until [ -f {shlex.quote(run_dir + '/DONE')} ]; do sleep 30; done"]
            return {"wait": wait, "evaluate": evaluate}

        cmds = pulumi.Output.all(args["run_dir"], args["data_dir"]).apply(commands)
        annotations = {} if args.get("wait_for_completion") else {"pulumi.com/skipAwait": "true"}
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                "name": args["job_name"],
                "namespace": args["namespace"],
                "labels": labels,
                "annotations": annotations,
            },
            spec={
                "backoff_limit": 3,
                "active_deadline_seconds": timeout_s,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restart_policy": "OnFailure",
                        "automount_service_account_token": False,
                        "node_selector": dict(args.get("node_selector") or {}),
                        "security_context": _pod_security(),
                        "init_containers": [
                            {
                                "name": "wait-for-training",
                                "image": args["image"],
                                "command": cmds.apply(lambda c: c["wait"]),
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "32Mi"},
                                    "limits": {"memory": "64Mi"},
                                },
                                "volume_mounts": [_SHARED_MOUNT],
                                "security_context": _container_security(),
                            }
                        ],
                        "containers": [
                            {
                                "name": "evaluate",
                                "image": args["image"],
                                "command": cmds.apply(lambda c: c["evaluate"]),
                                "env": [
                                    {"name": "HOME", "value": "/tmp"},
                                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                                    {"name": "OMP_NUM_THREADS", "value": "1"},
                                ],
                                # requested for the whole wait, so kept small; evaluation of 10,000
                                # 32x32 images on one CPU takes about a minute
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "1Gi"},
                                    "limits": {"memory": "2Gi"},
                                },
                                "volume_mounts": [_SHARED_MOUNT],
                                "security_context": _container_security(),
                            }
                        ],
                        "volumes": [_shared_volume(args["pvc_name"])],
                    },
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=f"{math.ceil(timeout_s / 60)}m"),
            ),
        )
        self.job_name = job.metadata.name
        self.result_path = result
        self.register_outputs({"job_name": self.job_name, "result_path": self.result_path})


def system_node_selector() -> dict[str, str]:
    """Selects the system node group."""
    return {NODE_ROLE_LABEL: "system"}
