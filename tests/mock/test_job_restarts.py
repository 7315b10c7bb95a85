"""The upgrade summary names every job whose pods a change starts again, and no other, for every job key.

What a real cluster does with a changed job, encoded here as its owners' rules:

- Pulumi replaces a resource when its provider says so or a path its ``replaceOnChanges`` names changes, a path its
  ``ignoreChanges`` names left out (https://www.pulumi.com/docs/iac/concepts/options/replaceonchanges/).
- pulumi-kubernetes replaces a ``batch/v1`` Job whose ``.metadata.name``, ``.metadata.namespace``,
  ``.spec.completions``, ``.spec.parallelism``, ``.spec.selector`` or ``.spec.template`` changes (``forceNew``,
  https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/provider/diff.go), and a custom resource, an
  MPIJob, only for its name or namespace: it changes one in place.
- Kueue stops and requeues a running job whose pod counts, containers or init containers no longer match its admitted
  Workload (https://github.com/kubernetes-sigs/kueue/blob/v0.19.1/pkg/util/equality/podset.go, and
  ``pkg/controller/jobframework/reconciler.go``: "job with no matching workload, suspending"). The MPI Operator then
  starts the workers from the new spec but resumes the old launcher Job (v0.8.0
  ``pkg/controller/mpi_job_controller.go``), so such a change must replace the MPIJob instead: none may be left to
  Kueue.

Each case evaluates a preset under mocks twice, as it is and with one job key changed, and compares the job objects
each registers with those rules. The summary (:func:`stacks.plan.job_changes.run_changes`) must name exactly the jobs
whose object is replaced: a new run, or the same run started again.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stacks.config import TOOLBOX_IMAGE, JobConfig, load_config
from stacks.kinds import KINDS
from stacks.plan import Plan, build_plan
from stacks.plan.installs import installed_versions, version_moves
from stacks.plan.job_changes import BUILD_SUFFIX, POD_SETTINGS, helpers, run_changes, unrecorded_notes
from stacks.plan.upgrade import compare
from stacks.plan.upgrade_text import render_upgrade, upgrade_report
from stacks.stackfile import REPO
from tests.harness import JOB_OBJECT_TYPES, Registration, run_program, stack_config
from tests.update_rules import at, refused_updates, replaced_by

pytestmark = pytest.mark.mock


_MISSING = object()
#: ``nodeGroup``'s value for a move to another group of the same instance type: a copy of the job's group, ``twin``.
TWIN = "twin"
#: Each job key changed once in a preset, (stack, job, key, value); ``_MISSING`` removes the key.
CHANGES: list[tuple[str, str, str, Any]] = [
    # a pytorch job (torchrun)
    ("dev", "train", "nodes", 2),
    ("g5", "train", "minNodes", 2),
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
    ("dev", "train", "nodeGroup", TWIN),
    # a command job, after the pytorch job
    ("dev", "evaluate", "nodes", 2),
    ("dev", "evaluate", "maxRestarts", 5),
    ("dev", "evaluate", "stopGracePeriodSeconds", 120),
    ("dev", "evaluate", "readOnlyRootFilesystem", False),
    ("dev", "evaluate", "timeoutHours", 48),
    ("dev", "evaluate", "waitForCompletion", True),
    ("dev", "evaluate", "purpose", "training"),
    ("dev", "evaluate", "tensorboard", True),
    ("dev", "evaluate", "env", {"EVAL": "1"}),
    ("dev", "evaluate", "command", ["python", "/app/evaluate.py", "--quiet"]),
    ("dev", "evaluate", "nodeGroup", "cpu"),
    # a tensorflow job
    ("tensorflow", "train", "nodes", 1),
    ("tensorflow", "train", "maxRestarts", 5),
    ("tensorflow", "train", "stopGracePeriodSeconds", 120),
    ("tensorflow", "train", "tensorboard", False),
    ("tensorflow", "train", "readOnlyRootFilesystem", False),
    ("tensorflow", "train", "timeoutHours", 48),
    ("tensorflow", "train", "waitForCompletion", True),
    ("tensorflow", "train", "purpose", "evaluation"),
    ("tensorflow", "train", "nodeGroup", TWIN),
    # MPI jobs: changed in place, restarted by Kueue
    ("mpi-horovod", "horovod", "nodes", 1),
    ("mpi-horovod", "horovod", "maxRestarts", 5),
    ("mpi-horovod", "horovod", "stopGracePeriodSeconds", 120),
    ("mpi-horovod", "horovod", "timeoutHours", 48),
    ("mpi-horovod", "horovod", "readOnlyRootFilesystem", True),
    ("mpi-horovod", "horovod", "tensorboard", True),
    ("mpi-horovod", "horovod", "waitForCompletion", True),
    ("mpi-horovod", "horovod", "purpose", "evaluation"),
    ("mpi-horovod", "horovod", "nodeGroup", TWIN),
    ("mpi-horovod", "nccl", "launcherCommand", ["python3", "-c", "print('launched')"]),
    ("mpi-horovod", "nccl", "image", "horovod"),
]

#: Job keys no case above changes, and why: each is in the run recipe (:func:`stacks.plan.run_recipe`), so a change is
#: a new run, named with the recipe's words (tests/unit/test_plan.py ties the recipe's keys to them), and a new run's
#: output folder is in its object's pod template. A case would need more than the one key changed.
ELSEWHERE = {
    "kind": "a new run; another kind needs other keys (script or command)",
    "code": "a new run; a code folder needs files beside the stack file",
    "dataset": "a new run; another dataset needs its own entry under datasets",
    "after": "a new run; a job's args name the output folders of the jobs it waits for",
}


def _requeued(before: Registration, after: Registration) -> list[str]:
    """What Kueue compares of an MPIJob's pod sets that differs: each role's count, containers, init containers."""
    out = []
    old, new = before.inputs["spec"]["mpiReplicaSpecs"], after.inputs["spec"]["mpiReplicaSpecs"]
    for role in sorted(set(old) | set(new)):
        a, b = old.get(role) or {}, new.get(role) or {}
        if a.get("replicas") != b.get("replicas"):
            out.append(f"{role}.replicas")
        for part in ("containers", "initContainers"):
            if at(a, f"template.spec.{part}") != at(b, f"template.spec.{part}"):
                out.append(f"{role}.{part}")
    return out


def _job_objects(registrations: list[Registration], jobs: set[str]) -> dict[str, Registration]:
    """The Job or MPIJob of each configured job (named as the job)."""
    return {
        r.inputs["metadata"]["name"]: r
        for r in registrations
        if r.type in JOB_OBJECT_TYPES and r.inputs["metadata"]["name"] in jobs
    }


def restarted(before: list[Registration], after: list[Registration], jobs: set[str]) -> dict[str, list[str]]:
    """Job -> the paths for which its object is replaced (absent: it is changed in place, or not at all). An MPIJob
    that Kueue would requeue in place fails here: its launcher would run the old spec; so does any object changed in
    place that the apiserver would refuse (:func:`tests.update_rules.refused_updates`)."""
    refused = refused_updates(before, after)
    assert not refused, f"the apiserver refuses these updates, and `pulumi up` would fail there: {refused}"
    old, new = _job_objects(before, jobs), _job_objects(after, jobs)
    out = {}
    for name in old.keys() & new.keys():
        why = replaced_by(old[name], new[name])
        if not why and new[name].type.endswith(":MPIJob"):
            assert not _requeued(old[name], new[name]), f"{name}: Kueue requeues it in place, not replaced"
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
    elif key == "nodeGroup" and value == TWIN:
        groups = config["eks-training:nodeGroups"]
        group = spec.get("nodeGroup") or next(iter(groups))
        groups[TWIN] = copy.deepcopy(groups[group])
        for other in config["eks-training:jobs"].values():  # two groups: each job names its own
            other.setdefault("nodeGroup", group)
        spec[key] = TWIN
    else:
        spec[key] = copy.deepcopy(value)
    return config


def test_every_job_key_is_changed_by_a_case_or_shown_elsewhere() -> None:
    keys = {f.alias or name for name, f in JobConfig.model_fields.items()}
    changed = {key for _, _, key, _ in CHANGES}
    assert keys - changed - set(ELSEWHERE) == set(), "add a case to CHANGES (or say where it is shown: ELSEWHERE)"
    assert not changed & set(ELSEWHERE)


#: Keys every kind's object reads, each changed on a job of every kind: changed in place or replacing it.
EVERY_KIND = frozenset({"maxRestarts", "stopGracePeriodSeconds", "timeoutHours", "waitForCompletion", "purpose"})


def test_every_kind_has_a_case_for_each_key_its_object_reads() -> None:
    kind_of = {(s, j): stack_config(s)["eks-training:jobs"][j]["kind"] for s, j, _, _ in CHANGES}
    for kind in KINDS.values():
        cased = {k for s, j, k, _ in CHANGES if kind_of[(s, j)] == kind.name}
        missing = (kind.pod_keys | EVERY_KIND) - cased
        assert not missing, (
            f"{kind.name} jobs: no case in CHANGES for {sorted(missing)}: add one on a job of this kind (and the key "
            "to EVERY_KIND if every kind's object reads it)"
        )


@pytest.mark.parametrize("stack, job, key, value", CHANGES, ids=[f"{s}-{j}-{k}" for s, j, k, _ in CHANGES])
def test_the_summary_names_exactly_the_jobs_the_cluster_restarts(stack: str, job: str, key: str, value: Any) -> None:
    config = _changed(stack, job, key, value)
    program = run_program(stack, config=config)
    assert program.error is None, program.error
    jobs = set(config["eks-training:jobs"])
    before = run_program(stack).registrations
    assert [r.inputs for r in before] != [r.inputs for r in program.registrations], f"{key} = {value!r} changes nothing"
    truth = restarted(before, program.registrations, jobs)
    named = {r.name: r for r in run_changes(_plan(stack, stack_config(stack)), _plan(stack, config))}
    said = [(n, r.action) for n, r in named.items()]
    assert set(named) == set(truth), (
        f"{key} = {value!r}: the cluster restarts {truth}, the summary names {said}. A key the pods read goes in "
        "POD_SETTINGS (stacks/plan/job_changes.py) and the kinds' pod_keys; a key of the run's recipe in run_recipe "
        "(stacks/plan/__init__.py)"
    )
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
        f"or not, once Kueue admits it, in {train}: {KINDS['pytorch'].rerun_text()}" in text
    ), text
    evaluate = _plan("dev", config).jobs["evaluate"].output_dir
    assert (
        f"  job evaluate: stopGracePeriodSeconds changed: its Job is replaced, so its pods start again in the same "
        f"run, finished or not, once Kueue admits it, in {evaluate}: {KINDS['command'].rerun_text()}" in text
    ), text
    assert "pytorch" not in KINDS["command"].rerun_text()
    assert "jobs: none restarts or starts a new run" not in text


def test_an_mpi_job_whose_spec_changes_is_replaced() -> None:
    """An MPIJob is replaced on any change of its spec: the MPI Operator would act on no change of a finished one, nor
    of a running one's launcher."""
    config = _changed("mpi-horovod", "horovod", "stopGracePeriodSeconds", 120)
    report = compare(_plan("mpi-horovod", stack_config("mpi-horovod")), _plan("mpi-horovod", config), old_label="HEAD")
    text = render_upgrade(upgrade_report(report))
    assert (
        "  job horovod: stopGracePeriodSeconds changed: its MPIJob is replaced, so its pods start again in the same "
        "run, finished or not, once Kueue admits it" in text
    ), text
    mpijob = next(r for r in run_program("mpi-horovod").registrations if r.type.endswith(":MPIJob"))
    assert mpijob.replace_on_changes == ["spec"] and mpijob.delete_before_replace


