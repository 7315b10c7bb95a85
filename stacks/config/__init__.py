"""The stack configuration: one model per section, rules across sections, and the loader.

:func:`load_config` reads every ``eks-training:*`` key of the configuration it is given (a plain function: the
program passes Pulumi's, the tools the stack file's) and raises one :class:`ConfigError` naming each bad key before
the program registers anything.
"""

from stacks.config.base import version_text, version_tuple
from stacks.config.cluster import ClusterConfig
from stacks.config.datasets import CIFAR10_BYTES, CIFAR10_MD5, CIFAR10_URL, DatasetConfig
from stacks.config.errors import NAMESPACE, ConfigError, key
from stacks.config.images import ImageBuildConfig, ImageConfig
from stacks.config.instance_facts import InstanceFactsConfig
from stacks.config.jobs import TOOLBOX_IMAGE, HealthCheckConfig, JobConfig
from stacks.config.loader import SECTIONS, StackConfig, all_config, load_config, raw_config
from stacks.config.network import (
    ExistingVpcConfig,
    NetworkConfig,
    default_private_subnet_cidrs,
    default_public_subnet_cidrs,
)
from stacks.config.nodegroups import NodeGroupConfig, SystemNodeGroupConfig, TaintConfig
from stacks.config.settings import AutoscalerConfig, PreflightConfig
from stacks.config.storage import DataRepositoryConfig, FsxConfig, StorageConfig

__all__ = [
    "AutoscalerConfig",
    "CIFAR10_BYTES",
    "CIFAR10_MD5",
    "CIFAR10_URL",
    "ClusterConfig",
    "ConfigError",
    "DataRepositoryConfig",
    "DatasetConfig",
    "ExistingVpcConfig",
    "FsxConfig",
    "HealthCheckConfig",
    "ImageBuildConfig",
    "ImageConfig",
    "JobConfig",
    "InstanceFactsConfig",
    "NAMESPACE",
    "NetworkConfig",
    "NodeGroupConfig",
    "PreflightConfig",
    "SECTIONS",
    "StackConfig",
    "StorageConfig",
    "SystemNodeGroupConfig",
    "TaintConfig",
    "TOOLBOX_IMAGE",
    "all_config",
    "default_private_subnet_cidrs",
    "default_public_subnet_cidrs",
    "key",
    "load_config",
    "raw_config",
    "version_text",
    "version_tuple",
]
