"""The plan: every decision derived from a validated stack configuration, made once.

:func:`build_plan` turns a :class:`~stacks.config.StackConfig` into a :class:`Plan`: per node group
its instance facts, EFA profile (interfaces, ``efa-only`` interfaces, huge pages, NCCL/libfabric
environment, the VPC CNI that needs), zone, subnet, labels, taints and the size of a pod that fills
a node (:func:`components.nodeplan.node_profile`); the shared file system (backend, and for FSx for
Lustre its one zone or subnet and its EFA clients); and the health check's threshold. The node
groups, the pods' placement, the storage, preflight, the autoscaler's node-template tags and the cost
model all read the plan, so they cannot disagree.
"""

from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog import REFERENCE_ALLREDUCE, InstanceType
from components.nodeplan import EfaProfile, NodeProfile, node_profile
from components.scheduling import SYSTEM_ROLE, NodeTaint, tolerations_for
from components.workloads import WorkerPlacement
from stacks.config import FsxConfig, StackConfig
from stacks.config.rules import fsx_location

#: An enforced health check defaults to this share of the published two-node bus bandwidth.
HEALTH_THRESHOLD_SHARE = 0.8
#: Zone label every node carries (Kubernetes well-known label).
ZONE_LABEL = "topology.kubernetes.io/zone"


@dataclass(frozen=True, kw_only=True)
class NodeGroupPlan:
    """One node group (the system group included) as the program builds it."""

    name: str
    """The group's name (``system`` for the system group); its nodes' ``eks-training/role`` label."""
    path: str
    """Its config path: ``nodeGroups.<name>`` or ``systemNodeGroup``."""
    types: tuple[InstanceType, ...]
    """Facts of every instance type of the group, in config order."""
    profile: NodeProfile
    """Labels, taints, EFA, AMI and pod size (from the smallest type)."""
    capacity_type: str
    capacity_reservation_id: Optional[str]
    min_size: int
    desired_size: int
    max_size: int
    disk_size_gib: int
    zone: Optional[str]
    """Zone the group is pinned to (new VPC), or ``None``."""
    subnet_id: Optional[str]
    """Subnet the group is pinned to (existing VPC), or ``None``."""
    user_labels: Mapping[str, str]
    user_taints: tuple[NodeTaint, ...]

    @property
    def instance_types(self) -> list[str]:
        """EC2 names of the group's types."""
        return [t.name for t in self.types]

    @property
    def efa(self) -> Optional[EfaProfile]:
        """The group's EFA profile, ``None`` without EFA."""
        return self.profile.efa

    @property
    def single_zone(self) -> bool:
        """Pinned to one zone (by name or by subnet)."""
        return self.zone is not None or self.subnet_id is not None

    def placement(self) -> WorkerPlacement:
        """Where a job's pods go on this group (one per node) and what each requests."""
        pod = self.profile.pod
        selector = dict(self.profile.labels)
        if self.zone:
            selector[ZONE_LABEL] = self.zone
        placement: WorkerPlacement = {
            "node_selector": selector,
            "tolerations": tolerations_for(self.profile.taints),
            "cpu_millis": pod.cpu_millis,
            "memory_mib": pod.memory_mib,
            "gpus": pod.gpus,
            "efa_devices": pod.efa_devices,
            "shm_mib": pod.shm_mib,
            "procs_per_node": pod.procs_per_node,
            "threads_per_proc": pod.threads_per_proc,
            "env": dict(self.profile.network_env),
        }
        if pod.hugepages_2mi:
            placement["hugepages_2mi"] = pod.hugepages_2mi
        return placement


@dataclass(frozen=True, kw_only=True)
class StoragePlan:
    """The shared file system: EFS (multi-zone, a mount target per private subnet) or FSx for Lustre in
    one zone (new VPC) or subnet (existing VPC), where the training group reads."""

    backend: str
    """``efs`` or ``fsx``."""
    fsx: Optional[FsxConfig] = None
    """FSx settings (``None`` for EFS)."""
    zone: Optional[str] = None
    """FSx with a new VPC: the zone whose private subnet holds the file system."""
    subnet_id: Optional[str] = None
    """FSx with an existing VPC: the private subnet of the file system."""
    zone_key: Optional[str] = None
    """The config key the FSx zone/subnet comes from (for messages)."""
    client_groups: tuple[str, ...] = ()
    """Worker groups pinned where the file system is (the training group first)."""
    efa_client_groups: tuple[str, ...] = ()
    """Those of them that use EFA: their EFA security groups reach an EFA-enabled file system."""

    @property
    def is_fsx(self) -> bool:
        """FSx for Lustre (else EFS)."""
        return self.backend == "fsx"


