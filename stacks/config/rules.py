"""Rules across sections: instance types against the catalog, EFA against zones and the VPC, training
against node groups, the health check against published figures, the FSx file system against the zone
of the group that trains.

Each rule reports only root causes: a section that failed its own validation is not reported again
by rules that depend on it, and defaults the user did not set are not blamed.
"""

import ipaddress
from dataclasses import dataclass, field
from typing import Mapping, Optional

from components.catalog import EFA_ONLY_MIN_VPC_CNI, INSTANCE_TYPES, REFERENCE_ALLREDUCE, Catalog, InstanceType
from components.nodeplan import InconsistentFacts, efa_profile
from stacks.config.base import NAME_RE, version_text, version_tuple
from stacks.config.cluster import ClusterConfig
from stacks.config.errors import key
from stacks.config.network import ExistingVpcConfig, NetworkConfig
from stacks.config.nodegroups import GROUP_NAME_MAX, NodeGroupConfig, SystemNodeGroupConfig
from stacks.config.storage import FsxConfig, StorageConfig
from stacks.config.workloads import HealthCheckConfig, TrainingConfig

#: Cluster names prefix IAM role names (64 characters at most).
CLUSTER_NAME_MAX = 40
EFA_ONLY_MIN_VPC_CNI_TEXT = version_text(EFA_ONLY_MIN_VPC_CNI)


@dataclass
class Sections:
    """The parsed sections a rule looks at, and which paths failed their own validation."""

    set_keys: set[str]
    """Top-level keys the stack sets."""
    cluster_name: str
    network: Optional[NetworkConfig]
    existing_vpc: Optional[ExistingVpcConfig]
    cluster: ClusterConfig
    system: SystemNodeGroupConfig
    groups: dict[str, NodeGroupConfig]
    """Worker groups that passed their own validation."""
    group_names: list[str]
    """Every worker group the stack names (valid or not)."""
    catalog: Catalog
    training: Optional[TrainingConfig]
    health: HealthCheckConfig
    storage: StorageConfig = field(default_factory=StorageConfig)
    failed: set[str] = field(default_factory=set)
    """Config paths (``cluster``, ``nodeGroups.gpu``) whose own validation failed."""
    failed_group_types: dict[str, list[str]] = field(default_factory=dict)
    """Instance types named by groups that failed their own validation (still checked against the catalog)."""


def _known(s: "Sections", name: str, path: str, problems: list[str]) -> Optional[InstanceType]:
    it = s.catalog.get(name)
    if it is None and f"instanceFacts.{name}" not in s.failed:  # a failed facts entry is reported there
        problems.append(
            f"{key(path)}: unknown instance type {name!r}; use one of {', '.join(sorted(s.catalog.instance_types))}, "
            f"or describe it under {key('instanceFacts')}.{name} (vcpus, memoryMib, gpus, ..., source)"
        )
    return it


def check_cluster_name(s: Sections, problems: list[str]) -> None:
    """The cluster name prefixes AWS names."""
    if not NAME_RE.match(s.cluster_name) or len(s.cluster_name) > CLUSTER_NAME_MAX:
        problems.append(
            f"{key('clusterName')}: {s.cluster_name!r} must be 1-{CLUSTER_NAME_MAX} lowercase letters, digits and '-' "
            "(it prefixes IAM role names, which are limited to 64 characters)"
        )


def check_network(s: Sections, problems: list[str]) -> None:
    """A new VPC or an existing one, not both; the service range outside the VPC."""
    if "network" in s.set_keys and "existingVpc" in s.set_keys:
        problems.append(
            f"{key('network')} and {key('existingVpc')} are both set; keep {key('existingVpc')} to deploy into "
            f"an existing VPC, or {key('network')} to create one"
        )
    if s.cluster.service_cidr and s.network is not None:
        svc, vpc = ipaddress.IPv4Network(s.cluster.service_cidr), ipaddress.IPv4Network(s.network.vpc_cidr)
        if svc.overlaps(vpc):
            problems.append(
                f"{key('cluster.serviceCidr')}: {svc} overlaps {key('network.vpcCidr')} {vpc}; pick a service range "
                "outside the VPC, e.g. 172.20.0.0/16"
            )


def check_system_group(s: Sections, problems: list[str]) -> None:
    """The system group runs add-ons on a known CPU type."""
    it = _known(s, s.system.instance_type, "systemNodeGroup.instanceType", problems)
    if it is not None and it.is_gpu:
        problems.append(
            f"{key('systemNodeGroup.instanceType')}: {it.name} is a GPU type; the system group runs add-ons only, "
            "use a small CPU type such as m5.large"
        )


