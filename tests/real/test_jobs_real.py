"""The job kinds with real processes on 127.0.0.1, each started with the environment and command line our
components put in its pods, built by the same functions (only the peers' addresses differ: 127.0.0.1 and free
ports instead of the pods' stable hostnames), turned into what the process gets by :mod:`tests.kube`
(Kubernetes' ``$(VAR)`` expansion and the Indexed Job's downward-API index).

* ``tensorflow``: the tensorflow preset's job as the local runner starts it (``python -m stacks.local --venv
  tensorflow=.venv-tf``): ``images/tensorflow/train_tf.py`` as 2 real TensorFlow workers (``TF_CONFIG`` from
  :func:`~components.workloads.tensorflow.tensorflow_env`) on the digits in CIFAR-10 format, in one run: a worker
  lost mid-training makes the other exit, both restarted resume from the ``BackupAndRestore`` backup and finish
  with identical weights.
* ``mpi``: the launcher's command from :func:`~components.workloads.mpi.mpi_launcher` run by Debian's OpenMPI
  ``mpirun`` (2 ranks on 127.0.0.1; the test writes the hostfile, as the operator does): ``nccl_report.py``
  wrapping ``mpirun`` wrapping ``allreduce_bench.py``, a real gloo all-reduce whose bandwidth is reported.
* ``command``: 2 processes with the pods' environment (:func:`~components.workloads.command.command_env`) do an
  all-reduce through ``torch.distributed``'s ``env://``.
* TensorBoard: the real ``tensorboard`` with the component's command line (:func:`tensorboard_command`) over
  event files written with PyTorch's ``SummaryWriter`` under the trainer's scalar names, and the TensorFlow
  trainer's own logs; its HTTP API returns the scalars.

Missing tools (``mpirun``, TensorFlow, TensorBoard) fail the tests, never skip them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from components.workloads.command import command_env
from components.workloads.mpi import mpi_launcher
from components.workloads.pods import camel, env_list
from components.workloads.spec import JobSpec, WorkerPlacement
from components.workloads.tensorboard import tensorboard_command
from stacks.local.processes import Pod as LocalPod
from stacks.local.processes import process_env as local_process_env
from stacks.ports import free_port
from tests import training_support as ts
from tests.kube import container_env, process_argv
from tests.wait import patient, wait_for

REPO = Path(__file__).resolve().parents[2]
TRAIN_TF = REPO / "images" / "tensorflow" / "train_tf.py"
NCCL_REPORT = REPO / "images" / "nccl-tests" / "nccl_report.py"
ALLREDUCE_BENCH = ts.TRAINING_DIR / "allreduce_bench.py"
#: A user's program for a command job (its code, downloaded into the working folder).
PEERS_PROGRAM = REPO / "tests" / "programs" / "peers_allreduce.py"
#: A CPU node of one process with one thread (2 cores here: two "pods" side by side).
PLACEMENT: WorkerPlacement = {
    "node_selector": {},
    "tolerations": [],
    "cpu_millis": 1000,
    "memory_mib": 4096,
    "gpus": 0,
    "efa_devices": 0,
    "shm_mib": 1024,
    "procs_per_node": 1,
    "threads_per_proc": 1,
}
#: Variables of this test process that would change what the started processes do.
_FOREIGN_ENV = (
    "TF_CONFIG",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "JOB_INDEX",
    "OUTPUT_DIR",
    "DATA_DIR",
)
TF_RUN_TIMEOUT = 240.0
#: The survivor of a lost TensorFlow worker exits within this (the coordination service's heartbeats: 6-13 s).
LOST_PEER_EXIT_SECONDS = 60.0
TF_ARGS = ["--epochs", "3", "--batch-size", "32"]


# --------------------------------------------------------------------------- #
# A pod's process on this machine
# --------------------------------------------------------------------------- #
@dataclass
class PodProcess:
    """What the kubelet would start for one pod: argv and environment after Kubernetes' expansion."""

    argv: list[str]
    env: dict[str, str]


