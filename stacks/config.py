"""The stack configuration loader: reads every ``eks-training:*`` key and validates it as a whole.

:func:`load_config` runs before the program registers any resource. It collects *all* problems
and raises one :class:`ConfigError` that names each bad key (``eks-training:nodeGroups.gpu.minSize``)
and says how to fix it, so a wrong config never creates half an environment.

Structured keys (objects) are parsed with pydantic models that forbid unknown keys; the
cross-field rules (sizes, CIDR overlaps, instance facts from the catalog) are checked here too.
"""

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, Sequence

import pulumi
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from components.catalog import (
    DEFAULT_KUBERNETES_VERSION,
    EFA_ONLY_MIN_VPC_CNI,
    EKS_ADDONS,
    INSTANCE_TYPES,
    REFERENCE_ALLREDUCE,
    SUPPORTED_KUBERNETES_VERSIONS,
    Catalog,
    InstanceType,
)
from components.image import validate_image_reference

NAMESPACE = "eks-training"


class ConfigError(pulumi.RunError):
    """Raised when the stack configuration is invalid; nothing has been registered yet."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        text = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"invalid stack configuration ({len(problems)} problem(s)); no resource was created:\n{text}"
        )


class _Model(BaseModel):
    """Base for config objects: camelCase keys, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=False, frozen=True)


