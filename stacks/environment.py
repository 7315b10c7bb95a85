"""The backbone of one training environment, built from the plan: network, cluster, node groups,
device plugins, cluster-autoscaler and the shared file system (EFS or FSx for Lustre, :mod:`stacks.storage`)."""

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import (
    ClusterAutoscaler,
    DevicePlugin,
    TrainingCluster,
    TrainingNodeGroup,
    TrainingVpc,
)
from components.autoscaler import ClusterAutoscalerArgs, provisioning_request_crd
from components.catalog import EKS_UNSUPPORTED_ZONE_IDS, STORAGE_ADDONS
from components.catalog.operations import OBSERVABILITY_ADDON
from components.cluster import TrainingClusterArgs
from components.image.aws_settings import AwsSettings
from components.kubernetes_provider import warn_if_delete_unreachable_set
from components.nodegroup import TrainingNodeGroupArgs
from components.observability import FleetObservability, FleetObservabilityArgs, GpuGroupSpec
from components.ordering import ordered_after
from stacks.config import StackConfig, default_private_subnet_cidrs, default_public_subnet_cidrs
from stacks.plan import NodeGroupPlan, Plan
from stacks.plan.admission import autoscales
from stacks.plan.group_changes import desired_within
from stacks.plan.tags import stack_tags
from stacks.storage import SharedStorage, build_storage
from stacks.zones import RegionZones, Zone, choose_zones, find_zone


@dataclass
class Environment:
    """What :func:`build_environment` created, for the workloads and the stack outputs."""

    plan: Plan
    cluster: TrainingCluster
    k8s_provider: k8s.Provider
    storage: SharedStorage
    """The shared file system (EFS or FSx for Lustre) and its claim."""
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    k8s_opts: pulumi.ResourceOptions = field(default_factory=pulumi.ResourceOptions)
    """The Kubernetes provider: objects created through it wait for the system nodes and the Pod Identity agent."""
    workload_opts: pulumi.ResourceOptions = field(default_factory=pulumi.ResourceOptions)
    """:attr:`k8s_opts` and a wait for CoreDNS: for objects whose pods resolve names (jobs, staging, health checks,
    etcd, TensorBoard, the collector, cluster-autoscaler, which calls AWS by name)."""
    node_groups: dict[str, TrainingNodeGroup] = field(default_factory=dict)
    device_plugins: dict[str, DevicePlugin] = field(default_factory=dict)
    autoscaler: Optional[ClusterAutoscaler] = None
    provisioning_crd: Optional[pulumi.Resource] = None
    """The ProvisioningRequest CRD, when Kueue's ProvisioningRequest admission check is used (the autoscaler and
    Kueue's release are installed after it: both enable their handling of requests only if it exists at start)."""
    observability: Optional[FleetObservability] = None
    """Container Insights, the dashboard and the idle-GPU alarms (``None`` when the plan has none of them)."""
    workloads: Optional[Any] = None
    """The :class:`stacks.workloads.Workloads`, once registered."""
    zones: Optional[list[Zone]] = None
    """The new VPC's zones, in its subnets' order (``None`` in an existing VPC)."""

    @property
    def config(self) -> StackConfig:
        """The validated configuration."""
        return self.plan.config


def available_zones() -> list[Zone]:
    """The region's available zones that need no opt-in, with their IDs, as the ``aws.getAvailabilityZones`` invoke
    reports them."""
    available = aws.get_availability_zones(
        state="available", filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}]
    )
    return [Zone(n, i) for n, i in zip(available.names, available.zone_ids)]


def resolve_zones(cfg: StackConfig, available: Optional[list[Zone]] = None) -> list[Zone]:
    """Zones for a new VPC (see :func:`stacks.zones.choose_zones`), from the region's available zones
    (:func:`available_zones` unless given)."""
    return choose_zones(cfg, available if available is not None else available_zones())


def region_zones(available: Optional[list[Zone]]) -> Optional[RegionZones]:
    """The region's ``available`` zones for the upgrade check (it compares the zones the last update's VPC was made in
    with this one's), or ``None`` without them (an existing VPC)."""
    return RegionZones(tuple(available)) if available is not None else None


def control_plane_subnets(subnet_ids: list[str]) -> pulumi.Output[list[str]]:
    """The existing subnets the EKS control plane may use: those outside the zone IDs EKS refuses (looked up
    with ``aws.ec2.getSubnet``)."""
    zone_ids = [aws.ec2.get_subnet_output(id=sid).availability_zone_id for sid in subnet_ids]
    return pulumi.Output.all(*zone_ids).apply(
        lambda ids: [sid for sid, zid in zip(subnet_ids, ids) if zid not in EKS_UNSUPPORTED_ZONE_IDS]
    )