def pod_process(
    command: Sequence[str],
    env: Mapping[str, Any],
    *,
    index: Optional[int] = None,
    local: Optional[Mapping[str, str]] = None,
) -> PodProcess:
    """The container our components build (``env_list``, camelCase as sent to the API server) and what its
    process gets: with ``index``, the Indexed Job's ``JOB_INDEX`` first and ``$(JOB_INDEX)`` expanded.
    ``local`` maps the image's paths (``/app/x.py``) to this repository's files."""
    container = camel({"command": list(command), "env": env_list(env, with_index=index is not None)})
    penv = container_env(container, index=index)
    argv = [(local or {}).get(a, a) for a in process_argv(container, penv)]
    return PodProcess(argv, penv)


def process_env(pod_env: Mapping[str, str]) -> dict[str, str]:
    """This machine's environment (PATH with the venv first, so ``python`` is the image's Python stand-in)
    under the pod's environment."""
    base = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    base["PATH"] = f"{ts.VENV_BIN}:{base.get('PATH', '/usr/bin:/bin')}"
    return {**base, **pod_env}


def tensorflow_bin() -> Path:
    """The ``bin`` folder of ``.venv-tf``: the TensorFlow example image's packages (requirements-tf.txt), apart from
    this venv as the images are apart. A missing one fails the test."""
    bin_dir = REPO / ".venv-tf" / "bin"
    assert (bin_dir / "python").exists(), (
        f"{bin_dir}/python not found: python3 -m venv .venv-tf && .venv-tf/bin/pip install -r requirements-tf.txt "
        "(.ci/run does)"
    )
    return bin_dir


def start(pod: PodProcess, log: Path, cwd: Path, extra_env: Optional[Mapping[str, str]] = None) -> ts.ManagedProcess:
    """Start the pod's process (its own process group, output in ``log``)."""
    return ts.ManagedProcess(pod.argv, log, env={**process_env(pod.env), **(extra_env or {})}, cwd=cwd)


@pytest.fixture()
def procs() -> Iterator[list[ts.ManagedProcess]]:
    """Processes a test started; all are stopped at its end, whatever happened."""
    started: list[ts.ManagedProcess] = []
    yield started
    for proc in started:
        proc.kill()


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits in CIFAR-10's on-disk format (the staged dataset's folder)."""
    return ts.make_digits_cifar(tmp_path_factory.mktemp("digits"))


# --------------------------------------------------------------------------- #
# tensorflow
# --------------------------------------------------------------------------- #
def tf_workers(data: Path, work: Path, args: Sequence[str] = TF_ARGS) -> tuple[Path, list[LocalPod]]:
    """The tensorflow preset's ``train`` job (``TF_CONFIG`` from ``tensorflow_env``) as ``python -m stacks.local
    --venv tensorflow=.venv-tf`` starts it, ``data`` standing for its dataset: (its output folder, its two pods)."""
    runner, job = ts.local_job(
        "tensorflow",
        "train",
        work,
        datasets={"cifar10": data},
        args=args,
        venvs={"tensorflow": tensorflow_bin().parent},
    )
    out = Path(runner.host_path(job.output_dir, runner.image_dir(job), runner.work))
    out.mkdir(parents=True, exist_ok=True)
    return out, runner.pods(job)


def start_pod(pod: LocalPod, log: Path) -> ts.ManagedProcess:
    """Start a pod the local runner built, as the runner starts it (:func:`stacks.local.processes.process_env`)."""
    return ts.ManagedProcess(pod.argv, log, env=local_process_env(pod), cwd=pod.cwd)


def tf_events(proc: ts.ManagedProcess, name: str) -> list[dict[str, Any]]:
    """One worker's JSON events called ``name``."""
    return [e for e in ts.json_events(proc.output()) if e.get("event") == name]


def assert_tf_success(workers: list[ts.ManagedProcess], out: Path, epochs: int) -> dict[str, Any]:
    """Both workers exited 0 with the same final weights; the chief's summary and model exist."""
    codes = ts.wait_all(workers, patient(TF_RUN_TIMEOUT))
    logs = "\n".join(f"--- worker {i}\n{w.output()[-3000:]}" for i, w in enumerate(workers))
    assert codes == [0, 0], logs
    reports = [json.loads((out / f"worker-{i}.json").read_text()) for i in range(2)]
    assert [r["index"] for r in reports] == [0, 1] and {r["workers"] for r in reports} == {2}
    assert reports[0]["weights_sha256"] == reports[1]["weights_sha256"], "synchronous training: identical weights"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workers"] == 2 and summary["epochs"] == epochs
    assert summary["weights_sha256"] == reports[0]["weights_sha256"]
    assert summary["global_batch"] == 64 and summary["steps_per_epoch"] == 1500 // 64
    assert (out / "model.keras").stat().st_size > 100_000
    assert not list(out.glob("workertemp*")) and not list((out / "backup").glob("workertemp*"))
    return summary


