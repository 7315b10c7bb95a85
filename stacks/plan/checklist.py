"""What preflight (:mod:`stacks.preflight`) will ask the account about a plan, derived from the plan alone (no AWS
call): the config key each question is about, the vCPUs each quota must cover. ``python -m stacks.plan`` prints the
list offline and the preflight checks read the same derivations, so both tools depend on this core module rather than
on each other."""

from typing import NamedTuple, Optional

from components.catalog import (
    EKS_GROUPS_PER_CLUSTER_QUOTA,
    EKS_NODES_PER_GROUP_QUOTA,
    QUOTA_NAMES,
    VCPU_QUOTAS,
    InstanceType,
    quota_class,
)
from components.catalog.addons import addon_version_for
from stacks.config import key
from stacks.config.addons import AddonNeed, addon_needs, by_addon
from stacks.plan import NodeGroupPlan, Plan
from stacks.plan.group_changes import outgoing_groups
from stacks.plan.minors import VERSION_KEY
from stacks.zones import MIN_CONTROL_PLANE_ZONES


def type_key(g: NodeGroupPlan, i: int) -> str:
    """The config key of a group's ``i``-th instance type."""
    return key("systemNodeGroup.instanceType" if g.path == "systemNodeGroup" else f"{g.path}.instanceTypes[{i}]")


class QuotaPart(NamedTuple):
    """One group's share of a vCPU quota."""

    vcpus: int
    key: str
    """The config key the finding is under."""
    how: str
    """How the share is counted, in words."""
    outgoing: bool = False
    """The share of a last update's group that runs until the end of this one (:func:`quota_needs`)."""


def quota_needs(plan: Plan, previous: Optional[Plan] = None) -> dict[tuple[str, str], list[QuotaPart]]:
    """The vCPUs each quota must cover (pure: no AWS): (class, market) -> one part per group, from ``maxSize`` x the
    vCPUs of the group's largest type of that class; Capacity Blocks are not counted. ``previous``: the last update's
    plan (``pulumi up``), whose replaced and removed groups run until the end of the update
    (:func:`~stacks.plan.group_changes.outgoing_groups`): their nodes count too, in a quota this plan needs (in
    another, they already run within it)."""
    needs: dict[tuple[str, str], list[QuotaPart]] = {}
    for g in plan.all_groups:
        for quota, facts in _largest_per_quota(g).items():
            vcpus = g.max_size * facts.vcpus
            desc = f"{g.path}: maxSize {g.max_size} x {facts.name} ({facts.vcpus} vCPUs) = {vcpus}"
            needs.setdefault(quota, []).append(QuotaPart(vcpus, key(f"{g.path}.maxSize"), desc))
    for o in outgoing_groups(previous, plan) if previous is not None else []:
        for quota, facts in _largest_per_quota(o.group).items():
            if quota not in needs or not o.nodes:
                continue
            vcpus = o.nodes * facts.vcpus
            desc = (
                f"{o.group.path} as the last update left it ({o.why}; it runs until the end of this `pulumi up`): "
                f"{o.nodes} x {facts.name} ({facts.vcpus} vCPUs) = {vcpus} ({o.sized_by})"
            )
            # keyed as this plan's largest part of the quota: the finding stays on a key the stack file has
            needs[quota].append(QuotaPart(vcpus, max(needs[quota], key=lambda p: p.vcpus).key, desc, outgoing=True))
    return needs


def _largest_per_quota(g: NodeGroupPlan) -> dict[tuple[str, str], InstanceType]:
    """(class, market) -> the group's type with the most vCPUs in that class; none for a Capacity Block (a prepaid
    reservation, not counted against the On-Demand or Spot quota)."""
    if g.capacity_type == "CAPACITY_BLOCK":
        return {}
    market = "Spot" if g.capacity_type == "SPOT" else "On-Demand"
    per_class: dict[str, InstanceType] = {}
    for facts in g.types:
        cls = quota_class(facts.name)
        if cls not in per_class or facts.vcpus > per_class[cls].vcpus:
            per_class[cls] = facts
    return {(cls, market): facts for cls, facts in per_class.items()}


def plan_addon_needs(plan: Plan) -> list[AddonNeed]:
    """What the plan's cluster relies on of its add-ons' versions (none for a jobs-only stack, which has no cluster)."""
    cfg = plan.config
    if cfg.jobs_only:
        return []
    return addon_needs(cfg.node_groups, cfg.catalog, metrics=plan.operations.metrics, storage=cfg.storage)


def other_pins(plan: Plan) -> list[tuple[str, str]]:
    """(add-on, version) of each ``cluster.addonVersions`` pin of an add-on the stack relies on no feature of."""
    needed = {n.addon for n in plan_addon_needs(plan)}
    return [(a, v) for a, v in sorted(plan.config.cluster.addon_versions.items()) if v and a not in needed]