class TaintConfig(_Model):
    """A Kubernetes taint on a node group (``effect`` uses Kubernetes spelling)."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeGroupConfig(_Model):
    """A worker node group (key ``nodeGroups.<name>``)."""

    instance_types: list[str] = Field(min_length=1)
    min_size: int = Field(ge=0)
    desired_size: int = Field(ge=0)
    max_size: int = Field(ge=1)
    capacity_type: Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"] = "ON_DEMAND"
    capacity_reservation_id: Optional[str] = None
    efa: Optional[bool] = None
    availability_zone: Optional[str] = None
    subnet_id: Optional[str] = None
    disk_size_gib: int = Field(default=100, ge=20, le=16384)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[TaintConfig] = Field(default_factory=list)

    def efa_enabled(self, facts: "InstanceType") -> bool:
        """EFA is on by default for types that have it, off otherwise."""
        return facts.supports_efa if self.efa is None else self.efa

    def efa_only_interfaces(self, facts: "InstanceType") -> bool:
        """The group's launch template carries ``efa-only`` interfaces (EFA on a type with several network
        cards: card 0 ``efa``, the others ``efa-only``), which need vpc-cni >= ``EFA_ONLY_MIN_VPC_CNI``."""
        return self.efa_enabled(facts) and facts.network_cards > 1


class SystemNodeGroupConfig(_Model):
    """The small on-demand CPU node group for add-ons and controllers (key ``systemNodeGroup``)."""

    instance_type: str = "m5.large"
    min_size: int = Field(default=2, ge=1)
    desired_size: int = Field(default=2, ge=1)
    max_size: int = Field(default=3, ge=1)
    disk_size_gib: int = Field(default=50, ge=20, le=16384)


class NetworkConfig(_Model):
    """A new VPC (key ``network``)."""

    vpc_cidr: str = "10.0.0.0/16"
    availability_zone_count: int = Field(default=3, ge=2, le=6)
    availability_zones: Optional[list[str]] = None
    nat_gateways: Literal["single", "perAz"] = "single"
    private_subnet_cidrs: Optional[list[str]] = None
    public_subnet_cidrs: Optional[list[str]] = None


class PreflightConfig(_Model):
    """Account checks before anything is created (key ``preflight``)."""

    enabled: bool = True


class ExistingVpcConfig(_Model):
    """An existing VPC to deploy into (key ``existingVpc``); no network is created."""

    vpc_id: str
    private_subnet_ids: list[str]
    public_subnet_ids: list[str] = Field(default_factory=list)


LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]


def _default_log_types() -> list[LogType]:
    return ["api", "audit", "authenticator"]


class ClusterConfig(_Model):
    """The EKS control plane (key ``cluster``)."""

    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    endpoint_public_access: bool = True
    public_access_cidrs: list[str] = Field(default_factory=lambda: ["0.0.0.0/0"])
    admin_role_arns: list[str] = Field(default_factory=list)
    log_types: list["LogType"] = Field(default_factory=lambda: _default_log_types())
    service_cidr: Optional[str] = None
    create_oidc_provider: bool = False
    addon_versions: dict[str, str] = Field(default_factory=dict)


class EfsConfig(_Model):
    """The shared EFS volume (key ``storage``)."""

    namespace: str = "training"
    pvc_name: str = "shared-data"
    storage_class_name: str = "efs-shared"
    capacity: str = "1Ti"
    throughput_mode: Literal["elastic", "bursting"] = "elastic"
    performance_mode: Literal["generalPurpose", "maxIO"] = "generalPurpose"
    retain_on_delete: bool = False
    file_system_id: Optional[str] = None
    backup: bool = False


CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_BYTES = 170498071


class ImageConfig(_Model):
    """The training image (key ``image``): built by CodeBuild from training/, or prebuilt."""

    prebuilt: Optional[str] = None
    keep_images: int = Field(default=10, ge=1, le=1000)
    build_timeout_minutes: int = Field(default=90, ge=5, le=2160)
    compute_type: Literal[
        "BUILD_GENERAL1_MEDIUM", "BUILD_GENERAL1_LARGE", "BUILD_GENERAL1_XLARGE", "BUILD_GENERAL1_2XLARGE"
    ] = "BUILD_GENERAL1_LARGE"


class DatasetConfig(_Model):
    """The dataset the staging job puts on the shared volume (key ``dataset``)."""

    source: str = CIFAR10_URL
    md5: Optional[str] = None
    expected_bytes: Optional[int] = Field(default=None, ge=1)
    path: str = "datasets/cifar10"
    timeout_minutes: int = Field(default=30, ge=5, le=1440)


class TrainingConfig(_Model):
    """The training job (key ``training``); absent = no workloads, the environment only."""

    node_group: Optional[str] = None
    workers: int = Field(default=2, ge=1)
    min_workers: int = Field(default=1, ge=1)
    max_workers: Optional[int] = Field(default=None, ge=1)
    rendezvous_backend: Literal["etcd-v2", "c10d"] = "etcd-v2"
    job_name: str = "cifar10"
    epochs: int = Field(default=10, ge=1, le=1000)
    batch_size: int = Field(default=256, ge=1, le=65536)
    learning_rate: float = Field(default=0.4, gt=0, le=10)
    width: int = Field(default=64, ge=8, le=512)
    data_loader_workers: int = Field(default=4, ge=0, le=64)
    checkpoint_every_steps: int = Field(default=0, ge=0)
    max_restarts: int = Field(default=3, ge=0, le=100)
    timeout_hours: float = Field(default=24, gt=0, le=720)
    wait_for_completion: bool = False


class AutoscalerConfig(_Model):
    """cluster-autoscaler (key ``autoscaler``): worker groups scale between minSize and maxSize."""

    enabled: bool = True


class HealthCheckConfig(_Model):
    """The all-reduce bandwidth check run on the training nodes before training (key ``healthCheck``)."""

    enabled: bool = True
    enforce: bool = False
    min_bus_bandwidth_gbytes_per_s: Optional[float] = Field(default=None, gt=0, alias="minBusBandwidthGBps")
    max_bytes: Optional[int] = Field(default=None, ge=1 << 20, le=1 << 34)
    timeout_minutes: int = Field(default=60, ge=5, le=1440)


class EvaluationConfig(_Model):
    """The evaluation job (key ``evaluation``)."""

    min_accuracy: Optional[float] = Field(default=None, ge=0, le=1)


class InstanceFactsConfig(_Model):
    """Facts for an instance type the built-in catalog does not know (key ``instanceFacts.<type>``)."""

    vcpus: int = Field(ge=1)
    memory_mib: int = Field(ge=512)
    gpus: int = Field(default=0, ge=0)
    gpu_model: Optional[str] = None
    gpu_memory_mib: Optional[int] = None
    max_efa_interfaces: int = Field(default=0, ge=0)
    network_cards: int = Field(default=1, ge=1)
    local_nvme_gb: int = Field(default=0, ge=0)
    price_per_hour: Optional[float] = None
    source: str = Field(min_length=3)


#: Every top-level key of the ``eks-training`` namespace, its model (None = scalar) and default.
_TOP_LEVEL: Mapping[str, Any] = {
    "clusterName": str,
    "network": NetworkConfig,
    "existingVpc": ExistingVpcConfig,
    "cluster": ClusterConfig,
    "systemNodeGroup": SystemNodeGroupConfig,
    "nodeGroups": dict,
    "storage": EfsConfig,
    "instanceFacts": dict,
    "tags": dict,
    "image": ImageConfig,
    "dataset": DatasetConfig,
    "training": TrainingConfig,
    "evaluation": EvaluationConfig,
    "preflight": PreflightConfig,
    "autoscaler": AutoscalerConfig,
    "healthCheck": HealthCheckConfig,
}


@dataclass(frozen=True)
class StackConfig:
    """The validated configuration of one stack."""

    project: str
    stack: str
    cluster_name: str
    network: Optional[NetworkConfig]
    existing_vpc: Optional[ExistingVpcConfig]
    cluster: ClusterConfig
    system_node_group: SystemNodeGroupConfig
    node_groups: Mapping[str, NodeGroupConfig]
    storage: EfsConfig
    catalog: Catalog
    tags: Mapping[str, str]
    image: ImageConfig
    dataset: DatasetConfig
    training: Optional[TrainingConfig]
    evaluation: EvaluationConfig
    preflight: PreflightConfig
    autoscaler: AutoscalerConfig
    health_check: HealthCheckConfig

    def group_efa(self, group: str) -> bool:
        """Whether a worker group is EFA-enabled (default: on for types with EFA)."""
        g = self.node_groups[group]
        return g.efa_enabled(self.instance(g.instance_types[0]))

    def instance(self, name: str) -> InstanceType:
        """Catalog facts for ``name`` (validated to exist)."""
        return self.catalog.require(name)

    def group_instance(self, group: str) -> InstanceType:
        """Facts for a worker group: its smallest instance type (by vCPUs, then memory). All types of
        a group share GPU and EFA counts (validated), so pods sized from this fit on any of them."""
        types = [self.instance(t) for t in self.node_groups[group].instance_types]
        return min(
            types, key=lambda f: (f.allocatable_cpu_m or f.vcpus * 1000, f.allocatable_memory_mib or f.memory_mib)
        )


_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_VPC_RE = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_AZ_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$")
_QUANTITY_RE = re.compile(r"^\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


def _key(path: str) -> str:
    return f"{NAMESPACE}:{path}"


def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME_RE.match(name))


def _fmt_validation(path: str, err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"]).lstrip(".")
        full = f"{path}.{loc}" if loc else path
        if e["type"] == "extra_forbidden":
            out.append(f"{_key(full)}: unknown key; remove it or fix its spelling (see Pulumi.yaml for the valid keys)")
        elif e["type"] == "missing":
            out.append(f"{_key(full)}: required key is missing; set it (see Pulumi.yaml)")
        else:
            out.append(f"{_key(full)}: {e['msg']} (got {e.get('input')!r})")
    return out


def _parse_net(value: str, key: str, problems: list[str]) -> Optional[ipaddress.IPv4Network]:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        problems.append(f"{_key(key)}: {value!r} is not a valid CIDR ({exc}); use a network address such as 10.0.0.0/16")
        return None
    if not isinstance(net, ipaddress.IPv4Network):
        problems.append(f"{_key(key)}: {value!r} is IPv6; this project builds IPv4 clusters, use an IPv4 CIDR")
        return None
    return net


def _raw_config() -> dict[str, str]:
    """All ``eks-training:*`` settings as raw strings, keyed without the namespace."""
    merged: dict[str, Any] = {}
    merged.update(pulumi.runtime.config.get_config_env())
    merged.update(pulumi.runtime.config.CONFIG.get())
    out: dict[str, str] = {}
    for full, value in merged.items():
        ns, sep, key = full.partition(":")
        if sep and ns == NAMESPACE:
            out[key] = value if isinstance(value, str) else json.dumps(value)
    return out


def default_private_subnet_cidrs(vpc: ipaddress.IPv4Network, count: int) -> list[str]:
    """Private subnets: the first ``count`` blocks of a quarter of the VPC each (/18 in a /16)."""
    prefix = vpc.prefixlen + 2
    return [str(s) for s in list(vpc.subnets(new_prefix=prefix))[:count]]


def default_public_subnet_cidrs(vpc: ipaddress.IPv4Network, count: int) -> list[str]:
    """Public subnets: small blocks (/22 in a /16) at the start of the VPC's last quarter."""
    last_quarter = list(vpc.subnets(new_prefix=vpc.prefixlen + 2))[-1]
    return [str(s) for s in list(last_quarter.subnets(new_prefix=vpc.prefixlen + 6))[:count]]


