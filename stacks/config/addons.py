"""What a stack relies on of each EKS add-on's version, and the rule that refuses a version that lacks it.

:func:`addon_needs` lists, for a stack's configuration, every version-dependent setting the program passes an add-on
and every behaviour it relies on (``components.catalog.addons``: the features, and the instance types on which an add-on
runs its DCGM DaemonSet). :func:`addon_problems` refuses, before anything is registered, a version the stack would get
that lacks one: the stack's ``cluster.addonVersions``, else this project's pin for the Kubernetes minor. Without either
the cluster gets EKS's default, which only the account knows: the preflight check reads it and refuses it the same way
(:mod:`stacks.preflight.checks`), and the plan's checklist names it when preflight is off.
"""

from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog import Catalog
from components.catalog.addons import (
    ADDON_FEATURES,
    CONFIGURATION,
    DCGM_INSTANCE_TYPES,
    POD_IDENTITY,
    addon_version_for,
    pinned_version,
    ranges_text,
)
from components.catalog.operations import NODE_MONITORING_ADDON, OBSERVABILITY_ADDON
from components.nodeplan import InconsistentFacts, efa_profile
from stacks.config.cluster import ClusterConfig
from stacks.config.errors import key
from stacks.config.nodegroups import NodeGroupConfig
from stacks.config.storage import StorageConfig

#: The prefix of :attr:`AddonNeed.setting` for "runs its DCGM DaemonSet on this instance type".
DCGM = "dcgm:"


@dataclass(frozen=True)
class AddonNeed:
    """One thing the stack relies on that only some versions of an add-on have."""

    addon: str
    setting: str
    """A key of :data:`components.catalog.addons.ADDON_FEATURES` after ``<addon>:``, or ``dcgm:<instance type>``."""
    who: str
    """What in the stack needs it (a config key, or the program's own setting)."""

    @property
    def what(self) -> str:
        """What the version must have, as a message reads it."""
        if self.setting.startswith(DCGM):
            return f"{DCGM_INSTANCE_TYPES[self.addon].daemonset} on {self.setting[len(DCGM) :]}"
        return ADDON_FEATURES[f"{self.addon}:{self.setting}"].what

    @property
    def ranges_text(self) -> str:
        """The versions that have it."""
        if self.setting.startswith(DCGM):
            return ranges_text(DCGM_INSTANCE_TYPES[self.addon].instance_types[self.setting[len(DCGM) :]])
        return ranges_text(ADDON_FEATURES[f"{self.addon}:{self.setting}"].ranges)

    @property
    def lacks(self) -> str:
        """``<what> (<versions that have it>), needed by <who>``: what a message says a version lacks."""
        return f"{self.what} ({self.ranges_text}), needed by {self.who}"

    def met_by(self, version: str) -> bool:
        """Whether ``version`` of the add-on has it."""
        if self.setting.startswith(DCGM):
            return bool(DCGM_INSTANCE_TYPES[self.addon].covers(self.setting[len(DCGM) :], version))
        return ADDON_FEATURES[f"{self.addon}:{self.setting}"].supports(version)


def _gpu_types(groups: Mapping[str, NodeGroupConfig], catalog: Catalog) -> list[tuple[str, str]]:
    """(group path, instance type) of every NVIDIA type of the worker groups."""
    out = []
    for name, g in groups.items():
        for t in g.instance_types:
            facts = catalog.get(t)
            if facts is not None and facts.gpus:
                out.append((f"nodeGroups.{name}", t))
    return out


