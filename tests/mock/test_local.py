"""The local runner starts what the pods run: for every job of every stack whose images are built from this
repository, each local process's command and environment equal the registered pod's (expanded as Kubernetes expands
them, with the pod's paths mapped to the local folders), except what only the machine decides: peers' addresses,
ports, the rendezvous endpoint, processes (one per node on CPU, not one per GPU) and threads per process, and the node
type's GPU/EFA settings."""

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from components.workloads.pods import COMPLETION_INDEX_ENV
from stacks.config import load_config
from stacks.kinds import KINDS
from stacks.local.cli import main as local_main
from stacks.local.kube import container_env, process_argv
from stacks.local.report import LocalRunError
from stacks.local.runner import LocalRunner, local_mpi_prefix
from stacks.plan import build_plan
from stacks.stackfile import project_name, read_stack_config
from tests.harness import REPO, Program, run_program, stack_names

#: What the machine decides, not the stack.
MACHINE = {
    "PROCS_PER_NODE",
    "OMP_NUM_THREADS",
    "JOB_PEERS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TF_CONFIG",
    "NCCL_DEBUG",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "OMPI_ALLOW_RUN_AS_ROOT",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
}


def _runner(stack: str, work: Path) -> LocalRunner:
    path, config = read_stack_config(stack)
    plan = build_plan(load_config(project_name(path), stack, config))
    return LocalRunner(plan=plan, work=work, repo=REPO, rendezvous_endpoint="127.0.0.1:2379")


def _pod_spec(p: Program, job: str, kind: str) -> dict[str, Any]:
    """The spec of a job's pods as registered (the launcher's, for an MPI job)."""
    if kind == "mpi":
        mpi = p.one("kubernetes:kubeflow.org/v2beta1:MPIJob", lambda r: r.name.endswith(f"-{job}-mpijob"))
        return dict(mpi.inputs["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"])
    k8s_job = p.one("kubernetes:batch/v1:Job", lambda r: r.name.endswith(f"-{job}-job"))
    return dict(k8s_job.inputs["spec"]["template"]["spec"])


def _registered(p: Program, job: str, kind: str) -> dict[str, Any]:
    """The main container of a job's pods as registered (the launcher's, for an MPI job)."""
    (c,) = [c for c in _pod_spec(p, job, kind)["containers"] if kind == "mpi" or c["name"] == "worker"]
    return dict(c)


@pytest.mark.parametrize("stack", stack_names())
def test_local_processes_get_the_pods_commands_and_environments(stack: str, tmp_path: Path) -> None:
    runner = _runner(stack, tmp_path)
    p = run_program(stack)
    compared = 0
    for name, job in runner.plan.jobs.items():
        if job.image.context is None:
            continue
        pods = runner.pods(job)
        container = _registered(p, name, job.kind)
        app = runner.image_dir(job)
        for pod in pods:
            tmp = tmp_path / "tmp" / f"{name}-{pod.index}"
            pod_env = container_env(container, index=pod.index)
            if KINDS[job.kind].indexed_pods:  # the Job controller's own variable (not in the registered template)
                pod_env[COMPLETION_INDEX_ENV] = str(pod.index)
            expected_env = {k: runner.host_path(v, app, tmp) for k, v in pod_env.items()}
            # stopped (Ctrl-C, a failed peer), a process gets the time its pod would
            assert pod.grace_s == _pod_spec(p, name, job.kind)["terminationGracePeriodSeconds"], name
            node_type = set(job.placement.get("env") or {})
            assert set(pod.env) - MACHINE == set(expected_env) - MACHINE - node_type, name
            for key, value in pod.env.items():
                if key not in MACHINE:
                    assert value == expected_env[key], f"{stack}/{name}: {key}"
            expected_argv = [runner.host_path(a, app, tmp) for a in process_argv(container, pod_env)]
            if job.kind == "pytorch":

                def same(argv: list[str]) -> list[str]:
                    return [
                        a
                        for a in argv
                        if not a.startswith(("--rdzv-endpoint=", "--nproc-per-node="))
                        and not a.startswith(("127.0.0.1:", f"{runner.plan.config.cluster_name}-etcd"))
                        and ".svc.cluster.local:" not in a
                    ]

                assert same(pod.argv) == same(expected_argv), name
                assert f"--nproc-per-node={job.config.processes_per_node or 1}" in pod.argv
            elif job.kind == "mpi":
                # the local Open MPI's mpirun, by its absolute path as the pods run the image's
                image_mpirun, here = f"{job.image.mpi_prefix}/bin/mpirun", f"{local_mpi_prefix()}/bin/mpirun"
                assert image_mpirun in expected_argv and here in pod.argv
                assert pod.argv[0] == (here if expected_argv[0] == image_mpirun else expected_argv[0])
            else:
                assert pod.argv == expected_argv, name
            compared += 1
    jobs = [j for j in runner.plan.jobs.values() if j.image.context is not None]
    assert compared == sum(1 if j.kind == "mpi" else j.nodes for j in jobs)


