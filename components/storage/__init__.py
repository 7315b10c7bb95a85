"""Shared file systems for the training pods, mounted through one ReadWriteMany claim."""

from components.storage.efs import EfsStorage, EfsStorageArgs
from components.storage.fsx import FsxLustreStorage, FsxLustreStorageArgs

__all__ = ["EfsStorage", "EfsStorageArgs", "FsxLustreStorage", "FsxLustreStorageArgs"]
