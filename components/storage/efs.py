"""``EfsStorage``: an encrypted EFS file system shared by every training pod.

Creates the file system, a mount target in every private subnet behind a security group that
admits NFS (TCP 2049) only from the cluster's nodes, the EFS CSI driver as an EKS managed add-on
with its own least-privilege Pod Identity role (not the node role), a StorageClass (EFS access
points, dynamic provisioning), the training namespace and a ReadWriteMany PersistentVolumeClaim.

With ``retain_on_delete`` the file system is kept on ``pulumi destroy`` (its mount targets and
security group are deleted, so the VPC can go); give its id as ``existing_file_system_id`` to a
new stack and the StorageClass's stable per-PVC directories find the datasets and checkpoints again.
"""

from typing import Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog.addons import POD_IDENTITY
from components.catalog.platform import STORAGE_ADDON
from components.conventions import COMMON_LABELS, DEFAULT_CLAIM_NAME, DEFAULT_NAMESPACE, TRAINING_IMAGE_UID
from components.iam import managed_policy_arn
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.partition import current_partition
from components.storage.csi import CsiDriverArgs, csi_addon, shared_claim, training_namespace
from components.storage.defaults import (
    DEFAULT_EFS_CAPACITY,
    DEFAULT_EFS_PERFORMANCE_MODE,
    DEFAULT_EFS_THROUGHPUT_MODE,
    DEFAULT_STORAGE_CLASS_NAME,
)
from components.storage.providers import split_kubernetes_provider

#: The AWS managed policy of the EFS CSI controller (access points on tagged file systems).
EFS_CSI_POLICY = "service-role/AmazonEFSCSIDriverPolicy"
EFS_CSI_CONTROLLER_SA = "efs-csi-controller-sa"
EFS_CSI_PROVISIONER = "efs.csi.aws.com"
#: What the StorageClass and the add-on rely on that only some versions of the driver have
#: (``components.catalog.addons.ADDON_FEATURES``): Pod Identity, and one stable directory per claim.
EFS_ADDON_SETTINGS = (POD_IDENTITY, "behaviour:subPathPattern and ensureUniqueDirectory")
#: POSIX user and group the access points enforce: the training image's user.
VOLUME_UID = TRAINING_IMAGE_UID


class EfsStorageArgs(TypedDict):
    """Inputs of :class:`EfsStorage`."""

    csi_driver: CsiDriverArgs
    """The cluster its CSI driver add-on goes into, and when."""
    vpc_id: pulumi.Input[str]
    """VPC of the cluster."""
    subnet_ids: Sequence[pulumi.Input[str]]
    """Private subnets: one mount target each (list length must be known)."""
    node_security_group_id: pulumi.Input[str]
    """Security group of the nodes; the only source allowed to reach NFS."""
    namespace: NotRequired[str]
    """Namespace created for training workloads, holding the PVC. Default ``training``."""
    pvc_name: NotRequired[str]
    """Name of the ReadWriteMany PVC. Default ``shared-data``."""
    storage_class_name: NotRequired[str]
    """Name of the StorageClass. Default ``efs-shared``."""
    capacity: NotRequired[str]
    """Requested size (EFS is elastic; Kubernetes needs a number). Default ``1Ti``."""
    throughput_mode: NotRequired[str]
    """``elastic`` (default) or ``bursting``."""
    performance_mode: NotRequired[str]
    """``generalPurpose`` (default) or ``maxIO``."""
    kms_key_arn: NotRequired[pulumi.Input[str]]
    """Customer-managed KMS key; default the AWS-managed EFS key."""
    retain_on_delete: NotRequired[bool]
    """Keep the file system (and data) on ``pulumi destroy``. Default False."""
    existing_file_system_id: NotRequired[pulumi.Input[str]]
    """Use this EFS file system (e.g. one kept by ``retain_on_delete``) instead of creating one."""
    backup: NotRequired[bool]
    """Enable AWS Backup for the file system. Default False."""
    tags: NotRequired[dict[str, str]]
    """AWS tags."""