def test_pod_paths_map_to_local_folders_once(tmp_path: Path) -> None:
    """/data, /app and /tmp become local folders in one pass (a mapped folder under /tmp is not mapped again),
    and only as whole path segments."""
    runner = _runner("dev", tmp_path / "tmp" / "work")
    app, tmp = Path("/repo/training"), tmp_path / "pod-tmp"
    assert runner.host_path("/data/runs/x", app, tmp) == f"{tmp_path}/tmp/work/shared/runs/x"
    assert (
        runner.host_path("--logdir_spec train:/data/runs/x/tb", app, tmp)
        == f"--logdir_spec train:{tmp_path}/tmp/work/shared/runs/x/tb"
    )
    assert runner.host_path("/app/train.py", app, tmp) == "/repo/training/train.py"
    assert runner.host_path("/tmp", app, tmp) == str(tmp)
    assert runner.host_path("/database/x /apple /tmpfiles", app, tmp) == "/database/x /apple /tmpfiles"


def test_nodes_outside_an_elastic_jobs_range_are_said_and_kept_within_it(tmp_path: Path) -> None:
    """``--nodes 5`` for workshop's train (1-2 nodes): two processes stand for its pods, and the runner says why;
    ``--nodes 1`` is within the range and says nothing."""
    runner = _runner("workshop", tmp_path)
    job = runner.plan.jobs["train"]
    assert (job.min_nodes, job.max_nodes) == (1, 2)
    for asked, processes, said in ((5, 2, True), (1, 1, False)):
        runner.out, runner.nodes = io.StringIO(), asked
        assert len(runner.pods(job)) == processes
        notice = f"[local] job train: --nodes {asked} is outside its range (1-2 nodes, minNodes and maxNodes): "
        assert (notice in runner.out.getvalue()) is said, runner.out.getvalue()


def test_a_dataset_no_job_reads_is_refused_naming_the_stacks_datasets(tmp_path: Path) -> None:
    """``--dataset cifar=PATH`` on dev, whose jobs read ``cifar10``: a typo would otherwise leave the real dataset to
    be downloaded (or fail to stage), with the given folder never used."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = local_main(["--stack", "dev", "--work", str(tmp_path / "work"), "--dataset", f"cifar={tmp_path}"])
    assert code == 2, err.getvalue()
    assert "error: --dataset cifar: no job of this stack reads such a dataset; its datasets: cifar10" in err.getvalue()
    assert not (tmp_path / "work").exists()


def test_a_job_run_alone_is_told_when_the_job_it_waits_for_has_not_run_here(tmp_path: Path) -> None:
    """``--job evaluate`` on dev in an empty work folder: evaluate reads train's folder, which does not exist yet, so
    the runner says to run train first; once train's folder is there, or with train in the run, it says nothing."""
    runner = _runner("dev", tmp_path)
    assert runner.waits_left_out(["evaluate"]) == [
        "note: job evaluate waits for train (its after), which --job leaves out, and train's output folder is not "
        "here yet: run --job train first"
    ]
    assert runner.waits_left_out(["train", "evaluate"]) == []
    Path(runner.host_path(runner.plan.jobs["train"].output_dir, REPO, tmp_path)).mkdir(parents=True)
    assert runner.waits_left_out(["evaluate"]) == []


def test_a_failures_report_shows_the_scripts_last_words_not_the_agents_info_lines(tmp_path: Path) -> None:
    """A script that fails on its arguments, then torchrun's INFO lines, a C++ exception's stack frames (c10d's store
    going away as the ranks end) and the launcher's event: the report's end of the log is the script's error (and
    torchrun's warnings), not the lines that came after it."""
    log = tmp_path / "fit-0.log"
    agent = "I1203 14:10:16.404000 20076 torch/distributed/elastic/agent/server/api.py:553]   global_ranks=[2, 3]"
    log.write_text(
        "\n".join(
            [
                "usage: fit.py [-h] [--lr LR]",
                "fit.py: error: unrecognized arguments: --epochs 3",
                "W1203 14:10:16.500000 20076 torch/distributed/run.py:1] a warning stays",
                *[agent] * 30,
                "Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:670 (most recent "
                "call first):",
                *[f"frame #{i}: <unknown function> + 0x{i:x}a3f (0x7f0 in libtorch_cpu.so)" for i in range(20)],
                '{"event": "command_exit", "component": "launch", "exit_code": 3}',
            ]
        )
        + "\n"
    )
    report = LocalRunError("fit process 0 exited 3", fix="fix the cause", log=log).report(lines=5)
    shown = report.split("left out):\n", 1)[1].splitlines()
    assert shown == [
        "  usage: fit.py [-h] [--lr LR]",
        "  fit.py: error: unrecognized arguments: --epochs 3",
        "  W1203 14:10:16.500000 20076 torch/distributed/run.py:1] a warning stays",
    ], report


