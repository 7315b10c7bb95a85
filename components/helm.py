"""One way to install a vendor's Helm chart: a release pinned to the catalog's version, rolled back
when it does not become ready."""

from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import HelmChart

#: Seconds Helm waits for a release's resources to become ready before rolling it back.
RELEASE_TIMEOUT_S = 600


def pinned_release(
    parent: pulumi.Resource,
    name: str,
    chart: HelmChart,
    *,
    release_name: str,
    namespace: str,
    values: pulumi.Input[dict[str, Any]],
    version: Optional[str] = None,
    depends_on: Optional[Sequence[pulumi.Resource]] = None,
    create_namespace: bool = False,
) -> k8s.helm.v3.Release:
    """Release ``{name}-release`` of ``chart`` at ``version`` (default the catalog's pin), atomic. A chart in an OCI
    registry (``repo`` ``oci://...``) is named by its full reference, with no repository (Helm's OCI support,
    https://helm.sh/docs/topics/registries/)."""
    oci = chart.repo.startswith("oci://")
    return k8s.helm.v3.Release(
        f"{name}-release",
        name=release_name,
        chart=f"{chart.repo}/{chart.chart}" if oci else chart.chart,
        version=version or chart.version,
        repository_opts=None if oci else {"repo": chart.repo},
        namespace=namespace,
        create_namespace=create_namespace or None,
        values=values,
        atomic=True,
        cleanup_on_fail=True,
        timeout=RELEASE_TIMEOUT_S,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on or [])),
    )