class EfsStorage(pulumi.ComponentResource):
    """EFS file system, mount targets, NFS security group, CSI add-on with its role, StorageClass,
    namespace and ReadWriteMany PVC (needs a ``kubernetes`` provider in ``opts``)."""

    file_system_id: pulumi.Output[str]
    """EFS file system id."""
    security_group_id: pulumi.Output[str]
    """Security group of the mount targets."""
    mount_target_ids: pulumi.Output[list[str]]
    """Mount target ids, one per subnet."""
    csi_role_arn: pulumi.Output[str]
    """IAM role of the EFS CSI controller."""
    storage_class_name: pulumi.Output[str]
    """StorageClass name."""
    namespace: pulumi.Output[str]
    """Namespace of the PVC (the training namespace)."""
    pvc_name: pulumi.Output[str]
    """Name of the ReadWriteMany PVC that workloads mount."""

    @checks_args
    def __init__(self, name: str, args: EfsStorageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        tags = dict(args.get("tags") or {})
        retain = bool(args.get("retain_on_delete", False))
        # registered without the Kubernetes provider, which only the Kubernetes objects take: the file system starts
        # at once instead of once the cluster's nodes are up (components/storage/providers.py)
        opts, kubernetes = split_kubernetes_provider(opts)
        super().__init__("eks-training:index:EfsStorage", name, None, opts)
        warn_without_kubernetes_provider(self, name, kubernetes)
        sg = self._security_group(name, args, tags)
        file_system_id = self._file_system(name, args, tags, retain)
        mount_targets = [
            aws.efs.MountTarget(
                f"{name}-mt-{i}",
                file_system_id=file_system_id,
                subnet_id=subnet_id,
                security_groups=[sg.id],
                # EFS keeps one mount target per zone of a file system: a new subnet in the same zone replaces the
                # mount target, and the old one must go first (else MountTargetConflict)
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            for i, subnet_id in enumerate(args["subnet_ids"])
        ]
        identity, addon = csi_addon(
            self,
            name,
            args["csi_driver"],
            addon_name=STORAGE_ADDON["efs"],
            label="EFS",
            service_account=EFS_CSI_CONTROLLER_SA,
            settings=EFS_ADDON_SETTINGS,
            tags=tags,
            # the AWS-managed EFS CSI policy: access points on tagged file systems
            managed_policy_arns=[current_partition(self).apply(lambda p: managed_policy_arn(p, EFS_CSI_POLICY))],
        )
        storage_class = self._storage_class(name, args, file_system_id, kubernetes, [addon, *mount_targets])
        namespace = training_namespace(self, name, args.get("namespace", DEFAULT_NAMESPACE), kubernetes)
        pvc = shared_claim(
            self,
            name,
            pvc_name=args.get("pvc_name", DEFAULT_CLAIM_NAME),
            namespace=namespace.metadata.name,
            size=args.get("capacity", DEFAULT_EFS_CAPACITY),
            storage_class_name=storage_class.metadata.name,
            kubernetes=kubernetes,
        )

        self.file_system_id = pulumi.Output.from_input(file_system_id)
        self.security_group_id = sg.id
        self.mount_target_ids = pulumi.Output.all(*[m.id for m in mount_targets])
        self.csi_role_arn = identity.role.arn
        self.storage_class_name = storage_class.metadata.name
        self.namespace = namespace.metadata.name
        self.pvc_name = pvc.metadata.name
        self.register_outputs(
            {
                "file_system_id": self.file_system_id,
                "security_group_id": self.security_group_id,
                "mount_target_ids": self.mount_target_ids,
                "csi_role_arn": self.csi_role_arn,
                "storage_class_name": self.storage_class_name,
                "namespace": self.namespace,
                "pvc_name": self.pvc_name,
            }
        )

    def _security_group(self, name: str, args: EfsStorageArgs, tags: dict[str, str]) -> aws.ec2.SecurityGroup:
        """The mount targets' security group, admitting NFS (TCP 2049) only from the nodes."""
        child = pulumi.ResourceOptions(parent=self)
        sg = aws.ec2.SecurityGroup(
            f"{name}-nfs-sg",
            description="NFS from the EKS nodes to the EFS mount targets",
            vpc_id=args["vpc_id"],
            tags={**tags, "Name": f"{name}-nfs"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-nfs-from-nodes",
            security_group_id=sg.id,
            referenced_security_group_id=args["node_security_group_id"],
            ip_protocol="tcp",
            from_port=2049,
            to_port=2049,
            description="NFS from cluster nodes",
            opts=child,
        )
        return sg

    def _file_system(self, name: str, args: EfsStorageArgs, tags: dict[str, str], retain: bool) -> pulumi.Input[str]:
        """The id of the adopted file system, or of a new encrypted one with its backup policy."""
        existing_fs = args.get("existing_file_system_id")
        if existing_fs:
            # A file system kept from an earlier stack (retain_on_delete): adopt it by id.
            return existing_fs
        # Only the file system (the data) is kept on destroy; its mount targets and security group go, so the VPC
        # can still be deleted.
        kept = pulumi.ResourceOptions(parent=self, retain_on_delete=retain)
        file_system = aws.efs.FileSystem(
            f"{name}-fs",
            encrypted=True,
            kms_key_id=args.get("kms_key_arn"),
            throughput_mode=args.get("throughput_mode", DEFAULT_EFS_THROUGHPUT_MODE),
            performance_mode=args.get("performance_mode", DEFAULT_EFS_PERFORMANCE_MODE),
            tags={**tags, "Name": f"{name}-shared"},
            opts=kept,
        )
        aws.efs.BackupPolicy(
            f"{name}-backup",
            file_system_id=file_system.id,
            backup_policy={"status": "ENABLED" if args.get("backup", False) else "DISABLED"},
            opts=kept,
        )
        return file_system.id

    def _storage_class(
        self,
        name: str,
        args: EfsStorageArgs,
        file_system_id: pulumi.Input[str],
        kubernetes: Optional[pulumi.ProviderResource],
        after: list[pulumi.Resource],
    ) -> k8s.storage.v1.StorageClass:
        """The StorageClass: one EFS access point and one stable directory per claim. A deleted claim's access point
        goes with it, whatever ``retain_on_delete`` says: its directory and data stay on the file system (the driver
        removes them only with its ``deleteAccessPointRootDir`` option, off by default), and a new claim of the same
        name finds them. One reclaim policy for both, as the apiserver refuses to change a class's policy."""
        return k8s.storage.v1.StorageClass(
            f"{name}-sc",
            metadata={
                "name": args.get("storage_class_name", DEFAULT_STORAGE_CLASS_NAME),
                "labels": {"app.kubernetes.io/managed-by": COMMON_LABELS["app.kubernetes.io/managed-by"]},
            },
            provisioner=EFS_CSI_PROVISIONER,
            parameters={
                "provisioningMode": "efs-ap",
                "fileSystemId": file_system_id,
                "directoryPerms": "770",
                # A fixed POSIX owner (the training image's user) rather than a per-volume GID, so a
                # kept file system re-adopted by a new stack is readable by its new access point.
                "uid": str(VOLUME_UID),
                "gid": str(VOLUME_UID),
                "basePath": "/dynamic",
                "subPathPattern": "${.PVC.namespace}/${.PVC.name}",
                # A stable directory per PVC, so a rebuilt stack on a kept file system finds its data.
                "ensureUniqueDirectory": "false",
            },
            reclaim_policy="Delete",
            volume_binding_mode="Immediate",
            mount_options=["tls"],
            opts=pulumi.ResourceOptions(parent=self, provider=kubernetes, depends_on=after),
        )