def _sizing(plan: Plan, g: NodeGroupPlan, desired_now: Mapping[str, int]) -> tuple[int, bool]:
    """(The desired size sent, whether ``pulumi up`` leaves later changes of it alone). A group whose sizes move under
    the autoscaler (:func:`stacks.plan.group_changes.resized_under_autoscaler`): the one EKS holds now
    (``desired_now``, :func:`stacks.preflight.cluster.desired_sizes_now`) within the new sizes, sent, where the
    provider would send the one Pulumi recorded. Else the stack file's, left alone where the autoscaler owns it: a
    fixed size is the stack file's."""
    if g.name in desired_now:
        return desired_within(g, desired_now[g.name]), False
    return g.desired_size, autoscales(plan, g)


def _node_group_args(
    plan: Plan,
    g: NodeGroupPlan,
    cluster: TrainingCluster,
    subnets: pulumi.Input[list[pulumi.Input[str]]],
    vpc_id: pulumi.Input[str],
    tags: dict[str, str],
    desired_now: Mapping[str, int],
) -> TrainingNodeGroupArgs:
    """One node group's arguments, from its plan."""
    desired, ignored = _sizing(plan, g, desired_now)
    args: TrainingNodeGroupArgs = {
        "cluster_name": cluster.cluster_name,
        "node_role_arn": cluster.node_role_arn,
        "subnet_ids": subnets,
        "instance_types": g.instance_types,
        "role": g.name,
        "gpus_per_node": g.profile.gpus,
        "min_size": g.min_size,
        "desired_size": desired,
        "max_size": g.max_size,
        "capacity_type": g.capacity_type,
        "disk_size_gib": g.disk_size_gib,
        "node_labels": dict(g.profile.labels),
        "node_taints": [dict(t) for t in g.profile.taints],
        "ami_type": g.profile.ami_type,
        "efa": g.efa is not None,
        "efa_interfaces": g.profile.efa_interfaces,
        "cluster_security_group_id": cluster.node_security_group_id,
        "vpc_id": vpc_id,
        "autoscaler_tags": plan.autoscale,
        "ignore_desired_size_changes": ignored,
        "kubernetes_version": plan.config.cluster.kubernetes_version,
        "release_version": g.ami.release_version,
        "keep_release_version": not g.ami.pinned,
        "tags": tags,
    }
    if g.capacity_reservation_id:
        args["capacity_reservation_id"] = g.capacity_reservation_id
    if g.repair is not None:
        args["node_repair"] = g.repair
    setup = plan.host_requirements(g.name)
    if setup:
        args["host_setup"] = [r.name for r in setup]
    return args


@dataclass
class _Network:
    """The VPC and subnets the cluster, its node groups and the storage use."""

    vpc_id: pulumi.Output[str]
    private_ids: pulumi.Output[list[str]]
    public_ids: pulumi.Output[list[str]]
    private_id_list: list[pulumi.Input[str]]
    """The private subnets one by one, in the order of :attr:`zones` for a new VPC."""
    control_plane_ids: pulumi.Input[list[str]]
    zones: Optional[list[Zone]]
    """The new VPC's zones (those given to :func:`build_environment` for an existing VPC)."""


def build_environment(
    plan: Plan, zones: Optional[list[Zone]] = None, desired_now: Optional[Mapping[str, int]] = None
) -> Environment:
    """Register the whole backbone: network, cluster, node groups, device plugins, autoscaler, shared storage.
    ``desired_now``: the desired size EKS holds for each group whose sizes move under the autoscaler
    (:func:`_sizing`)."""
    now = desired_now or {}
    cfg = plan.config
    name = cfg.cluster_name
    tags = stack_tags(cfg)
    net = _new_vpc(cfg, name, zones, tags) if cfg.network is not None else _existing_vpc(cfg, zones)
    cluster = TrainingCluster(name, _cluster_args(plan, net, tags, now))
    provider, k8s_opts, workload_opts = _kubernetes_provider(name, cluster)
    groups = _node_groups(plan, name, cluster, net, tags, now)
    plugins = _device_plugins(plan, name, k8s_opts)
    provisioning = _provisioning_crd(plan, name, cluster, k8s_opts)
    autoscaler = _autoscaler(plan, name, cluster, provisioning, workload_opts)
    observability = build_observability(plan, cluster, tags)
    storage = build_storage(
        plan,
        name=name,
        cluster=cluster,
        vpc_id=net.vpc_id,
        private_subnet_ids=net.private_id_list,
        zones=net.zones,
        node_groups=groups,
        tags=tags,
        k8s_opts=k8s_opts,
    )
    return Environment(
        plan=plan,
        cluster=cluster,
        k8s_provider=provider,
        storage=storage,
        vpc_id=net.vpc_id,
        private_subnet_ids=net.private_ids,
        public_subnet_ids=net.public_ids,
        k8s_opts=k8s_opts,
        workload_opts=workload_opts,
        node_groups=groups,
        device_plugins=plugins,
        autoscaler=autoscaler,
        provisioning_crd=provisioning[0] if provisioning is not None else None,
        zones=net.zones if cfg.network is not None else None,
        observability=observability,
    )


