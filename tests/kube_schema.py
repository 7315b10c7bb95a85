"""The official Kubernetes schemas (kubernetes-validate, strict: unknown fields fail), read once per process.

``kubernetes_validate.validate`` reads the kind's JSON schema and the whole ``_definitions.json`` of the version from
its package on every call (0.01 s per object, some 700 objects per run); the files of the installed package do not
change, so :func:`validate` keeps what ``kubernetes_validate.utils.schema_contents`` read (the schemas are only read:
``validate`` builds its validator over them). What is validated, and against which version, is the library's own."""

import functools
from typing import Any

import kubernetes_validate
from kubernetes_validate import utils

ValidationError = kubernetes_validate.ValidationError

if not hasattr(utils.schema_contents, "cache_info"):
    utils.schema_contents = functools.cache(utils.schema_contents)


def validate(doc: dict[str, Any], version: str) -> None:
    """``doc`` against the official schema of Kubernetes ``version`` (``1.33.0``), strict; raises
    :class:`ValidationError`."""
    kubernetes_validate.validate(doc, version, strict=True)
