"""The Kubernetes minor rules of a running stack's update, each from :mod:`components.catalog.platform` with its
source: the control plane moves one minor per ``pulumi up`` and never down (``eks-update-cluster``; EKS also moves it
only while every managed node group runs its minor, which preflight asks EKS); a node's kubelet may be up to three
minors older than the API server and never newer (``kubernetes-version-skew``); a group's kubelet is the minor of the
AMI release the last update recorded it running, where it did. A stack that leaves its minor to this project's default
stops when the default moves away from the minor its cluster runs.
"""

from typing import Any, Mapping, Optional

from components.catalog import SOURCES
from components.catalog.amis import RELEASE_VERSION_RE
from components.catalog.platform import (
    DEFAULT_KUBERNETES_VERSION,
    KUBELET_MAX_SKEW,
    MINOR_STEP,
    SUPPORTED_KUBERNETES_VERSIONS,
    minor_number,
)
from stacks.config import key
from stacks.config.cluster import past_standard_support
from stacks.plan import NodeGroupPlan, Plan
from stacks.plan.nodes import RELEASE_SUFFIX, recorded_release

VERSION_KEY = key("cluster.kubernetesVersion")
EXTENDED_KEY = key("cluster.extendedSupport")
CLUSTER_KEY = key("cluster")


def kubelet_minor(g: NodeGroupPlan, cluster_minor: str, recorded: Optional[Mapping[str, object]] = None) -> str:
    """The kubelet minor of a group's nodes: the minor of the AMI release the last update's record says it runs
    (``recorded``), else of its planned release, else the cluster's."""
    for release in (recorded_release(recorded, g.path), g.ami.release_version):
        m = RELEASE_VERSION_RE.match(release or "")
        if m:
            return m.group("minor")
    return cluster_minor


def unset_minor(plan: Plan) -> bool:
    """Whether the stack planned as ``plan`` leaves its minor to this project's default (a jobs-only stack has none)."""
    cluster = plan.config.cluster
    return "kubernetes_version" not in cluster.model_fields_set and cluster.stack_reference is None


def minor_step(old: str, new: str) -> str:
    """How EKS takes a control plane from ``old`` to ``new``: ``same``, ``up`` (one minor), ``down`` (never) or
    ``skip`` (more than one minor, or another major: one at a time)."""
    (amaj, amin), (bmaj, bmin) = minor_number(old), minor_number(new)
    if (bmaj, bmin) == (amaj, amin):
        return "same"
    if (bmaj, bmin) < (amaj, amin):
        return "down"
    return "up" if bmaj == amaj and bmin - amin <= MINOR_STEP else "skip"


def moved_default_problem(deployed: str, default: str, outside: bool = False, compared: Optional[str] = None) -> str:
    """Why an update must stop: the stack leaves its minor unset, and this project's ``default`` is not the minor the
    cluster runs (``deployed``: its last finished update's, the stack file's that ``plan --from`` reads, named
    ``compared``, or the control plane's where it moved ``outside`` Pulumi); the message names the key and both
    choices."""
    runs = (
        "the cluster runs"
        if outside
        else f"{compared} deploys"
        if compared
        else "the stack's last finished update deployed"
    )
    (dmaj, dmin), newer = minor_number(deployed), minor_number(default) > minor_number(deployed)
    why = "a new version of the project moved it" if newer else "`pulumi up` never moves a cluster down a minor"
    upgrade = f", or to '{dmaj}.{dmin + 1}' to upgrade it one minor" if newer else ""
    choices = [deployed, f"{dmaj}.{dmin + 1}"] if newer else [deployed]
    return (
        f"{VERSION_KEY} is not set, and this project's default, {default}, is not the minor {runs}, {deployed}: "
        f"{why}. Set it to '{deployed}' to keep the cluster as it runs{upgrade}{_extended_needed(choices)}"
    )


def _extended_needed(minors: list[str]) -> str:
    """``"; 1.33 and 1.34 left EKS standard support: ..."``, naming the key those of ``minors`` need, or ``""``."""
    past = [m for m in minors if past_standard_support(m)]
    if not past:
        return ""
    return f"; {' and '.join(past)} left EKS standard support: set {EXTENDED_KEY}: true with it"