def load_config(project: str, stack: str) -> StackConfig:
    """Read and validate the whole stack configuration; raise :class:`ConfigError` on any problem.

    Zone availability in the region is checked later, by :func:`choose_zones`, when the region's
    zones are known (still before any resource is registered).
    """
    raw = _raw_config()
    problems: list[str] = []
    parsed: dict[str, Any] = {}

    for key, value in raw.items():
        model = _TOP_LEVEL.get(key)
        if model is None:
            problems.append(
                f"{_key(key)}: unknown key; valid keys are {', '.join(sorted(_TOP_LEVEL))} (see Pulumi.yaml)"
            )
            continue
        if model is str:
            parsed[key] = value
            continue
        try:
            obj = json.loads(value)
        except json.JSONDecodeError:
            problems.append(f"{_key(key)}: must be an object (a YAML mapping), got {value!r}")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{_key(key)}: must be an object (a YAML mapping), got {type(obj).__name__}")
            continue
        if model is dict:
            parsed[key] = obj
            continue
        try:
            parsed[key] = model.model_validate(obj)
        except ValidationError as exc:
            problems.extend(_fmt_validation(key, exc))

    # Instance facts supplied by the user extend the catalog.
    types: dict[str, InstanceType] = dict(INSTANCE_TYPES)
    for name, facts in (parsed.get("instanceFacts") or {}).items():
        if name in INSTANCE_TYPES:
            problems.append(
                f"{_key(f'instanceFacts.{name}')}: {name} is already in the catalog; remove this entry "
                "(or fix components/catalog.py if a fact there is wrong)"
            )
            continue
        try:
            f = InstanceFactsConfig.model_validate(facts)
        except ValidationError as exc:
            problems.extend(_fmt_validation(f"instanceFacts.{name}", exc))
            continue
        types[name] = InstanceType(
            name=name,
            vcpus=f.vcpus,
            memory_mib=f.memory_mib,
            gpus=f.gpus,
            gpu_model=f.gpu_model,
            gpu_memory_mib=f.gpu_memory_mib,
            max_efa_interfaces=f.max_efa_interfaces,
            network_cards=f.network_cards,
            local_nvme_gb=f.local_nvme_gb,
            price_per_hour=f.price_per_hour,
            sources=(f"stack config: {f.source}",),
        )
    catalog = Catalog(types)

    def known(type_name: str, key: str) -> Optional[InstanceType]:
        it = catalog.get(type_name)
        if it is None:
            problems.append(
                f"{_key(key)}: unknown instance type {type_name!r}; use one of {', '.join(sorted(types))}, "
                f"or describe it under {_key('instanceFacts')}.{type_name} (vcpus, memoryMib, gpus, ..., source)"
            )
        return it

    # Cluster name.
    cluster_name = parsed.get("clusterName") or f"{project}-{stack}"
    if not _NAME_RE.match(cluster_name) or len(cluster_name) > 40:
        problems.append(
            f"{_key('clusterName')}: {cluster_name!r} must be 1-40 lowercase letters, digits and '-' "
            "(it prefixes IAM role names, which are limited to 64 characters)"
        )

    cluster: ClusterConfig = parsed.get("cluster") or ClusterConfig()
    if "cluster" in parsed:
        if cluster.kubernetes_version not in SUPPORTED_KUBERNETES_VERSIONS:
            problems.append(
                f"{_key('cluster.kubernetesVersion')}: {cluster.kubernetes_version!r} is not supported; "
                f"use one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}"
            )
        for i, cidr in enumerate(cluster.public_access_cidrs):
            _parse_net(cidr, f"cluster.publicAccessCidrs[{i}]", problems)
        if cluster.endpoint_public_access and not cluster.public_access_cidrs:
            problems.append(
                f"{_key('cluster.publicAccessCidrs')}: empty while endpointPublicAccess is true; "
                "list the CIDRs allowed to reach the API server, or set endpointPublicAccess: false"
            )
        for i, arn in enumerate(cluster.admin_role_arns):
            if not _ROLE_ARN_RE.match(arn):
                problems.append(
                    f"{_key(f'cluster.adminRoleArns[{i}]')}: {arn!r} is not an IAM role ARN "
                    "(arn:aws:iam::123456789012:role/NAME)"
                )
        unknown_addons = sorted(set(cluster.addon_versions) - set(EKS_ADDONS))
        if unknown_addons:
            problems.append(
                f"{_key('cluster.addonVersions')}: unknown add-on(s) {', '.join(unknown_addons)}; "
                f"pin only {', '.join(EKS_ADDONS)}"
            )
    elif DEFAULT_KUBERNETES_VERSION not in SUPPORTED_KUBERNETES_VERSIONS:  # pragma: no cover - catalog sanity
        problems.append("catalog: DEFAULT_KUBERNETES_VERSION is not in SUPPORTED_KUBERNETES_VERSIONS")

    # Network: new VPC or existing one.
    network: Optional[NetworkConfig] = parsed.get("network")
    existing: Optional[ExistingVpcConfig] = parsed.get("existingVpc")
    if "network" in raw and "existingVpc" in raw:
        problems.append(
            f"{_key('network')} and {_key('existingVpc')} are both set; keep {_key('existingVpc')} to deploy into "
            f"an existing VPC, or {_key('network')} to create one"
        )
    if existing is not None:
        if not _VPC_RE.match(existing.vpc_id):
            problems.append(f"{_key('existingVpc.vpcId')}: {existing.vpc_id!r} is not a VPC id (vpc-0123abcd...)")
        if len(existing.private_subnet_ids) < 2:
            problems.append(
                f"{_key('existingVpc.privateSubnetIds')}: EKS needs private subnets in at least 2 availability "
                f"zones; list at least 2 subnet ids (got {len(existing.private_subnet_ids)})"
            )
        for field_name, ids in (("privateSubnetIds", existing.private_subnet_ids), ("publicSubnetIds", existing.public_subnet_ids)):
            for i, sid in enumerate(ids):
                if not _SUBNET_RE.match(sid):
                    problems.append(f"{_key(f'existingVpc.{field_name}[{i}]')}: {sid!r} is not a subnet id (subnet-0123abcd...)")
        dup = set(existing.private_subnet_ids) & set(existing.public_subnet_ids)
        if dup or len(set(existing.private_subnet_ids)) != len(existing.private_subnet_ids):
            problems.append(
                f"{_key('existingVpc')}: subnet ids must be distinct and not both private and public "
                f"({', '.join(sorted(dup)) or 'duplicate in privateSubnetIds'})"
            )
    elif network is None and "network" not in raw:
        network = NetworkConfig()

    vpc_net: Optional[ipaddress.IPv4Network] = None
    if network is not None:
        vpc_net = _parse_net(network.vpc_cidr, "network.vpcCidr", problems)
        if vpc_net is not None and not (16 <= vpc_net.prefixlen <= 20):
            problems.append(
                f"{_key('network.vpcCidr')}: /{vpc_net.prefixlen} is outside /16../20; pods take VPC addresses "
                "(VPC CNI), so use a /16 to /20 block"
            )
            vpc_net = None
        az_count = network.availability_zone_count
        if network.availability_zones is not None:
            azs = network.availability_zones
            if len(azs) < 2:
                problems.append(
                    f"{_key('network.availabilityZones')}: EKS needs at least 2 availability zones, got {len(azs)}; "
                    "list 2 or more"
                )
            if len(set(azs)) != len(azs):
                problems.append(f"{_key('network.availabilityZones')}: duplicate zone names in {azs}")
            for i, az in enumerate(azs):
                if not _AZ_RE.match(az):
                    problems.append(f"{_key(f'network.availabilityZones[{i}]')}: {az!r} is not a zone name (us-east-1a)")
            az_count = len(azs)
        subnet_nets: list[tuple[str, ipaddress.IPv4Network]] = []
        for field_name, cidrs, default_fn in (
            ("privateSubnetCidrs", network.private_subnet_cidrs, default_private_subnet_cidrs),
            ("publicSubnetCidrs", network.public_subnet_cidrs, default_public_subnet_cidrs),
        ):
            if cidrs is None:
                if vpc_net is not None and az_count <= 3:
                    subnet_nets.extend((f"network.{field_name} (default)", ipaddress.IPv4Network(c)) for c in default_fn(vpc_net, az_count))
                elif vpc_net is not None:
                    problems.append(
                        f"{_key(f'network.{field_name}')}: the default layout covers at most 3 zones; "
                        f"list {az_count} CIDRs explicitly"
                    )
                continue
            if len(cidrs) != az_count:
                problems.append(
                    f"{_key(f'network.{field_name}')}: {len(cidrs)} CIDRs for {az_count} availability zones; "
                    "give exactly one per zone"
                )
            for i, c in enumerate(cidrs):
                n = _parse_net(c, f"network.{field_name}[{i}]", problems)
                if n is None:
                    continue
                if vpc_net is not None and not n.subnet_of(vpc_net):
                    problems.append(
                        f"{_key(f'network.{field_name}[{i}]')}: {c} is outside network.vpcCidr {vpc_net}; "
                        "use a block inside the VPC"
                    )
                subnet_nets.append((f"network.{field_name}[{i}]", n))
        for i, (ka, a) in enumerate(subnet_nets):
            for kb, b in subnet_nets[i + 1 :]:
                if a.overlaps(b):
                    problems.append(f"{_key(ka)} {a} overlaps {_key(kb)} {b}; give each subnet its own block")

    if cluster.service_cidr is not None:
        svc = _parse_net(cluster.service_cidr, "cluster.serviceCidr", problems)
        if svc is not None and vpc_net is not None and svc.overlaps(vpc_net):
            problems.append(
                f"{_key('cluster.serviceCidr')} {svc} overlaps {_key('network.vpcCidr')} {vpc_net}; "
                "pick a service range outside the VPC, e.g. 172.20.0.0/16"
            )
        if svc is not None and not (12 <= svc.prefixlen <= 24):
            problems.append(f"{_key('cluster.serviceCidr')}: EKS accepts /12../24, got /{svc.prefixlen}")

    # System node group.
    system: SystemNodeGroupConfig = parsed.get("systemNodeGroup") or SystemNodeGroupConfig()
    it = known(system.instance_type, "systemNodeGroup.instanceType")
    if it is not None and it.is_gpu:
        problems.append(
            f"{_key('systemNodeGroup.instanceType')}: {system.instance_type} is a GPU type; the system group runs "
            "add-ons only, use a small CPU type such as m5.large"
        )
    _check_sizes("systemNodeGroup", system.min_size, system.desired_size, system.max_size, problems)

    # Worker node groups.
    groups: dict[str, NodeGroupConfig] = {}
    for gname, gval in (parsed.get("nodeGroups") or {}).items():
        gkey = f"nodeGroups.{gname}"
        if not _NAME_RE.match(gname) or len(gname) > 20:
            problems.append(f"{_key(gkey)}: group name {gname!r} must be 1-20 lowercase letters, digits and '-'")
        if gname == "system":
            problems.append(f"{_key(gkey)}: 'system' is reserved for systemNodeGroup; rename the group")
        try:
            g = NodeGroupConfig.model_validate(gval)
        except ValidationError as exc:
            problems.extend(_fmt_validation(gkey, exc))
            continue
        groups[gname] = g
        _check_sizes(gkey, g.min_size, g.desired_size, g.max_size, problems)
        facts = [known(t, f"{gkey}.instanceTypes[{i}]") for i, t in enumerate(g.instance_types)]
        if len(set(g.instance_types)) != len(g.instance_types):
            problems.append(f"{_key(f'{gkey}.instanceTypes')}: duplicate instance types {g.instance_types}")
        present = [f for f in facts if f is not None]
        if len({f.gpus for f in present}) > 1:
            problems.append(
                f"{_key(f'{gkey}.instanceTypes')}: {', '.join(f'{f.name} ({f.gpus} GPUs)' for f in present)} have "
                "different GPU counts; pods request a whole node's GPUs, so put them in separate groups"
            )
        if g.capacity_type == "ON_DEMAND" and len(g.instance_types) > 1:
            problems.append(
                f"{_key(f'{gkey}.instanceTypes')}: several types only make sense with capacityType SPOT "
                "(EKS picks one on-demand type); list one type or set capacityType: SPOT"
            )
        _check_efa_and_capacity(gkey, g, present, existing, network, cluster, problems)
        for lk, lv in g.labels.items():
            if not _label_key_ok(lk):
                problems.append(f"{_key(f'{gkey}.labels')}: {lk!r} is not a valid Kubernetes label key")
            if len(lv) > 63 or not _LABEL_VALUE_RE.match(lv):
                problems.append(f"{_key(f'{gkey}.labels.{lk}')}: {lv!r} is not a valid Kubernetes label value")
            if lk.startswith(("kubernetes.io/", "k8s.io/", "eks.amazonaws.com/")) or lk.startswith("eks-training/"):
                problems.append(
                    f"{_key(f'{gkey}.labels')}: {lk!r} uses a reserved prefix (kubernetes.io/, k8s.io/, "
                    "eks.amazonaws.com/, eks-training/); choose your own prefix"
                )
        for i, t in enumerate(g.taints):
            if not _label_key_ok(t.key):
                problems.append(f"{_key(f'{gkey}.taints[{i}].key')}: {t.key!r} is not a valid taint key")
            if t.value and (len(t.value) > 63 or not _LABEL_VALUE_RE.match(t.value)):
                problems.append(f"{_key(f'{gkey}.taints[{i}].value')}: {t.value!r} is not a valid taint value")
            if t.key == "nvidia.com/gpu":
                problems.append(
                    f"{_key(f'{gkey}.taints[{i}]')}: the nvidia.com/gpu taint is added to GPU groups automatically; "
                    "remove it"
                )

    if "nodeGroups" in parsed and not parsed["nodeGroups"]:
        problems.append(f"{_key('nodeGroups')}: define at least one worker group, or remove the key")

    storage: EfsConfig = parsed.get("storage") or EfsConfig()
    if not _NAME_RE.match(storage.namespace):
        problems.append(f"{_key('storage.namespace')}: {storage.namespace!r} is not a valid namespace name")
    if not _NAME_RE.match(storage.pvc_name):
        problems.append(f"{_key('storage.pvcName')}: {storage.pvc_name!r} is not a valid object name")
    if not _NAME_RE.match(storage.storage_class_name):
        problems.append(f"{_key('storage.storageClassName')}: {storage.storage_class_name!r} is not a valid name")
    if storage.performance_mode == "maxIO" and storage.throughput_mode == "elastic":
        problems.append(
            f"{_key('storage.performanceMode')}: maxIO does not support Elastic throughput; use generalPurpose "
            f"(recommended) or set {_key('storage.throughputMode')}: bursting"
        )
    if storage.file_system_id is not None and not re.match(r"^fs-[0-9a-f]{8,17}$", storage.file_system_id):
        problems.append(f"{_key('storage.fileSystemId')}: {storage.file_system_id!r} is not an EFS id (fs-0123abcd...)")
    if not _QUANTITY_RE.match(storage.capacity):
        problems.append(f"{_key('storage.capacity')}: {storage.capacity!r} is not a Kubernetes quantity (e.g. 1Ti)")

    tags = parsed.get("tags") or {}
    for tk, tv in tags.items():
        if not isinstance(tv, str):
            problems.append(f"{_key(f'tags.{tk}')}: tag values must be strings, got {type(tv).__name__}")

    image: ImageConfig = parsed.get("image") or ImageConfig()
    if image.prebuilt is not None:
        why = validate_image_reference(image.prebuilt)
        if why:
            problems.append(f"{_key('image.prebuilt')}: {why}; give a pinned reference such as REGISTRY/REPO:TAG or REPO@sha256:...")

    dataset: DatasetConfig = parsed.get("dataset") or DatasetConfig()
    if not dataset.source.startswith(("https://", "s3://")):
        problems.append(f"{_key('dataset.source')}: {dataset.source!r} must be an https:// URL or an s3://bucket/key URI")
    elif dataset.source.startswith("s3://") and "/" not in dataset.source[len("s3://") :].strip("/"):
        problems.append(f"{_key('dataset.source')}: {dataset.source!r} names a bucket but no object key")
    if dataset.md5 is not None and not re.match(r"^[0-9a-f]{32}$", dataset.md5):
        problems.append(f"{_key('dataset.md5')}: {dataset.md5!r} is not an MD5 hex digest (32 hex characters)")
    if dataset.source == CIFAR10_URL and dataset.md5 is None and dataset.expected_bytes is None:
        # The public CIFAR-10 tarball's published checksum and size.
        dataset = dataset.model_copy(update={"md5": CIFAR10_MD5, "expected_bytes": CIFAR10_BYTES})
    if ".." in dataset.path.split("/") or dataset.path.startswith("/") or not re.match(r"^[\w./-]+$", dataset.path):
        problems.append(f"{_key('dataset.path')}: {dataset.path!r} must be a relative path inside the shared volume")

    training: Optional[TrainingConfig] = parsed.get("training")
    if training is not None:
        group_name = training.node_group
        if group_name is None and len(groups) == 1:
            group_name = next(iter(groups))
            training = training.model_copy(update={"node_group": group_name})
        if group_name is None:
            problems.append(
                f"{_key('training.nodeGroup')}: required when there is not exactly one worker group; "
                f"name one of {', '.join(sorted(groups)) or '(none: define nodeGroups first)'}"
            )
        elif group_name not in groups:
            problems.append(
                f"{_key('training.nodeGroup')}: {group_name!r} is not a worker group; use one of "
                f"{', '.join(sorted(groups)) or '(none: define nodeGroups first)'}"
            )
        else:
            g = groups[group_name]
            max_workers = training.max_workers or g.max_size
            if training.max_workers is None:
                training = training.model_copy(update={"max_workers": max_workers})
            if training.workers > g.max_size:
                problems.append(
                    f"{_key('training.workers')} ({training.workers}) > {_key(f'nodeGroups.{group_name}.maxSize')} "
                    f"({g.max_size}): one worker runs per node; raise maxSize or lower workers"
                )
            if max_workers > g.max_size:
                problems.append(
                    f"{_key('training.maxWorkers')} ({max_workers}) > {_key(f'nodeGroups.{group_name}.maxSize')} ({g.max_size})"
                )
        if training.min_workers > training.workers:
            problems.append(
                f"{_key('training.minWorkers')} ({training.min_workers}) > {_key('training.workers')} ({training.workers}); "
                "set minWorkers <= workers"
            )
        if training.max_workers is not None and training.workers > training.max_workers:
            problems.append(
                f"{_key('training.workers')} ({training.workers}) > {_key('training.maxWorkers')} ({training.max_workers})"
            )
        if not _NAME_RE.match(training.job_name) or len(training.job_name) > 30:
            problems.append(f"{_key('training.jobName')}: {training.job_name!r} must be 1-30 lowercase letters, digits and '-'")
    elif "evaluation" in parsed:
        problems.append(f"{_key('evaluation')}: set without {_key('training')}; evaluation needs a training run")

    health: HealthCheckConfig = parsed.get("healthCheck") or HealthCheckConfig()
    if health.max_bytes is not None and health.max_bytes & (health.max_bytes - 1):
        problems.append(f"{_key('healthCheck.maxBytes')}: {health.max_bytes} is not a power of two (e.g. 1073741824)")
    if health.enforce and health.min_bus_bandwidth_gbytes_per_s is None and training is not None and training.node_group in groups:
        facts = catalog.get(groups[training.node_group].instance_types[0])
        if facts is not None and facts.name not in REFERENCE_ALLREDUCE:
            problems.append(
                f"{_key('healthCheck.enforce')}: there is no published all-reduce bandwidth for {facts.name} to derive a "
                f"threshold from; set {_key('healthCheck.minBusBandwidthGBps')} (GB/s)"
            )

    if problems:
        raise ConfigError(problems)

    return StackConfig(
        project=project,
        stack=stack,
        cluster_name=cluster_name,
        network=network,
        existing_vpc=existing,
        cluster=cluster,
        system_node_group=system,
        node_groups=groups,
        storage=storage,
        catalog=catalog,
        tags={str(k): str(v) for k, v in tags.items()},
        image=image,
        dataset=dataset,
        training=training,
        evaluation=parsed.get("evaluation") or EvaluationConfig(),
        preflight=parsed.get("preflight") or PreflightConfig(),
        autoscaler=parsed.get("autoscaler") or AutoscalerConfig(),
        health_check=health,
    )