def check_group(s: Sections, name: str, g: NodeGroupConfig, problems: list[str]) -> None:
    """One worker group against the catalog, the network and the cluster."""
    path = f"nodeGroups.{name}"
    facts = [_known(s, t, f"{path}.instanceTypes[{i}]", problems) for i, t in enumerate(g.instance_types)]
    present = [f for f in facts if f is not None]
    if len({f.gpus for f in present}) > 1:
        problems.append(
            f"{key(f'{path}.instanceTypes')}: {', '.join(f'{f.name} ({f.gpus} GPUs)' for f in present)} have different "
            "GPU counts; pods request a whole node's GPUs, so put them in separate groups"
        )
    if g.subnet_id is not None:
        if s.existing_vpc is None:
            problems.append(f"{key(f'{path}.subnetId')}: only for existingVpc; with a new VPC set availabilityZone")
        elif g.subnet_id not in s.existing_vpc.private_subnet_ids:
            problems.append(f"{key(f'{path}.subnetId')}: {g.subnet_id} is not one of {key('existingVpc.privateSubnetIds')}")
    if g.availability_zone is not None:
        if s.existing_vpc is not None:
            problems.append(f"{key(f'{path}.availabilityZone')}: with existingVpc pin the group with subnetId instead")
        elif s.network is not None and s.network.availability_zones and g.availability_zone not in s.network.availability_zones:
            problems.append(
                f"{key(f'{path}.availabilityZone')}: {g.availability_zone} is not one of "
                f"{key('network.availabilityZones')} {s.network.availability_zones}"
            )
    if not present or len(present) != len(facts):
        return
    check_efa(s, path, g, present, problems)


def check_efa(s: Sections, path: str, g: NodeGroupConfig, facts: list[InstanceType], problems: list[str]) -> None:
    """EFA on the group's types: supported, one consistent interface count, one zone, a VPC CNI that
    supports efa-only interfaces."""
    if g.efa and not all(f.supports_efa for f in facts):
        without = ", ".join(f.name for f in facts if not f.supports_efa)
        with_efa = ", ".join(sorted(n for n, t in INSTANCE_TYPES.items() if t.supports_efa))
        problems.append(f"{key(f'{path}.efa')}: {without} has no EFA; remove efa: true or use a type with EFA ({with_efa})")
        return
    if not g.uses_efa(s.catalog):
        return
    for f in facts:
        try:
            efa_profile(f)
        except InconsistentFacts as exc:
            where = f"instanceFacts.{f.name}" if f.user_supplied else f"{path}.instanceTypes"
            problems.append(f"{key(where)}: {exc}")
            return
    if len({f.max_efa_interfaces for f in facts}) > 1:
        problems.append(
            f"{key(f'{path}.instanceTypes')}: EFA groups need one interface count; "
            f"{', '.join(f'{f.name} ({f.max_efa_interfaces})' for f in facts)} differ, split them into groups"
        )
    if not g.single_zone:
        fld = "subnetId" if s.existing_vpc is not None else "availabilityZone"
        problems.append(
            f"{key(f'{path}.{fld}')}: EFA groups run in one zone (with a cluster placement group); "
            f"set {fld} (the zone where {facts[0].name} capacity is)"
        )
    pinned = s.cluster.addon_versions.get("vpc-cni")
    if pinned is not None and efa_profile(facts[0]).min_vpc_cni is not None and version_tuple(pinned) < EFA_ONLY_MIN_VPC_CNI:
        problems.append(
            f"{key('cluster.addonVersions.vpc-cni')}: {pinned} is older than {EFA_ONLY_MIN_VPC_CNI_TEXT}, which efa-only "
            f"interfaces on {facts[0].name} need; pin a newer version or remove the pin"
        )


def check_group_names(s: Sections, problems: list[str]) -> None:
    """Group names: DNS labels, not ``system``; at least one group when the key is set."""
    for name in s.group_names:
        path = f"nodeGroups.{name}"
        if not NAME_RE.match(name) or len(name) > GROUP_NAME_MAX:
            problems.append(f"{key(path)}: group name {name!r} must be 1-{GROUP_NAME_MAX} lowercase letters, digits and '-'")
        if name == "system":
            problems.append(f"{key(path)}: 'system' is reserved for systemNodeGroup; rename the group")
    if "nodeGroups" in s.set_keys and not s.group_names and "nodeGroups" not in s.failed:
        problems.append(f"{key('nodeGroups')}: define at least one worker group, or remove the key")


