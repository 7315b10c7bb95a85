"""Physical names: derived deterministically and kept within the limits the services enforce."""

import hashlib
import re

from components.catalog.limits import NAME_LIMITS

#: A Kubernetes object name (a DNS-1123 subdomain, at most 253 characters: ``IsDNS1123Subdomain`` in
#: k8s.io/apimachinery pkg/util/validation/validation.go).
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def short_hash(text: str, length: int = 8) -> str:
    """A stable hex digest prefix of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def fit_name(name: str, limit: int, *, separator: str = "-") -> str:
    """``name`` when it fits ``limit``, else its start plus a stable hash suffix of the whole name
    (so two long names that share a prefix stay distinct and the same name always maps the same way)."""
    if len(name) <= limit:
        return name
    digest = short_hash(name)
    keep = limit - len(digest) - len(separator)
    return f"{name[:keep].rstrip(separator + '.')}{separator}{digest}"


def k8s_name(*parts: str, limit: int = 63) -> str:
    """A DNS-1123 label from ``parts`` joined by ``-``; long names keep a hash suffix so they stay unique."""
    return fit_name("-".join(stripped for p in parts if (stripped := p.strip("-").lower())), limit)


def name_limit(resource_type: str, field: str) -> int:
    """The longest value the service accepts for ``field`` of ``resource_type`` (from the catalog's table)."""
    return NAME_LIMITS[(resource_type, field)].max_length


def fit_prefix(prefix: str, limit: int) -> str:
    """A name prefix ending in ``-`` within ``limit`` characters (shortened like :func:`fit_name`)."""
    return fit_name(prefix.rstrip("-"), limit - 1) + "-"
