"""Download a job's code from S3 into a folder: the init container of a job with ``code``.

Usage::

    python /app/fetch_code.py --source s3://bucket/prefix/ --dest /workspace
    python /app/fetch_code.py --source s3://bucket/code/<sha256>.zip --dest /workspace

A prefix (ending in ``/``): every object under it is copied to the same relative path under ``--dest``. A ``.zip``
object (what the program uploads for a ``code`` folder of the project): it is downloaded and extracted under
``--dest``, executables keep their mode (0755, other files 0644), symlinks are made again. Keys or entries that
would be written outside ``--dest`` (``..``, absolute paths, a symlink leading out, a path through a symlink) are
refused before anything is written. The pod's own credentials are used (EKS Pod Identity: a role that may read
only that prefix, or that object). A try that finds no credentials yet, or is refused access, is tried again for up
to ``--access-wait`` seconds (:data:`ACCESS_WAIT_S`). Exit codes: 0 copied (at least one file), 1 an S3 error,
nothing under the prefix, an empty or refused archive, 2 usage error. Every line on stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

#: How long a try without credentials, or refused access, is tried again. A new Pod Identity association, and a new
#: role's policy, take effect some seconds after the API call that made them ("eventually consistent":
#: https://docs.aws.amazon.com/eks/latest/APIReference/API_CreatePodIdentityAssociation.html,
#: https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html#troubleshoot_general_eventual-consistency).
ACCESS_WAIT_S = 180.0
#: The pause after the first refused try; it doubles after each, up to :data:`MAX_PAUSE_S`.
FIRST_PAUSE_S, MAX_PAUSE_S = 1.0, 15.0
#: S3's error codes for credentials it does not accept yet, or a policy that does not allow the read yet (``403``:
#: a HEAD request's refusal has no body, so no code but the status).
ACCESS_CODES = frozenset({"AccessDenied", "403", "InvalidAccessKeyId", "InvalidToken", "ExpiredToken"})
#: The variable EKS Pod Identity sets in a pod whose service account has an association: the agent's address.
POD_IDENTITY_URI = "AWS_CONTAINER_CREDENTIALS_FULL_URI"


def log(event: str, **fields: Any) -> None:
    """One JSON object on stdout."""
    print(json.dumps({"event": event, "component": "fetch_code", "time": round(time.time(), 3), **fields}), flush=True)


def split_source(source: str) -> tuple[str, str]:
    """``s3://bucket/prefix/`` -> (bucket, prefix); ``s3://bucket/key.zip`` -> (bucket, key)."""
    if not source.startswith("s3://"):
        raise ValueError(f"{source!r} is not an s3:// URI")
    bucket, _, prefix = source[len("s3://") :].partition("/")
    if not bucket or (prefix and not prefix.endswith("/") and not prefix.endswith(".zip")):
        raise ValueError(
            f"{source!r} must be s3://bucket/ or s3://bucket/prefix/ (ending in '/'), or a .zip object "
            "(s3://bucket/key.zip)"
        )
    return bucket, prefix


class Member(NamedTuple):
    """One entry of a code archive, checked: where it goes, and what it is."""

    info: zipfile.ZipInfo
    rel: PurePosixPath
    kind: str
    """``file``, ``dir`` or ``symlink``."""
    mode: int
    """0o755 or 0o644 for a file."""


def _inside(rel: PurePosixPath) -> bool:
    """``rel`` is a relative path that stays under its root (no ``..``, not absolute, not empty)."""
    return bool(rel.parts) and not rel.is_absolute() and ".." not in rel.parts


def plan_archive(zf: zipfile.ZipFile) -> list[Member]:
    """The archive's entries, checked before anything is written: ``ValueError`` for an entry that would be written
    outside the destination (absolute, ``..``, through a symlink of the archive, a symlink whose target leads out),
    twice, or is neither a file, a folder nor a symlink."""
    members: list[Member] = []
    seen: set[PurePosixPath] = set()
    links: set[PurePosixPath] = set()
    for info in zf.infolist():
        name = info.filename
        rel = PurePosixPath(name.replace("\\", "/"))
        if name.startswith("/") or "\\" in name or not _inside(rel):
            raise ValueError(f"refusing entry {name!r}: it would be written outside the destination")
        if rel in seen:
            raise ValueError(f"refusing entry {name!r}: it is in the archive twice")
        seen.add(rel)
        unix = info.external_attr >> 16 if info.create_system == 3 else 0
        if info.is_dir():
            members.append(Member(info, rel, "dir", 0o755))
        elif stat.S_ISLNK(unix):
            target = PurePosixPath(zf.read(info).decode("utf-8"))
            resolved = os.path.normpath(str(rel.parent / target))
            if target.is_absolute() or resolved == ".." or resolved.startswith("../"):
                raise ValueError(f"refusing entry {name!r}: a symlink to {str(target)!r} leads outside the destination")
            links.add(rel)
            members.append(Member(info, rel, "symlink", 0o777))
        elif stat.S_IFMT(unix) in (0, stat.S_IFREG):  # no type bits: a file (zipfile's writestr writes 0o600)
            members.append(Member(info, rel, "file", 0o755 if unix & 0o111 else 0o644))
        else:
            raise ValueError(f"refusing entry {name!r}: not a file, a folder or a symlink (mode {unix:o})")
    for m in members:
        through = [p for p in m.rel.parents if p in links]
        if through:
            raise ValueError(
                f"refusing entry {m.info.filename!r}: it would be written through the symlink {str(through[0])!r}"
            )
    return members


