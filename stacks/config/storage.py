"""The shared file system section (``storage``)."""

from typing import Literal, Optional

from pydantic import field_validator, model_validator

from stacks.config.base import EFS_ID_RE, NAME_RE, QUANTITY_RE, Model
from stacks.config.errors import check


class EfsConfig(Model):
    """The shared EFS volume (key ``storage``)."""

    namespace: str = "training"
    pvc_name: str = "shared-data"
    storage_class_name: str = "efs-shared"
    capacity: str = "1Ti"
    throughput_mode: Literal["elastic", "bursting"] = "elastic"
    performance_mode: Literal["generalPurpose", "maxIO"] = "generalPurpose"
    retain_on_delete: bool = False
    file_system_id: Optional[str] = None
    backup: bool = False

    @field_validator("namespace", "pvc_name", "storage_class_name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a valid Kubernetes name (lowercase letters, digits and '-', at most 63)")
        return v

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, v: str) -> str:
        if not QUANTITY_RE.match(v):
            raise ValueError(f"{v!r} is not a Kubernetes quantity (e.g. 1Ti)")
        return v

    @field_validator("file_system_id")
    @classmethod
    def _fs_id(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not EFS_ID_RE.match(v):
            raise ValueError(f"{v!r} is not an EFS id (fs-0123abcd...)")
        return v

    @model_validator(mode="after")
    def _modes(self) -> "EfsConfig":
        if self.performance_mode == "maxIO" and self.throughput_mode == "elastic":
            check(
                [
                    (
                        "performanceMode",
                        "maxIO does not support Elastic throughput; use generalPurpose (recommended) or set "
                        "@{throughputMode}: bursting",
                    )
                ]
            )
        return self
