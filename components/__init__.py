"""Reusable Pulumi components for distributed deep-learning training on AWS EKS.

Import them from another Pulumi project (installed with pip; ``components`` in a checkout)::

    from eks_training.components import TrainingVpc, TrainingCluster, TrainingNodeGroup, DevicePlugin, EfsStorage

Every component follows Pulumi's component anatomy: ``Component(name, args: <Name>Args, opts)``, type token
``eks-training:index:<Name>``, children parented to the component, typed outputs. Args are TypedDicts of plain schema
types, so Pulumi infers a schema for other languages (the repository's ``provider/`` folder). Components take ids,
ARNs and other outputs, and a ``kubernetes`` provider through ``opts``, never instances of each other.
"""

from typing import TYPE_CHECKING, Any

from components.lazy import lazy_exports

if TYPE_CHECKING:
    import pulumi

    from components.admission import (
        Admission,
        AdmissionArgs,
        ProvisioningCheck,
        QueueFlavor,
        QueueTopology,
        TeamQueue,
    )
    from components.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
    from components.cluster import TrainingCluster, TrainingClusterArgs
    from components.device_plugins import DevicePlugin, DevicePluginArgs
    from components.image import TrainingImage, TrainingImageArgs
    from components.job_code import JobCode, JobCodeArgs
    from components.network import TrainingVpc, TrainingVpcArgs
    from components.nodegroup import TrainingNodeGroup, TrainingNodeGroupArgs
    from components.observability import FleetObservability, FleetObservabilityArgs
    from components.storage import CsiDriverArgs, EfsStorage, EfsStorageArgs, FsxLustreStorage, FsxLustreStorageArgs
    from components.workloads import (
        AllReduceHealthCheck,
        AllReduceHealthCheckArgs,
        BenchmarkCollector,
        BenchmarkCollectorArgs,
        CommandJob,
        CommandJobArgs,
        DatasetStaging,
        DatasetStagingArgs,
        EtcdRendezvous,
        EtcdRendezvousArgs,
        ImagePrePull,
        ImagePrePullArgs,
        JobSpec,
        MpiJob,
        MpiJobArgs,
        MpiOperator,
        MpiOperatorArgs,
        PyTorchJob,
        PyTorchJobArgs,
        TensorBoard,
        TensorBoardArgs,
        TensorFlowJob,
        TensorFlowJobArgs,
        TrainingNetworkPolicies,
        TrainingNetworkPoliciesArgs,
        WorkerPlacement,
    )

_exported = lazy_exports(
    __name__,
    {
        "admission": ("Admission", "AdmissionArgs", "ProvisioningCheck", "QueueFlavor", "QueueTopology", "TeamQueue"),
        "autoscaler": ("ClusterAutoscaler", "ClusterAutoscalerArgs"),
        "cluster": ("TrainingCluster", "TrainingClusterArgs"),
        "device_plugins": ("DevicePlugin", "DevicePluginArgs"),
        "image": ("TrainingImage", "TrainingImageArgs"),
        "job_code": ("JobCode", "JobCodeArgs"),
        "network": ("TrainingVpc", "TrainingVpcArgs"),
        "nodegroup": ("TrainingNodeGroup", "TrainingNodeGroupArgs"),
        "observability": ("FleetObservability", "FleetObservabilityArgs"),
        "storage": ("CsiDriverArgs", "EfsStorage", "EfsStorageArgs", "FsxLustreStorage", "FsxLustreStorageArgs"),
        "workloads": (
            "AllReduceHealthCheck",
            "AllReduceHealthCheckArgs",
            "BenchmarkCollector",
            "BenchmarkCollectorArgs",
            "CommandJob",
            "CommandJobArgs",
            "DatasetStaging",
            "DatasetStagingArgs",
            "EtcdRendezvous",
            "EtcdRendezvousArgs",
            "ImagePrePull",
            "ImagePrePullArgs",
            "JobSpec",
            "MpiJob",
            "MpiJobArgs",
            "MpiOperator",
            "MpiOperatorArgs",
            "PyTorchJob",
            "PyTorchJobArgs",
            "TensorBoard",
            "TensorBoardArgs",
            "TensorFlowJob",
            "TensorFlowJobArgs",
            "TrainingNetworkPolicies",
            "TrainingNetworkPoliciesArgs",
            "WorkerPlacement",
        ),
    },
)

#: The Pulumi package name: type tokens are ``eks-training:index:<Component>``.
PACKAGE_NAME = "eks-training"
#: The library's version (as in pyproject.toml).
__version__ = "0.1.0"

#: Every component this package exports, by name: :data:`COMPONENTS` (the provider hosts exactly these).
_COMPONENT_NAMES = (
    "TrainingVpc",
    "TrainingCluster",
    "TrainingNodeGroup",
    "DevicePlugin",
    "ClusterAutoscaler",
    "EfsStorage",
    "FsxLustreStorage",
    "TrainingImage",
    "JobCode",
    "EtcdRendezvous",
    "DatasetStaging",
    "AllReduceHealthCheck",
    "ImagePrePull",
    "PyTorchJob",
    "MpiOperator",
    "MpiJob",
    "TensorFlowJob",
    "CommandJob",
    "Admission",
    "TensorBoard",
    "TrainingNetworkPolicies",
    "BenchmarkCollector",
    "FleetObservability",
)
if TYPE_CHECKING:
    COMPONENTS: list[type[pulumi.ComponentResource]]


def __getattr__(name: str) -> Any:
    if name == "COMPONENTS":
        value = [_exported(n) for n in _COMPONENT_NAMES]
        globals()[name] = value
        return value
    return _exported(name)


__all__ = [
    "Admission",
    "AdmissionArgs",
    "AllReduceHealthCheck",
    "AllReduceHealthCheckArgs",
    "BenchmarkCollector",
    "BenchmarkCollectorArgs",
    "COMPONENTS",
    "ClusterAutoscaler",
    "ClusterAutoscalerArgs",
    "CommandJob",
    "CommandJobArgs",
    "CsiDriverArgs",
    "DatasetStaging",
    "DatasetStagingArgs",
    "DevicePlugin",
    "DevicePluginArgs",
    "EfsStorage",
    "EfsStorageArgs",
    "EtcdRendezvous",
    "EtcdRendezvousArgs",
    "ImagePrePull",
    "ImagePrePullArgs",
    "FleetObservability",
    "FleetObservabilityArgs",
    "FsxLustreStorage",
    "FsxLustreStorageArgs",
    "JobCode",
    "JobCodeArgs",
    "JobSpec",
    "MpiJob",
    "MpiJobArgs",
    "MpiOperator",
    "MpiOperatorArgs",
    "PACKAGE_NAME",
    "ProvisioningCheck",
    "PyTorchJob",
    "PyTorchJobArgs",
    "QueueFlavor",
    "QueueTopology",
    "TeamQueue",
    "TensorBoard",
    "TensorBoardArgs",
    "TensorFlowJob",
    "TensorFlowJobArgs",
    "TrainingCluster",
    "TrainingClusterArgs",
    "TrainingImage",
    "TrainingImageArgs",
    "TrainingNetworkPolicies",
    "TrainingNetworkPoliciesArgs",
    "TrainingNodeGroup",
    "TrainingNodeGroupArgs",
    "TrainingVpc",
    "TrainingVpcArgs",
    "WorkerPlacement",
]
