"""Composition of the components into one training environment, driven by a validated StackConfig."""

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import (
    EfsStorage,
    NvidiaDevicePlugin,
    TrainingCluster,
    TrainingNodeGroup,
    TrainingVpc,
)
from components.autoscaler import ClusterAutoscaler
from components.catalog import (
    REFERENCE_ALLREDUCE,
)
from components.cluster import TrainingClusterArgs
from components.device_plugins import EfaDevicePlugin
from components.image import TrainingImage, hash_build_context, image_tag_for
from components.nodegroup import NodeTaint, TrainingNodeGroupArgs, node_scheduling
from components.storage import EfsStorageArgs
from components.workloads import (
    SHARED_MOUNT,
    AllReduceHealthCheck,
    AllReduceHealthCheckArgs,
    DatasetStaging,
    DatasetStagingArgs,
    ElasticTrainingJob,
    ElasticTrainingJobArgs,
    EtcdRendezvous,
    EvaluationJob,
    EvaluationJobArgs,
    WorkerPlacement,
    system_node_selector,
)
from components.workloads import (
    run_id as make_run_id,
)
from stacks.config import (
    ConfigError,
    StackConfig,
    choose_zones,
    default_private_subnet_cidrs,
    default_public_subnet_cidrs,
)

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


@dataclass
class Environment:
    """What :func:`build_environment` created, for later stages (workloads) and stack outputs."""

    config: StackConfig
    cluster: TrainingCluster
    k8s_provider: k8s.Provider
    storage: EfsStorage
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    k8s_opts: pulumi.ResourceOptions = field(default_factory=pulumi.ResourceOptions)
    node_groups: dict[str, TrainingNodeGroup] = field(default_factory=dict)
    device_plugin: Optional[NvidiaDevicePlugin] = None
    efa_plugin: Optional[EfaDevicePlugin] = None
    autoscaler: Optional[ClusterAutoscaler] = None
    workloads: Optional[Workloads] = None


def region_name() -> str:
    """The stack's AWS region (``aws:region``), as a plain string."""
    region = pulumi.Config("aws").get("region")
    if not region:
        raise ConfigError(["aws:region: not set; run `pulumi config set aws:region us-east-1` (or your region)"])
    return region


def resolve_zones(cfg: StackConfig) -> list[str]:
    """Zone names for a new VPC (see :func:`stacks.config.choose_zones`), from the region's
    available zones as the ``aws.getAvailabilityZones`` invoke reports them."""
    available = aws.get_availability_zones(
        state="available", filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}]
    ).names
    return choose_zones(cfg, available)


