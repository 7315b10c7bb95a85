"""Facts as data in one place: instance types, EKS platform, charts and images, EFA, prices, quotas.

Every fact names its public source (:mod:`components.catalog.sources`). Components, the plan and
the config loader read these tables; nothing else hard-codes a GPU count, an EFA interface count,
a price or a chart version. Conventions of this project (labels, taints, paths) are not facts and
live in :mod:`components.scheduling` and :mod:`components.conventions`.
"""

from components.catalog.charts import CLUSTER_AUTOSCALER_IMAGES, HELM_CHARTS, IMAGES, MANIFESTS, HelmChart, ReleaseManifest
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
    NVIDIA_AMI_FAMILIES,
    SUPPORTED_KUBERNETES_VERSIONS,
)
from components.catalog.prices import HOURS_PER_MONTH, SERVICE_PRICES, Price
from components.catalog.quotas import QUOTA_NAMES, VCPU_QUOTAS, quota_class
from components.catalog.sources import SOURCES, Source

__all__ = [
    "AMI_TYPES",
    "AllReduceReference",
    "CLUSTER_AUTOSCALER_IMAGES",
    "Catalog",
    "DEFAULT_KUBERNETES_VERSION",
    "EFA_ENV_BY_FAMILY",
    "EFA_ENV_COMMON",
    "EFA_HUGEPAGES_2MI",
    "EFA_ONLY_MIN_VPC_CNI",
    "EKS_ADDONS",
    "HELM_CHARTS",
    "HOURS_PER_MONTH",
    "HelmChart",
    "IMAGES",
    "INSTANCE_TYPES",
    "MANIFESTS",
    "InstanceType",
    "NVIDIA_AMI_FAMILIES",
    "Price",
    "QUOTA_NAMES",
    "REFERENCE_ALLREDUCE",
    "ReleaseManifest",
    "SERVICE_PRICES",
    "SOURCES",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "Source",
    "VCPU_QUOTAS",
    "quota_class",
]
