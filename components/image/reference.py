"""Container image references (pure)."""

import re
from typing import Optional

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_RE = re.compile(rf"^{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?$")
_PATH_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")


def validate_image_reference(uri: str, *, require_pinned: bool = True) -> Optional[str]:
    """Check that ``uri`` is a plausible container image reference
    ``[registry[:port]/]repo/path[:tag][@sha256:<64 hex>]``.

    Returns ``None`` when it is fine, else a one-line message naming the problem. With
    ``require_pinned`` (default) a reference on ``:latest``, implicit (no tag and no digest) or written, is a
    problem, because a training job should run a known image."""
    if not isinstance(uri, str) or not uri:
        return "image reference is empty"
    if any(ch.isspace() for ch in uri):
        return f"image reference {uri!r} contains whitespace"
    if "://" in uri:
        return f"image reference {uri!r} must not contain a URL scheme (drop 'https://')"
    name, at, digest = uri.partition("@")
    if at and not _DIGEST_RE.match(digest):
        return (
            f"image reference {uri!r} has an invalid digest {digest!r}: expected sha256: followed by 64 lowercase "
            "hex digits"
        )
    tag = ""
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG_RE.match(tag):
            return (
                f"image reference {uri!r} has an invalid tag {tag!r} (letters, digits, '_', '.', '-'; at most 128; "
                "not starting with '.' or '-')"
            )
    if not name:
        return f"image reference {uri!r} has no repository name"
    if len(name) > 255:
        return f"image reference {uri!r}: repository name longer than 255 characters"
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN_RE.match(first):
            return f"image reference {uri!r} has an invalid registry host {first!r}"
        parts = parts[1:]
    for part in parts:
        if not part:
            return f"image reference {uri!r} has an empty path component (doubled or trailing '/')"
        if part.lower() != part and _PATH_COMPONENT_RE.match(part.lower()):
            return f"image reference {uri!r}: repository path {part!r} must be lowercase"
        if not _PATH_COMPONENT_RE.match(part):
            return f"image reference {uri!r} has an invalid repository path component {part!r}"
    if require_pinned and not tag and not at:
        return f"image reference {uri!r} has neither a tag nor a @sha256 digest (it would float on :latest); pin one"
    if require_pinned and tag == "latest" and not at:
        return f"image reference {uri!r} floats on :latest (each pull may get another image)"
    return None


#: Host names of Docker Hub's registry.
DOCKER_HUB_HOSTS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


def registry_of(uri: str) -> str:
    """The registry host of an image reference, as Docker resolves it: the first path component when it looks
    like a host (has a ``.`` or a ``:``, or is ``localhost``), else Docker Hub (``docker.io``), so
    ``ubuntu:24.04`` and ``pytorch/pytorch:2.9.1`` are both on ``docker.io``."""
    name = uri.partition("@")[0]
    first, slash, _ = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first.lower()
    return "docker.io"


def is_docker_hub(uri: str) -> bool:
    """Whether ``uri`` is pulled from Docker Hub (explicitly or by default)."""
    return registry_of(uri) in DOCKER_HUB_HOSTS
