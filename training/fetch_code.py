"""Download a job's code from S3 into a folder: the init container of a job with ``code``.

Usage::

    python /app/fetch_code.py --source s3://bucket/prefix/ --dest /workspace

Copies every object under the prefix to the same relative path under ``--dest`` (keys that would escape
it are refused), using the pod's own credentials (EKS Pod Identity: a role that may only read that
prefix). Exit codes: 0 copied (at least one file), 1 an S3 error or nothing under the prefix, 2 usage
error. Every line on stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def log(event: str, **fields: Any) -> None:
    """One JSON object on stdout."""
    print(json.dumps({"event": event, "component": "fetch_code", "time": round(time.time(), 3), **fields}), flush=True)


def split_source(source: str) -> tuple[str, str]:
    """``s3://bucket/prefix/`` -> (bucket, prefix)."""
    if not source.startswith("s3://"):
        raise ValueError(f"{source!r} is not an s3:// URI")
    bucket, _, prefix = source[len("s3://"):].partition("/")
    if not bucket or (prefix and not prefix.endswith("/")):
        raise ValueError(f"{source!r} must be s3://bucket/ or s3://bucket/prefix/ (ending in '/')")
    return bucket, prefix


def target(dest: Path, prefix: str, key: str) -> Path | None:
    """Where ``key`` goes under ``dest`` (``None`` for folder markers); ``ValueError`` for a key that escapes."""
    rel = key[len(prefix):]
    if not rel or rel.endswith("/"):
        return None
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or ".." in parts:
        raise ValueError(f"refusing key {key!r}: it would be written outside {dest}")
    return dest.joinpath(*parts)


def main(argv: list[str] | None = None) -> int:
    """Copy; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="s3://bucket/prefix/")
    parser.add_argument("--dest", required=True, type=Path)
    try:
        args = parser.parse_args(argv)
        bucket, prefix = split_source(args.source)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    except ValueError as exc:
        print(f"fetch_code.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)
    copied = 0
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                path = target(args.dest, prefix, obj["Key"])
                if path is None:
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.part")
                s3.download_file(bucket, obj["Key"], str(tmp))
                os.replace(tmp, path)
                copied += 1
    except (BotoCoreError, ClientError, ValueError) as exc:
        log("fetch_failed", source=args.source, error=str(exc))
        return EXIT_FAILURE
    if not copied:
        log("fetch_failed", source=args.source, error="no object under the prefix")
        return EXIT_FAILURE
    log("fetched", source=args.source, dest=str(args.dest), files=copied)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