@dataclass
class TfRun:
    """One run of the tensorflow preset's job through a lost worker (shared by the tests that read it): the two
    workers train; worker 1 is lost mid-training (stopped, its connections left open: a node gone) and the other
    exits; the Job's replacement pods resume from the ``BackupAndRestore`` backup and finish."""

    out: Path
    first: list[ts.ManagedProcess]
    """The first attempt's workers (worker 1 lost)."""
    survivor_code: int
    """Worker 0's exit code once worker 1 was lost."""
    survivor_exit_s: float
    """Seconds from the loss to worker 0's exit."""
    workers: list[ts.ManagedProcess]
    """The replacement pods, which finished the run."""
    summary: dict[str, Any]
    """The chief's ``summary.json``."""

    def chief_losses(self) -> dict[int, float]:
        """The chief's loss per epoch across both attempts (a later attempt's value wins)."""
        return {e["epoch"]: e["loss"] for w in (self.first[0], self.workers[0]) for e in tf_events(w, "epoch")}


@pytest.fixture(scope="module")
def tf_run(tmp_path_factory: pytest.TempPathFactory, digits: Path) -> Iterator[TfRun]:
    """Two real TensorFlow workers train 3 epochs on 127.0.0.1, losing one after the first epoch's backup."""
    work = tmp_path_factory.mktemp("tf")
    out, pods = tf_workers(digits, work)
    first = [start_pod(pod, work / f"worker-{i}.log") for i, pod in enumerate(pods)]
    started = list(first)
    backup = out / "backup" / "chief" / "checkpoint"

    def backed_up() -> bool:
        for w in first:
            assert w.poll() is None, f"a worker exited before the backup:\n{w.output()[-3000:]}"
        # every worker's first epoch logged, not only the chief's: the other prints its line a moment later, so
        # wait for it before comparing
        return backup.is_file() and all(tf_events(w, "epoch") for w in first)

    try:
        wait_for(backed_up, patient(TF_RUN_TIMEOUT), interval=0.1, what="the first epoch's backup")
        first[1].signal_group(signal.SIGSTOP)  # lost without closing its connections
        lost = time.monotonic()
        code = first[0].wait(timeout=patient(120))
        survivor_exit_s = time.monotonic() - lost
        first[1].signal_group(signal.SIGKILL)  # the Job replaces both pods
        first[1].kill()
        # the replacement pods: the same hostnames (here: the same ports), the same command and environment
        again = [start_pod(pod, work / f"worker-{i}-restarted.log") for i, pod in enumerate(pods)]
        started.extend(again)
        summary = assert_tf_success(again, out, epochs=3)
        yield TfRun(out, first, code, survivor_exit_s, again, summary)
    finally:
        for w in started:
            w.kill()


def test_tensorflow_workers_get_the_pods_tf_config(digits: Path, tmp_path: Path) -> None:
    out, pods = tf_workers(digits, tmp_path)
    peers = json.loads(pods[0].env["TF_CONFIG"])["cluster"]["worker"]
    assert len(peers) == 2 and all(p.startswith("127.0.0.1:") for p in peers) and len(set(peers)) == 2
    for index, pod in enumerate(pods):
        config = json.loads(pod.env["TF_CONFIG"])
        assert config == {"cluster": {"worker": peers}, "task": {"type": "worker", "index": index}}
        assert pod.env["JOB_INDEX"] == str(index) and pod.env["TF_USE_LEGACY_KERAS"] == "1"
        assert pod.env["OUTPUT_DIR"] == str(out)
        assert pod.env["DATA_DIR"] == str(tmp_path / "shared" / "datasets" / "cifar10")
        assert pod.argv == ["python", str(TRAIN_TF), "--epochs", "10", "--batch-size", "128", *TF_ARGS]
        assert pod.bin_dir == tensorflow_bin() and local_process_env(pod)["PATH"].startswith(f"{tensorflow_bin()}:")


