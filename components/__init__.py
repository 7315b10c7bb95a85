"""Reusable Pulumi components for distributed deep-learning training on AWS EKS.

Import them from another Pulumi project::

    from components import TrainingVpc, TrainingCluster, TrainingNodeGroup, NvidiaDevicePlugin, EfsStorage

Every component follows Pulumi's component anatomy: ``Component(name, args: <Name>Args, opts)``,
type token ``eks-training:index:<Name>``, children parented to the component, typed outputs.
Components take ids, ARNs, the ``eks.Cluster`` and a ``kubernetes`` provider (through ``opts``),
never instances of each other.
"""

from components.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.catalog import INSTANCE_TYPES, Catalog, InstanceType
from components.cluster import TrainingCluster, TrainingClusterArgs
from components.device_plugins import (
    EfaDevicePlugin,
    EfaDevicePluginArgs,
    NvidiaDevicePlugin,
    NvidiaDevicePluginArgs,
)
from components.image import TrainingImage, TrainingImageArgs
from components.network import TrainingVpc, TrainingVpcArgs
from components.nodegroup import TrainingNodeGroup, TrainingNodeGroupArgs
from components.storage import EfsStorage, EfsStorageArgs
from components.workloads import (
    AllReduceHealthCheck,
    AllReduceHealthCheckArgs,
    DatasetStaging,
    DatasetStagingArgs,
    ElasticTrainingJob,
    ElasticTrainingJobArgs,
    EtcdRendezvous,
    EtcdRendezvousArgs,
    EvaluationJob,
    EvaluationJobArgs,
    WorkerPlacement,
)

__all__ = [
    "AllReduceHealthCheck",
    "AllReduceHealthCheckArgs",
    "Catalog",
    "ClusterAutoscaler",
    "ClusterAutoscalerArgs",
    "DatasetStaging",
    "DatasetStagingArgs",
    "EfaDevicePlugin",
    "EfaDevicePluginArgs",
    "EfsStorage",
    "EfsStorageArgs",
    "ElasticTrainingJob",
    "ElasticTrainingJobArgs",
    "EtcdRendezvous",
    "EtcdRendezvousArgs",
    "EvaluationJob",
    "EvaluationJobArgs",
    "INSTANCE_TYPES",
    "InstanceType",
    "NvidiaDevicePlugin",
    "NvidiaDevicePluginArgs",
    "TrainingCluster",
    "TrainingClusterArgs",
    "TrainingImage",
    "TrainingImageArgs",
    "TrainingNodeGroup",
    "TrainingNodeGroupArgs",
    "TrainingVpc",
    "TrainingVpcArgs",
    "WorkerPlacement",
]
