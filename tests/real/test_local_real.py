"""``python -m stacks.local`` for real: the workshop stack trains (2 processes, a real etcd rendezvous), checkpoints
and evaluates on this machine; a user's own command job of another stack runs its code on 2 processes; a failing
job fails the run with its log."""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import training_support as ts
from tests.harness import REPO
from tests.wait import patient

#: ResNet-9 of width 8 reaches >= 90% on the held-out digits in 5 epochs; one DataLoader worker process per rank.
EPOCHS = 5
SMALL = f"train=--width 8 --batch-size 32 --lr 0.2 --warmup-epochs 1 --seed 0 --epochs {EPOCHS} --workers 1"


def local(
    *args: str, cwd: Path, timeout: float | None = None, bytecode: bool = False
) -> subprocess.CompletedProcess[str]:
    """``python -m stacks.local`` as a user runs it (from the repository, no AWS in the environment); ``bytecode``:
    Python writes byte code beside the modules it imports, as it does by default on a user's machine."""
    env = {k: v for k, v in ts.torchrun_env().items() if not k.startswith("AWS_")}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.run(
        [sys.executable, "-m", "stacks.local", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=patient(900) if timeout is None else timeout,
    )


@dataclass
class WorkshopRun:
    """The workshop stack run here once: its dataset given as a local folder, training on 2 pods with an etcd
    rendezvous, then the evaluation job (health checks are cluster-only)."""

    digits: Path
    work: Path
    done: subprocess.CompletedProcess[str]
    logs: list[str]
    """The two training pods' logs."""

    @property
    def output_dir(self) -> Path:
        """The training job's run folder."""
        (run,) = (self.work / "shared" / "runs").glob("train-*")
        return run

    def events(self, name: str) -> list[dict[str, Any]]:
        """The training pods' JSON events called ``name`` (rank 0's trainer lines are in one of them)."""
        return [e for log in self.logs for e in ts.json_events(log) if e.get("event") == name]


@pytest.fixture(scope="module")
def workshop(tmp_path_factory: pytest.TempPathFactory) -> WorkshopRun:
    """``python -m stacks.local --stack workshop`` on the digits, once for the module's tests."""
    root = tmp_path_factory.mktemp("workshop")
    digits = ts.make_digits_cifar(root / "digits")
    work = root / "work"
    done = local(
        "--stack", "workshop", "--work", str(work), "--dataset", f"cifar10={digits}", "--args", SMALL, cwd=REPO
    )
    logs = [log.read_text() for log in sorted((work / "logs").glob("train-*.log"))]
    return WorkshopRun(digits, work, done, logs)


def test_the_workshop_stack_trains_checkpoints_and_evaluates_here(workshop: WorkshopRun) -> None:
    done, work, run = workshop.done, workshop.work, workshop.output_dir
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "job train (pytorch): started, 2 pod(s) as local processes" in done.stdout and "etcd (v2 API)" in done.stdout
    summary = ts.assert_final_model(run, workshop.digits)
    assert summary["world_sizes"] == [2] and summary["final"]["epoch"] == EPOCHS
    # the trainer read its folders from the pods' environment and wrote TensorBoard scalars there
    assert summary["args"]["data_dir"] == str(work / "shared" / "datasets" / "cifar10")
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    (evaluation,) = (work / "shared" / "runs").glob("evaluate-*/evaluation.json")
    report = json.loads(evaluation.read_text())
    assert report["total"] == 297 and report["accuracy"] >= 0.90, report
    assert report["accuracy"] == pytest.approx(summary["final"]["test_accuracy"], abs=1e-4)
    assert list(report["per_class"]) == list(ts.DIGIT_NAMES)
    assert sum(c["support"] for c in report["per_class"].values()) == 297


def test_the_runner_talks_while_the_jobs_run_and_shows_the_results(workshop: WorkshopRun) -> None:
    """A line per job start and end with its outcome, each epoch's progress while training, and
    the results at the end (the evaluation's accuracy, the metrics, the logs folder), not only 'done'."""
    out = workshop.done.stdout
    assert workshop.done.returncode == 0, out[-3000:] + workshop.done.stderr[-3000:]
    lines = out.splitlines()
    started = [i for i, ln in enumerate(lines) if ln.startswith("[local] job train (pytorch): started")]
    completed = [i for i, ln in enumerate(lines) if ln.startswith("[local] job train: completed in ")]
    epochs = [i for i, ln in enumerate(lines) if f"/{EPOCHS}, step " in ln and ": epoch " in ln]
    assert len(started) == len(completed) == 1 and len(epochs) == EPOCHS, out
    assert started[0] < epochs[0] < epochs[-1] < completed[0], out  # progress while it ran
    assert "[local] job evaluate: completed in " in out
    accuracy = json.loads(next((workshop.work / "shared" / "runs").glob("evaluate-*/evaluation.json")).read_text())[
        "accuracy"
    ]
    tail = out[out.index("[local] results:") :]
    assert f"evaluation.json: accuracy {accuracy:.4g} on 297 images" in tail, tail
    assert "metrics.json: accuracy " in tail and "throughput " in tail and f"logs: {workshop.work / 'logs'}" in tail
    assert "I1125" not in out and "torch/distributed" not in out  # torchrun's bookkeeping stays in the logs
    assert "[local] job train: TensorBoard event files; serve them with: tensorboard --logdir_spec train:" in out


def test_a_job_with_tensorboard_that_writes_no_event_files_is_told_where_to_write_them(tmp_path: Path) -> None:
    """``tensorboard: true`` on a program that writes no event files: the runner says so, and where they go, instead
    of a command that would serve an empty folder."""
    stack = _stack_file(
        tmp_path, {"quiet": {"kind": "command", "nodeGroup": "cpu", "command": ["true"], "tensorboard": True}}
    )
    work = tmp_path / "work"
    done = local("--stack", "mine", "--stack-file", str(stack), "--work", str(work), cwd=REPO, timeout=patient(300))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = (work / "shared" / "runs").glob("quiet-*")
    assert (
        f"[local] job quiet: tensorboard is on, but the job wrote no event files in {run / 'tensorboard'}: write them "
        "to $TENSORBOARD_DIR" in done.stdout
    ), done.stdout
    assert "serve them with" not in done.stdout


def test_two_pods_rendezvous_once_and_train_every_epoch_at_world_size_2(workshop: WorkshopRun) -> None:
    assert workshop.done.returncode == 0, workshop.done.stderr[-3000:]
    assert len(workshop.logs) == 2
    starts = workshop.events("start")
    assert len(starts) == 1 and starts[0]["world_size"] == 2 and starts[0]["backend"] == "gloo"
    epochs = workshop.events("epoch")
    assert [e["epoch"] for e in epochs] == list(range(1, EPOCHS + 1))
    for record in epochs:
        assert record["world_size"] == 2
        assert record["images_per_sec"] > 0 and record["epoch_time_s"] > 0
        assert 0.0 <= record["train_accuracy"] <= 1.0 and record["train_loss"] > 0
        # 1500 images, global batch 64 -> 23 full steps of 64 images.
        assert record["images"] == 23 * 64
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]

    run = workshop.output_dir
    ckpts = ts.checkpoints(run)
    assert ckpts, "no checkpoint written"
    newest = ts.load_ckpt(ckpts[0])
    assert newest["epoch"] == EPOCHS and newest["samples_in_epoch"] == 0 and newest["step"] == 23 * EPOCHS
    assert {"model", "optimizer", "scheduler", "scaler", "args"} <= set(newest)
    assert len(ckpts) <= 2  # --keep-checkpoints default
    assert not list(run.glob(".*.tmp")), "temp files left behind"


