"""The shared file system of an environment, built from the plan: EFS or FSx for Lustre, behind one claim.

:func:`build_storage` registers the backend the plan chose and returns a :class:`SharedStorage`: what the
jobs need (the namespace and the ReadWriteMany claim they mount at ``/data``, when the data can be read,
where S3 data appears) and what the outputs show, whichever file system is behind it.

* **EFS** (default): :class:`~components.storage.EfsStorage` with a mount target in every private subnet.
  Nothing is linked to S3; data is staged onto it.
* **FSx for Lustre**: :class:`~components.storage.FsxLustreStorage` in the private subnet of the plan's
  zone (that of the pinned groups whose jobs mount the claim), encrypted with the stack's KMS key, its data
  directory linked to S3. The claim's name resolves only once the data repository associations exist and
  the directories belong to the training user, so every job (and staging Job) that mounts the claim waits
  for the data; datasets imported from the linked S3 prefix need no staging Job.
"""

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import pulumi

from components import EfsStorage, FsxLustreStorage, TrainingCluster, TrainingNodeGroup
from components.catalog.platform import STORAGE_ADDON
from components.conventions import SHARED_MOUNT
from components.scheduling import system_node_selector
from components.storage import CsiDriverArgs, EfsStorageArgs, FsxLustreStorageArgs
from components.storage.csi import nodes_and_agent
from stacks.plan import Plan
from stacks.zones import Zone, find_zone

#: Where staged datasets go on EFS (the ``dataset.path`` default lives under it).
EFS_DATASET_DIR = "/datasets"


@dataclass
class SharedStorage:
    """The shared file system as the jobs and the outputs see it, whichever backend is behind it."""

    backend: str
    """``efs`` or ``fsx``."""
    namespace: pulumi.Output[str]
    """The training namespace (it holds the claim)."""
    pvc_name: pulumi.Output[str]
    """The ReadWriteMany claim every job mounts at ``/data``; with FSx it resolves once the data can be read."""
    file_system_id: pulumi.Output[str]
    """EFS or FSx file system id."""
    data_ready: pulumi.Output[str]
    """Resolves (to :attr:`dataset_root`) once data can be read: with FSx after the data repository
    association exists; with EFS at once."""
    dataset_root: str
    """Where datasets are inside the pods: the directory FSx links to S3 (``/data/datasets``), or the
    directory staged datasets go to on EFS."""
    component: Union[EfsStorage, FsxLustreStorage]
    """The component behind it."""
    data_repository_path: Optional[pulumi.Output[str]] = None
    """FSx: ``s3://bucket/prefix/`` whose objects appear under :attr:`dataset_root`."""
    data_bucket_name: Optional[pulumi.Output[str]] = None
    """FSx: the data repository's bucket."""
    security_group_id: Optional[pulumi.Output[str]] = None
    """FSx: the file system's security group (needed with the id to adopt a kept file system)."""
    dns_name: Optional[pulumi.Output[str]] = None
    """FSx: the file system's DNS name."""
    export_repository_path: Optional[pulumi.Output[str]] = None
    """FSx with export: ``s3://bucket/prefix/`` the export directory is written to."""


def build_storage(
    plan: Plan,
    *,
    name: str,
    cluster: TrainingCluster,
    vpc_id: pulumi.Input[str],
    private_subnet_ids: Sequence[pulumi.Input[str]],
    zones: Optional[Sequence[Zone]],
    node_groups: dict[str, TrainingNodeGroup],
    tags: dict[str, str],
    k8s_opts: pulumi.ResourceOptions,
) -> SharedStorage:
    """Register the plan's shared file system (``private_subnet_ids`` in the order of ``zones`` for a new VPC)."""
    addon_after = _addon_after(cluster)
    if not plan.storage.is_fsx:
        efs_args = _efs_args(plan, cluster, vpc_id, private_subnet_ids, tags, addon_after)
        return _efs_storage(EfsStorage(f"{name}-efs", efs_args, opts=k8s_opts))
    subnet = _fsx_subnet(plan, private_subnet_ids, zones)
    fsx_args = _fsx_args(plan, cluster, vpc_id, subnet, node_groups, tags, addon_after)
    return _fsx_storage(plan, FsxLustreStorage(f"{name}-fsx", fsx_args, opts=k8s_opts))


def _addon_after(cluster: TrainingCluster) -> pulumi.Output[str]:
    """What the CSI add-on waits for: the system node group and the Pod Identity agent."""
    return nodes_and_agent(cluster.system_node_group_name, cluster.pod_identity_agent_addon.arn)


def _csi_driver(plan: Plan, cluster: TrainingCluster, addon_after: pulumi.Output[str], addon: str) -> CsiDriverArgs:
    """Where the storage's CSI driver add-on ``addon`` goes, after ``addon_after``, at the stack's pinned version."""
    c = plan.config.cluster
    driver: CsiDriverArgs = {
        "cluster_name": cluster.cluster_name,
        "kubernetes_version": c.kubernetes_version,
        "addon_after": addon_after,
    }
    if addon in c.addon_versions:
        driver["addon_version"] = c.addon_versions[addon]
    return driver


