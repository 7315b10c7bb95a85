"""The Kubernetes side of training that loses nothing (the trainer's side runs for real in
tests/real/test_training_faults_real.py): what every stack's PyTorch jobs and etcd are given, read from what the program
registers, and the exit codes tied to the launcher that produces them."""

import ast
import json
from typing import Any

import pytest

from components.workloads.job_objects import MPI_JOB
from components.workloads.pods import WORKER_CONTAINER
from components.workloads.pytorch import (
    LAUNCHER_DONE_MARKER,
    LAUNCHER_EXIT_RENDEZVOUS_LOST,
    LAUNCHER_EXIT_RUN_FAILED,
    LAUNCHER_EXIT_STOPPED,
    LAUNCHER_EXIT_USAGE,
    SHUTDOWN_MARGIN_S,
    TORCHRUN_MAX_RESTARTS,
)
from components.workloads.spec import DEFAULT_MAX_RESTARTS, DEFAULT_STOP_GRACE_S, USAGE_ERROR_EXIT_CODE
from stacks.box.rehearse import pod_templates
from stacks.config import load_config
from stacks.kinds import KINDS
from stacks.plan import build_plan
from tests.harness import JOB_OBJECT_TYPES, PROJECT, REPO, Program, run_program, stack_config, stack_names
from tests.kube import container_env
from tests.python_source import parse

P = f"{PROJECT}:"
PYTORCH_STACKS = [
    s for s in stack_names() if any(j["kind"] == "pytorch" for j in (stack_config(s).get(P + "jobs") or {}).values())
]


