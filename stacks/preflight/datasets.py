"""Preflight checks of the datasets jobs read from S3: the object a staging Job downloads exists (at its expected size,
not archived), and a prefix the FSx file system imports holds objects. A missing source otherwise fails the staging
Job, or imports an empty folder, after the stack is paid for. Each rule and API: "Datasets on S3" in
docs/explanation/preflight.md."""

from typing import Optional

from stacks.config import key
from stacks.plan import Plan
from stacks.preflight.aws import AwsClient, S3Object
from stacks.preflight.findings import SKIP_HINT, AwsCallError, Finding

#: S3 storage classes whose objects GetObject cannot read until they are restored.
ARCHIVED = ("GLACIER", "DEEP_ARCHIVE")


def check_datasets(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """One finding per dataset a job reads from S3 (an https:// source is not AWS's to check)."""
    running: Optional[bool] = None
    for name, d in plan.datasets.items():
        source = d.config.source
        if not source.startswith("s3://"):
            continue
        bucket, _, path = source[len("s3://") :].partition("/")
        k = key(f"datasets.{name}.source")
        try:
            if d.config.is_prefix:
                found = _prefix(aws, bucket, path, k, source)
            else:
                found = _object(aws, bucket, path, k, source, d.config.expected_bytes, plan)
                if not found.ok:
                    if running is None:
                        running = aws.cluster_version(plan.config.cluster_name) is not None
                    if running:  # staged when the stack was made, unless this dataset is new or changed
                        found = Finding(
                            True,
                            k,
                            f"{found.message} (the cluster exists, so this is only a warning: "
                            "a dataset staged before is not downloaded again; a new or changed one is)",
                        )
        except AwsCallError as exc:
            if exc.code in ("AccessDenied", "403") and not d.config.is_prefix:
                found = Finding(
                    True,
                    k,
                    f"{source} is not readable by the caller ({exc}), so it is not checked: the staging Job reads it "
                    "with a role of its own",
                )
            else:
                found = Finding(False, k, f"could not read {source} ({exc}) {SKIP_HINT}")
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


def _object(
    aws: AwsClient, bucket: str, name: str, k: str, source: str, expected: Optional[int], plan: Plan
) -> Finding:
    found: Optional[S3Object] = aws.s3_object(bucket, name)
    if found is None:
        if aws.first_object(bucket, name + "/") is not None:
            fsx = plan.storage.fsx
            if fsx is not None and fsx.data_repository.linked_path(source + "/") is not None:
                fix = f"end it with / to have the file system import the folder ({source}/)"
            else:
                fix = "pack it into one tarball (tar czf) and upload that"
            return Finding(False, k, f"{source} is a folder of objects, and staging downloads one tarball; {fix}")
        return Finding(False, k, f"no object {source}; upload the dataset's tarball there first")
    if found.storage_class in ARCHIVED and not found.restored:
        return Finding(
            False,
            k,
            f"{source} is archived ({found.storage_class}), which GetObject cannot read: restore it (aws s3api "
            "restore-object) or copy it to another storage class first",
        )
    if expected is not None and found.size != expected:
        return Finding(
            False,
            k,
            f"{source} is {found.size} bytes and expectedBytes says {expected}: the staging Job would refuse it; "
            "upload the right file or correct expectedBytes",
        )
    return Finding(True, k, f"{source} exists ({found.size} bytes)")
