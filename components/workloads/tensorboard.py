"""``TensorBoard``: a TensorBoard server for the jobs' log folders on the shared volume."""

from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from components.args import checks_args
from components.conventions import COMMON_LABELS, IMAGE_PULL_POLICY, SHARED_MOUNT
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.naming import k8s_name
from components.workloads.pods import (
    TMP_MOUNT,
    TMP_VOLUME,
    cluster_ip_service,
    container_security,
    pod_security,
    shared_volume,
)

TENSORBOARD_PORT = 6006
#: Seconds between TensorBoard's re-reads of the log folders.
RELOAD_SECONDS = 60


def logdir_spec(log_dirs: Mapping[str, str]) -> str:
    """TensorBoard's ``--logdir_spec``: ``name:path`` pairs, one run group per job."""
    return ",".join(f"{name}:{path}" for name, path in sorted(log_dirs.items()))


def tensorboard_command(
    log_dirs: Mapping[str, str], *, port: int = TENSORBOARD_PORT, host: Optional[str] = None
) -> list[str]:
    """The ``tensorboard`` command serving ``log_dirs`` (job name -> log folder, :func:`logdir_spec`) on
    ``port``: on every interface of the pod (``--bind_all``, reached through its Service) unless ``host``
    names one address, re-reading the folders every :data:`RELOAD_SECONDS`."""
    return [
        "tensorboard",
        "--logdir_spec",
        logdir_spec(log_dirs),
        *(["--bind_all"] if host is None else ["--host", host]),
        "--port",
        str(port),
        "--reload_interval",
        str(RELOAD_SECONDS),
    ]


class TensorBoardArgs(TypedDict):
    """Inputs of :class:`TensorBoard`."""

    namespace: pulumi.Input[str]
    """Namespace (holds the shared claim)."""
    pvc_name: pulumi.Input[str]
    """The shared claim, mounted read-only."""
    image: pulumi.Input[str]
    """An image with the ``tensorboard`` command (the toolbox image)."""
    log_dirs: Mapping[str, str]
    """Job name -> its TensorBoard log folder inside the pods."""
    node_selector: Mapping[str, str]
    """Where TensorBoard runs (the system nodes)."""


class TensorBoard(pulumi.ComponentResource):
    """A Deployment serving the jobs' log folders (read-only) and a ClusterIP Service; reach it with
    ``kubectl port-forward`` (no load balancer, no public endpoint; with TrainingNetworkPolicies no pod may
    connect to it, and port-forward, which dials it inside its own network namespace, still works).
    It needs a ``kubernetes`` provider in ``opts``."""

    service_name: pulumi.Output[str]
    """Name of the ClusterIP Service."""
    port_forward_command: pulumi.Output[str]
    """``kubectl port-forward`` to http://127.0.0.1:6006."""

    @checks_args
    def __init__(self, name: str, args: TensorBoardArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:TensorBoard", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        app = k8s_name(name)
        selector = {"app.kubernetes.io/name": "tensorboard", "app.kubernetes.io/instance": app}
        labels = {**COMMON_LABELS, **selector}
        deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata={"name": app, "namespace": args["namespace"], "labels": labels},
            spec={
                "replicas": 1,
                "selector": {"match_labels": selector},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "automount_service_account_token": False,
                        "node_selector": dict(args["node_selector"]),
                        "security_context": pod_security(),
                        "containers": [_container(args)],
                        "volumes": [shared_volume(args["pvc_name"]), TMP_VOLUME],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        service = cluster_ip_service(
            self,
            name,
            object_name=app,
            namespace=args["namespace"],
            labels=labels,
            selector=selector,
            port=("http", TENSORBOARD_PORT),
            after=deployment,
        )
        self.service_name = service.metadata.name
        self.port_forward_command = pulumi.Output.concat(
            "kubectl port-forward -n ",
            service.metadata.namespace,
            " svc/",
            service.metadata.name,
            f" {TENSORBOARD_PORT}:{TENSORBOARD_PORT}",
        )
        self.register_outputs({"service_name": self.service_name, "port_forward_command": self.port_forward_command})


def _container(args: TensorBoardArgs) -> k8s.core.v1.ContainerArgsDict:
    """``tensorboard`` over the jobs' log folders, the shared volume mounted read-only."""
    probe: k8s.core.v1.ProbeArgsDict = {"http_get": {"path": "/", "port": TENSORBOARD_PORT}, "period_seconds": 10}
    # a hung server is restarted; loading many runs can take a while, so it gets minutes first
    liveness: k8s.core.v1.ProbeArgsDict = {
        "http_get": {"path": "/", "port": TENSORBOARD_PORT},
        "initial_delay_seconds": 60,
        "period_seconds": 30,
        "timeout_seconds": 10,
        "failure_threshold": 6,
    }
    return {
        "name": "tensorboard",
        "image": args["image"],
        "command": tensorboard_command(args["log_dirs"]),
        "image_pull_policy": IMAGE_PULL_POLICY,
        "env": [{"name": "HOME", "value": "/tmp"}],
        "ports": [{"name": "http", "container_port": TENSORBOARD_PORT}],
        "readiness_probe": probe,
        "liveness_probe": liveness,
        "resources": {
            "requests": {"cpu": "100m", "memory": "512Mi"},
            "limits": {"memory": "2Gi"},
        },
        "volume_mounts": [
            {"name": "shared", "mount_path": SHARED_MOUNT, "read_only": True},
            TMP_MOUNT,
        ],
        "security_context": container_security(read_only_root=True),
    }