def _constants(path: str) -> dict[str, int | str]:
    """Module-level integer and string constants of a training script, read without importing it."""
    tree = parse((REPO / path).read_text())
    out = {}
    for node in tree.body:
        constant = isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        if constant and isinstance(node.value.value, (int, str)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def test_the_exit_codes_the_job_reacts_to_are_the_launchers() -> None:
    launch = _constants("training/launch.py")
    assert launch["EXIT_STOPPED"] == LAUNCHER_EXIT_STOPPED
    assert launch["EXIT_RENDEZVOUS_LOST"] == LAUNCHER_EXIT_RENDEZVOUS_LOST
    assert launch["EXIT_RUN_FAILED"] == LAUNCHER_EXIT_RUN_FAILED
    assert launch["EXIT_USAGE"] == LAUNCHER_EXIT_USAGE == USAGE_ERROR_EXIT_CODE
    # the local runner's "finished" line reads the launcher's marker
    assert _constants("training/launch_markers.py")["DONE_MARKER"] == LAUNCHER_DONE_MARKER
    # a stopped script's own code (the trainer's, the job contract's) is torchrun's business; the pod reports the
    # launcher's
    assert _constants("training/run_script.py")["EXIT_STOPPED"] not in (0, LAUNCHER_EXIT_STOPPED)


def _pytorch_jobs(p: Program) -> list[Any]:
    """The Jobs of the stack's pytorch jobs (their worker runs torchrun; health checks excluded)."""

    def runs_torchrun(r: Any) -> bool:
        return any(
            c.get("name") == WORKER_CONTAINER and "torchrun" in (c.get("command") or [])
            for c in r.inputs["spec"]["template"]["spec"]["containers"]
        )

    return [
        r
        for r in p.of_type("kubernetes:batch/v1:Job")
        if r.name.endswith("-job") and "-allreduce" not in r.name and runs_torchrun(r)
    ]


def _job_config(stack: str, job_registration_name: str) -> dict[str, Any]:
    jobs = stack_config(stack).get(P + "jobs") or {}
    name = next(n for n in jobs if job_registration_name.endswith(f"-{n}-job"))
    return dict(jobs[name])


@pytest.mark.parametrize("stack", PYTORCH_STACKS)
def test_stops_and_lost_rendezvous_never_count_and_a_run_that_gave_up_fails_the_job(stack: str) -> None:
    p = run_program(stack)
    jobs = _pytorch_jobs(p)
    assert jobs
    for job in jobs:
        rules = job.inputs["spec"]["podFailurePolicy"]["rules"]
        assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
        ignored = next(r for r in rules if r["action"] == "Ignore" and "onExitCodes" in r)
        failing = next(
            r for r in rules if r["action"] == "FailJob" and r["onExitCodes"]["containerName"] == WORKER_CONTAINER
        )
        assert ignored["onExitCodes"] == {
            "containerName": WORKER_CONTAINER,
            "operator": "In",
            "values": sorted([LAUNCHER_EXIT_STOPPED, LAUNCHER_EXIT_RENDEZVOUS_LOST]),
        }
        assert failing["onExitCodes"]["values"] == sorted([LAUNCHER_EXIT_USAGE, LAUNCHER_EXIT_RUN_FAILED])
        # the first matching rule decides: every Ignore comes before any FailJob
        actions = [r["action"] for r in rules]
        assert actions.index("FailJob") > max(i for i, a in enumerate(actions) if a == "Ignore")


@pytest.mark.parametrize("stack", PYTORCH_STACKS)
def test_pytorch_pods_get_their_grace_period_budgets_and_production_rendezvous(stack: str) -> None:
    p = run_program(stack)
    for job in _pytorch_jobs(p):
        cfg = _job_config(stack, job.name)
        pod = job.inputs["spec"]["template"]["spec"]
        (worker,) = [c for c in pod["containers"] if c["name"] == WORKER_CONTAINER]
        env = container_env(worker, index=0)
        grace = cfg.get("stopGracePeriodSeconds", DEFAULT_STOP_GRACE_S)
        assert pod["terminationGracePeriodSeconds"] == grace
        assert env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == str(grace - SHUTDOWN_MARGIN_S)
        # the attempts: the first, then maxRestarts more
        assert env["MAX_FAILED_ATTEMPTS"] == str(cfg.get("maxRestarts", DEFAULT_MAX_RESTARTS) + 1)
        assert ("CHECKPOINT_EVERY_SECONDS" in env) == ("checkpointEverySeconds" in cfg)
        assert ("TENSORBOARD_DIR" in env) == bool(cfg.get("tensorboard"))
        if cfg.get("tensorboard"):
            assert env["TENSORBOARD_DIR"].startswith(env["OUTPUT_DIR"] + "/")
        command = worker["command"]
        assert f"--max-restarts={TORCHRUN_MAX_RESTARTS}" in command and "--monitor-interval=1" in command
        conf = next(a for a in command if a.startswith("--rdzv-conf="))
        assert "last_call_timeout=2" in conf and "keep_alive_interval=1" in conf and "keep_alive_max_attempt=3" in conf


def _grace_problems(p: Program, config: dict[str, Any]) -> list[str]:
    """Each pod template of a configured job's objects (an Indexed Job's, an MPIJob's launcher and workers) whose
    ``terminationGracePeriodSeconds`` is not the job's ``stopGracePeriodSeconds``; and the jobs with no such object."""
    jobs = config.get(P + "jobs") or {}
    problems, seen = [], set()
    for r in p.registrations:
        if r.type not in JOB_OBJECT_TYPES:
            continue
        job = r.inputs["metadata"].get("name")  # a job's object is named as the job
        if job not in jobs:
            continue
        seen.add(job)
        want = jobs[job].get("stopGracePeriodSeconds", DEFAULT_STOP_GRACE_S)
        for template in pod_templates(r.inputs):
            got = template["spec"].get("terminationGracePeriodSeconds")
            if got != want:
                problems.append(f"{r.name}: a pod template's terminationGracePeriodSeconds is {got}, not {want}")
    return problems + [f"{job}: no Job or MPIJob named {job}" for job in sorted(set(jobs) - seen)]


@pytest.mark.parametrize("stack", stack_names())
def test_every_jobs_pods_get_its_stop_grace_period(stack: str) -> None:
    """Every kind's pods: a stopped pod gets the time the job's config gives it (an MPI job's launcher and workers
    had Kubernetes' 30 s whatever the job said)."""
    assert _grace_problems(run_program(stack), stack_config(stack)) == []


def test_an_mpi_jobs_stop_grace_period_reaches_its_launcher_and_workers() -> None:
    cfg = stack_config("mpi-horovod")
    jobs = {name: {**job, "stopGracePeriodSeconds": 300} for name, job in cfg[P + "jobs"].items()}
    cfg[P + "jobs"] = jobs
    p = run_program("mpi-horovod", config=cfg)
    assert p.error is None, p.error
    mpijobs = p.of_type(MPI_JOB.type_token)
    assert mpijobs and _grace_problems(p, cfg) == []
    assert {t["spec"]["terminationGracePeriodSeconds"] for r in mpijobs for t in pod_templates(r.inputs)} == {300}


def test_job_settings_reach_the_pods() -> None:
    cfg = stack_config("dev")
    train = dict(cfg[P + "jobs"]["train"])
    train.update(maxRestarts=7, checkpointEverySeconds=120, collectiveTimeoutSeconds=90, stopGracePeriodSeconds=300)
    cfg[P + "jobs"] = {**cfg[P + "jobs"], "train": train}
    p = run_program("dev", config=cfg)
    assert p.error is None, p.error
    (job,) = [j for j in _pytorch_jobs(p) if j.name.endswith("-train-job")]
    pod = job.inputs["spec"]["template"]["spec"]
    env = container_env(pod["containers"][0], index=0)
    assert pod["terminationGracePeriodSeconds"] == 300
    assert (
        env["MAX_FAILED_ATTEMPTS"],
        env["CHECKPOINT_EVERY_SECONDS"],
        env["PG_TIMEOUT_SECONDS"],
        env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"],
    ) == ("8", "120", "90", "285")


@pytest.mark.parametrize("stack", PYTORCH_STACKS)
def test_etcd_keeps_its_data_on_the_shared_claim(stack: str) -> None:
    """Rescheduled etcd comes back with the rendezvous it had: its data is on the shared ReadWriteMany claim (one
    member, Recreate: never two writers), owned by the volume's user, without fsGroup (no walk of the volume)."""
    p = run_program(stack)
    uses_etcd = any(
        j.get("kind") == "pytorch" and j.get("rendezvousBackend", "etcd-v2") == "etcd-v2"
        for j in (stack_config(stack).get(P + "jobs") or {}).values()
    )
    etcd = [d for d in p.of_type("kubernetes:apps/v1:Deployment") if d.name.endswith("-etcd-deployment")]
    assert bool(etcd) == uses_etcd
    if not etcd:
        return
    (deployment,) = etcd
    spec = deployment.inputs["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v
    }
    training_claims = {
        v["persistentVolumeClaim"]["claimName"]
        for j in _pytorch_jobs(p)
        for v in j.inputs["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert set(claims.values()) == training_claims and len(training_claims) == 1
    (c,) = pod["containers"]
    data = next(a.split("=", 1)[1] for a in c["args"] if a.startswith("--data-dir="))
    mount = next(m for m in c["volumeMounts"] if m["name"] in claims)
    assert data.startswith(mount["mountPath"] + "/etcd/")
    assert pod["securityContext"]["runAsUser"] == 1000 and "fsGroup" not in pod["securityContext"]


@pytest.mark.parametrize("stack", stack_names())
def test_a_jobs_run_id_reaches_its_pods_only_where_its_kind_says(stack: str) -> None:
    """:attr:`stacks.kinds.JobKind.run_in_pods` says whose pods carry the run id (besides its output folder's name):
    the upgrade summary reads it to say whether an ``outputDir`` set to the running folder replaces the job."""
    plan = build_plan(load_config(PROJECT, stack, stack_config(stack), project_dir=REPO))
    carried = {}
    for r in run_program(stack).registrations:
        job = plan.jobs.get(r.inputs.get("metadata", {}).get("name"))
        if job is None or r.type not in JOB_OBJECT_TYPES:
            continue
        folder = job.output_dir.removeprefix("/data/")
        carried[job.name] = job.run_id in json.dumps(r.inputs).replace(folder, "")
    assert carried == {name: KINDS[job.kind].run_in_pods for name, job in plan.jobs.items()}
