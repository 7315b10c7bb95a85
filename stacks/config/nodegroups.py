"""Node group sections: ``systemNodeGroup`` and the worker groups of ``nodeGroups``."""

from typing import Annotated, Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.catalog import DEFAULT_SPOT_DISCOUNT, MAX_SPOT_DISCOUNT, Catalog
from components.catalog.operations import NODE_REPAIR_PERCENT_RANGE
from components.nodeplan import (
    DEFAULT_CAPACITY_TYPE,
    DEFAULT_DISK_SIZE_GIB,
    SYSTEM_DISK_SIZE_GIB,
    CapacityType,
    efa_default,
)
from components.scheduling import (
    EKS_LABEL_KEY_MAX,
    GPU_TAINT,
    KUBELET_LABELS,
    RESERVED_LABEL_PREFIXES,
    TaintEffect,
    kubelet_refuses_label,
)
from stacks.config.base import (
    AZ_HINT,
    AZ_RE,
    ENTRY_NAME_MAX,
    LABEL_KEY_RULE,
    LABEL_VALUE_RULE,
    OBJECT_NOT_NULL,
    RESERVATION_RE,
    SUBNET_RE,
    AmiRelease,
    Model,
    Number,
    label_key_ok,
    label_value_ok,
    reference,
)
from stacks.config.errors import check

#: How a group's nodes are replaced when they must roll (a new AMI release, a Kubernetes minor, a launch template
#: change); listed once.
UpdateStrategy = Literal["rolling", "whenIdle"]


#: Worker group names become Kubernetes label values and parts of AWS names.
GROUP_NAME_MAX = ENTRY_NAME_MAX["nodeGroups"]


def size_problems(lo: int, desired: int, hi: int) -> list[tuple[str, str]]:
    """minSize <= desiredSize <= maxSize."""
    if lo > hi:
        return [("minSize", f"{lo} > @{{maxSize}} ({hi}); set minSize <= maxSize")]
    if not lo <= desired <= hi:
        return [
            (
                "desiredSize",
                f"{desired} is outside [minSize, maxSize] = [{lo}, {hi}]; choose a desiredSize in that range",
            )
        ]
    return []


class TaintConfig(Model):
    """A Kubernetes taint on a node group (``effect`` uses Kubernetes spelling)."""

    key: str
    """The taint's key, a Kubernetes label key (the GPU taint is added to GPU groups automatically)."""
    value: str = ""
    """The taint's value, a Kubernetes label value."""
    effect: TaintEffect
    """What the taint does to pods that do not tolerate it."""

    @model_validator(mode="after")
    def _taint(self) -> "TaintConfig":
        problems = []
        if not label_key_ok(self.key):
            problems.append(("key", f"{self.key!r} is not a valid taint key; {LABEL_KEY_RULE}"))
        elif len(self.key) > EKS_LABEL_KEY_MAX:  # (the provider's taint.key: StringLenBetween(1, 63))
            problems.append(
                (
                    "key",
                    f"{self.key!r} has {len(self.key)} characters, and EKS takes taint keys of at most "
                    f"{EKS_LABEL_KEY_MAX}; shorten it",
                )
            )
        if self.value and not label_value_ok(self.value):
            problems.append(("value", f"{self.value!r} is not a valid taint value; {LABEL_VALUE_RULE}"))
        if self.key == GPU_TAINT["key"]:
            problems.append(("", f"the {GPU_TAINT['key']} taint is added to GPU groups automatically; remove it"))
        check(problems)
        return self


_PERCENT_LO, _PERCENT_HI = NODE_REPAIR_PERCENT_RANGE


