"""The training workloads, built on an environment: the training image, etcd, data staging, the
all-reduce health check, elastic training and evaluation."""

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pulumi

from components.conventions import SHARED_MOUNT
from components.image import TrainingImage, hash_build_context, image_tag_for
from components.scheduling import system_node_selector
from components.workloads import (
    AllReduceHealthCheck,
    AllReduceHealthCheckArgs,
    DatasetStaging,
    DatasetStagingArgs,
    ElasticTrainingJob,
    ElasticTrainingJobArgs,
    EtcdRendezvous,
    EvaluationJob,
    EvaluationJobArgs,
)
from components.workloads import run_id as make_run_id
from stacks.environment import Environment, stack_tags

#: The training image's build context (the repository's training/ folder).
TRAINING_CONTEXT = Path(__file__).resolve().parent.parent / "training"


@dataclass
class Workloads:
    """The training workloads registered by :func:`build_workloads`."""

    image_uri: pulumi.Output[str]
    image: Optional[TrainingImage]
    etcd: Optional[EtcdRendezvous]
    staging: DatasetStaging
    training: ElasticTrainingJob
    evaluation: EvaluationJob
    run_id: str
    health_check: Optional[AllReduceHealthCheck] = None


def build_workloads(env: Environment) -> Optional[Workloads]:
    """Register the training image, etcd, data staging, the health check, training and evaluation."""
    plan = env.plan
    cfg = plan.config
    t = cfg.training
    group = plan.training_group
    if t is None or group is None:
        return None
    assert t.max_workers is not None  # filled in by the loader
    name = cfg.cluster_name
    tags = stack_tags(cfg)
    namespace = env.storage.namespace
    pvc = env.storage.pvc_name

    image: Optional[TrainingImage] = None
    image_uri: pulumi.Output[str]
    if cfg.image.prebuilt:
        image_uri = pulumi.Output.from_input(cfg.image.prebuilt)
        image_version = cfg.image.prebuilt
    else:
        context = str(TRAINING_CONTEXT)
        image_version = image_tag_for(hash_build_context(context))
        image = TrainingImage(
            f"{name}-image",
            {
                "context_dir": context,
                "keep_images": cfg.image.keep_images,
                "build_timeout_minutes": cfg.image.build_timeout_minutes,
                "compute_type": cfg.image.compute_type,
                "tags": tags,
            },
        )
        image_uri = image.image_uri

    k8s_opts = env.k8s_opts
    system = system_node_selector()
    etcd: Optional[EtcdRendezvous] = None
    if t.rendezvous_backend == "etcd-v2":
        etcd = EtcdRendezvous(
            f"{name}-etcd",
            {"namespace": namespace, "node_selector": system},
            opts=k8s_opts,
        )

    d = cfg.dataset
    staging_args: DatasetStagingArgs = {
        "namespace": namespace,
        "pvc_name": pvc,
        "image": image_uri,
        "source": d.source,
        "dest_path": d.path,
        "node_selector": system,
        "cluster_name": env.cluster.cluster_name,
        "timeout_minutes": d.timeout_minutes,
    }
    if d.md5:
        staging_args["md5"] = d.md5
    if d.expected_bytes:
        staging_args["expected_bytes"] = d.expected_bytes
    staging = DatasetStaging(
        f"{name}-stage",
        staging_args,
        opts=k8s_opts,
    )

    placement = group.placement()
    run = make_run_id(
        t.job_name,
        {
            "image": image_version,
            "dataset": d.source,
            "epochs": t.epochs,
            "batch_size": t.batch_size,
            "learning_rate": t.learning_rate,
            "width": t.width,
            "instance": group.profile.instance.name,
        },
    )
    run_dir = f"{SHARED_MOUNT}/runs/{run}"

    # The bandwidth check runs on the training nodes after the data is staged; training waits for it.
    data_dir: pulumi.Output[str] = staging.data_dir
    health: Optional[AllReduceHealthCheck] = None
    hc = cfg.health_check
    if hc.enabled:
        health_args: AllReduceHealthCheckArgs = {
            "namespace": namespace,
            "pvc_name": pvc,
            "image": image_uri,
            "job_name": f"{t.job_name}-allreduce",
            "report_path": f"{run_dir}/allreduce-health.json",
            "placement": placement,
            "workers": t.workers,
            "timeout_minutes": hc.timeout_minutes,
            "after": staging.data_dir,
        }
        message_bytes = plan.health_message_bytes()
        if message_bytes is not None:
            health_args["max_bytes"] = message_bytes
        threshold = plan.health_threshold()
        if threshold is not None:
            health_args["min_bus_bandwidth_gbytes_per_s"] = threshold
        health = AllReduceHealthCheck(f"{name}-allreduce", health_args, opts=k8s_opts)
        data_dir = pulumi.Output.all(staging.data_dir, health.report_path).apply(lambda v: str(v[0]))

    training_args: ElasticTrainingJobArgs = {
        "namespace": namespace,
        "pvc_name": pvc,
        "image": image_uri,
        "job_name": f"{t.job_name}-train",
        "run_id": run,
        "placement": placement,
        "workers": t.workers,
        "min_workers": t.min_workers,
        "max_workers": t.max_workers,
        "rendezvous_backend": t.rendezvous_backend,
        "data_dir": data_dir,
        "hyperparameters": {
            "epochs": t.epochs,
            "batch_size": t.batch_size,
            "learning_rate": t.learning_rate,
            "width": t.width,
            "data_loader_workers": t.data_loader_workers,
            "checkpoint_every_steps": t.checkpoint_every_steps,
        },
        "max_restarts": t.max_restarts,
        "wait_for_completion": t.wait_for_completion,
        "timeout_hours": t.timeout_hours,
    }
    if etcd is not None:
        training_args["etcd_endpoint"] = etcd.endpoint
    training = ElasticTrainingJob(f"{name}-train", training_args, opts=k8s_opts)
    evaluation_args: EvaluationJobArgs = {
        "namespace": namespace,
        "pvc_name": pvc,
        "image": image_uri,
        "job_name": f"{t.job_name}-eval",
        "run_dir": training.output_dir,
        "data_dir": staging.data_dir,
        "node_selector": system,
        "wait_for_completion": t.wait_for_completion,
        "timeout_hours": t.timeout_hours,
    }
    if cfg.evaluation.min_accuracy is not None:
        evaluation_args["min_accuracy"] = cfg.evaluation.min_accuracy
    evaluation = EvaluationJob(
        f"{name}-eval",
        evaluation_args,
        opts=k8s_opts,
    )
    return Workloads(
        image_uri=image_uri,
        image=image,
        etcd=etcd,
        staging=staging,
        training=training,
        evaluation=evaluation,
        run_id=run,
        health_check=health,
    )
