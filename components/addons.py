"""The version of an EKS managed add-on a component installs: one way, for every add-on."""

from typing import Optional

import pulumi
import pulumi_aws as aws


def addon_version(
    parent: pulumi.Resource, addon_name: str, kubernetes_version: pulumi.Input[str], pinned: Optional[str] = None
) -> pulumi.Input[str]:
    """``pinned`` if set, else the add-on's default version for the Kubernetes minor (EKS's ``DescribeAddonVersions``
    with ``most_recent=False``: the version EKS installs when none is given)."""
    if pinned:
        return pinned
    return aws.eks.get_addon_version_output(
        addon_name=addon_name,
        kubernetes_version=kubernetes_version,
        most_recent=False,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    ).version