def addon_checks(plan: Plan) -> list[tuple[str, str]]:
    """What preflight asks EKS about each version-dependent add-on: a known version (the stack's pin or this
    project's) is offered for the cluster's Kubernetes version; EKS's default has what the stack relies on; and each
    other add-on the stack pins is offered."""
    k8s = plan.config.cluster.kubernetes_version
    out = [
        (key(f"cluster.addonVersions.{addon}"), f"{addon} {version} is offered for Kubernetes {k8s}")
        for addon, version in other_pins(plan)
    ]
    for addon, needs in by_addon(plan_addon_needs(plan)).items():
        version = addon_version_for(addon, k8s, plan.config.cluster.addon_versions)
        k = key(f"cluster.addonVersions.{addon}")
        if version is not None:
            out.append((k, f"{addon} {version} is offered for Kubernetes {k8s}"))
        else:
            has = "; ".join(f"{n.what} ({n.ranges_text})" for n in needs)
            out.append((k, f"EKS's default {addon} for Kubernetes {k8s} has {has}"))
    return out


#: The finding about the stack's credentials is under this key (stacks/preflight/session.py asks who they are).
CREDENTIALS_KEY = "aws:profile"
#: The keys that choose the stack's credentials, for messages.
CREDENTIAL_KEYS = "aws:profile, aws:sharedConfigFiles, aws:sharedCredentialsFiles, aws:assumeRoles"
#: The command the cluster's kubeconfig runs for a token (``aws eks get-token``), and what preflight names when it
#: checks for it: the deploying machine's ``PATH``, not a config key.
AWS_CLI = "aws"
AWS_CLI_KEY = "PATH"
#: The first AWS CLI release of each major version whose ``eks get-token`` answers in the API version the kubeconfig
#: asks for (``KUBERNETES_EXEC_INFO``; earlier ones answer ``v1alpha1``, which Kubernetes 1.24's clients dropped):
#: aws/aws-cli#6476 (``components.catalog`` source ``aws-cli-exec-info``).
AWS_CLI_MINIMUM = {1: (1, 23, 9), 2: (2, 6, 3)}


def planned_checks(plan: Plan) -> list[tuple[str, str]]:
    """What :func:`stacks.preflight.checks.run_preflight` will ask the account about this plan, as (config key, what is
    checked), without asking anything (``python -m stacks.plan`` prints it offline)."""
    out = [_aws_cli_check()]
    if plan.config.jobs_only:
        return out  # a jobs-only stack's account is the cluster stack's, checked there
    return (
        out
        + [(CREDENTIALS_KEY, f"AWS says who the stack's credentials are ({CREDENTIAL_KEYS})")]
        + _network_checks(plan)
        + [_running_cluster_check(plan)]
        + _group_checks(plan)
        + _quota_checks(plan)
        + _node_group_quota_checks(plan)
        + addon_checks(plan)
        + [
            (key(f"cluster.adminRoleArns[{i}]"), f"{arn} is not the identity running the deployment")
            for i, arn in enumerate(plan.config.cluster.admin_role_arns)
        ]
        + _fsx_checks(plan)
        + _dataset_checks(plan)
    )


def _dataset_checks(plan: Plan) -> list[tuple[str, str]]:
    out = []
    for name, staged in plan.datasets.items():  # the datasets a job reads, as stacks/preflight/datasets.py checks
        d = staged.config
        if d.source.startswith("s3://"):
            what = "holds objects to import" if d.is_prefix else "is one object (the tarball staging downloads)"
            size = f", {d.expected_bytes} bytes" if d.expected_bytes is not None and not d.is_prefix else ""
            out.append((key(f"datasets.{name}.source"), f"{d.source} {what}{size}"))
    return out


def _aws_cli_check() -> tuple[str, str]:
    return (
        AWS_CLI_KEY,
        f"the AWS CLI (`{AWS_CLI}`) is found, a release that answers the kubeconfig's `aws eks get-token` ("
        + " or ".join(".".join(map(str, v)) for v in AWS_CLI_MINIMUM.values())
        + " or later)",
    )


def _network_checks(plan: Plan) -> list[tuple[str, str]]:
    cfg = plan.config
    if cfg.network is not None:
        listed = cfg.network.availability_zones
        zones = ", ".join(listed) if listed else f"{cfg.network.zone_count} zones chosen by zone ID"
        return [
            (
                key("network"),
                f"the region's zones and their IDs: the new VPC uses {zones}, and EKS accepts the "
                f"control plane in at least {MIN_CONTROL_PLANE_ZONES} of them",
            )
        ]
    if cfg.existing_vpc is not None:
        vpc = cfg.existing_vpc.vpc_id
        return (
            [
                (
                    key("existingVpc.vpcId"),
                    f"{vpc} has DNS resolution and DNS hostnames on (nodes cannot register without them), and its "
                    "DHCP options use the Amazon-provided DNS server (the private endpoint resolves only through it)",
                )
            ]
            + [
                (key(f"existingVpc.privateSubnetIds[{i}]"), f"{sid} is a subnet of {vpc} in the region")
                for i, sid in enumerate(cfg.existing_vpc.private_subnet_ids)
            ]
            + [
                (
                    key("existingVpc.privateSubnetIds"),
                    f"EKS accepts the control plane in at least {MIN_CONTROL_PLANE_ZONES} of their zones",
                )
            ]
        )
    return []


