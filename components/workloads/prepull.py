"""``ImagePrePull``: a DaemonSet that pulls an image onto a node group's nodes before the pods that run it start.

Each pod's init container is the image, pulled ``IfNotPresent`` as the jobs' pods pull it, running a no-op; its one
container then sleeps in a small pinned helper image, so the pod stays Running and the DaemonSet does not restart it.
A job's pod that starts after the pull finds the image on its node. Nothing waits for the DaemonSet
(``pulumi.com/skipAwait``).
"""

from typing import Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import IMAGES
from components.conventions import COMMON_LABELS, IMAGE_PULL_POLICY
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.naming import k8s_name
from components.scheduling import Toleration
from components.workloads.pods import container_security, pod_security

#: The helper that keeps each pod running once the image is pulled: the catalog's pinned busybox.
HOLD_IMAGE = IMAGES["busybox"].ref
#: What each pod requests (and is limited to): a no-op and a sleep, well inside the share of a node the jobs' pods
#: leave to DaemonSets (:data:`components.nodeplan.NODE_SHARE`).
CPU = "10m"
MEMORY = "64Mi"
#: The label that names a pre-pull's pods.
PREPULL_LABEL = "eks-training/prepull"
#: The annotation that names the node group whose nodes pull the image.
NODE_GROUP_ANNOTATION = "eks-training/node-group"


class ImagePrePullArgs(TypedDict):
    """Inputs of :class:`ImagePrePull`."""

    namespace: pulumi.Input[str]
    """The namespace of the pods that run the image (the jobs')."""
    image: pulumi.Input[str]
    """The image to pull, by digest."""
    command: Sequence[str]
    """A command the image runs and exits 0 from at once (``python -c ""``)."""
    node_selector: Mapping[str, str]
    """The node labels the image's pods select (the node group's)."""
    tolerations: Sequence[Toleration]
    """The tolerations of the image's pods (the node group's taints)."""
    node_group: NotRequired[pulumi.Input[str]]
    """The EKS node group whose nodes pull it, as the DaemonSet's ``eks-training/node-group`` annotation: the DaemonSet
    is created once the group exists, and its pods start as its nodes join."""
    daemon_set_name: NotRequired[str]
    """The DaemonSet's name in the namespace (default: the component's name, as a DNS label)."""


class ImagePrePull(pulumi.ComponentResource):
    """An image pulled onto the nodes a selector picks, ahead of its pods (a DaemonSet nothing waits for).
    It needs a ``kubernetes`` provider in ``opts``."""

    daemon_set_name: pulumi.Output[str]
    """The DaemonSet's name."""

    @checks_args
    def __init__(self, name: str, args: ImagePrePullArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:ImagePrePull", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        if not args["command"]:
            raise ValueError(f"{name}: command must name a no-op the image runs")
        ds_name = k8s_name(args.get("daemon_set_name") or name)
        labels = {**COMMON_LABELS, PREPULL_LABEL: ds_name}
        pod_spec = _pod_spec(args)
        daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata={
                "name": ds_name,
                "namespace": args["namespace"],
                "labels": labels,
                "annotations": {
                    "pulumi.com/skipAwait": "true",
                    **({NODE_GROUP_ANNOTATION: args["node_group"]} if "node_group" in args else {}),
                },
            },
            spec={
                "selector": {"match_labels": {PREPULL_LABEL: ds_name}},
                # a new image is pulled on every node at once: nothing needs these pods available
                "update_strategy": {"type": "RollingUpdate", "rolling_update": {"max_unavailable": "100%"}},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.daemon_set_name = daemon_set.metadata.name
        self.register_outputs({"daemon_set_name": self.daemon_set_name})


def _pod_spec(args: ImagePrePullArgs) -> k8s.core.v1.PodSpecArgsDict:
    """A pre-pull pod: the image's no-op as its init container (pulled as the jobs' pods pull it, run as their user),
    then the pinned helper's sleep, on the selected nodes."""
    resources: k8s.core.v1.ResourceRequirementsArgsDict = {
        "requests": {"cpu": CPU, "memory": MEMORY},
        "limits": {"cpu": CPU, "memory": MEMORY},
    }
    security = container_security(read_only_root=True)
    tolerations: list[k8s.core.v1.TolerationArgsDict] = [dict(t) for t in args["tolerations"]]  # type: ignore[misc]
    return {
        "node_selector": dict(args["node_selector"]),
        "tolerations": tolerations,
        "automount_service_account_token": False,
        "enable_service_links": False,
        "termination_grace_period_seconds": 0,
        # the jobs' own user: the no-op runs as the job will
        "security_context": pod_security(),
        "init_containers": [
            {
                "name": "prepull",
                "image": args["image"],
                "image_pull_policy": IMAGE_PULL_POLICY,
                "command": list(args["command"]),
                "resources": resources,
                "security_context": security,
            }
        ],
        "containers": [
            {
                "name": "hold",
                "image": HOLD_IMAGE,
                "image_pull_policy": IMAGE_PULL_POLICY,
                "command": ["sleep", "2147483647"],
                "resources": resources,
                "security_context": security,
            }
        ],
    }