def test_every_kinds_pod_keys_are_settings_the_plan_reads() -> None:
    for kind in KINDS.values():
        assert kind.pod_keys <= POD_SETTINGS.keys(), (kind.name, kind.pod_keys - POD_SETTINGS.keys())


def _group_labels(config: dict[str, Any]) -> None:
    config["eks-training:nodeGroups"]["cpu"]["labels"] = {"workload": "training"}


def _group_taints(config: dict[str, Any]) -> None:
    taint = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
    config["eks-training:nodeGroups"]["cpu"]["taints"] = [taint]


def _group_renamed(config: dict[str, Any]) -> None:
    groups = config["eks-training:nodeGroups"]
    groups["workers"] = groups.pop("cpu")
    for job in config["eks-training:jobs"].values():
        if job.get("nodeGroup") == "cpu":
            job["nodeGroup"] = "workers"


#: Changes of a job's node group, outside the job's keys, each on dev: (id, change).
GROUP_CHANGES = [("labels", _group_labels), ("taints", _group_taints), ("renamed", _group_renamed)]


@pytest.mark.parametrize("change", [c for _, c in GROUP_CHANGES], ids=[i for i, _ in GROUP_CHANGES])
def test_a_change_of_a_jobs_group_restarts_exactly_the_jobs_the_cluster_restarts(change: Any) -> None:
    """A group's new labels or taints, or its new name, change where its jobs' pods go: their objects are replaced,
    and the summary says so, naming ``nodeGroup``."""
    config = stack_config("dev")
    change(config)
    program = run_program("dev", config=config)
    assert program.error is None, program.error
    jobs = set(config["eks-training:jobs"])
    truth = restarted(run_program("dev").registrations, program.registrations, jobs)
    assert "train" in truth, truth
    named = {r.name: r for r in run_changes(_plan("dev", stack_config("dev")), _plan("dev", config))}
    assert set(named) == set(truth), f"the cluster restarts {truth}, the summary names {named}"
    assert named["train"].action == "restarts" and "nodeGroup" in named["train"].reasons, named["train"]


