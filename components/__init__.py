"""Reusable Pulumi components for distributed deep-learning training on AWS EKS.

Import them from another Pulumi project::

    from components import TrainingVpc, TrainingCluster, TrainingNodeGroup, NvidiaDevicePlugin, EfsStorage

Every component follows Pulumi's component anatomy: ``Component(name, args: <Name>Args, opts)``,
type token ``eks-training:index:<Name>``, children parented to the component.
"""

from components.catalog import INSTANCE_TYPES, Catalog, InstanceType
from components.cluster import TrainingCluster, TrainingClusterArgs
from components.device_plugins import NvidiaDevicePlugin, NvidiaDevicePluginArgs
from components.network import TrainingVpc, TrainingVpcArgs
from components.nodegroup import TrainingNodeGroup, TrainingNodeGroupArgs
from components.storage import EfsStorage, EfsStorageArgs

__all__ = [
    "Catalog",
    "EfsStorage",
    "EfsStorageArgs",
    "INSTANCE_TYPES",
    "InstanceType",
    "NvidiaDevicePlugin",
    "NvidiaDevicePluginArgs",
    "TrainingCluster",
    "TrainingClusterArgs",
    "TrainingNodeGroup",
    "TrainingNodeGroupArgs",
    "TrainingVpc",
    "TrainingVpcArgs",
]
