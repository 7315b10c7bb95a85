"""The headless Service and Indexed Job that multi-node jobs run as: one pod per node of the group with a stable
hostname, the shared volume, ``/dev/shm``, the job's identity, and a pod failure policy that tells a stopped pod from
a failed program."""

from typing import Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.conventions import IMAGE_PULL_POLICY, JOB_LABEL, NO_EVICT
from components.workloads.identity import WAIT_CONTAINER, JobIdentity, job_identity
from components.workloads.job_objects import BATCH_JOB
from components.workloads.pods import (
    JOB_SCRATCH_SIZE,
    SHARED_VOLUME_MOUNT,
    TMP_MOUNT,
    WORKER_CONTAINER,
    container_security,
    created_after,
    env_list,
    exit_code_values,
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
    C10D_PORT,
    PREDECESSOR_FAILED_EXIT_CODE,
    USAGE_ERROR_EXIT_CODE,
    WORKSPACE,
    JobSpec,
    WorkerPlacement,
    service_name,
    stop_grace_seconds,
)
from components.workloads.waits import (
    await_annotations,
    await_seconds,
    await_timeouts,
    job_deadline_seconds,
    queue_seconds,
)


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
    output_folder: bool = True,
) -> tuple[k8s.core.v1.Service, k8s.batch.v1.Job]:
    """A headless Service and an Indexed Job of ``nodes`` pods, one per node of the group (required
    anti-affinity), with stable hostnames ``<job>-<index>.<service>``, the shared volume at ``/data``, a
    memory-backed ``/dev/shm``, and the job's identity (waits, code). Node drains and spot interruptions
    (``DisruptionTarget``) never count against the backoff, nor do ``ignore_exit_codes`` of the main container
    (a program that reports being stopped); ``fail_exit_codes`` of the main container and a failed predecessor
    fail the Job at once. Stopped pods get the job's ``stop_grace_period_seconds``. With ``output_folder`` the pods
    create the job's output folder before the program starts
    (:func:`~components.workloads.pods.output_folder_containers`); without it the program does, as the toolbox's
    launcher does."""
    rules = _failure_rules(fail_exit_codes, ignore_exit_codes, waits_for_jobs=bool(spec.get("after_jobs")))
    queue = dict(spec.get("queue_labels") or {})
    timeout_s = job_deadline_seconds(spec)
    grace_s = stop_grace_seconds(spec)
    identity = job_identity(parent, name, spec)
    service = _headless_service(name, parent, spec, labels, ports)
    wait = spec.get("wait_for_completion", False) if await_completion is None else await_completion
    waits_s = await_seconds(
        timeout_s, queue_s=queue_seconds(bool(queue), spec.get("queue_timeout_hours")), grace_s=grace_s
    )
    job = k8s.batch.v1.Job(
        f"{name}-job",
        metadata={
            "name": spec["job_name"],
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
            "template": _indexed_pod(spec, labels, placement, identity, command, env, ports, output_folder),
        },
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[service, created_after(spec, identity.waits)],
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
    output_folder: bool,
) -> k8s.core.v1.PodTemplateSpecArgsDict:
    """The pod of each index: on its own node of the group, in the job's Service's subdomain, with the job's
    identity, the shared volume, ``/dev/shm`` and, with a read-only root, a scratch ``/tmp``; with
    ``output_folder``, the init container that creates the job's output folder, after the identity's."""
    selector = {JOB_LABEL: spec["job_name"]}
    read_only = bool(spec.get("read_only_root_filesystem", True))
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
            **job_pod(spec),
            **on_group(placement),
            "affinity": {
                "pod_anti_affinity": {
                    "required_during_scheduling_ignored_during_execution": [
                        {"label_selector": {"match_labels": selector}, "topology_key": "kubernetes.io/hostname"}
                    ]
                }
            },
            "init_containers": [*identity.init_containers, *(output_folder_containers(spec) if output_folder else [])],
            "containers": [_main_container(spec, placement, identity, command, env, ports, read_only)],
            "volumes": unique_volumes(
                [
                    shared_volume(spec["pvc_name"]),
                    shm_volume(placement),
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
