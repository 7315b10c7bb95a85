"""Device plugins from their vendors' Helm charts, versions pinned in the catalog.

``NvidiaDevicePlugin`` runs only on nodes labelled ``eks-training/accelerator=nvidia`` (the label GPU
node groups get) and tolerates their ``nvidia.com/gpu`` taint, so ``nvidia.com/gpu`` becomes
allocatable there. The chart's default affinity needs Node Feature Discovery labels; it is replaced
by our label.

``EfaDevicePlugin`` (AWS's eks-charts ``aws-efa-k8s-device-plugin``) runs only on nodes labelled
``eks-training/efa=true`` (EFA node groups) and tolerates the GPU taint, so
``vpc.amazonaws.com/efa`` becomes allocatable there.
"""

from typing import Any, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.catalog import EFA_LABEL, GPU_LABEL, GPU_TAINT, HELM_CHARTS


def _pinned_release(
    parent: pulumi.Resource, name: str, chart_key: str, release_name: str, namespace: str, version: str,
    values: dict[str, Any],
) -> k8s.helm.v3.Release:
    """A Helm release of a catalog chart at ``version``, rolled back if it does not become ready."""
    chart = HELM_CHARTS[chart_key]
    return k8s.helm.v3.Release(
        f"{name}-release",
        name=release_name,
        chart=chart.chart,
        version=version,
        repository_opts={"repo": chart.repo},
        namespace=namespace,
        values=values,
        atomic=True,
        cleanup_on_fail=True,
        timeout=600,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def nvidia_device_plugin_values() -> dict[str, Any]:
    """Helm values: schedule on GPU nodes only, tolerate their taint, no NFD/GFD."""
    return {
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
        "tolerations": [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"},
        ],
        "priorityClassName": "system-node-critical",
    }


class NvidiaDevicePluginArgs(TypedDict):
    """Inputs of :class:`NvidiaDevicePlugin`."""

    namespace: NotRequired[str]
    """Namespace of the release. Default ``kube-system``."""
    chart_version: NotRequired[str]
    """Override of the pinned chart version in the catalog."""


class NvidiaDevicePlugin(pulumi.ComponentResource):
    """A Helm release of ``nvidia-device-plugin`` (needs a ``kubernetes`` provider in ``opts``)."""

    release_name: pulumi.Output[str]
    """Name of the Helm release."""
    chart_version: pulumi.Output[str]
    """Chart version installed."""

    def __init__(self, name: str, args: NvidiaDevicePluginArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:NvidiaDevicePlugin", name, None, opts)
        version = args.get("chart_version") or HELM_CHARTS["nvidia-device-plugin"].version
        release = _pinned_release(
            self, name, "nvidia-device-plugin", "nvidia-device-plugin", args.get("namespace", "kube-system"),
            version, nvidia_device_plugin_values(),
        )
        self.release_name = release.name.apply(lambda n: n or "nvidia-device-plugin")
        self.chart_version = pulumi.Output.from_input(version)
        self.register_outputs({"release_name": self.release_name, "chart_version": self.chart_version})


def efa_device_plugin_values() -> dict[str, Any]:
    """Helm values: schedule on EFA nodes only and tolerate the GPU taint they carry."""
    return {
        "nodeSelector": {EFA_LABEL[0]: EFA_LABEL[1]},
        "tolerations": [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"},
            {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
        ],
    }


class EfaDevicePluginArgs(TypedDict):
    """Inputs of :class:`EfaDevicePlugin`."""

    namespace: NotRequired[str]
    """Namespace of the release. Default ``kube-system``."""
    chart_version: NotRequired[str]
    """Override of the pinned chart version in the catalog."""


class EfaDevicePlugin(pulumi.ComponentResource):
    """A Helm release of ``aws-efa-k8s-device-plugin`` (needs a ``kubernetes`` provider in ``opts``)."""

    release_name: pulumi.Output[str]
    """Name of the Helm release."""
    chart_version: pulumi.Output[str]
    """Chart version installed."""

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:EfaDevicePlugin", name, None, opts)
        version = args.get("chart_version") or HELM_CHARTS["aws-efa-k8s-device-plugin"].version
        release = _pinned_release(
            self, name, "aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", args.get("namespace", "kube-system"),
            version, efa_device_plugin_values(),
        )
        self.release_name = release.name.apply(lambda n: n or "aws-efa-k8s-device-plugin")
        self.chart_version = pulumi.Output.from_input(version)
        self.register_outputs({"release_name": self.release_name, "chart_version": self.chart_version})
