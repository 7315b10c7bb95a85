"""What the local runner says, as pure functions over logs and folders: the progress it shows
from the pods' logs, a failure's one-line reason and fix, the results of a job's folder, the pod paths it maps
(``/workspace`` too), and the ``--dataset`` folder's layout, checked. The runs themselves:
tests/real/test_local_real.py."""

import io
import json
import sys
from pathlib import Path

import pytest

from stacks.config.datasets import CIFAR10_FILES, CIFAR10_FOLDER, CIFAR10_URL
from stacks.local.datasets import dataset_layout
from stacks.local.report import LocalRunError, LogFollower, PodProgress, failure, progress_line, results
from stacks.local.runner import LocalRunner
from tests.harness import REPO
from tests.mock.test_local import _runner

TRAINER_EPOCH = {
    "event": "epoch",
    "epoch": 3,
    "epochs": 6,
    "step": 69,
    "train_loss": 0.51234,
    "train_accuracy": 0.81,
    "test_accuracy": 0.853,
    "images_per_sec": 120.5,
    "world_size": 2,
}


def test_progress_shows_the_jobs_lines_and_leaves_torchruns_in_the_log() -> None:
    assert progress_line(json.dumps(TRAINER_EPOCH)) == (
        "epoch 3/6, step 69, loss 0.5123, accuracy 0.81, test accuracy 0.853, images/s 120.5"
    )
    assert progress_line('{"event": "evaluation", "accuracy": 0.9293, "output_json": "/x/evaluation.json"}') == (
        "evaluation: accuracy 0.9293 (/x/evaluation.json)"
    )
    assert progress_line("done: w=3.000 b=2.000\n") == "done: w=3.000 b=2.000"  # the job's own words
    assert progress_line('{"step": 10, "loss": 0.5}') == '{"step": 10, "loss": 0.5}'  # the job's own metrics
    for noise in (
        "I1125 20:49:47.229000 26970 torch/distributed/run.py:747] Using nproc_per_node=1.",
        '{"event": "spawn", "component": "launch", "command": ["torchrun"]}',
        "frame #3: <unknown function> + 0x66ac05d (0x7f749c8ac05d in libtorch_cpu.so)",
        "[W1125 20:49:59.000000000 TCPStore.cpp:125] [c10d] recvValue failed",
        "",
    ):
        assert progress_line(noise) is None, noise
    done = progress_line('{"event": "already_complete", "component": "launch"}', "train") or ""
    assert "already complete" in done and done.endswith("--fresh train starts anew"), done  # the job's own name


#: torchrun's traceback when the runner stops it on Ctrl-C (torch 2.13.0, a local run of the dev stack).
TORCHRUN_STOPPED = """Traceback (most recent call last):
  File "/venv/bin/torchrun", line 10, in <module>
    sys.exit(main())
  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 923, in _invoke_run
    time.sleep(monitor_interval)
  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 86, in \
_terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 16626 got signal: 15
"""
JOBS_OWN = """Traceback (most recent call last):
  File "/work/my_train.py", line 3, in <module>
    raise ValueError("no data")
ValueError: no data
"""


def test_a_traceback_is_shown_whole_unless_it_is_torchruns_stop(tmp_path: Path) -> None:
    """The job's own traceback is shown as it is, even when it reaches the log in two parts; torchrun's when the
    runner stopped it (Ctrl-C) is left in the log, as its other bookkeeping is."""
    log = tmp_path / "train-0.log"
    progress = PodProgress(LogFollower(log))
    own = JOBS_OWN.splitlines()
    log.write_text(json.dumps(TRAINER_EPOCH) + "\n" + "\n".join(own[:2]) + "\n")
    assert progress.lines() == ["epoch 3/6, step 69, loss 0.5123, accuracy 0.81, test accuracy 0.853, images/s 120.5"]
    with open(log, "a") as f:
        f.write("\n".join(own[2:]) + "\n" + '{"event": "stopping", "text": "SIGTERM"}\n' + TORCHRUN_STOPPED)
    assert progress.lines() == [*own, "stopping: SIGTERM"]
    assert progress.rest() == []
    # a traceback the pod had not finished when it exited is shown at the end
    log.write_text("")
    cut = PodProgress(LogFollower(log))
    log.write_text("\n".join(own[:3]) + "\n")
    assert cut.lines() == [] and cut.rest() == own[:3]


