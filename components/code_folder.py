"""A job's code folder, content-addressed (pure: reads and writes files only): its files, hash, S3 key and
deterministic zip. :class:`components.job_code.JobCode` uploads it; the plan and the config rules read its hash.

The folder is read as an image build context is (:mod:`components.image.context`): its files, minus
:data:`DEFAULT_CODE_IGNORES` and the patterns of its own ``.dockerignore``; symlinks are kept as links; empty
folders are not part of it. An unchanged folder gives the same key and the same bytes.
"""

import hashlib
import os
import tempfile
from typing import Sequence

from components.image.context import ContextEntry, collect_folder, write_folder_zip

CODE_HASH_SCHEME = "eks-training-job-code-v1"
"""Versioned prefix of the code hash: bump it if the hashing rules change."""
CODE_PREFIX = "code"
"""S3 key prefix of uploaded code (``code/<sha256>.zip``)."""
DEFAULT_CODE_IGNORES: tuple[str, ...] = (".git", ".venv", ".local", "**/__pycache__", "**/*.pyc")
"""``.dockerignore`` patterns a code folder is read without (before its own ``.dockerignore``, whose ``!`` lines
may take them back): version control, a virtualenv, the local runner's work folder (``stacks.local``), and the
byte code Python writes beside imported modules (a local run would otherwise change the hash)."""


def collect_code(folder: str) -> list[ContextEntry]:
    """Pure (reads files only): the files of a code folder, sorted by path; ``ValueError`` when it is missing."""
    return collect_folder(folder, default_ignores=DEFAULT_CODE_IGNORES, what="code")


def hash_code(entries: Sequence[ContextEntry]) -> str:
    """sha256 (64 hex) of a code folder's entries: each relative path, kind, normalised mode (0644/0755) and
    content digest, in path order, after :data:`CODE_HASH_SCHEME`. Where the folder is, file order on disk,
    mtimes and owners do not matter."""
    h = hashlib.sha256(f"{CODE_HASH_SCHEME}\0".encode("utf-8"))
    for e in sorted(entries, key=lambda e: e.path):
        h.update(f"{e.path}\0{'symlink' if e.is_symlink else 'file'}\0{e.mode:o}\0{e.sha256}\n".encode("utf-8"))
    return h.hexdigest()


def code_hash(folder: str) -> str:
    """The content hash of a code folder (:func:`hash_code` of :func:`collect_code`)."""
    return hash_code(collect_code(folder))


def code_key(digest: str) -> str:
    """The S3 key of a code folder's zip: ``code/<sha256>.zip``."""
    return f"{CODE_PREFIX}/{digest}.zip"


def code_zip_path(digest: str) -> str:
    """Where the zipped code is written (a per-hash file under the system temp directory)."""
    return os.path.join(tempfile.gettempdir(), "eks-training-job-code", f"{digest}.zip")


def stage_code(folder: str) -> str:
    """Write a code folder's zip where its upload reads it (:func:`code_zip_path` of its hash); returns the hash.
    ``ValueError`` when the folder holds no file."""
    entries = collect_code(folder)
    if not entries:
        raise ValueError(f"the code folder {folder!r} holds no file")
    digest = hash_code(entries)
    write_folder_zip(folder, entries, code_zip_path(digest))
    return digest


def write_code_zip(folder: str, dest: str) -> str:
    """Write a code folder as a deterministic zip at ``dest``; returns its hash. Identical folders give
    byte-identical zips."""
    entries = collect_code(folder)
    write_folder_zip(folder, entries, dest)
    return hash_code(entries)
