"""Settings of the program itself: ``autoscaler`` and ``preflight``."""

from stacks.config.base import Model


class AutoscalerConfig(Model):
    """cluster-autoscaler (key ``autoscaler``): worker groups scale between minSize and maxSize."""

    enabled: bool = True


class PreflightConfig(Model):
    """Account checks before anything is created (key ``preflight``)."""

    enabled: bool = True