def _new_vpc(cfg: StackConfig, name: str, zones: Optional[list[Zone]], tags: dict[str, str]) -> _Network:
    """A new VPC over the chosen zones, its subnets those configured or the defaults."""
    assert cfg.network is not None
    zones = zones if zones is not None else resolve_zones(cfg)
    vpc_net = ipaddress.IPv4Network(cfg.network.vpc_cidr)
    vpc = TrainingVpc(
        f"{name}-net",
        {
            "cluster_name": name,
            "cidr_block": cfg.network.vpc_cidr,
            "availability_zones": [z.name for z in zones],
            "private_subnet_cidrs": cfg.network.private_subnet_cidrs
            or default_private_subnet_cidrs(vpc_net, len(zones)),
            "public_subnet_cidrs": cfg.network.public_subnet_cidrs or default_public_subnet_cidrs(vpc_net, len(zones)),
            "nat_gateway_per_az": cfg.network.nat_gateways == "perAz",
            "tags": tags,
        },
    )
    private_id_list: list[pulumi.Input[str]] = list(vpc.private_subnet_id_list)
    # EKS refuses control-plane subnets in some zone IDs: the cluster gets the others (nodes use all)
    control_plane_ids: pulumi.Input[list[str]] = pulumi.Output.all(
        *[sid for sid, z in zip(private_id_list, zones) if z.control_plane]
    ).apply(lambda ids: [str(i) for i in ids])
    return _Network(
        vpc.vpc_id, vpc.private_subnet_ids, vpc.public_subnet_ids, private_id_list, control_plane_ids, zones
    )


def _existing_vpc(cfg: StackConfig, zones: Optional[list[Zone]]) -> _Network:
    """The configured existing VPC and its subnets."""
    assert cfg.existing_vpc is not None
    return _Network(
        pulumi.Output.from_input(cfg.existing_vpc.vpc_id),
        pulumi.Output.from_input(list(cfg.existing_vpc.private_subnet_ids)),
        pulumi.Output.from_input(list(cfg.existing_vpc.public_subnet_ids)),
        list(cfg.existing_vpc.private_subnet_ids),
        control_plane_subnets(list(cfg.existing_vpc.private_subnet_ids)),
        zones,
    )


#: The AWS provider's settings that ``aws eks get-token`` reads from its environment, by ``AwsSettings`` key.
TOKEN_ENV = {
    "profile": "AWS_PROFILE",
    "shared_config_file": "AWS_CONFIG_FILE",
    "shared_credentials_file": "AWS_SHARED_CREDENTIALS_FILE",
}


def token_credentials(aws_settings: AwsSettings) -> tuple[dict[str, str], Optional[str]]:
    """What the kubeconfig's ``aws eks get-token`` takes of the stack's AWS provider settings, to sign as the identity
    that made the cluster: the profile and shared files (its environment), and the role when the provider assumes one
    (a chain of roles it cannot follow)."""
    settings: dict[str, Any] = dict(aws_settings)
    env = {name: str(settings[k]) for k, name in TOKEN_ENV.items() if settings.get(k)}
    roles = aws_settings.get("assume_roles") or []
    # get-token assumes a role with nothing but its ARN: a role whose trust asks an external id it cannot assume
    one = roles[0] if len(roles) == 1 and not roles[0].get("external_id") else None
    return env, one["role_arn"] if one else None