def minor_problems(
    old: Plan,
    new: Plan,
    running: Optional[str] = None,
    *,
    unread: Optional[str] = None,
    recorded: Optional[Mapping[str, object]] = None,
    compared: Optional[str] = None,
) -> list[str]:
    """Why ``pulumi up`` must not move from ``old`` to ``new``: a minor skipped or gone back, a group's kubelet outside
    the skew Kubernetes supports; each message names the key and the steps to take instead. Whether each group runs
    the minor the control plane moves from, as EKS requires, only EKS knows: preflight asks it. ``running`` is the
    control plane's minor where it moved past ``old``'s since its record (:func:`stacks.last_update.ahead_of_record`;
    its nodes may not have); ``unread``: why EKS was not asked (a skip may then be a move EKS already made), and what
    to do, a clause added to a skip's refusal; ``recorded``: the last update's record (the output
    ``deployedVersions``), whose AMI releases give the groups' kubelets (:func:`kubelet_minor`); ``compared``: the
    stack file ``old`` is read from, where ``plan --from`` compares with one instead of the last update."""
    deployed, b = old.config.cluster.kubernetes_version, new.config.cluster.kubernetes_version
    if running is not None and minor_number(running) <= minor_number(deployed):
        running = None
    a = running or deployed
    bmaj, bmin = minor_number(b)
    if a != b and unset_minor(new):
        return [moved_default_problem(a, b, outside=running is not None, compared=compared)]
    extended = new.config.cluster.extended_support
    problems = step_problems(a, b, outside=running is not None, extended=extended, unread=unread)
    if minor_step(a, b) == "down":
        return problems
    for g in new.all_groups:
        was = next((o for o in old.all_groups if o.name == g.name), None)
        if was is None:
            continue
        kubelet = kubelet_minor(was, deployed, recorded)
        gap = bmin - minor_number(kubelet)[1]
        if minor_number(kubelet)[0] != bmaj or gap > KUBELET_MAX_SKEW or gap < 0:
            problems.append(skew_problem(was, kubelet, a, b, recorded))
        elif minor_step(a, b) == "up" and recorded_behind(was, a, recorded):
            problems.append(behind_problem(was, kubelet, a, b, recorded))
    return problems


def step_problems(a: str, b: str, *, outside: bool, extended: bool, unread: Optional[str] = None) -> list[str]:
    """Why a control plane at ``a`` cannot move to ``b``: down a minor, or past the next one (EKS moves it one minor
    at a time). ``outside``: ``a`` is the minor it runs, past the last update's record; ``extended``: the stack opts
    in to extended support; ``unread``: why EKS was not asked the minor it runs, added to a skip's refusal."""
    (amaj, amin), (bmaj, bmin) = minor_number(a), minor_number(b)
    step = minor_step(a, b)
    if step == "down" and outside:
        return [
            f"{VERSION_KEY}: {b} is older than the {a} the cluster runs: an earlier `pulumi up` that failed moved "
            f"it, or EKS did (it upgrades a cluster itself at the end of standard or extended support), and `pulumi "
            f"up` never moves a cluster down. Set it to '{a}' and run `pulumi up --refresh` (the refresh reads that "
            f"minor into Pulumi's state)"
        ]
    if step == "down":
        return [
            f"{VERSION_KEY}: {b} is older than the running {a}; `pulumi up` never moves a cluster down a minor (its "
            f"nodes run {a}, and a kubelet newer than the API server is outside Kubernetes' skew): set it back to {a}; "
            f"to run {b}, create a new stack at {b} and move the jobs there"
        ]
    if step != "skip":
        return []
    steps = [f"{amaj}.{m}" for m in range(amin + 1, bmin + 1)] if bmaj == amaj else [b]
    known = [s for s in steps if s in SUPPORTED_KUBERNETES_VERSIONS]
    chain = " -> ".join([a, *known])
    return [
        f"{VERSION_KEY}: {a} -> {b} skips {len(steps) - 1} minor(s); EKS updates the control plane one minor at a "
        f"time, and node groups follow it: set {steps[0]}, run `pulumi up`, and repeat for each minor ({chain}), "
        "one minor per `pulumi up`"
        + ("" if extended else _extended_needed(known[:-1]))
        + (f". {unread}" if unread else "")
    ]