def build_environment(cfg: StackConfig, zones: Optional[list[str]] = None) -> Environment:
    """Register the whole backbone: network, cluster, node groups, device plugin, EFS storage."""
    name = cfg.cluster_name
    tags = {"eks-training/stack": f"{cfg.project}-{cfg.stack}", "managed-by": "pulumi", **cfg.tags}

    if cfg.network is not None:
        zones = zones if zones is not None else resolve_zones(cfg)
        vpc_net = ipaddress.IPv4Network(cfg.network.vpc_cidr)
        vpc = TrainingVpc(
            f"{name}-net",
            {
                "cluster_name": name,
                "cidr_block": cfg.network.vpc_cidr,
                "availability_zones": zones,
                "private_subnet_cidrs": cfg.network.private_subnet_cidrs
                or default_private_subnet_cidrs(vpc_net, len(zones)),
                "public_subnet_cidrs": cfg.network.public_subnet_cidrs
                or default_public_subnet_cidrs(vpc_net, len(zones)),
                "nat_gateway_per_az": cfg.network.nat_gateways == "perAz",
                "tags": tags,
            },
        )
        vpc_id: pulumi.Output[str] = vpc.vpc_id
        private_ids: pulumi.Output[list[str]] = vpc.private_subnet_ids
        public_ids: pulumi.Output[list[str]] = vpc.public_subnet_ids
        private_id_list: list[pulumi.Input[str]] = list(vpc.private_subnet_id_list)
    else:
        assert cfg.existing_vpc is not None
        vpc_id = pulumi.Output.from_input(cfg.existing_vpc.vpc_id)
        private_ids = pulumi.Output.from_input(list(cfg.existing_vpc.private_subnet_ids))
        public_ids = pulumi.Output.from_input(list(cfg.existing_vpc.public_subnet_ids))
        private_id_list = list(cfg.existing_vpc.private_subnet_ids)

    c = cfg.cluster
    cluster_args: TrainingClusterArgs = {
        "cluster_name": name,
        "kubernetes_version": c.kubernetes_version,
        "vpc_id": vpc_id,
        "private_subnet_ids": private_ids,
        "public_subnet_ids": public_ids,
        "system_node_group": {
            "instance_type": cfg.system_node_group.instance_type,
            "min_size": cfg.system_node_group.min_size,
            "desired_size": cfg.system_node_group.desired_size,
            "max_size": cfg.system_node_group.max_size,
            "disk_size_gib": cfg.system_node_group.disk_size_gib,
            "autoscaled": cfg.autoscaler.enabled and bool(cfg.node_groups),
        },
        "endpoint_public_access": c.endpoint_public_access,
        "public_access_cidrs": c.public_access_cidrs,
        "admin_role_arns": c.admin_role_arns,
        "log_types": list(c.log_types),
        "create_oidc_provider": c.create_oidc_provider,
        "addon_versions": {k: v for k, v in c.addon_versions.items() if k != "aws-efs-csi-driver"},
        "tags": tags,
    }
    if c.service_cidr:
        cluster_args["service_cidr"] = c.service_cidr
    cluster = TrainingCluster(name, cluster_args)

    provider = k8s.Provider(
        f"{name}-k8s",
        kubeconfig=cluster.kubeconfig,
        enable_server_side_apply=True,
        delete_unreachable=True,
    )
    # Kubernetes objects depend on the cluster through the provider (its kubeconfig), so they are
    # created after it and deleted before it.
    k8s_opts = pulumi.ResourceOptions(provider=provider)

    autoscale = cfg.autoscaler.enabled and bool(cfg.node_groups)
    groups: dict[str, TrainingNodeGroup] = {}
    for gname, g in cfg.node_groups.items():
        facts = cfg.group_instance(gname)
        taints: list[NodeTaint] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in g.taints]
        # Pinned groups (EFA, capacity reservations) use the one private subnet of their zone.
        subnets: pulumi.Input[list[pulumi.Input[str]]] = private_ids  # type: ignore[assignment]
        if g.subnet_id:
            subnets = [g.subnet_id]
        elif g.availability_zone and zones is not None:
            subnets = [private_id_list[zones.index(g.availability_zone)]]
        ng_args: TrainingNodeGroupArgs = {
            "cluster_name": cluster.cluster_name,
            "node_role_arn": cluster.node_role_arn,
            "subnet_ids": subnets,
            "instance_types": list(g.instance_types),
            "role": gname,
            "gpus_per_node": facts.gpus,
            "min_size": g.min_size,
            "desired_size": g.desired_size,
            "max_size": g.max_size,
            "capacity_type": g.capacity_type,
            "disk_size_gib": g.disk_size_gib,
            "labels": dict(g.labels),
            "taints": taints,
            "efa": cfg.group_efa(gname),
            "efa_interfaces": facts.network_cards,
            "cluster_security_group_id": cluster.node_security_group_id,
            "vpc_id": vpc_id,
            "autoscaler_tags": autoscale,
            "ignore_desired_size_changes": autoscale,
            "tags": tags,
        }
        if g.capacity_reservation_id:
            ng_args["capacity_reservation_id"] = g.capacity_reservation_id
        groups[gname] = TrainingNodeGroup(f"{name}-{gname}", ng_args)

    device_plugin: Optional[NvidiaDevicePlugin] = None
    if any(cfg.group_instance(g).is_gpu for g in cfg.node_groups):
        device_plugin = NvidiaDevicePlugin(f"{name}-nvidia", {"namespace": "kube-system"}, opts=k8s_opts)
    efa_plugin: Optional[EfaDevicePlugin] = None
    if any(cfg.group_efa(g) for g in cfg.node_groups):
        efa_plugin = EfaDevicePlugin(f"{name}-efa", {"namespace": "kube-system"}, opts=k8s_opts)
    autoscaler: Optional[ClusterAutoscaler] = None
    if autoscale:
        autoscaler = ClusterAutoscaler(
            f"{name}-autoscaler",
            {
                "cluster_name": cluster.cluster_name,
                "cluster_name_plain": name,
                "kubernetes_version": c.kubernetes_version,
                "region": region_name(),
            },
            opts=k8s_opts,
        )

    s = cfg.storage
    storage_args: EfsStorageArgs = {
        # resolves after the system node group exists: the CSI add-on is created after the nodes its
        # controller runs on, and on destroy the claim and the add-on go before those nodes
        "cluster_name": pulumi.Output.all(cluster.cluster_name, cluster.system_node_group_name).apply(
            lambda v: str(v[0])
        ),
        "cluster_name_plain": name,
        "kubernetes_version": c.kubernetes_version,
        "vpc_id": vpc_id,
        "subnet_ids": private_id_list,
        "node_security_group_id": cluster.node_security_group_id,
        "namespace": s.namespace,
        "pvc_name": s.pvc_name,
        "storage_class_name": s.storage_class_name,
        "capacity": s.capacity,
        "throughput_mode": s.throughput_mode,
        "performance_mode": s.performance_mode,
        "retain_on_delete": s.retain_on_delete,
        "backup": s.backup,
        "tags": tags,
    }
    if s.file_system_id:
        storage_args["existing_file_system_id"] = s.file_system_id
    if "aws-efs-csi-driver" in c.addon_versions:
        storage_args["addon_version"] = c.addon_versions["aws-efs-csi-driver"]
    storage = EfsStorage(f"{name}-efs", storage_args, opts=k8s_opts)

    return Environment(
        config=cfg,
        cluster=cluster,
        k8s_provider=provider,
        storage=storage,
        vpc_id=vpc_id,
        private_subnet_ids=private_ids,
        public_subnet_ids=public_ids,
        k8s_opts=k8s_opts,
        node_groups=groups,
        device_plugin=device_plugin,
        efa_plugin=efa_plugin,
        autoscaler=autoscaler,
    )


