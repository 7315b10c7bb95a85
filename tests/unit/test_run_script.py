"""Every pytorch job's command runs its script through training/run_script.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.local import report
from tests.wait import patient

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "training"
RUN_SCRIPT = TRAINING / "run_script.py"
if str(TRAINING) not in sys.path:
    sys.path.insert(0, str(TRAINING))

import launch  # noqa: E402
import launch_markers  # noqa: E402
from run_script import LAUNCHER_ENV  # noqa: E402


def test_a_pytorch_jobs_command_runs_its_script_through_run_script() -> None:
    """The job's command names the script, so run_script.py goes right before it whatever its name (no guessing from
    a ``.py`` suffix), beside the launcher in the image; the goodput record names the user's program."""
    from components.workloads.pytorch import LAUNCHER, pytorch_command
    from components.workloads.pytorch import RUN_SCRIPT as IN_IMAGE

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


def _under_the_launcher(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, attempts: int) -> Path:
    """The wrapper's budget as the launcher sets it (``MAX_FAILED_ATTEMPTS``, its output folder ``tmp_path``), for a
    script without its own; the file it counts in, returned."""
    import run_script

    state = tmp_path / "count"
    monkeypatch.setattr(run_script, "quick_failures_file", lambda: state)
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("MAX_FAILED_ATTEMPTS", str(attempts))
    monkeypatch.setenv(LAUNCHER_ENV, "1")
    monkeypatch.delenv(run_script.OWN_BUDGET_ENV, raising=False)
    return state


def test_quick_failures_in_a_row_end_the_run_and_anything_else_resets_the_count(tmp_path, monkeypatch) -> None:
    """The crash-loop budget of a script of your own, under the launcher: failures sooner than QUICK_FAILURE_S count,
    in a row; a success, a failure after a long attempt, and Ctrl-C reset the count. At ``MAX_FAILED_ATTEMPTS`` the
    wrapper writes FAILED (which the launcher reads) and keeps the failing status, so torchrun stops the other ranks
    and starts them again, to find FAILED."""
    import run_script

    state = _under_the_launcher(monkeypatch, tmp_path, attempts=3)
    quick, slow = 1.0, run_script.QUICK_FAILURE_S + 1
    ends = [(1, quick), (1, quick), (0, quick), (1, quick), (1, slow), (1, quick), (run_script.INTERRUPTED, quick)]
    assert [run_script.end_status(code, s) for code, s in ends] == [code for code, _ in ends]
    assert not (tmp_path / "FAILED").exists() and not state.exists(), "a count of 0 leaves no file"
    assert [run_script.end_status(4, quick) for _ in range(3)] == [4, 4, 4]
    assert not state.exists(), "the run is over: its count is removed"
    failed = launch_markers.read_failed(tmp_path)
    assert failed is not None and failed["failures"] == 3 and "the last exit status 4" in failed["reason"]
    # an attempt that ran QUICK_FAILURE_S made progress, however it ends: the timer restarts the count
    state.write_text("2")
    run_script.write_count(state, 0)  # what reset_after_progress's timer calls
    assert run_script.quick_failures(state, 4, quick) == 1


def _wrapper_env(tmp_path: Path, out: Path, *, attempts: int, run_id: str) -> dict[str, str]:
    """The environment the launcher gives the wrapper: a budget of ``attempts``, FAILED in ``out``."""
    import run_script

    env = {
        **os.environ,
        "OUTPUT_DIR": str(out),
        "MAX_FAILED_ATTEMPTS": str(attempts),
        LAUNCHER_ENV: "1",
        "TMPDIR": str(tmp_path),
        "TORCHELASTIC_RUN_ID": run_id,
    }
    env.pop(run_script.OWN_BUDGET_ENV, None)
    return env


