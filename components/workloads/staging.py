"""``DatasetStaging``: download, verify and extract a dataset onto the shared volume, once."""

from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.conventions import COMMON_LABELS, IMAGE_PULL_POLICY, JOB_LABEL, SHARED_MOUNT
from components.iam import s3_read_object_policy
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.naming import k8s_name
from components.ordering import ordered_after
from components.partition import current_partition
from components.pod_identity import pod_identity_role
from components.workloads.job_objects import BATCH_JOB
from components.workloads.pods import (
    SHARED_VOLUME_MOUNT,
    TMP_MOUNT,
    TMP_VOLUME,
    container_security,
    pod_security,
    shared_volume,
)
from components.workloads.toolbox import STAGE_SCRIPT
from components.workloads.waits import await_annotations, await_seconds, await_timeouts, finished

#: Minutes the staging Job may take, unless it says otherwise (``timeout_minutes``).
DEFAULT_STAGING_TIMEOUT_MINUTES = 30


def staging_command(
    source: str, data_dir: str, *, md5: Optional[str] = None, expected_bytes: Optional[int] = None
) -> list[str]:
    """The staging container's command: ``stage_data.py`` downloading ``source`` into ``data_dir``, checked
    against its size and MD5 when given (the local runner, stacks/local, runs the same)."""
    command = ["python", STAGE_SCRIPT, "--source", source, "--dest", data_dir]
    if md5:
        command += ["--md5", str(md5)]
    if expected_bytes:
        command += ["--expected-bytes", str(expected_bytes)]
    return command


class DatasetStagingArgs(TypedDict):
    """Inputs of :class:`DatasetStaging`."""

    namespace: pulumi.Input[str]
    """Training namespace (holds the PVC)."""
    pvc_name: pulumi.Input[str]
    """The shared ReadWriteMany claim."""
    image: pulumi.Input[str]
    """Training image (contains /app/stage_data.py)."""
    source: str
    """``https://...`` or ``s3://bucket/key`` of the dataset tarball."""
    dest_path: str
    """Folder under the shared volume, e.g. ``datasets/cifar10``."""
    md5: NotRequired[str]
    """Expected MD5 of the tarball."""
    expected_bytes: NotRequired[int]
    """Expected size of the tarball."""
    node_selector: NotRequired[Mapping[str, str]]
    """Where the Job runs (the system nodes)."""
    cluster_name: NotRequired[pulumi.Input[str]]
    """EKS cluster name; required for an ``s3://`` source (Pod Identity role and association)."""
    timeout_minutes: NotRequired[int]
    """The Job's deadline (Pulumi waits for it, and a minute and a half more for its failure's reason). Default 30."""


class DatasetStaging(pulumi.ComponentResource):
    """A Job that downloads, verifies and extracts the dataset onto the shared volume (idempotent:
    it exits at once when the marker of a verified copy is there). For an ``s3://`` source it runs
    as its own service account with a Pod Identity role that may read only that object.
    It needs a ``kubernetes`` provider in ``opts``."""

    job_name: pulumi.Output[str]
    """Name of the staging Job."""
    data_dir: pulumi.Output[str]
    """Path of the dataset inside the pods (``/data/<dest_path>``); resolves once the staging Job
    completed, so consumers built from it are created after the data is verified."""

    @checks_args
    def __init__(self, name: str, args: DatasetStagingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:DatasetStaging", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        data_dir = f"{SHARED_MOUNT}/{args['dest_path'].strip('/')}"
        labels = {
            **COMMON_LABELS,
            "app.kubernetes.io/name": "dataset-staging",
            "app.kubernetes.io/instance": k8s_name(name),
        }
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": k8s_name(name, "sa"), "namespace": args["namespace"], "labels": labels},
            automount_service_account_token=False,
            opts=pulumi.ResourceOptions(parent=self),
        )
        depends = self._s3_read_access(name, args, sa) if args["source"].startswith("s3://") else []
        job_name = k8s_name(name)
        job = self._job(name, args, job_name, data_dir, labels, sa, depends)
        self.job_name = finished(BATCH_JOB, job_name, job, awaited=True)
        # Resolves when the Job has completed (Pulumi awaits it; a failed one fails it): jobs that read the data wait
        # for it. Known in a preview that replaces the Job, so the jobs after it are not shown replaced with it.
        self.data_dir = ordered_after(pulumi.Output.from_input(data_dir), self.job_name)
        self.register_outputs({"job_name": self.job_name, "data_dir": self.data_dir})

    def _s3_read_access(
        self, name: str, args: DatasetStagingArgs, sa: k8s.core.v1.ServiceAccount
    ) -> list[pulumi.Resource]:
        """A Pod Identity role for the service account that may read only the ``s3://`` source; returns its
        association, which the Job waits for."""
        source = args["source"]
        bucket, _, key = source[len("s3://") :].partition("/")
        cluster_name = args.get("cluster_name")
        if cluster_name is None:
            raise ValueError(f"{name}: an s3:// source needs cluster_name")
        identity = pod_identity_role(
            self,
            name,
            cluster_name=cluster_name,
            namespace=args["namespace"],
            service_account=sa.metadata.name,
            description=f"Dataset staging job: read {source}",
            role_name=name,
            policy=current_partition(self).apply(lambda p: s3_read_object_policy(p, bucket, key)),
            policy_suffix="read",
        )
        assert identity.association is not None
        return [identity.association]

    def _job(
        self,
        name: str,
        args: DatasetStagingArgs,
        job_name: str,
        data_dir: str,
        labels: dict[str, str],
        sa: k8s.core.v1.ServiceAccount,
        depends: list[pulumi.Resource],
    ) -> k8s.batch.v1.Job:
        """The staging Job (``stage_data.py``), awaited by Pulumi until it completes or its deadline passes."""
        command = staging_command(
            args["source"], data_dir, md5=args.get("md5"), expected_bytes=args.get("expected_bytes")
        )
        deadline_s = 60 * int(args.get("timeout_minutes", DEFAULT_STAGING_TIMEOUT_MINUTES))
        return k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                "name": job_name,
                "namespace": args["namespace"],
                "labels": labels,
                "annotations": await_annotations(BATCH_JOB, True),
            },
            spec={
                "backoff_limit": 4,
                "active_deadline_seconds": deadline_s,
                "template": {
                    # a pod of a job: it may reach HTTPS endpoints and the Pod Identity agent (TrainingNetworkPolicies)
                    "metadata": {"labels": {**labels, JOB_LABEL: job_name}},
                    "spec": {
                        "restart_policy": "OnFailure",
                        "service_account_name": sa.metadata.name,
                        "automount_service_account_token": False,
                        "node_selector": dict(args.get("node_selector") or {}),
                        "security_context": pod_security(),
                        "containers": [
                            {
                                "name": "stage",
                                "image": args["image"],
                                "image_pull_policy": IMAGE_PULL_POLICY,
                                "command": command,
                                "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
                                "resources": {
                                    "requests": {"cpu": "500m", "memory": "1Gi"},
                                    "limits": {"cpu": "2", "memory": "2Gi"},
                                },
                                "volume_mounts": [SHARED_VOLUME_MOUNT, TMP_MOUNT],
                                # stage_data.py downloads and extracts inside the destination folder (the shared
                                # volume); HOME (/tmp) for boto3
                                "security_context": container_security(read_only_root=True),
                            }
                        ],
                        "volumes": [shared_volume(args["pvc_name"]), TMP_VOLUME],
                    },
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=depends,
                delete_before_replace=True,
                # not queued: its deadline runs from its creation
                custom_timeouts=await_timeouts(await_seconds(deadline_s)),
            ),
        )
