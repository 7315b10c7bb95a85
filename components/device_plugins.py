"""``DevicePlugin``: a vendor's Kubernetes device plugin from its Helm chart, version pinned in the catalog.

``kind: nvidia`` (NVIDIA's ``nvidia-device-plugin``) runs only on nodes labelled
``eks-training/accelerator=nvidia`` (GPU node groups), so ``nvidia.com/gpu`` becomes allocatable there; the chart's
default affinity needs Node Feature Discovery labels and is replaced by our label. ``kind: efa`` (AWS's eks-charts
``aws-efa-k8s-device-plugin``) runs only on nodes labelled ``eks-training/efa=true`` (EFA node groups), so
``vpc.amazonaws.com/efa`` becomes allocatable there; the chart's default affinity lists instance types and is
replaced by our label too. Both tolerate every taint (:data:`EVERY_TAINT`).
"""

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, TypedDict

import pulumi
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import CHART_IMAGES, HELM_CHARTS, chart_image_values
from components.helm import pinned_release
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.scheduling import EFA_LABEL, GPU_LABEL

#: A device plugin runs on every node its selector picks, whatever the node's taints: the GPU taint, a group's own
#: (``nodeGroups.<name>.taints``). A plugin kept off a node leaves its devices unallocatable and every job that needs
#: them Pending. The node daemons of the EKS add-ons these nodes run tolerate every taint alike: the VPC CNI and the Pod
#: Identity agent (their charts' ``tolerations``), the EFS and FSx CSI nodes (``node.tolerations``,
#: ``node.tolerateAllTaints``), the node monitoring agent
#: (:data:`components.catalog.operations.NODE_MONITORING_DEFAULT_TOLERATIONS`).
EVERY_TAINT: tuple[dict[str, str], ...] = ({"operator": "Exists"},)


def nvidia_device_plugin_values(version: str) -> dict[str, Any]:
    """Helm values for chart ``version``: the catalog's image pinned by digest (the chart writes ``repository:tag``,
    the tag carries the digest; it must be the chart's release, ``v`` + its appVersion, which is its version),
    schedule on GPU nodes only, whatever their taints, no NFD/GFD."""
    ref = CHART_IMAGES["nvidia-device-plugin"].ref
    image = chart_image_values(ref)
    if not image["tag"].startswith(f"v{version.lstrip('v')}@"):
        raise ValueError(
            f"the device plugin image {ref} is not the chart {version}'s release: pin its digest in "
            "components/catalog/charts.py CHART_IMAGES with the chart"
        )
    return {
        "image": image,
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
        "nodeSelector": {GPU_LABEL[0]: GPU_LABEL[1]},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": GPU_LABEL[0], "operator": "In", "values": [GPU_LABEL[1]]}]}
                    ]
                }
            }
        },
        "tolerations": [dict(t) for t in EVERY_TAINT],
        "priorityClassName": "system-node-critical",
    }


def efa_device_plugin_values(version: str) -> dict[str, Any]:
    """Helm values (any chart ``version``): the chart's own image (by tag: tests/mock/test_pod_security.py says why),
    schedule on EFA nodes only, whatever their taints and instance type (the chart's default affinity lists the types
    its release knew, :data:`~components.catalog.EFA_CHART_INSTANCE_TYPES`)."""
    return {
        "nodeSelector": {EFA_LABEL[0]: EFA_LABEL[1]},
        "supportedInstanceLabels": {"keys": [EFA_LABEL[0]], "values": [EFA_LABEL[1]]},
        "tolerations": [dict(t) for t in EVERY_TAINT],
    }


@dataclass(frozen=True)
class _Plugin:
    chart_key: str
    values: Callable[[str], dict[str, Any]]
    """chart version -> the release's values."""


#: The device plugins by kind: catalog chart and values.
DEVICE_PLUGINS: Mapping[str, _Plugin] = {
    "nvidia": _Plugin("nvidia-device-plugin", nvidia_device_plugin_values),
    "efa": _Plugin("aws-efa-k8s-device-plugin", efa_device_plugin_values),
}


class DevicePluginArgs(TypedDict):
    """Inputs of :class:`DevicePlugin`."""

    kind: str
    """``nvidia`` (NVIDIA GPUs) or ``efa`` (Elastic Fabric Adapter interfaces)."""
    namespace: NotRequired[str]
    """Namespace of the release. Default ``kube-system``."""
    chart_version: NotRequired[str]
    """Override of the chart version pinned in the catalog."""


class DevicePlugin(pulumi.ComponentResource):
    """A Helm release of a device plugin chart (needs a ``kubernetes`` provider in ``opts``)."""

    release_name: pulumi.Output[str]
    """Name of the Helm release."""
    chart_version: pulumi.Output[str]
    """Chart version installed."""

    @checks_args
    def __init__(self, name: str, args: DevicePluginArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:DevicePlugin", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        plugin = DEVICE_PLUGINS.get(args["kind"])
        if plugin is None:
            raise ValueError(f"{name}: kind must be one of {', '.join(DEVICE_PLUGINS)}, got {args['kind']!r}")
        chart = HELM_CHARTS[plugin.chart_key]
        version = args.get("chart_version") or chart.version
        release = pinned_release(
            self,
            name,
            chart,
            release_name=chart.chart,
            namespace=args.get("namespace", "kube-system"),
            values=plugin.values(version),
            version=version,
        )
        self.release_name = release.name.apply(lambda n: n or chart.chart)
        self.chart_version = pulumi.Output.from_input(version)
        self.register_outputs({"release_name": self.release_name, "chart_version": self.chart_version})
