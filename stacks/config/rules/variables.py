"""Rules on the ``$(NAME)`` references of a job's command, args and env: each must name a variable its pods will
have, defined before it (Kubernetes leaves any other as written)."""

import difflib
from typing import Iterator

from components.catalog.launchers import LAUNCHERS
from components.workloads.pods import COMPLETION_INDEX_ENV, INDEX_VARIABLE
from components.workloads.spec import env_name, variable_references
from stacks.config.errors import key
from stacks.config.jobs import JobConfig
from stacks.config.rules.sections import Sections, reference_cycle
from stacks.kinds import KINDS, JobKind


def _texts(path: str, job: JobConfig) -> Iterator[tuple[str, str]]:
    """The job's settings Kubernetes expands variables in (``script`` and ``args`` reach the container's args)."""
    if job.script:
        yield f"{path}.script", job.script
    for field, values in (("command", job.command), ("args", job.args), ("launcherCommand", job.launcher_command)):
        for i, v in enumerate(values or []):
            yield f"{path}.{field}[{i}]", v
    for name, v in job.env.items():
        yield f"{path}.env.{name}", v


def check_variables(s: Sections, path: str, name: str, job: JobConfig, problems: list[str]) -> None:
    """A ``$(NAME)`` the job's pods will not have, which Kubernetes leaves as written: another job's output folder
    without that job in ``after``, a variable only another kind's pods get, one a launcher sets in each process it
    starts (:mod:`components.catalog.launchers`), a setting's without the setting, or a near miss of one the program
    sets."""
    given = {env_name(a) for a in job.after if a in s.job_names}
    kind = KINDS[job.kind]
    unset = _unset(path, job, kind)
    known = (kind.pod_variables() - set(unset)) | given | set(job.env)
    # the variables of other kinds' pods, with the kinds whose pods have them
    elsewhere = {
        var: [k.name for k in KINDS.values() if var in k.pod_variables()]
        for var in set().union(*(k.pod_variables() for k in KINDS.values())) - known
    }
    _check_env_cycle(path, job, problems)
    outputs = {env_name(n): n for n in s.job_names}
    for where, text in _texts(path, job):
        for var in dict.fromkeys(variable_references(text)):
            if var in known:
                continue
            if var == COMPLETION_INDEX_ENV:
                _check_completion_index(where, kind, problems)
                continue
            if var in unset:
                problems.append(f"{key(where)}: $({var}) is {unset[var]}")
                continue
            if outputs.get(var) == name:
                problems.append(f"{key(where)}: $({var}) is this job's own output folder; write $(OUTPUT_DIR)")
                continue
            launcher = next((la for la in LAUNCHERS if var in la.variables), None)
            if launcher and (launcher is kind.launcher or var not in elsewhere):
                problems.append(
                    f"{key(where)}: $({var}) is set by {launcher.name} in each process it starts, not in the pod "
                    "(Kubernetes would pass it as written); read it from the environment in the program"
                )
                continue
            if var in elsewhere:
                problems.append(
                    f"{key(where)}: $({var}) is set in the pods of {' and '.join(elsewhere[var])} jobs, not in those "
                    f"of {job.kind} jobs (Kubernetes would pass it as written); set it in {key(f'{path}.env')} or "
                    "write the value itself"
                )
                continue
            if var in outputs:
                other = outputs[var]
                problems.append(
                    f"{key(where)}: $({var}) is job {other}'s output folder, which only the jobs after it get; add "
                    f"{other} to after"
                )
                continue
            # Kubernetes compares names exactly; a job's env names are C identifiers
            spelt = var.upper().replace("-", "_").replace(".", "_")
            near = difflib.get_close_matches(spelt, sorted(known | set(outputs)), n=1, cutoff=0.8)
            hint = f"; did you mean $({near[0]})?" if near else ""
            if var.endswith("_OUTPUT_DIR"):
                gets = f"this job gets {', '.join(sorted(given))} (its after)" if given else "this job waits for none"
                problems.append(f"{key(where)}: $({var}) is no job's output folder; {gets}{hint}")
            elif near:
                problems.append(
                    f"{key(where)}: $({var}) is not a variable of the job's pods (Kubernetes would pass it as "
                    f"written){hint}"
                )


def _unset(path: str, job: JobConfig, kind: JobKind) -> dict[str, str]:
    """The variables of the kind's pods this job's pods lack (a setting is off), with the setting that sets each."""
    settings = (
        ("DATA_DIR", f"the dataset's folder, and the job has none; set {key(f'{path}.dataset')}", job.dataset),
        (
            "TENSORBOARD_DIR",
            f"TensorBoard's folder, which is off; set {key(f'{path}.tensorboard')}: true",
            job.tensorboard,
        ),
        (
            "CHECKPOINT_EVERY_SECONDS",
            f"set only with {key(f'{path}.checkpointEverySeconds')}",
            job.checkpoint_every_seconds is not None,
        ),
        (
            "PG_TIMEOUT_SECONDS",
            f"set only with {key(f'{path}.collectiveTimeoutSeconds')}",
            job.collective_timeout_seconds is not None,
        ),
    )
    return {
        var: fix for var, fix, is_set in settings if not is_set and var in kind.pod_variables() and var not in job.env
    }


def _check_completion_index(where: str, kind: JobKind, problems: list[str]) -> None:
    """``$(JOB_COMPLETION_INDEX)``: the Job controller appends it to an Indexed Job's containers, after the job's
    ``env``, so it expands in the command and args only."""
    if not kind.indexed_pods:
        problems.append(
            f"{key(where)}: $({COMPLETION_INDEX_ENV}) is set only in an Indexed Job's pods, and {kind.name} jobs do "
            "not run one (Kubernetes would pass it as written)"
        )
    elif ".env." in where:
        problems.append(
            f"{key(where)}: $({COMPLETION_INDEX_ENV}) comes after the job's env in the pod (the Job controller appends "
            f"it), so Kubernetes would leave it as written here; write $({INDEX_VARIABLE})"
        )


def _check_env_cycle(path: str, job: JobConfig, problems: list[str]) -> None:
    """Variables of the job's ``env`` that name themselves or each other: Kubernetes expands a ``$(NAME)`` only to a
    variable defined before it in the container (the image's ``ENV`` is not one), so one stays as written."""
    cycle = reference_cycle({k: [r for r in variable_references(v) if r in job.env] for k, v in job.env.items()})
    if cycle is None:
        return
    where = key(f"{path}.env.{cycle[0]}")
    if len(cycle) == 2:
        problems.append(
            f"{where}: $({cycle[0]}) names the variable itself; Kubernetes expands only variables defined before it "
            "(not the image's ENV), so it would stay as written; write its value out"
        )
        return
    problems.append(
        f"{where}: {' -> '.join(cycle)} name each other; Kubernetes expands a $(NAME) only to a variable defined "
        "before it, so one would stay as written; write one of them out"
    )
