"""Preflight checks of an FSx for Lustre stack (``storage.backend: fsx``), reading the plan.

The throughput tier (against the catalog: no AWS API lists the tiers), the data repository bucket's Region, the
Lustre Persistent_2 storage quota, and an adopted file system (``storage.fileSystemId``) with no association already
on the stack's directories. Each check's rule and API: "FSx for Lustre" in docs/explanation/preflight.md."""

from components.catalog import (
    FSX_DEPLOYMENT_TYPE,
    FSX_EFA_CAPACITY_STEP_GIB,
    FSX_LUSTRE_STORAGE_QUOTA,
    FSX_LUSTRE_STORAGE_QUOTA_DEFAULT_GIB,
    FSX_THROUGHPUT_TIERS,
    QUOTA_NAMES,
    fsx_capacity_problem,
)
from stacks.config import FsxConfig, key
from stacks.plan import Plan
from stacks.preflight.aws import AwsClient
from stacks.preflight.findings import SKIP_HINT, AwsCallError, Finding, join_names, number, unreadable_quota


def check_fsx(plan: Plan, aws: AwsClient, findings: list[Finding]) -> None:
    """The FSx checks of an FSx stack (nothing for EFS)."""
    fsx = plan.storage.fsx
    if not plan.storage.is_fsx or fsx is None:
        return
    _check_tier(fsx, findings)
    _check_bucket(fsx, aws, findings)
    if plan.config.storage.file_system_id is not None:
        _check_adopted(plan, fsx, plan.config.storage.file_system_id, aws, findings)
    else:
        _check_quota(fsx, aws, findings)


def _check_tier(fsx: FsxConfig, findings: list[Finding]) -> None:
    tier, capacity = fsx.throughput_per_tib, fsx.storage_capacity_gib
    k = key("storage.fsx.throughputPerTib")
    offered = ", ".join(str(t) for t in FSX_THROUGHPUT_TIERS)
    if tier not in FSX_THROUGHPUT_TIERS:
        findings.append(
            Finding(
                False, k, f"{tier} MB/s/TiB is not a {FSX_DEPLOYMENT_TYPE} SSD throughput tier; use one of {offered}"
            )
        )
        return
    why = fsx_capacity_problem(capacity, tier, fsx.efa)
    if why is not None:
        findings.append(Finding(False, key("storage.fsx.storageCapacityGib"), why))
        return
    efa = (
        f"; EFA-enabled, {capacity} GiB is a multiple of its {FSX_EFA_CAPACITY_STEP_GIB[tier]} GiB step"
        if fsx.efa
        else ""
    )
    findings.append(
        Finding(
            True,
            k,
            f"{tier} MB/s/TiB is a {FSX_DEPLOYMENT_TYPE} SSD tier ({offered}; checked against the catalog: no AWS "
            f"API lists the tiers){efa}",
        )
    )


def _check_bucket(fsx: FsxConfig, aws: AwsClient, findings: list[Finding]) -> None:
    repo = fsx.data_repository
    bucket = repo.bucket
    k = key("storage.fsx.dataRepository.s3Path")
    if bucket is None:
        findings.append(
            Finding(
                True,
                key("storage.fsx.dataRepository"),
                f"the stack creates the data bucket in {aws.region} (datasets under {repo.import_prefix})",
            )
        )
        return
    try:
        region = aws.bucket_region(bucket)
    except AwsCallError as exc:
        if exc.code in ("NoSuchBucket", "404"):
            findings.append(
                Finding(
                    False,
                    k,
                    f"bucket {bucket} does not exist; create it in {aws.region} (or remove s3Path and "
                    "the stack creates one)",
                )
            )
        elif exc.code in ("AccessDenied", "403"):
            findings.append(
                Finding(
                    False,
                    k,
                    f"cannot read where bucket {bucket} is ({exc}); it must be a bucket of this account "
                    f"in {aws.region} and the caller needs s3:GetBucketLocation {SKIP_HINT}",
                )
            )
        else:
            findings.append(Finding(False, k, f"could not check bucket {bucket} ({exc}) {SKIP_HINT}"))
        return
    if region != aws.region:
        findings.append(
            Finding(
                False,
                k,
                f"bucket {bucket} is in {region}, the stack in {aws.region}: link a bucket in "
                f"{aws.region} (copy the data there, or deploy the stack in {region})",
            )
        )
    else:
        findings.append(
            Finding(
                True, k, f"bucket {bucket} exists in {aws.region}; {repo.s3_path} appears in {repo.file_system_path}"
            )
        )