def test_a_pods_process_gets_no_pythonpath_of_the_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tutorials export PYTHONPATH (this project's folder, for ``python -m stacks`` elsewhere); a pod has its
    image's environment, so a local pod's process starts without it, where a job would import what its image lacks.
    The pod's own PYTHONPATH, where it sets one, stays; the rest of the shell's environment too."""
    from stacks.local.processes import Pod, process_env

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("EKS_TRAINING_TEST_MARK", "kept")
    pod = Pod("train", 0, ["python", "-c", ""], {"RANK": "0"}, tmp_path, tmp_path / "train-0.log")
    env = process_env(pod)
    assert "PYTHONPATH" not in env and env["EKS_TRAINING_TEST_MARK"] == "kept" and env["RANK"] == "0"
    assert process_env(Pod("t", 0, [], {"PYTHONPATH": "/app"}, tmp_path, tmp_path / "l"))["PYTHONPATH"] == "/app"


@pytest.mark.parametrize("fresh", [False, True], ids=["resumed", "resumed and started over"])
def test_resuming_a_finished_run_with_args_says_they_reach_nothing_unless_it_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: bool
) -> None:
    """``--resume train --args ...`` on a finished run of dev's ``train`` (the training image's launcher skips it)
    says the arguments reach nothing; with ``--fresh train`` too, the run starts over and takes them: no such line."""
    work = tmp_path / "work"
    run = work / "shared" / "runs" / "train-old"
    run.mkdir(parents=True)
    (run / "DONE").write_text("{}\n")
    (work / "runs.json").write_text(json.dumps({"train": {"outputDir": "runs/train-old"}}))
    said: list[str] = []
    monkeypatch.setattr(LocalRunner, "say", lambda self, text: said.append(text))
    monkeypatch.setattr(LocalRunner, "run", lambda self, jobs=None: None)  # what is said before the jobs start
    argv = ["--stack", "dev", "--work", str(work), "--job", "train", "--resume", "train", "--args", "train=--epochs 9"]
    with contextlib.redirect_stderr(io.StringIO()) as err:
        code = local_main(argv + (["--fresh", "train"] if fresh else []))
    assert code == 0, err.getvalue()
    told = [line for line in said if line.startswith("--resume train: its run in")]
    if fresh:
        assert not told, said
    else:
        assert len(told) == 1 and "--args do not reach it" in told[0], said


def test_a_run_that_gave_up_names_its_last_error() -> None:
    """A run that wrote FAILED (its script failed attempt after attempt) gives the launcher's reason and the script's
    last exception, the line that says what to fix, on the report's one line."""
    from stacks.local.report import failure

    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/workspace/mlp.py", line 3, in <module>',
            "RuntimeError: crash on purpose at step 10",
            '{"event": "command_exit", "component": "launch", "exit_code": 3, "failed": {"reason": "the script failed '
            '4 attempts in a row"}}',
        ]
    )
    reason, fix = failure(log, 3, "torchrun", "mlp")
    assert reason == (
        "the run gave up: the script failed 4 attempts in a row; its last error: RuntimeError: crash on purpose at "
        "step 10"
    ), reason
    assert fix.startswith("find the cause (earlier in the log"), fix


def test_the_last_error_is_the_scripts_own_not_a_peers_loss() -> None:
    """A rank that fails because another went away logs the peer's loss after the real error: the report names the
    real one (the loss is training/run_script.py's PEER_LOSS, which the report's list repeats)."""
    from stacks.local import report

    run_script = (REPO / "training" / "run_script.py").read_text()
    assert all(f'"{p}"' in run_script for p in report._PEER_LOSS)
    lines = [
        "ValueError: bad shape at step 3",
        "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer",
    ]
    assert report.exception_line(lines) == "ValueError: bad shape at step 3"
