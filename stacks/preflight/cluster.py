"""Preflight's check of the EKS cluster the stack already runs: the minor the stack sets is one EKS can move it to.

An earlier ``pulumi up`` that failed may have moved it (a failed update keeps the record), EKS may upgrade a cluster by
itself (at the end of standard or extended support), or someone may upgrade it outside Pulumi; the stack's record of
its last update sees none of them, nor a node group that did not roll (a Capacity Block group keeps its version while
a block is active, a roll can fail). The rules are the upgrade rules of ``pulumi up`` (:mod:`stacks.plan.minors`): one
minor up at a time, never down, and only while every managed node group runs the cluster's minor. Also read before
the upgrade summary: the version of each add-on the cluster runs beside EKS's default now (:func:`eks_defaults`), and
the desired size of each group whose sizes move under the autoscaler (:func:`desired_sizes_now`)."""

from typing import Optional, Sequence

import boto3

from components.catalog.addons import addon_version_for
from components.catalog.platform import MINOR_STEP, minor_number
from components.scheduling import NODE_ROLE_LABEL
from stacks.plan import Plan
from stacks.plan.minors import VERSION_KEY, minor_step
from stacks.preflight.aws import AwsClient
from stacks.preflight.findings import SKIP_HINT, AwsCallError, Finding
from stacks.preflight.session import stack_session

#: Cluster states in which EKS takes no version update (it allows one update at a time).
BUSY = ("CREATING", "UPDATING", "PENDING")


def running_cluster(
    plan: Plan, session: Optional[boto3.session.Session] = None
) -> tuple[Optional[tuple[str, str]], Optional[str]]:
    """((minor, status) of the cluster the stack names, ``None`` when it has none; why EKS could not be asked, ``None``
    when it answered): the program's upgrade summary reads it as advice, so no error stops the program here."""
    region = plan.config.region
    try:
        aws = AwsClient(session or stack_session(plan), region)
        return aws.cluster_version(plan.config.cluster_name), None
    except Exception as exc:  # noqa: BLE001 - e.g. a missing profile, a malformed AWS_ENDPOINT_URL (ValueError)
        return None, f"{type(exc).__name__}: {exc}"


def desired_sizes_now(
    plan: Plan, names: Sequence[str], session: Optional[boto3.session.Session] = None
) -> tuple[dict[str, int], Optional[str]]:
    """({group: the desired size EKS holds now} for each group of ``names`` EKS has; why EKS could not be asked,
    ``None`` when it answered). ``pulumi up`` sends it with a group's new sizes, where the provider would send the one
    Pulumi recorded (:func:`stacks.plan.group_changes.resized_under_autoscaler`). Advice, as :func:`running_cluster`:
    no error stops the program here."""
    if not names:
        return {}, None
    try:
        aws = AwsClient(session or stack_session(plan), plan.config.region)
        sizes = aws.node_group_desired_sizes(plan.config.cluster_name, NODE_ROLE_LABEL)
    except Exception as exc:  # noqa: BLE001 - advice only, as running_cluster
        return {}, f"{type(exc).__name__}: {exc}"
    return {n: sizes[n] for n in names if n in sizes}, None


def eks_defaults(
    plan: Plan, session: Optional[boto3.session.Session] = None
) -> tuple[dict[str, tuple[str, str]], Optional[str]]:
    """({add-on: (the version the cluster runs, EKS's default for the stack's minor)} for each add-on the stack leaves
    to EKS's default and the cluster runs; why EKS could not be asked, ``None`` when it answered). EKS may raise its
    default at any time, and the next ``pulumi up`` then moves the add-on: the upgrade summary names the move. Advice,
    as :func:`running_cluster`: no error stops the program here."""
    cluster = plan.config.cluster
    left = [a for a in plan.addons if addon_version_for(a, cluster.kubernetes_version, cluster.addon_versions) is None]
    found: dict[str, tuple[str, str]] = {}
    try:
        aws = AwsClient(session or stack_session(plan), plan.config.region)
        for addon in left:
            runs = aws.installed_addon(plan.config.cluster_name, addon)
            default = next((v for v, d in aws.addon_versions(addon, cluster.kubernetes_version) if d), None)
            if runs is not None and default is not None:
                found[addon] = (runs, default)
    except Exception as exc:  # noqa: BLE001 - advice only, as running_cluster
        return found, f"{type(exc).__name__}: {exc}"
    return found, None