def test_tensorflow_two_workers_train_in_step(tf_run: TfRun) -> None:
    """Both attempts trained synchronously: the same (all-reduced) metrics on both workers every epoch, and
    identical final weights (``assert_tf_success``); the model learnt the digits."""
    for attempt in (tf_run.first, tf_run.workers):
        per_worker = [[(e["epoch"], e["loss"]) for e in tf_events(w, "epoch")] for w in attempt]
        assert per_worker[0] and per_worker[0] == per_worker[1], per_worker
    for index, worker in enumerate(tf_run.first):
        (begin,) = tf_events(worker, "train_start")
        assert begin["worker"] == index and begin["initial_epoch"] == 0
    losses = tf_run.chief_losses()
    assert sorted(losses) == [0, 1, 2] and losses[2] < losses[0] / 2
    assert tf_run.summary["history"]["accuracy"][-1] > 0.85
    assert tf_run.summary["test_accuracy"] > 0.8, (
        "the model evaluated with its moving averages works on held-out digits"
    )
    assert any((tf_run.out / "tensorboard").rglob("events.out.tfevents.*")), "the chief logs for TensorBoard"


def test_tensorflow_lost_worker_then_restart_resumes_from_backup(tf_run: TfRun) -> None:
    """The survivor of a lost worker exits (the coordination service's heartbeats); the replacement pods restore
    the backup and train only the epochs left."""
    survivor = tf_run.first[0].output()
    assert tf_run.survivor_code != 0 and tf_run.survivor_exit_s < LOST_PEER_EXIT_SECONDS, (
        tf_run.survivor_exit_s,
        survivor[-3000:],
    )
    assert "unhealthy" in survivor or "heartbeat" in survivor.lower()
    (fatal,) = tf_events(tf_run.first[0], "fatal")  # it left at once, without TensorFlow's teardown
    assert fatal["error"].startswith("UnavailableError: "), fatal
    print(f"\n[timing] TensorFlow: worker 1 lost -> worker 0 exited {tf_run.survivor_exit_s:.1f}s later")
    resumed = tf_run.summary["initial_epoch"]
    assert resumed >= 1, "restored from the backup, not from scratch"
    for index, worker in enumerate(tf_run.workers):
        (begin,) = tf_events(worker, "train_start")
        assert begin["worker"] == index and begin["initial_epoch"] == resumed
        assert [e["epoch"] for e in tf_events(worker, "epoch")] == list(range(resumed, 3))
    assert len(tf_run.summary["history"]["loss"]) == 3 - resumed


# --------------------------------------------------------------------------- #
# mpi
# --------------------------------------------------------------------------- #
MPI_RUN_TIMEOUT = 120.0
MPIRUN_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def mpirun_path() -> str:
    """Debian's ``mpirun`` (openmpi-bin); a missing one fails the test."""
    found = shutil.which("mpirun")
    assert found, "mpirun not found: install Debian's openmpi-bin (.ci/run does: apt-get install -y openmpi-bin)"
    return found


