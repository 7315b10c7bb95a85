"""A job's code from a local folder to S3, content-addressed: :class:`JobCode` uploads each distinct folder
content once, as a deterministic zip keyed by its hash, to one private bucket; a job's pods download the object
(``training/fetch_code.py``) through a Pod Identity role that may read exactly that object.

The folder is read, hashed and zipped as :mod:`components.code_folder` says, when the program runs (never inside
``apply``): an unchanged folder gives the same key and the same bytes (nothing is uploaded again), a changed one a new
key (the pods get the new code). The object is encrypted with SSE-S3 (AES256), the bucket's default: reading it needs
``s3:GetObject`` only, no ``kms:Decrypt`` on a key
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingServerSideEncryption.html).
"""

import re
from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_aws as aws
from typing_extensions import NotRequired

from components.args import checks_args
from components.code_folder import code_key, code_zip_path, stage_code
from components.private_bucket import private_bucket


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

    @checks_args
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
            try:
                hashes[key] = stage_code(folders[key])
            except ValueError as e:
                raise ValueError(f"{name}: {e} (of {key!r})") from None
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
