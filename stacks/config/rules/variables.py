"""Rules on the ``$(NAME)`` references of a job's command, args and env: each must name a variable its pods will
have, defined before it (Kubernetes leaves any other as written)."""

import difflib
import posixpath
import re
from dataclasses import dataclass
from typing import Iterator, Optional

from components.catalog.efa import EFA_ENV_BY_FAMILY, EFA_ENV_COMMON
from components.catalog.environment import CLUSTER_VARIABLES, LAUNCHERS
from components.workloads.pods import COMPLETION_INDEX_ENV, INDEX_VARIABLE
from components.workloads.pytorch import torch_env
from components.workloads.spec import PEAK_FLOPS_VARIABLE, WORKER_SETTINGS, env_name, variable_references
from components.workloads.tensorflow import LEGACY_KERAS_ENV
from stacks.config.errors import key
from stacks.config.jobs import RESERVED_FROM, JobConfig
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


#: Names the program sets in some jobs' containers beyond the kinds' variables: the threads and Python's settings,
#: the node type's NCCL and libfabric settings, torchrun's and TensorFlow's, the device's peak FLOP/s. A ``$(NAME)``
#: naming one is left alone (tests/mock/test_pod_variables.py checks that every preset's containers have no other).
PROGRAM_SETTINGS = frozenset(
    {
        *WORKER_SETTINGS,
        *EFA_ENV_COMMON,
        *(name for env in EFA_ENV_BY_FAMILY.values() for name in env),
        *torch_env(1),
        *LEGACY_KERAS_ENV,
        PEAK_FLOPS_VARIABLE,
    }
)


@dataclass(frozen=True)
class _Scope:
    """What one job's ``$(NAME)`` may name, and where else a name it may not is set."""

    path: str
    name: str
    job: JobConfig
    kind: JobKind
    given: frozenset[str]
    """The output folders of the jobs in its ``after``."""
    unset: dict[str, str]
    known: frozenset[str]
    outputs: dict[str, str]
    """Every job's output folder variable, with the job."""
    elsewhere: dict[str, list[str]]
    """The variables of other kinds' pods, with the kinds whose pods have them."""
    after_misnamed: bool
    """Its ``after`` names a job that does not exist (reported there): a folder missing from ``after`` is not
    reported again."""


def check_variables(s: Sections, path: str, name: str, job: JobConfig, problems: list[str]) -> None:
    """A ``$(NAME)`` the job's pods will not have, which Kubernetes leaves as written: another job's output folder
    without that job in ``after``, a variable only another kind's pods get, one a launcher sets in each process it
    starts (:mod:`components.catalog.environment`), a setting's without the setting, a near miss of one the program
    sets, or any other upper-case name neither the program nor the cluster sets."""
    kind = KINDS[job.kind]
    given = frozenset(env_name(a) for a in job.after if a in s.job_names)
    unset = unset_variables(path, job, kind)
    known = frozenset((kind.pod_variables() - set(unset)) | given | set(job.env))
    every_kind = set().union(*(k.pod_variables() for k in KINDS.values()))
    elsewhere = {var: [k.name for k in KINDS.values() if var in k.pod_variables()] for var in every_kind - known}
    outputs = {env_name(n): n for n in s.job_names}
    misnamed = any(a not in s.job_names for a in job.after)
    scope = _Scope(path, name, job, kind, given, unset, known, outputs, elsewhere, misnamed)
    _check_env_cycle(path, job, problems)
    for where, text in _texts(path, job):
        for var in dict.fromkeys(variable_references(text)):
            if var == COMPLETION_INDEX_ENV and var not in known:
                _check_completion_index(where, kind, problems)
                continue
            problem = None if var in known else _problem(scope, var, in_env=".env." in where)
            if problem:
                problems.append(f"{key(where)}: $({var}) {problem}")
    _check_shell_style(path, job, known, problems)


