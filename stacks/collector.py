"""The benchmark's collector, from the plan: what each experiment, the cluster and the storage were, as the JSON
records the collector copies to S3, and the :class:`~components.workloads.BenchmarkCollector` after the
experiments (``stacks.workloads`` calls :func:`build_collector` once the jobs are registered)."""

import json
from typing import Any, Mapping

import pulumi
import pulumi_aws as aws

from components.naming import fit_name
from components.scheduling import system_node_selector
from components.workloads import BenchmarkCollector, BenchmarkCollectorArgs, CollectedExperiment
from stacks.config import TOOLBOX_IMAGE
from stacks.config.benchmark import COLLECTOR_NAME
from stacks.costs import job_hourly
from stacks.environment import Environment
from stacks.kinds import KINDS
from stacks.plan import JobPlan, Plan
from stacks.plan.tags import stack_tags

#: The collector component's name is ``<cluster>-bench``; its created bucket is named after it with ``-results``
#: and Pulumi's 8-character suffix: 40 + 6 + 8 + 8 = 62, within S3's 63.
COMPONENT_SUFFIX = "bench"


def experiment_record(plan: Plan, job: JobPlan) -> dict[str, Any]:
    """What an experiment was: its job definition (as written, with ``from`` applied) and what the plan made of it
    (node group, instance type, nodes, processes and GPUs per node, output folder, the node-hour price)."""
    g = job.group
    return {
        "experiment": job.name,
        "kind": job.kind,
        "job": job.config.model_dump(mode="json", by_alias=True, exclude_none=True),
        "nodeGroup": g.name,
        "instanceType": g.profile.instance.name,
        "nodes": job.nodes,
        "processesPerNode": job.procs_per_node,
        "gpusPerNode": job.placement["gpus"],
        "efaDevicesPerNode": job.placement["efa_devices"],
        "image": job.image.name,
        "imageVersion": job.image.version,
        "outputDir": job.output_dir,
        "runId": job.run_id,
        "hourlyUsd": job_hourly(job),
    }


def cluster_record(plan: Plan) -> dict[str, Any]:
    """The cluster's configuration: name, Kubernetes version, network, the system and worker groups."""
    cfg = plan.config
    return {
        "clusterName": cfg.cluster_name,
        "stack": cfg.stack,
        "cluster": cfg.cluster.model_dump(mode="json", by_alias=True, exclude_none=True),
        "network": cfg.network.model_dump(mode="json", by_alias=True, exclude_none=True) if cfg.network else None,
        "existingVpc": cfg.existing_vpc.model_dump(mode="json", by_alias=True, exclude_none=True)
        if cfg.existing_vpc
        else None,
        "systemNodeGroup": cfg.system_node_group.model_dump(mode="json", by_alias=True, exclude_none=True),
        "nodeGroups": {
            n: g.model_dump(mode="json", by_alias=True, exclude_none=True) for n, g in cfg.node_groups.items()
        },
        "autoscaler": plan.autoscale,
    }


def storage_record(plan: Plan) -> dict[str, Any]:
    """The shared storage's configuration: backend and its settings (FSx: zone or subnet too)."""
    cfg = plan.config
    record: dict[str, Any] = {
        "backend": plan.storage.backend,
        "storage": cfg.storage.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    if plan.storage.is_fsx:
        record.update(zone=plan.storage.zone, subnetId=plan.storage.subnet_id)
    return record


def _json(record: Mapping[str, Any], **outputs: pulumi.Input[str]) -> pulumi.Output[str]:
    """``record`` plus resolved ``outputs`` (ids known once created) as JSON."""
    names = list(outputs)
    return pulumi.Output.all(*[outputs[n] for n in names]).apply(
        lambda values: json.dumps({**record, **dict(zip(names, values))}, sort_keys=True)
    )


def build_collector(
    env: Environment,
    jobs: Mapping[str, Any],
    image_uris: Mapping[str, pulumi.Output[str]],
    namespace: pulumi.Input[str],
) -> BenchmarkCollector:
    """The collector of the plan's benchmark, created after its experiments (``jobs``: the registered job
    components by name, each with a ``job_name`` Output) in ``namespace`` (the name the network policies hand out
    once they exist)."""
    plan = env.plan
    cfg = plan.config
    bench = cfg.benchmark
    assert bench is not None
    experiments: dict[str, CollectedExperiment] = {}
    for job in plan.experiments:
        experiments[job.name] = {
            "resource": KINDS[job.kind].job_object.resource,
            "job_name": jobs[job.name].job_name,
            "output_dir": job.output_dir,
            "config": _json(experiment_record(plan, job), imageUri=image_uris[job.image.variant]),
        }
    region = aws.get_region_output().region
    args: BenchmarkCollectorArgs = {
        "name": COLLECTOR_NAME,
        "namespace": namespace,
        "pvc_name": env.storage.pvc_name,
        "image": image_uris[TOOLBOX_IMAGE],
        "node_selector": system_node_selector(),
        "cluster_name": env.cluster.cluster_name,
        "region": region,
        "run": bench.run,
        "prefix": bench.results.base_prefix,
        "experiments": experiments,
        "cluster_config": _json(cluster_record(plan), region=region),
        "storage_config": _json(storage_record(plan), fileSystemId=env.storage.file_system_id),
        "keep_outputs": list(bench.keep.outputs),
        "max_file_mib": bench.keep.max_file_mib,
        "timeout_hours": bench.collector_timeout_hours,
        "tags": stack_tags(cfg),
    }
    if bench.bucket:
        args["bucket_name"] = bench.bucket
    return BenchmarkCollector(fit_name(f"{cfg.cluster_name}-{COMPONENT_SUFFIX}", 47), args, opts=env.workload_opts)
