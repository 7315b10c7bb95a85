"""Rules on the shared file system: where FSx lives, a kept file system, datasets imported from S3."""

import posixpath
from typing import Mapping

from components.workloads.spec import env_name
from stacks.config.derive import RUNS_DIR, claim_readers, fsx_location, imported
from stacks.config.errors import key
from stacks.config.jobs import (
    JobConfig,
)
from stacks.config.rules.sections import Sections, in_existing_vpc, job_path
from stacks.kinds import KINDS


def check_storage(s: Sections, jobs: Mapping[str, JobConfig], problems: list[str]) -> None:
    """FSx: one zone where the jobs read (inside the VPC), EFA clients for an EFA file system, a kept file
    system only in an existing VPC; datasets given as an S3 prefix are imported by the file system's data
    repository (runs after :func:`check_jobs`, with the jobs' groups filled in)."""
    st = s.storage
    if "storage" in s.failed:
        return
    check_imported_datasets(s, problems)
    check_dataset_folders(s, jobs, problems)
    check_output_folders(s, jobs, problems)
    if st.backend != "fsx":
        return
    fsx = st.fsx_settings
    existing = in_existing_vpc(s)
    if existing and fsx.availability_zone is not None:
        problems.append(
            f"{key('storage.fsx.availabilityZone')}: with existingVpc place the file system with subnetId instead"
        )
    if not existing and fsx.subnet_id is not None:
        problems.append(f"{key('storage.fsx.subnetId')}: only for existingVpc; with a new VPC set availabilityZone")
    if (
        existing
        and s.existing_vpc is not None
        and fsx.subnet_id is not None
        and fsx.subnet_id not in s.existing_vpc.private_subnet_ids
    ):
        problems.append(
            f"{key('storage.fsx.subnetId')}: {fsx.subnet_id} is not one of {key('existingVpc.privateSubnetIds')}"
        )
    if (
        not existing
        and fsx.availability_zone is not None
        and s.network is not None
        and s.network.availability_zones
        and fsx.availability_zone not in s.network.availability_zones
    ):
        problems.append(
            f"{key('storage.fsx.availabilityZone')}: {fsx.availability_zone} is not one of "
            f"{key('network.availabilityZones')} {s.network.availability_zones}"
        )
    if st.file_system_id is not None and not existing:
        problems.append(
            f"{key('storage.fileSystemId')}: a kept Lustre file system lives in a subnet of the VPC it was created in; "
            "adopt it with existingVpc (that VPC and the file system's subnet)"
        )
    if st.retain_on_delete and not existing:
        problems.append(
            f"{key('storage.retainOnDelete')}: a kept Lustre file system keeps its network interfaces in its subnet, "
            "so the VPC this stack creates could not be deleted; keep it only with existingVpc, or keep the data in "
            f"S3 instead (the bucket of {key('storage.fsx.dataRepository.s3Path')} outlives the stack)"
        )
    if (
        any(f"nodeGroups.{n}" in s.failed for n in s.group_names)
        or any(job_path(s, n) in s.failed for n in s.job_names)
        or {"nodeGroups", "jobs", "existingVpc", "network"} & s.failed
    ):
        return  # the zones of groups, the groups of jobs or the VPC's kind are unknown: reported where they failed
    _, found = fsx_location(fsx, s.groups, claim_readers(jobs), existing, s.catalog)
    problems.extend(found)


