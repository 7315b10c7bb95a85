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