def test_a_renamed_group_restarts_its_jobs_at_once_and_its_deletion_stops_none() -> None:
    """A job moved off a group the update deletes is replaced during the update, before Pulumi deletes the old group
    at its end: the summary says the restart, not a stop with the old group's nodes."""
    config = stack_config("dev")
    _group_renamed(config)
    report = compare(_plan("dev", stack_config("dev")), _plan("dev", config), old_label="HEAD")
    text = render_upgrade(upgrade_report(report))
    assert "  nodeGroups.cpu goes:" in text, text
    assert "job train: stopped" not in text, text
    assert "  job train: nodeGroup (or that group's labels, taints or zone) changed: its Job is replaced" in text, text


#: A prebuilt image for nccl-tests (its Open MPI's folder given).
NCCL_PREBUILT = {"prebuilt": "123456789012.dkr.ecr.us-east-1.amazonaws.com/nccl@sha256:" + "3" * 64}


def _dataset_moved(config: dict[str, Any]) -> None:
    config["eks-training:datasets"]["cifar10"]["path"] = "datasets/cifar"


def _nccl_prebuilt(prefix: str) -> Any:
    def change(config: dict[str, Any]) -> None:
        config["eks-training:images"]["nccl-tests"] = {**NCCL_PREBUILT, "mpiPrefix": prefix}

    return change