def check_training(s: Sections, problems: list[str]) -> Optional[TrainingConfig]:
    """The training group exists and is large enough; fills in the defaults that depend on it
    (``nodeGroup`` when there is one group, ``maxWorkers`` = the group's maxSize)."""
    t = s.training
    if t is None:
        if "evaluation" in s.set_keys:
            problems.append(f"{key('evaluation')}: set without {key('training')}; evaluation needs a training run")
        return None
    group_name = t.node_group
    if group_name is None and len(s.group_names) == 1:
        group_name = s.group_names[0]
        t = t.model_copy(update={"node_group": group_name})
    if group_name is None:
        problems.append(
            f"{key('training.nodeGroup')}: required when there is not exactly one worker group; "
            f"name one of {', '.join(sorted(s.group_names)) or '(none: define nodeGroups first)'}"
        )
        return t
    if group_name not in s.group_names:
        if "nodeGroups" not in s.failed:
            problems.append(
                f"{key('training.nodeGroup')}: {group_name!r} is not a worker group; use one of "
                f"{', '.join(sorted(s.group_names)) or '(none: define nodeGroups first)'}"
            )
        return t
    g = s.groups.get(group_name)
    if g is None:
        return t  # the group failed its own validation: reported there
    if t.workers > g.max_size:
        problems.append(
            f"{key('training.workers')}: {t.workers} > {key(f'nodeGroups.{group_name}.maxSize')} ({g.max_size}): one "
            "worker runs per node; raise maxSize or lower workers"
        )
    if t.max_workers is not None and t.max_workers > g.max_size:
        problems.append(
            f"{key('training.maxWorkers')}: {t.max_workers} > {key(f'nodeGroups.{group_name}.maxSize')} ({g.max_size}); "
            "lower maxWorkers or raise maxSize"
        )
    if t.max_workers is None:
        t = t.model_copy(update={"max_workers": g.max_size})
    return t


def check_health(s: Sections, training: Optional[TrainingConfig], problems: list[str]) -> None:
    """An enforced check needs a threshold: configured, or a published figure for the type."""
    h = s.health
    if not h.enforce or h.min_bus_bandwidth_gbytes_per_s is not None or training is None:
        return
    g = s.groups.get(training.node_group or "")
    facts = s.catalog.get(g.instance_types[0]) if g else None
    if facts is not None and facts.name not in REFERENCE_ALLREDUCE:
        problems.append(
            f"{key('healthCheck.enforce')}: there is no published all-reduce bandwidth for {facts.name} to derive a "
            f"threshold from; set {key('healthCheck.minBusBandwidthGBps')} (GB/s)"
        )


@dataclass(frozen=True)
class FsxLocation:
    """Where the FSx file system lives: one zone (a new VPC) or one subnet (an existing VPC)."""

    zone: Optional[str]
    """The zone (new VPC), else ``None``."""
    subnet_id: Optional[str]
    """The private subnet (existing VPC), else ``None``."""
    key: str
    """The config key the location comes from (``storage.fsx.availabilityZone`` or a group's zone key)."""
    client_groups: tuple[str, ...]
    """Worker groups pinned to the same place (the training group first)."""
    efa_client_groups: tuple[str, ...]
    """Those of them that use EFA (clients of an EFA-enabled file system)."""


