"""Each kind's declared pod variables (:meth:`stacks.kinds.base.JobKind.pod_variables`, which the ``$(NAME)`` rule
reads) are the variables its component sets, in every container of every job of every preset."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from components.workloads.spec import JOB_VARIABLES
from stacks.config.jobs import JobConfig
from stacks.config.rules.variables import PROGRAM_SETTINGS, unset_variables
from stacks.kinds import KINDS, JobKind
from stacks.stackfile import StackLoadError, plan_stack
from tests.harness import JOB_OBJECT_TYPES, PROJECT, run_program, stack_config, stack_names
from tests.mock.test_host_setup_program import pod_specs

#: The job objects a kind's component creates.


def conditional(kind: JobKind) -> set[str]:
    """The kind's variables set only when the job asks for them (a dataset, TensorBoard, the trainer's optional
    budgets): those a job that sets none of its optional keys lacks, as the ``$(NAME)`` rule says
    (:func:`stacks.config.rules.variables.unset_variables`)."""
    program = {"script": "train.py"} if kind.takes_script else {"command": ["true"]}
    return set(unset_variables("jobs.x", JobConfig.model_validate({"kind": kind.name, **program}), kind))


def containers(stack: str) -> Iterator[tuple[str, str, str, set[str]]]:
    """(job, kind, container, the variable names the program set there) of every job of ``stack``."""
    jobs = stack_config(stack).get(f"{PROJECT}:jobs") or {}
    for r in run_program(stack).registrations:
        if r.type not in JOB_OBJECT_TYPES:
            continue
        # a job's object is <job>-job or <job>-mpijob; the staging and health-check Jobs are no kind's
        base = r.name.removeprefix(f"{PROJECT}-{stack}-")
        job = next((j for j in jobs if base in (f"{j}-job", f"{j}-mpijob")), None)
        if job is None:
            continue
        users = set(jobs[job].get("env") or {})
        for spec in pod_specs(r.inputs):
            for c in spec["containers"]:
                yield job, jobs[job].get("kind", "pytorch"), c["name"], {e["name"] for e in c.get("env") or []} - users


def mismatches(kind: JobKind, names: set[str], every_kind: set[str]) -> list[str]:
    """What ``kind``'s declaration misses of ``names`` (a container's), or declares and the container lacks."""
    declared = kind.pod_variables()
    out = [f"sets {n}, undeclared" for n in sorted((names & every_kind) - declared)]
    return out + [f"declares {n}, not set" for n in sorted(declared - conditional(kind) - names)]


def test_every_kinds_pods_have_the_variables_it_declares() -> None:
    every_kind = set().union(*(k.pod_variables() for k in KINDS.values()))
    bad, seen = [], set()
    for stack in stack_names():
        for job, kind, container, names in containers(stack):
            seen.add(kind)
            bad += [f"{stack} {job} ({kind}) {container}: {m}" for m in mismatches(KINDS[kind], names, every_kind)]
    assert seen == set(KINDS), f"no preset has a job of {sorted(set(KINDS) - seen)}"
    assert not bad, "\n".join(bad) + (
        "\na kind declares its pods' variables in its `variables` (stacks/kinds/<kind>.py); one that a key of the job "
        "turns on has its line in unset_variables (stacks/config/rules/variables.py)"
    )


def unaccounted(names: set[str], every_kind: set[str]) -> list[str]:
    """The names of a container the ``$(NAME)`` rule would refuse: neither a kind's variable, nor an output folder,
    nor one of the program's settings (:data:`stacks.config.rules.variables.PROGRAM_SETTINGS`)."""
    return sorted(n for n in names - every_kind - PROGRAM_SETTINGS if not n.endswith("_OUTPUT_DIR"))


def test_every_variable_the_program_sets_may_be_named() -> None:
    """A ``$(NAME)`` naming any variable the program writes in a job's containers is not refused: each is a kind's
    variable, an output folder or one of the program's settings."""
    every_kind = set().union(*(k.pod_variables() for k in KINDS.values()))
    bad = [
        f"{stack} {job} ({kind}) {container}: {name}"
        for stack in stack_names()
        for job, kind, container, names in containers(stack)
        for name in unaccounted(names, every_kind)
    ]
    assert not bad, "\n".join(bad)
    assert unaccounted({"NCCL_DEBUG", "FI_PROVIDER", "TRAIN_OUTPUT_DIR", "NEW_SETTING"}, every_kind) == ["NEW_SETTING"]


def test_the_check_can_fail() -> None:
    """Control: a kind that forgot a variable, or declares one its pods lack, is reported."""
    pytorch = KINDS["pytorch"]
    names = set(pytorch.pod_variables()) | {"JOB_PEERS"}
    assert mismatches(pytorch, names, {"JOB_PEERS"}) == ["sets JOB_PEERS, undeclared"]
    assert mismatches(pytorch, names - {"JOB_INDEX"}, set()) == ["declares JOB_INDEX, not set"]
    assert JOB_VARIABLES <= pytorch.pod_variables()
    # a variable a key turns on (collectiveTimeoutSeconds) is not required of a preset's pods
    assert {"DATA_DIR", "PG_TIMEOUT_SECONDS"} <= conditional(pytorch)
    assert "PG_TIMEOUT_SECONDS" not in conditional(KINDS["command"])


def _args(job: str, args: list[str]) -> Any:
    def edit(config: dict[str, Any]) -> None:
        config[f"{PROJECT}:jobs"][job]["args"] = args

    return edit


@pytest.mark.parametrize(
    "job,args",
    [
        ("evaluate", ["$(JOB_INDEX)", "$(RANK)", "$(NODE_RANK)", "$(WORLD_SIZE)", "$(MASTER_ADDR):$(MASTER_PORT)"]),
        ("evaluate", ["$(JOB_PEERS)", "$(JOB_NAME)", "$(JOB_SIZE)", "$(PROCS_PER_NODE)"]),
        ("train", ["$(JOB_INDEX)", "$(MAX_FAILED_ATTEMPTS)", "$(TORCH_ELASTIC_SHUTDOWN_TIMEOUT)"]),
        # the Job controller appends it to an Indexed Job's containers: it expands in the args
        ("evaluate", ["--shard", "$(JOB_COMPLETION_INDEX)"]),
    ],
)
def test_a_kinds_own_variables_are_accepted(job: str, args: list[str]) -> None:
    """The dev preset's command job (``evaluate``) and pytorch job (``train``) may name their pods' variables."""
    try:
        plan_stack("dev", edit=_args(job, args))
    except StackLoadError as e:  # pragma: no cover - the failure's message
        pytest.fail(str(e))


def test_the_job_controllers_index_is_refused_where_no_indexed_job_runs() -> None:
    """An MPIJob's pods are no Indexed Job's: ``$(JOB_COMPLETION_INDEX)`` would reach its ranks as written."""
    with pytest.raises(StackLoadError) as raised:
        plan_stack("mpi-horovod", edit=_args("horovod", ["--shard", "$(JOB_COMPLETION_INDEX)"]))
    assert (
        "eks-training:jobs.horovod.args[1]: $(JOB_COMPLETION_INDEX) is set only in an Indexed Job's pods, and mpi jobs "
        "do not run one (Kubernetes would pass it as written)"
    ) in str(raised.value)
