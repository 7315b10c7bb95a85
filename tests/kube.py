"""What Kubernetes does to a container spec before the process starts (the product's own implementation, which the
local runner uses; see :mod:`stacks.local.kube`)."""

from stacks.local.kube import COMPLETION_INDEX_ANNOTATION, container_env, expand, process_argv

__all__ = ["COMPLETION_INDEX_ANNOTATION", "container_env", "expand", "process_argv"]