def _cluster_args(
    plan: Plan, net: _Network, tags: dict[str, str], desired_now: Mapping[str, int]
) -> TrainingClusterArgs:
    """The EKS cluster's arguments: its network, system node group, access and add-ons."""
    cfg = plan.config
    c = cfg.cluster
    system_desired, system_ignored = _sizing(plan, plan.system, desired_now)
    cluster_args: TrainingClusterArgs = {
        "cluster_name": cfg.cluster_name,
        "kubernetes_version": c.kubernetes_version,
        "vpc_id": net.vpc_id,
        "private_subnet_ids": net.control_plane_ids,
        "public_subnet_ids": net.public_ids,
        "system_node_group": {
            "instance_type": plan.system.instance_types[0],
            "min_size": plan.system.min_size,
            "desired_size": system_desired,
            "max_size": plan.system.max_size,
            "disk_size_gib": plan.system.disk_size_gib,
            "autoscaled": system_ignored,
            "host_setup": [r.name for r in plan.host_requirements(plan.system.name)],
            "release_version": plan.system.ami.release_version,
            "keep_release_version": not plan.system.ami.pinned,
        },
        "support_type": c.support_type,
        "endpoint_public_access": c.endpoint_public_access,
        "log_retention_days": c.log_retention_days,
        "admin_role_arns": c.admin_role_arns,
        "namespace_members": [
            {"principal_arn": arn, "namespace": t.namespace, "kubernetes_group": t.kubernetes_group}
            for t in (plan.admission.teams if plan.admission is not None else ())
            for arn in t.member_role_arns
        ],
        "log_types": list(c.log_types),
        "create_oidc_provider": c.create_oidc_provider,
        "addon_versions": {
            k: v for k, v in c.addon_versions.items() if k not in (*STORAGE_ADDONS, OBSERVABILITY_ADDON)
        },
        # a kept FSx file system is encrypted with the secrets key (stacks/storage.py): keep the key with it
        "keep_secrets_key": plan.storage.is_fsx and cfg.storage.retain_on_delete,
        "tags": tags,
    }
    if c.public_cidrs is not None:
        cluster_args["public_access_cidrs"] = c.public_cidrs
    if c.private_access_cidrs:
        cluster_args["private_access_cidrs"] = list(c.private_access_cidrs)
    if c.service_cidr:
        cluster_args["service_cidr"] = c.service_cidr
    token_env, token_role = token_credentials(cfg.aws)
    if token_env:
        cluster_args["token_env"] = token_env
    if token_role:
        cluster_args["token_role_arn"] = token_role
    return cluster_args


def _kubernetes_provider(
    name: str, cluster: TrainingCluster
) -> tuple[k8s.Provider, pulumi.ResourceOptions, pulumi.ResourceOptions]:
    """The cluster's Kubernetes provider, the options of objects created through it and of those whose pods
    resolve names."""
    provider = k8s.Provider(
        f"{name}-k8s",
        kubeconfig=cluster.kubeconfig,
        enable_server_side_apply=True,
        # no delete_unreachable: a refresh that cannot reach the API server (credentials, network) would drop every
        # object from the state (troubleshooting: "pulumi destroy cannot reach the cluster")
    )
    warn_if_delete_unreachable_set(provider)
    # Kubernetes objects depend on the cluster through the provider (its kubeconfig), so they are
    # created after it and deleted before it.
    k8s_opts = pulumi.ResourceOptions(provider=provider)
    # Pods that resolve names (a Service, etcd, S3, a dataset's URL) need CoreDNS running: their objects wait for its
    # add-on (Kueue, the MPI Operator, device plugins and the storage's objects need no DNS and do not wait for it).
    workload_opts = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[cluster.coredns_addon]))
    return provider, k8s_opts, workload_opts


def _node_groups(
    plan: Plan,
    name: str,
    cluster: TrainingCluster,
    net: _Network,
    tags: dict[str, str],
    desired_now: Mapping[str, int],
) -> dict[str, TrainingNodeGroup]:
    """The planned node groups, each in its subnets."""
    groups: dict[str, TrainingNodeGroup] = {}
    for gname, g in plan.groups.items():
        subnets = _group_subnets(g, net)
        groups[gname] = TrainingNodeGroup(
            f"{name}-{gname}", _node_group_args(plan, g, cluster, subnets, net.vpc_id, tags, desired_now)
        )
    return groups


def _group_subnets(g: NodeGroupPlan, net: _Network) -> pulumi.Input[list[pulumi.Input[str]]]:
    """The subnets of one node group: its own, its zone's private subnet, or every private subnet."""
    # Pinned groups (EFA, capacity reservations) use the one private subnet of their zone.
    if g.subnet_id:
        return [g.subnet_id]
    if g.zone and net.zones is not None:
        zone = find_zone(g.zone, net.zones)
        assert zone is not None, f"{g.path}: zone {g.zone} was checked by choose_zones"
        return [net.private_id_list[net.zones.index(zone)]]
    return net.private_ids  # type: ignore[return-value]