def test_mpi_launcher_runs_a_real_allreduce_under_mpirun_and_reports_its_bandwidth(tmp_path: Path) -> None:
    mpirun_path()
    out = tmp_path / "output"
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1 slots=2\n")  # what the operator mounts, for one host of 2 slots
    spec: JobSpec = {
        "job_name": "bench",
        "namespace": "training",
        "pvc_name": "shared",
        "image": "nccl-tests",
        "output_dir": str(out),
        "args": [
            "--max-bytes",
            "4194304",
            "--warmup",
            "2",
            "--iters",
            "5",
            "--expect-world-size",
            "2",
            "--nccl-tests-table",
            "--output-json",
            "$(OUTPUT_DIR)/allreduce.json",
        ],
    }
    launcher = ["python3", "/opt/nccl-report/nccl_report.py", "--output-json", "$(OUTPUT_DIR)/nccl-tests.json", "--"]
    prefix = str(Path(mpirun_path()).parent.parent)  # this machine's Open MPI stands for the image's
    command, env = mpi_launcher(
        spec,
        PLACEMENT,
        nodes=1,
        slots=2,
        program=["python", "/app/allreduce_bench.py"],
        hosts=["127.0.0.1"],
        mpi_prefix=prefix,
        launcher_command=launcher,
        hostfile=str(hostfile),
        port=free_port(),
    )
    pod = pod_process(
        command,
        env,
        local={"/opt/nccl-report/nccl_report.py": str(NCCL_REPORT), "/app/allreduce_bench.py": str(ALLREDUCE_BENCH)},
    )
    mpirun = pod.argv[len(launcher) :]
    assert mpirun[:5] == [f"{prefix}/bin/mpirun", "--hostfile", str(hostfile), "-np", "2"]
    assert mpirun[mpirun.index("--map-by") + 1] == "ppr:2:node"
    assert ["--mca", "btl", "tcp,self"] == mpirun[mpirun.index("btl") - 1 : mpirun.index("btl") + 2], (
        "EFA's MCA options kept"
    )
    assert f"{out}/allreduce.json" in mpirun, "$(OUTPUT_DIR) expanded in the program's arguments"
    assert pod.env["MASTER_ADDR"] == "127.0.0.1"
    # the pods run as UID 1000; OpenMPI refuses root unless told (CI runs as root)
    extra = MPIRUN_AS_ROOT if os.geteuid() == 0 else {}
    launcher_proc = start(pod, tmp_path / "launcher.log", tmp_path, extra)
    try:
        code = launcher_proc.wait(patient(MPI_RUN_TIMEOUT))
    finally:
        launcher_proc.kill()
    text = launcher_proc.output()
    assert code == 0, text[-4000:]

    report = json.loads((out / "nccl-tests.json").read_text())
    assert report["exit_code"] == 0 and report["reason"] == "ok", report
    assert [r["size"] for r in report["results"]] == [1 << 20, 1 << 21, 1 << 22]
    assert report["max_size_bytes"] == 1 << 22 and report["busbw_gbps_at_max_size"] > 0
    assert all(r["in_place_busbw"] > 0 and r["in_place_wrong"] == 0 for r in report["results"])
    assert report["avg_busbw_gbps"] > 0
    # the same measurement as the benchmark's own JSON summary (rank 0, both ranks through mpirun)
    summary = json.loads((out / "allreduce.json").read_text())
    assert summary["launcher"] == "mpirun" and summary["world_size"] == 2 and summary["local_world_size"] == 2
    assert summary["backend"] == "gloo" and summary["correct"] is True and summary["exit_code"] == 0
    assert summary["busbw_at_max_size_gbps"] == pytest.approx(report["busbw_gbps_at_max_size"], abs=1e-4)
    assert summary["avg_busbw_gbps"] == pytest.approx(report["avg_busbw_gbps"], abs=1e-4)
    assert '"event": "nccl_tests_summary"' in text, "nccl_report.py printed its report"


#: A rank of a user's MPI job: writes where it runs, under a name relative to its working folder.
RANK_IN_CODE_FOLDER = (
    "import json, os\n"
    "rank = os.environ['OMPI_COMM_WORLD_RANK']\n"
    "with open(f'rank-{rank}.json', 'w') as f:\n"
    "    json.dump({'cwd': os.getcwd()}, f)\n"
)


