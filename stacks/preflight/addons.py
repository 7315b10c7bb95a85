"""Check 5: the version of each EKS add-on the stack relies on a version of (``stacks.config.addons``) is one EKS offers
for the cluster's Kubernetes version and has what the stack relies on.

A known version (the stack's ``cluster.addonVersions``, else this project's pin for the minor) must be offered for the
minor; without one the cluster gets EKS's default, read here (``eks:DescribeAddonVersions``) and checked against what
the stack relies on. A failure names the newest offered version that has it.
"""

import re

from components.catalog.addons import addon_version_for
from stacks.config import key, version_tuple
from stacks.config.addons import AddonNeed, by_addon, version_origin
from stacks.plan import Plan
from stacks.plan.checklist import other_pins, plan_addon_needs
from stacks.preflight.aws import AwsClient
from stacks.preflight.findings import SKIP_HINT, AwsCallError, Finding


def addon_version_order(version: str) -> tuple[tuple[int, ...], int]:
    """Sort key of EKS add-on versions: ``v1.20.1-eksbuild.3`` -> ``((1, 20, 1), 3)``."""
    build = re.search(r"eksbuild\.(\d+)", version)
    return version_tuple(version), int(build.group(1)) if build else 0


def _lacks(needs: list[AddonNeed]) -> str:
    return "; ".join(n.lacks for n in needs)


def _has(needs: list[AddonNeed]) -> str:
    return "; ".join(n.what for n in needs)


def check_addons(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """One finding per add-on the stack relies on a version of, and per other add-on ``cluster.addonVersions`` pins."""
    cluster = plan.config.cluster
    k8s = cluster.kubernetes_version
    for addon, pin in other_pins(plan):
        _check_pinned(addon, pin, k8s, aws, findings)
    for addon, needs in by_addon(plan_addon_needs(plan)).items():
        offered = _offered(addon, needs, k8s, aws, findings)
        if offered is None:
            continue
        good = sorted((v for v, _ in offered if all(n.met_by(v) for n in needs)), key=addon_version_order)
        k = key(f"cluster.addonVersions.{addon}")
        advice = (
            f"pin {k} to {good[-1]} (the newest EKS offers for Kubernetes {k8s} that has what the stack relies on)"
            if good
            else f"EKS offers no {addon} for Kubernetes {k8s} that has it: choose another cluster.kubernetesVersion"
        )
        version = addon_version_for(addon, k8s, cluster.addon_versions)
        if version is not None:
            findings.append(_known_version(plan, addon, version, needs, offered, advice))
        else:
            findings.append(_eks_default(addon, needs, offered, k8s, advice))


def _offered(
    addon: str, needs: list[AddonNeed], k8s: str, aws: AwsClient, findings: list[Finding]
) -> list[tuple[str, bool]] | None:
    """The versions EKS offers for the minor, each with whether it is EKS's default; ``None``, with its finding,
    when EKS could not be asked or offers none."""
    try:
        offered = aws.addon_versions(addon, k8s)
    except AwsCallError as exc:
        findings.append(
            Finding(
                False,
                key(f"cluster.addonVersions.{addon}"),
                f"could not read the {addon} versions EKS offers for Kubernetes {k8s} ({exc}); the stack relies on "
                f"{'; '.join(n.what for n in needs)} {SKIP_HINT}",
            )
        )
        return None
    if not offered:
        findings.append(
            Finding(
                False,
                key("cluster.kubernetesVersion"),
                f"EKS offers no {addon} version for Kubernetes {k8s} in {aws.region}; choose a Kubernetes version "
                "EKS supports there",
            )
        )
        return None
    return offered


def _known_version(
    plan: Plan, addon: str, version: str, needs: list[AddonNeed], offered: list[tuple[str, bool]], advice: str
) -> Finding:
    """A version the stack or this project pins: offered for the minor, with what the stack relies on."""
    cluster = plan.config.cluster
    k, k8s = key(f"cluster.addonVersions.{addon}"), cluster.kubernetes_version
    origin = version_origin(addon, cluster)
    if version not in {v for v, _ in offered}:
        return Finding(False, k, f"{addon} {version} ({origin}) is not offered by EKS for Kubernetes {k8s}; {advice}")
    unmet = [n for n in needs if not n.met_by(version)]
    return Finding(
        not unmet,
        k,
        f"{addon} {version} ({origin}) is offered for Kubernetes {k8s}"
        + (f" but lacks {_lacks(unmet)}; {advice}" if unmet else f" and has {_has(needs)}"),
    )


def _eks_default(addon: str, needs: list[AddonNeed], offered: list[tuple[str, bool]], k8s: str, advice: str) -> Finding:
    """No pin: EKS's default for the minor, with what the stack relies on."""
    k = key(f"cluster.addonVersions.{addon}")
    defaults = [v for v, is_default in offered if is_default]
    if not defaults:
        return Finding(
            False,
            k,
            f"EKS names no default {addon} version for Kubernetes {k8s}, so the version the cluster gets is "
            f"unknown; {advice}",
        )
    unmet = [n for n in needs if not n.met_by(defaults[0])]
    return Finding(
        not unmet,
        k,
        f"without a pin the cluster gets EKS's default {addon} for Kubernetes {k8s}, {defaults[0]}, which "
        + (f"lacks {_lacks(unmet)}; {advice}" if unmet else f"has {_has(needs)}"),
    )


def _check_pinned(addon: str, version: str, k8s: str, aws: AwsClient, findings: list[Finding]) -> None:
    """A version ``cluster.addonVersions`` pins for an add-on the stack relies on nothing of: EKS offers it for the
    minor (a pin held across a minor move may not be)."""
    k = key(f"cluster.addonVersions.{addon}")
    try:
        offered = [v for v, _ in aws.addon_versions(addon, k8s)]
    except AwsCallError as exc:
        findings.append(
            Finding(
                False, k, f"could not read the {addon} versions EKS offers for Kubernetes {k8s} ({exc}) {SKIP_HINT}"
            )
        )
        return
    if version in offered:
        findings.append(Finding(True, k, f"{addon} {version} (cluster.addonVersions) is offered for Kubernetes {k8s}"))
        return
    newest = max(offered, key=addon_version_order) if offered else None
    findings.append(
        Finding(
            False,
            k,
            f"{addon} {version} (cluster.addonVersions) is not offered by EKS for Kubernetes {k8s}; "
            + (
                f"pin {newest} (the newest EKS offers for it), or remove the pin for EKS's default"
                if newest
                else f"EKS offers no {addon} for Kubernetes {k8s} in {aws.region}"
            ),
        )
    )
