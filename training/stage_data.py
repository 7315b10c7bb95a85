"""Stage a dataset's tarball onto the shared volume (the data-staging Job); by default CIFAR-10's.

``python /app/stage_data.py --dest /data [--source URL|s3://bucket/key|file:///path] [--md5 HEX] [--expected-bytes N]
[--lock-timeout SECONDS] [--retries N]``. It exits 0 at once when ``<dest>/.cifar10-staged.json`` records the same
source and every file is in place (checked again under an exclusive ``fcntl`` lock on ``<dest>/.stage_data.lock``);
otherwise, holding the lock, it downloads into ``<dest>``, checks size and md5 (the official tarball's by default),
extracts safely, swaps the archive's top-level entries in with ``os.rename`` and writes the marker last. The archive's
content lands in ``<dest>``; a CIFAR-10 tarball's (``cifar-10-batches-py/``) is checked to hold every batch. ``s3://``
uses boto3 and the standard AWS environment. Exit code 0 on success (or nothing to do), 1 on any failure; a failed run
leaves no partial data in ``<dest>``. The steps and why: "Data staging" in docs/explanation/programs.md."""

from __future__ import annotations

import argparse
import datetime as dt
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cifar_io  # noqa: E402  (needs the sys.path entry above)

DEFAULT_SOURCE = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
DEFAULT_MD5 = "c58f30108f718f92721af3b95e74349a"
DEFAULT_BYTES = 170498071
MARKER_NAME = ".cifar10-staged.json"
LOCK_NAME = ".stage_data.lock"
TEMP_PREFIXES = (".download-", ".extract-", ".replaced-")
#: Names an archive may not put at the top of ``<dest>``: the stager's own files.
RESERVED = (MARKER_NAME, LOCK_NAME)
CHUNK = 1 << 20
#: Files checked at a time when a staging finds its marker (NFS answers each stat in a round trip: one at a time, a
#: million files on EFS take tens of minutes), and how many are handed to the threads at once.
STAT_THREADS = 32
STAT_BATCH = 4096


class StageError(RuntimeError):
    """A staging step failed; the message says which and why."""


def log(event: str, **fields: Any) -> None:
    """One JSON line on stdout."""
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line interface."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source",
        default=DEFAULT_SOURCE,
        help="https:// URL, s3://bucket/key or file:///path of a tarball (default: CIFAR-10's python version)",
    )
    parser.add_argument(
        "--dest",
        required=True,
        type=Path,
        help="destination folder (the shared volume); the archive's content lands in it",
    )
    parser.add_argument(
        "--md5", default=None, help="expected md5 of the tarball (default: the official one for the default source)"
    )
    parser.add_argument(
        "--expected-bytes",
        type=int,
        default=None,
        help="expected size of the tarball in bytes (default: known size for the default source)",
    )
    parser.add_argument(
        "--lock-timeout", type=float, default=3600.0, help="seconds to wait for another stager holding the lock"
    )
    parser.add_argument("--retries", type=int, default=3, help="download attempts for https sources")
    args = parser.parse_args(argv)
    if args.source == DEFAULT_SOURCE:
        args.md5 = args.md5 or DEFAULT_MD5
        args.expected_bytes = args.expected_bytes if args.expected_bytes is not None else DEFAULT_BYTES
    if args.md5 is not None:
        args.md5 = args.md5.strip().lower()
        if len(args.md5) != 32 or any(c not in "0123456789abcdef" for c in args.md5):
            parser.error("--md5 must be 32 hex digits")
    if args.expected_bytes is not None and args.expected_bytes <= 0:
        parser.error("--expected-bytes must be positive")
    if args.retries < 1:
        parser.error("--retries must be >= 1")
    return args