def test_a_log_is_followed_line_by_line(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    follower = LogFollower(log)
    assert follower.lines() == []
    log.write_text("one\ntw")
    assert follower.lines() == ["one"]
    with open(log, "a") as f:
        f.write("o\nthree\n")
    assert follower.lines() == ["two", "three"] and follower.lines() == []


@pytest.mark.parametrize(
    "log,code,reason,fix",
    [
        (
            "Traceback (most recent call last):\n  File \"x.py\", line 1\nModuleNotFoundError: No module named "
            "'torch'\n",
            1,
            "PyTorch is not installed in the Python the job runs with",
            "pip install torch --index-url https://download.pytorch.org/whl/cpu",
        ),
        (
            '{"event": "exec_failed", "component": "launch", "command": ["torchrun", "x"]}\n',
            127,
            "torchrun could not be started (not found)",
            "torchrun comes with PyTorch",
        ),
        (
            '{"event": "run_failed", "component": "launch", "failed": {"reason": "3 attempts in a row failed"}}\n',
            3,
            "the run gave up: 3 attempts in a row failed",
            "a change to the job's code folder or args makes a run of its own; otherwise add --fresh train (a new run",
        ),
        (
            '{"event": "command_exit", "component": "launch", "command_code": 0, "exit_code": 3, "outcome": '
            '"run_failed", "failed": {"text": "no data in /data/x"}}\n',
            3,
            "the run gave up: no data in /data/x",
            "--fresh train (a new run",
        ),
        (
            "Traceback (most recent call last):\nFileNotFoundError: [Errno 2] No such file or directory: "
            "'/workspace/a.py'\n",
            1,
            "FileNotFoundError: [Errno 2] No such file or directory: '/workspace/a.py'",
            "--code train=PATH",
        ),
        (
            "some output\nValueError: bad learning rate\nexiting\n",
            1,
            "ValueError: bad learning rate",
            "the end of the log",
        ),
        (  # torchrun's summary after a rank's own exception: the program's is the reason
            "[rank1]: Traceback (most recent call last):\n[rank1]: FileNotFoundError: [Errno 2] No such file or "
            "directory: '$(DATA_DIRR)/points.csv'\nE1201 12:00:00 torch/distributed/elastic failed\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\nroot cause (first observed failure)\n",
            1,
            "FileNotFoundError: [Errno 2] No such file or directory: '$(DATA_DIRR)/points.csv'",
            "the end of the log",
        ),
        (  # torchrun stopped by a signal, and nothing of the program's: torchrun's own is the reason
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 3967 got signal: 15\n",
            1,
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 3967 got signal: 15",
            "the end of the log",
        ),
    ],
)
def test_a_failure_is_one_line_with_its_fix(log: str, code: int, reason: str, fix: str) -> None:
    got_reason, got_fix = failure(log, code, "python", "train")
    assert got_reason == reason and fix in got_fix, (got_reason, got_fix)
    assert "\n" not in got_reason


def test_results_name_the_metrics_and_the_evaluation(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text(
        json.dumps(
            {
                "final_accuracy": 0.9123,
                "final_loss": 0.3,
                "throughput": 250.0,
                "throughput_unit": "images/s",
                "wall_time_s": 61.2,
            }
        )
    )
    (tmp_path / "evaluation.json").write_text(json.dumps({"accuracy": 0.93, "total": 297}))
    (tmp_path / ".DONE.x.tmp").write_text("")
    assert results(tmp_path) == [
        "metrics.json: accuracy 0.9123, loss 0.3, wall time s 61.2, throughput 250 images/s",
        "evaluation.json: accuracy 0.93 on 297 images",
        "files: evaluation.json, metrics.json",
    ]


def test_workspace_maps_to_the_jobs_code_folder(tmp_path: Path) -> None:
    runner = _runner("dev", tmp_path)
    code = tmp_path / "code"
    mapped = runner.host_path(
        "/workspace/train.py --data /data/x --out /tmp/y", REPO / "training", tmp_path / "t", code
    )
    assert mapped == f"{code}/train.py --data {tmp_path}/shared/x --out {tmp_path}/t/y"
    # a path of this machine already (a work folder under /tmp, as the runner's MPI hostfile is) is not mapped again
    work_file = f"{tmp_path}/tmp/job-hostfile"
    assert work_file.startswith("/tmp/") and runner.host_path(work_file, REPO / "training", tmp_path / "t") == work_file


def test_the_cifar10_layout_is_the_trainers() -> None:
    sys.path.insert(0, str(REPO / "training"))
    try:
        import cifar_io
    finally:
        sys.path.remove(str(REPO / "training"))
    assert (CIFAR10_FOLDER, CIFAR10_FILES) == (cifar_io.BATCH_DIR_NAME, cifar_io.EXPECTED_FILES)


def _batches(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in CIFAR10_FILES:
        (folder / name).write_bytes(b"x")
    return folder


def test_the_dataset_folder_is_checked_and_a_staged_copy_is_not_in_the_way(tmp_path: Path) -> None:
    runner = _runner("dev", tmp_path / "work")
    runner.out = io.StringIO()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LocalRunError) as refused:
        LocalRunner(**{**runner.__dict__, "datasets": {"cifar10": empty}}).stage("cifar10")
    assert str(refused.value) == (
        f"--dataset cifar10={empty}: {', '.join(CIFAR10_FILES)} missing; give {dataset_layout(CIFAR10_URL)}. "
        "datasets.cifar10 has no source, so it is CIFAR-10: for your own data, set datasets.cifar10.source to its "
        "tarball (s3:// or https://)"
    )  # dev's `cifar10: {}`: a user's `mydata: {}` is CIFAR-10 too, which the message says
    staged = tmp_path / "work" / "shared" / "datasets" / "cifar10"
    (staged / ".download.part").parent.mkdir(parents=True)
    (staged / ".download.part").write_text("half")  # a staging cut short
    batches = _batches(tmp_path / "mine" / CIFAR10_FOLDER)
    given = LocalRunner(**{**runner.__dict__, "datasets": {"cifar10": batches}})
    given.stage("cifar10")  # the batch folder itself: held under its own name, so DATA_DIR has the usual layout
    assert sorted(p.name for p in staged.iterdir()) == [CIFAR10_FOLDER]
    assert (staged / CIFAR10_FOLDER).resolve() == batches.resolve()
    assert [p.name for p in staged.parent.glob("cifar10.staged-*")]  # kept aside, not deleted
    parent = LocalRunner(**{**runner.__dict__, "datasets": {"cifar10": batches.parent}})
    parent.stage("cifar10")  # the folder holding it: linked as it is
    assert staged.resolve() == batches.parent.resolve()
