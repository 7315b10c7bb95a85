"""Third-party Helm charts and container images, installed at deploy time and pinned."""

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True, kw_only=True)
class HelmChart:
    """A vendor's Helm chart, version pinned."""

    chart: str
    """Chart name in the repository."""
    repo: str
    """Helm repository URL."""
    version: str
    """Pinned chart version."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""


#: Helm charts by key.
HELM_CHARTS: Mapping[str, HelmChart] = {
    "nvidia-device-plugin": HelmChart(
        chart="nvidia-device-plugin",
        repo="https://nvidia.github.io/k8s-device-plugin",
        version="0.20.0",
        source="nvidia-device-plugin-chart",
    ),
    "cluster-autoscaler": HelmChart(
        chart="cluster-autoscaler",
        repo="https://kubernetes.github.io/autoscaler",
        version="9.43.1",
        source="cluster-autoscaler-chart",
    ),
    "aws-efa-k8s-device-plugin": HelmChart(
        chart="aws-efa-k8s-device-plugin",
        repo="https://aws.github.io/eks-charts",
        version="v0.5.30",
        source="efa-device-plugin-chart",
    ),
}

#: cluster-autoscaler image per Kubernetes minor (the autoscaler's minor must match the cluster's;
#: source key ``cluster-autoscaler-releases``).
CLUSTER_AUTOSCALER_IMAGES: Mapping[str, str] = {
    "1.31": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.31.0",
    "1.32": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.32.3",
    "1.33": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.33.6",
    "1.34": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.5",
}

#: Container images the workloads run (pinned).
IMAGES: Mapping[str, str] = {
    # etcd 3.5 is the last release with the v2 API torchrun's etcd-v2 rendezvous needs (source key
    # ``etcd-v2-rendezvous``).
    "etcd": "quay.io/coreos/etcd:v3.5.19",
    # A shell with chown for the one-shot Job that hands a new Lustre file system's directories to the
    # training image's user (source key ``busybox-image``).
    "busybox": "public.ecr.aws/docker/library/busybox:1.37.0",
}