# --------------------------------------------------------------------------- #
# Marker and lock
# --------------------------------------------------------------------------- #
def read_marker(dest: Path) -> dict[str, Any] | None:
    """The marker written by a successful run, or None."""
    try:
        data = json.loads((dest / MARKER_NAME).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def already_staged(dest: Path, source: str, md5: str | None) -> dict[str, Any] | None:
    """The marker if it matches ``source``/``md5`` and all its files are intact, else None."""
    marker = read_marker(dest)
    if marker is None or marker.get("source") != source:
        return None
    if md5 is not None and marker.get("md5") != md5:
        return None
    files = marker.get("files")
    if not isinstance(files, dict) or not files:
        return None
    # a marker without "entries" lists CIFAR-10's batch files by name, inside their folder
    folder = dest if "entries" in marker else dest / cifar_io.BATCH_DIR_NAME
    items = list(files.items())
    pool = ThreadPoolExecutor(STAT_THREADS)
    try:
        for start in range(0, len(items), STAT_BATCH):
            batch = items[start : start + STAT_BATCH]
            if not all(pool.map(lambda item: _intact(folder / item[0], item[1]), batch)):
                return None
    finally:
        pool.shutdown(cancel_futures=True)
    return marker


def _intact(path: Path, size: Any) -> bool:
    """``path`` is a file of ``size`` bytes (one stat: on EFS each is a round trip to the file system). A file that is
    not there is not intact; any other error (EIO, EACCES, a stale NFS handle) fails the staging, and the Job retries
    it, rather than replacing what training pods may be reading."""
    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return False
        raise
    return stat.S_ISREG(st.st_mode) and st.st_size == size


def staged_entries(dest: Path) -> list[str]:
    """The top-level entries the last marker says it staged (CIFAR-10's folder for a marker without them)."""
    marker = read_marker(dest)
    if marker is None:
        return []
    entries = marker.get("entries", [cifar_io.BATCH_DIR_NAME])
    return [e for e in entries if isinstance(e, str) and e and "/" not in e and e not in (".", "..")]


@contextmanager
def exclusive_lock(dest: Path, timeout: float) -> Iterator[None]:
    """Hold ``fcntl.flock(LOCK_EX)`` on ``<dest>/.stage_data.lock``; poll up to ``timeout`` s."""
    path = dest / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise StageError(f"another stager held {path} for more than {timeout:.0f}s") from None
                if not announced:
                    log("waiting_for_lock", lock=str(path))
                    announced = True
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {os.uname().nodename}\n".encode())
        yield
    finally:
        os.close(fd)  # closing releases the lock


def remove_leftovers(dest: Path) -> None:
    """Delete temp files/folders of an earlier run that died (call with the lock held)."""
    for entry in dest.iterdir():
        if entry.name.startswith(TEMP_PREFIXES):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            log("removed_leftover", path=str(entry))


# --------------------------------------------------------------------------- #
# Download
# --------------------------------------------------------------------------- #
class HashingWriter:
    """Writes chunks to a file while counting bytes and computing the md5."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.md5 = hashlib.md5()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``."""
        self.handle.write(chunk)
        self.md5.update(chunk)
        self.size += len(chunk)

    def reset(self) -> None:
        """Start over (before a retry)."""
        self.handle.seek(0)
        self.handle.truncate()
        self.md5 = hashlib.md5()
        self.size = 0


def fetch_https(url: str, out: HashingWriter, retries: int) -> None:
    """Stream an http(s) URL into ``out``, retrying transient failures with back-off."""
    for attempt in range(1, retries + 1):
        out.reset()
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "stage-data/1.0"})
            with urllib.request.urlopen(request, timeout=60) as response:
                length = response.headers.get("Content-Length")
                for chunk in iter(lambda: response.read(CHUNK), b""):
                    out.write(chunk)
            if length is not None and int(length) != out.size:
                raise StageError(f"short read: got {out.size} of {length} bytes")
            return
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code != 429:
                raise StageError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") from exc
            error: Exception = exc
        except (urllib.error.URLError, OSError, StageError) as exc:
            error = exc
        log("download_retry", attempt=attempt, error=repr(error))
        if attempt < retries:
            time.sleep(min(30.0, 2.0**attempt))
    raise StageError(f"download of {url} failed after {retries} attempts: {error!r}")


def fetch_s3(uri: str, out: HashingWriter) -> None:
    """Stream ``s3://bucket/key`` into ``out`` with boto3 (standard AWS env, incl. AWS_ENDPOINT_URL)."""
    import boto3
    import botocore.exceptions

    parsed = urllib.parse.urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if not bucket or not key:
        raise StageError(f"bad S3 URI {uri!r}: expected s3://bucket/key")
    try:
        body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"]
        for chunk in body.iter_chunks(CHUNK):
            out.write(chunk)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise StageError(f"download of {uri} failed: {exc}") from exc


def fetch_file(source: str, out: HashingWriter) -> None:
    """Copy a local file (``file:///path`` or a plain path) into ``out``."""
    if source.startswith("file:"):
        path = Path(urllib.parse.unquote(urllib.parse.urlparse(source).path))
    else:
        path = Path(source)
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(CHUNK), b""):
                out.write(chunk)
    except OSError as exc:
        raise StageError(f"cannot read {path}: {exc}") from exc


def download(source: str, target: IO[bytes], retries: int) -> tuple[str, int]:
    """Fetch ``source`` into the open file ``target``; return (md5 hex, size)."""
    out = HashingWriter(target)
    scheme = urllib.parse.urlparse(source).scheme
    if scheme in ("http", "https"):
        fetch_https(source, out, retries)
    elif scheme == "s3":
        fetch_s3(source, out)
    elif scheme in ("file", ""):
        fetch_file(source, out)
    else:
        raise StageError(f"unsupported source scheme {scheme!r} (use https://, s3:// or file://)")
    target.flush()
    os.fsync(target.fileno())
    return out.md5.hexdigest(), out.size


# --------------------------------------------------------------------------- #
# Extraction
# --------------------------------------------------------------------------- #
def check_member(member: tarfile.TarInfo) -> None:
    """Reject members that could write outside the extraction folder or are not plain files/dirs."""
    name = member.name
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or (parts and ":" in parts[0]) or ".." in parts:
        raise StageError(f"unsafe path in archive: {name!r}")
    if not (member.isfile() or member.isdir()):
        raise StageError(f"archive member {name!r} is not a regular file or folder (links/devices refused)")
    if parts and parts[0] != "." and (parts[0] in RESERVED or parts[0].startswith(TEMP_PREFIXES)):
        raise StageError(f"archive member {name!r} takes a name the stager keeps for itself")


