"""``EtcdRendezvous``: etcd for torchrun's ``etcd-v2`` rendezvous backend."""

from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import IMAGES
from components.conventions import COMMON_LABELS, ETCD_APP, IMAGE_PULL_POLICY, NO_EVICT, TRAINING_IMAGE_UID
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.naming import k8s_name
from components.workloads.pods import cluster_ip_service, container_security

ETCD_CLIENT_PORT = 2379
#: An unprivileged user for etcd without a shared volume: the image (distroless, static binaries) runs as root by
#: default and needs no user of its own; the data folder is an ``emptyDir`` owned by this group (``fsGroup``).
ETCD_UID = 65532
DATA_DIR = "/var/lib/etcd"
#: Where the shared claim is mounted in the etcd pod; the data lives in ``etcd/<instance>`` below it.
SHARED_DIR = "/shared"


class EtcdRendezvousArgs(TypedDict):
    """Inputs of :class:`EtcdRendezvous`."""

    namespace: pulumi.Input[str]
    """Namespace (the training namespace)."""
    node_selector: NotRequired[Mapping[str, str]]
    """Where etcd runs (the system nodes)."""
    image: NotRequired[str]
    """etcd image; default the catalog's etcd 3.5 (the last release with the v2 API)."""
    pvc_name: NotRequired[pulumi.Input[str]]
    """A ReadWriteMany claim (the shared volume) whose ``etcd/<instance>`` folder keeps etcd's data, so the
    rendezvous survives etcd's rescheduling; etcd then runs as the volume's owner (the training image's user).
    Without it, an ``emptyDir`` that dies with the pod."""


class EtcdRendezvous(pulumi.ComponentResource):
    """A single-member etcd 3.5 with the v2 API enabled (torchrun's etcd-v2 rendezvous), as a
    Deployment and a ClusterIP Service.

    With ``pvc_name`` its data is on the shared volume and survives a reschedule; without, a restart makes the
    agents rendezvous again in an empty etcd (docs/explanation/failures.md says what each case does to a run). It
    needs a ``kubernetes`` provider in ``opts``."""

    service_name: pulumi.Output[str]
    """Name of the etcd Service."""
    endpoint: pulumi.Output[str]
    """``<service>.<namespace>.svc.cluster.local:2379``: the rendezvous endpoint."""

    @checks_args
    def __init__(self, name: str, args: EtcdRendezvousArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:EtcdRendezvous", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        selector = {"app.kubernetes.io/name": ETCD_APP, "app.kubernetes.io/instance": k8s_name(name)}
        labels = {**COMMON_LABELS, **selector}
        deployment = self._deployment(name, args, selector, labels)
        service = cluster_ip_service(
            self,
            name,
            object_name=name,
            namespace=args["namespace"],
            labels=labels,
            selector=selector,
            port=("client", ETCD_CLIENT_PORT),
            after=deployment,
        )
        self.service_name = service.metadata.name
        self.endpoint = pulumi.Output.concat(
            service.metadata.name, ".", service.metadata.namespace, ".svc.cluster.local:", str(ETCD_CLIENT_PORT)
        )
        self.register_outputs({"service_name": self.service_name, "endpoint": self.endpoint})

    def _deployment(
        self, name: str, args: EtcdRendezvousArgs, selector: dict[str, str], labels: dict[str, str]
    ) -> k8s.apps.v1.Deployment:
        """One etcd pod, replaced with ``Recreate``: its data on the shared claim when there is one, else in an
        ``emptyDir``."""
        shared = args.get("pvc_name")
        uid = TRAINING_IMAGE_UID if shared is not None else ETCD_UID
        volumes: list[k8s.core.v1.VolumeArgsDict] = (
            [{"name": "shared", "persistent_volume_claim": {"claim_name": shared}}]
            if shared is not None
            else [{"name": "data", "empty_dir": {"size_limit": "2Gi"}}]
        )
        return k8s.apps.v1.Deployment(
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
                        # no fsGroup on the shared volume: the kubelet would walk (and chown) all of it
                        "security_context": {
                            "run_as_non_root": True,
                            "run_as_user": uid,
                            "run_as_group": uid,
                            **({} if shared is not None else {"fs_group": uid}),
                            "seccomp_profile": {"type": "RuntimeDefault"},
                        },
                        "containers": [_container(name, args.get("image"), shared is not None)],
                        "volumes": volumes,
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self),
        )


def _container(name: str, image: Optional[str], shared: bool) -> k8s.core.v1.ContainerArgsDict:
    """etcd with the v2 API on the client port, its data in ``etcd/<instance>`` of the shared volume or in
    ``DATA_DIR``."""
    data_dir = f"{SHARED_DIR}/etcd/{k8s_name(name)}" if shared else DATA_DIR
    mounts: list[k8s.core.v1.VolumeMountArgsDict] = (
        [{"name": "shared", "mount_path": SHARED_DIR}] if shared else [{"name": "data", "mount_path": DATA_DIR}]
    )
    return {
        "name": "etcd",
        "image": image or IMAGES["etcd"].ref,
        "image_pull_policy": IMAGE_PULL_POLICY,
        "command": ["/usr/local/bin/etcd"],
        "args": [
            "--name=rendezvous",
            f"--data-dir={data_dir}",
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
        "volume_mounts": mounts,
        # etcd writes only its data folder
        "security_context": container_security(read_only_root=True),
    }