def check_imported_datasets(s: Sections, problems: list[str]) -> None:
    """A dataset whose source is an S3 prefix (``s3://bucket/prefix/``, a folder of objects) is not staged:
    the FSx file system's data repository imports it, so it must lie under the linked path."""
    st = s.storage
    repo = st.fsx_settings.data_repository
    for name, d in s.datasets.items():
        if not d.is_prefix:
            continue
        path = f"datasets.{name}"
        if st.backend != "fsx":
            problems.append(
                f"{key(f'{path}.source')}: {d.source} is an S3 prefix (a folder of objects), which only an FSx for "
                f"Lustre data repository imports; give one object to stage (a tarball, s3://bucket/key.tar.gz), or set "
                f"{key('storage.backend')}: fsx with {key('storage.fsx.dataRepository.s3Path')} covering it"
            )
        elif repo.bucket is None:
            problems.append(
                f"{key(f'{path}.source')}: {d.source} is an S3 prefix, imported only from the bucket linked to the "
                f"file system, and this stack creates its own (objects under its {repo.import_prefix} prefix appear in "
                f"{repo.file_system_path}, output fsxDataRepositoryPath); link the dataset's bucket with "
                f"{key('storage.fsx.dataRepository.s3Path')}: s3://BUCKET/PREFIX/ above {d.source}"
            )
        elif repo.linked_path(d.source) is None:
            problems.append(
                f"{key(f'{path}.source')}: {d.source} is not under {key('storage.fsx.dataRepository.s3Path')} "
                f"({repo.s3_path}), the only S3 prefix the file system imports; move the data there, or link a path "
                "above both"
            )
        elif "path" in d.model_fields_set:
            problems.append(
                f"{key(f'{path}.path')}: an imported dataset appears where the data repository puts it "
                f"({repo.linked_path(d.source)}); remove path"
            )


def _overlap(a: str, b: str) -> bool:
    """One folder is the other or holds it (``.`` holds every one)."""
    return a == b or "." in (a, b) or a.startswith(b + "/") or b.startswith(a + "/")


def check_dataset_folders(s: Sections, jobs: Mapping[str, JobConfig], problems: list[str]) -> None:
    """A staged dataset's folder is its own: a staging replaces what is in it, so no other dataset's folder, no job's
    output folder and not the runs' folder may be, hold or lie inside it."""
    staged = {n: d.folder(n) for n, d in s.datasets.items() if not imported(s.storage, d)}
    for i, (name, folder) in enumerate(staged.items()):
        others = [(f"datasets.{n}", f) for n, f in list(staged.items())[:i]]
        others += [(f"{job_path(s, j)}.outputDir", c.output_dir) for j, c in jobs.items() if c.output_dir]
        clash = [(where, f) for where, f in [*others, ("the runs' folder", RUNS_DIR)] if _overlap(folder, f.strip("/"))]
        if not clash:
            continue
        where, f = clash[0]
        if "path" not in s.datasets[name].model_fields_set and where.endswith(".outputDir"):
            # the dataset's folder is the default: the job's outputDir, which the user wrote, is at fault
            problems.append(
                f"{key(where)}: {f} overlaps the folder of {key(f'datasets.{name}')} ({folder}), and staging replaces "
                "what is in a dataset's folder; give the job a folder of its own"
            )
            continue
        problems.append(
            f"{key(f'datasets.{name}.path')}: {folder} overlaps {where} ({f}), and staging replaces what is in a "
            f"dataset's folder; give it a folder of its own (the default is datasets/{name})"
        )


def check_output_folders(s: Sections, jobs: Mapping[str, JobConfig], problems: list[str]) -> None:
    """A job its kind's launcher runs (``takes_script``: pytorch) skips an output folder that holds ``DONE`` and
    resumes the checkpoints it finds there, so no two such jobs share an ``outputDir`` (written alike or not)."""
    given = sorted(
        (j, posixpath.normpath(c.output_dir.strip("/")))
        for j, c in jobs.items()
        if c.output_dir and KINDS[c.kind].takes_script
    )
    for i, entry in enumerate(given):
        clash = [(j, f) for j, f in given[:i] if f == entry[1]]
        if clash:
            a, b = clash[0], entry
            # named at the job that waits for the other (it would find the other's DONE), else at the later name
            (name, folder), (other, f) = (a, b) if b[0] in jobs[a[0]].after else (b, a)
            problems.append(
                f"{key(f'{job_path(s, name)}.outputDir')}: {folder} is also job {other}'s output folder: a "
                f"{jobs[name].kind} job whose folder holds DONE runs nothing; give each job a folder of its own (the "
                f"default is {RUNS_DIR}/<job>-<hash of its definition>); a job after {other} reads its folder as "
                f"$({env_name(other)})"
            )