def check_running_cluster(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """The cluster named as the stack names it, if it exists: its minor and state against the stack's minor."""
    name, wanted = plan.config.cluster_name, plan.config.cluster.kubernetes_version
    try:
        found = aws.cluster_version(name)
    except AwsCallError as exc:
        findings.append(Finding(False, VERSION_KEY, f"could not describe the EKS cluster {name} ({exc}) {SKIP_HINT}"))
        return
    running, status = found if found is not None else (None, None)
    findings.append(Finding(*running_cluster_finding(name, running, wanted, status)))
    if running is None or minor_step(running, wanted) != "up":
        return
    try:
        groups = aws.node_group_versions(name)
    except AwsCallError as exc:
        findings.append(Finding(False, VERSION_KEY, f"could not list the node groups of {name} ({exc}) {SKIP_HINT}"))
        return
    findings.extend(Finding(*f) for f in node_group_findings(name, running, wanted, groups))


def node_group_findings(name: str, running: str, wanted: str, groups: dict[str, str]) -> list[tuple[bool, str, str]]:
    """(ok, key, message) for each managed node group of the cluster ``name`` that keeps EKS from moving it from
    ``running`` to ``wanted`` (``groups``: each group's minor, by EKS's name); none when all run ``running``."""
    return [
        (
            False,
            VERSION_KEY,
            f"the node group {group} of {name} runs Kubernetes {minor}, and EKS moves the control plane up a minor "
            f"only while every managed node group runs the cluster's, {running}: roll it to {running} first (keep "
            f"{VERSION_KEY} at '{running}' and run `pulumi up --refresh`; a Capacity Block group rolls once no block "
            f"is active), then move to {wanted}",
        )
        for group, minor in sorted(groups.items())
        if minor != running
    ]


def running_cluster_finding(
    name: str, running: Optional[str], wanted: str, status: Optional[str] = "ACTIVE"
) -> tuple[bool, str, str]:
    """(ok, key, message) for a cluster ``name`` in ``status`` running ``running`` (``None``: none yet) and a stack
    at ``wanted``."""
    if running is None:
        return True, VERSION_KEY, f"no EKS cluster {name} yet: `pulumi up` creates it at {wanted}"
    if status == "DELETING":
        return (
            False,
            VERSION_KEY,
            f"the EKS cluster {name} is being deleted: wait until it is gone, then run `pulumi up --refresh` (the "
            "refresh drops it from Pulumi's state, so the update creates it again)",
        )
    if status == "FAILED":
        return (
            False,
            VERSION_KEY,
            f"the EKS cluster {name} failed to create, and EKS updates no failed cluster: delete it "
            f"(`aws eks delete-cluster --name {name}`), then run `pulumi up --refresh`",
        )
    step = minor_step(running, wanted)
    if step == "down":
        return (
            False,
            VERSION_KEY,
            f"the EKS cluster {name} runs {running}, newer than the stack's {wanted}: an earlier `pulumi up` that "
            "failed moved it, or EKS did (it upgrades a cluster itself at the end of standard or extended support), or "
            f"someone did outside Pulumi. `pulumi up` never moves a cluster down: set {VERSION_KEY} to "
            f"'{running}' and run `pulumi up --refresh` (the refresh reads the minor into Pulumi's state)",
        )
    if step == "skip":
        rmaj, rmin = minor_number(running)
        return (
            False,
            VERSION_KEY,
            f"the EKS cluster {name} runs {running}, and EKS moves a cluster one minor at a time: set {VERSION_KEY} "
            f"to '{rmaj}.{rmin + MINOR_STEP}', run `pulumi up --refresh`, and repeat up to {wanted}",
        )
    if step == "same":
        return True, VERSION_KEY, f"the EKS cluster {name} runs {running}, as the stack sets ({status})"
    if status in BUSY:
        return (
            False,
            VERSION_KEY,
            f"the EKS cluster {name} is {status}, and EKS takes one update at a time: wait until it is ACTIVE, then "
            f"move it to {wanted} (if EKS is upgrading it itself, set the minor it then runs and run "
            "`pulumi up --refresh`)",
        )
    return True, VERSION_KEY, f"the EKS cluster {name} runs {running} ({status}): `pulumi up` moves it to {wanted}"
