"""Which jobs a change of the configuration starts again or ends at the next ``pulumi up``: a new run (a new output
folder), the same run started again in its folder (its object replaced for a setting its pods read), a job added or
removed. :mod:`stacks.plan.upgrade` puts them in the upgrade summary."""

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from stacks.kinds import KINDS
from stacks.plan import RECIPE_WORDS, JobPlan, Plan


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


#: How the record of an update (``deployedVersions``) names the build of the bundled image that jobs' helper
#: containers run: ``<its variant> image`` (``training image``).
HELPER_IMAGE_SUFFIX = " image"


def helpers(job: JobPlan) -> tuple[str, ...]:
    """What the job's pods run in its :attr:`~stacks.plan.JobPlan.toolbox` build besides its own image, in words:
    the download of its code, the wait for the jobs it comes after, its kind's own helpers (an MPI launcher's wait
    for its workers). A new build of that image changes its pods, so its object is replaced."""
    out = ["its code's download"] if job.config.code else []
    out += [f"its wait for {', '.join(job.after)}"] if job.after else []
    return (*out, *KINDS[job.kind].toolbox_scripts.values())


def helper_images(plan: Plan) -> dict[str, str]:
    """The version of each build of the bundled image some job's helper containers run, as an update records it
    (:data:`HELPER_IMAGE_SUFFIX`)."""
    return {f"{j.toolbox.variant}{HELPER_IMAGE_SUFFIX}": j.toolbox.version for j in plan.jobs.values() if helpers(j)}


def _helpers_reason(job: JobPlan) -> str:
    """A restart for a new build of the image its helpers run, in words."""
    return f"the {job.toolbox.variant} image its helper containers run ({', '.join(helpers(job))})"


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
    version); without it the old plan's. A job kept in its run restarts for a new build of the image its helpers run
    (:func:`helpers`): the build ``deployed_versions`` records (the last update's, :func:`helper_images`), else the
    old plan's."""
    deployed = deployed_dirs or {}
    recorded = deployed_versions or {}
    experiments = set(new_plan.config.benchmark.experiments) if new_plan.config.benchmark is not None else set()
    out = []
    for name, job in new_plan.jobs.items():
        was = old_plan.jobs.get(name)
        if was is None:
            out.append(JobRun(name, "added", new_dir=job.output_dir))
            continue
        old_dir = deployed.get(name, was.output_dir)
        if old_dir == job.output_dir and (was.run_id == job.run_id or _folder_named_only(was, job)):
            restarts = pod_changes(was, job)
            # the build its helpers ran: the last update's record, else the old plan's (plan --from reads it at REV)
            helper_build = str(recorded.get(f"{job.toolbox.variant}{HELPER_IMAGE_SUFFIX}", was.toolbox.version))
            if helpers(job) and helper_build != job.toolbox.version:
                restarts.append(_helpers_reason(job))
            if restarts:
                kind = KINDS[job.kind]
                how, rerun = kind.restart_text(), kind.rerun_text()
                out.append(JobRun(name, "restarts", tuple(restarts), old_dir, job.output_dir, how, rerun))
            continue
        reasons = _recipe_changes(was.run_recipe, job.run_recipe, benchmark=name in experiments)
        if not reasons:
            reasons = ["its image, code or this project's version"]
        kind = KINDS[job.kind]
        if old_dir != job.output_dir:
            how = f"its {kind.job_object.kind} is replaced and its pods stop"
            out.append(JobRun(name, "new run", tuple(reasons), old_dir, job.output_dir, how, kind.rerun_text()))
            continue
        if len(reasons) > 1:  # the folder it names is the one it runs in: the other changes replace its object
            reasons = [r for r in reasons if r != RECIPE_WORDS["output"]]
        how = f"its {kind.job_object.kind} is replaced"
        out.append(JobRun(name, "same folder", tuple(reasons), old_dir, job.output_dir, how, kind.rerun_text()))
    out += [
        JobRun(n, "removed", old_dir=deployed.get(n, j.output_dir))
        for n, j in old_plan.jobs.items()
        if n not in new_plan.jobs
    ]
    return tuple(out)


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
    out += [f"a new run of {a}" for a in inputs_after if a in inputs_before and inputs_before[a] != inputs_after[a]]
    if set(inputs_before) != set(inputs_after):
        out.append("after")
    return out
