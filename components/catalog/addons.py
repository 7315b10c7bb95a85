"""EKS managed add-ons: the version the program installs for each Kubernetes minor, and what it relies on that only
some versions have.

Three tables, each row with its public sources:

- :data:`ADDON_FEATURES`: every setting the program passes to an add-on, and every behaviour it relies on, with the
  versions that have it.
- :data:`DCGM_INSTANCE_TYPES`: the instance types on which an add-on runs its DCGM DaemonSet; a type missing from a
  version's list gets no GPU metrics or health from it.
- :data:`ADDON_VERSIONS`: the version installed per add-on and minor, where a source shows EKS offers it. Without a
  row, EKS's default applies, which preflight checks against :data:`ADDON_FEATURES`. ``cluster.addonVersions``
  overrides both.

:func:`addon_version_for` is the one place that decides which version a stack gets."""

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from components.catalog.platform import EFA_ONLY_MIN_VPC_CNI

Version = tuple[int, int, int]

#: An EKS add-on version: ``v<major>.<minor>.<patch>-eksbuild.<build>``.
ADDON_VERSION_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-eksbuild\.(\d+)$")
_LEADING_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def addon_version_tuple(version: str) -> Optional[Version]:
    """``"v1.18.5-eksbuild.1"`` -> ``(1, 18, 5)``; ``None`` for a string that does not start with a version."""
    m = _LEADING_VERSION.match(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def version_text(version: Version) -> str:
    """``(1, 18, 5)`` -> ``v1.18.5`` (how EKS spells add-on versions)."""
    return "v" + ".".join(str(x) for x in version)


@dataclass(frozen=True)
class VersionRange:
    """Versions from ``since`` (included) to ``before`` (excluded; ``None``: every later version)."""

    since: Version
    before: Optional[Version] = None

    def __contains__(self, version: object) -> bool:
        return isinstance(version, tuple) and self.since <= version and (self.before is None or version < self.before)

    def text(self) -> str:
        """``every version`` / ``v4.8.0 or later`` / ``v4.8.0 up to (not including) v5.0.0``."""
        if self.before is None and self.since == (0, 0, 0):
            return "every version"
        if self.before is None:
            return f"{version_text(self.since)} or later"
        return f"{version_text(self.since)} up to (not including) {version_text(self.before)}"


def in_ranges(version: str, ranges: Iterable[VersionRange]) -> bool:
    """Whether the add-on version ``version`` is in one of ``ranges``."""
    v = addon_version_tuple(version)
    return v is not None and any(v in r for r in ranges)


def ranges_text(ranges: Iterable[VersionRange]) -> str:
    """The ranges as a user reads them: ``v4.8.0 up to (not including) v5.0.0, or v5.3.0 or later``."""
    return ", or ".join(r.text() for r in ranges)


@dataclass(frozen=True, kw_only=True)
class AddonFeature:
    """A setting the program passes to an add-on, or a behaviour of the add-on the program relies on, and the add-on
    versions that have it."""

    addon: str
    setting: str
    """What the program sets: a key path of the add-on's configuration values (``configurationValues.dcgmAgent.
    tolerations``), an argument of the add-on itself (``podIdentityAssociations``), or a behaviour
    (``behaviour:...``)."""
    what: str
    """What it does for the stack, as a message reads it."""
    ranges: tuple[VersionRange, ...]
    """The versions that have it."""
    sources: tuple[str, ...]

    def supports(self, version: str) -> bool:
        """Whether ``version`` of the add-on has this feature."""
        return in_ranges(version, self.ranges)


#: The configuration-value prefix of :attr:`AddonFeature.setting`.
CONFIGURATION = "configurationValues."
#: The add-on argument that associates IAM roles with its service accounts through EKS Pod Identity.
POD_IDENTITY = "podIdentityAssociations"

_ALL: tuple[VersionRange, ...] = (VersionRange((0, 0, 0)),)


def _features(*rows: AddonFeature) -> Mapping[str, AddonFeature]:
    return {f"{f.addon}:{f.setting}": f for f in rows}


#: Every version-dependent setting and behaviour, keyed ``<add-on>:<setting>``. ``tests/mock/test_addon_versions.py``
#: checks that every key of every add-on's configuration values and every Pod Identity association the program registers
#: has a row here, and that the version it registers has it.
ADDON_FEATURES: Mapping[str, AddonFeature] = _features(
    AddonFeature(
        addon="vpc-cni",
        setting=CONFIGURATION + "enableNetworkPolicy",
        what="NetworkPolicy enforcement",
        ranges=(VersionRange((1, 14, 0)),),
        sources=("vpc-cni-network-policy",),
    ),
    AddonFeature(
        addon="vpc-cni",
        setting="behaviour:efa-only interfaces",
        what="efa-only network interfaces",
        ranges=(VersionRange(EFA_ONLY_MIN_VPC_CNI),),
        sources=("eks-efa",),
    ),
    AddonFeature(
        addon="eks-node-monitoring-agent",
        setting=CONFIGURATION + "dcgmAgent.tolerations",
        what="dcgmAgent.tolerations (the DCGM host engine on the tainted GPU nodes; EKS refuses configuration keys a "
        "version's schema lacks)",
        ranges=(VersionRange((1, 3, 0)),),
        sources=("eks-node-monitoring-agent-dcgm-tolerations",),
    ),
    AddonFeature(
        addon="amazon-cloudwatch-observability",
        setting=POD_IDENTITY,
        what="EKS Pod Identity for the CloudWatch agent",
        ranges=(VersionRange((3, 1, 0)),),
        sources=("cloudwatch-observability-addon",),
    ),
    AddonFeature(
        addon="amazon-cloudwatch-observability",
        setting=CONFIGURATION + "tolerations",
        what="tolerations (the agent's DaemonSets on the tainted GPU nodes)",
        ranges=(VersionRange((1, 7, 0)),),
        sources=("cloudwatch-observability-chart-history",),
    ),
    AddonFeature(
        addon="amazon-cloudwatch-observability",
        setting=CONFIGURATION + "agent.config",
        what="agent.config (the agent's configuration: Container Insights without Application Signals)",
        ranges=(VersionRange((1, 4, 0)),),
        sources=("cloudwatch-observability-chart-history", "cloudwatch-observability-chart"),
    ),
    AddonFeature(
        addon="aws-efs-csi-driver",
        setting=POD_IDENTITY,
        what="EKS Pod Identity for the EFS CSI controller",
        ranges=(VersionRange((2, 0, 5)),),
        sources=("efs-csi-pod-identity",),
    ),
    AddonFeature(
        addon="aws-efs-csi-driver",
        setting="behaviour:subPathPattern and ensureUniqueDirectory",
        what="the StorageClass's subPathPattern and ensureUniqueDirectory (one stable directory per claim, found "
        "again on a kept file system)",
        ranges=(VersionRange((1, 7, 0)),),
        sources=("efs-csi-subpath-pattern",),
    ),
    AddonFeature(
        addon="aws-fsx-csi-driver",
        setting=POD_IDENTITY,
        what="EKS Pod Identity for the FSx CSI controller",
        ranges=_ALL,
        sources=("eks-fsx-csi-addon",),
    ),
)


@dataclass(frozen=True, kw_only=True)
class DcgmCoverage:
    """Where an add-on runs its DCGM DaemonSet: the instance types its node affinity lists, per version."""

    addon: str
    daemonset: str
    """What runs there and what is lost elsewhere, as a message reads it."""
    instance_types: Mapping[str, tuple[VersionRange, ...]]
    """Instance type -> the versions whose node affinity lists it (every NVIDIA type of the catalog)."""
    sources: tuple[str, ...]

    def covers(self, instance_type: str, version: str) -> Optional[bool]:
        """Whether ``version`` runs the DaemonSet on ``instance_type``; ``None`` for a type this table does not know."""
        ranges = self.instance_types.get(instance_type)
        return None if ranges is None else in_ranges(version, ranges)


_CW_ALL = (VersionRange((1, 5, 0)),)
_NMA_ALL = (VersionRange((1, 0, 0)),)

#: The DCGM DaemonSets, by add-on. The CloudWatch chart lists p6-b200.48xlarge from 4.8.0 ("add blackwell GPU
#: instances", 2025-12-12) and on its 5.x line only from 5.3.0 (5.0.0 to 5.2.3 branched before it); the node monitoring
#: agent lists p3dn, p4de and p6-b200 from 1.4.3 and p5en from 1.4.0.
DCGM_INSTANCE_TYPES: Mapping[str, DcgmCoverage] = {
    c.addon: c
    for c in (
        DcgmCoverage(
            addon="amazon-cloudwatch-observability",
            daemonset="its DCGM exporter (node_gpu_utilization and the other GPU metrics the dashboard and the "
            "idle-GPU alarms read)",
            instance_types={
                **dict.fromkeys(
                    (
                        "g4dn.xlarge",
                        "g5.xlarge",
                        "g5.12xlarge",
                        "g5.48xlarge",
                        "p3.2xlarge",
                        "p3.16xlarge",
                        "p3dn.24xlarge",
                        "p4d.24xlarge",
                        "p4de.24xlarge",
                        "p5.48xlarge",
                    ),
                    _CW_ALL,
                ),
                **dict.fromkeys(("g6.xlarge", "g6.48xlarge", "g6e.48xlarge"), (VersionRange((2, 1, 2)),)),
                "p5e.48xlarge": (VersionRange((2, 3, 0)),),
                "p5en.48xlarge": (VersionRange((3, 0, 0)),),
                "p6-b200.48xlarge": (VersionRange((4, 8, 0), (5, 0, 0)), VersionRange((5, 3, 0))),
            },
            sources=("cloudwatch-observability-dcgm-instance-types",),
        ),
        DcgmCoverage(
            addon="eks-node-monitoring-agent",
            daemonset="its DCGM host engine (without it the agent reports DCGMError and watches no GPU: no GPU fault "
            "reaches node auto repair)",
            instance_types={
                **dict.fromkeys(
                    (
                        "g4dn.xlarge",
                        "g5.xlarge",
                        "g5.12xlarge",
                        "g5.48xlarge",
                        "g6.xlarge",
                        "g6.48xlarge",
                        "g6e.48xlarge",
                        "p3.2xlarge",
                        "p3.16xlarge",
                        "p4d.24xlarge",
                        "p5.48xlarge",
                        "p5e.48xlarge",
                    ),
                    _NMA_ALL,
                ),
                "p5en.48xlarge": (VersionRange((1, 4, 0)),),
                **dict.fromkeys(("p3dn.24xlarge", "p4de.24xlarge", "p6-b200.48xlarge"), (VersionRange((1, 4, 3)),)),
            },
            sources=("eks-node-monitoring-agent-dcgm-instance-types",),
        ),
    )
}


@dataclass(frozen=True, kw_only=True)
class AddonPin:
    """The version the program installs for one Kubernetes minor, and the sources showing EKS offers it there."""

    version: str
    sources: tuple[str, ...]


def _pins(rows: Mapping[str, tuple[str, str]]) -> Mapping[str, AddonPin]:
    return {minor: AddonPin(version=version, sources=(source,)) for minor, (version, source) in rows.items()}


#: The version each add-on runs at, per Kubernetes minor, where a public source shows that version offered for it (an
#: add-on or a minor missing here gets EKS's default, checked by preflight). Every pin has every feature of
#: :data:`ADDON_FEATURES` and runs its DCGM DaemonSet on every NVIDIA type of the catalog (``tests/unit/
#: test_addon_catalog.py``); a pin is moved here, with its source, when a minor is added (issue: day-two upgrades).
ADDON_VERSIONS: Mapping[str, Mapping[str, AddonPin]] = {
    "vpc-cni": _pins(
        {
            "1.32": ("v1.20.4-eksbuild.2", "vpc-cni-versions-eks-blueprints"),
            "1.33": ("v1.20.4-eksbuild.2", "vpc-cni-versions-eks-blueprints"),
            "1.34": ("v1.20.4-eksbuild.2", "vpc-cni-versions-eks-blueprints"),
            "1.35": ("v1.21.1-eksbuild.1", "vpc-cni-versions-eks-blueprints"),
            "1.36": ("v1.22.4-eksbuild.3", "vpc-cni-1.36-describe-addon-versions"),
        }
    ),
    "amazon-cloudwatch-observability": _pins(
        {
            "1.32": ("v4.10.1-eksbuild.1", "cloudwatch-observability-versions-eks-blueprints"),
            "1.33": ("v4.10.1-eksbuild.1", "cloudwatch-observability-versions-eks-blueprints"),
            "1.34": ("v4.10.1-eksbuild.1", "cloudwatch-observability-versions-eks-blueprints"),
            "1.35": ("v5.3.1-eksbuild.1", "cloudwatch-observability-versions-eks-blueprints"),
        }
    ),
}


#: Add-ons whose version EKS moves one minor at a time, up or down (UpdateAddon refuses a longer step), with the
#: source key that shows it.
ONE_MINOR_STEP_ADDONS: Mapping[str, str] = {
    "vpc-cni": "vpc-cni-one-minor-step",
    "eks-pod-identity-agent": "pod-identity-agent-one-minor-step",
}


def pinned_version(addon: str, kubernetes_version: str) -> Optional[AddonPin]:
    """This project's pin of ``addon`` for the minor, if a public source showed one."""
    return ADDON_VERSIONS.get(addon, {}).get(kubernetes_version)


def addon_version_for(addon: str, kubernetes_version: str, overrides: Mapping[str, str]) -> Optional[str]:
    """The version of ``addon`` a cluster of ``kubernetes_version`` gets: the stack's override
    (``cluster.addonVersions``), else this project's pin for the minor, else ``None`` (EKS's default, known only to the
    account)."""
    if overrides.get(addon):
        return overrides[addon]
    pin = pinned_version(addon, kubernetes_version)
    return pin.version if pin is not None else None


def configuration_settings(addon: str, values: Mapping[str, object]) -> set[str]:
    """The :attr:`AddonFeature.setting` values that configuration ``values`` of ``addon`` use: each key path down to a
    leaf (a list or a scalar) belongs to the feature whose key path is a prefix of it. A key path no feature of the
    add-on covers raises ``KeyError`` (a configuration key without a version fact)."""
    prefixes = [f.setting[len(CONFIGURATION) :] for f in features_of(addon) if f.setting.startswith(CONFIGURATION)]
    used: set[str] = set()

    def walk(node: Mapping[str, object], path: str) -> None:
        for k, v in node.items():
            here = f"{path}.{k}" if path else str(k)
            owner = next((p for p in prefixes if here == p or here.startswith(p + ".")), None)
            if owner is not None:
                used.add(CONFIGURATION + owner)
            elif isinstance(v, Mapping) and any(p.startswith(here + ".") for p in prefixes):
                walk(v, here)
            else:
                raise KeyError(
                    f"{addon}: configuration key {here} has no version fact in components.catalog.addons.ADDON_FEATURES"
                )

    walk(values, "")
    return used


def features_of(addon: str) -> list[AddonFeature]:
    """The features of one add-on."""
    return [f for f in ADDON_FEATURES.values() if f.addon == addon]


def missing_features(addon: str, version: str, settings: Iterable[str]) -> list[AddonFeature]:
    """The features among ``settings`` (:attr:`AddonFeature.setting` values of ``addon``) that ``version`` lacks; a
    setting without a row in :data:`ADDON_FEATURES` is a programming error."""
    out = []
    for setting in settings:
        feature = ADDON_FEATURES.get(f"{addon}:{setting}")
        if feature is None:
            raise KeyError(f"{addon}:{setting} has no version fact in components.catalog.addons.ADDON_FEATURES")
        if not feature.supports(version):
            out.append(feature)
    return out


def require_version(addon: str, version: Optional[str], settings: Iterable[str]) -> None:
    """Raise ``ValueError`` when a known ``version`` of ``addon`` lacks one of ``settings`` (a component's guard for
    callers without the stack's rules; ``None``, EKS's default, is the account's to check)."""
    if version is None:
        return
    missing = missing_features(addon, version, settings)
    if missing:
        raise ValueError(
            f"{addon} {version} lacks "
            + "; ".join(f"{f.what} ({ranges_text(f.ranges)})" for f in missing)
            + "; pin a version that has it, or leave the version to components.catalog.addons.ADDON_VERSIONS"
        )
