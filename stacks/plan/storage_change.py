"""What an update of a running stack does to its shared storage: the changes the provider would make by replacing
what holds the jobs' data (refused, :func:`storage_problems`, unless ``storage.deleteOldData`` lets the update delete
it: :func:`deleted_data`), the other shared data a change gives the jobs (the summary's ``data:`` lines,
:func:`data_changes`), and what an in-place change of the file system means while jobs run (:func:`storage_notes`)."""

import re
from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog import FSX_DEPLOYMENT_TYPE, FSX_LUSTRE_VERSION, FSX_STORAGE_TYPE, fsx_automatic_metadata_iops
from stacks.config import key
from stacks.config.base import quantity_value
from stacks.config.storage import FsxConfig, StorageConfig
from stacks.plan import Plan

#: How the record of an update (``deployedVersions``) names the fixed settings of the FSx file system the stack made.
FSX_RECORD = "fsx-file-system"


def fsx_record(plan: Plan) -> Optional[str]:
    """The settings of the FSx file system ``plan`` makes that this version of the project fixes, and a new version
    could change: its deployment type, storage type and Lustre version, each of which makes a new file system. None
    without one the stack makes."""
    s = plan.config.storage
    if plan.config.jobs_only or s.backend != "fsx" or s.file_system_id is not None:
        return None
    return f"{FSX_DEPLOYMENT_TYPE} {FSX_STORAGE_TYPE}, Lustre {FSX_LUSTRE_VERSION}"


#: :func:`fsx_record`'s form: the deployment type, the storage type and the Lustre version.
_FSX_RECORD_RE = re.compile(r"(\S+) (\S+), Lustre (\d+(?:\.\d+)*)")


def _fsx_record_move(new_plan: Plan, recorded: Optional[Mapping[str, object]]) -> Optional[tuple[str, str, bool]]:
    """``(recorded, now, replaced)`` where the last update recorded other fixed settings (:func:`fsx_record`) than
    this version gives the file system ``new_plan`` keeps making. ``replaced``: another deployment or storage type, or
    a lower Lustre version, each of which makes a new file system; a higher Lustre version is upgraded in place
    (pulumi-aws ``fsx.LustreFileSystem``'s ``file_system_type_version``). None without a record of them (an older
    version's) or a file system the stack keeps making."""
    was, now = (recorded or {}).get(FSX_RECORD), fsx_record(new_plan)
    old, new = _FSX_RECORD_RE.fullmatch(str(was)), _FSX_RECORD_RE.fullmatch(now or "")
    if was is None or old is None or new is None or old.groups() == new.groups():
        return None
    version = [tuple(int(n) for n in m[3].split(".")) for m in (old, new)]
    return str(was), new[0], old.group(1, 2) != new.group(1, 2) or version[1] < version[0]


def _fsx_record_change(new_plan: Plan, recorded: Optional[Mapping[str, object]]) -> Optional[str]:
    """``"this version of the project makes the FSx file system old -> new"`` where the new settings make it again,
    empty (:func:`_fsx_record_move`); else None."""
    move = _fsx_record_move(new_plan, recorded)
    if move is None or not move[2]:
        return None
    return f"this version of the project makes the FSx file system {move[0]} -> {move[1]}"


def _fsx_upgrade_notes(new_plan: Plan, recorded: Optional[Mapping[str, object]]) -> list[str]:
    """A higher Lustre version this version of the project gives the file system (:func:`_fsx_record_move`): FSx
    upgrades it in place (UpdateFileSystem), and `pulumi up` waits for it."""
    move = _fsx_record_move(new_plan, recorded)
    if move is None or move[2]:
        return []
    return [
        f"this version of the project upgrades the FSx file system {move[0]} -> {move[1]} in place: the file system "
        "stays, with its data, and may be slow or unavailable while FSx updates it; take it between jobs"
    ]


