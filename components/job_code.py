"""A job's code from a local folder to S3, content-addressed: :class:`JobCode` uploads each distinct folder
content once, as a deterministic zip keyed by its hash, to one private bucket; a job's pods download the object
(``training/fetch_code.py``) through a Pod Identity role that may read exactly that object.

The folder is read as an image build context is (:mod:`components.image.context`): its files, minus
:data:`DEFAULT_CODE_IGNORES` and the patterns of its own ``.dockerignore``; symlinks are kept as links; empty
folders are not part of it. Hashing and zipping happen when the program runs (never inside ``apply``): an
unchanged folder gives the same key and the same bytes (nothing is uploaded again), a changed one a new key (the
pods get the new code). The object is encrypted with SSE-S3 (AES256), the bucket's default: reading it needs
``s3:GetObject`` only, no ``kms:Decrypt`` on a key
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingServerSideEncryption.html).
"""

import hashlib
import os
import re
import tempfile
from typing import Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired

from components.image.context import ContextEntry, collect_folder, write_folder_zip
from components.private_bucket import private_bucket

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


def write_code_zip(folder: str, dest: str) -> str:
    """Write a code folder as a deterministic zip at ``dest``; returns its hash. Identical folders give
    byte-identical zips."""
    entries = collect_code(folder)
    write_folder_zip(folder, entries, dest)
    return hash_code(entries)


class JobCodeArgs(TypedDict):
    """Inputs of :class:`JobCode`."""

    folders: Mapping[str, str]
    """Name (a job) -> a local folder of code; folders with the same content share one object."""
    tags: NotRequired[Mapping[str, str]]
    """Tags added to every taggable child."""


class JobCode(pulumi.ComponentResource):
    """A private bucket (SSE-S3, public access blocked, TLS only) and one zip object per distinct folder content,
    keyed ``code/<sha256>.zip``: the ``s3://`` URI of each name's object is what a job's ``code_uri`` takes."""

    bucket_name: pulumi.Output[str]
    """The bucket holding the code."""
    uris: pulumi.Output[dict[str, str]]
    """Name -> ``s3://<bucket>/code/<sha256>.zip``, the object of that name's folder."""
    hashes: pulumi.Output[dict[str, str]]
    """Name -> the content hash of its folder."""

    def __init__(self, name: str, args: JobCodeArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:JobCode", name, None, opts)
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", name):
            # the bucket is auto-named from it (<name>-bucket-<7 random characters>: S3 allows 63, lowercase)
            raise ValueError(f"JobCode name {name!r} must be 1-40 lowercase letters, digits or '-'")
        folders = dict(args["folders"])
        if not folders:
            raise ValueError(f"{name}: give at least one folder")
        tags: dict[str, str] = dict(args.get("tags") or {})
        # program-time content addressing: hash, then a deterministic zip named by the hash
        hashes: dict[str, str] = {}
        for key in sorted(folders):
            entries = collect_code(folders[key])
            if not entries:
                raise ValueError(f"{name}: the code folder {folders[key]!r} of {key!r} holds no file")
            digest = hash_code(entries)
            write_folder_zip(folders[key], entries, code_zip_path(digest))
            hashes[key] = digest
        bucket = private_bucket(self, f"{name}-bucket", force_destroy=True, tags=tags)
        objects: dict[str, aws.s3.BucketObjectv2] = {}
        for digest in sorted(set(hashes.values())):
            objects[digest] = aws.s3.BucketObjectv2(
                f"{name}-{digest[:16]}",
                bucket=bucket.bucket.id,
                key=code_key(digest),
                source=pulumi.FileAsset(code_zip_path(digest)),
                content_type="application/zip",
                server_side_encryption="AES256",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[bucket.encryption]),
            )
        names = sorted(hashes)
        # each URI is read from its object's outputs: a pod that gets it is created after the upload
        self.bucket_name = bucket.bucket.bucket
        self.uris = pulumi.Output.all(
            *[pulumi.Output.all(objects[hashes[k]].bucket, objects[hashes[k]].key) for k in names]
        ).apply(lambda v: {k: f"s3://{b}/{key}" for k, (b, key) in zip(names, v)})
        self.hashes = pulumi.Output.from_input(hashes)
        self.register_outputs({"bucket_name": self.bucket_name, "uris": self.uris, "hashes": self.hashes})
