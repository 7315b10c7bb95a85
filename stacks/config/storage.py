"""The shared file system section (``storage``): EFS (the default) or FSx for Lustre linked to S3.

``backend`` chooses the file system. The keys shared by both (``namespace``, ``pvcName``,
``retainOnDelete``, ``fileSystemId``) apply to the chosen one; ``storageClassName``, ``capacity``,
``throughputMode``, ``performanceMode`` and ``backup`` are EFS's; ``fsx`` holds FSx for Lustre's
(validated here against the catalog's PERSISTENT_2 facts: capacity increments per throughput tier,
metadata IOPS, S3 path forms). Which zone the FSx file system lives in is a rule across sections
(:func:`stacks.config.derive.fsx_location`).
"""

import re
from typing import Annotated, Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.catalog import (
    FSX_DEPLOYMENT_TYPE,
    FSX_DRA_FS_PATH_MAX,
    FSX_DRA_S3_PATH_MAX,
    FSX_METADATA_IOPS,
    FSX_THROUGHPUT_TIERS,
    fsx_capacity_problem,
)
from components.catalog.fsx import FSX_EFA_CLIENT_HOST, NODE_BOOTSTRAP_PROVIDES
from components.catalog.sources import SOURCES
from components.conventions import DEFAULT_CLAIM_NAME, DEFAULT_NAMESPACE
from components.storage.defaults import (
    DEFAULT_EFS_CAPACITY,
    DEFAULT_EFS_PERFORMANCE_MODE,
    DEFAULT_EFS_THROUGHPUT_MODE,
    DEFAULT_FSX_DATA_PATH,
    DEFAULT_FSX_DATA_PREFIX,
    DEFAULT_FSX_METADATA_MODE,
    DEFAULT_FSX_STORAGE_CAPACITY_GIB,
    DEFAULT_FSX_THROUGHPUT_PER_TIB,
    DEFAULT_STORAGE_CLASS_NAME,
)
from stacks.config.base import (
    AZ_RE,
    EFS_ID_RE,
    NAME_RE,
    OBJECT_NOT_NULL,
    QUANTITY_RE,
    RESERVED_NAMESPACES,
    S3_BUCKET_RE,
    S3_PREFIX_RE,
    S3_REPOSITORY_PATH_RE,
    SUBNET_RE,
    Model,
    quantity_value,
    reference,
    split_s3_path,
)
from stacks.config.errors import check

#: A directory of the Lustre file system: ``/datasets`` or ``/team/datasets``.
FS_PATH_RE = re.compile(r"^(?:/[A-Za-z0-9._-]+)+/?$")
SECURITY_GROUP_RE = re.compile(r"^sg-[0-9a-f]{8,17}$")

#: Keys that only mean something for EFS.
EFS_ONLY_FIELDS: tuple[tuple[str, str], ...] = (
    ("storage_class_name", "storageClassName"),
    ("capacity", "capacity"),
    ("throughput_mode", "throughputMode"),
    ("performance_mode", "performanceMode"),
    ("backup", "backup"),
)


def _fs_path_problem(v: str) -> Optional[str]:
    if not FS_PATH_RE.match(v) or ".." in v.split("/") or len(v) > FSX_DRA_FS_PATH_MAX:
        return f"{v!r} is not a directory of the file system; use an absolute path such as /datasets (no '..')"
    return None


def _nested(outer: str, inner: str) -> bool:
    """One of two '/'-separated paths contains the other (or they are equal)."""
    a, b = outer.rstrip("/") + "/", inner.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