_RESERVATION_RE = re.compile(r"^cr-[0-9a-f]{8,17}$")


#: ``EFA_ONLY_MIN_VPC_CNI`` as EKS spells versions (``v1.18.5``).
EFA_ONLY_MIN_VPC_CNI_TEXT = "v" + ".".join(str(x) for x in EFA_ONLY_MIN_VPC_CNI)


def version_tuple(version: str) -> tuple[int, ...]:
    """``"v1.18.5-eksbuild.1"`` -> ``(1, 18, 5)`` (``(0,)`` when it does not start with a version)."""
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(x) for x in m.groups()) if m else (0,)


def _check_efa_and_capacity(
    gkey: str,
    g: NodeGroupConfig,
    facts: list[InstanceType],
    existing: Optional[ExistingVpcConfig],
    network: Optional[NetworkConfig],
    cluster: ClusterConfig,
    problems: list[str],
) -> None:
    """EFA, zone and capacity rules of one worker group (facts: the known types of the group)."""
    if not facts:
        return
    first = facts[0]
    if g.efa and not all(f.supports_efa for f in facts):
        without = ", ".join(f.name for f in facts if not f.supports_efa)
        with_efa = ", ".join(sorted(n for n, t in INSTANCE_TYPES.items() if t.supports_efa))
        problems.append(
            f"{_key(f'{gkey}.efa')}: {without} has no EFA; remove efa: true or use a type with EFA ({with_efa})"
        )
        return
    efa = g.efa_enabled(first)
    if efa and len({f.max_efa_interfaces for f in facts}) > 1:
        problems.append(
            f"{_key(f'{gkey}.instanceTypes')}: EFA groups need one interface count; "
            f"{', '.join(f'{f.name} ({f.max_efa_interfaces})' for f in facts)} differ, split them into groups"
        )
    if g.subnet_id is not None:
        if existing is None:
            problems.append(f"{_key(f'{gkey}.subnetId')}: only for existingVpc; with a new VPC set availabilityZone")
        elif g.subnet_id not in existing.private_subnet_ids:
            problems.append(
                f"{_key(f'{gkey}.subnetId')}: {g.subnet_id} is not one of {_key('existingVpc.privateSubnetIds')}"
            )
    if g.availability_zone is not None:
        if existing is not None:
            problems.append(f"{_key(f'{gkey}.availabilityZone')}: with existingVpc pin the group with subnetId instead")
        elif not _AZ_RE.match(g.availability_zone):
            problems.append(f"{_key(f'{gkey}.availabilityZone')}: {g.availability_zone!r} is not a zone name (us-east-1a)")
        elif network is not None and network.availability_zones and g.availability_zone not in network.availability_zones:
            problems.append(
                f"{_key(f'{gkey}.availabilityZone')}: {g.availability_zone} is not one of "
                f"{_key('network.availabilityZones')} {network.availability_zones}"
            )
    single_zone = g.availability_zone is not None or g.subnet_id is not None
    if efa and not single_zone:
        field = "subnetId" if existing is not None else "availabilityZone"
        problems.append(
            f"{_key(f'{gkey}.{field}')}: EFA groups run in one zone (with a cluster placement group); "
            f"set {field} (the zone where {first.name} capacity is)"
        )
    if g.efa_only_interfaces(first) and "vpc-cni" in cluster.addon_versions:
        if version_tuple(cluster.addon_versions["vpc-cni"]) < EFA_ONLY_MIN_VPC_CNI:
            problems.append(
                f"{_key('cluster.addonVersions.vpc-cni')}: {cluster.addon_versions['vpc-cni']} is older than "
                f"{EFA_ONLY_MIN_VPC_CNI_TEXT}, "
                f"which efa-only interfaces on {first.name} need; pin a newer version or remove the pin"
            )
    rid = g.capacity_reservation_id
    if g.capacity_type == "CAPACITY_BLOCK" and rid is None:
        problems.append(
            f"{_key(f'{gkey}.capacityReservationId')}: capacityType CAPACITY_BLOCK needs the Capacity Block's "
            "reservation id (cr-...)"
        )
    if rid is not None:
        if not _RESERVATION_RE.match(rid):
            problems.append(f"{_key(f'{gkey}.capacityReservationId')}: {rid!r} is not a reservation id (cr-0123...)")
        if g.capacity_type == "SPOT":
            problems.append(
                f"{_key(f'{gkey}.capacityType')}: SPOT cannot use a capacity reservation; use ON_DEMAND (an On-Demand "
                "Capacity Reservation) or CAPACITY_BLOCK"
            )
        if not single_zone:
            problems.append(
                f"{_key(f'{gkey}.availabilityZone')}: a capacity reservation lives in one zone; set the group's "
                "availabilityZone (or subnetId) to the reservation's zone"
            )
        if len(g.instance_types) > 1:
            problems.append(f"{_key(f'{gkey}.instanceTypes')}: a capacity reservation is for one instance type; list only it")


