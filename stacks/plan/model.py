"""The plan's data: a :class:`Plan` and its parts (node groups, jobs, storage, datasets, operations), every decision
:func:`stacks.plan.build_plan` derived from a stack's configuration. The program, the tools and the kinds read them."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from components.catalog import InstanceType
from components.catalog.fsx import FSX_CLIENT_HOST, HostRequirement
from components.catalog.gpus import peak_flops_per_device
from components.catalog.operations import OBSERVABILITY_ADDON
from components.catalog.platform import EKS_ADDONS, STORAGE_ADDON, STORAGE_ADDONS, NodeUpdateStrategy, NoSurge
from components.conventions import SHARED_MOUNT
from components.nodeplan import (
    EfaProfile,
    NodeProfile,
    NodeRepairSpec,
    node_update_strategy,
    surge_limit,
    system_job_pod,
)
from components.scheduling import SYSTEM_ROLE, Toleration
from components.workloads import WorkerPlacement
from components.workloads.spec import PEAK_FLOPS_VARIABLE, worker_placement
from stacks.config import TOOLBOX_IMAGE, DatasetConfig, FsxConfig, HealthCheckConfig, JobConfig, StackConfig
from stacks.config.base import ZONE_ID_RE
from stacks.plan.images import ImagePlan
from stacks.plan.nodes import AmiPlan, min_available
from stacks.plan.queues import AdmissionPlan

#: An enforced health check defaults to this share of the published two-node bus bandwidth.
HEALTH_THRESHOLD_SHARE = 0.8
#: Zone label every node carries (Kubernetes well-known label).
ZONE_LABEL = "topology.kubernetes.io/zone"
#: The zone-ID label the AWS cloud provider puts on nodes (https://kubernetes.io/docs/reference/labels-annotations-taints/).
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"


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
    price_discount: float = 0.0
    """The share of the On-Demand price the cost estimate takes off (SPOT groups: ``spotDiscount`` or the catalog's
    assumption; 0 otherwise)."""
    spot_discount_set: bool = False
    """The discount comes from the group's ``spotDiscount`` (else from the catalog's assumption)."""
    repair: Optional[NodeRepairSpec] = None
    """EKS node auto repair (``None``: not configured, EKS's default: off): as ``nodeRepair`` sets it (``enabled``
    defaults to true there), else on for a GPU group (with the DCGM override, :func:`repair_spec`)."""
    ami: AmiPlan = AmiPlan(release_version="", pinned=False)
    """The EKS AMI release its nodes run (:func:`stacks.plan.nodes.ami_plan`)."""
    update_strategy: str = "rolling"
    """How its nodes roll: ``rolling`` or ``whenIdle`` (``nodeGroups.<g>.updateStrategy``)."""

    @property
    def instance_types(self) -> list[str]:
        """EC2 names of the group's types."""
        return [t.name for t in self.types]

    @property
    def efa(self) -> Optional[EfaProfile]:
        """The group's EFA profile, ``None`` without EFA."""
        return self.profile.efa

    @property
    def node_update(self) -> NodeUpdateStrategy:
        """How EKS rolls the group's nodes (``updateConfig.updateStrategy``, registered by the node group from the
        same capacity): ``MINIMAL`` where :attr:`no_surge` says why, else ``DEFAULT``."""
        return node_update_strategy(self.capacity_type, self.capacity_reservation_id, self.efa is not None)

    @property
    def no_surge(self) -> Optional[NoSurge]:
        """What leaves the group no room for nodes beyond its size while it rolls (``None``: nothing)."""
        return surge_limit(self.capacity_type, self.capacity_reservation_id, self.efa is not None)

    @property
    def single_zone(self) -> bool:
        """Pinned to one zone (by name or by subnet)."""
        return self.zone is not None or self.subnet_id is not None

    def placement(self) -> WorkerPlacement:
        """Where a job's pods go on this group (one per node) and what each requests: the whole node on a
        worker group, a quarter of one on the system group (which keeps running the add-ons)."""
        pod = system_job_pod(self.profile.pod) if self.name == SYSTEM_ROLE else self.profile.pod
        zone = {ZONE_ID_LABEL if ZONE_ID_RE.match(self.zone) else ZONE_LABEL: self.zone} if self.zone else {}
        placement = worker_placement(self.profile, pod, zone)
        peak = peak_flops_per_device(t.gpu_model for t in self.types) if pod.gpus else None
        if peak:
            # the bundled trainer's model FLOPs utilization (training/train.py); a job's own env overrides it
            placement["env"] = {**placement["env"], PEAK_FLOPS_VARIABLE: f"{peak:g}"}
        return placement


