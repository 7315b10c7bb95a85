"""``TrainingNodeGroup``: an EKS managed node group with a hardened launch template.

Every node requires IMDSv2, has an encrypted gp3 root volume, and gets no public IP or SSH key. A GPU group gets the
AL2023 NVIDIA AMI type, the ``nvidia.com/gpu=true:NoSchedule`` taint and the ``eks-training/accelerator=nvidia``
label, which the NVIDIA device plugin selects. An EFA group (``efa=True``) gets an interface per network card, a
security group open to itself, a ``cluster`` placement group, the ``eks-training/efa=true`` label and one subnet.
``host_setup`` (such as the Lustre client) becomes the launch template's user data.

Capacity is on-demand, spot, a capacity reservation or a Capacity Block, whose scheduled action
(:data:`CAPACITY_BLOCK_START_ACTION`) sizes the group at the block's start. ``autoscaler_tags`` lets the cluster
autoscaler scale from zero. A roll uses :func:`components.nodeplan.node_update_strategy`, and ``pulumi up`` waits as
:func:`update_timeout_minutes` says. Labels, taints, AMI type, interfaces and tags come from :mod:`components.nodeplan`.

Why: docs/how-to/capacity.md ("EFA", "A Capacity Block", "Scale to zero"); docs/how-to/node-images.md, "How nodes
roll"; docs/explanation/storage.md, "The Lustre client on the nodes"."""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import INSTANCE_TYPES, InstanceType, accelerator_label_value
from components.catalog.fsx import HOST_REQUIREMENTS_BY_NAME
from components.catalog.operations import REPAIR_ACTIONS
from components.catalog.platform import NodeUpdateStrategy
from components.catalog.sources import SOURCES
from components.catalog.timings import PROVIDER_NODE_GROUP_WAIT
from components.naming import fit_prefix, name_limit, short_hash
from components.nodeplan import (
    CAPACITY_TYPES,
    DEFAULT_CAPACITY_TYPE,
    DEFAULT_DISK_SIZE_GIB,
    NodeRepairSpec,
    ami_type,
    autoscaler_template_tags,
    efa_profile,
    host_setup_user_data,
    launch_template_data,
    node_update_strategy,
    placement_group,
    roll_minutes,
)
from components.scheduling import TAINT_EFFECTS_EKS, NodeTaint, node_scheduling

#: Name of the Auto Scaling scheduled action that sizes a Capacity Block group when its block starts.
CAPACITY_BLOCK_START_ACTION = "eks-training-capacity-block-start"
#: The EKS guide for managed node groups with Capacity Blocks: the launch template carries InstanceMarketOptions
#: capacity-block, the reservation and InstanceType (else the create request is rejected), and "when upgrading managed
#: node groups with Capacity Blocks, make sure that the desired size of the node group is set to 0".
CAPACITY_BLOCK_GUIDE = SOURCES["eks-capacity-blocks-mng"].url
#: Auto Scaling refuses a scheduled action in the past: one created after the block started runs this much later.
SCHEDULE_MARGIN = timedelta(minutes=5)
#: Capacity Block states before the block is active (its instances cannot launch yet).
CAPACITY_BLOCK_PENDING_STATES = ("payment-pending", "scheduled")


#: :class:`NodeRepairSpec` keys -> the EKS ``nodeRepairConfig`` fields (pulumi-aws spelling).
_REPAIR_FIELDS = {
    "max_unhealthy_nodes": "max_unhealthy_node_threshold_count",
    "max_unhealthy_percent": "max_unhealthy_node_threshold_percentage",
    "max_parallel_nodes": "max_parallel_nodes_repaired_count",
    "max_parallel_percent": "max_parallel_nodes_repaired_percentage",
}