def test_evaluate_fails_below_its_threshold_and_on_missing_inputs(
    workshop: WorkshopRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """evaluate.py on the trained model (its ``main`` in this process; the evaluation job ran it as a pod): a
    threshold above the accuracy reached exits 3 (the JSON, next to the model by default, still written); a missing
    model or dataset exits 1."""
    import evaluate as evaluate_py  # training/, on sys.path through tests.training_support

    assert workshop.done.returncode == 0, workshop.done.stderr[-3000:]
    model = workshop.output_dir / "model.pt"

    def evaluate(*args: str) -> subprocess.CompletedProcess[str]:
        code = evaluate_py.main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["evaluate.py", *args], code, out, err)

    strict = evaluate("--model", str(model), "--data-dir", str(workshop.digits), "--min-accuracy", "1.0")
    report = json.loads((model.parent / "evaluation.json").read_text())
    expected = 0 if report["accuracy"] == 1.0 else 3
    assert strict.returncode == expected, strict.stderr
    assert report["passed"] is (expected == 0) and report["total"] == 297
    assert "overall accuracy" in strict.stdout and "seven" in strict.stdout

    missing_model = evaluate("--model", str(tmp_path / "nope.pt"), "--data-dir", str(workshop.digits))
    assert missing_model.returncode == 1 and "not found" in missing_model.stderr
    missing_data = evaluate(
        "--model", str(model), "--data-dir", str(tmp_path / "empty"), "--output-json", str(tmp_path / "x.json")
    )
    assert missing_data.returncode == 1 and not (tmp_path / "x.json").exists()


