"""A job's identity: its own service account, the init container that waits for the jobs it reads (with a Role that
may read only those) and the one that downloads its code (with a Pod Identity role that may read only that code)."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.conventions import COMMON_LABELS, IMAGE_PULL_POLICY, JOB_LABEL
from components.iam import s3_read_object_policy, s3_read_prefix_policy
from components.naming import k8s_name
from components.partition import current_partition
from components.pod_identity import pod_identity_role
from components.workloads.job_objects import JOB_OBJECTS
from components.workloads.pods import JOB_SCRATCH_SIZE, TMP_MOUNT, container_security, scratch_volume
from components.workloads.spec import WORKSPACE, JobSpec
from components.workloads.toolbox import FETCH_SCRIPT, WAIT_SCRIPT

#: The init container that waits for the jobs a job reads (:func:`job_identity`).
WAIT_CONTAINER = "wait-for-jobs"
#: The init container that downloads a job's code.
FETCH_CONTAINER = "fetch-code"

#: Where Kubernetes clients find the service account's token, CA and namespace (source key
#: ``k8s-service-account-token-volume``).
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass
class CodeFetch:
    """The init container that downloads a job's code into :data:`~components.workloads.spec.WORKSPACE`, and the
    volumes it and the main container use."""

    init_container: k8s.core.v1.ContainerArgsDict
    volumes: list[k8s.core.v1.VolumeArgsDict]


@dataclass
class JobIdentity:
    """What :func:`job_identity` created: the pods' service account and the init containers they run first."""

    service_account: k8s.core.v1.ServiceAccount
    init_containers: list[k8s.core.v1.ContainerArgsDict]
    volumes: list[k8s.core.v1.VolumeArgsDict]
    mounts: list[k8s.core.v1.VolumeMountArgsDict]
    """Mounts of the main container (the downloaded code)."""
    waits: list[pulumi.Resource]
    code: Optional[CodeFetch] = None
    """The download of the job's code alone, for pods that run the program without waiting (an MPI job's workers)."""


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
    fetch: k8s.core.v1.ContainerArgsDict = {
        "name": FETCH_CONTAINER,
        "image": helper,
        "image_pull_policy": IMAGE_PULL_POLICY,
        "command": ["python", FETCH_SCRIPT, "--source", code, "--dest", WORKSPACE],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "volume_mounts": [{"name": "workspace", "mount_path": WORKSPACE}, TMP_MOUNT],
        # boto3 writes only the downloaded files (to /workspace); HOME (/tmp) for its caches
        "security_context": container_security(read_only_root=True),
    }
    identity.code = CodeFetch(
        fetch, [{"name": "workspace", "empty_dir": {"size_limit": "10Gi"}}, scratch_volume(JOB_SCRATCH_SIZE)]
    )
    identity.init_containers.append(fetch)
    identity.volumes.extend(identity.code.volumes)
    identity.mounts.append({"name": "workspace", "mount_path": WORKSPACE})


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
