"""The EKS add-ons and charts an update of a running stack moves: each one's change from the version the last update
installed (:func:`addon_changes`), the one-minor steps EKS allows (:func:`addon_step_problems`), and what a move means
for the running stack (:func:`held_addon_notes`, :func:`addon_notes`)."""

from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog.addons import ONE_MINOR_STEP_ADDONS, addon_version_for, addon_version_tuple
from components.catalog.operations import CONTAINER_INSIGHTS_LOG_GROUPS, OBSERVABILITY_ADDON
from components.catalog.platform import STORAGE_ADDON
from stacks.config import key
from stacks.plan import Plan, same_cluster
from stacks.plan.installs import EKS_DEFAULT, autoscaler_version
from stacks.plan.record import recorded_entry


@dataclass(frozen=True)
class AddonChange:
    """An add-on (or chart) whose version changes, or that the update installs or removes; ``None``: EKS's default
    for the minor."""

    name: str
    old: Optional[str]
    new: Optional[str]
    change: str = "version"
    """``version``, ``installed`` (``old`` unused) or ``removed`` (``new`` unused)."""


def deployed_version(name: str, planned: Optional[str], recorded: Optional[Mapping[str, object]]) -> Optional[str]:
    """The version of ``name`` the last update installed: its record's (``recorded``), where that names one, else
    ``planned``, the old configuration's under this version of the project (no record, or EKS's default)."""
    was = recorded_entry(recorded, name)
    return was if was is not None and was != EKS_DEFAULT else planned


