"""Settings of the program itself: ``autoscaler`` and ``preflight``."""

from stacks.config.base import Model


class AutoscalerConfig(Model):
    """cluster-autoscaler (key ``autoscaler``): worker groups scale between minSize and maxSize."""

    enabled: bool = True
    """Install cluster-autoscaler when there are worker groups: groups scale from zero (node-template tags for
    nvidia.com/gpu and vpc.amazonaws.com/efa) and desiredSize only applies at creation."""


class PreflightConfig(Model):
    """Account checks before anything is created (key ``preflight``)."""

    enabled: bool = True
    """Check the account before anything is created: instance types offered in the zones, vCPU quotas for the groups'
    maxSize, EKS's node group quotas, capacity reservations, EFA support, add-on versions, the minor of a cluster
    already running, the AWS CLI; set false for offline previews."""
