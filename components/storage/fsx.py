"""``FsxLustreStorage``: an FSx for Lustre file system linked to S3, mounted by every training pod.

It creates a ``PERSISTENT_2`` SSD file system in one subnet, behind a security group that admits Lustre from itself
and the nodes. Data repository associations link S3: one directory imports a prefix, another may export. The bucket
is named, or created here. The FSx CSI driver is an EKS managed add-on with its own Pod Identity role; a static
PersistentVolume is bound to the ReadWriteMany claim. A one-shot Job hands the directories to the training user.
With ``retain_on_delete`` the file system is kept; ``existing_file_system_id`` and ``existing_security_group_id``
adopt it in a new stack.

Why: docs/explanation/storage.md ("FSx for Lustre", "The S3 data flow", "Keeping and re-adopting")."""

import shlex
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import (
    FSX_CSI_ADDON,
    FSX_CSI_CONTROLLER_SA,
    FSX_CSI_DRIVER,
    FSX_DEPLOYMENT_TYPE,
    FSX_DRA_EVENTS,
    FSX_LUSTRE_PORTS,
    FSX_LUSTRE_VERSION,
    FSX_METADATA_IOPS,
    FSX_METADATA_MODES,
    FSX_STORAGE_TYPE,
    FSX_THROUGHPUT_TIERS,
    IMAGES,
    fsx_capacity_problem,
)
from components.catalog.addons import POD_IDENTITY
from components.catalog.timings import FSX_IMPORT_ASSOCIATION_WAIT, FSX_UPDATE_WAIT
from components.conventions import (
    COMMON_LABELS,
    DEFAULT_CLAIM_NAME,
    DEFAULT_NAMESPACE,
    IMAGE_PULL_POLICY,
    TRAINING_IMAGE_UID,
)
from components.iam import fsx_csi_static_controller_policy
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.naming import k8s_name
from components.ordering import ordered_after
from components.private_bucket import private_bucket
from components.quantities import mebibytes
from components.storage.csi import CsiDriverArgs, csi_addon, shared_claim, training_namespace
from components.storage.defaults import (
    DEFAULT_FSX_DATA_PATH,
    DEFAULT_FSX_DATA_PREFIX,
    DEFAULT_FSX_METADATA_MODE,
    DEFAULT_FSX_STORAGE_CAPACITY_GIB,
    DEFAULT_FSX_THROUGHPUT_PER_TIB,
)
from components.storage.providers import split_kubernetes_provider
from components.workloads.job_objects import BATCH_JOB
from components.workloads.waits import await_annotations, await_seconds, await_timeouts, finished

#: Where the volume-permissions Job mounts the file system.
INIT_MOUNT = "/fsx"
#: The volume-init Job's deadline (it changes the owner of a few folders: seconds, once the file system mounts).
VOLUME_INIT_DEADLINE_S = 900
_IMPORT_WAIT = f"{int(FSX_IMPORT_ASSOCIATION_WAIT.minutes)}m"