def test_a_stop_and_a_lost_peer_are_no_failure_of_the_script(tmp_path, monkeypatch) -> None:
    """A script that stops in order exits 75 (as the job contract asks) or 143: no failure, the count starts again. A
    rank whose collective failed because another rank's process went away (gloo's ``Connection closed by peer``, as
    torch 2.13 raises it) is not counted either, nor does it reset the count: the rank that crashed counts its own.
    Any other exception still counts."""
    import run_script

    state = _under_the_launcher(monkeypatch, tmp_path, attempts=2)
    assert run_script.STOPPED == (75, 143)
    assert [run_script.end_status(code, 1.0) for code in (1, 75, 1, 143)] == [1, 75, 1, 143]
    assert not (tmp_path / "FAILED").exists() and not state.exists()
    assert run_script.end_status(1, 1.0) == 1 and state.read_text().strip() == "1"
    assert run_script.end_status(1, 1.0, peer_lost=True) == 1 and state.read_text().strip() == "1"
    assert not (tmp_path / "FAILED").exists()
    peer = RuntimeError(
        "[third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:54508. This is "
        "typically caused by a remote worker crashing."
    )
    assert run_script.lost_peer(peer) and not run_script.lost_peer(ValueError("bad --lr"))
    # the wrapper as the launcher runs it, a budget of one attempt: only the script's own failure gives up
    out = tmp_path / "out"
    env = _wrapper_env(tmp_path, out, attempts=1, run_id="peer-test")
    for body, status, gives_up in (
        (f"raise RuntimeError({str(peer)!r})", 1, False),
        ("raise SystemExit(75)", 75, False),
        ("raise ValueError('bad --lr')", 1, True),
    ):
        out.mkdir(exist_ok=True)
        (tmp_path / "script.py").write_text(body + "\n")
        done = subprocess.run(
            [sys.executable, str(RUN_SCRIPT), str(tmp_path / "script.py")],
            env=env,
            capture_output=True,
            timeout=patient(60),
        )
        assert (done.returncode, (out / "FAILED").exists()) == (status, gives_up), (body, done.stderr[-2000:])


def test_arguments_argparse_refuses_end_the_run_at_the_first_attempt(tmp_path, monkeypatch) -> None:
    """argparse's usage error (exit 2 from ``ArgumentParser.error``) fails every attempt with the same arguments: the
    wrapper writes FAILED with argparse's message at once, whatever the budget. A script's own ``sys.exit(2)`` is one
    more quick failure, as before."""
    import launch_markers
    import run_script

    out = tmp_path / "out"
    env = _wrapper_env(tmp_path, out, attempts=4, run_id="args-test")
    argparse_script = (
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float)\np.parse_args()\n"
    )
    parser = "import argparse\np = argparse.ArgumentParser()\n"
    own_check = parser + "p.parse_args()\np.error('no data in /data/x')\n"
    missing_file = parser + "p.add_argument('f', type=argparse.FileType())\np.parse_args()\n"
    for body, args, gives_up in (
        (argparse_script, ["--lrr", "0.1"], True),
        (argparse_script, ["--lr", "fast"], True),
        ("import sys\nsys.exit(2)\n", [], False),
        (own_check, [], False),  # the script's own check, after the parse: a failure like any other
        (missing_file, ["/nonexistent/list.txt"], False),  # a file not there yet may be there at the next attempt
    ):
        out.mkdir(exist_ok=True)
        (out / "FAILED").unlink(missing_ok=True)
        (tmp_path / "script.py").write_text(body)
        done = subprocess.run(
            [sys.executable, str(RUN_SCRIPT), str(tmp_path / "script.py"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=patient(60),
        )
        assert done.returncode == 2, done.stderr[-2000:]
        failed = launch_markers.read_failed(out)
        assert (failed is not None) == gives_up, (body, args, done.stderr[-2000:])
        if failed is not None:
            given = failed
            assert failed["reason"].startswith("the script refused its arguments (script.py: error: "), failed
            assert ("unrecognized arguments: --lrr 0.1" if "--lrr" in args else "invalid float value: 'fast'") in (
                failed["reason"]
            ), failed
            assert failed["reason"].endswith("): fix the job's args"), failed
    # a usage error raised by hand (not from argparse's exit) is no refusal of the arguments
    assert run_script.refused_arguments(SystemExit(2)) is None
    # the local runner's report tells it by its words, and gives the fix: the job's args, no --fresh
    assert report.REFUSED == run_script.REFUSED
    reason, fix = report.failure(
        json.dumps({"event": "run_failed", "component": "launch", "failed": given}), 3, "", "fit"
    )
    assert reason == f"the run gave up: {given['reason']}" and "--args fit=..." in fix and "--fresh fit" not in fix


@pytest.mark.parametrize("unset", ["launcher", "own budget", "MAX_FAILED_ATTEMPTS 0", "no OUTPUT_DIR"])
def test_the_budget_applies_only_under_the_launcher_to_a_program_without_its_own(tmp_path, monkeypatch, unset) -> None:
    """Without the launcher (a pytorch job on another image runs torchrun alone) a FAILED would end nothing; a program
    that keeps its own budget (the bundled trainer) is not counted; MAX_FAILED_ATTEMPTS 0 is no budget (a job's
    maxRestarts 0 sets it to 1)."""
    import run_script

    monkeypatch.setattr(run_script, "quick_failures_file", lambda: tmp_path / "count")
    env = {"OUTPUT_DIR": str(tmp_path), "MAX_FAILED_ATTEMPTS": "1", LAUNCHER_ENV: "1"}
    monkeypatch.delenv(run_script.OWN_BUDGET_ENV, raising=False)
    if unset == "launcher":
        env.pop(LAUNCHER_ENV)
    elif unset == "own budget":
        env[run_script.OWN_BUDGET_ENV] = "1"
    elif unset == "MAX_FAILED_ATTEMPTS 0":
        env["MAX_FAILED_ATTEMPTS"] = "0"
    else:
        env.pop("OUTPUT_DIR")
    for k in ("OUTPUT_DIR", "MAX_FAILED_ATTEMPTS", LAUNCHER_ENV):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert [run_script.end_status(4, 1.0) for _ in range(3)] == [4, 4, 4]
    assert not (tmp_path / "FAILED").exists() and not (tmp_path / "count").exists()


def test_a_count_that_cannot_be_written_changes_no_status(tmp_path, monkeypatch) -> None:
    import run_script

    monkeypatch.setattr(run_script, "quick_failures_file", lambda: tmp_path / "no-such-folder" / "count")
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path))
    monkeypatch.setenv("MAX_FAILED_ATTEMPTS", "3")
    monkeypatch.setenv(LAUNCHER_ENV, "1")
    monkeypatch.delenv(run_script.OWN_BUDGET_ENV, raising=False)
    assert [run_script.end_status(code, 1.0) for code in (0, 4)] == [0, 4]


