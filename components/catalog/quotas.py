"""Service quotas the preflight reads: EC2 vCPU quotas (service code ``ec2``) per instance class and market
(source key ``ec2-vcpu-quotas``), EKS's managed node group quotas (source key ``eks-quotas``) and the FSx for Lustre
storage quota (source key ``fsx-quotas``)."""

from typing import Mapping

#: Quota class -> (On-Demand code, Spot code).
VCPU_QUOTAS: Mapping[str, tuple[str, str]] = {
    "P": ("L-417A185B", "L-7212CCBC"),
    "G": ("L-DB2E81BA", "L-3819A6DF"),
    "Trn": ("L-2C3B7624", "L-6B0D517C"),
    "Inf": ("L-1945791B", "L-B5D1601B"),
    "Standard": ("L-1216C47A", "L-34B43A08"),
}

#: Names of the quotas as the Service Quotas console shows them (used when a quota cannot be read).
QUOTA_NAMES: Mapping[str, str] = {
    "L-417A185B": "Running On-Demand P instances",
    "L-7212CCBC": "All P Spot Instance Requests",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-2C3B7624": "Running On-Demand Trn instances",
    "L-6B0D517C": "All Trn Spot Instance Requests",
    "L-1945791B": "Running On-Demand Inf instances",
    "L-B5D1601B": "All Inf Spot Instance Requests",
    "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
    "L-8F1B9C74": "Lustre Persistent_2 storage capacity",
    "L-BD136A63": "Nodes per managed node group",
    "L-6D54EA21": "Managed node groups per cluster",
}

#: EKS's managed node group quotas (service code ``eks``): (quota code, AWS's default), used when Service Quotas has
#: neither an applied nor a default value (source key ``eks-quotas``). Both are adjustable.
EKS_NODES_PER_GROUP_QUOTA: tuple[str, int] = ("L-BD136A63", 450)
EKS_GROUPS_PER_CLUSTER_QUOTA: tuple[str, int] = ("L-6D54EA21", 30)

#: FSx for Lustre PERSISTENT_2 storage of all file systems in the Region, in GiB: (service code, quota
#: code) and AWS's default value, used when Service Quotas has neither an applied nor a default value
#: (source key ``fsx-quotas``).
FSX_LUSTRE_STORAGE_QUOTA: tuple[str, str] = ("fsx", "L-8F1B9C74")
FSX_LUSTRE_STORAGE_QUOTA_DEFAULT_GIB = 100800


def quota_class(instance_type: str) -> str:
    """The vCPU quota class of an instance type (``P``, ``G``, ``Trn``, ``Inf`` or ``Standard``)."""
    family = instance_type.split(".", 1)[0]
    if family.startswith("trn"):
        return "Trn"
    if family.startswith("inf"):
        return "Inf"
    if family.startswith(("g", "vt")):
        return "G"
    if family.startswith("p") and len(family) > 1 and family[1].isdigit():
        return "P"
    return "Standard"
