"""The plan and preflight commands as a user runs them (python -m ..., real processes)."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.harness import REPO
from tests.unit.test_plan_cli import BAD, GROUPS, _stack_file, call, offline_env, run
from tests.wait import patient


def test_the_commands_as_a_user_runs_them(tmp_path: Path) -> None:
    """One case of each outcome as ``python -m ...`` (a fresh Python, the offline environment): exit code, output
    and errors are exactly those of the in-process calls tests/unit/test_plan_cli.py checks."""
    bad = _stack_file(tmp_path / "bad", {f"eks-training:{k}": v for k, v in BAD[1][1].items()})
    good = _stack_file(tmp_path / "good", {"eks-training:nodeGroups": {"cpu": GROUPS["cpu"]}})
    cases = [
        ("stacks.plan", "--stack", "workshop"),  # 0
        ("stacks.plan", "--stack", "workshop", "--json"),
        ("stacks.plan", "--stack", "mine", "--stack-file", str(bad)),  # 2
        ("stacks.preflight", "--stack", "mine", "--stack-file", str(bad)),
        ("stacks.preflight", "--stack", "mine", "--stack-file", str(good)),  # 1: no AWS here
        ("stacks.plan", "--stack", "nothing", "--stack-file", str(tmp_path / "Pulumi.nothing.yaml")),  # 2
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        ran = list(pool.map(lambda case: run(*case, home=tmp_path), cases))
    assert [done.returncode for done in ran] == [0, 0, 2, 2, 1, 2], [done.stderr for done in ran]
    for case, done in zip(cases, ran, strict=True):
        expected = call(*case, home=tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (expected.returncode, expected.stdout, expected.stderr), (
            case
        )


def test_a_reader_that_stops_early_ends_the_plan_quietly(tmp_path: Path) -> None:
    """``python -m stacks.plan --stack dev | head``: the pipe closes before the plan is written; the command ends
    with 141 (128 + SIGPIPE, as Unix tools do) and no BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacks.plan", "--stack", "dev"],
        cwd=REPO,
        env=offline_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    assert proc.wait(patient(120)) == 141 and err == "", err
