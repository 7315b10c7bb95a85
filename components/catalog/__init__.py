"""Facts as data in one place: instance types, EKS platform, charts and images, EFA, FSx for Lustre, prices, quotas.

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
from components.catalog.fsx import (
    FSX_CAPACITY_STEP_GIB,
    FSX_CSI_ADDON,
    FSX_CSI_CONTROLLER_SA,
    FSX_CSI_DRIVER,
    FSX_DEPLOYMENT_TYPE,
    FSX_DRA_EVENTS,
    FSX_DRA_FS_PATH_MAX,
    FSX_DRA_S3_PATH_MAX,
    FSX_EFA_CAPACITY_STEP_GIB,
    FSX_LUSTRE_PORTS,
    FSX_LUSTRE_VERSION,
    FSX_MAX_DRAS,
    FSX_METADATA_IOPS,
    FSX_METADATA_MODES,
    FSX_MIN_CAPACITY_GIB,
    FSX_THROUGHPUT_TIERS,
    fsx_capacity_problem,
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
    STORAGE_ADDONS,
    SUPPORT_TYPES,
    SUPPORTED_KUBERNETES_VERSIONS,
    VPC_CNI_NETWORK_POLICY_CONFIG,
    KubernetesVersion,
    in_standard_support,
)
from components.catalog.prices import FSX_LUSTRE_PRICES, HOURS_PER_MONTH, SERVICE_PRICES, Price
from components.catalog.quotas import (
    FSX_LUSTRE_STORAGE_QUOTA,
    FSX_LUSTRE_STORAGE_QUOTA_DEFAULT_GIB,
    QUOTA_NAMES,
    VCPU_QUOTAS,
    quota_class,
)
from components.catalog.sources import SOURCES, Source

__all__ = [
    "AMI_TYPES",
    "AllReduceReference",
    "AutoscalerRelease",
    "CA_CHART_WITH_VOLUMEATTACHMENTS",
    "CLUSTER_AUTOSCALER",
    "DEFAULT_KUBERNETES_VERSION",
    "EFA_ENV_BY_FAMILY",
    "EFA_ENV_COMMON",
    "EFA_ONLY_MIN_VPC_CNI",
    "EKS_ADDONS",
    "EKS_UNSUPPORTED_ZONE_IDS",
    "FSX_CAPACITY_STEP_GIB",
    "FSX_CSI_ADDON",
    "FSX_CSI_CONTROLLER_SA",
    "FSX_CSI_DRIVER",
    "FSX_DEPLOYMENT_TYPE",
    "FSX_DRA_EVENTS",
    "FSX_DRA_FS_PATH_MAX",
    "FSX_DRA_S3_PATH_MAX",
    "FSX_EFA_CAPACITY_STEP_GIB",
    "FSX_LUSTRE_PORTS",
    "FSX_LUSTRE_PRICES",
    "FSX_LUSTRE_STORAGE_QUOTA",
    "FSX_LUSTRE_STORAGE_QUOTA_DEFAULT_GIB",
    "FSX_LUSTRE_VERSION",
    "FSX_MAX_DRAS",
    "FSX_METADATA_IOPS",
    "FSX_METADATA_MODES",
    "FSX_MIN_CAPACITY_GIB",
    "FSX_THROUGHPUT_TIERS",
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
    "STORAGE_ADDONS",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "SUPPORT_TYPES",
    "VPC_CNI_NETWORK_POLICY_CONFIG",
    "fsx_capacity_problem",
    "in_standard_support",
]