def node_repair_config(spec: "NodeRepairSpec | None") -> "aws.eks.NodeGroupNodeRepairConfigArgsDict | None":
    """The node group's ``node_repair_config`` (``None``: EKS's default, off). Raises on a count and a percentage of
    the same threshold, which EKS refuses."""
    if spec is None:
        return None
    for count, percent in (
        ("max_unhealthy_nodes", "max_unhealthy_percent"),
        ("max_parallel_nodes", "max_parallel_percent"),
    ):
        if count in spec and percent in spec:
            raise ValueError(f"node_repair: {count} and {percent} exclude each other")
    out: dict[str, object] = {"enabled": bool(spec["enabled"])}
    for ours, theirs in _REPAIR_FIELDS.items():
        if ours in spec:
            out[theirs] = int(spec[ours])  # type: ignore[literal-required]
    overrides = []
    for o in spec.get("overrides") or ():
        if o["action"] not in REPAIR_ACTIONS or int(o["wait_minutes"]) < 1:
            raise ValueError(
                f"node_repair: override {dict(o)} needs action in {', '.join(REPAIR_ACTIONS)} and wait_minutes >= 1"
            )
        overrides.append(
            {
                "node_monitoring_condition": o["condition"],
                "node_unhealthy_reason": o["reason"],
                "min_repair_wait_time_mins": int(o["wait_minutes"]),
                "repair_action": o["action"],
            }
        )
    if overrides:
        out["node_repair_config_overrides"] = overrides
    return out  # type: ignore[return-value]