def placement_for(cfg: StackConfig, group: str) -> WorkerPlacement:
    """Node selection, tolerations, EFA and zone of a worker group's pods: the labels and taints come
    from :func:`components.nodegroup.node_scheduling`, the function the node group is built with."""
    g = cfg.node_groups[group]
    facts = cfg.group_instance(group)
    efa = cfg.group_efa(group)
    own: list[NodeTaint] = [{"key": x.key, "value": x.value, "effect": x.effect} for x in g.taints]
    labels, taints = node_scheduling(group, facts.gpus, efa, g.labels, own)
    placement: WorkerPlacement = {"instance": facts, "node_labels": labels, "node_taints": taints, "efa": efa}
    if g.availability_zone:
        placement["zone"] = g.availability_zone
    return placement


def health_threshold(cfg: StackConfig) -> Optional[float]:
    """The all-reduce bus bandwidth (GB/s) below which training must not start, or None (report only).
    Enforced checks default to 80% of the published two-node figure for the instance type."""
    hc = cfg.health_check
    if hc.min_bus_bandwidth_gbytes_per_s is not None:
        return hc.min_bus_bandwidth_gbytes_per_s
    if not hc.enforce or cfg.training is None or cfg.training.node_group is None:
        return None
    facts = cfg.group_instance(cfg.training.node_group)
    reference = REFERENCE_ALLREDUCE.get(facts.name)
    return None if reference is None else round(0.8 * reference.busbw_gbytes_per_s, 2)