def fsx_location(
    fsx: FsxConfig,
    groups: Mapping[str, NodeGroupConfig],
    training_group: Optional[str],
    existing_vpc: bool,
    catalog: Catalog,
) -> tuple[Optional[FsxLocation], list[str]]:
    """The one zone (or subnet) of the FSx file system and the problems that prevent choosing it.

    The file system goes where training reads: the zone of the training group when that group is pinned
    (``storage.fsx.availabilityZone`` may only repeat it: cross-zone traffic costs and slows); else the
    explicit key; else the zone of the only pinned group. Several pinned groups and no training group to
    decide need the explicit key. The program's plan and these rules both call this function.
    """
    fld = "subnetId" if existing_vpc else "availabilityZone"
    explicit = fsx.subnet_id if existing_vpc else fsx.availability_zone
    explicit_key = key(f"storage.fsx.{fld}")

    def place(g: NodeGroupConfig) -> Optional[str]:
        return g.subnet_id if existing_vpc else g.availability_zone

    pinned = {name: at for name, g in groups.items() if (at := place(g)) is not None}
    problems: list[str] = []
    where: Optional[str] = None
    source = explicit_key
    if training_group is not None and training_group in pinned:
        where = pinned[training_group]
        source = key(f"nodeGroups.{training_group}.{fld}")
        if explicit is not None and explicit != where:
            problems.append(
                f"{explicit_key}: {explicit} is not where the training group runs ({source} is {where}); the file "
                f"system must be in the zone that reads it (cross-zone traffic costs and slows): set it to {where} or "
                "remove it"
            )
    elif explicit is not None:
        where = explicit
    elif len(set(pinned.values())) == 1:
        name = sorted(pinned)[0]
        where, source = pinned[name], key(f"nodeGroups.{name}.{fld}")
    elif pinned:
        listing = ", ".join(f"{n} ({z})" for n, z in sorted(pinned.items()))
        problems.append(
            f"{explicit_key}: several groups are pinned ({listing}) and none trains; an FSx file system lives in one "
            f"{'subnet' if existing_vpc else 'zone'}: set it to that of the GPU group that reads the data"
        )
    else:
        problems.append(
            f"{explicit_key}: an FSx file system lives in one {'subnet' if existing_vpc else 'zone'} and no worker "
            f"group is pinned to one; set it, or pin the GPU group that trains (nodeGroups.<group>.{fld}) and the "
            "file system follows it"
        )
    if where is None:
        return None, problems
    clients = sorted((n for n, w in pinned.items() if w == where), key=lambda n: (n != training_group, n))
    efa_clients = tuple(n for n in clients if groups[n].uses_efa(catalog))
    if fsx.efa and not efa_clients:
        problems.append(
            f"{key('storage.fsx.efa')}: an EFA-enabled file system needs EFA clients, and no EFA worker group runs in "
            f"{where}; set efa: false, or pin an EFA group (p4d, p5, p5en, p6-b200) there"
        )
    return FsxLocation(
        zone=None if existing_vpc else where,
        subnet_id=where if existing_vpc else None,
        key=source,
        client_groups=tuple(clients),
        efa_client_groups=efa_clients,
    ), problems


def check_storage(s: Sections, training: Optional[TrainingConfig], problems: list[str]) -> None:
    """FSx: one zone where training reads (inside the VPC), EFA clients for an EFA file system, a kept file
    system only in an existing VPC."""
    st = s.storage
    if st.backend != "fsx" or "storage" in s.failed:
        return
    fsx = st.fsx_settings
    existing = s.existing_vpc is not None
    if existing and fsx.availability_zone is not None:
        problems.append(f"{key('storage.fsx.availabilityZone')}: with existingVpc place the file system with subnetId instead")
    if not existing and fsx.subnet_id is not None:
        problems.append(f"{key('storage.fsx.subnetId')}: only for existingVpc; with a new VPC set availabilityZone")
    if existing and s.existing_vpc is not None and fsx.subnet_id is not None and fsx.subnet_id not in s.existing_vpc.private_subnet_ids:
        problems.append(f"{key('storage.fsx.subnetId')}: {fsx.subnet_id} is not one of {key('existingVpc.privateSubnetIds')}")
    if (
        not existing
        and fsx.availability_zone is not None
        and s.network is not None
        and s.network.availability_zones
        and fsx.availability_zone not in s.network.availability_zones
    ):
        problems.append(
            f"{key('storage.fsx.availabilityZone')}: {fsx.availability_zone} is not one of "
            f"{key('network.availabilityZones')} {s.network.availability_zones}"
        )
    if st.file_system_id is not None and not existing:
        problems.append(
            f"{key('storage.fileSystemId')}: a kept Lustre file system lives in a subnet of the VPC it was created in; "
            "adopt it with existingVpc (that VPC and the file system's subnet)"
        )
    if st.retain_on_delete and not existing:
        problems.append(
            f"{key('storage.retainOnDelete')}: a kept Lustre file system keeps its network interfaces in its subnet, "
            "so the VPC this stack creates could not be deleted; keep it only with existingVpc, or keep the data in "
            f"S3 instead (the bucket of {key('storage.fsx.dataRepository.s3Path')} outlives the stack)"
        )
    if any(f"nodeGroups.{n}" in s.failed for n in s.group_names):
        return  # zones of groups that failed their own validation are unknown
    training_group = training.node_group if training is not None else None
    _, found = fsx_location(fsx, s.groups, training_group, existing, s.catalog)
    problems.extend(found)


def cross_section(s: Sections) -> tuple[list[str], Optional[TrainingConfig]]:
    """Every cross-section rule; returns the problems and the training section with its defaults filled in."""
    problems: list[str] = []
    check_cluster_name(s, problems)
    check_network(s, problems)
    check_system_group(s, problems)
    check_group_names(s, problems)
    for name, g in s.groups.items():
        check_group(s, name, g, problems)
    for name, types in s.failed_group_types.items():
        for i, t in enumerate(types):
            _known(s, t, f"nodeGroups.{name}.instanceTypes[{i}]", problems)
    training = check_training(s, problems)
    check_health(s, training, problems)
    check_storage(s, training, problems)
    return problems, training