#: Changes outside the jobs' keys that their pods read: (id, stack, the old configuration's change, the new one's,
#: the key the summary names).
OUTSIDE_CHANGES = [
    (
        "dataset-path",
        "dev",
        None,
        _dataset_moved,
        "the folder of dataset cifar10 (DATA_DIR /data/datasets/cifar10 -> /data/datasets/cifar)",
    ),
    (
        "mpi-prefix",
        "mpi-horovod",
        _nccl_prebuilt("/opt/amazon/openmpi"),
        _nccl_prebuilt("/opt/hpcx/ompi"),
        "images.nccl-tests.mpiPrefix",
    ),
]


@pytest.mark.parametrize(
    "stack, old_change, change, named_key", [c[1:] for c in OUTSIDE_CHANGES], ids=[c[0] for c in OUTSIDE_CHANGES]
)
def test_a_change_outside_a_jobs_keys_restarts_exactly_the_jobs_the_cluster_restarts(
    stack: str, old_change: Any, change: Any, named_key: str
) -> None:
    """A dataset's folder (its pods' ``DATA_DIR``) or an MPI image's ``mpiPrefix`` (its launcher's ``mpirun``) is
    read by the jobs' pods: their objects are replaced, and the summary names them with the key."""
    config = stack_config(stack)
    if old_change is not None:
        old_change(config)
    before = run_program(stack, config=copy.deepcopy(config)) if old_change else run_program(stack)
    old = _plan(stack, copy.deepcopy(config))
    change(config)
    program = run_program(stack, config=config)
    assert program.error is None, program.error
    truth = restarted(before.registrations, program.registrations, set(config["eks-training:jobs"]))
    assert truth, "the change replaces no job"
    named = {r.name: r for r in run_changes(old, _plan(stack, config))}
    assert set(named) == set(truth), f"the cluster restarts {truth}, the summary names {named}"
    assert all(r.action == "restarts" and named_key in r.reasons for r in named.values()), named


#: A new build of the bundled image, as a prebuilt reference (its version is its reference).
NEW_TOOLBOX = "123456789012.dkr.ecr.us-east-1.amazonaws.com/training@sha256:" + "1" * 64
#: Presets with jobs on the bundled image, on images of their own with helpers, and without; dev's evaluate also
#: with an outputDir of its own (its folder kept through a new build).
BUILD_CASES = [("dev", None), ("dev", "evaluate"), ("mpi-horovod", None), ("tensorflow", None)]


