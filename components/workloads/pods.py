"""Pod building blocks the workload components share: security contexts, volumes, requests sized from a
:class:`~components.workloads.spec.WorkerPlacement`, environment lists, and the order in which a job's objects are
created."""

import re
from typing import Any, Mapping, Sequence, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import IMAGES
from components.conventions import IMAGE_PULL_POLICY, SHARED_MOUNT, TRAINING_IMAGE_UID
from components.quantities import mebibytes, mebibytes_of, millicores
from components.workloads.spec import JobSpec, WorkerPlacement, stop_grace_seconds, variable_references

#: UID/GID the pods run as: the training image's user, set explicitly so prebuilt images that
#: default to root also run unprivileged.
IMAGE_UID = TRAINING_IMAGE_UID

#: Name of the main container of every job's pods.
WORKER_CONTAINER = "worker"

#: Name of the init container that creates a job's output folder (:func:`output_folder_containers`).
OUTPUT_FOLDER_CONTAINER = "output-folder"

#: Requests and limits of an init container that runs one small command and exits (a folder made, a port awaited).
SMALL_HELPER_RESOURCES: k8s.core.v1.ResourceRequirementsArgsDict = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "128Mi"},
}

#: Size limit of a job pod's ``/tmp`` when its root file system is read-only (torch compile and Triton caches,
#: OpenMPI's session folder, ``HOME``); an eviction threshold on the node's disk, not a reservation.
JOB_SCRATCH_SIZE = "8Gi"

#: Where Kubernetes publishes an Indexed Job pod's index (downward API).
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
#: The variable an Indexed Job's pods get first, their index from :data:`COMPLETION_INDEX_FIELD`.
INDEX_VARIABLE = "JOB_INDEX"
#: The variable the Job controller appends to an Indexed Job's containers, its index (kubernetes
#: ``pkg/controller/job/indexed_job_utils.go``, ``addCompletionIndexEnvVariable``).
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"


def pod_security() -> k8s.core.v1.PodSecurityContextArgsDict:
    """Pod security context: the image's unprivileged user, RuntimeDefault seccomp."""
    return {
        "run_as_non_root": True,
        "run_as_user": IMAGE_UID,
        "run_as_group": IMAGE_UID,
        "seccomp_profile": {"type": "RuntimeDefault"},
    }


class JobPodFields(TypedDict):
    """The pod spec fields of :func:`job_pod`."""

    automount_service_account_token: bool
    termination_grace_period_seconds: int
    security_context: k8s.core.v1.PodSecurityContextArgsDict


class GroupFields(TypedDict):
    """The pod spec fields of :func:`on_group`."""

    node_selector: dict[str, str]
    tolerations: list[k8s.core.v1.TolerationArgsDict]


def job_pod(spec: JobSpec) -> JobPodFields:
    """What the pod spec of every job's pods holds, whatever its kind: no mounted API token, the job's grace period
    at a stop (``stopGracePeriodSeconds``), :func:`pod_security`. A field every job's pods carry goes here."""
    return {
        "automount_service_account_token": False,
        "termination_grace_period_seconds": stop_grace_seconds(spec),
        "security_context": pod_security(),
    }


def on_group(placement: WorkerPlacement) -> GroupFields:
    """A worker pod's place: its node group's node selector and tolerations."""
    tolerations: list[k8s.core.v1.TolerationArgsDict] = [dict(t) for t in placement["tolerations"]]  # type: ignore[misc]
    return {"node_selector": dict(placement["node_selector"]), "tolerations": tolerations}


def shm_volume(placement: WorkerPlacement) -> k8s.core.v1.VolumeArgsDict:
    """A worker pod's ``/dev/shm`` (``dshm``): memory, as large as the placement gives."""
    return {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": mebibytes(placement["shm_mib"])}}


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


def output_folder_containers(spec: JobSpec) -> list[k8s.core.v1.ContainerArgsDict]:
    """The init container that creates the job's output folder (``OUTPUT_DIR``) on the shared volume, so the job's
    program finds it, as in ``python -m stacks local``: the catalog's pinned busybox, a few MB to pull, not the
    multi-GB toolbox image. A pod that starts through the toolbox's launcher needs none: the launcher creates the
    folder."""
    return [
        {
            "name": OUTPUT_FOLDER_CONTAINER,
            "image": IMAGES["busybox"].ref,
            "image_pull_policy": IMAGE_PULL_POLICY,
            "command": ["mkdir", "-p", "--", spec["output_dir"]],
            "resources": SMALL_HELPER_RESOURCES,
            "volume_mounts": [SHARED_VOLUME_MOUNT],
            "security_context": container_security(read_only_root=True),
        }
    ]


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


def cluster_ip_service(
    parent: pulumi.Resource,
    name: str,
    *,
    object_name: pulumi.Input[str],
    namespace: pulumi.Input[str],
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    port: tuple[str, int],
    after: pulumi.Resource,
) -> k8s.core.v1.Service:
    """``{name}-service``: a ClusterIP Service of ``selector``'s pods on one named port, created after ``after`` (the
    Deployment behind it)."""
    port_name, number = port
    return k8s.core.v1.Service(
        f"{name}-service",
        metadata={"name": object_name, "namespace": namespace, "labels": dict(labels)},
        spec={
            "type": "ClusterIP",
            "selector": dict(selector),
            "ports": [{"name": port_name, "port": number, "target_port": number}],
        },
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[after]),
    )