def test_running_the_finished_training_job_again_trains_nothing(workshop: WorkshopRun) -> None:
    """The launcher finds the run DONE and exits at once."""
    assert workshop.done.returncode == 0, workshop.done.stderr[-3000:]
    run, work = workshop.output_dir, workshop.work
    checkpoints = sorted(p.name for p in run.glob("checkpoint-step*.pt"))
    again = local(
        "--stack",
        "workshop",
        "--work",
        str(work),
        "--dataset",
        f"cifar10={workshop.digits}",
        "--args",
        SMALL,
        "--job",
        "train",
        cwd=REPO,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(p.name for p in run.glob("checkpoint-step*.pt")) == checkpoints
    assert '"event": "already_complete"' in (work / "logs" / "train-0.log").read_text()
    # the runner says so before it starts them, naming the way to start over
    assert f"job train: its run in {run} finished (DONE), so its processes end at once; --fresh train" in again.stdout
    # and says nothing that contradicts it: no "started", no "completed"
    assert "job train (pytorch): finished before, 2 pod(s) as local processes" in again.stdout, again.stdout
    assert ", running nothing (its run had finished; every process exited 0)" in again.stdout, again.stdout
    assert "job train (pytorch): started" not in again.stdout and "job train: completed" not in again.stdout


def _stack_file(tmp_path: Path, jobs: dict[str, object]) -> Path:
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "aws:region": "us-east-1",
                    "eks-training:nodeGroups": {
                        "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 2, "maxSize": 2}
                    },
                    "eks-training:jobs": jobs,
                }
            }
        )
    )
    return path


def test_a_users_command_job_runs_its_code_on_two_processes(tmp_path: Path) -> None:
    """The user's program (a code download in the cluster, a local folder here) all-reduces across the 2 processes
    through torch.distributed's env:// with the peers the pods get."""
    stack = _stack_file(
        tmp_path,
        {
            "prep": {
                "kind": "command",
                "nodeGroup": "cpu",
                "nodes": 2,
                "code": "s3://my-bucket/prep/",
                "command": ["python", "peers_allreduce.py"],
                "args": ["$(OUTPUT_DIR)"],
            }
        },
    )
    work = tmp_path / "work"
    done = local(
        "--stack",
        "mine",
        "--stack-file",
        str(stack),
        "--work",
        str(work),
        "--code",
        f"prep={REPO / 'tests' / 'programs'}",
        cwd=REPO,
        timeout=patient(300),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out,) = (work / "shared" / "runs").glob("prep-*")
    reports = sorted(json.loads(p.read_text())["rank"] for p in out.glob("*.json"))
    assert reports == [0, 1], list(out.iterdir())