class NodeRepairConfig(Model):
    """EKS node auto repair of a managed node group (key ``nodeGroups.<name>.nodeRepair``): replace or reboot a node
    whose health condition stays bad (https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html). On by
    default on GPU groups (``enabled: false`` turns it off), EKS's default (off) on CPU groups unless set (``enabled``
    then defaults to true). A GPU group's repair takes no action on the agent's ``DCGMError`` (its DCGM host engine
    lost: with the metrics on, a GPU node runs two engines;
    ``components.catalog.operations.NODE_REPAIR_GPU_OVERRIDES``). A threshold is a count or a percentage, not both
    (EKS refuses both)."""

    enabled: bool = True
    """Repair the group's nodes (true once nodeRepair is set)."""
    max_unhealthy_nodes: Optional[int] = Field(default=None, ge=1)
    """Repair stops while more nodes than this are unhealthy (``maxUnhealthyNodeThresholdCount``)."""
    max_unhealthy_percent: Optional[int] = Field(default=None, ge=max(1, _PERCENT_LO), le=_PERCENT_HI)
    """... or more than this percentage (``maxUnhealthyNodeThresholdPercentage``)."""
    max_parallel_nodes: Optional[int] = Field(default=None, ge=1)
    """At most this many nodes are repaired at once (``maxParallelNodesRepairedCount``)."""
    max_parallel_percent: Optional[int] = Field(default=None, ge=max(1, _PERCENT_LO), le=_PERCENT_HI)
    """... or this percentage of the unhealthy nodes (``maxParallelNodesRepairedPercentage``)."""

    @model_validator(mode="after")
    def _repair(self) -> "NodeRepairConfig":
        problems = []
        for count, percent in (
            ("maxUnhealthyNodes", "maxUnhealthyPercent"),
            ("maxParallelNodes", "maxParallelPercent"),
        ):
            c, p = (getattr(self, f) for f in (_snake(count), _snake(percent)))
            if c is not None and p is not None:
                problems.append(
                    (
                        percent,
                        f"set together with @{{{count}}}; EKS takes a count or a percentage, not both: remove one",
                    )
                )
        if not self.enabled:
            given = [
                k
                for k in ("maxUnhealthyNodes", "maxUnhealthyPercent", "maxParallelNodes", "maxParallelPercent")
                if getattr(self, _snake(k)) is not None
            ]
            if given:
                problems.append(
                    (given[0], "tunes node repair, which enabled: false turns off; remove it, or set enabled: true")
                )
        check(problems)
        return self


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