class FsxLustreStorageArgs(TypedDict):
    """Inputs of :class:`FsxLustreStorage`."""

    csi_driver: CsiDriverArgs
    """The cluster its CSI driver add-on goes into, and when."""
    vpc_id: pulumi.Input[str]
    """VPC of the cluster."""
    subnet_id: pulumi.Input[str]
    """The one private subnet of the file system: that of the zone of the GPU nodes that read it."""
    node_security_group_id: pulumi.Input[str]
    """Security group every node carries (the Lustre clients): Lustre is allowed from and to it."""
    storage_capacity_gib: NotRequired[int]
    """Capacity in GiB: 1200, 2400 or a multiple of 2400 (EFA: a multiple of the tier's step). Default 1200."""
    per_unit_storage_throughput: NotRequired[int]
    """Throughput tier in MB/s per TiB: 125, 250, 500 or 1000. Default 250."""
    metadata_mode: NotRequired[str]
    """``AUTOMATIC`` (default: metadata IOPS scale with the capacity) or ``USER_PROVISIONED``."""
    metadata_iops: NotRequired[int]
    """Metadata IOPS with ``USER_PROVISIONED`` (1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000)."""
    efa: NotRequired[bool]
    """EFA-enabled file system (set at creation only; clients need EFA). Default False."""
    efa_client_security_group_ids: NotRequired[Sequence[pulumi.Input[str]]]
    """Security groups of the EFA clients (the EFA node groups'): all traffic is allowed between them and
    the file system. Required with ``efa``."""
    kms_key_arn: NotRequired[pulumi.Input[str]]
    """KMS key encrypting the file system at rest; default the AWS-managed FSx key."""
    data_bucket_name: NotRequired[pulumi.Input[str]]
    """An existing S3 bucket (in the stack's region) holding the datasets; omitted: a bucket is created."""
    data_prefix: NotRequired[str]
    """Prefix of the datasets in the bucket (``datasets/``: a trailing slash, no leading slash). Default
    ``datasets/``."""
    data_file_system_path: NotRequired[str]
    """Directory of the file system where the S3 data appears. Default ``/datasets``."""
    export_file_system_path: NotRequired[str]
    """Directory whose new, changed and deleted files are exported to S3 (e.g. ``/runs``); default none."""
    export_prefix: NotRequired[str]
    """Prefix in the bucket the export goes to. Default the directory's name plus ``/``."""
    namespace: NotRequired[str]
    """Namespace created for training workloads, holding the PVC. Default ``training``."""
    pvc_name: NotRequired[str]
    """Name of the ReadWriteMany PVC. Default ``shared-data``."""
    retain_on_delete: NotRequired[bool]
    """Keep the file system, its security group and a created bucket on ``pulumi destroy``. Default False."""
    existing_file_system_id: NotRequired[pulumi.Input[str]]
    """Adopt this FSx for Lustre file system (e.g. one kept by ``retain_on_delete``) instead of creating one."""
    existing_security_group_id: NotRequired[pulumi.Input[str]]
    """The adopted file system's security group (its Lustre rules are re-created for this cluster's nodes)."""
    volume_init_image: NotRequired[str]
    """Image with ``sh`` and ``chown`` for the volume-permissions Job. Default the catalog's pinned busybox."""
    volume_init_node_selector: NotRequired[Mapping[str, str]]
    """Where the volume-permissions Job runs (e.g. the system nodes)."""
    volume_owner_uid: NotRequired[int]
    """UID and GID that own the data directories (the training image's user). Default 1000."""
    tags: NotRequired[dict[str, str]]
    """AWS tags."""


def _check(name: str, capacity: int, throughput: int, mode: str, iops: Optional[int], efa: bool) -> None:
    problems = []
    if throughput not in FSX_THROUGHPUT_TIERS:
        problems.append(f"per_unit_storage_throughput {throughput} is not one of {FSX_THROUGHPUT_TIERS}")
    elif (why := fsx_capacity_problem(capacity, throughput, efa)) is not None:
        problems.append(f"storage_capacity_gib: {why}")
    if mode not in FSX_METADATA_MODES:
        problems.append(f"metadata_mode {mode!r} is not one of {FSX_METADATA_MODES}")
    if (mode == "USER_PROVISIONED") != (iops is not None) or (iops is not None and iops not in FSX_METADATA_IOPS):
        problems.append(f"metadata_iops {iops!r} does not fit metadata_mode {mode!r}")
    if problems:
        raise ValueError(f"{name}: " + "; ".join(problems))


@dataclass(frozen=True)
class _Settings:
    """The arguments with their defaults, checked."""

    tags: dict[str, str]
    retain: bool
    capacity: int
    throughput: int
    mode: str
    iops: Optional[int]
    efa: bool
    efa_clients: list[pulumi.Input[str]]
    namespace: str
    pvc_name: str
    data_path: str
    data_prefix: str
    export_path: Optional[str]
    export_prefix: Optional[str]


def _settings(name: str, args: FsxLustreStorageArgs) -> _Settings:
    """``args`` with their defaults; raises ``ValueError`` naming every problem."""
    capacity = int(args.get("storage_capacity_gib", DEFAULT_FSX_STORAGE_CAPACITY_GIB))
    throughput = int(args.get("per_unit_storage_throughput", DEFAULT_FSX_THROUGHPUT_PER_TIB))
    mode = args.get("metadata_mode", DEFAULT_FSX_METADATA_MODE)
    iops = args.get("metadata_iops")
    efa = bool(args.get("efa", False))
    efa_clients = list(args.get("efa_client_security_group_ids") or [])
    _check(name, capacity, throughput, mode, iops, efa)
    if efa and not efa_clients:
        raise ValueError(f"{name}: efa=True needs efa_client_security_group_ids (the EFA clients' security groups)")
    export_path = args.get("export_file_system_path")
    export_default = export_path.strip("/").split("/")[-1] + "/" if export_path else None
    return _Settings(
        tags=dict(args.get("tags") or {}),
        retain=bool(args.get("retain_on_delete", False)),
        capacity=capacity,
        throughput=throughput,
        mode=mode,
        iops=iops,
        efa=efa,
        efa_clients=efa_clients,
        namespace=args.get("namespace", DEFAULT_NAMESPACE),
        pvc_name=args.get("pvc_name", DEFAULT_CLAIM_NAME),
        data_path=args.get("data_file_system_path", DEFAULT_FSX_DATA_PATH).rstrip("/") or "/",
        data_prefix=args.get("data_prefix", DEFAULT_FSX_DATA_PREFIX),
        export_path=export_path,
        export_prefix=args.get("export_prefix") or export_default,
    )