class DataRepositoryConfig(Model):
    """The S3 data repository linked to the FSx file system (key ``storage.fsx.dataRepository``)."""

    s3_path: Optional[str] = None
    """``s3://bucket/prefix/`` (or ``s3://bucket/``, the whole bucket) of an existing bucket; omit to have the stack
    create the bucket."""
    prefix: Optional[str] = None
    """Prefix of the datasets in the bucket the stack creates (default ``datasets/``)."""
    file_system_path: str = DEFAULT_FSX_DATA_PATH
    """Where the S3 data appears on the file system (auto import of new, changed and deleted objects)."""
    export_path: Optional[str] = None
    """A file-system directory (e.g. ``/runs``) whose new, changed and deleted files are exported to S3."""
    export_prefix: Optional[str] = None
    """Prefix in the same bucket that ``exportPath`` is exported to (default: the path's name + ``/``)."""

    @field_validator("s3_path")
    @classmethod
    def _s3_path(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        m = S3_REPOSITORY_PATH_RE.match(v)
        if m is None or len(v) > FSX_DRA_S3_PATH_MAX:
            raise ValueError(
                f"{v!r} is not a data repository path; use s3://bucket/ or s3://bucket/prefix/ (a bucket, a prefix if "
                "any, a trailing slash)"
            )
        if not S3_BUCKET_RE.match(m.group("bucket")):
            raise ValueError(f"{m.group('bucket')!r} in {v!r} is not a valid S3 bucket name")
        return v

    @field_validator("prefix", "export_prefix")
    @classmethod
    def _prefix(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not S3_PREFIX_RE.match(v):
            raise ValueError(
                f"{v!r} is not an S3 prefix; use one such as datasets/ (no leading slash, a trailing slash)"
            )
        return v

    @field_validator("file_system_path", "export_path")
    @classmethod
    def _fs_path(cls, v: Optional[str]) -> Optional[str]:
        why = None if v is None else _fs_path_problem(v)
        if why:
            raise ValueError(why)
        return v

    @model_validator(mode="after")
    def _paths(self) -> "DataRepositoryConfig":
        problems: list[tuple[str, str]] = []
        if self.s3_path is not None and self.prefix is not None:
            problems.append(
                ("prefix", "is for the bucket the stack creates; with @{s3Path} put the prefix in the path")
            )
        if self.export_prefix is not None and self.export_path is None:
            problems.append(("exportPrefix", "set without @{exportPath}; name the file-system directory to export"))
        if self.export_path is not None:
            if _nested(self.export_path, self.file_system_path):
                problems.append(
                    (
                        "exportPath",
                        f"{self.export_path} overlaps @{{fileSystemPath}} {self.file_system_path}: two data "
                        "repository associations cannot have nested file-system paths; choose a sibling such as /runs",
                    )
                )
            if not self.import_prefix:  # the bucket's root holds every prefix
                problems.append(
                    (
                        "exportPath",
                        f"exports into the bucket {self.s3_path} imports from its root: each association needs its "
                        "own S3 prefix; give @{s3Path} a prefix, such as datasets/",
                    )
                )
            elif _nested(self.export_s3_prefix or "", self.import_prefix):
                problems.append(
                    (
                        "exportPrefix",
                        f"{self.export_s3_prefix} overlaps the import prefix {self.import_prefix}: each "
                        "association needs its own S3 prefix",
                    )
                )
        check(problems)
        return self

    @property
    def bucket(self) -> Optional[str]:
        """The existing bucket named by ``s3Path`` (``None``: the stack creates one)."""
        parts = split_s3_path(self.s3_path)
        return parts[0] if parts else None

    @property
    def import_prefix(self) -> str:
        """The prefix the datasets are imported from."""
        parts = split_s3_path(self.s3_path)
        return parts[1] if parts else (self.prefix or DEFAULT_FSX_DATA_PREFIX)

    def linked_path(self, uri: str) -> Optional[str]:
        """Where the objects under the S3 prefix ``uri`` appear, relative to the shared mount (``datasets/imagenet``
        for ``s3://bucket/datasets/imagenet/`` linked at ``/datasets``), or ``None`` when the file system does not
        import ``uri`` (another bucket or prefix, or the stack's own bucket, whose name is not known before it
        exists)."""
        if self.s3_path is None or not uri.startswith(self.s3_path):
            return None
        parts = [p for p in (self.file_system_path.strip("/"), uri[len(self.s3_path) :].strip("/")) if p]
        return "/".join(parts)

    @property
    def export_s3_prefix(self) -> Optional[str]:
        """The prefix ``exportPath`` is exported to (``None`` without export)."""
        if self.export_path is None:
            return None
        return self.export_prefix or self.export_path.strip("/").split("/")[-1] + "/"


class FsxConfig(Model):
    """FSx for Lustre (key ``storage.fsx``): PERSISTENT_2, Lustre 2.15, LZ4, linked to S3."""

    storage_capacity_gib: int = Field(default=DEFAULT_FSX_STORAGE_CAPACITY_GIB, ge=1)
    """The file system's size in GiB: 1200, 2400 or a multiple of 2400 (with efa, a multiple of the EFA increment of
    the throughput tier; the catalog's FSx facts). A running stack's file system grows in place; it never shrinks."""
    throughput_per_tib: int = Field(
        default=DEFAULT_FSX_THROUGHPUT_PER_TIB, json_schema_extra=reference(allowed=FSX_THROUGHPUT_TIERS)
    )
    """Throughput in MB/s per TiB of storage."""
    metadata_mode: Literal["AUTOMATIC", "USER_PROVISIONED"] = DEFAULT_FSX_METADATA_MODE
    """Metadata performance: scaled with the storage by FSx, or set by metadataIops."""
    metadata_iops: Optional[int] = Field(default=None, json_schema_extra=reference(allowed=FSX_METADATA_IOPS))
    """With USER_PROVISIONED: the metadata IOPS."""
    efa: bool = False
    """An EFA-enabled file system; true is refused for now: it is reached over EFA only from nodes that run LNet over
    EFA, which the node groups do not configure yet, so it would be billed as EFA and mounted over TCP."""
    availability_zone: Optional[str] = None
    """The file system's zone; default the zone of the pinned worker groups whose jobs mount the claim (which must
    share it), else of the only pinned group; may only repeat the jobs' zone."""
    subnet_id: Optional[str] = None
    """With existingVpc: the file system's subnet, one of its privateSubnetIds."""
    security_group_id: Optional[str] = None
    """With fileSystemId: the kept file system's security group (sg-..., the fsxSecurityGroupId output)."""
    data_repository: DataRepositoryConfig = Field(default_factory=DataRepositoryConfig)
    """The S3 bucket linked to the file system."""

    @field_validator("throughput_per_tib")
    @classmethod
    def _tier(cls, v: int) -> int:
        if v not in FSX_THROUGHPUT_TIERS:
            raise ValueError(
                f"{v} MB/s/TiB is not offered for {FSX_DEPLOYMENT_TYPE} SSD; use one of "
                f"{', '.join(str(t) for t in FSX_THROUGHPUT_TIERS)}"
            )
        return v

    @model_validator(mode="after")
    def _fsx(self) -> "FsxConfig":
        problems: list[tuple[str, str]] = []
        refused = self.efa and FSX_EFA_CLIENT_HOST.feature not in NODE_BOOTSTRAP_PROVIDES
        if refused:
            problems.append(
                (
                    "efa",
                    "an EFA-enabled file system is reached over EFA only from nodes that run "
                    f"{FSX_EFA_CLIENT_HOST.feature.split(' to ')[0]} ({'; '.join(FSX_EFA_CLIENT_HOST.needs)}: "
                    f"{SOURCES[FSX_EFA_CLIENT_HOST.source].url}), which this project's node groups do not configure "
                    "yet: the file system would be billed as EFA-enabled and mounted over TCP; remove efa (the file "
                    "system is then reached over TCP, as the presets do)",
                )
            )
        # a refused efa is the one root cause: the capacity it would need is not reported too
        why = None if refused else fsx_capacity_problem(self.storage_capacity_gib, self.throughput_per_tib, self.efa)
        if why and "storage_capacity_gib" not in self.model_fields_set:
            # the default capacity is not the user's mistake: name the key they set that rules it out
            cause = "efa" if self.efa else "throughputPerTib"
            problems.append((cause, f"the default @{{storageCapacityGib}} does not fit: {why}; set storageCapacityGib"))
        elif why:
            problems.append(("storageCapacityGib", why + (" (with @{efa}: true)" if self.efa else "")))
        if self.metadata_mode == "AUTOMATIC" and self.metadata_iops is not None:
            problems.append(
                ("metadataIops", "set with metadataMode AUTOMATIC; remove it or set @{metadataMode}: USER_PROVISIONED")
            )
        if self.metadata_mode == "USER_PROVISIONED":
            if self.metadata_iops is None:
                problems.append(("metadataIops", "required with @{metadataMode}: USER_PROVISIONED (e.g. 3000)"))
            elif self.metadata_iops not in FSX_METADATA_IOPS:
                problems.append(
                    (
                        "metadataIops",
                        f"{self.metadata_iops} is not offered; use 1500, 3000, 6000, 12000 or a multiple of "
                        "12000 up to 192000",
                    )
                )
        if self.availability_zone is not None and not AZ_RE.match(self.availability_zone):
            problems.append(("availabilityZone", f"{self.availability_zone!r} is not a zone name (us-east-1a)"))
        if self.subnet_id is not None and not SUBNET_RE.match(self.subnet_id):
            problems.append(("subnetId", f"{self.subnet_id!r} is not a subnet id (subnet-0123abcd...)"))
        if self.security_group_id is not None and not SECURITY_GROUP_RE.match(self.security_group_id):
            problems.append(
                ("securityGroupId", f"{self.security_group_id!r} is not a security group id (sg-0123abcd...)")
            )
        check(problems)
        return self


class StorageConfig(Model):
    """The shared file system (key ``storage``): ``backend`` efs (default) or fsx."""

    backend: Literal["efs", "fsx"] = "efs"
    """The file system: Amazon EFS, or FSx for Lustre (PERSISTENT_2) linked to an S3 bucket."""
    namespace: str = DEFAULT_NAMESPACE
    """The Kubernetes namespace of the jobs and their shared claim, which the stack creates (not one of Kubernetes' own
    or of the controllers it installs)."""
    pvc_name: str = DEFAULT_CLAIM_NAME
    """The name of the PersistentVolumeClaim every job mounts at /data."""
    storage_class_name: str = DEFAULT_STORAGE_CLASS_NAME
    """EFS: the StorageClass's name."""
    capacity: str = DEFAULT_EFS_CAPACITY
    """EFS: the capacity the claims declare, a Kubernetes quantity (EFS itself is elastic). A running stack keeps it:
    Kubernetes cannot resize the claims."""
    throughput_mode: Literal["elastic", "bursting"] = DEFAULT_EFS_THROUGHPUT_MODE
    """EFS: the throughput mode."""
    performance_mode: Literal["generalPurpose", "maxIO"] = DEFAULT_EFS_PERFORMANCE_MODE
    """EFS: the performance mode. EFS cannot change it: a later ``pulumi up`` refuses another mode."""
    retain_on_delete: bool = False
    """Keep the file system when the stack is destroyed (then reuse it with fileSystemId)."""
    delete_old_data: bool = False
    """Let this update delete the file system the stack made (and the data bucket it made for FSx) with their data,
    where a change replaces them: a new clusterName, backend or fileSystemId, an FSx file system made again, or a new
    FSx s3Path (the bucket goes). Without it, `pulumi up` refuses such a change. Remove it after that update."""
    file_system_id: Optional[str] = None
    """Mount this existing file system (fs-...) instead of creating one."""
    backup: bool = False
    """EFS: turn on AWS Backup's automatic backups of the file system."""
    fsx: Annotated[Optional[FsxConfig], OBJECT_NOT_NULL] = None
    """FSx for Lustre's settings, with backend fsx."""

    @field_validator("namespace", "pvc_name", "storage_class_name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a valid Kubernetes name (lowercase letters, digits and '-', at most 63)")
        return v

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, v: str) -> str:
        # The stack creates its training namespace: one that exists before the stack fails `pulumi up` with
        # AlreadyExists (RESERVED_NAMESPACES says why each is there).
        if v in RESERVED_NAMESPACES:
            raise ValueError(
                f"{v!r} is a namespace of Kubernetes or of a controller the stack installs, and the stack creates "
                f"its own; set another (e.g. {DEFAULT_NAMESPACE!r})"
            )
        return v

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, v: str) -> str:
        if not QUANTITY_RE.match(v):
            raise ValueError(f"{v!r} is not a Kubernetes quantity (e.g. 1Ti)")
        if quantity_value(v) <= 0:
            raise ValueError(f"{v!r} claims nothing: Kubernetes refuses a claim of 0 (e.g. 1Ti)")
        return v

    @field_validator("file_system_id")
    @classmethod
    def _fs_id(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not EFS_ID_RE.match(v):
            raise ValueError(f"{v!r} is not a file system id (fs-0123abcd...)")
        return v

    @model_validator(mode="after")
    def _backend(self) -> "StorageConfig":
        problems: list[tuple[str, str]] = []
        if self.backend == "efs":
            if self.fsx is not None:
                problems.append(("fsx", "set while @{backend} is efs; set backend: fsx, or remove fsx"))
            if self.performance_mode == "maxIO" and self.throughput_mode == "elastic":
                problems.append(
                    (
                        "performanceMode",
                        "maxIO does not support Elastic throughput; use generalPurpose (recommended) or set "
                        "@{throughputMode}: bursting",
                    )
                )
        else:
            for field, alias in EFS_ONLY_FIELDS:
                if field in self.model_fields_set:
                    problems.append(
                        (alias, "applies to EFS only; with @{backend}: fsx size and tune the file system under @{fsx}")
                    )
            fsx = self.fsx_settings
            if self.file_system_id is not None and fsx.security_group_id is None:
                problems.append(
                    (
                        "fsx.securityGroupId",
                        "required with @{fileSystemId}: the kept file system's security group (the "
                        "fsxSecurityGroupId output of the stack that created it), so this stack can let its nodes in",
                    )
                )
            if self.file_system_id is not None and fsx.data_repository.s3_path is None:
                problems.append(
                    (
                        "fsx.dataRepository.s3Path",
                        "required with @{fileSystemId}: name the bucket the kept file system "
                        "was linked to (output fsxDataRepositoryPath of the stack that created it), or another bucket",
                    )
                )
            if fsx.security_group_id is not None and self.file_system_id is None:
                problems.append(
                    ("fsx.securityGroupId", "only for a kept file system; set @{fileSystemId} too, or remove it")
                )
        check(problems)
        return self

    @property
    def fsx_settings(self) -> FsxConfig:
        """The FSx settings (the defaults when ``fsx`` is not set)."""
        return self.fsx if self.fsx is not None else FsxConfig()

    @property
    def makes_data_bucket(self) -> bool:
        """Whether the stack makes the FSx file system's data bucket (no ``dataRepository.s3Path``), which goes when
        the stack stops making it (components/storage/fsx.py)."""
        return self.backend == "fsx" and self.fsx_settings.data_repository.bucket is None
