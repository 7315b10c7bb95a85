"""The ``datasets`` section: a tarball staged once onto the shared volume for the jobs that name it, or an S3 prefix
an FSx for Lustre file system imports."""

import urllib.parse
from typing import Any, Optional

from pydantic import Field, field_validator, model_validator

from components.workloads.staging import DEFAULT_STAGING_TIMEOUT_MINUTES
from stacks.config.base import MD5_RE, Model, volume_path_problem
from stacks.config.errors import check

#: The public CIFAR-10 python tarball, its published MD5 and size (https://www.cs.toronto.edu/~kriz/cifar.html).
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_BYTES = 170498071
#: The folder CIFAR-10's python tarball extracts to, and its files (https://www.cs.toronto.edu/~kriz/cifar.html): what
#: the staging Job puts under the dataset's folder and the bundled programs read (``training/cifar_io.py``, tied by a
#: test).
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_FILES: tuple[str, ...] = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta")


#: Archive formats the staging job cannot open: it extracts tar archives only (``tarfile.open(path, "r:*")`` in
#: training/stage_data.py: plain, gzip, bzip2 and xz).
NOT_TAR_SUFFIXES = (".zip", ".7z", ".rar", ".zst", ".lz4")


class DatasetConfig(Model):
    """A dataset staged onto the shared volume once and shared by jobs (key ``datasets.<name>``), or, with an
    FSx for Lustre volume, an S3 prefix its data repository imports (no staging)."""

    source: str = CIFAR10_URL
    """An https:// URL or s3://bucket/key of a tarball (an s3:// source gets a Pod Identity role that may read only
    that object); with storage backend fsx, an s3://bucket/prefix/ folder under the data repository's s3Path is not
    staged: the file system imports it (no md5, expectedBytes or path then)."""
    md5: Optional[str] = None
    """The tarball's MD5, 32 hex digits, checked after the download (the default source's is known)."""
    expected_bytes: Optional[int] = Field(default=None, ge=1)
    """The tarball's size in bytes, checked after the download (the default source's is known)."""
    path: Optional[str] = None
    """The folder on the shared volume the dataset is staged into (default ``datasets/<name>``): the job's DATA_DIR.
    The tarball's content lands in it as it is in the tarball."""
    timeout_minutes: int = Field(default=DEFAULT_STAGING_TIMEOUT_MINUTES, ge=5, le=1440)
    """How long the staging may take."""

    @model_validator(mode="before")
    @classmethod
    def _cifar_checksum(cls, data: Any) -> Any:
        """The public CIFAR-10 tarball is verified against its published checksum and size by default."""
        if isinstance(data, dict) and data.get("source", CIFAR10_URL) == CIFAR10_URL:
            if "md5" not in data and "expectedBytes" not in data:
                return {**data, "md5": CIFAR10_MD5, "expectedBytes": CIFAR10_BYTES}
        return data

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if not v.startswith(("https://", "s3://")):
            raise ValueError(f"{v!r} must be an https:// URL or an s3://bucket/key URI")
        if v.startswith("s3://") and "/" not in v[len("s3://") :].strip("/"):
            raise ValueError(f"{v!r} names a bucket but no object key")
        path = urllib.parse.urlsplit(v).path.lower()
        other = next((e for e in NOT_TAR_SUFFIXES if path.endswith(e)), None)
        if other is not None:
            raise ValueError(
                f"{v!r} is a {other} archive; the staging job extracts tar archives (.tar, .tar.gz, .tgz, .tar.bz2, "
                ".tar.xz): repack it as one"
            )
        return v

    @model_validator(mode="after")
    def _prefix_is_not_verified(self) -> "DatasetConfig":
        if self.is_prefix:
            check(
                [
                    (f, "verifies one downloaded object; an S3 prefix is imported object by object, remove it")
                    for f, v in (("md5", self.md5), ("expectedBytes", self.expected_bytes))
                    if v is not None
                ]
            )
        return self

    @property
    def is_prefix(self) -> bool:
        """The source is an S3 prefix (``s3://bucket/prefix/``: a folder of objects, imported by an FSx data
        repository) rather than one object to download and extract."""
        return self.source.startswith("s3://") and self.source.endswith("/")

    @field_validator("md5")
    @classmethod
    def _md5(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not MD5_RE.match(v.lower()):
            raise ValueError(f"{v!r} is not an MD5 hex digest (32 hex characters)")
        return v.lower() if v is not None else v

    @field_validator("path")
    @classmethod
    def _path(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (why := volume_path_problem(v)):
            raise ValueError(why)
        return v

    def folder(self, name: str) -> str:
        """The folder the dataset ``name`` is staged into, relative to the shared volume."""
        return (self.path or f"datasets/{name}").strip("/")
