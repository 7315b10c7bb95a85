"""Preflight's check of the EKS cluster the stack already runs: the minor the stack sets is one EKS can move it to.

EKS may upgrade a cluster by itself (at the end of standard support) or someone may upgrade it outside Pulumi; the
stack's record of its last update does not see either. The rules are the upgrade rules of ``pulumi up``
(:mod:`stacks.plan.upgrade`): one minor up at a time, never down."""

from typing import Optional

from components.catalog.platform import MINOR_STEP, minor_number
from stacks.plan import Plan
from stacks.plan.upgrade import VERSION_KEY
from stacks.preflight.aws import AwsClient
from stacks.preflight.findings import SKIP_HINT, AwsCallError, Finding


def check_running_cluster(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """The cluster named as the stack names it, if it exists: its minor against the stack's."""
    name, wanted = plan.config.cluster_name, plan.config.cluster.kubernetes_version
    try:
        running = aws.cluster_version(name)
    except AwsCallError as exc:
        findings.append(Finding(False, VERSION_KEY, f"could not describe the EKS cluster {name} ({exc}) {SKIP_HINT}"))
        return
    findings.append(Finding(*running_cluster_finding(name, running, wanted)))


def running_cluster_finding(name: str, running: Optional[str], wanted: str) -> tuple[bool, str, str]:
    """(ok, key, message) for a cluster ``name`` running ``running`` (``None``: none yet) and a stack at ``wanted``."""
    if running is None:
        return True, VERSION_KEY, f"no EKS cluster {name} yet: `pulumi up` creates it at {wanted}"
    (rmaj, rmin), (wmaj, wmin) = minor_number(running), minor_number(wanted)
    if (wmaj, wmin) == (rmaj, rmin):
        return True, VERSION_KEY, f"the EKS cluster {name} runs {running}, as the stack sets"
    if (wmaj, wmin) < (rmaj, rmin):
        return (
            False,
            VERSION_KEY,
            f"the EKS cluster {name} runs {running}, newer than the stack's {wanted} (EKS upgrades a cluster itself at "
            f"the end of standard support; or it was upgraded outside Pulumi), and EKS never moves a cluster down: set "
            f"{VERSION_KEY} to '{running}', run `pulumi refresh`, then `pulumi up`",
        )
    if wmaj == rmaj and wmin - rmin <= MINOR_STEP:
        return True, VERSION_KEY, f"the EKS cluster {name} runs {running}: `pulumi up` moves it to {wanted}"
    return (
        False,
        VERSION_KEY,
        f"the EKS cluster {name} runs {running}, and EKS moves a cluster one minor at a time: set {VERSION_KEY} to "
        f"'{rmaj}.{rmin + MINOR_STEP}', run `pulumi up`, and repeat up to {wanted}",
    )
