"""Content addressing of a Docker build context (pure: reads files, no Pulumi, no AWS).

The image tag is a hash of the build context, computed when the program runs: the same context
gives the same tag (nothing is rebuilt), a changed file gives a new one.
"""

import hashlib
import os
import re
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

HASH_SCHEME = "eks-training-image-context-v1"
"""Versioned prefix of the context hash: bump it if the hashing rules change."""
TAG_HEX_LENGTH = 24
"""Length of the image tag (hex characters of the context hash)."""
CONTEXT_PREFIX = "contexts"
"""S3 key prefix of uploaded build contexts."""

DEFAULT_PLATFORM = "linux/amd64"
"""Target platform of the image (part of the hash: it changes the image)."""


@dataclass(frozen=True)
class DockerignorePattern:
    """One ``.dockerignore`` line, cleaned as Docker does."""

    pattern: str
    exclude: bool
    """False for ``!pattern`` (re-include)."""
    regex: "re.Pattern[str]"


@dataclass(frozen=True)
class ContextEntry:
    """One file (or symlink) of the build context."""

    path: str
    """Path relative to the context root, ``/``-separated."""
    mode: int
    """0o755 if any execute bit is set, else 0o644 (like git: umask-independent); 0o777 for symlinks."""
    is_symlink: bool
    sha256: str
    """Hex digest of the content (of the link target text for a symlink)."""


