"""One way to give a driver or a job its own AWS permissions: an IAM role trusted through EKS Pod
Identity for exactly one cluster, namespace and service account, its scoped policy, and the association.

Used by every component that calls AWS from a pod (cluster-autoscaler, the EFS CSI controller, data
staging). Children are created under the calling component (``parent``) and named after ``prefix``.
"""

from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_aws as aws

from components.iam import pod_identity_trust_policy
from components.naming import fit_name, name_limit

ROLE_NAME_LIMIT = name_limit("aws:iam/role:Role", "name")


@dataclass
class PodIdentityRole:
    """What :func:`pod_identity_role` created."""

    role: aws.iam.Role
    association: Optional[aws.eks.PodIdentityAssociation]
    """``None`` when ``associate=False`` (an EKS add-on associates the role itself)."""
    policies: list[pulumi.Resource]
    """The policy resources: wait for these before the role is used."""


def pod_identity_role(
    parent: pulumi.Resource,
    prefix: str,
    *,
    cluster_name: pulumi.Input[str],
    namespace: pulumi.Input[str],
    service_account: pulumi.Input[str],
    description: str,
    role_name: Optional[str] = None,
    policy: Optional[pulumi.Input[str]] = None,
    managed_policy_arns: Sequence[pulumi.Input[str]] = (),
    policy_suffix: str = "policy",
    associate: bool = True,
    tags: Optional[pulumi.Input[dict[str, str]]] = None,
) -> PodIdentityRole:
    """Role ``{prefix}-role`` (physical name ``role_name``, shortened to 64 characters with a stable hash
    when longer), an inline ``policy`` (``{prefix}-{policy_suffix}``) and/or managed policy attachments,
    and unless ``associate`` is false the ``{prefix}-pod-identity`` association of the service account."""
    opts = pulumi.ResourceOptions(parent=parent)
    caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    trust = pulumi.Output.all(caller.account_id, cluster_name, namespace, service_account).apply(
        lambda v: pod_identity_trust_policy(str(v[0]), str(v[1]), str(v[2]), [str(v[3])])
    )
    role = aws.iam.Role(
        f"{prefix}-role",
        name=fit_name(role_name, ROLE_NAME_LIMIT) if role_name else None,
        description=description,
        assume_role_policy=trust,
        tags=tags,
        opts=opts,
    )
    policies: list[pulumi.Resource] = []
    if policy is not None:
        policies.append(aws.iam.RolePolicy(f"{prefix}-{policy_suffix}", role=role.id, policy=policy, opts=opts))
    for i, arn in enumerate(managed_policy_arns):
        suffix = policy_suffix if len(managed_policy_arns) == 1 and policy is None else f"{policy_suffix}-{i}"
        policies.append(aws.iam.RolePolicyAttachment(f"{prefix}-{suffix}", role=role.name, policy_arn=arn, opts=opts))
    association = None
    if associate:
        association = aws.eks.PodIdentityAssociation(
            f"{prefix}-pod-identity",
            cluster_name=cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.arn,
            opts=pulumi.ResourceOptions(parent=parent, depends_on=policies),
        )
    return PodIdentityRole(role=role, association=association, policies=policies)