def test_a_job_with_a_code_folder_runs_in_it_and_new_code_is_a_new_run(tmp_path: Path) -> None:
    """``code: ./src`` (a folder beside the stack file) is the job's /workspace here, with no --code: its processes
    run in it and import from it. What a run leaves there (Python's byte code) is not code: the same run again; a
    changed file is a new run (its own output folder), as a new object is on the cluster."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "helper.py").write_text("import os\nWHERE = os.getcwd()\n")
    (project / "src" / "job.py").write_text(
        "import json, os\nimport helper\n"
        "out = os.path.join(os.environ['OUTPUT_DIR'], 'pod-' + os.environ['RANK'] + '.json')\n"
        "json.dump({'cwd': helper.WHERE, 'workspace': os.path.realpath('/workspace') if os.path.exists('/workspace') "
        "else None}, open(out, 'w'))\n"
    )
    stack = _stack_file(
        project,
        {"mine": {"kind": "command", "nodeGroup": "cpu", "nodes": 2, "code": "./src", "command": ["python", "job.py"]}},
    )
    work = tmp_path / "work"

    def run() -> set[str]:
        # from another folder: the code folder is the stack file's, not the working folder's
        done = local(
            "--stack",
            "mine",
            "--stack-file",
            str(stack),
            "--work",
            str(work),
            cwd=REPO,
            timeout=patient(300),
            bytecode=True,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return {p.name for p in (work / "shared" / "runs").iterdir()}

    (first,) = run()
    for rank in (0, 1):
        assert json.loads((work / "shared" / "runs" / first / f"pod-{rank}.json").read_text())["cwd"] == str(
            project / "src"
        )
    assert list((project / "src" / "__pycache__").glob("helper.*.pyc")), "the run imported helper from the folder"
    assert run() == {first}, "byte code left by the run is not code: the same run"
    (project / "src" / "helper.py").write_text("import os\nWHERE = os.getcwd()  # changed\n")
    runs = run()
    assert len(runs) == 2 and first in runs, "changed code is a run of its own"


def test_a_users_pytorch_script_that_exits_0_is_a_success(tmp_path: Path) -> None:
    """A ``pytorch`` job with the user's own script (no DONE of its own) that finishes on both
    ranks succeeds, through the launcher the pods run; the launcher records the finished run, so running the job
    again with the same arguments runs nothing."""
    stack = _stack_file(
        tmp_path,
        {
            "fit": {
                "kind": "pytorch",
                "nodeGroup": "cpu",
                "nodes": 2,
                "code": "s3://my-bucket/fit/",
                "script": "fit_line.py",
                "rendezvousBackend": "c10d",
            }
        },
    )
    work = tmp_path / "work"
    args = (
        "--stack",
        "mine",
        "--stack-file",
        str(stack),
        "--work",
        str(work),
        "--code",
        f"fit={REPO / 'tests' / 'programs'}",
    )
    done = local(*args, cwd=REPO, timeout=patient(300))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out,) = (work / "shared" / "runs").glob("fit-*")
    line = json.loads((out / "line.json").read_text())
    assert (round(line["w"], 1), round(line["b"], 1), line["world_size"]) == (3.0, 2.0, 2)
    assert json.loads((out / "DONE").read_text())["by"] == "launch.py"
    logs = [(work / "logs" / f"fit-{i}.log").read_text() for i in (0, 1)]
    assert any("done: w=3.000 b=2.000" in log for log in logs)
    outcomes = [e["outcome"] for log in logs for e in ts.json_events(log) if e.get("event") == "command_exit"]
    assert outcomes == ["complete", "complete"], logs
    again = local(*args, cwd=REPO, timeout=patient(300))
    assert again.returncode == 0 and '"event": "already_complete"' in (work / "logs" / "fit-0.log").read_text()


def test_other_args_start_a_run_of_their_own_unless_resumed(tmp_path: Path) -> None:
    """A re-run with other --args is not a no-op ('run already complete'): other arguments are a run of
    their own (its own folder, as the same args in the stack file would be under pulumi up); the same ones find
    their finished run; --resume continues the latest run; --fresh starts it over, the old folder kept aside."""
    stack = _stack_file(
        tmp_path,
        {
            "fit": {
                "kind": "pytorch",
                "nodeGroup": "cpu",
                "nodes": 1,
                "code": "s3://my-bucket/fit/",
                "script": "fit_line.py",
                "rendezvousBackend": "c10d",
            }
        },
    )
    work = tmp_path / "work"

    def run(*extra: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
        done = local(
            "--stack",
            "mine",
            "--stack-file",
            str(stack),
            "--work",
            str(work),
            "--code",
            f"fit={REPO / 'tests' / 'programs'}",
            *extra,
            cwd=REPO,
            timeout=patient(300),
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done, {p.name for p in (work / "shared" / "runs").iterdir()}

    started, first = run("--args", "fit=--lr 0.1")
    # the work folder keeps state: the runner says where it is and what a re-run does
    assert (
        f"work folder {work} (the shared volume, logs and etcd; kept between runs: a finished run is not run "
        "again, an interrupted one resumes; --fresh JOB starts a job's run over)"
    ) in started.stdout, started.stdout
    again, same = run("--args", "fit=--lr 0.1")
    assert same == first and "the run is already complete" in again.stdout
    other, runs = run("--args", "fit=--lr 0.2")
    assert len(runs) == 2 and "already complete" not in other.stdout and "done: w=3.000 b=2.000" in other.stdout
    resumed, after = run("--args", "fit=--lr 0.3", "--resume", "fit")
    assert after == runs and "the run is already complete" in resumed.stdout  # the latest run, finished: nothing to do
    # and the runner says the new arguments reach nothing, and how to train on from that run
    assert (
        "--resume fit: its run in " in resumed.stdout
        and "finished (DONE), so it runs nothing and --args do not" in (resumed.stdout)
    ), resumed.stdout
    fresh, kept = run("--args", "fit=--lr 0.2", "--fresh", "fit")
    assert len(kept) == 3 and any(".old-" in name for name in kept) and "done: w=3.000" in fresh.stdout


def test_a_failing_job_fails_the_run_with_its_log(tmp_path: Path) -> None:
    """The reason on one line with its fix, then the end of the log (not inside a 3000-character
    dump)."""
    stack = _stack_file(
        tmp_path,
        {
            "broken": {
                "kind": "command",
                "nodeGroup": "cpu",
                "command": ["python", "-c", "import json; json.loads('{')"],
            }
        },
    )
    done = local(
        "--stack", "mine", "--stack-file", str(stack), "--work", str(tmp_path / "work"), cwd=REPO, timeout=patient(120)
    )
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert first == (
        "error: broken process 0 exited 1: json.decoder.JSONDecodeError: Expecting property name enclosed "
        "in double quotes: line 1 column 2 (char 1); fix: see the end of the log below"
    ), done.stderr
    assert f"last lines of {tmp_path / 'work' / 'logs' / 'broken-0.log'} (torchrun's INFO lines" in done.stderr
    assert "JSONDecodeError" in done.stderr.split("left out):", 1)[1], "the traceback is in the lines shown"
    assert "[local] job broken: failed after " in done.stdout


def test_without_torch_a_pytorch_job_says_how_to_install_it(tmp_path: Path) -> None:
    """Without PyTorch a pytorch job says how to install it, not exit 127 and no hint."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=patient(120))
    stack = _stack_file(
        tmp_path,
        {"fit": {"kind": "pytorch", "nodeGroup": "cpu", "script": "/app/train.py", "rendezvousBackend": "c10d"}},
    )
    done = local(
        "--stack",
        "mine",
        "--stack-file",
        str(stack),
        "--work",
        str(tmp_path / "work"),
        "--venv",
        f"training={bare}",
        cwd=REPO,
        timeout=patient(120),
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        f"error: job fit runs under torchrun, which comes with PyTorch, and {bare}/bin/python has no torch; fix: pip "
        "install torch --index-url https://download.pytorch.org/whl/cpu (the CPU build, about 200 MB), or give a "
        "virtualenv that has it with --venv training=DIR"
    ), done.stderr


