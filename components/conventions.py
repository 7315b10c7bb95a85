"""Conventions shared by the components and the training image (not facts: choices of this project)."""

from typing import Mapping

#: UID and GID the training image runs as (``USER 1000:1000`` in training/Dockerfile; a test ties
#: them). Pods run as it, and the shared volume's files are owned by it.
TRAINING_IMAGE_UID = 1000
#: Where the shared volume is mounted in every pod.
SHARED_MOUNT = "/data"
#: The images' working folder (``WORKDIR /app`` in training/Dockerfile and the examples' Dockerfiles): the project's
#: scripts are there, and a job's relative script is read there without a code folder.
APP_DIR = "/app"

#: The namespace the storage components create for the training workloads, and the name of its shared claim, when
#: the caller names none (the stack config's defaults too: ``storage.namespace``, ``storage.pvcName``).
DEFAULT_NAMESPACE = "training"
DEFAULT_CLAIM_NAME = "shared-data"
#: Days the cluster's CloudWatch log groups (the control plane's, Container Insights') keep their logs, when the
#: caller gives none (the stack config's default too: ``cluster.logRetentionDays``).
DEFAULT_CLUSTER_LOG_RETENTION_DAYS = 30
#: Where the Kueue chart is installed (:mod:`components.admission`); a stack's namespaces may not take it.
KUEUE_NAMESPACE = "kueue-system"
#: Labels on every Kubernetes object the components create.
COMMON_LABELS: Mapping[str, str] = {
    "app.kubernetes.io/managed-by": "pulumi",
    "app.kubernetes.io/part-of": "eks-training",
}
#: The annotation that names a pulumi-kubernetes Patch resource's server-side apply field manager (else random):
#: https://www.pulumi.com/registry/packages/kubernetes/how-to-guides/managing-resources-with-server-side-apply/
PATCH_FIELD_MANAGER = "pulumi.com/patchFieldManager"
#: Pods cluster-autoscaler must not evict to consolidate nodes (training, etcd).
NO_EVICT: Mapping[str, str] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
#: What an MPIJob's launcher (``mpirun``, on the system nodes) requests: read by the MPIJob and by the plan, which
#: counts it in the workload's quota on the system group's Kueue ResourceFlavor (stacks/plan/admission.py).
LAUNCHER_CPU_MILLIS = 250
LAUNCHER_MEMORY_MIB = 512
#: Label on every pod of a Job this project runs (training, health check, staging, MPI launcher and workers): the
#: job's name. The job's pods select each other by it (headless Service, anti-affinity, network policy).
JOB_LABEL = "eks-training/job"
#: Label on the pods of a PyTorch job: its torchrun rendezvous backend (``etcd-v2`` pods may reach etcd).
RENDEZVOUS_LABEL = "eks-training/rendezvous"
#: ``app.kubernetes.io/name`` of the etcd pods (the network policy admits rendezvous clients to them).
ETCD_APP = "etcd"
#: Every image the pods run is pinned by digest (built by the stack, or the catalog's), so the node's copy is
#: always the right one: pull only when it is missing (Kubernetes' default for a digest, set explicitly;
#: source key ``k8s-image-pull-policy``).
IMAGE_PULL_POLICY = "IfNotPresent"


def check_job_name(job: str) -> str:
    """The Kubernetes name of a job's all-reduce health check (the program names the check so; the box's benchmark
    finds it so)."""
    return f"{job}-allreduce"
