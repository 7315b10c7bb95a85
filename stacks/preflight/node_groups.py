"""Check 13: EKS's managed node group quotas. Every group's ``maxSize`` is within the nodes a managed node group may
have, and the stack's groups within the groups a cluster may have (source key ``eks-quotas``)."""

from typing import Optional

from components.catalog import EKS_GROUPS_PER_CLUSTER_QUOTA, EKS_NODES_PER_GROUP_QUOTA, QUOTA_NAMES
from stacks.config import key
from stacks.plan import Plan
from stacks.plan.checklist import largest_group
from stacks.preflight.aws import AwsClient
from stacks.preflight.findings import AwsCallError, Finding, number, unreadable_quota


def check_node_group_quotas(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """The two quotas against the plan's groups, the system group included."""
    _check_nodes_per_group(plan, aws, findings)
    _check_groups_per_cluster(plan, aws, findings)


def _read(
    aws: AwsClient, quota: tuple[str, int], k: str, what: str, findings: list[Finding]
) -> Optional[tuple[float, str, str]]:
    """(value, name, where from) of an EKS quota (:meth:`AwsClient.quota`); ``None`` and a failed finding when it
    cannot be read."""
    code, default = quota
    try:
        return aws.quota(code, "eks", documented=default)
    except AwsCallError as exc:
        findings.append(unreadable_quota(k, "EKS", code, QUOTA_NAMES[code], what, exc))
        return None


def _increase(code: str, needed: int, region: str) -> str:
    return (
        f"aws service-quotas request-service-quota-increase --service-code eks --quota-code {code} "
        f"--desired-value {needed} --region {region}"
    )


def _check_nodes_per_group(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    largest = largest_group(plan)
    k = key("nodeGroups")  # the vCPU quotas' findings are keyed by each group's maxSize
    read = _read(aws, EKS_NODES_PER_GROUP_QUOTA, k, f"{largest.path}.maxSize {largest.max_size}", findings)
    if read is None:
        return
    value, name, source = read
    code = EKS_NODES_PER_GROUP_QUOTA[0]
    over = [g for g in plan.all_groups if g.max_size > value]
    for g in over:
        findings.append(
            Finding(
                False,
                key(f"{g.path}.maxSize"),
                f"{g.max_size} nodes, but EKS quota {code} ({name}) is {number(value)} ({source}): creating the "
                f"group would fail; lower maxSize, or request an increase: {_increase(code, g.max_size, aws.region)}",
            )
        )
    if not over:
        findings.append(
            Finding(
                True,
                k,
                f"EKS quota {code} ({name}) is {number(value)} ({source}); the largest group, {largest.name}, has "
                f"maxSize {largest.max_size}",
            )
        )


def _check_groups_per_cluster(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    groups = len(plan.all_groups)
    k = key("nodeGroups")
    read = _read(aws, EKS_GROUPS_PER_CLUSTER_QUOTA, k, f"{groups} node groups", findings)
    if read is None:
        return
    value, name, source = read
    code = EKS_GROUPS_PER_CLUSTER_QUOTA[0]
    if groups <= value:
        findings.append(
            Finding(True, k, f"EKS quota {code} ({name}) is {number(value)} ({source}); the stack has {groups} groups")
        )
        return
    findings.append(
        Finding(
            False,
            k,
            f"the stack has {groups} managed node groups (the system group and {groups - 1} in nodeGroups), but EKS "
            f"quota {code} ({name}) is {number(value)} ({source}); remove groups, or request an increase: "
            f"{_increase(code, groups, aws.region)}",
        )
    )
