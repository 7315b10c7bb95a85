"""Which jobs a change of the configuration starts again or ends at the next ``pulumi up``: a new run (a new output
folder), the same run started again in its folder (its object replaced for a setting its pods read), a job added or
removed. :mod:`stacks.plan.upgrade` puts them in the upgrade summary."""

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from components.conventions import SHARED_MOUNT
from stacks.config.jobs import default_max_nodes
from stacks.kinds import KINDS
from stacks.plan import RECIPE_WORDS, JobPlan, Plan
from stacks.plan.images import ImagePlan
from stacks.plan.record import recorded_entry


@dataclass(frozen=True)
class JobRun:
    """A job whose run the change starts, or ends: a new run is a new output folder, where the job starts again from
    its first step."""

    name: str
    action: str
    """``new run`` (a new folder), ``same folder`` (its ``outputDir`` keeps it), ``restarts`` (its object is replaced,
    its run goes on), ``added`` or ``removed``."""
    reasons: tuple[str, ...] = ()
    """What changed in its definition, in words (``args``, ``a new run of train``...), or the keys that restart it."""
    old_dir: Optional[str] = None
    new_dir: Optional[str] = None
    how: str = ""
    """``restarts``: how its running pods start again (:meth:`stacks.kinds.JobKind.restart_text`); ``same folder``,
    ``new run``: its object replaced."""
    rerun: str = ""
    """``restarts``, ``same folder``: what its program does when it starts again in the same folder
    (:meth:`stacks.kinds.JobKind.rerun_text`); ``new run``: when an earlier run of the same definition left the new
    folder (a job set back)."""
    renamed_from: str = ""
    """``added``: the removed job of the same definition it may be a new name for, whose run its ``outputDir`` can
    keep."""
    keep: str = ""
    """The setting that keeps the job as it runs, in words (``set its maxNodes: 2``), where one does."""


#: The reason of a job that starts a new run because a job in its ``after`` does: ``a new run of <that job>``.
AFTER_MOVED = "a new run of "


#: What a job's program does when it starts again where the change gives the jobs a new file system (a ``data:`` line
#: of the summary, :func:`stacks.plan.storage_change.new_data_is_empty`): its folder is not there, so it starts from
#: its first step.
NEW_DATA_RERUN = "it starts from its first step on the shared data the data: line names"


#: How the record of an update (``deployedVersions``) names the build of an image its jobs' pods run:
#: ``images.<its variant>.build`` (``images.training.build``).
BUILD_SUFFIX = ".build"


def build_key(image: ImagePlan) -> str:
    """The record's name for the build of ``image`` (:data:`BUILD_SUFFIX`)."""
    return f"images.{image.variant}{BUILD_SUFFIX}"


def helpers(job: JobPlan) -> tuple[str, ...]:
    """What the job's pods run in its :attr:`~stacks.plan.JobPlan.toolbox` build besides its own image, in words:
    the download of its code, the wait for the jobs it comes after, its kind's own helpers (an MPI launcher's wait
    for its workers). A new build of that image changes its pods, so its object is replaced."""
    out = ["its code's download"] if job.config.code else []
    out += [f"its wait for {', '.join(job.after)}"] if job.after else []
    return (*out, *KINDS[job.kind].toolbox_scripts.values())


def job_images(job: JobPlan) -> tuple[ImagePlan, ...]:
    """The images the job's pods run: its own, and the bundled one where its helpers run it (:func:`helpers`)."""
    return (job.image, *((job.toolbox,) if helpers(job) and job.toolbox.variant != job.image.variant else ()))


def image_builds(plan: Plan) -> dict[str, str]:
    """The build of each image the jobs' pods run, as an update records it (:func:`build_key`)."""
    return {build_key(i): i.version for j in plan.jobs.values() for i in job_images(j)}


def _other_repository(image: ImagePlan, was: ImagePlan) -> bool:
    """``image`` is built under another key than ``was``: into a repository of its own (stacks/workloads.py: one ECR
    repository per build), so the pods pull another reference."""
    return image.context is not None and image.variant != was.variant


def _moved(image: ImagePlan, was: ImagePlan, recorded: Mapping[str, object]) -> bool:
    """``image``'s build differs from the one the last update recorded, else (no record) from the old plan's
    (``was``; ``plan --from`` reads it at the revision), or it is built under another key
    (:func:`_other_repository`)."""
    if _other_repository(image, was):
        return True
    return (recorded_entry(recorded, build_key(image)) or was.version) != image.version


