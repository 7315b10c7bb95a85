"""Shared file systems for the training pods, mounted through one ReadWriteMany claim."""

from typing import TYPE_CHECKING

from components.lazy import lazy_exports

if TYPE_CHECKING:
    from components.storage.csi import CsiDriverArgs
    from components.storage.efs import EfsStorage, EfsStorageArgs
    from components.storage.fsx import FsxLustreStorage, FsxLustreStorageArgs

__getattr__ = lazy_exports(
    __name__,
    {
        "csi": ("CsiDriverArgs",),
        "efs": ("EfsStorage", "EfsStorageArgs"),
        "fsx": ("FsxLustreStorage", "FsxLustreStorageArgs"),
    },
)

__all__ = ["CsiDriverArgs", "EfsStorage", "EfsStorageArgs", "FsxLustreStorage", "FsxLustreStorageArgs"]
