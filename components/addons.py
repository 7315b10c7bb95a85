"""The version of an EKS managed add-on a component installs: one way, for every add-on."""

from typing import Iterable, Optional

import pulumi
import pulumi_aws as aws

from components.catalog.addons import addon_version_for, require_version


def addon_version(
    parent: pulumi.Resource,
    addon_name: str,
    kubernetes_version: str,
    pinned: Optional[str] = None,
    settings: Iterable[str] = (),
) -> pulumi.Input[str]:
    """``pinned`` if set, else this project's pin of the add-on for the Kubernetes minor
    (:data:`components.catalog.addons.ADDON_VERSIONS`), else the add-on's default version for the minor (EKS's
    ``DescribeAddonVersions`` with ``most_recent=False``: the version EKS installs when none is given). ``settings``
    (:attr:`~components.catalog.addons.AddonFeature.setting` values) are what the caller passes the add-on: a known
    version that lacks one raises ``ValueError`` before anything is registered; EKS's default is the account's to
    check (the stack's preflight)."""
    version = addon_version_for(addon_name, kubernetes_version, {addon_name: pinned} if pinned else {})
    require_version(addon_name, version, settings)
    if version is not None:
        return version
    return aws.eks.get_addon_version_output(
        addon_name=addon_name,
        kubernetes_version=kubernetes_version,
        most_recent=False,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    ).version