class TrainingNodeGroupArgs(TypedDict):
    """Inputs of :class:`TrainingNodeGroup`."""

    cluster_name: pulumi.Input[str]
    """Name of the EKS cluster."""
    node_role_arn: pulumi.Input[str]
    """IAM role the nodes run as (must already carry the EKS worker policies)."""
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Private subnets the nodes are placed in."""
    instance_types: Sequence[str]
    """EC2 instance types; several only with SPOT capacity."""
    role: str
    """Value of the ``eks-training/role`` node label (e.g. ``system`` or the group's name)."""
    min_size: int
    """Minimum node count."""
    desired_size: int
    """Desired node count."""
    max_size: int
    """Maximum node count."""
    gpus_per_node: NotRequired[int]
    """NVIDIA GPUs per node; defaults to the catalog's value for the first instance type."""
    accelerator: NotRequired[str]
    """Value of the ``k8s.amazonaws.com/accelerator`` label of GPU nodes (cluster-autoscaler's GPU label);
    defaults to the catalog's GPU model of the first instance type, e.g. ``nvidia-h100``. Required for a GPU type
    the catalog lacks: the jobs' placement selects the value ``node_profile`` gives for your ``InstanceType``."""
    capacity_type: NotRequired[str]
    """``ON_DEMAND`` (default), ``SPOT`` or ``CAPACITY_BLOCK`` (needs ``capacity_reservation_id``)."""
    capacity_reservation_id: NotRequired[str]
    """An On-Demand Capacity Reservation (with ON_DEMAND) or a Capacity Block (with CAPACITY_BLOCK)."""
    efa: NotRequired[bool]
    """Wire EFA: interfaces per network card, self-referencing security group, placement group. Default False."""
    efa_interfaces: NotRequired[int]
    """EFA interfaces per node (one per network card); default the catalog's count for the first type."""
    cluster_security_group_id: NotRequired[pulumi.Input[str]]
    """The EKS cluster security group; required with ``efa`` (launch-template interfaces carry their own groups)."""
    vpc_id: NotRequired[pulumi.Input[str]]
    """VPC of the cluster; required with ``efa`` (for the EFA security group)."""
    autoscaler_tags: NotRequired[bool]
    """Tag the Auto Scaling group for cluster-autoscaler scale-from-zero. Default False."""
    ignore_desired_size_changes: NotRequired[bool]
    """Let an autoscaler own the desired size (Pulumi keeps the configured value only at creation). A later change
    of ``min_size`` or ``max_size`` sends the desired size Pulumi recorded with it, and EKS scales the group to it:
    give the size EKS holds as ``desired_size``, with this off, for that update (this project's program reads it)."""
    disk_size_gib: NotRequired[int]
    """Root volume size (gp3, encrypted). Default 100."""
    labels: NotRequired[dict[str, str]]
    """Extra Kubernetes node labels."""
    taints: NotRequired[Sequence[NodeTaint]]
    """Extra taints, Kubernetes spelling (the GPU taint is added automatically)."""
    node_labels: NotRequired[dict[str, str]]
    """Every label of the group's nodes when the caller has already decided them (the stack's plan passes its
    ``NodeProfile``'s, derived with the same :func:`components.scheduling.node_scheduling`); the group uses them as
    given. Without it they are derived here from ``role``, ``gpus_per_node``, ``efa``, ``accelerator`` and ``labels``.
    Only with ``node_taints``, not with ``labels``."""
    node_taints: NotRequired[Sequence[dict[str, str]]]
    """Every taint of the group's nodes (Kubernetes spelling, ``key``/``value``/``effect``) when the caller has already
    decided them, as ``node_labels``; without it: the GPU taint, then ``taints``. Only with ``node_labels``, not with
    ``taints``."""
    ami_type: NotRequired[str]
    """The EKS AMI type when the caller has already decided it (the plan's ``NodeProfile.ami_type``); without it:
    the AL2023 NVIDIA type for GPU groups, the AL2023 standard type otherwise."""
    node_repair: NotRequired[NodeRepairSpec]
    """EKS node auto repair; absent: EKS's default (off)."""
    kubernetes_version: NotRequired[str]
    """The nodes' Kubernetes minor: the control plane's, so the group follows the cluster (EKS moves a cluster up only
    while every managed node group runs its minor). Absent: the cluster's at creation, kept when the cluster moves."""
    release_version: NotRequired[str]
    """The EKS AMI release version the nodes run (``1.36.2-20260714``, of ``kubernetes_version``); changing it rolls
    the nodes. Absent: EKS's newest for the version at creation."""
    keep_release_version: NotRequired[bool]
    """Once created, keep the release the group runs whatever ``release_version`` says (a default that moves with
    this library then rolls no node); a Kubernetes version change takes EKS's newest release for the new version."""
    host_setup: NotRequired[Sequence[str]]
    """Names of the host-side facts the nodes must have (``components.catalog.fsx`` ``HOST_REQUIREMENTS``, e.g.
    ``fsx-lustre-client`` where pods mount FSx): the launch template's user data installs them before the kubelet
    starts. Default none (no user data)."""
    tags: NotRequired[dict[str, str]]
    """AWS tags for the node group, launch template, instances and volumes."""


def schedule_time(start: str, now: Optional[datetime] = None) -> str:
    """When the start action runs: the block's start (an RFC 3339 time), or :data:`SCHEDULE_MARGIN` from ``now`` when
    that has passed; in the form Auto Scaling takes (``YYYY-MM-DDThh:mm:ssZ``, UTC)."""
    at = datetime.fromisoformat(start.replace("Z", "+00:00"))
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    earliest = (now or datetime.now(timezone.utc)) + SCHEDULE_MARGIN
    return max(at, earliest).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _scheduling(
    name: str, args: TrainingNodeGroupArgs, gpus: int, efa: bool, facts: Optional[InstanceType]
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The group's node labels and taints: as the caller decided them (``node_labels``, ``node_taints``), else
    derived by :func:`components.scheduling.node_scheduling`."""
    for decided, extra in (("node_labels", "labels"), ("node_taints", "taints")):
        if decided in args and extra in args:
            raise ValueError(f"{name}: give either {decided} (all of them) or {extra} (extra ones), not both")
    if "node_labels" in args and "node_taints" in args:
        return dict(args["node_labels"]), [
            {"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]} for t in args["node_taints"]
        ]
    if "node_labels" in args or "node_taints" in args:
        raise ValueError(f"{name}: node_labels and node_taints are decided together: give both or neither")
    accelerator = args.get("accelerator") or accelerator_label_value(facts.gpu_model if facts else None)
    labels, taints = node_scheduling(args["role"], gpus, efa, args.get("labels"), args.get("taints"), accelerator)
    return labels, taints


def update_timeout_minutes(max_size: int, strategy: NodeUpdateStrategy) -> int:
    """How long ``pulumi up`` waits for a node group's update: every node rolled one at a time (``maxUnavailable``
    1) as ``strategy`` rolls them (:func:`components.nodeplan.roll_minutes`, which the upgrade plan reports too),
    never below the provider's own wait. A shorter wait would end while EKS goes on rolling, with the provider's
    state then ahead of the group's."""
    return max(int(PROVIDER_NODE_GROUP_WAIT.minutes), math.ceil(roll_minutes(max_size, strategy)))


@dataclass(frozen=True)
class _Shape:
    """What a group's arguments decide before any resource exists (validated: a bad argument fails here)."""

    instance_types: list[str]
    gpus: int
    efa: bool
    efa_count: int
    capacity_type: str
    reservation: Optional[str]
    tags: dict[str, str]
    labels: dict[str, str]
    taints: list[dict[str, str]]
    template: dict[str, Any]
    """The launch template's settings (:func:`components.nodeplan.launch_template_data`)."""
    update_strategy: NodeUpdateStrategy


def check_sizes(name: str, min_size: int, desired_size: int, max_size: int) -> None:
    """EKS's rule for a managed node group's scalingConfig (minSize <= desiredSize <= maxSize, maxSize >= 1,
    https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html), checked before the group
    registers: EKS would refuse it only once the cluster exists."""
    if not 0 <= min_size <= desired_size <= max_size or max_size < 1:
        raise ValueError(
            f"{name}: the sizes need 0 <= min_size ({min_size}) <= desired_size ({desired_size}) <= max_size "
            f"({max_size}), and max_size >= 1"
        )


def _shape(name: str, args: TrainingNodeGroupArgs) -> _Shape:
    instance_types = list(args["instance_types"])
    facts = INSTANCE_TYPES.get(instance_types[0])
    gpus = args.get("gpus_per_node", facts.gpus if facts else None)
    if gpus is None or (facts is None and gpus and "accelerator" not in args and "node_labels" not in args):
        raise ValueError(
            f"{name}: instance type {instance_types[0]!r} is not in the catalog; pass gpus_per_node and, for a GPU "
            "type, accelerator: node_profile(role, [its InstanceType], efa=...).accelerator, the label value the "
            "jobs' placement selects"
        )
    efa = bool(args.get("efa", False))
    efa_count = 0
    if efa:
        given = args.get("efa_interfaces")
        if given is None:
            if facts is None:
                raise ValueError(
                    f"{name}: efa=True needs efa_interfaces (type {instance_types[0]!r} is not in the catalog)"
                )
            given = efa_profile(facts).interfaces
        efa_count = int(given)
        if efa_count < 1:
            raise ValueError(f"{name}: efa=True needs efa_interfaces >= 1")
        if args.get("cluster_security_group_id") is None or args.get("vpc_id") is None:
            raise ValueError(f"{name}: efa=True needs cluster_security_group_id and vpc_id")
    capacity_type = args.get("capacity_type", DEFAULT_CAPACITY_TYPE)
    if capacity_type not in CAPACITY_TYPES:
        raise ValueError(f"{name}: capacity_type must be one of {', '.join(CAPACITY_TYPES)}, got {capacity_type!r}")
    reservation = args.get("capacity_reservation_id")
    if capacity_type == "CAPACITY_BLOCK" and not reservation:
        raise ValueError(f"{name}: CAPACITY_BLOCK needs capacity_reservation_id")
    if capacity_type == "SPOT" and reservation:
        raise ValueError(f"{name}: a capacity reservation cannot be used with SPOT")
    unknown = [n for n in args.get("host_setup") or () if n not in HOST_REQUIREMENTS_BY_NAME]
    if unknown:
        raise ValueError(f"{name}: unknown host setup {unknown}; known: {sorted(HOST_REQUIREMENTS_BY_NAME)}")
    labels, taints = _scheduling(name, args, gpus, efa, facts)
    tags = dict(args.get("tags") or {})
    template = launch_template_data(
        name,
        disk_size_gib=int(args.get("disk_size_gib", DEFAULT_DISK_SIZE_GIB)),
        tags=tags,
        efa_interfaces=efa_count,
        capacity_type=capacity_type,
        reservation=reservation,
        instance_type=instance_types[0],
        user_data=host_setup_user_data([HOST_REQUIREMENTS_BY_NAME[n] for n in args.get("host_setup") or ()]),
    )
    return _Shape(
        instance_types=instance_types,
        gpus=int(gpus),
        efa=efa,
        efa_count=efa_count,
        capacity_type=capacity_type,
        reservation=reservation,
        tags=tags,
        labels=labels,
        taints=taints,
        template=template,
        update_strategy=node_update_strategy(capacity_type, reservation, efa),
    )


class TrainingNodeGroup(pulumi.ComponentResource):
    """A launch template (IMDSv2, encrypted root volume) and an EKS managed node group."""

    node_group_name: pulumi.Output[str]
    """The EKS node group's name."""
    node_group_arn: pulumi.Output[str]
    """The EKS node group's ARN."""
    launch_template_id: pulumi.Output[str]
    """The launch template's id."""
    release_version: pulumi.Output[str]
    """The EKS AMI release version the nodes run, as EKS reports it (``1.36.2-20260714``): after a launch template
    change without a new release, EKS's newest for the group's Kubernetes version."""
    labels: pulumi.Output[dict[str, str]]
    """The Kubernetes labels every node of the group has, as an output (to export). A job's placement takes plain
    values: :func:`components.workloads.spec.worker_placement` of the group's
    :func:`components.nodeplan.node_profile`."""
    taints: pulumi.Output[list[dict[str, str]]]
    """The taints every node has, in Kubernetes spelling, as an output (to export); a pod tolerates them through its
    placement (:func:`components.workloads.spec.worker_placement`)."""
    gpus_per_node: pulumi.Output[int]
    """NVIDIA GPUs per node (0 for CPU groups)."""
    efa_interfaces: pulumi.Output[int]
    """EFA interfaces per node (0 when EFA is off)."""
    efa_security_group_id: pulumi.Output[str]
    """The EFA self-referencing security group ("" when EFA is off)."""
    placement_group_name: pulumi.Output[str]
    """The cluster placement group ("" when there is none)."""
    capacity_block_start: pulumi.Output[str]
    """When a scheduled Capacity Block starts and the group takes its sizes ("" otherwise)."""
    waits_for_capacity: bool
    """The group's Capacity Block is not active yet: it has no nodes until the block starts (known when the component
    is constructed, so a Python program can leave the jobs that need the nodes for later)."""

    @checks_args
    def __init__(self, name: str, args: TrainingNodeGroupArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        check_sizes(name, args["min_size"], args["desired_size"], args["max_size"])
        shape = _shape(name, args)  # its refusals too come before anything registers
        super().__init__("eks-training:index:TrainingNodeGroup", name, None, opts)
        efa_sg, placement, interface_sgs = self._efa_network(name, args, shape)
        launch_template = self._launch_template(name, shape, interface_sgs, placement)
        block_start, empty = self._capacity_block(name, shape)
        node_group = self._node_group(name, args, shape, launch_template, empty)
        self.capacity_block_start = pulumi.Output.from_input(block_start or "")
        self.waits_for_capacity = empty
        if block_start is not None:
            self._block_start_action(name, args, node_group, block_start)
        self.node_group_name = node_group.node_group_name
        self.node_group_arn = node_group.arn
        self.launch_template_id = launch_template.id
        self.release_version = node_group.release_version
        self.labels = pulumi.Output.from_input(shape.labels)
        self.taints = pulumi.Output.from_input(shape.taints)
        if args.get("autoscaler_tags"):
            self._autoscaler_tags(name, node_group, shape)
        self.gpus_per_node = pulumi.Output.from_input(shape.gpus)
        self.efa_interfaces = pulumi.Output.from_input(shape.efa_count)
        self.efa_security_group_id = efa_sg.id if efa_sg is not None else pulumi.Output.from_input("")
        self.placement_group_name = placement.name if placement is not None else pulumi.Output.from_input("")
        self.register_outputs(
            {
                "node_group_name": self.node_group_name,
                "node_group_arn": self.node_group_arn,
                "launch_template_id": self.launch_template_id,
                "release_version": self.release_version,
                "labels": self.labels,
                "taints": self.taints,
                "gpus_per_node": self.gpus_per_node,
                "efa_interfaces": self.efa_interfaces,
                "efa_security_group_id": self.efa_security_group_id,
                "placement_group_name": self.placement_group_name,
                "capacity_block_start": self.capacity_block_start,
                "waits_for_capacity": self.waits_for_capacity,
            }
        )

    def _efa_network(
        self, name: str, args: TrainingNodeGroupArgs, shape: "_Shape"
    ) -> tuple[
        Optional[aws.ec2.SecurityGroup],
        Optional[aws.ec2.PlacementGroup],
        Optional[list[pulumi.Input[str]]],
    ]:
        """EFA's security group (all traffic to and from itself), the security groups of the interfaces, and a
        cluster placement group unless a capacity reservation places the nodes; nothing without EFA."""
        if not shape.efa:
            return None, None, None
        efa_sg = aws.ec2.SecurityGroup(
            f"{name}-efa-sg",
            description="EFA: all traffic between the group's nodes (in and out to itself)",
            vpc_id=args["vpc_id"],
            tags={**shape.tags, "Name": f"{name}-efa"},
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-in-self",
            security_group_id=efa_sg.id,
            referenced_security_group_id=efa_sg.id,
            ip_protocol="-1",
            description="EFA from the group itself",
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-out-self",
            security_group_id=efa_sg.id,
            referenced_security_group_id=efa_sg.id,
            ip_protocol="-1",
            description="EFA to the group itself (SRD is neither IPv4 nor IPv6)",
            opts=pulumi.ResourceOptions(parent=self),
        )
        placement = None
        if placement_group(shape.efa, shape.reservation):
            placement = aws.ec2.PlacementGroup(
                f"{name}-pg", strategy="cluster", tags=shape.tags, opts=pulumi.ResourceOptions(parent=self)
            )
        return efa_sg, placement, [args["cluster_security_group_id"], efa_sg.id]

    def _launch_template(
        self,
        name: str,
        shape: "_Shape",
        interface_sgs: Optional[list[pulumi.Input[str]]],
        placement: Optional[aws.ec2.PlacementGroup],
    ) -> aws.ec2.LaunchTemplate:
        """The group's launch template (:func:`components.nodeplan.launch_template_data`: IMDSv2, an encrypted gp3
        root volume, the EFA interfaces, the reservation or Capacity Block, the host setup's user data), with the
        security groups of its EFA interfaces and its placement group."""
        data = dict(shape.template)
        interfaces = data.pop("network_interfaces")
        if interfaces is not None:
            interfaces = [{**spec, "security_groups": interface_sgs} for spec in interfaces]
        return aws.ec2.LaunchTemplate(
            f"{name}-lt",
            update_default_version=True,
            network_interfaces=interfaces,
            placement={"group_name": placement.name} if placement is not None else None,
            tags=shape.tags,
            opts=pulumi.ResourceOptions(parent=self),
            **data,
        )

    def _capacity_block(self, name: str, shape: "_Shape") -> tuple[Optional[str], bool]:
        """For a Capacity Block group: when a scheduled block starts (``None`` otherwise), and whether the group must
        stay empty now (no instance can launch outside the block)."""
        if shape.capacity_type != "CAPACITY_BLOCK":
            return None, False
        assert shape.reservation is not None
        block = aws.ec2.get_capacity_block_reservation(id=shape.reservation, opts=pulumi.InvokeOptions(parent=self))
        empty = block.state != "active"
        if block.state in CAPACITY_BLOCK_PENDING_STATES:
            return block.start_date, empty
        if empty:
            pulumi.log.warn(
                f"{name}: Capacity Block {shape.reservation} is {block.state}: its instances cannot launch, the group "
                "stays at 0 nodes; set the id of an active or scheduled block",
                resource=self,
            )
        return None, empty

    def _ignored_changes(self, name: str, args: TrainingNodeGroupArgs, shape: "_Shape", empty: bool) -> list[str]:
        """The node group's fields ``pulumi up`` leaves as they are: a kept AMI release, sizes the autoscaler or a
        Capacity Block owns, and an active block's launch template."""
        ignored: list[str] = []
        if args.get("keep_release_version"):
            ignored.append("releaseVersion")
        if args.get("ignore_desired_size_changes") or shape.capacity_type == "CAPACITY_BLOCK":
            ignored.append("scalingConfig.desiredSize")
        if shape.capacity_type == "CAPACITY_BLOCK":
            ignored.append("scalingConfig.minSize")  # set by the block's start action, then by EKS before its end
            if not empty:
                # An update rolls the group's nodes while the block's training runs on them, and EKS says to upgrade
                # a Capacity Block group at desired size 0 (CAPACITY_BLOCK_GUIDE). While the block is
                # active the group keeps its launch template version; a change applies at the next `pulumi up` while
                # the group is at 0 (before a block starts, after it ends, or with a new block's id).
                ignored += ["launchTemplate", "version", "releaseVersion"]
                pulumi.log.info(
                    f"{name}: Capacity Block {shape.reservation} is active: the node group keeps its launch template "
                    "version (an update would roll nodes the block has no room for); launch template changes apply "
                    "while the group is at 0 nodes",
                    resource=self,
                )
        return list(dict.fromkeys(ignored))

    def _node_group(
        self,
        name: str,
        args: TrainingNodeGroupArgs,
        shape: "_Shape",
        launch_template: aws.ec2.LaunchTemplate,
        empty: bool,
    ) -> aws.eks.NodeGroup:
        """The EKS managed node group on the launch template: one node unavailable at a time during an update, new
        nodes first (``DEFAULT``) unless the group's capacity has no room for them (``MINIMAL``)."""
        block = shape.capacity_type == "CAPACITY_BLOCK"
        scaling: aws.eks.NodeGroupScalingConfigArgsDict = {
            # a Capacity Block group has no nodes until its block is active
            "min_size": 0 if empty else args["min_size"],
            "desired_size": 0 if empty else args["desired_size"],
            "max_size": args["max_size"],
        }
        eks_taints: list[aws.eks.NodeGroupTaintArgsDict] = [
            {"key": t["key"], "value": t["value"], "effect": TAINT_EFFECTS_EKS[t["effect"]]} for t in shape.taints
        ]
        lt_ref: aws.eks.NodeGroupLaunchTemplateArgsDict = {
            "id": launch_template.id,
            "version": launch_template.latest_version.apply(str),
        }
        ignored = self._ignored_changes(name, args, shape, empty)
        return aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args["cluster_name"],
            node_group_name_prefix=fit_prefix(name, name_limit("aws:eks/nodeGroup:NodeGroup", "nodeGroupNamePrefix")),
            node_role_arn=args["node_role_arn"],
            subnet_ids=args["subnet_ids"],
            instance_types=None if block else shape.instance_types,
            capacity_type=shape.capacity_type,
            ami_type=args.get("ami_type") or ami_type(shape.gpus),
            version=args.get("kubernetes_version"),
            release_version=args.get("release_version"),
            scaling_config=scaling,
            # one node at a time; a pod its PodDisruptionBudget keeps for 15 minutes fails the update
            # (PodEvictionFailure), never forced (source key ``eks-managed-node-update``); MINIMAL where a Capacity
            # Block, a reservation or a cluster placement group has no room for a new node before an old one goes
            update_config={"max_unavailable": 1, "update_strategy": shape.update_strategy.name},
            force_update_version=False,
            node_repair_config=node_repair_config(args.get("node_repair")),
            labels=shape.labels,
            taints=eks_taints,
            launch_template=lt_ref,
            tags=shape.tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=ignored or None,
                custom_timeouts=pulumi.CustomTimeouts(
                    update=f"{update_timeout_minutes(args['max_size'], shape.update_strategy)}m"
                ),
            ),
        )

    def _block_start_action(
        self, name: str, args: TrainingNodeGroupArgs, node_group: aws.eks.NodeGroup, start: str
    ) -> None:
        """The Auto Scaling action that gives a scheduled Capacity Block's group its sizes when the block starts."""
        aws.autoscaling.Schedule(
            f"{name}-block-start",
            scheduled_action_name=CAPACITY_BLOCK_START_ACTION,
            autoscaling_group_name=node_group.resources.apply(
                lambda r: str(r[0].autoscaling_groups[0].name)  # type: ignore[index]
            ),
            # evaluated when the group exists: the block's start, or a few minutes from then if it has passed
            start_time=node_group.resources.apply(lambda _: schedule_time(start)),
            min_size=args["min_size"],
            desired_capacity=args["desired_size"],
            max_size=args["max_size"],
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _autoscaler_tags(self, name: str, node_group: aws.eks.NodeGroup, shape: "_Shape") -> None:
        """Managed node groups don't copy their labels, taints and resources to the Auto Scaling group; the cluster
        autoscaler reads these tags to build a template node when the group is at zero."""
        asg_name = node_group.resources.apply(lambda r: str(r[0].autoscaling_groups[0].name))  # type: ignore[index]
        for key, value in sorted(
            autoscaler_template_tags(shape.labels, shape.taints, shape.gpus, shape.efa_count).items()
        ):
            # named after the tag key, so adding a label never renames (replaces) another tag
            aws.autoscaling.Tag(
                f"{name}-ca-tag-{short_hash(key, 10)}",
                autoscaling_group_name=asg_name,
                tag={"key": key, "value": value, "propagate_at_launch": False},
                opts=pulumi.ResourceOptions(parent=self),
            )
