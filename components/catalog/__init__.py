"""Facts as data in one place: instance types, EKS platform, charts and images, EFA, prices, quotas.

Every fact names its public source (:mod:`components.catalog.sources`). Components, the plan and
the config loader read these tables; nothing else hard-codes a GPU count, an EFA interface count,
a price or a chart version. Conventions of this project (labels, taints, paths) are not facts and
live in :mod:`components.scheduling` and :mod:`components.conventions`.
"""

from components.catalog.charts import (
    CA_CHART_WITH_VOLUMEATTACHMENTS,
    CLUSTER_AUTOSCALER,
    HELM_CHARTS,
    IMAGES,
    MANIFESTS,
    AutoscalerRelease,
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
from components.catalog.network import (
    CLUSTER_DNS_NAMESPACE,
    CLUSTER_DNS_POD_LABELS,
    DNS_PORT,
    HTTPS_PORT,
    INSTANCE_METADATA_IPV4,
    NAMESPACE_NAME_LABEL,
    POD_IDENTITY_AGENT_IPV4,
    POD_IDENTITY_AGENT_PORT,
)
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
    "CA_CHART_WITH_VOLUMEATTACHMENTS",
    "CLUSTER_AUTOSCALER",
    "CLUSTER_DNS_NAMESPACE",
    "CLUSTER_DNS_POD_LABELS",
    "DEFAULT_KUBERNETES_VERSION",
    "DNS_PORT",
    "EFA_ENV_BY_FAMILY",
    "EFA_ENV_COMMON",
    "EFA_ONLY_MIN_VPC_CNI",
    "EKS_ADDONS",
    "EKS_UNSUPPORTED_ZONE_IDS",
    "HELM_CHARTS",
    "HTTPS_PORT",
    "HelmChart",
    "IMAGES",
    "INSTANCE_METADATA_IPV4",
    "KUBERNETES_VERSIONS",
    "KubernetesVersion",
    "LOG_RETENTION_DAYS",
    "MANIFESTS",
    "NAMESPACE_NAME_LABEL",
    "NVIDIA_AMI_FAMILIES",
    "POD_IDENTITY_AGENT_IPV4",
    "POD_IDENTITY_AGENT_PORT",
    "REFERENCE_ALLREDUCE",
    "ReleaseManifest",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "SUPPORT_TYPES",
    "VPC_CNI_NETWORK_POLICY_CONFIG",
    "in_standard_support",
]