@dataclass(frozen=True)
class Plan:
    """Everything the program builds, derived from the configuration."""

    config: StackConfig
    system: NodeGroupPlan
    groups: Mapping[str, NodeGroupPlan]
    """Worker groups by name."""
    autoscale: bool
    """cluster-autoscaler runs (enabled and there are worker groups): it owns the groups' desired sizes."""
    storage: StoragePlan = StoragePlan(backend="efs")
    """The shared file system."""

    @property
    def all_groups(self) -> list[NodeGroupPlan]:
        """The system group, then the worker groups."""
        return [self.system, *self.groups.values()]

    @property
    def gpu(self) -> bool:
        """Some worker group has NVIDIA GPUs (the NVIDIA device plugin is needed)."""
        return any(g.profile.gpus for g in self.groups.values())

    @property
    def efa(self) -> bool:
        """Some worker group uses EFA (the EFA device plugin is needed)."""
        return any(g.efa is not None for g in self.groups.values())

    @property
    def training_group(self) -> Optional[NodeGroupPlan]:
        """The group the training job runs on."""
        t = self.config.training
        return self.groups[t.node_group] if t is not None and t.node_group else None

    def health_threshold(self) -> Optional[float]:
        """The all-reduce bus bandwidth (GB/s) below which training must not start, or ``None`` (report
        only). Enforced checks default to 80% of the published two-node figure for the instance type."""
        hc = self.config.health_check
        if hc.min_bus_bandwidth_gbytes_per_s is not None:
            return hc.min_bus_bandwidth_gbytes_per_s
        group = self.training_group
        if not hc.enforce or group is None:
            return None
        reference = REFERENCE_ALLREDUCE.get(group.profile.instance.name)
        return None if reference is None else round(HEALTH_THRESHOLD_SHARE * reference.busbw_gbytes_per_s, 2)

    def health_message_bytes(self) -> Optional[int]:
        """Largest all-reduce message of the check: configured, else the reference's size for the training
        group's type (so measurement and threshold compare like with like), else ``None`` (the default)."""
        if self.config.health_check.max_bytes is not None:
            return self.config.health_check.max_bytes
        group = self.training_group
        reference = REFERENCE_ALLREDUCE.get(group.profile.instance.name) if group else None
        return None if reference is None else reference.message_bytes


def build_plan(cfg: StackConfig) -> Plan:
    """The plan of a validated configuration (pure: no AWS, no Pulumi)."""
    s = cfg.system_node_group
    system_type = cfg.instance(s.instance_type)
    system = NodeGroupPlan(
        name=SYSTEM_ROLE,
        path="systemNodeGroup",
        types=(system_type,),
        profile=node_profile(SYSTEM_ROLE, [system_type], efa=False),
        capacity_type="ON_DEMAND",
        capacity_reservation_id=None,
        min_size=s.min_size,
        desired_size=s.desired_size,
        max_size=s.max_size,
        disk_size_gib=s.disk_size_gib,
        zone=None,
        subnet_id=None,
        user_labels={},
        user_taints=(),
    )
    groups: dict[str, NodeGroupPlan] = {}
    for name, g in cfg.node_groups.items():
        types = tuple(cfg.instance(t) for t in g.instance_types)
        taints: tuple[NodeTaint, ...] = tuple({"key": t.key, "value": t.value, "effect": t.effect} for t in g.taints)
        groups[name] = NodeGroupPlan(
            name=name,
            path=f"nodeGroups.{name}",
            types=types,
            profile=node_profile(name, types, efa=g.uses_efa(cfg.catalog), labels=g.labels, taints=taints),
            capacity_type=g.capacity_type,
            capacity_reservation_id=g.capacity_reservation_id,
            min_size=g.min_size,
            desired_size=g.desired_size,
            max_size=g.max_size,
            disk_size_gib=g.disk_size_gib,
            zone=g.availability_zone,
            subnet_id=g.subnet_id,
            user_labels=dict(g.labels),
            user_taints=taints,
        )
    return Plan(
        config=cfg,
        system=system,
        groups=groups,
        autoscale=cfg.autoscaler.enabled and bool(groups),
        storage=storage_plan(cfg),
    )


def storage_plan(cfg: StackConfig) -> StoragePlan:
    """Where the shared file system goes (a validated configuration: the location exists)."""
    if cfg.storage.backend != "fsx":
        return StoragePlan(backend=cfg.storage.backend)
    fsx = cfg.storage.fsx_settings
    training = cfg.training.node_group if cfg.training is not None else None
    location, problems = fsx_location(fsx, cfg.node_groups, training, cfg.existing_vpc is not None, cfg.catalog)
    assert location is not None and not problems, problems  # the loader rejected such configurations
    return StoragePlan(
        backend="fsx",
        fsx=fsx,
        zone=location.zone,
        subnet_id=location.subnet_id,
        zone_key=location.key,
        client_groups=location.client_groups,
        efa_client_groups=location.efa_client_groups,
    )