def choose_zones(cfg: StackConfig, available: Sequence[str]) -> list[str]:
    """The zones a new VPC uses, given the region's available zones: ``network.availabilityZones``
    when listed (each must be available), else the zones node groups are pinned to plus the first
    other available zones (sorted), ``availabilityZoneCount`` in all. The program (through the
    ``aws.getAvailabilityZones`` invoke) and preflight (through boto3) both call this.

    Raises :class:`ConfigError` naming the key when the region cannot satisfy the configuration.
    """
    assert cfg.network is not None, "choose_zones is for a new VPC (network)"
    avail = sorted(available)
    pinned = {g: ng.availability_zone for g, ng in cfg.node_groups.items() if ng.availability_zone}
    bad = [
        f"{_key(f'nodeGroups.{g}.availabilityZone')}: {az} is not available in this region; choose from "
        f"{', '.join(avail)}"
        for g, az in pinned.items()
        if az not in avail
    ]
    if bad:
        raise ConfigError(bad)
    if cfg.network.availability_zones:
        missing = [z for z in cfg.network.availability_zones if z not in avail]
        if missing:
            raise ConfigError(
                [
                    f"{_key('network.availabilityZones')}: {', '.join(missing)} not available in this region; "
                    f"choose from {', '.join(avail)}"
                ]
            )
        return list(cfg.network.availability_zones)
    count = cfg.network.availability_zone_count
    if len(avail) < count:
        raise ConfigError(
            [
                f"{_key('network.availabilityZoneCount')}: the region has {len(avail)} zones "
                f"({', '.join(avail)}), asked for {count}; lower it"
            ]
        )
    chosen = sorted(set(pinned.values()))
    for az in avail:
        if len(chosen) >= count:
            break
        if az not in chosen:
            chosen.append(az)
    return sorted(chosen)


def _check_sizes(key: str, lo: int, desired: int, hi: int, problems: list[str]) -> None:
    if lo > hi:
        problems.append(f"{_key(f'{key}.minSize')} ({lo}) > {_key(f'{key}.maxSize')} ({hi}); set minSize <= maxSize")
    elif not lo <= desired <= hi:
        problems.append(
            f"{_key(f'{key}.desiredSize')} ({desired}) is outside [minSize, maxSize] = [{lo}, {hi}]; "
            "choose a desiredSize in that range"
        )