@dataclass(frozen=True, kw_only=True)
class IdleAlarmPlan:
    """The alarm on one GPU group whose GPUs all stay near zero utilization."""

    group: str
    instance_types: tuple[str, ...]
    """The group's types: the alarm reads the GPUs of nodes of these types (Container Insights has no group
    dimension; its per-GPU series carry InstanceType)."""
    minutes: int
    utilization_percent: float
    max_nodes: int
    """The group's maximum size: at most this many nodes sit idle (the plan report prices them)."""


@dataclass(frozen=True, kw_only=True)
class OperationsPlan:
    """Metrics, dashboard and alarms, decided once from ``operations`` and the groups."""

    metrics: bool = False
    """The Amazon CloudWatch Observability add-on runs (Container Insights with GPU and EFA metrics)."""
    agent_tolerations: tuple[Toleration, ...] = ()
    """What the add-on's DaemonSets tolerate: exactly the taints the plan puts on the groups (every group's, the
    system group's included, each once), so the agent reaches every node and no other taint."""
    application_signals: bool = False
    """The add-on keeps Application Signals (``operations.applicationSignals``)."""
    dashboard: bool = False
    idle_alarms: tuple[IdleAlarmPlan, ...] = ()
    alarm_email: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class StoragePlan:
    """The shared file system: EFS (multi-zone, a mount target per private subnet) or FSx for Lustre in
    one zone (new VPC) or subnet (existing VPC): that of the pinned groups whose jobs mount it."""

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
    """Worker groups pinned where the file system is (the groups of the jobs first)."""
    efa_client_groups: tuple[str, ...] = ()
    """Those of them that use EFA: their EFA security groups reach an EFA-enabled file system."""
    mount_groups: tuple[str, ...] = ()
    """FSx: the groups whose pods mount the file system: the system group (the volume's one-shot Job, staging,
    TensorBoard, MPI launchers) and every worker group that runs a job (every job mounts the claim)."""

    @property
    def is_fsx(self) -> bool:
        """FSx for Lustre (else EFS)."""
        return self.backend == "fsx"


@dataclass(frozen=True, kw_only=True)
class DatasetPlan:
    """One dataset: staged onto the shared volume by a Job, or imported from S3 by the FSx file system's
    data repository (an S3 prefix under the linked path: nothing to stage, readable once the data is ready)."""

    name: str
    config: DatasetConfig
    path: str
    """Its folder relative to the shared mount (``datasets/cifar10``)."""
    imported: bool
    """Imported by the FSx data repository (no staging Job)."""

    @property
    def data_dir(self) -> str:
        """Its folder inside the pods."""
        return f"{SHARED_MOUNT}/{self.path}"


@dataclass(frozen=True, kw_only=True)
class HealthCheckPlan:
    """The all-reduce check before a job."""

    config: HealthCheckConfig
    threshold_gbytes_per_s: Optional[float]
    """Fail below this bus bandwidth (GB/s); ``None``: report only."""
    message_bytes: Optional[int]
    """Largest message; ``None``: the benchmark's default."""