#: ``$NAME`` or ``${NAME}``, not Kubernetes' ``$(NAME)`` nor its escape ``$$``.
_SHELL_VARIABLE = re.compile(r"(?<!\$)\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
#: Shells: a command that starts one expands ``$NAME`` itself.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})


def _check_shell_style(path: str, job: JobConfig, known: frozenset[str], problems: list[str]) -> None:
    """``$NAME`` where the job's pods have ``NAME``: no shell runs a job's command unless it starts one, and
    Kubernetes expands only ``$(NAME)``, so the program would get the text ``$NAME``."""
    if any(words and posixpath.basename(words[0]) in _SHELLS for words in (job.command, job.launcher_command)):
        return
    for where, text in _texts(path, job):
        if ".env." in where:
            continue
        for match in _SHELL_VARIABLE.finditer(text):
            var = match.group(1) or match.group(2)
            if var in known:
                problems.append(
                    f"{key(where)}: {match.group(0)} reaches the program as written: no shell runs the command, and "
                    f"Kubernetes expands only $(NAME); write $({var})"
                )


def _problem(scope: _Scope, var: str, *, in_env: bool) -> Optional[str]:
    """Why ``$(var)``, which the job's pods do not have, is refused (None: it is left alone); ``in_env``: it is in
    the value of one of the job's ``env``."""
    if var in scope.unset:
        return f"is {scope.unset[var]}"
    if scope.outputs.get(var) == scope.name:
        return "is this job's own output folder; write $(OUTPUT_DIR)"
    launcher = next((la for la in LAUNCHERS if var in la.variables), None)
    if launcher and launcher is scope.kind.launcher:
        return (
            f"is set by {launcher.name} in each process it starts, not in the pod (Kubernetes would pass it as "
            "written); read it from the environment in the program"
        )
    if var in scope.elsewhere:
        return (
            f"is set in the pods of {' and '.join(scope.elsewhere[var])} jobs, not in those of {scope.job.kind} jobs "
            f"(Kubernetes would pass it as written); set it in {key(f'{scope.path}.env')} or write the value itself"
        )
    if launcher:
        return (
            f"is set by {launcher.name} in each process it starts, and {scope.job.kind} jobs do not run it "
            f"(Kubernetes would pass it as written); {_pods_get(scope.kind)}"
        )
    if var in scope.outputs:
        other = scope.outputs[var]
        if scope.after_misnamed:
            return None
        return f"is job {other}'s output folder, which only the jobs after it get; add {other} to after"
    # Kubernetes compares names exactly; a job's env names are C identifiers
    spelt = var.upper().replace("-", "_").replace(".", "_")
    names = sorted(scope.known | set(scope.outputs))
    near = (
        difflib.get_close_matches(spelt, names, n=1, cutoff=0.8)
        or [n for n in names if len(spelt) >= 3 and n.startswith(spelt) and n.count("_") == spelt.count("_") + 1][:1]
    )
    hint = f"; did you mean $({near[0]})?" if near else ""
    if var.endswith("_OUTPUT_DIR"):
        gets = (
            f"this job gets {', '.join(sorted(scope.given))} (its after)" if scope.given else "this job waits for none"
        )
        return f"is no job's output folder; {gets}{hint}"
    if near:
        return f"is not a variable of the job's pods (Kubernetes would pass it as written){hint}"
    if _set_by_others(var, in_env=in_env):
        return None
    return (
        "is not a variable of the job's pods, which get only the program's and their own env (not the image's ENV), "
        f"so Kubernetes would pass it as written; set it in {key(f'{scope.path}.env')}, write the value itself, or "
        f"write $$({var}) for the text $({var})"
    )


def _set_by_others(var: str, *, in_env: bool) -> bool:
    """Whether ``var`` may be in the container without the job's config naming it: a setting the program writes,
    one the cluster adds (``in_env``: in scope in an ``env`` value), or not an environment variable's name at all
    (``$(date)`` for a shell to run)."""
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", var) or var in PROGRAM_SETTINGS:
        return True
    return any(c.names(var) and (c.in_env or not in_env) for c in CLUSTER_VARIABLES)


def _pods_get(kind: JobKind) -> str:
    """The variables a kind's pods get beyond every job's, as a sentence."""
    own = sorted(kind.variables | ({INDEX_VARIABLE} if kind.indexed_pods else set()))
    listed = ", ".join(f"$({v})" for v in own)
    return f"{kind.name} jobs' pods get {listed} besides every job's" if own else "read it from the environment"


def unset_variables(path: str, job: JobConfig, kind: JobKind) -> dict[str, str]:
    """The variables of the kind's pods this job's pods lack (a setting is off), with the setting that sets each: a
    kind's variable that a key of the job turns on has its line here."""
    settings = (
        ("DATA_DIR", f"the dataset's folder, and the job has none; set {key(f'{path}.dataset')}", job.dataset),
        (
            "TENSORBOARD_DIR",
            f"TensorBoard's folder, which is off; set {key(f'{path}.tensorboard')}: true",
            job.tensorboard,
        ),
        (
            "CHECKPOINT_EVERY_SECONDS",
            f"set only with {key(path + '.' + RESERVED_FROM['CHECKPOINT_EVERY_SECONDS'])}",
            job.checkpoint_every_seconds is not None,
        ),
        (
            "PG_TIMEOUT_SECONDS",
            f"set only with {key(path + '.' + RESERVED_FROM['PG_TIMEOUT_SECONDS'])}",
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