def glob_regex(pattern: str, doublestar: bool = True) -> "re.Pattern[str]":
    """Docker/Go ``filepath.Match`` semantics, plus ``**`` (any number of directories) when ``doublestar``, as
    ``.dockerignore`` reads it (a COPY source reads it as ``*``)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            if j - i >= 2 and doublestar:
                if j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")
                    j += 1
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
            i = j
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$")


def parse_dockerignore(text: str) -> list[DockerignorePattern]:
    """Parse ``.dockerignore`` content: ``#`` comments, blank lines, ``!`` re-includes, leading ``/``
    and ``./`` dropped, paths cleaned (``a//b/../c`` -> ``a/c``)."""
    patterns: list[DockerignorePattern] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclude = True
        if line.startswith("!"):
            exclude = False
            line = line[1:].strip()
        line = os.path.normpath(line.replace("\\", "/")).replace(os.sep, "/").lstrip("/")
        if line in ("", "."):
            continue
        patterns.append(DockerignorePattern(line, exclude, glob_regex(line)))
    return patterns


def is_ignored(path: str, patterns: Sequence[DockerignorePattern]) -> bool:
    """Docker's rule: the last pattern that matches the path *or one of its parent directories* wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    ignored = False
    for p in patterns:
        if any(p.regex.match(candidate) for candidate in prefixes):
            ignored = p.exclude
    return ignored


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def collect_folder(
    folder: str, *, always: Sequence[str] = (), default_ignores: Sequence[str] = (), what: str = "folder"
) -> list[ContextEntry]:
    """Pure (reads files only): the files of ``folder`` that are not ignored, sorted by path.

    Ignored: ``default_ignores`` (``.dockerignore`` patterns applied before the folder's own, which may re-include
    with ``!``), then the folder's ``.dockerignore`` (basic patterns: ``*``, ``?``, ``[...]``, ``**``, ``!``
    re-includes, parent-directory matches). ``always`` paths are kept whatever the patterns say. Symlinks are kept
    as links (never followed); empty directories, sockets, fifos and devices are not part of it. Raises
    ``ValueError`` when the folder is missing."""
    root = os.path.abspath(folder)
    if not os.path.isdir(root):
        raise ValueError(f"{what} directory {folder!r} does not exist")
    patterns: list[DockerignorePattern] = parse_dockerignore("\n".join(default_ignores))
    ignore_path = os.path.join(root, ".dockerignore")
    if os.path.isfile(ignore_path):
        with open(ignore_path, encoding="utf-8") as f:
            patterns += parse_dockerignore(f.read())
    has_reincludes = any(not p.exclude for p in patterns)
    keep = set(always)

    entries: list[ContextEntry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        if not has_reincludes:  # prune ignored directories (safe only without `!` patterns)
            dirnames[:] = [d for d in dirnames if not is_ignored(rel_dir + d, patterns)]
        # Symlinks to directories are listed in dirnames but not followed: treat them as links.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if d not in links]
        for name in list(filenames) + links:
            rel = rel_dir + name
            if rel not in keep and is_ignored(rel, patterns):
                continue
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(full)
                entries.append(ContextEntry(rel, 0o777, True, hashlib.sha256(target.encode("utf-8")).hexdigest()))
            elif stat.S_ISREG(st.st_mode):
                mode = 0o755 if st.st_mode & 0o111 else 0o644
                entries.append(ContextEntry(rel, mode, False, _file_sha256(full)))
            # sockets, fifos, devices: not files to send
    entries.sort(key=lambda e: e.path)
    return entries


def collect_build_context(context_dir: str, dockerfile: str = "Dockerfile") -> list[ContextEntry]:
    """Pure (reads files only): the files Docker would send for ``context_dir``, sorted by path
    (:func:`collect_folder` with the context's ``.dockerignore``). The Dockerfile and ``.dockerignore`` are always
    included, as Docker always sends them. Empty directories are not part of the context hash. Raises
    ``ValueError`` when the directory or the Dockerfile is missing."""
    root = os.path.abspath(context_dir)
    if not os.path.isdir(root):
        raise ValueError(f"build context directory {context_dir!r} does not exist")
    dockerfile_rel = os.path.normpath(dockerfile).replace(os.sep, "/")
    if not os.path.isfile(os.path.join(root, dockerfile_rel)):
        raise ValueError(f"build context {context_dir!r} has no {dockerfile_rel} (the Dockerfile to build)")
    return collect_folder(context_dir, always=(dockerfile_rel, ".dockerignore"), what="build context")


def hash_build_context(
    context_dir: str,
    dockerfile: str = "Dockerfile",
    platform: str = DEFAULT_PLATFORM,
    build_args: Optional[Mapping[str, str]] = None,
) -> str:
    """Pure: sha256 (64 hex) of the build context.

    Hashed, in path order: each entry's relative ``/`` path, kind (file/symlink), normalised mode
    (0644/0755) and content sha256, after :data:`HASH_SCHEME`, the Dockerfile path, the target
    platform and the build arguments by name (all change the image; no arguments hash as before there were
    any). File order on disk, mtimes, owners and the absolute location of the directory do not matter; files
    excluded by ``.dockerignore`` do not matter."""
    h = hashlib.sha256()
    h.update(f"{HASH_SCHEME}\0dockerfile={dockerfile}\0platform={platform}\0".encode("utf-8"))
    for k, v in sorted((build_args or {}).items()):
        h.update(f"build-arg\0{k}\0{v}\n".encode("utf-8"))
    for e in collect_build_context(context_dir, dockerfile):
        kind = "symlink" if e.is_symlink else "file"
        h.update(f"{e.path}\0{kind}\0{e.mode:o}\0{e.sha256}\n".encode("utf-8"))
    return h.hexdigest()


def image_tag_for(context_hash: str) -> str:
    """The image tag for a context hash: its first :data:`TAG_HEX_LENGTH` hex characters."""
    return context_hash[:TAG_HEX_LENGTH]


def write_context_zip(context_dir: str, dest: str, dockerfile: str = "Dockerfile") -> list[ContextEntry]:
    """Write the build context as a deterministic zip (:func:`write_folder_zip`); returns the entries."""
    entries = collect_build_context(context_dir, dockerfile)
    write_folder_zip(context_dir, entries, dest)
    return entries


def write_folder_zip(folder: str, entries: Sequence[ContextEntry], dest: str) -> None:
    """Write ``entries`` of ``folder`` as a deterministic zip: entries sorted, timestamps fixed (1980-01-01),
    stored (not deflated, so the bytes do not depend on the zlib version), Unix mode bits kept (0644, 0755, or a
    symlink whose content is its target). The same entries give byte-identical zips. Written atomically."""
    root = os.path.abspath(folder)
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ctx-", suffix=".zip", dir=os.path.dirname(os.path.abspath(dest)))
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_STORED) as zf:
            for e in sorted(entries, key=lambda e: e.path):
                info = zipfile.ZipInfo(e.path, date_time=(1980, 1, 1, 0, 0, 0))
                info.create_system = 3  # Unix, so external_attr carries the mode
                full = os.path.join(root, *e.path.split("/"))
                if e.is_symlink:
                    info.external_attr = (stat.S_IFLNK | 0o777) << 16
                    data = os.readlink(full).encode("utf-8")
                else:
                    info.external_attr = (stat.S_IFREG | e.mode) << 16
                    with open(full, "rb") as f:
                        data = f.read()
                zf.writestr(info, data, compress_type=zipfile.ZIP_STORED)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def context_zip_path(context_hash: str) -> str:
    """Where the zipped context is written (a per-hash file under the system temp directory)."""
    return os.path.join(tempfile.gettempdir(), "eks-training-image-contexts", f"{context_hash}.zip")