def _check_quota(fsx: FsxConfig, aws: AwsClient, findings: list[Finding]) -> None:
    service, code = FSX_LUSTRE_STORAGE_QUOTA
    k = key("storage.fsx.storageCapacityGib")
    capacity = fsx.storage_capacity_gib
    try:
        value, name, source = aws.quota(code, service, documented=FSX_LUSTRE_STORAGE_QUOTA_DEFAULT_GIB)
    except AwsCallError as exc:
        findings.append(unreadable_quota(k, "FSx", code, QUOTA_NAMES[code], f"{capacity} GiB", exc))
        return
    try:
        existing = [
            f
            for f in aws.lustre_file_systems()
            if (f.get("LustreConfiguration") or {}).get("DeploymentType") == FSX_DEPLOYMENT_TYPE
        ]
    except AwsCallError as exc:
        findings.append(
            Finding(
                False,
                k,
                f"could not list the Region's FSx file systems to count their storage against {code} "
                f"({exc}); the caller needs fsx:DescribeFileSystems {SKIP_HINT}",
            )
        )
        return
    used = sum(int(f.get("StorageCapacity") or 0) for f in existing)
    needed = used + capacity
    usage = (
        f"{capacity} GiB for this stack + {used} GiB of {len(existing)} existing {FSX_DEPLOYMENT_TYPE} file system(s)"
    )
    if value >= needed:
        findings.append(
            Finding(True, k, f"FSx quota {code} ({name}) is {number(value)} GiB ({source}); {usage} = {needed} GiB")
        )
        return
    findings.append(
        Finding(
            False,
            k,
            f"FSx quota {code} ({name}) is {number(value)} GiB ({source}) but {usage} = {needed} GiB; request an "
            f"increase: aws service-quotas request-service-quota-increase --service-code {service} --quota-code {code} "
            f"--desired-value {needed} --region {aws.region} (or lower storageCapacityGib)",
        )
    )


def _check_adopted(plan: Plan, fsx: FsxConfig, file_system_id: str, aws: AwsClient, findings: list[Finding]) -> None:
    """A kept file system (``storage.fileSystemId``) the stack adopts: it exists, can take data repository
    associations, is where the stack puts it, and has none on the directories the stack links."""
    if _check_adopted_file_system(plan, file_system_id, aws, findings):
        _check_associations(fsx, file_system_id, aws, findings)


def _check_adopted_file_system(plan: Plan, file_system_id: str, aws: AwsClient, findings: list[Finding]) -> bool:
    """Whether the file system is one the stack can adopt (a finding either way)."""
    k = key("storage.fileSystemId")
    try:
        found = aws.lustre_file_systems([file_system_id])
    except AwsCallError as exc:
        findings.append(Finding(False, k, f"could not look up {file_system_id} ({exc}) {SKIP_HINT}"))
        return False
    if not found:
        findings.append(
            Finding(
                False,
                k,
                f"{file_system_id} is not an FSx for Lustre file system in {aws.region} (for this "
                "account); check the id (the fileSystemId output of the stack that kept it) and aws:region",
            )
        )
        return False
    fs = found[0]
    problems: list[str] = []
    deployment = (fs.get("LustreConfiguration") or {}).get("DeploymentType")
    if deployment != FSX_DEPLOYMENT_TYPE:
        problems.append(f"it is {deployment}, not {FSX_DEPLOYMENT_TYPE} (data repository associations need it)")
    lifecycle = fs.get("Lifecycle")
    if lifecycle not in (None, "AVAILABLE", "UPDATING"):
        problems.append(f"its lifecycle is {lifecycle}, not AVAILABLE")
    subnets = list(fs.get("SubnetIds") or [])
    where = plan.storage.subnet_id
    if where is not None and subnets and subnets[0] != where:
        problems.append(
            f"it is in {subnets[0]} but the stack places the file system in {where} ({plan.storage.zone_key}); the "
            "nodes that read it belong in its subnet"
        )
    if problems:
        findings.append(Finding(False, k, f"{file_system_id}: " + "; ".join(problems)))
        return False
    findings.append(
        Finding(True, k, f"{file_system_id} is an available {FSX_DEPLOYMENT_TYPE} file system in {join_names(subnets)}")
    )
    return True


def _check_associations(fsx: FsxConfig, file_system_id: str, aws: AwsClient, findings: list[Finding]) -> None:
    """No association of the file system, other than one being deleted, overlaps the directories the stack links."""
    repo = fsx.data_repository
    ours = [p for p in (repo.file_system_path, repo.export_path) if p is not None]
    try:
        associations = aws.data_repository_associations(file_system_id)
    except AwsCallError as exc:
        findings.append(
            Finding(
                False,
                key("storage.fsx.dataRepository"),
                f"could not list the data repository associations of "
                f"{file_system_id} ({exc}); the caller needs fsx:DescribeDataRepositoryAssociations {SKIP_HINT}",
            )
        )
        return
    clashes = [
        a
        for a in associations
        if a.get("Lifecycle") not in ("DELETING",) and any(_nested(str(a.get("FileSystemPath", "")), p) for p in ours)
    ]
    if not clashes:
        findings.append(
            Finding(
                True,
                key("storage.fsx.dataRepository"),
                f"{file_system_id} has {len(associations)} association(s), none on {join_names(ours)}",
            )
        )
        return
    listing = ", ".join(
        f"{a.get('AssociationId')} ({a.get('FileSystemPath')} -> {a.get('DataRepositoryPath')})" for a in clashes
    )
    first = clashes[0].get("AssociationId")
    findings.append(
        Finding(
            False,
            key("storage.fsx.dataRepository.fileSystemPath"),
            f"{file_system_id} already links {listing}, which overlaps {join_names(ours)}: delete it first (aws "
            f"fsx delete-data-repository-association --association-id {first} --no-delete-data-in-file-system) or "
            "link other directories",
        )
    )


def _nested(a: str, b: str) -> bool:
    x, y = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return x.startswith(y) or y.startswith(x)