def extract(archive: Path, dest: Path) -> int:
    """Extract a code archive under ``dest`` (checked first by :func:`plan_archive`); returns the number of files and
    symlinks written. Files are written through a temporary name and keep their mode; symlinks are made last; a
    folder on the way that is a symlink leading out of ``dest`` (already there) is refused too."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    with zipfile.ZipFile(archive) as zf:
        members = plan_archive(zf)
        written = 0
        order = sorted(members, key=lambda m: (m.kind == "symlink", str(m.rel)))
        for m in order:
            path = dest.joinpath(*m.rel.parts)
            parent = path if m.kind == "dir" else path.parent
            parent.mkdir(parents=True, exist_ok=True)
            if not parent.resolve().is_relative_to(root):
                raise ValueError(f"refusing entry {m.info.filename!r}: {parent} leads outside {dest}")
            if m.kind == "dir":
                continue
            if m.kind == "symlink":
                if path.is_symlink() or path.exists():
                    path.unlink()
                path.symlink_to(zf.read(m.info).decode("utf-8"))
            else:
                tmp = path.with_name(f".{path.name}.part")
                with zf.open(m.info) as src, open(tmp, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                os.chmod(tmp, m.mode)
                os.replace(tmp, path)
            written += 1
    return written


def fetch_archive(s3: Any, bucket: str, key: str, dest: Path) -> int:
    """Download the object ``key`` (a zip) beside ``dest`` and extract it there; returns the files written."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fetch-code-") as tmp:
        archive = Path(tmp) / "code.zip"
        s3.download_file(bucket, key, str(archive))
        try:
            files = extract(archive, dest)
        except zipfile.BadZipFile as exc:
            raise ValueError(f"s3://{bucket}/{key} is not a zip archive: {exc}") from exc
    if not files:
        raise ValueError(f"s3://{bucket}/{key} holds no file")
    return files


def target(dest: Path, prefix: str, key: str) -> Path | None:
    """Where ``key`` goes under ``dest`` (``None`` for folder markers); ``ValueError`` for a key that escapes."""
    rel = key[len(prefix) :]
    if not rel or rel.endswith("/"):
        return None
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or ".." in parts:
        raise ValueError(f"refusing key {key!r}: it would be written outside {dest}")
    return dest.joinpath(*parts)


def copy_prefix(s3: Any, bucket: str, prefix: str, dest: Path) -> int:
    """Copy every object under ``prefix`` to its relative path under ``dest``; returns the files copied."""
    copied = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            path = target(dest, prefix, obj["Key"])
            if path is None:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.part")
            s3.download_file(bucket, obj["Key"], str(tmp))
            os.replace(tmp, path)
            copied += 1
    if not copied:
        raise ValueError("no object under the prefix")
    return copied


def access_error(exc: Exception) -> bool:
    """``exc`` says the pod's credentials are not there yet or not allowed yet (worth another try)."""
    from botocore.exceptions import ClientError, CredentialRetrievalError, NoCredentialsError, PartialCredentialsError

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        # Pod Identity's webhook sets the agent's address when it creates the pod, or never: without it no later try
        # finds credentials (a pod made before its association took effect; the next pod gets them)
        return POD_IDENTITY_URI in os.environ
    if isinstance(exc, CredentialRetrievalError):
        return True
    return isinstance(exc, ClientError) and str(exc.response.get("Error", {}).get("Code")) in ACCESS_CODES


def fetch(source: str, dest: Path) -> int:
    """One try: a client with the pod's credentials as they are now, then the copy; returns the files written."""
    import boto3

    bucket, prefix = split_source(source)
    s3 = boto3.session.Session().client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)
    if prefix.endswith(".zip"):
        return fetch_archive(s3, bucket, prefix, dest)
    return copy_prefix(s3, bucket, prefix, dest)


def fetch_with_access(source: str, dest: Path, wait_s: float) -> int:
    """:func:`fetch`, tried again while :func:`access_error` says so, for up to ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    pause, attempt = FIRST_PAUSE_S, 1
    while True:
        try:
            return fetch(source, dest)
        except Exception as exc:
            left = deadline - time.monotonic()
            if not access_error(exc) or left <= 0:
                raise
            log("fetch_retry", source=source, attempt=attempt, error=str(exc), retry_in_s=round(min(pause, left), 1))
            time.sleep(min(pause, left))
            pause, attempt = min(2 * pause, MAX_PAUSE_S), attempt + 1


def main(argv: list[str] | None = None) -> int:
    """Copy; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="s3://bucket/prefix/ or s3://bucket/key.zip")
    parser.add_argument("--dest", required=True, type=Path)
    parser.add_argument(
        "--access-wait",
        type=float,
        default=ACCESS_WAIT_S,
        help=f"seconds to keep trying while credentials are missing or access is refused (default {ACCESS_WAIT_S:g})",
    )
    try:
        args = parser.parse_args(argv)
        split_source(args.source)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    except ValueError as exc:
        print(f"fetch_code.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        files = fetch_with_access(args.source, args.dest, args.access_wait)
    except (BotoCoreError, ClientError, Boto3Error, OSError, ValueError) as exc:
        error = str(exc)
        if isinstance(exc, NoCredentialsError) and POD_IDENTITY_URI not in os.environ:
            error += (
                f" ({POD_IDENTITY_URI} is not set: the pod was made before its Pod Identity association took effect, "
                "or its service account has none; a new pod of the job gets it)"
            )
        log("fetch_failed", source=args.source, error=error)
        return EXIT_FAILURE
    log("fetched", source=args.source, dest=str(args.dest), files=files)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