def test_a_dataset_that_cannot_be_downloaded_points_to_the_dataset_flag(tmp_path: Path) -> None:
    """Without network the staging points to --dataset; a half-staged folder does not block --dataset; an
    empty folder is refused."""
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "aws:region": "us-east-1",
                    "eks-training:nodeGroups": {
                        "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1}
                    },
                    "eks-training:datasets": {"cifar10": {}},
                    "eks-training:jobs": {
                        "look": {
                            "kind": "command",
                            "nodeGroup": "cpu",
                            "dataset": "cifar10",
                            "command": ["python", "-c", "import os; print(sorted(os.listdir(os.environ['DATA_DIR'])))"],
                        }
                    },
                }
            }
        )
    )
    work = tmp_path / "work"
    args = ("--stack", "mine", "--stack-file", str(path), "--work", str(work))
    offline = {**ts.torchrun_env(), "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-m", "stacks.local", *args],
        cwd=REPO,
        env=offline,
        capture_output=True,
        text=True,
        timeout=patient(300),
    )
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert first.startswith(
        "error: dataset cifar10: staging from https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz "
        "failed: stage-cifar10 process 0 exited 1: error: download of "
    ), first
    assert first.endswith(
        "; fix: without network, give a local copy with --dataset cifar10=PATH (a folder holding "
        "cifar-10-batches-py/ (the folder CIFAR-10's python tarball, "
        "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, extracts to: data_batch_1, "
        "data_batch_2, data_batch_3, data_batch_4, data_batch_5, test_batch, batches.meta), or that "
        "folder itself)"
    ), first
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = local(*args, "--dataset", f"cifar10={empty}", cwd=REPO, timeout=patient(120))
    assert refused.returncode == 1 and refused.stderr.startswith(
        f"error: --dataset cifar10={empty}: data_batch_1, data_batch_2"
    ), refused.stderr
    digits = ts.make_digits_cifar(tmp_path / "digits")
    given = local(*args, "--dataset", f"cifar10={digits / 'cifar-10-batches-py'}", cwd=REPO, timeout=patient(120))
    assert given.returncode == 0, given.stderr  # the half-staged folder moved aside, the batch folder itself taken
    assert "the copy staged earlier is moved aside to" in given.stdout
    assert "look/0: ['cifar-10-batches-py']" in given.stdout
    # Run again without --dataset, offline: the folder given before is used, and nothing is staged into it.
    again = subprocess.run(
        [sys.executable, "-m", "stacks.local", *args, "--fresh", "look"],
        cwd=REPO,
        env=offline,
        capture_output=True,
        text=True,
        timeout=patient(120),
    )
    assert again.returncode == 0, again.stderr
    assert (
        f"dataset cifar10: {(digits / 'cifar-10-batches-py').resolve()} (given to an earlier run; "
        "--dataset cifar10=PATH gives another)" in again.stdout
    ), again.stdout
    assert "look/0: ['cifar-10-batches-py']" in again.stdout and "staging" not in again.stdout
    assert sorted(p.name for p in (digits / "cifar-10-batches-py").iterdir()) == sorted(
        ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch", "batches.meta"]
    )