def health_message_bytes(cfg: StackConfig) -> Optional[int]:
    """Largest all-reduce message of the check: configured, else the reference's size for the
    training group's type (so measurement and threshold compare like with like), else the default."""
    if cfg.health_check.max_bytes is not None:
        return cfg.health_check.max_bytes
    if cfg.training is None or cfg.training.node_group is None:
        return None
    reference = REFERENCE_ALLREDUCE.get(cfg.group_instance(cfg.training.node_group).name)
    return None if reference is None else reference.message_bytes


def build_workloads(env: Environment) -> Optional[Workloads]:
    """Register the training image, etcd, data staging, the elastic training Job and evaluation."""
    cfg = env.config
    t = cfg.training
    if t is None:
        return None
    assert t.node_group is not None and t.max_workers is not None  # filled in by the loader
    name = cfg.cluster_name
    tags = {"eks-training/stack": f"{cfg.project}-{cfg.stack}", "managed-by": "pulumi", **cfg.tags}
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
        "cluster_name_plain": name,
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

    placement = placement_for(cfg, t.node_group)
    facts = placement["instance"]
    run = make_run_id(
        t.job_name,
        {
            "image": image_version,
            "dataset": d.source,
            "epochs": t.epochs,
            "batch_size": t.batch_size,
            "learning_rate": t.learning_rate,
            "width": t.width,
            "instance": facts.name,
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
        message_bytes = health_message_bytes(cfg)
        if message_bytes is not None:
            health_args["max_bytes"] = message_bytes
        threshold = health_threshold(cfg)
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


def export_outputs(env: Environment) -> dict[str, Any]:
    """Stack outputs of the backbone (also exported by ``__main__``)."""
    cfg = env.config
    region = aws.get_region_output().region
    outputs: dict[str, Any] = {
        "clusterName": env.cluster.cluster_name,
        "kubeconfig": env.cluster.kubeconfig,
        "vpcId": env.vpc_id,
        "privateSubnetIds": env.private_subnet_ids,
        "publicSubnetIds": env.public_subnet_ids,
        "systemNodeGroupName": env.cluster.system_node_group_name,
        "nodeGroupNames": pulumi.Output.all(
            env.cluster.system_node_group_name, *[ng.node_group_name for ng in env.node_groups.values()]
        ),
        "efsFileSystemId": env.storage.file_system_id,
        "pvcName": env.storage.pvc_name,
        "pvcNamespace": env.storage.namespace,
        "updateKubeconfigCommand": pulumi.Output.concat(
            "aws eks update-kubeconfig --region ",
            region,
            " --name ",
            env.cluster.cluster_name,
            " --alias ",
            cfg.cluster_name,
        ),
    }
    w = env.workloads
    if w is not None:
        ns = env.storage.namespace
        outputs.update(
            {
                "imageUri": w.image_uri,
                "stagingJobName": w.staging.job_name,
                "trainingJobName": w.training.job_name,
                "evaluationJobName": w.evaluation.job_name,
                "runDirectory": w.training.output_dir,
                "followTrainingLogsCommand": pulumi.Output.concat(
                    "kubectl logs -n ",
                    ns,
                    " -f --prefix --max-log-requests 64 -l eks-training/job=",
                    w.training.job_name,
                ),
                "evaluationResultCommand": pulumi.Output.concat(
                    "kubectl wait -n ",
                    ns,
                    " --for=condition=complete --timeout=24h job/",
                    w.evaluation.job_name,
                    " && kubectl logs -n ",
                    ns,
                    " job/",
                    w.evaluation.job_name,
                    " --tail=1",
                ),
            }
        )
        if w.image is not None:
            outputs["imageBuildLogLink"] = w.image.build_log_link
    return outputs