class NodeGroupConfig(Model):
    """A worker node group (key ``nodeGroups.<name>``)."""

    instance_types: list[str] = Field(min_length=1)
    """EC2 instance types known to the catalog or described in instanceFacts; several only with SPOT, all with the
    same GPU count."""
    min_size: int = Field(ge=0)
    """The fewest nodes (min <= desired <= max); 0 lets the autoscaler scale the group to zero."""
    desired_size: int = Field(ge=0)
    """The nodes at creation (the autoscaler then decides)."""
    max_size: int = Field(ge=1)
    """The most nodes; EC2 vCPU quotas must cover it (preflight checks) and a job's nodes are at most this."""
    capacity_type: CapacityType = DEFAULT_CAPACITY_TYPE
    """How the nodes are bought: On-Demand (optionally in a capacity reservation), Spot, or a Capacity Block (the
    group has no nodes until the block starts; EKS scales it to 0 before the block ends)."""
    capacity_reservation_id: Optional[str] = None
    """The On-Demand Capacity Reservation (with ON_DEMAND) or the Capacity Block (with CAPACITY_BLOCK), cr-...;
    needs availabilityZone set to the reservation's zone."""
    efa: Optional[bool] = None
    """Attach EFA interfaces to the nodes; default on for types with EFA in ON_DEMAND and CAPACITY_BLOCK groups, off
    for SPOT groups (spread over the zones; set true with availabilityZone to have it) and for types without EFA,
    where true is an error."""
    topology: Optional[bool] = None
    """Topology-aware placement: Kueue places each job's pods on nodes that share the lowest EC2 network layer they fit
    in (the ``topology.k8s.aws/network-node-layer-N`` labels EKS gives the nodes of p3dn, p4d, p4de, p5, p5e, p5en,
    p6-b200 and g6e.48xlarge, in the regions that describe instance topology). Default on for those types in those
    regions, whether the group's size is fixed (minSize = maxSize) or the autoscaler scales it: there Kueue asks the
    cluster autoscaler for a job's nodes in a ProvisioningRequest before placing it (the pinned Kueue, 0.19.1, places
    jobs of any size up to maxSize that way). True on other types or in other regions is an error. false: Kueue places
    the pods on any of the group's nodes (a flavor's topology cannot be removed once it exists: see "Changes Kueue
    refuses" in docs/how-to/node-images.md)."""
    availability_zone: Optional[str] = None
    """Pin the group to one zone, by name (us-east-1a) or zone ID (use1-az4, the same physical zone in every account);
    required for EFA groups with a new VPC."""
    subnet_id: Optional[str] = None
    """With existingVpc: pin the group to one of its privateSubnetIds."""
    disk_size_gib: int = Field(default=DEFAULT_DISK_SIZE_GIB, ge=20, le=16384)
    """The nodes' root volume, in GiB."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Kubernetes labels on the nodes: keys of at most 63 characters and values of 1-63, as EKS takes them. Reserved
    prefixes are refused, and the kubernetes.io and k8s.io namespaces the kubelet refuses: node.kubernetes.io/ is
    allowed."""
    taints: list[TaintConfig] = Field(default_factory=list)
    """Kubernetes taints on the nodes."""
    spot_discount: Optional[Number] = Field(
        default=None,
        json_schema_extra=reference(between=(0, MAX_SPOT_DISCOUNT.fraction), unset=DEFAULT_SPOT_DISCOUNT.fraction),
    )
    """SPOT groups only: the share of the On-Demand price the cost estimate takes off, a fraction (0.6 for 60% off);
    unset, an assumption within AWS's example Spot prices; set it from the Spot Instance Advisor,
    https://aws.amazon.com/ec2/spot/instance-advisor/ (preflight reports the current Spot price)."""
    node_repair: Annotated[Optional[NodeRepairConfig], OBJECT_NOT_NULL] = None
    """EKS node auto repair: on for GPU groups unless ``enabled: false`` (no action on the agent's ``DCGMError``, a lost
    DCGM host engine), off for CPU groups unless set."""
    ami_release: AmiRelease = None
    """The EKS AMI release the group's nodes run: a tag of components/catalog/amis.py (v20260714) or a release version
    of the cluster's Kubernetes minor (1.36.2-20260714); default cluster.amiRelease. Changing it rolls the nodes; a
    change of the group's launch template must raise it in the same update."""
    update_strategy: UpdateStrategy = "rolling"
    """When the nodes must roll (a new AMI release or Kubernetes minor): rolling replaces one node at a time (EKS
    launches its replacement first, or after it goes on a Capacity Block, a reservation or an EFA group's placement
    group: updateConfig.updateStrategy MINIMAL), each of a running job's pods stopped as a stop promises (SIGTERM,
    stopGracePeriodSeconds, checkpoint, resume on the nodes that remain or come back), one pod of a job at a time (a
    PodDisruptionBudget; an elastic job may shrink to its minNodes); whenIdle keeps every pod of the group's running
    jobs (a PodDisruptionBudget of all of them): EKS cannot drain their nodes, fails the update after 15 minutes
    (PodEvictionFailure) and pulumi up stops there; once the jobs are done, run pulumi up --refresh (the provider may
    have recorded the update as made: without the refresh it may not be sent again)."""

    @property
    def price_discount(self) -> float:
        """The share of the On-Demand price the cost estimate takes off: ``spotDiscount`` (or the catalog's
        assumption) for SPOT groups, 0 otherwise."""
        if self.capacity_type != "SPOT":
            return 0.0
        return self.spot_discount if self.spot_discount is not None else DEFAULT_SPOT_DISCOUNT.fraction

    @field_validator("spot_discount")
    @classmethod
    def _discount(cls, v: Optional[float]) -> Optional[float]:
        if v is None or 0 <= v <= MAX_SPOT_DISCOUNT.fraction:
            return v
        if 1 <= v <= 100 * MAX_SPOT_DISCOUNT.fraction:
            raise ValueError(
                f"{v:g} is a fraction of the On-Demand price, from 0 to {MAX_SPOT_DISCOUNT.fraction:g}; did you write "
                f"a percentage? {v:g}% is {v / 100:g}"
            )
        raise ValueError(
            f"{v:g} is not a discount AWS gives: a fraction of the On-Demand price from 0 to "
            f"{MAX_SPOT_DISCOUNT.fraction:g} (Spot is at most 90% off)"
        )

    def uses_efa(self, catalog: Catalog) -> bool:
        """Whether the group is EFA-enabled: ``efa`` when set, else the default for its first type and capacity
        (on for types with EFA, off for SPOT groups)."""
        if self.efa is not None:
            return self.efa
        first = catalog.get(self.instance_types[0])
        return first is not None and efa_default(first, self.capacity_type)

    @property
    def single_zone(self) -> bool:
        """The group is pinned to one zone (by zone name or by subnet)."""
        return self.availability_zone is not None or self.subnet_id is not None

    @field_validator("taints")
    @classmethod
    def _unique_taints(cls, v: list[TaintConfig]) -> list[TaintConfig]:
        """Kubernetes refuses a node whose taints repeat a key and effect pair (``validateNodeTaints`` in
        kubernetes/pkg/apis/core/validation/validation.go: "taints must be unique by key and effect pair")."""
        first: dict[tuple[str, str], int] = {}
        problems = []
        for i, t in enumerate(v):
            j = first.setdefault((t.key, t.effect), i)
            if j != i:
                problems.append(
                    (
                        f"[{i}]",
                        f"repeats the key {t.key!r} and effect {t.effect} of taints[{j}]; Kubernetes takes one taint "
                        "per key and effect: keep one, or give this one another key or effect",
                    )
                )
        check(problems)
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        problems = []
        for k, val in v.items():
            if not label_key_ok(k):
                problems.append(("", f"{k!r} is not a valid Kubernetes label key; {LABEL_KEY_RULE}"))
            if not label_value_ok(val):
                problems.append((k, f"{val!r} is not a valid Kubernetes label value; {LABEL_VALUE_RULE}"))
            elif not val:  # (https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateLabelsPayload.html)
                problems.append((k, "is empty, and EKS takes node group label values of 1-63 characters; give a value"))
            if len(k) > EKS_LABEL_KEY_MAX:
                problems.append(
                    (
                        "",
                        f"{k!r} has {len(k)} characters, and EKS takes node group label keys of at most "
                        f"{EKS_LABEL_KEY_MAX}, prefix included; shorten it",
                    )
                )
            if k in KUBELET_LABELS:
                problems.append(("", f"{k!r} is a label the kubelet sets on every node itself; choose your own key"))
            elif k.startswith(RESERVED_LABEL_PREFIXES):
                problems.append(
                    ("", f"{k!r} uses a reserved prefix ({', '.join(RESERVED_LABEL_PREFIXES)}); choose your own prefix")
                )
            elif kubelet_refuses_label(k):
                problems.append(
                    (
                        "",
                        f"{k!r} is in the kubernetes.io or k8s.io namespace, whose labels the kubelet refuses to start "
                        "with (but node.kubernetes.io/ and kubelet.kubernetes.io/ ones): its nodes would never join. "
                        "Use node.kubernetes.io/<name> or a prefix of your own",
                    )
                )
        check(problems)
        return v

    @model_validator(mode="after")
    def _group(self) -> "NodeGroupConfig":
        problems = size_problems(self.min_size, self.desired_size, self.max_size)
        types = self.instance_types
        twice = sorted({t for t in types if types.count(t) > 1})
        if twice:
            problems.append(("instanceTypes", f"{', '.join(twice)} listed twice; list each type once"))
        elif self.capacity_type == "ON_DEMAND" and len(types) > 1:
            problems.append(
                (
                    "instanceTypes",
                    "an On-Demand group takes one type here: EKS would launch the first while it has capacity, then "
                    "the next, and the group's quota and price are planned for one (several types are for Spot's "
                    "capacity pools); "
                    "list one type or set capacityType: SPOT",
                )
            )
        if self.availability_zone is not None and not AZ_RE.match(self.availability_zone):
            problems.append(("availabilityZone", f"{self.availability_zone!r} {AZ_HINT}"))
        if self.subnet_id is not None and not SUBNET_RE.match(self.subnet_id):
            problems.append(("subnetId", f"{self.subnet_id!r} is not a subnet id (subnet-0123abcd...)"))
        if self.spot_discount is not None and self.capacity_type != "SPOT":
            problems.append(
                (
                    "spotDiscount",
                    f"only for capacityType SPOT (this group is {self.capacity_type}, priced at its list "
                    "price); remove it, or set capacityType: SPOT",
                )
            )
        rid = self.capacity_reservation_id
        if self.capacity_type == "CAPACITY_BLOCK" and rid is None:
            problems.append(
                (
                    "capacityReservationId",
                    "capacityType CAPACITY_BLOCK needs the Capacity Block's reservation id (cr-...)",
                )
            )
        if rid is not None:
            if not RESERVATION_RE.match(rid):
                problems.append(("capacityReservationId", f"{rid!r} is not a reservation id (cr-0123...)"))
            if self.capacity_type == "SPOT":
                problems.append(
                    (
                        "capacityType",
                        "SPOT cannot use a capacity reservation; use ON_DEMAND (an On-Demand Capacity "
                        "Reservation) or CAPACITY_BLOCK",
                    )
                )
            if not self.single_zone:
                problems.append(
                    (
                        "availabilityZone",
                        "a capacity reservation lives in one zone; set the group's availabilityZone "
                        "(or subnetId) to the reservation's zone",
                    )
                )
            if len(types) > 1:
                problems.append(("instanceTypes", "a capacity reservation is for one instance type; list only it"))
        check(problems)
        return self


class SystemNodeGroupConfig(Model):
    """The small on-demand CPU node group for add-ons and controllers (key ``systemNodeGroup``)."""

    instance_type: str = "m5.large"
    """A CPU instance type from the catalog."""
    min_size: int = Field(default=2, ge=1)
    """The fewest nodes (min <= desired <= max)."""
    desired_size: int = Field(default=2, ge=1)
    """The nodes at creation."""
    max_size: int = Field(default=3, ge=1)
    """The most nodes."""
    disk_size_gib: int = Field(default=SYSTEM_DISK_SIZE_GIB, ge=20, le=16384)
    """The nodes' root volume, in GiB."""
    ami_release: AmiRelease = None
    """The EKS AMI release the system nodes run (as nodeGroups.<name>.amiRelease); default cluster.amiRelease."""
    update_strategy: UpdateStrategy = "rolling"
    """When the system nodes must roll: as nodeGroups.<name>.updateStrategy, for the jobs on the system group."""

    @model_validator(mode="after")
    def _sizes(self) -> "SystemNodeGroupConfig":
        check(size_problems(self.min_size, self.desired_size, self.max_size))
        return self