def run_changes(
    old_plan: Plan,
    new_plan: Plan,
    deployed_dirs: Optional[Mapping[str, str]] = None,
    deployed_versions: Optional[Mapping[str, object]] = None,
) -> tuple[JobRun, ...]:
    """The jobs whose run the change starts or ends, in the new plan's job order, the removed ones last: a job whose
    output folder moves (a new run: its object replaced, from its first step unless an earlier run of the same
    definition left that folder; the old folder stays), one whose run changes in the folder
    its ``outputDir`` keeps, one added, one removed. ``deployed_dirs``: each job's folder as the last update exported
    it (``pulumi up``), which a change outside the configuration moves too (an image or code folder, this project's
    version); without it the old plan's. ``deployed_versions``: what the last update recorded, the builds of the
    images the jobs ran among it (:func:`image_builds`): a job kept in its folder starts again on a new build of its
    image, and restarts in its run on a new build of the image its helpers run."""
    deployed = deployed_dirs or {}
    recorded = deployed_versions or {}
    experiments = set(new_plan.config.benchmark.experiments) if new_plan.config.benchmark is not None else set()
    out = []
    for name, job in new_plan.jobs.items():
        was = old_plan.jobs.get(name)
        if was is None:
            out.append(_added_run(old_plan, new_plan, name, job, deployed))
            continue
        old_dir = deployed.get(name, was.output_dir)
        kept = old_dir == job.output_dir and not _moved(job.image, was.image, recorded)
        if kept and (was.run_id == job.run_id or _folder_named_only(was, job)):
            restart = _restart_in_run(old_plan, new_plan, name, was, job, old_dir, recorded)
            out += [restart] if restart is not None else []
            continue
        out.append(_replaced_run(name, was, job, old_dir, experiments))
    out += [
        JobRun(n, "removed", old_dir=deployed.get(n, j.output_dir))
        for n, j in old_plan.jobs.items()
        if n not in new_plan.jobs
    ]
    return tuple(out)


def _added_run(old_plan: Plan, new_plan: Plan, name: str, job: JobPlan, deployed: Mapping[str, str]) -> JobRun:
    """A job the old plan lacks: added, or, where one removed job has its definition, maybe that job renamed."""
    same = [n for n, j in old_plan.jobs.items() if n not in new_plan.jobs and j.run_recipe == job.run_recipe]
    if len(same) == 1:  # one removed job of its definition: it may be that job's new name
        (renamed,) = same
        old_dir = deployed.get(renamed, old_plan.jobs[renamed].output_dir)
        return JobRun(name, "added", old_dir=old_dir, new_dir=job.output_dir, renamed_from=renamed)
    return JobRun(name, "added", new_dir=job.output_dir)


def _restart_in_run(
    old_plan: Plan,
    new_plan: Plan,
    name: str,
    was: JobPlan,
    job: JobPlan,
    old_dir: str,
    recorded: Mapping[str, object],
) -> Optional[JobRun]:
    """A job kept in its run (its folder): it starts again there where a pod setting, something outside the
    configuration or its helpers' image changes; else None."""
    restarts = pod_changes(was, job) + _outside_changes(was, job)
    if job.toolbox in job_images(job)[1:] and _moved(job.toolbox, was.toolbox, recorded):
        restarts.append(f"the {job.toolbox.variant} image its helper containers run ({', '.join(helpers(job))})")
    if not restarts:
        return None
    kind = KINDS[job.kind]
    how, rerun = kind.restart_text(), kind.rerun_text()
    # only where the new maxSize still allows the old maxNodes (a group that grew)
    followed = _follows_max_size(old_plan, was) and _follows_max_size(new_plan, job)
    keep = (
        f"set its maxNodes: {was.max_nodes} to keep it running"
        if restarts == ["maxNodes"] and followed and was.max_nodes <= job.max_nodes
        else ""
    )
    return JobRun(name, "restarts", tuple(restarts), old_dir, job.output_dir, how, rerun, keep=keep)