def test_the_documents_give_the_budgets_window() -> None:
    import run_script

    minutes = f"{run_script.QUICK_FAILURE_S / 60:g} minutes"
    assert f"within {minutes} of starting" in (REPO / "docs/reference/job-contract.md").read_text()
    from stacks.config.jobs import JobConfig

    assert f"within {minutes} of starting" in " ".join(JobConfig.model_fields["max_restarts"].description.split())


def test_the_line_of_a_start_is_the_one_the_goodput_ledger_reads(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """run_script states the ledger's component itself (it imports no module of the image's but process_end): the
    line it prints on rank 0 opens an attempt in :class:`goodput.LineWatcher`; other ranks print nothing."""
    import goodput
    import run_script

    assert run_script.COMPONENT == goodput.WRAPPER
    monkeypatch.setenv("RANK", "1")
    run_script.announce_start()
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("RANK", "0")
    run_script.announce_start()
    line = capsys.readouterr().out
    opened: list[object] = []

    class Ledger:
        source = "pod"

        def record(self, kind: str, **fields: object) -> None:
            opened.append(kind)

    goodput.LineWatcher(Ledger()).line(line)  # type: ignore[arg-type]
    assert opened == ["start"]


def test_failed_is_read_as_given_up_only_when_it_exists(tmp_path, monkeypatch) -> None:
    """FAILED as plain text is its reason; a FAILED that cannot be read (a folder) still means the run gave up; a read
    that fails while no FAILED exists (an I/O error on the shared volume) is neither: LaunchError, and the launcher
    exits 1 (retried) instead of 3 (the Job failed) or going on to train and record DONE."""
    import errno

    assert launch_markers.read_failed(tmp_path) is None
    (tmp_path / "FAILED").write_text("out of data\n")
    assert launch_markers.read_failed(tmp_path) == {"text": "out of data"}
    (tmp_path / "FAILED").unlink()
    (tmp_path / "FAILED").mkdir()
    assert launch_markers.read_failed(tmp_path) == {}
    (tmp_path / "FAILED").rmdir()

    read_text = Path.read_text

    def eio(self: Path, *args, **kwargs) -> str:
        if self.name == "FAILED":
            raise OSError(errno.EIO, "Input/output error", str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", eio)
    with pytest.raises(launch.LaunchError, match="cannot read .*FAILED"):
        launch_markers.read_failed(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    argv = ["--output-dir", str(out), "--rdzv-backend", "c10d", "--rdzv-id", "eio", "--", sys.executable, "-c", "0"]
    assert launch.main(argv) == launch.EXIT_FAILURE
    assert not (out / "DONE").exists()
    # the same error once the command exited 0 (FAILED read again for the pod's code): 1, and no DONE recorded
    real = launch_markers.read_failed
    monkeypatch.setattr(Path, "read_text", read_text)
    reads: list[Path] = []

    def second_fails(folder: Path) -> object:
        reads.append(folder)
        if len(reads) > 2:  # before the command, and the ledger's read after it, succeed
            raise launch.LaunchError(f"cannot read {folder / 'FAILED'}: EIO")
        return real(folder)

    monkeypatch.setattr(launch, "read_failed", second_fails)
    assert launch.main(argv) == launch.EXIT_FAILURE and not (out / "DONE").exists()
    monkeypatch.undo()
    assert launch.main(argv) == launch.EXIT_OK and (out / "DONE").is_file(), "the same launch, FAILED readable"