class FsxLustreStorage(pulumi.ComponentResource):
    """FSx for Lustre file system linked to S3, its security group, the FSx CSI add-on with its role, the
    training namespace, a static PersistentVolume and the ReadWriteMany PVC (needs a ``kubernetes``
    provider in ``opts``)."""

    file_system_id: pulumi.Output[str]
    """FSx file system id (the PersistentVolume's ``volumeHandle``)."""
    dns_name: pulumi.Output[str]
    """DNS name of the file system."""
    mount_name: pulumi.Output[str]
    """Lustre mount name of the file system."""
    security_group_id: pulumi.Output[str]
    """Security group of the file system (keep it with the file system to adopt both later)."""
    data_bucket_name: pulumi.Output[str]
    """S3 bucket of the data repository."""
    data_repository_path: pulumi.Output[str]
    """``s3://bucket/prefix/`` linked to the data directory."""
    export_repository_path: pulumi.Output[str]
    """``s3://bucket/prefix/`` the export directory goes to (empty without export)."""
    data_ready: pulumi.Output[str]
    """The data directory's path on the file system (``/datasets``), which pods see under the volume's mount
    (``/data/datasets``: prefix it for ``JobSpec.data_dir``); resolves once its association exists and the directories
    belong to the training user, so data in S3 can be read."""
    csi_role_arn: pulumi.Output[str]
    """IAM role of the FSx CSI controller."""
    persistent_volume_name: pulumi.Output[str]
    """Name of the static PersistentVolume."""
    namespace: pulumi.Output[str]
    """Namespace of the PVC (the training namespace)."""
    pvc_name: pulumi.Output[str]
    """Name of the ReadWriteMany PVC that workloads mount."""

    @checks_args
    def __init__(self, name: str, args: FsxLustreStorageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        # registered without the Kubernetes provider, which only the Kubernetes objects take: the file system starts
        # at once instead of once the cluster's nodes are up (components/storage/providers.py)
        opts, kubernetes = split_kubernetes_provider(opts)
        super().__init__("eks-training:index:FsxLustreStorage", name, None, opts)
        warn_without_kubernetes_provider(self, name, kubernetes)
        s = _settings(name, args)
        sg_id, checked, rules = self._security_group(name, args, s)
        file_system = self._file_system(name, args, s, sg_id, checked)
        bucket_name, data_repository_path, export_repository_path, associations = self._data_repository(
            name, args, s, file_system
        )
        identity, addon = csi_addon(
            self,
            name,
            args["csi_driver"],
            addon_name=FSX_CSI_ADDON,
            label="FSx",
            service_account=FSX_CSI_CONTROLLER_SA,
            settings=(POD_IDENTITY,),
            tags=s.tags,
            policy=fsx_csi_static_controller_policy(),
        )
        namespace = training_namespace(self, name, s.namespace, kubernetes)
        volume = self._volume(name, s, file_system, kubernetes, [addon, file_system, *rules])
        pvc = shared_claim(
            self,
            name,
            pvc_name=s.pvc_name,
            namespace=namespace.metadata.name,
            size=mebibytes(s.capacity * 1024),
            storage_class_name="",
            volume_name=volume.metadata.name,
            kubernetes=kubernetes,
            depends_on=[addon, file_system],
        )
        init = self._volume_init(name, args, s, namespace, pvc, kubernetes, associations)

        self.file_system_id = file_system.id
        self.dns_name = file_system.dns_name
        self.mount_name = file_system.mount_name
        self.security_group_id = pulumi.Output.from_input(sg_id)
        self.data_bucket_name = bucket_name
        self.data_repository_path = data_repository_path
        self.export_repository_path = export_repository_path
        init_done = finished(BATCH_JOB, k8s_name(s.pvc_name, "init"), init, awaited=True)
        # after the volume's init Job (a failed one fails it) and the associations, known in a preview that replaces
        # one of them (a new prefix): the jobs' inputs stay known
        self.data_ready = ordered_after(pulumi.Output.from_input(s.data_path), init_done, *[a.id for a in associations])
        self.csi_role_arn = identity.role.arn
        self.persistent_volume_name = volume.metadata.name
        self.namespace = namespace.metadata.name
        self.pvc_name = pvc.metadata.name
        self.register_outputs(
            {
                "file_system_id": self.file_system_id,
                "dns_name": self.dns_name,
                "mount_name": self.mount_name,
                "security_group_id": self.security_group_id,
                "data_bucket_name": self.data_bucket_name,
                "data_repository_path": self.data_repository_path,
                "export_repository_path": self.export_repository_path,
                "data_ready": self.data_ready,
                "csi_role_arn": self.csi_role_arn,
                "persistent_volume_name": self.persistent_volume_name,
                "namespace": self.namespace,
                "pvc_name": self.pvc_name,
            }
        )

    def _security_group(
        self, name: str, args: FsxLustreStorageArgs, s: _Settings
    ) -> tuple[pulumi.Input[str], list[pulumi.Resource], list[pulumi.Resource]]:
        """The file system's security group (adopted or new) and its rules: all of them, and those FSx checks."""
        existing_sg = args.get("existing_security_group_id")
        sg_id: pulumi.Input[str]
        if existing_sg:
            sg_id = existing_sg
        else:
            sg_id = aws.ec2.SecurityGroup(
                f"{name}-lustre-sg",
                description="Lustre (TCP 988, 1018-1023) between the FSx file servers and the EKS nodes",
                vpc_id=args["vpc_id"],
                tags={**s.tags, "Name": f"{name}-lustre"},
                # Attached to the file system's network interfaces: kept with it, or it could not be deleted.
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=s.retain),
            ).id
        nodes = args["node_security_group_id"]
        # The rules FSx checks when it creates the file system: Lustre (988 and 1018-1023) within its group, and for
        # EFA all traffic within the group and with the EFA clients' groups (source key ``fsx-efa-security-group``).
        # The file system waits for these; the rules with the cluster's node group (which exists only once the EKS
        # cluster does, ten minutes on) are checked by no creation and are added beside it, so the file system is
        # built meanwhile.
        checked: list[pulumi.Resource] = []
        rules: list[pulumi.Resource] = []

        def rule(
            suffix: str,
            direction: str,
            group: pulumi.Input[str],
            peer: pulumi.Input[str],
            description: str,
            protocol: str = "-1",
            ports: Optional[tuple[int, int]] = None,
        ) -> None:
            kind = aws.vpc.SecurityGroupIngressRule if direction == "in" else aws.vpc.SecurityGroupEgressRule
            made = kind(
                f"{name}-{suffix}",
                security_group_id=group,
                referenced_security_group_id=peer,
                ip_protocol=protocol,
                from_port=ports[0] if ports else None,
                to_port=ports[1] if ports else None,
                description=description,
                opts=pulumi.ResourceOptions(parent=self),
            )
            rules.append(made)
            if group is not nodes and peer is not nodes:
                checked.append(made)

        for low, high in FSX_LUSTRE_PORTS:
            p, tcp = (f"{low}" if low == high else f"{low}-{high}"), (low, high)
            rule(f"lustre-{p}-self-in", "in", sg_id, sg_id, f"Lustre {p} between file servers", "tcp", tcp)
            rule(f"lustre-{p}-self-out", "out", sg_id, sg_id, f"Lustre {p} between file servers", "tcp", tcp)
            rule(f"lustre-{p}-nodes-in", "in", sg_id, nodes, f"Lustre {p} from the cluster nodes", "tcp", tcp)
            rule(f"lustre-{p}-nodes-out", "out", sg_id, nodes, f"Lustre {p} to the cluster nodes", "tcp", tcp)
            # The nodes' group allows all egress already; the file servers also open connections to clients.
            rule(f"lustre-{p}-clients-in", "in", nodes, sg_id, f"Lustre {p} from the FSx file servers", "tcp", tcp)
        if s.efa:
            # EFA (SRD is neither IPv4 nor IPv6): all traffic to and from the group itself and the clients.
            rule("efa-self-in", "in", sg_id, sg_id, "EFA between file servers")
            rule("efa-self-out", "out", sg_id, sg_id, "EFA between file servers")
            for i, client in enumerate(s.efa_clients):
                rule(f"efa-client{i}-in", "in", sg_id, client, "EFA from the EFA clients")
                rule(f"efa-client{i}-out", "out", sg_id, client, "EFA to the EFA clients")
                rule(f"efa-client{i}-from-fsx", "in", client, sg_id, "EFA from the FSx file servers")
                rule(f"efa-client{i}-to-fsx", "out", client, sg_id, "EFA to the FSx file servers")
        return sg_id, checked, rules

    def _file_system(
        self,
        name: str,
        args: FsxLustreStorageArgs,
        s: _Settings,
        sg_id: pulumi.Input[str],
        checked: list[pulumi.Resource],
    ) -> aws.fsx.LustreFileSystem:
        """The adopted file system (read by id), or a new one once the rules FSx checks exist."""
        existing_fs = args.get("existing_file_system_id")
        if existing_fs:
            # A file system kept from an earlier stack (retain_on_delete): read by id, not managed.
            return aws.fsx.LustreFileSystem.get(f"{name}-fs", existing_fs, opts=pulumi.ResourceOptions(parent=self))
        metadata: aws.fsx.LustreFileSystemMetadataConfigurationArgsDict = {"mode": s.mode}
        if s.iops is not None:
            metadata["iops"] = s.iops
        return aws.fsx.LustreFileSystem(
            f"{name}-fs",
            deployment_type=FSX_DEPLOYMENT_TYPE,
            storage_type=FSX_STORAGE_TYPE,
            file_system_type_version=FSX_LUSTRE_VERSION,
            storage_capacity=s.capacity,
            per_unit_storage_throughput=s.throughput,
            metadata_configuration=metadata,
            data_compression_type="LZ4",
            efa_enabled=s.efa,
            kms_key_id=args.get("kms_key_arn"),
            subnet_ids=args["subnet_id"],
            security_group_ids=[sg_id],
            # The data's durable copy is S3 (import, and export of the results directory).
            automatic_backup_retention_days=0,
            tags={**s.tags, "Name": f"{name}-lustre"},
            # The rules creation checks exist before the file system and go after it. An update (a new throughput
            # tier above all) can outlast the provider's 30 minutes.
            opts=pulumi.ResourceOptions(
                parent=self,
                retain_on_delete=s.retain,
                depends_on=checked,
                custom_timeouts=pulumi.CustomTimeouts(update=f"{int(FSX_UPDATE_WAIT.minutes)}m"),
            ),
        )

    def _data_repository(
        self, name: str, args: FsxLustreStorageArgs, s: _Settings, file_system: aws.fsx.LustreFileSystem
    ) -> tuple[pulumi.Output[str], pulumi.Output[str], pulumi.Output[str], list[aws.fsx.DataRepositoryAssociation]]:
        """The S3 bucket (named or created), the import association and the optional export one."""
        # FSx links a directory to one S3 prefix, and a prefix to one directory: a new prefix for the directory
        # replaces the association, and the old one must go first (it keeps the files: delete_data_in_filesystem)
        child = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        bucket_name: pulumi.Output[str]
        named = args.get("data_bucket_name")
        if named:
            bucket_name = pulumi.Output.from_input(named)
        else:
            # SSE-S3: FSx's service-linked role reads and writes it without a key policy change.
            bucket = private_bucket(
                self, f"{name}-data", force_destroy=not s.retain, retain=s.retain, versioned=True, tags=s.tags
            ).bucket
            bucket_name = bucket.bucket
        data_repository_path = pulumi.Output.concat("s3://", bucket_name, "/", s.data_prefix)
        events = list(FSX_DRA_EVENTS)
        datasets = aws.fsx.DataRepositoryAssociation(
            f"{name}-datasets",
            file_system_id=file_system.id,
            file_system_path=s.data_path,
            data_repository_path=data_repository_path,
            # Objects already in S3 appear at once (metadata only; contents load on first read).
            batch_import_meta_data_on_create=True,
            delete_data_in_filesystem=False,
            s3={"auto_import_policy": {"events": events}},
            tags=s.tags,
            # CREATING until the bucket's listing is imported: longer than the provider's 10 minutes for a large one
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create=_IMPORT_WAIT))
            ),
        )
        associations: list[aws.fsx.DataRepositoryAssociation] = [datasets]
        export_repository_path: pulumi.Output[str] = pulumi.Output.from_input("")
        if s.export_path:
            export_repository_path = pulumi.Output.concat("s3://", bucket_name, "/", str(s.export_prefix))
            associations.append(
                aws.fsx.DataRepositoryAssociation(
                    f"{name}-export",
                    file_system_id=file_system.id,
                    file_system_path=s.export_path.rstrip("/"),
                    data_repository_path=export_repository_path,
                    delete_data_in_filesystem=False,
                    s3={"auto_export_policy": {"events": events}},
                    tags=s.tags,
                    opts=child,
                )
            )
        return bucket_name, data_repository_path, export_repository_path, associations

    def _volume(
        self,
        name: str,
        s: _Settings,
        file_system: aws.fsx.LustreFileSystem,
        kubernetes: Optional[pulumi.ProviderResource],
        after: list[pulumi.Resource],
    ) -> k8s.core.v1.PersistentVolume:
        """The static PersistentVolume of the file system, reserved for the claim."""
        managed = {"app.kubernetes.io/managed-by": COMMON_LABELS["app.kubernetes.io/managed-by"]}
        return k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata={"name": k8s_name(s.namespace, s.pvc_name, "fsx"), "labels": managed},
            spec={
                "capacity": {"storage": mebibytes(s.capacity * 1024)},
                "volume_mode": "Filesystem",
                "access_modes": ["ReadWriteMany"],
                "mount_options": ["flock"],
                # Static: the file system belongs to the stack, not to the claim.
                "persistent_volume_reclaim_policy": "Retain",
                "storage_class_name": "",
                "claim_ref": {"namespace": s.namespace, "name": s.pvc_name},
                "csi": {
                    "driver": FSX_CSI_DRIVER,
                    "volume_handle": file_system.id,
                    "volume_attributes": {"dnsname": file_system.dns_name, "mountname": file_system.mount_name},
                },
            },
            # Mounted once every rule exists; deleted before the add-on that unmounts it and the file system it names.
            opts=pulumi.ResourceOptions(parent=self, provider=kubernetes, depends_on=after),
        )

    def _volume_init(
        self,
        name: str,
        args: FsxLustreStorageArgs,
        s: _Settings,
        namespace: k8s.core.v1.Namespace,
        pvc: k8s.core.v1.PersistentVolumeClaim,
        kubernetes: Optional[pulumi.ProviderResource],
        associations: list[aws.fsx.DataRepositoryAssociation],
    ) -> k8s.batch.v1.Job:
        """A one-shot Job handing the directories to the training user (a new Lustre file system is owned by root)."""
        uid = int(args.get("volume_owner_uid", TRAINING_IMAGE_UID))
        linked = [s.data_path, s.export_path.rstrip("/")] if s.export_path else [s.data_path]
        dirs = [INIT_MOUNT, *(f"{INIT_MOUNT}{p}" for p in linked if p != "/")]
        script = "set -eu; " + "; ".join(
            f"chown {uid}:{uid} {shlex.quote(d)}; chmod 0775 {shlex.quote(d)}" for d in dirs
        )
        labels = {**COMMON_LABELS, "app.kubernetes.io/name": "volume-permissions", "app.kubernetes.io/instance": name}
        return k8s.batch.v1.Job(
            f"{name}-volume-init",
            metadata={
                "name": k8s_name(s.pvc_name, "init"),
                "namespace": namespace.metadata.name,
                "labels": labels,
                "annotations": await_annotations(BATCH_JOB, True),
            },
            spec={
                "backoff_limit": 4,
                "active_deadline_seconds": VOLUME_INIT_DEADLINE_S,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restart_policy": "OnFailure",
                        "automount_service_account_token": False,
                        "node_selector": dict(args.get("volume_init_node_selector") or {}),
                        # root with only CHOWN and FOWNER: allowed by the namespace's baseline pod security
                        "security_context": {
                            "run_as_user": 0,
                            "run_as_group": 0,
                            "seccomp_profile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "chown",
                                "image": args.get("volume_init_image") or IMAGES["busybox"].ref,
                                "image_pull_policy": IMAGE_PULL_POLICY,
                                "command": ["sh", "-c", script],
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "16Mi"},
                                    "limits": {"cpu": "100m", "memory": "64Mi"},
                                },
                                "volume_mounts": [{"name": "shared", "mount_path": INIT_MOUNT}],
                                "security_context": {
                                    "allow_privilege_escalation": False,
                                    "read_only_root_filesystem": True,
                                    "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
                                },
                            }
                        ],
                        "volumes": [{"name": "shared", "persistent_volume_claim": {"claim_name": pvc.metadata.name}}],
                    },
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=kubernetes,
                depends_on=associations,
                delete_before_replace=True,
                custom_timeouts=await_timeouts(await_seconds(VOLUME_INIT_DEADLINE_S)),
            ),
        )