def addon_step_problems(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> list[str]:
    """An add-on EKS moves one minor at a time (:data:`ONE_MINOR_STEP_ADDONS`) whose version would move further from
    the one installed (:func:`deployed_version`): EKS would refuse it, after the control plane moved. A version left
    to EKS's default is not known here."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    problems = []
    for addon in ONE_MINOR_STEP_ADDONS:
        before = deployed_version(addon, addon_version_for(addon, a, old_plan.config.cluster.addon_versions), recorded)
        after = addon_version_for(addon, b, new_plan.config.cluster.addon_versions)
        was, will = (addon_version_tuple(v) if v else None for v in (before, after))
        if was is None or will is None or was[0] != will[0] or abs(will[1] - was[1]) <= 1:
            continue
        step = f"v{was[0]}.{was[1] + (1 if will[1] > was[1] else -1)}"
        then = "set the version you want" if new_plan.config.cluster.addon_versions.get(addon) else "remove it"
        problems.append(
            f"{key('cluster.addonVersions.' + addon)}: {before} -> {after} moves {abs(will[1] - was[1])} minors, and "
            f"EKS moves {addon} one minor at a time: set it to a {step} release EKS offers for Kubernetes {b} (aws eks "
            f"describe-addon-versions --addon-name {addon} --kubernetes-version {b}), run `pulumi up`, then {then} "
            "and run `pulumi up` again"
        )
    return problems


def held_addon_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """The add-on pins kept as they were across a minor move (EKS may not offer them for the new minor)."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    if a == b or not same_cluster(old_plan.config, new_plan.config):
        return []
    held = old_plan.config.cluster.addon_versions
    return [
        f"{key('cluster.addonVersions.' + addon)}: held at {version} across {a} -> {b}; preflight checks that EKS "
        f"offers it for {b}"
        for addon, version in sorted(new_plan.config.cluster.addon_versions.items())
        if version and held.get(addon) == version and addon in new_plan.addons
    ]


def _default_addon_notes(addons: tuple[AddonChange, ...], minor: str) -> list[str]:
    """An add-on that moves from a version to EKS's default for ``minor``, which ``pulumi up`` reads then
    (``aws.eks.get_addon_version``) and which may be older than the one it runs."""
    return [
        f"{a.name}: EKS's default for {minor} is read at `pulumi up` and may be older than {a.old}. To keep "
        f"{a.old} or newer, set {key('cluster.addonVersions.' + a.name)} to a version EKS offers for {minor} (aws eks "
        f"describe-addon-versions --addon-name {a.name} --kubernetes-version {minor})"
        for a in addons
        if a.old is not None and a.new is None
    ]


def _mount_addon_notes(addons: tuple[AddonChange, ...]) -> list[str]:
    """The EFS CSI driver moving: its node pods carry the mounts' TLS tunnels, so a running job's file access may
    stall while they restart (source key ``efs-csi-node-restart``)."""
    return [
        f"{a.name}: its node pods restart on every node and carry the EFS mounts' TLS tunnels, so a running job's file "
        "access may stall until the new pod restarts them: take this update between jobs"
        for a in addons
        if a.name == STORAGE_ADDON["efs"]
    ]


def _raised_default_notes(
    old_plan: Plan,
    new_plan: Plan,
    addons: tuple[AddonChange, ...],
    eks_defaults: Optional[Mapping[str, tuple[str, str]]],
) -> list[str]:
    """An add-on left to EKS's default at the same minor that still moves: EKS raised its default since the add-on
    was installed (``aws.eks.get_addon_version`` reads it at every `pulumi up`)."""
    minor = new_plan.config.cluster.kubernetes_version
    if not eks_defaults or old_plan.config.cluster.kubernetes_version != minor:
        return []
    pins = old_plan.config.cluster.addon_versions
    return [
        f"{a.name}: EKS raised its default for {minor} to {a.new} since {a.old} was installed, so this update moves "
        f"it. To keep {a.old}, set {key('cluster.addonVersions.' + a.name)} to it"
        for a in addons
        if a.name in eks_defaults
        and a.new is not None
        and a.old is not None
        and addon_version_for(a.name, minor, pins) is None  # not a pin the stack file or this project dropped
    ]


def addon_changes(
    old_plan: Plan,
    new_plan: Plan,
    recorded: Optional[Mapping[str, object]] = None,
    eks_defaults: Optional[Mapping[str, tuple[str, str]]] = None,
) -> tuple[AddonChange, ...]:
    """The EKS add-ons the stack installs before and after whose version the change moves (an add-on at EKS's default
    moves with the minor, and with EKS's default where ``eks_defaults`` holds what the cluster runs and that default),
    and the cluster autoscaler's chart and image where its minor's release differs. Each starts from the version
    installed (:func:`deployed_version`), and one the record already holds at the new version is left out. A new
    cluster (:func:`~stacks.plan.model.same_cluster`) installs every add-on it has."""
    a, b = old_plan.config.cluster.kubernetes_version, new_plan.config.cluster.kubernetes_version
    same = same_cluster(old_plan.config, new_plan.config)
    kept = old_plan.addons if same else ()
    live = eks_defaults or {}
    moves: list[tuple[str, Optional[str], Optional[str]]] = []
    for addon in (x for x in new_plan.addons if x in kept):
        before = addon_version_for(addon, a, old_plan.config.cluster.addon_versions)
        after = addon_version_for(addon, b, new_plan.config.cluster.addon_versions)
        if after is None and addon in live:  # what the cluster runs, and the default EKS installs now
            runs, default = live[addon]
            if runs != default:
                moves.append((addon, runs, default))
        elif before != after or (a != b and after is None):
            moves.append((addon, before, after))
    if same and new_plan.autoscale and a != b and autoscaler_version(a) != autoscaler_version(b):
        moves.append(("cluster-autoscaler", autoscaler_version(a), autoscaler_version(b)))
    changes = (
        AddonChange(n, before if n in live else deployed_version(n, before, recorded), after)
        for n, before, after in moves
    )
    installed = [
        AddonChange(n, None, addon_version_for(n, b, new_plan.config.cluster.addon_versions), "installed")
        for n in new_plan.addons
        if n not in kept
    ]
    removed = [
        AddonChange(
            n,
            deployed_version(n, addon_version_for(n, a, old_plan.config.cluster.addon_versions), recorded),
            None,
            "removed",
        )
        for n in kept
        if n not in new_plan.addons
    ]
    return (*(c for c in changes if c.old != c.new or c.new is None), *installed, *removed)


def addon_notes(
    old_plan: Plan,
    new_plan: Plan,
    addons: tuple[AddonChange, ...],
    eks_defaults: Optional[Mapping[str, tuple[str, str]]] = None,
) -> list[str]:
    """What the add-ons' moves mean: one left to EKS's default that moves with the minor, a default EKS raised since
    the last update, a storage driver that remounts."""
    minor = new_plan.config.cluster.kubernetes_version
    logs = [
        f"{OBSERVABILITY_ADDON} removed: Pulumi deletes its Container Insights log groups "
        f"({', '.join(CONTAINER_INSIGHTS_LOG_GROUPS)}) with it, and the jobs' logs in them: export what you need "
        "first (aws logs create-export-task)"
        for a in addons
        if a.name == OBSERVABILITY_ADDON and a.change == "removed"
    ]
    addons = tuple(a for a in addons if a.change == "version")  # an add-on installed or removed has no move to explain
    return logs + (
        _default_addon_notes(addons, minor)
        + _raised_default_notes(old_plan, new_plan, addons, eks_defaults)
        + _mount_addon_notes(addons)
    )
