"""``TrainingNodeGroup``: an EKS managed node group with a hardened launch template.

GPU groups (``gpus_per_node > 0``) automatically get the AL2023 NVIDIA AMI type, the
``nvidia.com/gpu=true:NoSchedule`` taint and the ``eks-training/accelerator=nvidia`` label; the
NVIDIA device plugin selects and tolerates exactly these. Every node requires IMDSv2 and has an
encrypted gp3 root volume; nodes never get public IPs or SSH keys.
"""

from typing import Literal, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired

from components.catalog import AMI_TYPES, GPU_LABEL, GPU_TAINT, NODE_ROLE_LABEL, INSTANCE_TYPES

#: Hop limit 2 lets hostNetwork=false add-on pods that still read instance metadata (region, AZ)
#: work, as in EKS's own launch templates; credentials for workloads come from EKS Pod Identity.
IMDS_HOP_LIMIT = 2


class NodeTaint(TypedDict):
    """A taint in EKS API spelling (``effect`` is NO_SCHEDULE, PREFER_NO_SCHEDULE or NO_EXECUTE)."""

    key: str
    value: NotRequired[str]
    effect: Literal["NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE"]


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
    capacity_type: NotRequired[Literal["ON_DEMAND", "SPOT"]]
    """Default ON_DEMAND."""
    disk_size_gib: NotRequired[int]
    """Root volume size (gp3, encrypted). Default 100."""
    labels: NotRequired[dict[str, str]]
    """Extra Kubernetes node labels."""
    taints: NotRequired[Sequence[NodeTaint]]
    """Extra taints (the GPU taint is added automatically)."""
    tags: NotRequired[dict[str, str]]
    """AWS tags for the node group, launch template, instances and volumes."""


class TrainingNodeGroup(pulumi.ComponentResource):
    """A launch template (IMDSv2, encrypted root volume) and an EKS managed node group."""

    node_group_name: pulumi.Output[str]
    """The EKS node group's name."""
    node_group_arn: pulumi.Output[str]
    """The EKS node group's ARN."""
    launch_template_id: pulumi.Output[str]
    """The launch template's id."""
    labels: pulumi.Output[dict[str, str]]
    """The Kubernetes labels every node of the group has (select the group with these)."""
    taints: pulumi.Output[list[dict[str, str]]]
    """The taints every node has, in Kubernetes spelling (pods must tolerate these)."""
    gpus_per_node: pulumi.Output[int]
    """NVIDIA GPUs per node (0 for CPU groups)."""

    def __init__(self, name: str, args: TrainingNodeGroupArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:TrainingNodeGroup", name, None, opts)
        instance_types = list(args["instance_types"])
        gpus = args.get("gpus_per_node")
        if gpus is None:
            facts = INSTANCE_TYPES.get(instance_types[0])
            if facts is None:
                raise ValueError(
                    f"{name}: instance type {instance_types[0]!r} is not in the catalog; pass gpus_per_node explicitly"
                )
            gpus = facts.gpus
        tags = dict(args.get("tags") or {})
        labels: dict[str, str] = {NODE_ROLE_LABEL: args["role"], **dict(args.get("labels") or {})}
        taints: list[NodeTaint] = list(args.get("taints") or [])
        if gpus > 0:
            labels[GPU_LABEL[0]] = GPU_LABEL[1]
            taints.insert(0, {"key": GPU_TAINT["key"], "value": GPU_TAINT["value"], "effect": "NO_SCHEDULE"})
        ami_type = AMI_TYPES["nvidia"] if gpus > 0 else AMI_TYPES["cpu"]

        launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            description=f"{name}: IMDSv2, encrypted gp3 root volume",
            update_default_version=True,
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "required",
                "http_put_response_hop_limit": IMDS_HOP_LIMIT,
                "instance_metadata_tags": "disabled",
            },
            block_device_mappings=[
                {
                    "device_name": "/dev/xvda",
                    "ebs": {
                        "volume_size": int(args.get("disk_size_gib", 100)),
                        "volume_type": "gp3",
                        "encrypted": "true",
                        "delete_on_termination": "true",
                    },
                }
            ],
            tag_specifications=[
                {"resource_type": "instance", "tags": {**tags, "Name": name}},
                {"resource_type": "volume", "tags": {**tags, "Name": name}},
            ],
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

        scaling: aws.eks.NodeGroupScalingConfigArgsDict = {
            "min_size": args["min_size"],
            "desired_size": args["desired_size"],
            "max_size": args["max_size"],
        }
        eks_taints: list[aws.eks.NodeGroupTaintArgsDict] = [
            {"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]} for t in taints
        ]
        lt_ref: aws.eks.NodeGroupLaunchTemplateArgsDict = {
            "id": launch_template.id,
            "version": launch_template.latest_version.apply(str),
        }
        node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args["cluster_name"],
            node_group_name_prefix=f"{name}-",
            node_role_arn=args["node_role_arn"],
            subnet_ids=args["subnet_ids"],
            instance_types=instance_types,
            capacity_type=args.get("capacity_type", "ON_DEMAND"),
            ami_type=ami_type,
            scaling_config=scaling,
            update_config={"max_unavailable": 1},
            labels=labels,
            taints=eks_taints,
            launch_template=lt_ref,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

        effect_k8s = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}
        self.node_group_name = node_group.node_group_name
        self.node_group_arn = node_group.arn
        self.launch_template_id = launch_template.id
        self.labels = pulumi.Output.from_input(labels)
        self.taints = pulumi.Output.from_input(
            [{"key": t["key"], "value": t.get("value", ""), "effect": effect_k8s[t["effect"]]} for t in taints]
        )
        self.gpus_per_node = pulumi.Output.from_input(gpus)
        self.register_outputs(
            {
                "node_group_name": self.node_group_name,
                "node_group_arn": self.node_group_arn,
                "launch_template_id": self.launch_template_id,
                "labels": self.labels,
                "taints": self.taints,
                "gpus_per_node": self.gpus_per_node,
            }
        )