def _running_cluster_check(plan: Plan) -> tuple[str, str]:
    cfg = plan.config
    return (
        VERSION_KEY,
        f"the EKS cluster {cfg.cluster_name}, if it runs already, runs {cfg.cluster.kubernetes_version} or the "
        "minor before it, and before a move every managed node group runs its minor (EKS moves a cluster one minor "
        "up at a time)",
    )


def _group_checks(plan: Plan) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for g in plan.all_groups:
        if g.subnet_id is not None:
            out.append((key(f"{g.path}.subnetId"), f"{g.subnet_id} is a subnet of the VPC, in a zone it uses"))
        where = g.zone or (f"the zone of {g.subnet_id}" if g.subnet_id else "every zone of the VPC")
        for i, itype in enumerate(g.instance_types):
            out.append((type_key(g, i), f"{itype} is offered in {where}"))
    for g in plan.groups.values():
        if g.efa is not None:
            for i, itype in enumerate(g.instance_types):
                out.append((type_key(g, i), f"EC2 says {itype} supports EFA with {g.efa.interfaces} interface(s)"))
        if g.capacity_type == "SPOT":
            for i, itype in enumerate(g.instance_types):
                out.append((type_key(g, i), f"(information) the current Spot price of {itype} in the group's zones"))
        if g.capacity_reservation_id:
            out.append(_reservation_check(g))
    return out


def _reservation_check(g: NodeGroupPlan) -> tuple[str, str]:
    kind = "Capacity Block" if g.capacity_type == "CAPACITY_BLOCK" else "On-Demand Capacity Reservation"
    state = (
        "active or scheduled (a scheduled block is reported with its start and end)"
        if kind == "Capacity Block"
        else "active"
    )
    return (
        key(f"{g.path}.capacityReservationId"),
        f"{g.capacity_reservation_id} exists, is a {kind}, is {state}, reserves {g.instance_types[0]} "
        f"in {g.zone or g.subnet_id}"
        + (f" and holds at least maxSize ({g.max_size})" if kind == "Capacity Block" else ""),
    )


def _quota_checks(plan: Plan) -> list[tuple[str, str]]:
    out = []
    for (cls, market), parts in sorted(quota_needs(plan).items()):
        code = VCPU_QUOTAS[cls][0 if market == "On-Demand" else 1]
        breakdown = " + ".join(p[2] for p in parts)
        out.append(
            (
                max(parts, key=lambda p: p[0])[1],
                f"the {cls} {market} vCPU quota {code} ({QUOTA_NAMES.get(code, code)}) covers "
                f"{sum(p[0] for p in parts)} vCPUs ({breakdown})",
            )
        )
    return out


def largest_group(plan: Plan) -> NodeGroupPlan:
    """The group with the largest ``maxSize`` (the system group included): what EKS's nodes-per-group quota must
    cover."""
    return max(plan.all_groups, key=lambda g: g.max_size)


def _node_group_quota_checks(plan: Plan) -> list[tuple[str, str]]:
    largest = largest_group(plan)
    nodes, groups = EKS_NODES_PER_GROUP_QUOTA[0], EKS_GROUPS_PER_CLUSTER_QUOTA[0]
    return [
        (
            key("nodeGroups"),
            f"EKS quota {nodes} ({QUOTA_NAMES[nodes]}) covers maxSize {largest.max_size} (group {largest.name}), "
            f"and {groups} ({QUOTA_NAMES[groups]}) {len(plan.all_groups)} groups",
        )
    ]


def _fsx_checks(plan: Plan) -> list[tuple[str, str]]:
    fsx, file_system_id = plan.storage.fsx, plan.config.storage.file_system_id
    if not plan.storage.is_fsx or fsx is None:
        return []
    out = [(key("storage.fsx.throughputPerTib"), f"{fsx.throughput_per_tib} MB/s/TiB is a PERSISTENT_2 tier")]
    if fsx.data_repository.bucket:
        out.append(
            (
                key("storage.fsx.dataRepository.s3Path"),
                f"bucket {fsx.data_repository.bucket} exists in the stack's region",
            )
        )
    else:
        out.append((key("storage.fsx.dataRepository"), "the stack creates the data bucket in the stack's region"))
    if file_system_id:  # adopted: it exists already, so no quota is taken
        out.append((key("storage.fileSystemId"), f"{file_system_id} is available where the plan puts it"))
        out.append(
            (key("storage.fsx.dataRepository"), f"no association of {file_system_id} is on the directories it links")
        )
    else:
        out.append(
            (
                key("storage.fsx.storageCapacityGib"),
                "the Lustre storage quota covers the region's PERSISTENT_2 file systems plus "
                f"{fsx.storage_capacity_gib} GiB",
            )
        )
    return out
