"""Workload sections: ``image``, ``dataset``, ``training``, ``evaluation``, ``healthCheck``."""

import re
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from components.image import ComputeType, validate_image_reference
from stacks.config.base import MD5_RE, NAME_RE, Model
from stacks.config.errors import check

#: The public CIFAR-10 python tarball, its published MD5 and size (https://www.cs.toronto.edu/~kriz/cifar.html).
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_BYTES = 170498071
#: Training job names prefix Kubernetes names (``<job>-train``, ``<job>-allreduce``).
JOB_NAME_MAX = 30


class ImageConfig(Model):
    """The training image (key ``image``): built by CodeBuild from training/, or prebuilt."""

    prebuilt: Optional[str] = None
    keep_images: int = Field(default=10, ge=1, le=1000)
    build_timeout_minutes: int = Field(default=90, ge=5, le=2160)
    compute_type: ComputeType = "BUILD_GENERAL1_LARGE"

    @field_validator("prebuilt")
    @classmethod
    def _prebuilt(cls, v: Optional[str]) -> Optional[str]:
        why = None if v is None else validate_image_reference(v)
        if why:
            raise ValueError(f"{why}; give a pinned reference such as REGISTRY/REPO:TAG or REPO@sha256:...")
        return v


class DatasetConfig(Model):
    """The dataset the staging job puts on the shared volume (key ``dataset``)."""

    source: str = CIFAR10_URL
    md5: Optional[str] = None
    expected_bytes: Optional[int] = Field(default=None, ge=1)
    path: str = "datasets/cifar10"
    timeout_minutes: int = Field(default=30, ge=5, le=1440)

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
        return v

    @field_validator("md5")
    @classmethod
    def _md5(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not MD5_RE.match(v):
            raise ValueError(f"{v!r} is not an MD5 hex digest (32 hex characters)")
        return v

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if ".." in v.split("/") or v.startswith("/") or not re.match(r"^[\w./-]+$", v):
            raise ValueError(f"{v!r} must be a relative path inside the shared volume")
        return v


class TrainingConfig(Model):
    """The training job (key ``training``); absent = no workloads, the environment only."""

    node_group: Optional[str] = None
    workers: int = Field(default=2, ge=1)
    min_workers: int = Field(default=1, ge=1)
    max_workers: Optional[int] = Field(default=None, ge=1)
    rendezvous_backend: Literal["etcd-v2", "c10d"] = "etcd-v2"
    job_name: str = "cifar10"
    epochs: int = Field(default=10, ge=1, le=1000)
    batch_size: int = Field(default=256, ge=1, le=65536)
    learning_rate: float = Field(default=0.4, gt=0, le=10)
    width: int = Field(default=64, ge=8, le=512)
    data_loader_workers: int = Field(default=4, ge=0, le=64)
    checkpoint_every_steps: int = Field(default=0, ge=0)
    max_restarts: int = Field(default=3, ge=0, le=100)
    timeout_hours: float = Field(default=24, gt=0, le=720)
    wait_for_completion: bool = False

    @field_validator("job_name")
    @classmethod
    def _job_name(cls, v: str) -> str:
        if not NAME_RE.match(v) or len(v) > JOB_NAME_MAX:
            raise ValueError(f"{v!r} must be 1-{JOB_NAME_MAX} lowercase letters, digits and '-'")
        return v

    @model_validator(mode="after")
    def _workers(self) -> "TrainingConfig":
        problems = []
        if self.min_workers > self.workers:
            problems.append(("minWorkers", f"{self.min_workers} > @{{workers}} ({self.workers}); set minWorkers <= workers"))
        if self.max_workers is not None and self.workers > self.max_workers:
            problems.append(("workers", f"{self.workers} > @{{maxWorkers}} ({self.max_workers}); raise maxWorkers or lower workers"))
        check(problems)
        return self


class EvaluationConfig(Model):
    """The evaluation job (key ``evaluation``)."""

    min_accuracy: Optional[float] = Field(default=None, ge=0, le=1)


class HealthCheckConfig(Model):
    """The all-reduce bandwidth check run on the training nodes before training (key ``healthCheck``)."""

    enabled: bool = True
    enforce: bool = False
    min_bus_bandwidth_gbytes_per_s: Optional[float] = Field(default=None, gt=0, alias="minBusBandwidthGBps")
    max_bytes: Optional[int] = Field(default=None, ge=1 << 20, le=1 << 34)
    timeout_minutes: int = Field(default=60, ge=5, le=1440)

    @field_validator("max_bytes")
    @classmethod
    def _power_of_two(cls, v: Optional[int]) -> Optional[int]:
        if v is not None and v & (v - 1):
            raise ValueError(f"{v} is not a power of two (e.g. 1073741824)")
        return v


class AutoscalerConfig(Model):
    """cluster-autoscaler (key ``autoscaler``): worker groups scale between minSize and maxSize."""

    enabled: bool = True


class PreflightConfig(Model):
    """Account checks before anything is created (key ``preflight``)."""

    enabled: bool = True
