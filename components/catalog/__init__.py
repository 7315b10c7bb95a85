"""Facts as data in one place: instance types, EKS platform, charts and images, EFA, prices, quotas.

Every fact names its public source (:mod:`components.catalog.sources`). Components, the plan and
the config loader read these tables; nothing else hard-codes a GPU count, an EFA interface count,
a price or a chart version. Conventions of this project (labels, taints, paths) are not facts and
live in :mod:`components.scheduling` and :mod:`components.conventions`.
"""

from components.catalog.charts import (
    BASE_IMAGES,
    CA_CHART_WITH_VOLUMEATTACHMENTS,
    CLUSTER_AUTOSCALER,
    HELM_CHARTS,
    IMAGES,
    MANIFESTS,
    AutoscalerRelease,
    BaseImage,
    HelmChart,
    ReleaseManifest,
)
from components.catalog.efa import (
    EFA_ENV_BY_FAMILY,
    EFA_ENV_COMMON,
    EFA_HUGEPAGES_2MI,
    REFERENCE_ALLREDUCE,
    AllReduceReference,
)
from components.catalog.instances import INSTANCE_TYPES, Catalog, InstanceType
from components.catalog.platform import (
    AMI_TYPES,
    DEFAULT_KUBERNETES_VERSION,
    EFA_ONLY_MIN_VPC_CNI,
    EKS_ADDONS,
    EKS_UNSUPPORTED_ZONE_IDS,
    KUBERNETES_VERSIONS,
    LOG_RETENTION_DAYS,
    NVIDIA_AMI_FAMILIES,
    SUPPORT_TYPES,
    SUPPORTED_KUBERNETES_VERSIONS,
    VPC_CNI_NETWORK_POLICY_CONFIG,
    KubernetesVersion,
    in_standard_support,
)
from components.catalog.prices import HOURS_PER_MONTH, SERVICE_PRICES, Price
from components.catalog.quotas import QUOTA_NAMES, VCPU_QUOTAS, quota_class
from components.catalog.sources import SOURCES, Source

__all__ = [
    "AMI_TYPES",
    "AllReduceReference",
    "AutoscalerRelease",
    "BASE_IMAGES",
    "BaseImage",
    "CA_CHART_WITH_VOLUMEATTACHMENTS",
    "CLUSTER_AUTOSCALER",
    "DEFAULT_KUBERNETES_VERSION",
    "EFA_ENV_BY_FAMILY",
    "EFA_ENV_COMMON",
    "EFA_ONLY_MIN_VPC_CNI",
    "EKS_ADDONS",
    "EKS_UNSUPPORTED_ZONE_IDS",
    "HELM_CHARTS",
    "HelmChart",
    "IMAGES",
    "KUBERNETES_VERSIONS",
    "KubernetesVersion",
    "LOG_RETENTION_DAYS",
    "MANIFESTS",
    "NVIDIA_AMI_FAMILIES",
    "REFERENCE_ALLREDUCE",
    "ReleaseManifest",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "SUPPORT_TYPES",
    "VPC_CNI_NETWORK_POLICY_CONFIG",
    "in_standard_support",
]
