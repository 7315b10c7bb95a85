"""The upgrade summary names every job whose running pods a change starts again, and no other, for every job key.

What a real cluster does with a changed job, encoded here as its two owners' rules:

- pulumi-kubernetes replaces a ``batch/v1`` Job whose ``.metadata.name``, ``.metadata.namespace``,
  ``.spec.completions``, ``.spec.parallelism``, ``.spec.selector`` or ``.spec.template`` changes (``forceNew``,
  https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/provider/diff.go), a path the resource's
  ``ignoreChanges`` names left out. It changes a custom resource, an MPIJob, in place.
- Kueue stops and requeues a running job whose pod counts, containers or init containers no longer match its admitted
  Workload (https://github.com/kubernetes-sigs/kueue/blob/v0.19.1/pkg/util/equality/podset.go, and
  ``pkg/controller/jobframework/reconciler.go``: "job with no matching workload, suspending"). Every preset's job is
  queued.

Each case evaluates a preset under mocks twice, as it is and with one job key changed, and compares the job objects
each registers with those rules. The summary (:func:`stacks.plan.upgrade.run_changes`) must name exactly the jobs
they restart: a new run, or the same run started again.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stacks.config import JobConfig, load_config
from stacks.kinds import KINDS
from stacks.plan import Plan, build_plan
from stacks.plan.upgrade import POD_SETTINGS, compare, run_changes
from stacks.plan.upgrade_text import render_upgrade, upgrade_report
from stacks.stackfile import REPO
from tests.harness import Registration, run_program, stack_config

pytestmark = pytest.mark.mock

#: pulumi-kubernetes's forceNew paths of a batch/v1 Job (the metadata's two, the Job's own).
JOB_FORCE_NEW = (
    "metadata.name",
    "metadata.namespace",
    "spec.completions",
    "spec.parallelism",
    "spec.selector",
    "spec.template",
)

_MISSING = object()
#: Each job key changed once in a preset, (stack, job, key, value); ``_MISSING`` removes the key.
CHANGES: list[tuple[str, str, str, Any]] = [
    # a pytorch job (torchrun)
    ("dev", "train", "nodes", 2),
    ("dev", "train", "minNodes", _MISSING),
    ("dev", "train", "maxNodes", 1),
    ("dev", "train", "maxRestarts", 5),
    ("dev", "train", "stopGracePeriodSeconds", 120),
    ("dev", "train", "checkpointEverySeconds", 600),
    ("dev", "train", "collectiveTimeoutSeconds", 120),
    ("dev", "train", "rendezvousBackend", "c10d"),
    ("dev", "train", "timeoutHours", 48),
    ("dev", "train", "waitForCompletion", True),
    ("dev", "train", "queueTimeoutHours", 2),
    ("dev", "train", "readOnlyRootFilesystem", False),
    ("dev", "train", "tensorboard", False),
    ("dev", "train", "healthCheck", _MISSING),
    ("dev", "train", "purpose", "evaluation"),
    ("dev", "train", "args", ["--data-dir", "$(DATA_DIR)", "--output-dir", "$(OUTPUT_DIR)", "--width", "64"]),
    ("dev", "train", "outputDir", "runs/mine"),
    ("dev", "train", "processesPerNode", 2),
    ("dev", "train", "script", "/app/train_tf.py"),
    # a command job, after the pytorch job
    ("dev", "evaluate", "nodes", 2),
    ("dev", "evaluate", "maxRestarts", 5),
    ("dev", "evaluate", "stopGracePeriodSeconds", 120),
    ("dev", "evaluate", "readOnlyRootFilesystem", False),
    ("dev", "evaluate", "tensorboard", True),
    ("dev", "evaluate", "env", {"EVAL": "1"}),
    ("dev", "evaluate", "command", ["python", "/app/evaluate.py", "--quiet"]),
    ("dev", "evaluate", "nodeGroup", "cpu"),
    # a tensorflow job
    ("tensorflow", "train", "nodes", 1),
    ("tensorflow", "train", "maxRestarts", 5),
    ("tensorflow", "train", "stopGracePeriodSeconds", 120),
    ("tensorflow", "train", "tensorboard", False),
    # MPI jobs: changed in place, restarted by Kueue
    ("mpi-horovod", "horovod", "nodes", 1),
    ("mpi-horovod", "horovod", "maxRestarts", 5),
    ("mpi-horovod", "horovod", "stopGracePeriodSeconds", 120),
    ("mpi-horovod", "horovod", "timeoutHours", 48),
    ("mpi-horovod", "horovod", "readOnlyRootFilesystem", True),
    ("mpi-horovod", "horovod", "tensorboard", True),
    ("mpi-horovod", "nccl", "launcherCommand", ["python3", "-c", "print('launched')"]),
    ("mpi-horovod", "nccl", "image", "horovod"),
]

#: Job keys no case above changes, and the test that shows what their change does.
ELSEWHERE = {
    "kind": "a new run: a key of the run recipe (tests/unit/test_upgrade_plan.py, a changed definition)",
    "code": "a new run: the code's content hash is in the run recipe (tests/mock/test_job_code_program.py)",
    "dataset": "a new run: the dataset's source is in the run recipe (tests/unit/test_upgrade_plan.py)",
    "after": "a new run: the jobs it waits for are in the run recipe (tests/unit/test_upgrade_plan.py)",
}


def _at(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def _replaced(before: Registration, after: Registration) -> list[str]:
    """The forceNew paths of a Job that differ, those its ignoreChanges names left out."""
    ignored = set(after.ignore_changes)
    return [
        p
        for p in JOB_FORCE_NEW
        if not any(p == i or p.startswith(i + ".") for i in ignored) and _at(before.inputs, p) != _at(after.inputs, p)
    ]


def _requeued(before: Registration, after: Registration) -> list[str]:
    """What Kueue compares of an MPIJob's pod sets that differs: each role's count, containers, init containers."""
    out = []
    old, new = before.inputs["spec"]["mpiReplicaSpecs"], after.inputs["spec"]["mpiReplicaSpecs"]
    for role in sorted(set(old) | set(new)):
        a, b = old.get(role) or {}, new.get(role) or {}
        if a.get("replicas") != b.get("replicas"):
            out.append(f"{role}.replicas")
        for part in ("containers", "initContainers"):
            if _at(a, f"template.spec.{part}") != _at(b, f"template.spec.{part}"):
                out.append(f"{role}.{part}")
    return out


def _job_objects(registrations: list[Registration], jobs: set[str]) -> dict[str, Registration]:
    """The Job or MPIJob of each configured job (named as the job)."""
    return {
        r.inputs["metadata"]["name"]: r
        for r in registrations
        if r.type in ("kubernetes:batch/v1:Job", "kubernetes:kubeflow.org/v2beta1:MPIJob")
        and r.inputs["metadata"]["name"] in jobs
    }


def restarted(before: list[Registration], after: list[Registration], jobs: set[str]) -> dict[str, list[str]]:
    """Job -> why the cluster starts its running pods again, by the rules above (absent: they run on)."""
    old, new = _job_objects(before, jobs), _job_objects(after, jobs)
    out = {}
    for name in old.keys() & new.keys():
        why = _requeued(old[name], new[name]) if new[name].type.endswith(":MPIJob") else _replaced(old[name], new[name])
        if why:
            out[name] = why
    return out


def _plan(stack: str, config: dict[str, Any]) -> Plan:
    return build_plan(load_config("eks-training", stack, config, project_dir=REPO))


def _changed(stack: str, job: str, key: str, value: Any) -> dict[str, Any]:
    config = stack_config(stack)
    spec = config["eks-training:jobs"][job]
    if value is _MISSING:
        del spec[key]
    else:
        spec[key] = copy.deepcopy(value)
    return config


def test_every_job_key_is_changed_by_a_case_or_shown_elsewhere() -> None:
    keys = {f.alias or name for name, f in JobConfig.model_fields.items()}
    changed = {key for _, _, key, _ in CHANGES}
    assert keys - changed - set(ELSEWHERE) == set(), "add a case to CHANGES (or say where it is shown: ELSEWHERE)"
    assert not changed & set(ELSEWHERE)


@pytest.mark.parametrize("stack, job, key, value", CHANGES, ids=[f"{s}-{j}-{k}" for s, j, k, _ in CHANGES])
def test_the_summary_names_exactly_the_jobs_the_cluster_restarts(stack: str, job: str, key: str, value: Any) -> None:
    config = _changed(stack, job, key, value)
    program = run_program(stack, config=config)
    assert program.error is None, program.error
    jobs = set(config["eks-training:jobs"])
    truth = restarted(run_program(stack).registrations, program.registrations, jobs)
    named = {r.name: r for r in run_changes(_plan(stack, stack_config(stack)), _plan(stack, config))}
    said = [(n, r.action) for n, r in named.items()]
    assert set(named) == set(truth), f"{key} = {value!r}: the cluster restarts {truth}, the summary names {said}"
    for name, run in named.items():
        if run.action == "restarts":
            assert key in run.reasons, (name, run)


def test_a_restart_is_said_with_its_keys_how_and_folder() -> None:
    """The summary's line for a job whose pods start again in the same run."""
    config = _changed("dev", "train", "maxRestarts", 5)
    config["eks-training:jobs"]["evaluate"]["stopGracePeriodSeconds"] = 90
    report = compare(_plan("dev", stack_config("dev")), _plan("dev", config), old_label="HEAD")
    text = render_upgrade(upgrade_report(report))
    train = _plan("dev", config).jobs["train"].output_dir
    assert (
        f"  job train: maxRestarts changed: its Job is replaced, so its pods start again in the same run, finished "
        f"or not, in {train}: an unfinished pytorch run resumes from its checkpoint, a finished one ends at once, "
        "other kinds run their command again" in text
    ), text
    assert "  job evaluate: stopGracePeriodSeconds changed: its Job is replaced" in text, text
    assert "jobs: none restarts or starts a new run" not in text


def test_an_mpi_jobs_restart_is_kueues_requeue() -> None:
    config = _changed("mpi-horovod", "horovod", "nodes", 1)
    report = compare(_plan("mpi-horovod", stack_config("mpi-horovod")), _plan("mpi-horovod", config), old_label="HEAD")
    text = render_upgrade(upgrade_report(report))
    assert (
        "  job horovod: nodes changed: Kueue stops and requeues its MPIJob if it runs, whose pods then start again in "
        "the same run (a finished one stays finished)" in text
    ), text


def test_every_kinds_pod_keys_are_settings_the_plan_reads() -> None:
    for kind in KINDS.values():
        assert kind.pod_keys <= POD_SETTINGS.keys(), (kind.name, kind.pod_keys - POD_SETTINGS.keys())