def _replaced_run(name: str, was: JobPlan, job: JobPlan, old_dir: str, experiments: set[str]) -> JobRun:
    """A job whose run changes: a new run in another folder, or another run in the folder its outputDir keeps; its
    object is replaced either way."""
    reasons = _recipe_changes(was.run_recipe, job.run_recipe, benchmark=name in experiments)
    if not reasons and _other_repository(job.image, was.image):
        reasons = [f"its image's repository, images.{was.image.name} -> images.{job.image.name}"]
    if not reasons:
        reasons = ["its image, code or this project's version"]
    kind = KINDS[job.kind]
    if old_dir != job.output_dir:
        how = f"its {kind.job_object.kind} is replaced and its pods stop"
        keep = _resume_hint(name, job, old_dir, reasons, experiments)
        return JobRun(name, "new run", tuple(reasons), old_dir, job.output_dir, how, kind.rerun_text(), keep=keep)
    if len(reasons) > 1:  # the folder it names is the one it runs in: the other changes replace its object
        reasons = [r for r in reasons if r != RECIPE_WORDS["output"]]
    how = f"its {kind.job_object.kind} is replaced"
    return JobRun(name, "same folder", tuple(reasons), old_dir, job.output_dir, how, kind.rerun_text())


def unrecorded_notes(new_plan: Plan, runs: tuple[JobRun, ...], recorded: Optional[Mapping[str, object]]) -> list[str]:
    """The jobs kept in their runs whose new builds the summary cannot see: the last update's record holds no build
    of an image it runs in its kept folder (its ``outputDir``) or in its helpers (a version of this project before
    the record); none without a record (``plan --from``)."""
    if not isinstance(recorded, Mapping):
        return []
    said = {r.name for r in runs}
    unseen = [
        name
        for name, job in new_plan.jobs.items()
        if name not in said
        and any(
            i.context is not None and recorded_entry(recorded, build_key(i)) is None
            for i in job_images(job)
            if i is not job.image or job.config.output_dir is not None
        )
    ]
    return (
        [
            f"job(s) {', '.join(unseen)}: the last update recorded no build of the images they run (an earlier version "
            "of this project): a new build starts them again in their runs, which this summary cannot see; the preview "
            "marks their objects +- (replace)"
        ]
        if unseen
        else []
    )


def _outside_changes(before: JobPlan, after: JobPlan) -> list[str]:
    """The settings outside the job's own keys that its pods read, where they differ: its dataset's folder
    (``DATA_DIR``: the dataset's ``path``, or the FSx data repository's folder for one it imports), and an MPI job's
    ``mpiPrefix`` (its launcher's ``mpirun`` path, by key)."""
    out = []
    if after.dataset is not None and before.data_dir != after.data_dir:
        out.append(f"the folder of dataset {after.dataset} (DATA_DIR {before.data_dir} -> {after.data_dir})")
    if KINDS[after.kind].needs_mpi_operator and before.image.mpi_prefix != after.image.mpi_prefix:
        out.append(f"images.{after.image.name}.mpiPrefix")
    return out


def _follows_max_size(plan: Plan, job: JobPlan) -> bool:
    """The job's ``maxNodes`` is the one its group's ``maxSize`` gives a job that sets none
    (:func:`stacks.config.jobs.with_group_defaults`)."""
    group = plan.groups.get(job.config.node_group or "")
    return group is not None and job.max_nodes == default_max_nodes(group.max_size, job.nodes)


def _resume_hint(name: str, job: JobPlan, old_dir: str, reasons: list[str], experiments: set[str]) -> str:
    """How a job whose new run starts from its first step could resume its old one instead: its ``outputDir`` set to
    the old folder, for a kind that resumes from its checkpoints and skips a finished run. None for a benchmark's
    experiment, or a job that moves only because a job it runs after does (that job's folder decides)."""
    if name in experiments or not KINDS[job.kind].skips_finished_runs(job):
        return ""
    if all(r.startswith(AFTER_MOVED) for r in reasons):
        return ""
    folder = old_dir.removeprefix(SHARED_MOUNT + "/")
    return (
        f"if that run is unfinished, set its outputDir: {folder} to resume it there instead (a finished run ends at "
        "once; one that gave up fails until its FAILED file is removed)"
    )


def _folder_named_only(before: JobPlan, after: JobPlan) -> bool:
    """``after`` names the folder ``before`` ran in as its ``outputDir``, and nothing else of its run changes: a new
    run id that only a kind whose pods carry it (:attr:`~stacks.kinds.JobKind.run_in_pods`) sees."""
    rest = [{k: v for k, v in j.run_recipe.items() if k != "output"} for j in (before, after)]
    return rest[0] == rest[1] and not KINDS[after.kind].run_in_pods