def addon_needs(
    groups: Mapping[str, NodeGroupConfig], catalog: Catalog, *, metrics: bool, storage: StorageConfig
) -> list[AddonNeed]:
    """Everything the stack relies on of its add-ons' versions (the cluster's add-ons always, the CloudWatch add-on
    with ``metrics``, the storage backend's CSI driver)."""
    needs = [
        AddonNeed("vpc-cni", CONFIGURATION + "enableNetworkPolicy", "the stack's network policies"),
        AddonNeed(
            NODE_MONITORING_ADDON,
            CONFIGURATION + "dcgmAgent.tolerations",
            "the node monitoring agent's configuration (its DCGM host engine tolerates the GPU groups' taints)",
        ),
    ]
    for name, g in groups.items():
        facts = catalog.get(g.instance_types[0])
        if facts is None or not g.uses_efa(catalog):
            continue
        try:
            efa_only = efa_profile(facts).min_vpc_cni is not None
        except InconsistentFacts:
            continue  # reported by the group's own rule
        if efa_only:
            needs.append(AddonNeed("vpc-cni", "behaviour:efa-only interfaces", f"nodeGroups.{name} ({facts.name})"))
    gpu = _gpu_types(groups, catalog)
    watched = [NODE_MONITORING_ADDON] + ([OBSERVABILITY_ADDON] if metrics else [])
    for addon in watched:
        if addon == OBSERVABILITY_ADDON:
            needs += [
                AddonNeed(addon, s, "operations.metrics")
                for s in (POD_IDENTITY, CONFIGURATION + "tolerations", CONFIGURATION + "agent.config")
            ]
        known = DCGM_INSTANCE_TYPES[addon].instance_types
        for path, t in gpu:
            if t in known and AddonNeed(addon, DCGM + t, path) not in needs:
                needs.append(AddonNeed(addon, DCGM + t, path))
    if storage.backend == "fsx":
        needs.append(AddonNeed("aws-fsx-csi-driver", POD_IDENTITY, "storage.backend"))
    else:
        needs += [
            AddonNeed("aws-efs-csi-driver", s, "storage.backend")
            for s in (POD_IDENTITY, "behaviour:subPathPattern and ensureUniqueDirectory")
        ]
    return needs


def by_addon(needs: list[AddonNeed]) -> dict[str, list[AddonNeed]]:
    """The needs grouped by add-on, in order."""
    out: dict[str, list[AddonNeed]] = {}
    for n in needs:
        out.setdefault(n.addon, []).append(n)
    return out


def version_origin(addon: str, cluster: ClusterConfig) -> Optional[str]:
    """Where the version of ``addon`` comes from, as a message reads it (``None``: EKS's default)."""
    if cluster.addon_versions.get(addon):
        return f"the stack's {key(f'cluster.addonVersions.{addon}')}"
    if pinned_version(addon, cluster.kubernetes_version) is not None:
        return f"this project's pin for Kubernetes {cluster.kubernetes_version} (components/catalog/addons.py)"
    return None


def addon_problems(needs: list[AddonNeed], cluster: ClusterConfig) -> list[str]:
    """A known version (the stack's override or this project's pin) that lacks something the stack needs."""
    problems = []
    for addon, wanted in by_addon(needs).items():
        version = addon_version_for(addon, cluster.kubernetes_version, cluster.addon_versions)
        if version is None:
            continue  # EKS's default: the preflight check reads it from the account
        unmet = [n for n in wanted if not n.met_by(version)]
        if not unmet:
            continue
        pin = pinned_version(addon, cluster.kubernetes_version)
        fix = (
            f"remove the pin to get this project's {pin.version}, which has it"
            if pin is not None and all(n.met_by(pin.version) for n in wanted)
            else (
                "pin a version that has it (aws eks describe-addon-versions --addon-name "
                f"{addon} --kubernetes-version {cluster.kubernetes_version} lists those EKS offers)"
            )
        )
        given = (
            version
            if cluster.addon_versions.get(addon)
            else f"this project's pin {version} for Kubernetes {cluster.kubernetes_version}"
        )
        problems.append(
            f"{key(f'cluster.addonVersions.{addon}')}: {given} lacks " + "; ".join(n.lacks for n in unmet) + f"; {fix}"
        )
    return problems