@dataclass(frozen=True, kw_only=True)
class JobPlan:
    """One job as the program runs it."""

    name: str
    config: JobConfig
    group: NodeGroupPlan
    nodes: int
    min_nodes: int
    max_nodes: int
    procs_per_node: int
    image: ImagePlan
    """The job's image, in the build for its group's GPUs (:func:`stacks.plan.images.image_for`)."""
    toolbox: ImagePlan
    """The bundled image in the build for the job's group: its health check and its pods' helper containers."""
    dataset: Optional[str]
    data_dir: Optional[str]
    """Where the dataset is inside the pods."""
    after: tuple[str, ...]
    run_id: str
    """Stable id of the run: the job, its image, code and arguments, not its size (resizing resumes it)."""
    run_recipe: Mapping[str, Any] = field(hash=False)
    """What :attr:`run_id` hashes (:func:`stacks.plan.run_recipe`)."""
    output_dir: str
    """The job's output folder inside the pods."""
    tensorboard_dir: Optional[str]
    placement: WorkerPlacement
    read_only_root_filesystem: bool
    """The job's containers run with a read-only root file system (``/tmp`` writable)."""
    health_check: Optional[HealthCheckPlan] = None
    code_folder: Optional[Path] = None
    """The folder of the project its ``code`` names (the program uploads it; ``None``: no code, or ``s3://``)."""
    code_hash: Optional[str] = None
    """The content hash of :attr:`code_folder` (its object's key; part of the run id: new code, a new run)."""

    @property
    def kind(self) -> str:
        """A registered kind's name (:data:`stacks.kinds.KINDS`)."""
        return self.config.kind

    @property
    def min_available(self) -> int:
        """Of the job's pods on its group, how many its PodDisruptionBudget keeps through a voluntary disruption (a
        node drained by an update, cordon and drain by hand): all but one when the group rolls (an elastic job: at most
        its ``minNodes``), all of them when it waits for its jobs (:func:`stacks.plan.nodes.min_available`)."""
        return min_available(self.group.update_strategy, self.nodes, self.min_nodes)


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
    images: Mapping[str, ImagePlan] = field(default_factory=dict)
    datasets: Mapping[str, DatasetPlan] = field(default_factory=dict)
    """The datasets jobs read, by name."""
    jobs: Mapping[str, JobPlan] = field(default_factory=dict)
    """Jobs in an order where every job comes after the jobs it waits for."""
    operations: OperationsPlan = OperationsPlan()
    """Metrics, dashboard and alarms."""
    admission: Optional[AdmissionPlan] = None
    """Kueue's queues, quotas and priorities (:mod:`stacks.plan.admission`); ``None`` without jobs and teams."""

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
    def addons(self) -> tuple[str, ...]:
        """The EKS add-ons the stack installs, in :data:`EKS_ADDONS` order: the cluster's own, its file system's CSI
        driver, and Container Insights' with ``operations.metrics``; none in a jobs-only stack."""
        if self.config.jobs_only:
            return ()
        csi = STORAGE_ADDON[self.storage.backend]
        return tuple(
            a
            for a in EKS_ADDONS
            if (a not in STORAGE_ADDONS or a == csi) and (a != OBSERVABILITY_ADDON or self.operations.metrics)
        )

    @property
    def used_images(self) -> list[ImagePlan]:
        """The images the stack runs: the toolbox (staging, waits, checks) and every job's image. A jobs-only stack
        without jobs runs none: the cluster's stack runs the environment's."""
        jobs_only = self.config.jobs_only
        toolbox = [] if jobs_only and not self.jobs else [self.images[TOOLBOX_IMAGE]]
        used = [*toolbox, *(i for j in self.jobs.values() for i in (j.image, j.toolbox))]
        return list({i.variant: i for i in used}.values())

    @property
    def experiments(self) -> list[JobPlan]:
        """The benchmark's experiments (jobs of :attr:`jobs`), in config order; empty without a benchmark."""
        bench = self.config.benchmark
        return [self.jobs[n] for n in bench.experiments] if bench is not None else []

    def host_requirements(self, group: str) -> tuple[HostRequirement, ...]:
        """What the nodes of ``group`` must have on the host for the stack's features (catalog facts with their
        sources), in the order their bootstrap provides them: the Lustre client where pods mount FSx. The node
        groups' launch templates derive their user data from this, and only from this."""
        if self.storage.is_fsx and group in self.storage.mount_groups:
            return (FSX_CLIENT_HOST,)
        return ()

    def group(self, name: str) -> NodeGroupPlan:
        """A worker group, or the system group (``system``)."""
        return self.system if name == SYSTEM_ROLE else self.groups[name]


def same_cluster(old: StackConfig, new: StackConfig) -> bool:
    """Whether an update from ``old`` to ``new`` changes one cluster in place. It does not when either is a jobs-only
    stack (one side makes no cluster of its own), or when ``clusterName`` changed (every resource is made again)."""
    return not (old.jobs_only or new.jobs_only) and old.cluster_name == new.cluster_name