def _efs_args(
    plan: Plan,
    cluster: TrainingCluster,
    vpc_id: pulumi.Input[str],
    private_subnet_ids: Sequence[pulumi.Input[str]],
    tags: dict[str, str],
    addon_after: pulumi.Output[str],
) -> EfsStorageArgs:
    """The EFS file system's arguments: a mount target in every private subnet."""
    s = plan.config.storage
    storage_args: EfsStorageArgs = {
        "csi_driver": _csi_driver(plan, cluster, addon_after, STORAGE_ADDON["efs"]),
        "vpc_id": vpc_id,
        "subnet_ids": list(private_subnet_ids),
        "node_security_group_id": cluster.node_security_group_id,
        "namespace": s.namespace,
        "pvc_name": s.pvc_name,
        "storage_class_name": s.storage_class_name,
        "capacity": s.capacity,
        "throughput_mode": s.throughput_mode,
        "performance_mode": s.performance_mode,
        "retain_on_delete": s.retain_on_delete,
        "backup": s.backup,
        "tags": tags,
    }
    if s.file_system_id:
        storage_args["existing_file_system_id"] = s.file_system_id
    return storage_args


def _efs_storage(efs: EfsStorage) -> SharedStorage:
    """The shared storage an EFS file system gives, staged datasets under :data:`EFS_DATASET_DIR`."""
    root = f"{SHARED_MOUNT}{EFS_DATASET_DIR}"
    return SharedStorage(
        backend="efs",
        namespace=efs.namespace,
        pvc_name=efs.pvc_name,
        file_system_id=efs.file_system_id,
        data_ready=pulumi.Output.from_input(root),
        dataset_root=root,
        component=efs,
    )


def _fsx_subnet(
    plan: Plan, private_subnet_ids: Sequence[pulumi.Input[str]], zones: Optional[Sequence[Zone]]
) -> pulumi.Input[str]:
    """The FSx file system's subnet: the planned one, or the private subnet of the planned zone."""
    st = plan.storage
    if st.subnet_id is not None:
        return st.subnet_id
    zone = find_zone(st.zone, zones) if st.zone is not None and zones is not None else None
    assert zone is not None and zones is not None, "a new VPC's FSx file system has a zone (checked by choose_zones)"
    return private_subnet_ids[list(zones).index(zone)]


def _fsx_args(
    plan: Plan,
    cluster: TrainingCluster,
    vpc_id: pulumi.Input[str],
    subnet: pulumi.Input[str],
    node_groups: dict[str, TrainingNodeGroup],
    tags: dict[str, str],
    addon_after: pulumi.Output[str],
) -> FsxLustreStorageArgs:
    """The FSx for Lustre file system's arguments: its size, key, EFA clients, data repository and add-on."""
    s = plan.config.storage
    st = plan.storage
    fsx = st.fsx
    assert fsx is not None
    repo = fsx.data_repository
    fsx_args: FsxLustreStorageArgs = {
        "csi_driver": _csi_driver(plan, cluster, addon_after, STORAGE_ADDON["fsx"]),
        "vpc_id": vpc_id,
        "subnet_id": subnet,
        "node_security_group_id": cluster.node_security_group_id,
        "storage_capacity_gib": fsx.storage_capacity_gib,
        "per_unit_storage_throughput": fsx.throughput_per_tib,
        "metadata_mode": fsx.metadata_mode,
        "efa": fsx.efa,
        "data_prefix": repo.import_prefix,
        "data_file_system_path": repo.file_system_path,
        "namespace": s.namespace,
        "pvc_name": s.pvc_name,
        "retain_on_delete": s.retain_on_delete,
        "volume_init_node_selector": system_node_selector(),
        "tags": tags,
    }
    # The file system is encrypted with the cluster's key, which is kept on destroy whenever the file system is
    # (stacks/environment.py passes keep_secrets_key): data under a deleted key cannot be read again
    # (https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html). The key is the same whether or not
    # the storage is kept, so turning retainOnDelete on or off later changes only what destroy keeps; a key chosen by
    # retainOnDelete would replace the file system on that change (its KMS key cannot change in place).
    # tests/mock/test_lifecycle_rules.py checks the class.
    fsx_args["kms_key_arn"] = cluster.secrets_kms_key_arn
    if fsx.metadata_iops is not None:
        fsx_args["metadata_iops"] = fsx.metadata_iops
    if fsx.efa:
        fsx_args["efa_client_security_group_ids"] = [node_groups[g].efa_security_group_id for g in st.efa_client_groups]
    if repo.bucket is not None:
        fsx_args["data_bucket_name"] = repo.bucket
    if repo.export_path is not None and repo.export_s3_prefix is not None:
        fsx_args["export_file_system_path"] = repo.export_path
        fsx_args["export_prefix"] = repo.export_s3_prefix
    if s.file_system_id:
        fsx_args["existing_file_system_id"] = s.file_system_id
    if fsx.security_group_id:
        fsx_args["existing_security_group_id"] = fsx.security_group_id
    return fsx_args


def _fsx_storage(plan: Plan, lustre: FsxLustreStorage) -> SharedStorage:
    """The shared storage an FSx for Lustre file system gives, datasets in its directory linked to S3."""
    assert plan.storage.fsx is not None
    repo = plan.storage.fsx.data_repository
    root = f"{SHARED_MOUNT}{repo.file_system_path.rstrip('/')}"
    return SharedStorage(
        backend="fsx",
        namespace=lustre.namespace,
        # Jobs name the claim through this: they are created once the S3 data can be read.
        pvc_name=pulumi.Output.all(lustre.pvc_name, lustre.data_ready).apply(lambda v: str(v[0])),
        file_system_id=lustre.file_system_id,
        data_ready=lustre.data_ready.apply(lambda _: root),
        dataset_root=root,
        component=lustre,
        data_repository_path=lustre.data_repository_path,
        data_bucket_name=lustre.data_bucket_name,
        security_group_id=lustre.security_group_id,
        dns_name=lustre.dns_name,
        export_repository_path=lustre.export_repository_path if repo.export_path else None,
    )