def recorded_behind(g: NodeGroupPlan, cluster_minor: str, recorded: Optional[Mapping[str, object]]) -> bool:
    """Whether the last update's record says group ``g`` runs an older minor than its cluster's (a Capacity Block
    group keeps its minor while its block is active; a roll that failed)."""
    m = RELEASE_VERSION_RE.match(recorded_release(recorded, g.path) or "")
    return m is not None and minor_number(m.group("minor")) < minor_number(cluster_minor)


def behind_problem(g: NodeGroupPlan, kubelet: str, a: str, b: str, recorded: Optional[Mapping[str, object]]) -> str:
    """The refusal of a move from ``a`` to ``b`` while group ``g`` runs ``kubelet``, older than ``a``, by the record:
    EKS updates a control plane only while every managed node group runs its minor (``eks-update-cluster``)."""
    return (
        f"{key(g.path)}: its nodes run Kubernetes {kubelet} {_as_recorded(g, recorded)}, and EKS moves the control "
        f"plane only while every managed node group runs its minor, {a} ({SOURCES['eks-update-cluster'].url}): "
        f"{_roll_first(a)}, then move the cluster to {b}"
    )


def skew_problem(g: NodeGroupPlan, kubelet: str, a: str, b: str, recorded: Optional[Mapping[str, object]]) -> str:
    """The refusal of group ``g``, whose nodes run ``kubelet``, under a ``b`` API server moved from ``a``: from the
    record's release, the roll to make first (the group fell behind its cluster); else the way one minor at a time."""
    skew = (
        f"outside the skew Kubernetes supports against a {b} API server (kubelet at most {KUBELET_MAX_SKEW} minors "
        "older, never newer)"
    )
    if not recorded_behind(g, a, recorded):
        return (
            f"{key(g.path)}: its nodes run kubelet {kubelet} until they roll, {skew}: move {key(g.path)}.amiRelease "
            "and the cluster one minor at a time"
        )
    return (
        f"{key(g.path)}: its nodes run kubelet {kubelet} until they roll {_as_recorded(g, recorded)}, {skew}: "
        f"{_roll_first(a)}, then move the cluster one minor at a time"
    )


def _as_recorded(g: NodeGroupPlan, recorded: Optional[Mapping[str, object]]) -> str:
    """Where a group's kubelet was read: the AMI release the last update recorded it running."""
    release = recorded_release(recorded, g.path)
    return f"(AMI release {release}, as the last update recorded it in deployedVersions' {g.path}{RELEASE_SUFFIX})"


def _roll_first(a: str) -> str:
    """How a group that fell behind its cluster, at ``a``, catches up before the cluster moves."""
    return (
        f"roll it to {a} first (keep {VERSION_KEY} at '{a}' and run `pulumi up --refresh`; a Capacity Block group "
        "rolls once no block is active)"
    )


def unpinned_note(plan: Plan) -> Optional[str]:
    """What an unset ``cluster.kubernetesVersion`` means for a stack planned as ``plan``; ``None`` when it is set."""
    if not unset_minor(plan):
        return None
    return (
        f"{VERSION_KEY} is not set, so a new stack gets this project's default ({DEFAULT_KUBERNETES_VERSION}); after "
        "a project update that raises the default, `pulumi up` stops until you choose the minor; to choose now, pin "
        f"it ({VERSION_KEY}: '{plan.config.cluster.kubernetes_version}')"
    )


def leaves_minor_unset(cluster: Any) -> bool:
    """Whether a stack's ``cluster`` setting, a mapping (a stack file's YAML, or the JSON Pulumi passes, parsed) or
    none, leaves the minor to the project's default. A jobs-only stack has none to set; a setting that is no mapping
    is the loader's to report."""
    if cluster is None:
        return True
    return isinstance(cluster, dict) and "kubernetesVersion" not in cluster and "stackReference" not in cluster


def with_minor(cluster: Optional[Mapping[str, Any]], minor: str) -> dict[str, Any]:
    """The ``cluster`` setting with ``minor`` as its ``kubernetesVersion``."""
    return {**(cluster or {}), "kubernetesVersion": minor}