def storage_problems(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> list[str]:
    """Why ``pulumi up`` must not move the stack's storage from ``old_plan`` to ``new_plan``: a change EFS cannot
    make in place, a claim Kubernetes cannot resize, the stack's data deleted without ``storage.deleteOldData``; each
    names its key. A jobs-only stack made no storage. ``recorded``: what the last update recorded it installed."""
    if old_plan.config.jobs_only:
        return []
    return (
        _backend_problems(old_plan, new_plan)
        + _efs_mode_problems(old_plan, new_plan)
        + _claim_size_problems(old_plan, new_plan)
        + _fsx_metadata_problems(old_plan, new_plan)
        + deleted_data_problems(old_plan, new_plan, recorded)
    )


def storage_notes(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> list[str]:
    """What the update does to the storage it keeps: a new StorageClass, an FSx file system grown, linked to another
    bucket, switched to another metadata mode or throughput tier."""
    if old_plan.config.jobs_only:  # it made no storage: the data: line says what the new one is
        return []
    return (
        _storage_class_notes(old_plan, new_plan)
        + _fsx_growth_notes(old_plan, new_plan)
        + _fsx_bucket_notes(old_plan, new_plan)
        + _fsx_metadata_notes(old_plan, new_plan)
        + _fsx_throughput_notes(old_plan, new_plan)
        + _delete_old_data_notes(old_plan, new_plan, recorded)
        + _fsx_upgrade_notes(new_plan, recorded)
    )


def _backend_problems(old_plan: Plan, new_plan: Plan) -> list[str]:
    """Another backend in the same cluster and namespace: the new backend's component makes the namespace and the
    shared claim again under resources of its own (components/storage/csi.py: ``training_namespace``,
    ``shared_claim``), and Pulumi deletes the old ones only at the end, so Kubernetes refuses the new ones (they
    exist): `pulumi up` fails early, with the new file system half made. In a new namespace, the jobs are made again
    there while the old ones still run, in the same queues: finished jobs leave the nodes to them."""
    old, new = old_plan.config, new_plan.config
    a, b = old.storage, new.storage
    if a.backend == b.backend or old.cluster_name != new.cluster_name or a.namespace != b.namespace:
        return []
    return [
        f"{key('storage.backend')} {a.backend} -> {b.backend} in the namespace {b.namespace}: the {b.backend} storage "
        "makes that namespace and its claim again while the old ones still exist, which Kubernetes refuses, so "
        "`pulumi up` would fail early, with the new file system half made. Once the jobs have finished, give "
        f"{key('storage.namespace')} a new name in the same change (the jobs move there), or make a new stack"
    ]


@dataclass(frozen=True)
class DeletedData:
    """A change of the update that deletes data the stack made (:func:`deleted_data`)."""

    change: str
    """The change, naming its key: ``key old -> new``, with FSx's reason where FSx cannot make it in place."""
    file_system: bool
    """The file system the stack made goes, with the jobs' folders."""
    bucket: bool
    """The data bucket the stack made for FSx goes, with the datasets and what was exported."""
    back: bool = False
    """Setting the key back keeps the file system (FSx made again in place of the same one)."""


def deleted_data(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> list[DeletedData]:
    """The changes that make the update delete the file system the stack made, or the data bucket it made for FSx,
    with their data (the ``data:`` lines of :func:`data_changes` and the notes that say so). None where
    ``storage.retainOnDelete`` was applied (Pulumi reads it from the old state: they stay in AWS), the file system
    was adopted (``fileSystemId``), or the region moves (refused whole:
    :func:`~stacks.plan.network_change.network_problems`). ``recorded``: the last update's record, whose
    :func:`fsx_record` a new version of the project may change."""
    old, new = old_plan.config, new_plan.config
    a, b = old.storage, new.storage
    if old.jobs_only or a.file_system_id is not None or a.retain_on_delete or old.region != new.region:
        return []
    bucket = a.makes_data_bucket
    if new.jobs_only:
        change = f"{key('cluster.stackReference')} unset -> {new.cluster.stack_reference}"
        return [DeletedData(change, file_system=True, bucket=bucket)]
    if old.cluster_name != new.cluster_name:
        change = f"{key('clusterName')} {old.cluster_name} -> {new.cluster_name}"
        return [DeletedData(change, file_system=True, bucket=bucket)]
    if a.backend != b.backend:
        return [DeletedData(f"{key('storage.backend')} {a.backend} -> {b.backend}", file_system=True, bucket=bucket)]
    if b.file_system_id is not None:
        change = f"{key('storage.fileSystemId')} unset -> {b.file_system_id}"
        return [DeletedData(change, file_system=True, bucket=bucket)]
    if b.backend != "fsx":
        return []
    # a new FSx file system keeps the bucket (data_changes)
    found = [DeletedData(what, file_system=True, bucket=False, back=True) for what in _fsx_replaced(old_plan, new_plan)]
    if (moved := _fsx_record_change(new_plan, recorded)) is not None:
        found.append(DeletedData(moved, file_system=True, bucket=False))
    if bucket and not b.makes_data_bucket:  # _fsx_bucket_notes
        change = f"{key('storage.fsx.dataRepository.s3Path')} unset -> {b.fsx_settings.data_repository.s3_path}"
        found.append(DeletedData(change, file_system=False, bucket=True))
    return found


def deleted_data_problems(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> list[str]:
    """A change that deletes the stack's data (:func:`deleted_data`) without ``storage.deleteOldData``: the stack
    keeps no backup by default (EFS ``backup`` is off; the FSx file system's automatic backups are off,
    components/storage/fsx.py), so a ``pulumi up --yes`` on a warning alone would lose it."""
    new = new_plan.config
    if not new.jobs_only and new.storage.delete_old_data:
        return []
    a = old_plan.config.storage
    lustre_kept = a.backend != "fsx" or old_plan.config.existing_vpc is not None
    problems = []
    for d in deleted_data(old_plan, new_plan, recorded):
        what = " and ".join(
            ["the file system the stack made, with the jobs' folders"] * d.file_system
            + ["the data bucket the stack made, with the datasets and what was exported"] * d.bucket
        )
        them = "them" if d.file_system and d.bucket else "it"
        fixes = ["set it back"] if d.back else []
        if lustre_kept:
            fixes.append(
                f"to keep {them} in AWS, first run an update of its own that sets {key('storage.retainOnDelete')}: "
                "true, then make this change"
            )
        else:
            fixes.append(f"with FSx, {key('storage.retainOnDelete')} needs existingVpc, so nothing keeps {them} in AWS")
        copy = (
            "copy what you need ("
            + " and ".join(["each job's copyCommand"] * d.file_system + ["aws s3 sync from the bucket"] * d.bucket)
            + ")"
        )
        if new.jobs_only:
            fixes.append(f"to let {them} go, {copy}, then `pulumi destroy` this stack before it becomes jobs-only")
        else:
            fixes.append(
                f"to let {them} go, {copy}, then set {key('storage.deleteOldData')}: true for this update, and remove "
                "it after"
            )
        fix = "; ".join(fixes)
        problems.append(f"{d.change}: the update deletes {what}. {fix[0].upper()}{fix[1:]}")
    return problems


def _delete_old_data_notes(
    old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None
) -> list[str]:
    """``storage.deleteOldData`` left set where the update deletes nothing: a later change would delete without a
    refusal."""
    if not new_plan.config.storage.delete_old_data or deleted_data(old_plan, new_plan, recorded):
        return []
    return [
        f"{key('storage.deleteOldData')} is set, and this update deletes no data: remove it, or a later change that "
        "deletes the file system goes ahead without a refusal"
    ]


def _efs_mode_problems(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new performance mode of the EFS file system the stack made: EFS cannot change it, so the provider would
    replace the file system (terraform-provider-aws ``aws_efs_file_system``: ``performance_mode`` forces a new one),
    deleting its data, while the shared claim stays bound to the old one."""
    a, b = old_plan.config.storage, new_plan.config.storage
    made = a.backend == b.backend == "efs" and a.file_system_id is None and b.file_system_id is None
    if not made or a.performance_mode == b.performance_mode:
        return []
    return [
        f"{key('storage.performanceMode')}: {a.performance_mode} -> {b.performance_mode} would replace the EFS file "
        "system this stack made, and its data with it (EFS cannot change a file system's performance mode): set it "
        f"back to {a.performance_mode}, or make a new stack"
    ]


def _claim_size_problems(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new ``storage.capacity`` for EFS claims that stay (the shared claim, the teams'): Kubernetes grows a bound
    claim only when its StorageClass allows expansion, and the EFS one does not (EFS is elastic); it never shrinks one
    (kubernetes plugin/pkg/admission/storage/persistentvolume/resize, and the claim's update validation). `pulumi up`
    would fail at the claim."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if not a.backend == b.backend == "efs" or quantity_value(a.capacity) == quantity_value(b.capacity):
        return []
    if (a.pvc_name, a.storage_class_name) != (b.pvc_name, b.storage_class_name):
        return []  # new claims (pulumi-kubernetes replaces a claim whose storageClassName changes)
    plans = (old_plan, new_plan)
    spaces = set.intersection(*({t.namespace for t in p.admission.teams} if p.admission else set() for p in plans))
    if a.namespace == b.namespace:
        spaces.add(b.namespace)
    if not spaces:
        return []
    claims = ", ".join(f"{ns}/{b.pvc_name}" for ns in sorted(spaces))
    return [
        f"{key('storage.capacity')}: {a.capacity} -> {b.capacity}: Kubernetes cannot resize the claims {claims} "
        "(a bound claim grows only when its StorageClass allows expansion, and the EFS one does not; it never "
        f"shrinks), so `pulumi up` would fail there: set it back to {a.capacity}. EFS is elastic: the capacity is "
        "nominal and limits nothing"
    ]


def _fsx_metadata_problems(old_plan: Plan, new_plan: Plan) -> list[str]:
    """Metadata IOPS FSx would refuse on a file system the stack updates in place: a larger USER_PROVISIONED file
    system with fewer IOPS than AUTOMATIC gives the new capacity (FSx refuses the growth; terraform-provider-aws#44432),
    or a switch back to AUTOMATIC from more IOPS than AUTOMATIC gives (FSx never lowers them)."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None:
        return []
    fa, fb = both
    found = []
    needed = fsx_automatic_metadata_iops(fb.storage_capacity_gib)
    grows = fb.storage_capacity_gib > fa.storage_capacity_gib
    if grows and fb.metadata_mode == "USER_PROVISIONED" and (fb.metadata_iops or 0) < needed:
        found.append(
            f"{key('storage.fsx.metadataIops')} {fb.metadata_iops} with {key('storage.fsx.storageCapacityGib')} "
            f"{fa.storage_capacity_gib} -> {fb.storage_capacity_gib}: FSx grows a USER_PROVISIONED file system only "
            f"with at least the metadata IOPS AUTOMATIC gives the new capacity, {needed}: set "
            f"{key('storage.fsx.metadataIops')} to {needed} or more (the provider raises them first)"
        )
    given = fsx_automatic_metadata_iops(fa.storage_capacity_gib)
    if (fa.metadata_mode, fb.metadata_mode) == ("USER_PROVISIONED", "AUTOMATIC") and (fa.metadata_iops or 0) > given:
        found.append(
            f"{key('storage.fsx.metadataMode')} USER_PROVISIONED -> AUTOMATIC: the file system has "
            f"{fa.metadata_iops} metadata IOPS, more than the {given} AUTOMATIC gives {fa.storage_capacity_gib} GiB, "
            "and FSx never lowers them, so it refuses the switch: keep metadataMode USER_PROVISIONED, or grow "
            f"{key('storage.fsx.storageCapacityGib')} first, to where AUTOMATIC gives {fa.metadata_iops} IOPS, and "
            "switch in a later update"
        )
    return found


def _fsx_updated(old_plan: Plan, new_plan: Plan) -> Optional[tuple[FsxConfig, FsxConfig]]:
    """The old and new FSx settings of a file system the stack made and updates in place: kept on FSx, not an
    adopted one, not replaced (:func:`_fsx_replaced`)."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if a.backend != "fsx" or b.backend != "fsx" or a.fsx is None or b.fsx is None or b.file_system_id is not None:
        return None
    return None if _fsx_replaced(old_plan, new_plan) else (a.fsx, b.fsx)


def _fsx_bucket_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """An FSx file system the stack keeps, linked now to a bucket of the user's (``dataRepository.s3Path``): the data
    bucket the stack made for it goes (components/storage/fsx.py), unless the state says to keep it. The file system
    keeps its files, so the jobs keep their data."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if b.backend != "fsx" or a.file_system_id or b.file_system_id or not a.makes_data_bucket or b.makes_data_bucket:
        return []  # leaving FSx, or another file system: data_changes names the bucket with the file system
    fate = (
        "storage.retainOnDelete keeps it in AWS"
        if a.retain_on_delete
        else "it is deleted with everything in it, the datasets and what was exported (storage.retainOnDelete was not "
        "applied): copy what you need first (aws s3 sync)"
    )
    return [
        f"{key('storage.fsx.dataRepository.s3Path')} unset -> {b.fsx_settings.data_repository.s3_path}: the file "
        f"system links to that bucket instead of the one the stack made, and {fate}"
    ]


def _fsx_growth_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A larger FSx file system the stack made grows in place (FSx's UpdateFileSystem): what the jobs see meanwhile.
    Its claim keeps the size it was made with (:func:`components.storage.csi.shared_claim`)."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None or both[1].storage_capacity_gib <= both[0].storage_capacity_gib:
        return []
    fa, fb = both
    return [
        f"{key('storage.fsx.storageCapacityGib')} {fa.storage_capacity_gib} -> {fb.storage_capacity_gib}: FSx grows "
        "the file system in place. It may be unavailable for a few minutes (the jobs' file operations wait, then go "
        "on), then it spreads the data over the new servers for hours to days, slower meanwhile. FSx refuses another "
        "increase within 6 hours of this one. The claim keeps its first size; `kubectl get pv` shows the new one"
    ]


def _storage_class_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new ``storageClassName``: the StorageClass and the shared claim are made anew (a claim's class cannot
    change); the old claim goes only once no pod mounts it."""
    a, b = old_plan.config.storage, new_plan.config.storage
    if a.backend != "efs" or b.backend != "efs" or a.storage_class_name == b.storage_class_name:
        return []
    return [
        f"{key('storage.storageClassName')} {a.storage_class_name} -> {b.storage_class_name}: the StorageClass and "
        "the shared claim are made anew, on the same folder of the file system (the class's subPathPattern). "
        "The teams' claims are made anew too. Kubernetes deletes an old claim only once no pod mounts it, so `pulumi "
        "up` waits for the running jobs' pods, the teams' too (10 minutes at most, then the update fails): let them "
        "finish first"
    ]


def _deleted(a: StorageConfig, *, bucket: bool) -> str:
    """What becomes of the old file system (and, with ``bucket``, the data bucket the stack made for it) when the
    stack stops registering it: deleted, unless its state says to keep it (retainOnDelete, as last applied); one it
    adopted (fileSystemId) was never the stack's to delete."""
    if a.file_system_id is not None:
        return ""
    if a.retain_on_delete:
        return f"; storage.retainOnDelete keeps the old file system{' and its data bucket' * bucket} in AWS"
    return (
        "; the old file system is deleted with its data"
        + (", and the data bucket the stack made, with everything in it (the datasets and what was exported)" * bucket)
        + " (storage.retainOnDelete was not applied)"
    )


def data_changes(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> tuple[str, ...]:
    """The changes that replace the cluster or give the jobs other shared data than they had, each as a line that
    names its key (or this version of the project, against ``recorded``, the last update's record). A jobs-only stack
    has neither of its own."""
    old, new = old_plan.config, new_plan.config
    if new.jobs_only:
        return _jobs_only_moves(old_plan, new_plan)
    if old.jobs_only:
        data = "a new, empty file system" if new.storage.file_system_id is None else "the file system it names"
        return (
            f"{key('cluster.stackReference')} {old.cluster.stack_reference} -> unset: the stack makes a cluster of its "
            f"own, with {data}; its jobs move there, and are deleted from the old cluster",
        )
    a, b = old.storage, new.storage
    deleted = _deleted(a, bucket=False)
    # where the stack stops making its FSx storage, the data bucket it made (no dataRepository.s3Path) goes too
    # (components/storage/fsx.py); a new FSx file system keeps it
    gone = _deleted(a, bucket=a.makes_data_bucket)
    found = []
    if old.cluster_name != new.cluster_name:
        # every resource's name starts with clusterName (stacks/environment.py)
        made = ["the cluster, its nodes and jobs"] + ["the VPC"] * (new.network is not None)
        made += ["the file system"] * (a.file_system_id is None)
        kept = [t for t in old.teams if t in new.teams]  # a removed team's note is its own (_removed_team_notes)
        found.append(
            f"{key('clusterName')} {old.cluster_name} -> {new.cluster_name}: every resource of the stack is "
            f"replaced under the new name ({', '.join(made)}){gone}" + _teams_lose_their_cluster(kept, again=True)
        )
    elif a.backend != b.backend:
        found.append(f"{key('storage.backend')} {a.backend} -> {b.backend}: a new, empty file system{gone}")
    elif a.file_system_id != b.file_system_id:
        found.append(
            f"{key('storage.fileSystemId')} {a.file_system_id or 'unset'} -> {b.file_system_id or 'unset'}: the jobs "
            f"get another file system{gone}"
        )
    elif b.backend == "efs" and (a.namespace, a.pvc_name) != (b.namespace, b.pvc_name):
        # the EFS StorageClass's subPathPattern ${.PVC.namespace}/${.PVC.name} (components/storage/efs.py)
        changed = [
            k for k, x, y in (("namespace", a.namespace, b.namespace), ("pvcName", a.pvc_name, b.pvc_name)) if x != y
        ]
        found.append(
            f"{' and '.join(key('storage.' + k) for k in changed)}: the claim {a.namespace}/{a.pvc_name} -> "
            f"{b.namespace}/{b.pvc_name}; on EFS each claim has a folder of its own, so the jobs get that claim's "
            "folder, empty unless the claim was used before (the old folder stays)"
        )
    elif b.backend == "fsx" and a.file_system_id is None and b.file_system_id is None:
        found += [f"{what}: a new, empty file system{deleted}" for what in _fsx_replaced(old_plan, new_plan)]
        if (change := _fsx_record_change(new_plan, recorded)) is not None:
            found.append(f"{change}: a new, empty file system{deleted}")
    return tuple(found)


def fsx_updated_in_place(old_plan: Plan, new_plan: Plan) -> bool:
    """Whether the update changes the FSx file system the stack made in place (UpdateFileSystem): more capacity,
    another throughput tier, other metadata IOPS or mode; `pulumi up` waits for it
    (:data:`components.catalog.timings.FSX_UPDATE_WAIT`)."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None:
        return False
    fa, fb = both
    return (fa.storage_capacity_gib, fa.throughput_per_tib, fa.metadata_mode, fa.metadata_iops) != (
        fb.storage_capacity_gib,
        fb.throughput_per_tib,
        fb.metadata_mode,
        fb.metadata_iops,
    )


def _jobs_only_moves(old_plan: Plan, new_plan: Plan) -> tuple[str, ...]:
    """A jobs-only stack moved to another cluster stack or team: its jobs run in that team's namespace, on its claim
    (a folder of its own on the cluster's shared file system: stacks/teams.py), so they are made again there."""
    a, b = old_plan.config.cluster, new_plan.config.cluster
    if a.stack_reference is None:
        old = old_plan.config
        made = ["the cluster, its nodes"] + ["the VPC"] * (old.network is not None)
        made += ["the file system"] * (old.storage.file_system_id is None) + ["Kueue"]
        return (
            f"{key('cluster.stackReference')} unset -> {b.stack_reference}: the stack becomes a jobs-only stack and "
            f"deletes what it made ({', '.join(made)}); its jobs move to that stack's cluster"
            + _deleted(old.storage, bucket=old.storage.makes_data_bucket)
            + _teams_lose_their_cluster(list(old.teams), again=False),
        )
    if a.stack_reference != b.stack_reference:
        return (
            f"{key('cluster.stackReference')} {a.stack_reference} -> {b.stack_reference}: the jobs move to that "
            "stack's cluster and its shared data, and are deleted from the old cluster",
        )
    if a.team != b.team:
        return (
            f"{key('cluster.team')} {a.team} -> {b.team}: the jobs move to team {b.team}'s namespace and claim (a "
            f"folder of its own on the shared file system), and are deleted from team {a.team}'s",
        )
    return ()


def _teams_lose_their_cluster(teams: list[str], *, again: bool) -> str:
    """What a deleted cluster means for the teams' jobs-only stacks: their objects go with it, and a stack whose
    cluster is gone cannot be destroyed cleanly (docs/how-to/teams.md); ``again``: a cluster under a new name takes
    them after the update."""
    if not teams:
        return ""
    after = ", and `pulumi up` on them after" if again else ""
    return (
        f"; the teams' jobs-only stacks ({', '.join(teams)}) lose their cluster: run `pulumi destroy` on them "
        f"first{after} (a destroy cannot reach a cluster that is gone)"
    )


def new_data_is_empty(old_plan: Plan, new_plan: Plan, recorded: Optional[Mapping[str, object]] = None) -> bool:
    """Whether the other shared data :func:`data_changes` names is a file system the update makes, which holds no
    job's folder: under another cluster name or backend, made in place of an adopted one, or an FSx file system
    replaced. A file system the stack adopts, or another EFS claim, may hold the folders."""
    if new_plan.config.jobs_only or not data_changes(old_plan, new_plan, recorded):
        return False  # a jobs-only stack's new team or cluster may hold its folders
    old, new = old_plan.config, new_plan.config
    if old.jobs_only:  # a cluster of its own now
        return new.storage.file_system_id is None
    a, b = old.storage, new.storage
    if b.file_system_id is not None:
        return False
    return (
        old.cluster_name != new.cluster_name
        or a.backend != b.backend
        or a.file_system_id is not None
        or (b.backend == "fsx" and bool(_fsx_replaced(old_plan, new_plan) or _fsx_record_change(new_plan, recorded)))
    )


def _fsx_replaced(old_plan: Plan, new_plan: Plan) -> list[str]:
    """The changes of a file system the stack made that make the provider replace it (terraform-provider-aws
    ``aws_fsx_lustre_file_system``: ``subnet_ids`` forces a new one, and so do a smaller ``storage_capacity`` and
    fewer provisioned metadata IOPS: FSx grows them but never shrinks them), each naming its key."""
    a, b = old_plan.storage, new_plan.storage
    fa, fb = a.fsx, b.fsx
    found: list[str] = []
    if fa is None or fb is None:
        return found
    if (a.zone, a.subnet_id) != (b.zone, b.subnet_id):
        where = f"{a.zone or a.subnet_id} -> {b.zone or b.subnet_id}"
        found.append(f"{b.zone_key} {where}: FSx keeps a file system in the subnet it was made in")
    if fb.storage_capacity_gib < fa.storage_capacity_gib:
        found.append(
            f"{key('storage.fsx.storageCapacityGib')} {fa.storage_capacity_gib} -> {fb.storage_capacity_gib}: FSx "
            "grows a file system but never shrinks it"
        )
    if fa.metadata_mode == fb.metadata_mode == "USER_PROVISIONED" and (fb.metadata_iops or 0) < (fa.metadata_iops or 0):
        found.append(
            f"{key('storage.fsx.metadataIops')} {fa.metadata_iops} -> {fb.metadata_iops}: FSx raises a file system's "
            "metadata IOPS but never lowers them"
        )
    given = fsx_automatic_metadata_iops(fa.storage_capacity_gib)
    if fa.metadata_mode == "AUTOMATIC" and fb.metadata_mode == "USER_PROVISIONED" and (fb.metadata_iops or 0) < given:
        # the provider compares the new IOPS with those in its state, which AUTOMATIC's read filled in
        found.append(
            f"{key('storage.fsx.metadataMode')} AUTOMATIC -> USER_PROVISIONED at {fb.metadata_iops} IOPS, below the "
            f"{given} AUTOMATIC gives {fa.storage_capacity_gib} GiB (set {key('storage.fsx.metadataIops')} to at "
            "least that to keep the file system)"
        )
    return found


#: The AWS CLI command that switches an FSx file system's metadata to AUTOMATIC (FSx's UpdateFileSystem, no IOPS).
_AUTOMATIC_COMMAND = (
    "aws fsx update-file-system --file-system-id FS_ID --lustre-configuration 'MetadataConfiguration={Mode=AUTOMATIC}'"
)


def _fsx_throughput_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A new throughput tier of a file system the stack made: FSx switches its file servers in place
    (UpdateFileSystem), and the file system may be unavailable meanwhile."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None or both[0].throughput_per_tib == both[1].throughput_per_tib:
        return []
    fa, fb = both
    return [
        f"{key('storage.fsx.throughputPerTib')} {fa.throughput_per_tib} -> {fb.throughput_per_tib}: FSx switches the "
        "file system's servers in place. It may be unavailable meanwhile, from moments up to an hour (`pulumi up` "
        "waits up to 90 min), and the jobs' file operations wait: change it between jobs. The price follows the new "
        "tier"
    ]


def _fsx_metadata_notes(old_plan: Plan, new_plan: Plan) -> list[str]:
    """A file system the stack made switched from USER_PROVISIONED metadata IOPS back to AUTOMATIC: the provider
    sends the IOPS its state holds with the mode, where FSx takes none (terraform-provider-aws
    ``expandLustreMetadataUpdateConfiguration``; FSx's UpdateFileSystemLustreMetadataConfiguration), and FSx refuses
    the switch while the IOPS exceed AUTOMATIC's for the capacity."""
    both = _fsx_updated(old_plan, new_plan)
    if both is None or (both[0].metadata_mode, both[1].metadata_mode) != ("USER_PROVISIONED", "AUTOMATIC"):
        return []
    fa = both[0]
    if (fa.metadata_iops or 0) > fsx_automatic_metadata_iops(fa.storage_capacity_gib):
        return []  # refused (_fsx_metadata_problems)
    return [
        f"{key('storage.fsx.metadataMode')} USER_PROVISIONED -> AUTOMATIC: the provider sends the {fa.metadata_iops} "
        "IOPS with the new mode, which FSx refuses, so `pulumi up` would fail at the file system. Switch it yourself "
        f"first: `{_AUTOMATIC_COMMAND}`, then `pulumi refresh`"
    ]