def worker_resources(placement: WorkerPlacement) -> k8s.core.v1.ResourceRequirementsArgsDict:
    """Requests and limits of one pod of the job (one per node)."""
    memory = mebibytes(placement["memory_mib"])
    requests: dict[str, str] = {"cpu": millicores(placement["cpu_millis"]), "memory": memory}
    limits: dict[str, str] = {"memory": memory}
    extended: dict[str, str] = {}
    if placement["gpus"]:
        extended["nvidia.com/gpu"] = str(placement["gpus"])
    if placement["efa_devices"]:
        extended["vpc.amazonaws.com/efa"] = str(placement["efa_devices"])
        extended["hugepages-2Mi"] = mebibytes(mebibytes_of(placement.get("hugepages_2mi") or "0"))
    requests.update(extended)
    limits.update(extended)
    return {"requests": requests, "limits": limits}


def env_list(env: Mapping[str, pulumi.Input[str]], *, with_index: bool = False) -> list[k8s.core.v1.EnvVarArgsDict]:
    """``EnvVar`` entries by name, each after the ones its value refers to (Kubernetes expands a ``$(NAME)`` only
    to a variable defined before it); with ``with_index`` a ``JOB_INDEX`` from the downward API comes first."""
    out: list[k8s.core.v1.EnvVarArgsDict] = []
    if with_index:
        out.append({"name": INDEX_VARIABLE, "value_from": {"field_ref": {"field_path": COMPLETION_INDEX_FIELD}}})
    out += [{"name": k, "value": env[k]} for k in _defined_first(env)]
    return out


def _defined_first(env: Mapping[str, pulumi.Input[str]]) -> list[str]:
    """The names of ``env`` sorted, each moved after the names its (plain) value refers to; names in a cycle of
    references come last."""
    refers = {
        k: {r for r in variable_references(v) if r in env and r != k} if isinstance(v, str) else set()
        for k, v in env.items()
    }
    order: list[str] = []
    left = sorted(env)
    while left:
        ready = [k for k in left if refers[k] <= set(order)] or left[:1]
        order.append(ready[0])
        left.remove(ready[0])
    return order


def created_after(spec: JobSpec, extra: Sequence[pulumi.Resource] = ()) -> pulumi.Input[pulumi.Resource]:
    """What a job's Kubernetes object waits for, as an entry of its ``depends_on``: it resolves once the job's setup
    Outputs (``after``, ``data_dir``) and ``extra`` have, and carries their resources (a component's ``depends_on``
    does not reach its children). A resource dependency, not an input's: when one of them is replaced, a Job deleted
    before it is made again, the engine does not replace the object with it (it replaces a dependent only through
    its inputs), and a failed one still fails it."""
    outputs = [*(spec.get("after") or []), spec.get("data_dir") or "", *[r.urn for r in extra]]
    # no resource of its own (None): the SDK takes the resources the Output carries (pulumi/runtime/_depends_on.py)
    return cast(pulumi.Input[pulumi.Resource], pulumi.Output.all(*outputs).apply(lambda _: None))


def exit_code_values(codes: Sequence[int]) -> list[int]:
    """The ``values`` of a pod failure policy's ``onExitCodes``: the API server accepts them only ascending and without
    repeats, and never 0 with ``In`` (``validatePodFailurePolicyRuleOnExitCodes`` in kubernetes
    ``pkg/apis/batch/validation/validation.go``: "must be ordered", duplicates, "must not be 0 for the In operator")."""
    if 0 in codes:
        raise ValueError(f"exit code 0 cannot select a failed pod: {list(codes)}")
    return sorted(set(codes))


#: Keys whose values are maps with user-chosen keys: not converted to camelCase.
_MAP_KEYS = frozenset({"labels", "annotations", "node_selector", "match_labels", "requests", "limits"})
_SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")
#: Pod template fields whose camelCase is not the regular one (an acronym in capitals).
_IRREGULAR = {
    "downward_api": "downwardAPI",
    "host_ipc": "hostIPC",
    "host_pid": "hostPID",
    "pod_ip": "podIP",
    "host_ip": "hostIP",
}


def camel(value: Any, key: str = "") -> Any:
    """A pod template written with the Python SDK's snake_case keys, as the camelCase a custom resource
    needs (custom resources are sent as they are; maps with user keys are left alone)."""
    if isinstance(value, dict):
        if key in _MAP_KEYS:
            return dict(value)
        out = {}
        for k, v in value.items():
            new = _IRREGULAR.get(k) or (
                re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), k) if _SNAKE.match(k) else k
            )
            out[new] = camel(v, k)
        return out
    if isinstance(value, (list, tuple)):
        return [camel(v, key) for v in value]
    return value
