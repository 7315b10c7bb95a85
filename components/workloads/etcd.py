"""``EtcdRendezvous``: etcd for torchrun's ``etcd-v2`` rendezvous backend."""

from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.naming import k8s_name
from components.catalog import IMAGES
from components.conventions import COMMON_LABELS, ETCD_APP, NO_EVICT
from components.workloads.pods import IMAGE_PULL_POLICY, container_security

ETCD_CLIENT_PORT = 2379
#: An unprivileged user for etcd: the image (distroless, static binaries) runs as root by default and needs no
#: user of its own; the data folder is an ``emptyDir`` owned by this group (``fsGroup``).
ETCD_UID = 65532
DATA_DIR = "/var/lib/etcd"


class EtcdRendezvousArgs(TypedDict):
    """Inputs of :class:`EtcdRendezvous`."""

    namespace: pulumi.Input[str]
    """Namespace (the training namespace)."""
    node_selector: NotRequired[Mapping[str, str]]
    """Where etcd runs (the system nodes)."""
    image: NotRequired[str]
    """etcd image; default the catalog's etcd 3.5 (the last release with the v2 API)."""


class EtcdRendezvous(pulumi.ComponentResource):
    """A single-member etcd 3.5 with the v2 API enabled (torchrun's etcd-v2 rendezvous), as a
    Deployment and a ClusterIP Service.

    Rendezvous state is ephemeral (an ``emptyDir``): if etcd restarts, running agents lose their
    rendezvous keys, fail their keep-alives and exit; the Job restarts those pods (within its
    backoff limit) and they re-rendezvous against the fresh etcd and resume from the latest
    checkpoint on the shared volume. ``tests/test_training_real.py`` measures this.
    """

    service_name: pulumi.Output[str]
    """Name of the etcd Service."""
    endpoint: pulumi.Output[str]
    """``<service>.<namespace>.svc.cluster.local:2379``: the rendezvous endpoint."""

    def __init__(self, name: str, args: EtcdRendezvousArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:EtcdRendezvous", name, None, opts)
        selector = {"app.kubernetes.io/name": ETCD_APP, "app.kubernetes.io/instance": k8s_name(name)}
        labels = {**COMMON_LABELS, **selector}
        container: k8s.core.v1.ContainerArgsDict = {
            "name": "etcd",
            "image": args.get("image") or IMAGES["etcd"],
            "image_pull_policy": IMAGE_PULL_POLICY,
            "command": ["/usr/local/bin/etcd"],
            "args": [
                "--name=rendezvous",
                f"--data-dir={DATA_DIR}",
                "--enable-v2=true",
                f"--listen-client-urls=http://0.0.0.0:{ETCD_CLIENT_PORT}",
                f"--advertise-client-urls=http://{name}:{ETCD_CLIENT_PORT}",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster-state=new",
                "--auto-compaction-retention=1",
                "--quota-backend-bytes=1073741824",
            ],
            "ports": [{"name": "client", "container_port": ETCD_CLIENT_PORT}],
            "readiness_probe": {
                "http_get": {"path": "/health", "port": ETCD_CLIENT_PORT},
                "period_seconds": 5,
                "failure_threshold": 3,
            },
            "liveness_probe": {
                "http_get": {"path": "/health", "port": ETCD_CLIENT_PORT},
                "initial_delay_seconds": 15,
                "period_seconds": 10,
                "failure_threshold": 6,
            },
            "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
            "volume_mounts": [{"name": "data", "mount_path": DATA_DIR}],
            # etcd writes only its data folder (the emptyDir)
            "security_context": container_security(read_only_root=True),
        }
        deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata={"name": name, "namespace": args["namespace"], "labels": labels},
            spec={
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"match_labels": selector},
                "template": {
                    # losing etcd makes every torchrun agent exit: keep the autoscaler from moving it
                    "metadata": {"labels": labels, "annotations": dict(NO_EVICT)},
                    "spec": {
                        "node_selector": dict(args.get("node_selector") or {}),
                        "automount_service_account_token": False,
                        "security_context": {
                            "run_as_non_root": True,
                            "run_as_user": ETCD_UID,
                            "run_as_group": ETCD_UID,
                            "fs_group": ETCD_UID,
                            "seccomp_profile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container],
                        "volumes": [{"name": "data", "empty_dir": {"size_limit": "2Gi"}}],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        service = k8s.core.v1.Service(
            f"{name}-service",
            metadata={"name": name, "namespace": args["namespace"], "labels": labels},
            spec={
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": "client", "port": ETCD_CLIENT_PORT, "target_port": ETCD_CLIENT_PORT}],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[deployment]),
        )
        self.service_name = service.metadata.name
        self.endpoint = pulumi.Output.concat(
            service.metadata.name, ".", service.metadata.namespace, ".svc.cluster.local:", str(ETCD_CLIENT_PORT)
        )
        self.register_outputs({"service_name": self.service_name, "endpoint": self.endpoint})
