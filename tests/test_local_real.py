"""``python -m stacks.local`` for real: the workshop stack trains (2 processes, a real etcd rendezvous), checkpoints
and evaluates on this machine; a user's own command job of another stack runs its code on 2 processes; a failing
job fails the run with its log."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import training_support as ts
from tests.harness import REPO

pytestmark = pytest.mark.real

#: The digits reach >95% with this recipe in 5 epochs (tests/test_training_real.py).
SMALL = "train=--width 8 --batch-size 32 --lr 0.2 --warmup-epochs 1 --seed 0 --epochs 4 --workers 0"


def local(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``python -m stacks.local`` as a user runs it (from the repository, no AWS in the environment)."""
    env = {k: v for k, v in ts.torchrun_env().items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "stacks.local", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_workshop_stack_trains_checkpoints_and_evaluates_here(tmp_path: Path) -> None:
    digits = ts.make_digits_cifar(tmp_path / "digits")
    work = tmp_path / "work"
    done = local("--stack", "workshop", "--work", str(work), "--dataset", f"cifar10={digits}", "--args", SMALL, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "job train (pytorch): 2 process(es)" in done.stdout and "etcd (v2 API)" in done.stdout
    (run,) = (work / "shared" / "runs").glob("train-*")
    assert (run / "DONE").exists() and (run / "model.pt").exists()
    assert sorted(p.name for p in run.glob("checkpoint-step*.pt")), "checkpoints written"
    summary = json.loads((run / "training_summary.json").read_text())
    assert summary["world_sizes"] == [2] and summary["final"]["epoch"] == 4
    # the trainer read its folders from the pods' environment and wrote TensorBoard scalars there
    assert summary["args"]["data_dir"] == str(work / "shared" / "datasets" / "cifar10")
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    (evaluation,) = (work / "shared" / "runs").glob("evaluate-*/evaluation.json")
    report = json.loads(evaluation.read_text())
    assert report["total"] == 297 and report["accuracy"] >= 0.8, report
    assert report["accuracy"] == pytest.approx(summary["final"]["test_accuracy"], abs=1e-4)
    # running the training job again finds the run DONE: the launcher exits at once, nothing trains again
    checkpoints = sorted(p.name for p in run.glob("checkpoint-step*.pt"))
    again = local("--stack", "workshop", "--work", str(work), "--dataset", f"cifar10={digits}", "--args", SMALL,
                  "--job", "train", cwd=REPO)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(p.name for p in run.glob("checkpoint-step*.pt")) == checkpoints
    assert '"event": "already_complete"' in (work / "logs" / "train-0.log").read_text()


def _stack_file(tmp_path: Path, jobs: dict[str, object]) -> Path:
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(yaml.safe_dump({"config": {
        "aws:region": "us-east-1",
        "eks-training:nodeGroups": {"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 2, "maxSize": 2}},
        "eks-training:jobs": jobs,
    }}))
    return path


def test_a_users_command_job_runs_its_code_on_two_processes(tmp_path: Path) -> None:
    """The user's program (a code download in the cluster, a local folder here) all-reduces across the 2 processes
    through torch.distributed's env:// with the peers the pods get."""
    stack = _stack_file(tmp_path, {"prep": {
        "kind": "command", "nodeGroup": "cpu", "nodes": 2, "code": "s3://my-bucket/prep/",
        "command": ["python", "peers_allreduce.py"], "args": ["$(OUTPUT_DIR)"],
    }})
    work = tmp_path / "work"
    done = local("--stack", "mine", "--stack-file", str(stack), "--work", str(work),
                 "--code", f"prep={REPO / 'tests' / 'programs'}", cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out,) = (work / "shared" / "runs").glob("prep-*")
    reports = sorted(json.loads(p.read_text())["rank"] for p in out.glob("*.json"))
    assert reports == [0, 1], list(out.iterdir())


def test_a_failing_job_fails_the_run_with_its_log(tmp_path: Path) -> None:
    stack = _stack_file(tmp_path, {"broken": {"kind": "command", "nodeGroup": "cpu", "command": ["python", "-c", "raise SystemExit(7)"]}})
    done = local("--stack", "mine", "--stack-file", str(stack), "--work", str(tmp_path / "work"), cwd=REPO, timeout=120)
    assert done.returncode == 1
    assert "broken process 0 exited 7" in done.stderr


def test_configuration_errors_exit_2_before_anything_runs(tmp_path: Path) -> None:
    stack = _stack_file(tmp_path, {"bad": {"kind": "command", "nodeGroup": "gpu", "command": ["true"]}})
    done = local("--stack", "mine", "--stack-file", str(stack), "--work", str(tmp_path / "work"), cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert "eks-training:jobs.bad.nodeGroup: 'gpu' is not a worker group" in done.stderr
    assert not (tmp_path / "work").exists()


def test_a_virtualenv_for_an_image_the_stack_does_not_have_exits_2(tmp_path: Path) -> None:
    done = local("--stack", "tensorflow", "--work", str(tmp_path / "work"), "--venv", "tf=.venv-tf", cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert "--venv tf: no such image in this stack; its images: " in done.stderr and "tensorflow" in done.stderr
    assert not (tmp_path / "work").exists()