def test_mpi_ranks_start_in_the_jobs_code_folder(tmp_path: Path) -> None:
    """A job with code: the launcher's ``mpirun`` (``wdir``, as :class:`~components.workloads.MpiJob` passes
    ``/workspace``) starts every rank in the code's folder, so ``command: [python, ranks.py]`` finds its script. The
    launcher itself starts elsewhere: on the cluster the workers' sshd starts in the image's home."""
    prefix = str(Path(mpirun_path()).parent.parent)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "ranks.py").write_text(RANK_IN_CODE_FOLDER)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("127.0.0.1 slots=2\n")
    spec: JobSpec = {
        "job_name": "ranks",
        "namespace": "training",
        "pvc_name": "shared",
        "image": "horovod",
        "output_dir": str(tmp_path / "output"),
    }
    command, env = mpi_launcher(
        spec,
        PLACEMENT,
        nodes=1,
        slots=2,
        program=["python", "ranks.py"],
        hosts=["127.0.0.1"],
        mpi_prefix=prefix,
        hostfile=str(hostfile),
        port=free_port(),
        wdir=str(workspace),
    )
    launcher = start(
        pod_process(command, env), tmp_path / "launcher.log", tmp_path, MPIRUN_AS_ROOT if os.geteuid() == 0 else {}
    )
    try:
        code = launcher.wait(patient(MPI_RUN_TIMEOUT))
    finally:
        launcher.kill()
    assert code == 0, launcher.output()[-4000:]
    for rank in range(2):
        assert json.loads((workspace / f"rank-{rank}.json").read_text()) == {"cwd": str(workspace)}


# --------------------------------------------------------------------------- #
# command
# --------------------------------------------------------------------------- #
def test_command_job_pods_all_reduce_through_their_peer_environment(
    digits: Path, tmp_path: Path, procs: list[ts.ManagedProcess]
) -> None:
    out = tmp_path / "output"
    workspace = tmp_path / "workspace"  # where the job's code is downloaded (the pods' working folder)
    workspace.mkdir()
    shutil.copy(PEERS_PROGRAM, workspace / "prep.py")
    spec: JobSpec = {
        "job_name": "prep",
        "namespace": "training",
        "pvc_name": "shared",
        "image": "training",
        "output_dir": str(out),
        "data_dir": str(digits),
        "env": {"SEED": "7"},
    }
    port = free_port()
    env = command_env(spec, PLACEMENT, 2, ["127.0.0.1", "127.0.0.1"], port)
    pods = [pod_process(["python", "prep.py"], env, index=i) for i in range(2)]
    assert [p.env["RANK"] for p in pods] == ["0", "1"] and {p.env["WORLD_SIZE"] for p in pods} == {"2"}
    assert {p.env["MASTER_ADDR"] for p in pods} == {"127.0.0.1"} and {p.env["MASTER_PORT"] for p in pods} == {str(port)}
    started = [start(pod, tmp_path / f"pod-{i}.log", workspace) for i, pod in enumerate(pods)]
    procs.extend(started)
    assert ts.wait_all(started, patient(120.0)) == [0, 0], "\n".join(p.output()[-2000:] for p in started)
    reports = [json.loads((out / f"rank-{i}.json").read_text()) for i in range(2)]
    for rank, report in enumerate(reports):
        assert report["rank"] == rank and report["world_size"] == 2
        assert report["sum"] == 3.0, "1 + 2 all-reduced"
        assert Path(report["cwd"]) == workspace
    told = reports[0]["peers"]
    assert told == reports[1]["peers"]
    assert [t["JOB_INDEX"] for t in told] == [t["NODE_RANK"] for t in told] == ["0", "1"]
    assert {t["JOB_PEERS"] for t in told} == {"127.0.0.1,127.0.0.1"} and {t["JOB_SIZE"] for t in told} == {"2"}
    assert {t["OUTPUT_DIR"] for t in told} == {str(out)} and {t["DATA_DIR"] for t in told} == {str(digits)}
    assert {t["SEED"] for t in told} == {"7"}


# --------------------------------------------------------------------------- #
# TensorBoard
# --------------------------------------------------------------------------- #
#: The scalars the bundled trainer (training/train.py) logs, by these names, at the global step.
TORCH_RUN = "torch/."
STEP_SCALARS = ("train/loss", "train/accuracy")
EPOCH_SCALARS = {
    "test/accuracy": "test_accuracy",
    "test/loss": "test_loss",
    "throughput/images_per_sec": "images_per_sec",
}
TRAINER_SCALARS = (*STEP_SCALARS, *EPOCH_SCALARS)


