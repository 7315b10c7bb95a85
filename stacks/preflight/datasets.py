"""Preflight checks of the datasets read from S3: the object a staging Job downloads exists (at its expected size), and
a prefix the FSx file system imports holds objects. A missing source otherwise fails the staging Job, or imports an
empty folder, after the stack is paid for. Each rule and API: check 12 in docs/explanation/preflight.md."""

from typing import Optional

from stacks.config import key
from stacks.plan import Plan
from stacks.preflight.aws import AwsClient
from stacks.preflight.findings import SKIP_HINT, AwsCallError, Finding


def check_datasets(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """One finding per dataset whose source is on S3 (an https:// source is not AWS's to check)."""
    for name, d in plan.config.datasets.items():
        if not d.source.startswith("s3://"):
            continue
        bucket, _, path = d.source[len("s3://") :].partition("/")
        k = key(f"datasets.{name}.source")
        try:
            if d.is_prefix:
                found = _prefix(aws, bucket, path, k, d.source)
            else:
                found = _object(aws, bucket, path, k, d.source, d.expected_bytes, plan.storage.is_fsx)
        except AwsCallError as exc:
            denied = exc.code in ("AccessDenied", "403")
            need = "; the caller needs s3:GetObject and s3:ListBucket on it" if denied else ""
            found = Finding(False, k, f"could not read {d.source} ({exc}){need} {SKIP_HINT}")
        findings.append(found)


def _prefix(aws: AwsClient, bucket: str, prefix: str, k: str, source: str) -> Finding:
    if aws.first_object(bucket, prefix) is None:
        return Finding(
            False,
            k,
            f"no object under {source}: the file system would import an empty folder; upload the data first "
            f"(aws s3 sync DIR {source})",
        )
    return Finding(True, k, f"{source} holds objects for the file system to import")


def _object(aws: AwsClient, bucket: str, name: str, k: str, source: str, expected: Optional[int], fsx: bool) -> Finding:
    size = aws.object_size(bucket, name)
    if size is None:
        if aws.first_object(bucket, name + "/") is not None:
            fix = (
                f"end it with / to have the file system import the folder ({source}/)"
                if fsx
                else "pack it into one tarball (tar czf) and upload that"
            )
            return Finding(False, k, f"{source} is a folder of objects, and staging downloads one tarball; {fix}")
        return Finding(False, k, f"no object {source}; upload the dataset's tarball there first")
    if expected is not None and size != expected:
        return Finding(
            False,
            k,
            f"{source} is {size} bytes and expectedBytes says {expected}: the staging Job would refuse it; upload "
            "the right file or correct expectedBytes",
        )
    return Finding(True, k, f"{source} exists ({size} bytes)")
