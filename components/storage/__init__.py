"""Shared file systems for the training pods, mounted through one ReadWriteMany claim."""

from components.storage.efs import EfsStorage, EfsStorageArgs

__all__ = ["EfsStorage", "EfsStorageArgs"]