@pytest.mark.parametrize("stack, kept", BUILD_CASES, ids=[f"{s}-{k or 'preset'}" for s, k in BUILD_CASES])
def test_a_new_build_of_the_bundled_image_starts_exactly_the_jobs_the_cluster_restarts(
    stack: str, kept: str | None
) -> None:
    """A new build of the bundled image (a new version of the project, an edit of ``training/``) starts again each
    job that runs it (a new run, or in the folder its ``outputDir`` keeps), and restarts in its run each job on
    another image whose helper containers run it (an MPI launcher's wait, a wait for another job). ``pulumi up``
    plans the recorded configuration with the new build, so the record of the last update holds the builds they ran
    (``deployedVersions``), and the folders it exported the old runs'."""
    config = stack_config(stack)
    if kept is not None:
        config["eks-training:jobs"][kept]["outputDir"] = "runs/kept"
    before = (
        run_program(stack, config=copy.deepcopy(config)).registrations if kept else run_program(stack).registrations
    )
    old = _plan(stack, copy.deepcopy(config))
    config.setdefault("eks-training:images", {})[TOOLBOX_IMAGE] = {"prebuilt": NEW_TOOLBOX}
    program = run_program(stack, config=config)
    assert program.error is None, program.error
    truth = restarted(before, program.registrations, set(config["eks-training:jobs"]))
    new = _plan(stack, config)
    # plan --from: the old plan holds the build its revision made
    named = {r.name: r for r in run_changes(old, new)}
    said = [(n, r.action, r.reasons) for n, r in named.items()]
    assert set(named) == set(truth), f"the cluster restarts {truth}, the summary names {said}"
    # pulumi up: the recorded configuration planned with the new build, the record and the folders of the last update
    folders = {n: j.output_dir for n, j in old.jobs.items()}
    on_record = {r.name: r for r in run_changes(new, new, folders, installed_versions(old))}
    assert set(on_record) == set(truth), f"the cluster restarts {truth}, the summary names {on_record}"
    for name, run in on_record.items():
        job = new.jobs[name]
        assert run.action == named[name].action, (run, named[name])
        if job.image.variant != job.toolbox.variant:
            assert helpers(job) and run.action == "restarts", run
            assert run.reasons == (f"the training image its helper containers run ({', '.join(helpers(job))})",)
        else:
            assert run.action == ("same folder" if name == kept else "new run"), run
    if stack == "mpi-horovod":  # both on images of their own: restarted through the launchers' waits
        assert {n: r.action for n, r in on_record.items()} == {"nccl": "restarts", "horovod": "restarts"}
        assert "its wait for nccl" in helpers(new.jobs["horovod"])
    assert not run_changes(new, new, {n: j.output_dir for n, j in new.jobs.items()}, installed_versions(new))
    # the jobs' lines say it, not the lines of what this version of the project moves
    assert not version_moves(installed_versions(old), new, new)


def test_a_record_without_the_builds_names_the_jobs_it_cannot_see() -> None:
    """The first ``pulumi up`` after a version of this project that recorded no builds: a job whose helpers run the
    bundled image (or kept in its folder on it) may start again unseen, and a note names it."""
    config = stack_config("mpi-horovod")
    plan = _plan("mpi-horovod", config)
    record = {k: v for k, v in installed_versions(plan).items() if not k.endswith(BUILD_SUFFIX)}
    report = compare(plan, plan, old_label="the last update", deployed_versions=record)
    assert report.runs == ()
    assert (
        "job(s) nccl, horovod: the last update recorded no build of the images they run (an earlier version of this "
        "project): a new build starts them again in their runs, which this summary cannot see; the preview marks "
        "their objects +- (replace)"
    ) in report.notes, report.notes
    assert not unrecorded_notes(plan, (), installed_versions(plan))
    assert not unrecorded_notes(plan, (), None)  # plan --from: no record
    # dev's jobs run the bundled image without an outputDir: a new build moves their folders, which the summary sees
    dev = stack_config("dev")
    assert unrecorded_notes(_plan("dev", dev), (), {}) == []
    dev["eks-training:jobs"]["evaluate"]["outputDir"] = "runs/kept"  # unless one keeps its folder
    (note,) = unrecorded_notes(_plan("dev", dev), (), {})
    assert note.startswith("job(s) evaluate: "), note