def test_configuration_errors_exit_2_before_anything_runs(tmp_path: Path) -> None:
    stack = _stack_file(tmp_path, {"bad": {"kind": "command", "nodeGroup": "gpu", "command": ["true"]}})
    done = local(
        "--stack", "mine", "--stack-file", str(stack), "--work", str(tmp_path / "work"), cwd=REPO, timeout=patient(120)
    )
    assert done.returncode == 2
    assert "eks-training:jobs.bad.nodeGroup: 'gpu' is not a worker group" in done.stderr
    assert not (tmp_path / "work").exists()


def test_a_virtualenv_for_an_image_the_stack_does_not_have_exits_2(tmp_path: Path) -> None:
    done = local(
        "--stack",
        "tensorflow",
        "--work",
        str(tmp_path / "work"),
        "--venv",
        "tf=.venv-tf",
        cwd=REPO,
        timeout=patient(120),
    )
    assert done.returncode == 2
    assert "--venv tf: no such image in this stack; its images: " in done.stderr and "tensorflow" in done.stderr
    assert not (tmp_path / "work").exists()


def _two_pod_script_run(
    tmp_path: Path, job: str, script: str, **settings: Any
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A ``pytorch`` job ``job`` of two pods (c10d) running ``script`` as its own code, run locally: the work folder
    and the command's result."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / f"{job}.py").write_text(script)
    spec = {"kind": "pytorch", "nodeGroup": "cpu", "nodes": 2, "code": f"s3://my-bucket/{job}/", "script": f"{job}.py"}
    stack = _stack_file(tmp_path, {job: {**spec, "rendezvousBackend": "c10d", **settings}})
    work = tmp_path / "work"
    args = ("--stack", "mine", "--stack-file", str(stack), "--work", str(work), "--code", f"{job}={tmp_path / 'code'}")
    return work, local(*args, cwd=REPO, timeout=patient(300))


def test_arguments_the_script_refuses_end_the_run_at_the_first_attempt(tmp_path: Path) -> None:
    """A ``pytorch`` job's own script whose argparse refuses its arguments fails every attempt alike: the first attempt
    writes FAILED with argparse's message (not after ``maxRestarts`` more), each pod's launcher exits 3, and the
    runner's fix is the job's args."""
    script = (
        'import argparse\nprint("mine: starting", flush=True)\np = argparse.ArgumentParser()\n'
        'p.add_argument("--epochs", type=int)\np.parse_args()\n'
    )
    work, done = _two_pod_script_run(tmp_path, "mine", script, args=["--lr", "0.1"], maxRestarts=3)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert (
        "the run gave up: the script refused its arguments (mine.py: error: unrecognized arguments: --lr 0.1): "
        "fix the job's args; fix: its args in the stack file, or --args mine=...; other arguments make a run"
    ) in done.stderr, done.stderr[-3000:]
    (out,) = (work / "shared" / "runs").glob("mine-*")
    assert json.loads((out / "FAILED").read_text())["failures"] == 1  # the first attempt, of a budget of four
    logs = [(work / "logs" / f"mine-{i}.log").read_text() for i in (0, 1)]
    # the script ran once per pod at most (twice only if a membership change stopped an attempt), not four times; a
    # pod whose worker started after the other's FAILED ran nothing (run_script ends at once on a run that gave up)
    runs = [log.count("mine: starting") for log in logs]
    assert all(n <= 2 for n in runs) and sum(runs) >= 1, logs


@pytest.mark.parametrize("stagger_s", [0, 4], ids=["together", "one pod later"])
def test_a_users_script_that_fails_at_once_gives_up_after_max_restarts(tmp_path: Path, stagger_s: int) -> None:
    """A ``pytorch`` job's own script that fails at its start is not restarted by torchrun up to 100 times per pod:
    after ``maxRestarts`` restarts of quick failures in a row (here 1: two attempts) a rank writes FAILED, torchrun
    starts the workers again, each finds FAILED and exits 0, and the launcher exits 3 (the Job's FailJob) with the
    run's own reason; also when the second pod's script fails later than the first's."""
    script = (
        'import os, time\nprint("crash: starting", flush=True)\n'
        f'time.sleep({stagger_s} * int(os.environ["GROUP_RANK"]))\nraise SystemExit(4)\n'
    )
    work, done = _two_pod_script_run(tmp_path, "crash", script, maxRestarts=1)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    reason = (
        "the script failed 2 attempts in a row, each within 300 s of its start (the job's maxRestarts: 1, "
        "MAX_FAILED_ATTEMPTS 2; the last"
    )
    assert f"the run gave up: {reason} exit status 4)" in done.stderr, done.stderr[-3000:]
    (out,) = (work / "shared" / "runs").glob("crash-*")
    assert json.loads((out / "FAILED").read_text())["failures"] == 2
    logs = [(work / "logs" / f"crash-{i}.log").read_text() for i in (0, 1)]
    # each pod ran the script about twice (its own two quick failures), not a hundred times: once, or not at all if
    # it joined late, when the other pod's FAILED was there before its next attempt (that attempt ran nothing), three
    # times only if a membership change stopped an attempt (a stopped attempt counts no failure)
    runs = [log.count("crash: starting") for log in logs]
    assert all(n <= 3 for n in runs) and sum(runs) >= 2, logs
    # the first pod to exit 3 ends the job (the Job's FailJob; here the runner stops the other pod, which may still be
    # at torchrun's exit barrier)
    outcomes = [e["outcome"] for log in logs for e in ts.json_events(log) if e.get("event") == "command_exit"]
    assert outcomes and set(outcomes) == {"run_failed"}, logs