def write_trainer_scalars(log_dir: Path, work: Path) -> dict[str, list[list[Optional[float]]]]:
    """Runs the real train.py (one process, 3 short epochs on the digits) with its folders and TensorBoard folder
    given only through the pod's environment (DATA_DIR, OUTPUT_DIR, TENSORBOARD_DIR), and returns what its own log
    says it wrote: tag -> [[step, value], ...] (the value None where the log does not print it: per-step
    training loss and accuracy)."""
    data = ts.make_digits_cifar(work / "digits")
    pod_env = {"DATA_DIR": str(data), "OUTPUT_DIR": str(work / "torch-output"), "TENSORBOARD_DIR": str(log_dir)}
    done = subprocess.run(
        [
            sys.executable,
            str(ts.TRAIN_PY),
            "--epochs",
            "3",
            "--max-steps-per-epoch",
            "4",
            "--batch-size",
            "64",
            "--width",
            "8",
            "--workers",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=patient(600),
        env=process_env(pod_env),
        cwd=work,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    epochs = [e for e in ts.json_events(done.stdout) if e.get("event") == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    last_step = epochs[-1]["step"]
    written: dict[str, list[list[Optional[float]]]] = {
        t: [[s, None] for s in range(1, last_step + 1)] for t in STEP_SCALARS
    }
    for tag, field in EPOCH_SCALARS.items():
        written[tag] = [[e["step"], e[field]] for e in epochs]
    return written


def http_json(url: str) -> Any:
    """GET ``url`` (on 127.0.0.1) and decode its JSON."""
    with urllib.request.urlopen(url, timeout=patient(10)) as resp:
        return json.loads(resp.read())


def test_tensorboard_serves_the_scalars_the_trainers_wrote(
    tf_run: TfRun, tmp_path: Path, procs: list[ts.ManagedProcess]
) -> None:
    torch_logs = tmp_path / "torch-output" / "tensorboard"
    written = write_trainer_scalars(torch_logs, tmp_path)
    log_dirs = {"torch": str(torch_logs), "tf": str(tf_run.out / "tensorboard")}
    # TensorBoard's run names: <job>/<folder below the job's log folder>, "." for the folder itself
    port = free_port()
    command = tensorboard_command(log_dirs, port=port, host="127.0.0.1")
    assert command[command.index("--logdir_spec") + 1] == f"tf:{tf_run.out}/tensorboard,torch:{torch_logs}"
    assert shutil.which("tensorboard", path=str(ts.VENV_BIN)), "tensorboard not installed (requirements-dev.txt)"
    server = start(pod_process(command, {"HOME": str(tmp_path)}), tmp_path / "tensorboard.log", tmp_path)
    procs.append(server)
    base = f"http://127.0.0.1:{port}"

    def tags() -> Any:
        assert server.poll() is None, f"tensorboard exited:\n{server.output()[-3000:]}"
        try:
            found = http_json(f"{base}/data/plugin/scalars/tags")
        except (urllib.error.URLError, OSError):
            return None
        return found if {TORCH_RUN, "tf/train"} <= set(found) else None

    runs = wait_for(tags, patient(120.0), interval=0.25, what="TensorBoard to load both jobs' runs")
    assert set(runs[TORCH_RUN]) == set(TRAINER_SCALARS)
    for tag, points in written.items():
        query = urllib.parse.urlencode({"run": TORCH_RUN, "tag": tag})
        served = http_json(f"{base}/data/plugin/scalars/scalars?{query}")
        assert [step for _, step, _ in served] == [step for step, _ in points], tag
        if tag in EPOCH_SCALARS:  # the trainer's log rounds to 5 decimals (1 for images/s)
            assert [value for _, _, value in served] == pytest.approx([value for _, value in points], rel=1e-3), tag
        else:
            assert all(0 <= value < 10 for _, _, value in served), tag
    # the TensorFlow trainer's own logs (Keras' TensorBoard callback on the chief), one point per epoch
    assert {"epoch_loss", "epoch_accuracy"} <= set(runs["tf/train"])
    query = urllib.parse.urlencode({"run": "tf/train", "tag": "epoch_loss"})
    served = http_json(f"{base}/data/plugin/scalars/scalars?{query}")
    losses = tf_run.chief_losses()  # epochs logged by both attempts, each epoch once
    assert [step for _, step, _ in served] == sorted(losses) == [0, 1, 2]
    assert [value for _, _, value in served] == pytest.approx([losses[e] for e in sorted(losses)], rel=1e-5)