def _device_plugins(plan: Plan, name: str, k8s_opts: pulumi.ResourceOptions) -> dict[str, DevicePlugin]:
    """The NVIDIA and EFA device plugins the plan needs."""
    plugins: dict[str, DevicePlugin] = {}
    if plan.gpu:
        plugins["nvidia"] = DevicePlugin(
            f"{name}-nvidia", {"kind": "nvidia", "namespace": "kube-system"}, opts=k8s_opts
        )
    if plan.efa:
        plugins["efa"] = DevicePlugin(f"{name}-efa", {"kind": "efa", "namespace": "kube-system"}, opts=k8s_opts)
    return plugins


def _provisioning_crd(
    plan: Plan, name: str, cluster: TrainingCluster, k8s_opts: pulumi.ResourceOptions
) -> Optional[tuple[pulumi.Resource, pulumi.Output[str]]]:
    """The ProvisioningRequest CRD and its name, when Kueue's ProvisioningRequest admission check is used."""
    if plan.admission is None or plan.admission.provisioning is None:
        return None
    # topology-aware groups that autoscale: Kueue asks the autoscaler for their jobs' nodes
    # (stacks/plan/admission.py) under the cluster's component (a child of the stack until 0.19.1 made it a preset
    # default: the alias keeps a CRD applied then, whose deletion would delete every ProvisioningRequest)
    crd_opts = pulumi.ResourceOptions.merge(
        k8s_opts,
        pulumi.ResourceOptions(parent=cluster, aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]),
    )
    return provisioning_request_crd(f"{name}-provisioning-request-crd", opts=crd_opts)


def _autoscaler(
    plan: Plan,
    name: str,
    cluster: TrainingCluster,
    provisioning: Optional[tuple[pulumi.Resource, pulumi.Output[str]]],
    workload_opts: pulumi.ResourceOptions,
) -> Optional[ClusterAutoscaler]:
    """cluster-autoscaler, when the plan autoscales, handling ProvisioningRequests when their CRD is installed."""
    if not plan.autoscale:
        return None
    autoscaler_args: ClusterAutoscalerArgs = {
        "cluster_name": cluster.cluster_name,
        "kubernetes_version": plan.config.cluster.kubernetes_version,
        "region": plan.config.region,
    }
    if provisioning is not None:
        autoscaler_args["provisioning_request_crd"] = provisioning[1]
    return ClusterAutoscaler(f"{name}-autoscaler", autoscaler_args, opts=workload_opts)


def build_observability(plan: Plan, cluster: TrainingCluster, tags: dict[str, str]) -> Optional[FleetObservability]:
    """The Container Insights add-on, the dashboard and the idle-GPU alarms, as the plan decided them."""
    ops = plan.operations
    if not (ops.metrics or ops.dashboard or ops.idle_alarms):
        return None
    cfg = plan.config
    gpu_groups: dict[str, GpuGroupSpec] = {
        g.name: {"name": g.name, "instance_types": g.instance_types, "gpus_per_node": g.profile.gpus}
        for g in plan.groups.values()
        if g.profile.gpus
    }
    args: FleetObservabilityArgs = {
        "cluster_name": cfg.cluster_name,
        # the add-on's operator and agents need nodes, and its agent's role the Pod Identity agent: it is created once
        # the system group and the agent are up
        "cluster": ordered_after(
            cluster.cluster_name, cluster.system_node_group_name, cluster.pod_identity_agent_addon.arn
        ),
        "kubernetes_version": cfg.cluster.kubernetes_version,
        "region": cfg.region,
        "metrics": ops.metrics,
        "tolerations": list(ops.agent_tolerations),
        "application_signals": ops.application_signals,
        "dashboard": ops.dashboard,
        "gpu_groups": list(gpu_groups.values()),
        "efa": plan.efa,
        "job_namespace": cfg.storage.namespace,
        "idle_alarms": [
            {"group": gpu_groups[a.group], "minutes": a.minutes, "utilization_percent": a.utilization_percent}
            for a in ops.idle_alarms
        ],
        "log_retention_days": cfg.cluster.log_retention_days,
        "tags": tags,
    }
    pinned = cfg.cluster.addon_versions.get(OBSERVABILITY_ADDON)
    if pinned:
        args["addon_version"] = pinned
    if ops.alarm_email:
        args["alarm_email"] = ops.alarm_email
    return FleetObservability(f"{cfg.cluster_name}-ops", args)
