"""Every pytorch job's command runs its script through training/run_script.py."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "training"
RUN_SCRIPT = TRAINING / "run_script.py"
if str(TRAINING) not in sys.path:
    sys.path.insert(0, str(TRAINING))

import launch  # noqa: E402


def test_a_pytorch_jobs_command_runs_its_script_through_run_script() -> None:
    """The job's command names the script, so run_script.py goes right before it whatever its name (no guessing from
    a ``.py`` suffix), beside the launcher in the image; the goodput record names the user's program."""
    from components.workloads.training import LAUNCHER, pytorch_command
    from components.workloads.training import RUN_SCRIPT as IN_IMAGE

    spec = {"output_dir": "/data/runs/x", "args": ["--config", "cfg.py"]}
    placement = {"procs_per_node": 1}
    command = pytorch_command(
        spec,
        placement,
        script="mytool",
        run_id="r",
        min_nodes=1,
        max_nodes=2,  # type: ignore[arg-type]
        backend="c10d",
        endpoint="127.0.0.1:29400",
    )
    torchrun = command[command.index("--") + 1 :]
    assert torchrun[0] == "torchrun"
    assert torchrun[-4:] == [IN_IMAGE, "mytool", "--config", "cfg.py"]
    assert IN_IMAGE.rsplit("/", 1) == [LAUNCHER.rsplit("/", 1)[0], launch.RUN_SCRIPT] and RUN_SCRIPT.is_file()
    assert launch.program_name(torchrun) == "mytool"
    assert launch.program_name([*torchrun[:-4], IN_IMAGE, "fit.py"]) == "fit.py"
    assert launch.program_name(["torchrun", "--nnodes=1", "/app/train.py"]) == "train.py"


def test_flushing_open_files_reads_no_other_object() -> None:
    """The end's scan for open files looks at each object's type only: an object whose attribute access warns (torch's
    deprecated ``torch.distributed.reduce_op``) is not touched, so a user's script ends without a warning of ours,
    while a file it left open is still flushed."""
    import io
    import warnings

    import run_script

    class Deprecated:
        def __getattribute__(self, name: str) -> object:
            warnings.warn("touched", FutureWarning, stacklevel=2)
            return object.__getattribute__(self, name)

    alias = Deprecated()
    unclosed = io.StringIO()
    written = io.BufferedWriter(io.BytesIO())
    written.write(b"left in the buffer")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_script.flush_open_files()
    assert written.raw.getvalue() == b"left in the buffer"  # type: ignore[attr-defined]
    assert alias is not None and not unclosed.closed


def test_quick_failures_in_a_row_end_the_run_and_anything_else_resets_the_count(tmp_path, monkeypatch) -> None:
    """The crash-loop budget of a script of your own: failures sooner than QUICK_FAILURE_S count, in a row; a success,
    a failure after a long attempt, and Ctrl-C reset the count. At ``MAX_FAILED_ATTEMPTS`` the wrapper writes FAILED
    (which the launcher reads) and ends the attempt with 0, so torchrun stops restarting."""
    import run_script

    monkeypatch.setattr(run_script, "quick_failures_file", lambda: tmp_path / "count")
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("MAX_FAILED_ATTEMPTS", "3")
    monkeypatch.delenv(run_script.OWN_BUDGET_ENV, raising=False)
    quick, slow = 1.0, run_script.QUICK_FAILURE_S + 1
    ends = [(1, quick), (1, quick), (0, quick), (1, quick), (1, slow), (1, quick), (run_script.INTERRUPTED, quick)]
    assert [run_script.end_status(code, s) for code, s in ends] == [1, 1, 0, 1, 1, 1, run_script.INTERRUPTED]
    assert not (tmp_path / "FAILED").exists()
    assert [run_script.end_status(4, quick) for _ in range(3)] == [4, 4, 0]
    failed = launch.read_failed(tmp_path)
    assert failed is not None and failed["failures"] == 3 and "the last exit status 4" in failed["reason"]
    # a program that keeps its own budget (the bundled trainer) is not counted; nor with maxRestarts 0
    (tmp_path / "FAILED").unlink()
    monkeypatch.setenv(run_script.OWN_BUDGET_ENV, "1")
    assert [run_script.end_status(4, quick) for _ in range(4)] == [4] * 4
    monkeypatch.delenv(run_script.OWN_BUDGET_ENV)
    monkeypatch.setenv("MAX_FAILED_ATTEMPTS", "0")
    assert [run_script.end_status(4, quick) for _ in range(4)] == [4] * 4
    assert run_script.FAILED_MARKER == launch.FAILED_MARKER


def test_the_documents_give_the_budgets_window() -> None:
    import run_script

    minutes = f"{run_script.QUICK_FAILURE_S / 60:g} minutes"
    assert f"within {minutes} of starting" in (REPO / "docs/reference/job-contract.md").read_text()
    from stacks.config.jobs import JobConfig

    assert f"within {minutes} of starting" in " ".join(JobConfig.model_fields["max_restarts"].description.split())