def extract_safely(tar_path: Path, into: Path) -> None:
    """Extract ``tar_path`` into ``into`` after validating every member."""
    try:
        with tarfile.open(tar_path, "r:*") as archive:
            members = archive.getmembers()
            for member in members:
                check_member(member)
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 / 3.12: a second line of defence
                archive.extractall(into, members=members, filter="data")
            else:
                archive.extractall(into, members=members)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise StageError(f"cannot extract {tar_path.name}: {exc}") from exc


def verify_extracted(root: Path, cifar: bool) -> dict[str, int]:
    """The extracted files, relative path -> size; with ``cifar`` (CIFAR-10's own source, or an archive holding its
    folder) every batch must be there and the meta file must parse."""
    if cifar:
        missing = cifar_io.missing_files(root)
        if missing:
            raise StageError(f"archive lacks {', '.join(missing)} under {cifar_io.BATCH_DIR_NAME}/")
        try:
            cifar_io.load_label_names(root / cifar_io.BATCH_DIR_NAME)
        except Exception as exc:  # unpickling can fail in many ways
            raise StageError(f"{cifar_io.META_NAME} is unreadable: {exc}") from exc
    files = {p.relative_to(root).as_posix(): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}
    if not files:
        raise StageError("the archive holds no file")
    return files


def install(extracted: Path, dest: Path, replaced: list[str]) -> list[str]:
    """Move the extracted top-level entries into ``dest`` (rename, same filesystem), first moving aside the same
    names and ``replaced`` (what the last staging put there); returns the entries."""
    entries = sorted(p.name for p in extracted.iterdir())
    aside = Path(tempfile.mkdtemp(prefix=TEMP_PREFIXES[2], dir=dest))
    for name in sorted(set(entries) | set(replaced)):
        final = dest / name
        if final.exists() or final.is_symlink():
            os.rename(final, aside / name)
    for name in entries:
        os.rename(extracted / name, dest / name)
    cifar_io.fsync_dir(dest)
    shutil.rmtree(aside, ignore_errors=True)
    return entries


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #
def stage(args: argparse.Namespace) -> dict[str, Any]:
    """Do the work (lock held by the caller); return the marker contents."""
    dest: Path = args.dest
    remove_leftovers(dest)
    with tempfile.NamedTemporaryFile(prefix=TEMP_PREFIXES[0], suffix=".part", dir=dest, delete=False) as tmp:
        tmp_path = Path(tmp.name)
    extract_dir: Path | None = None
    try:
        started = time.time()
        log("download_start", source=args.source, to=str(tmp_path))
        with tmp_path.open("r+b") as handle:
            md5, size = download(args.source, handle, args.retries)
        log("download_done", bytes=size, md5=md5, seconds=round(time.time() - started, 2))
        if args.expected_bytes is not None and size != args.expected_bytes:
            raise StageError(f"size mismatch: got {size} bytes, expected {args.expected_bytes}")
        if args.md5 is not None and md5 != args.md5:
            raise StageError(f"md5 mismatch: got {md5}, expected {args.md5}")

        extract_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIXES[1], dir=dest))
        extract_safely(tmp_path, extract_dir)
        cifar = args.source == DEFAULT_SOURCE or (extract_dir / cifar_io.BATCH_DIR_NAME).is_dir()
        files = verify_extracted(extract_dir, cifar)
        replaced = staged_entries(dest)
        # until the new marker: no file counts as staged, and every entry either staging put here is still known
        names = sorted(set(replaced) | {p.name for p in extract_dir.iterdir()})
        cifar_io.atomic_write_json(dest / MARKER_NAME, {"source": None, "entries": names, "files": {}})
        entries = install(extract_dir, dest, replaced)
        marker = {
            "source": args.source,
            "md5": md5,
            "bytes": size,
            "entries": entries,
            "files": files,
            "staged_at": dt.datetime.now(dt.UTC).isoformat(),
            "host": os.uname().nodename,
        }
        cifar_io.atomic_write_json(dest / MARKER_NAME, marker)
        return marker
    finally:
        tmp_path.unlink(missing_ok=True)
        if extract_dir is not None:
            shutil.rmtree(extract_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    dest: Path = args.dest
    try:
        dest.mkdir(parents=True, exist_ok=True)
        marker = already_staged(dest, args.source, args.md5)
        if marker is None:
            with exclusive_lock(dest, args.lock_timeout):
                marker = already_staged(dest, args.source, args.md5)  # a concurrent stager may have finished
                if marker is None:
                    if read_marker(dest) is not None:
                        log("restaging", reason="marker does not match this source/checksum or files changed")
                    marker = stage(args)
                    log(
                        "staged",
                        dest=str(dest),
                        source=args.source,
                        md5=marker["md5"],
                        bytes=marker["bytes"],
                    )
                    return 0
        log(
            "already_staged",
            dest=str(dest),
            source=marker["source"],
            md5=marker["md5"],
            staged_at=marker.get("staged_at"),
        )
        return 0
    except StageError as exc:
        log("failed", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
