"""``ClusterAutoscaler``: the Kubernetes cluster-autoscaler for the EKS managed node groups.

Why cluster-autoscaler rather than Karpenter: the node groups here are EKS managed node groups
whose launch templates already carry what EFA needs (interfaces per network card, a cluster
placement group, a single zone, capacity reservations and Capacity Blocks). cluster-autoscaler
scales exactly those groups (0 to max) and keeps all of that; Karpenter would replace the node
groups with its own NodePools/EC2NodeClasses and re-implement the EFA wiring there.

Scale-from-zero works because each group's Auto Scaling group carries node-template tags (see
``TrainingNodeGroup(autoscaler_tags=True)``). The autoscaler runs on the system nodes with its own
EKS Pod Identity role; scaling actions are limited to Auto Scaling groups tagged as owned by this
cluster (EKS tags managed node groups' ASGs that way).
"""

import json
from typing import Any, Optional, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.catalog import CLUSTER_AUTOSCALER_IMAGES, HELM_CHARTS, NODE_ROLE_LABEL
from components.iam import pod_identity_trust_policy

SERVICE_ACCOUNT = "cluster-autoscaler"
NAMESPACE = "kube-system"


def autoscaler_policy(cluster_name: str) -> str:
    """Least-privilege policy: describe calls need ``*``; scaling only on this cluster's groups."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "Describe",
                    "Effect": "Allow",
                    "Action": [
                        "autoscaling:DescribeAutoScalingGroups",
                        "autoscaling:DescribeAutoScalingInstances",
                        "autoscaling:DescribeLaunchConfigurations",
                        "autoscaling:DescribeScalingActivities",
                        "autoscaling:DescribeTags",
                        "ec2:DescribeImages",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeLaunchTemplateVersions",
                        "ec2:GetInstanceTypesFromInstanceRequirements",
                        "eks:DescribeNodegroup",
                    ],
                    "Resource": "*",
                },
                {
                    "Sid": "ScaleOwnGroups",
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
                    },
                },
            ],
        },
        sort_keys=True,
    )


def cluster_autoscaler_values(cluster_name: str, region: str, kubernetes_version: str) -> dict[str, Any]:
    """Helm values for the pinned chart."""
    image = CLUSTER_AUTOSCALER_IMAGES[kubernetes_version]
    repository, tag = image.rsplit(":", 1)
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"repository": repository, "tag": tag},
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "nodeSelector": {NODE_ROLE_LABEL: "system"},
        "extraArgs": {
            "balance-similar-node-groups": "true",
            "expander": "least-waste",
            "scale-down-unneeded-time": "10m",
            "scale-down-delay-after-add": "10m",
            "skip-nodes-with-local-storage": "false",
            "skip-nodes-with-system-pods": "false",
        },
        "resources": {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"memory": "600Mi"}},
    }


class ClusterAutoscalerArgs(TypedDict):
    """Inputs of :class:`ClusterAutoscaler`."""

    cluster_name: pulumi.Input[str]
    """EKS cluster name (resolving once the cluster exists)."""
    cluster_name_plain: str
    """The same name as a plain string (trust and scaling policies)."""
    kubernetes_version: str
    """Kubernetes minor; selects the matching autoscaler image."""
    region: str
    """AWS region of the cluster."""
    chart_version: NotRequired[str]
    """Override of the pinned chart version."""


class ClusterAutoscaler(pulumi.ComponentResource):
    """IAM role + Pod Identity association + Helm release of cluster-autoscaler (needs a
    ``kubernetes`` provider in ``opts``)."""

    role_arn: pulumi.Output[str]
    """IAM role the autoscaler runs as."""
    release_name: pulumi.Output[str]
    """Name of the Helm release."""

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:ClusterAutoscaler", name, None, opts)
        cluster_plain = args["cluster_name_plain"]
        caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        role = aws.iam.Role(
            f"{name}-role",
            name=f"{cluster_plain}-cluster-autoscaler",
            description="cluster-autoscaler (EKS Pod Identity, kube-system/cluster-autoscaler)",
            assume_role_policy=caller.account_id.apply(
                lambda account: pod_identity_trust_policy(account, cluster_plain, NAMESPACE, [SERVICE_ACCOUNT])
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        policy = aws.iam.RolePolicy(
            f"{name}-policy", role=role.id, policy=autoscaler_policy(cluster_plain), opts=pulumi.ResourceOptions(parent=self)
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=args["cluster_name"],
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        chart = HELM_CHARTS["cluster-autoscaler"]
        release = k8s.helm.v3.Release(
            f"{name}-release",
            name="cluster-autoscaler",
            chart=chart.chart,
            version=args.get("chart_version") or chart.version,
            repository_opts={"repo": chart.repo},
            namespace=NAMESPACE,
            values=cluster_autoscaler_values(cluster_plain, args["region"], args["kubernetes_version"]),
            atomic=True,
            cleanup_on_fail=True,
            timeout=600,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[association]),
        )
        self.role_arn = role.arn
        self.release_name = release.name.apply(lambda n: n or "cluster-autoscaler")
        self.register_outputs({"role_arn": self.role_arn, "release_name": self.release_name})