#: A job's settings outside its run recipe that its pods may read, by key, as the plan resolved them (a default
#: filled in): each kind's :attr:`~stacks.kinds.JobKind.pod_keys` says which of them restart its pods.
POD_SETTINGS: dict[str, Callable[[JobPlan], Any]] = {
    "nodes": lambda j: j.nodes,
    "minNodes": lambda j: j.min_nodes,
    "maxNodes": lambda j: j.max_nodes,
    "maxRestarts": lambda j: j.config.max_restarts,
    "stopGracePeriodSeconds": lambda j: j.config.stop_grace_period_seconds,
    "rendezvousBackend": lambda j: j.config.rendezvous_backend,
    "checkpointEverySeconds": lambda j: j.config.checkpoint_every_seconds,
    "collectiveTimeoutSeconds": lambda j: j.config.collective_timeout_seconds,
    "launcherCommand": lambda j: j.config.launcher_command,
    "timeoutHours": lambda j: j.config.timeout_hours,
    "readOnlyRootFilesystem": lambda j: j.read_only_root_filesystem,
    "tensorboard": lambda j: j.tensorboard_dir,
    # where its pods go: its group's labels (role: the group's name, its zone) and taints. The run recipe holds only
    # the instance type, so another group of the same type, or the group's new labels or taints, is the same run.
    "nodeGroup": lambda j: j.placement,
}


def deadline_notes(old_plan: Plan, new_plan: Plan, runs: tuple[JobRun, ...]) -> list[str]:
    """A job kept in its run whose ``timeoutHours`` shrinks in place: Kubernetes counts a Job's
    ``activeDeadlineSeconds`` from its start, so a run that has gone on longer ends at the update."""
    moved = {r.name for r in runs}
    return [
        f"job {name}: timeoutHours {was.config.timeout_hours:g} -> {job.config.timeout_hours:g}, in place: a run "
        f"that has gone on longer than {job.config.timeout_hours:g} h ends when `pulumi up` updates its Job"
        for name, job in new_plan.jobs.items()
        if name not in moved
        and (was := old_plan.jobs.get(name)) is not None
        and job.config.timeout_hours < was.config.timeout_hours
    ]


def awaited_notes(old_plan: Plan, new_plan: Plan, runs: tuple[JobRun, ...]) -> list[str]:
    """A job kept in its run that `pulumi up` now waits for: ``waitForCompletion`` turned on, or a ``healthCheck``
    added, whose check Job is admitted against the group's quota, at a priority above training's
    (:data:`stacks.plan.queues.KIND_OFFSET`): Kueue preempts the job for it where the job holds that quota."""
    moved = {r.name for r in runs}
    out = []
    for name, job in new_plan.jobs.items():
        was = old_plan.jobs.get(name)
        if name in moved or was is None:
            continue
        if job.config.wait_for_completion and not was.config.wait_for_completion:
            out.append(
                f"job {name}: waitForCompletion false -> true: this `pulumi up` waits for the running job to end "
                "(up to its timeoutHours and queueTimeoutHours), and stops with its reason if it failed already"
            )
        if job.health_check is not None and was.health_check is None:  # the plan's: set and enabled
            out.append(
                f"job {name}: healthCheck added: its check is queued now, on the job's group; where the running job "
                "holds the quota it needs, Kueue stops the job to admit it (the check's priority is higher). `pulumi "
                "up` waits for the check. Add it when the job is not running"
            )
    return out


def pod_changes(before: JobPlan, after: JobPlan) -> list[str]:
    """The keys of ``after``'s kind's :attr:`~stacks.kinds.JobKind.pod_keys` whose setting differs: a change that
    starts the job's running pods again in the same run."""
    keys = KINDS[after.kind].pod_keys
    return [k for k, setting in POD_SETTINGS.items() if k in keys and setting(before) != setting(after)]


def _recipe_changes(before: Mapping[str, Any], after: Mapping[str, Any], *, benchmark: bool) -> list[str]:
    """What differs between two run recipes (:func:`stacks.plan.run_recipe`), in words; a benchmark experiment's
    output folder is its run's (``benchmark.run``), not an ``outputDir`` of its own."""
    words = {**RECIPE_WORDS, **({"output": "the benchmark's run"} if benchmark else {})}
    out = [w for k, w in words.items() if before.get(k) != after.get(k)]
    inputs_before, inputs_after = before.get("after") or {}, after.get("after") or {}
    out += [f"{AFTER_MOVED}{a}" for a in inputs_after if a in inputs_before and inputs_before[a] != inputs_after[a]]
    if set(inputs_before) != set(inputs_after):
        out.append("after")
    return out
