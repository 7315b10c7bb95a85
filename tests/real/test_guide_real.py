"""The own-job tutorial (``docs/tutorials/your-own-job.md``) runs exactly as written: each example's files,
taken from the page (``<!-- example NAME: file PATH -->`` before a block), are written into a folder of their own
outside the repository, its command (``<!-- example NAME: run -->``, the ``$`` line) runs in that folder with this
Python, and every line the page shows after it is in the output (``...`` stands for what differs from run to run:
paths, times, the pod that holds rank 0). The page's commands for each example's folder (``<!-- commands:
examples -->``: a shell given the clone's virtualenv and ``PYTHONPATH``, then the plan) run there too, this Python
and this clone standing for the page's ``~/eks-training``."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guide_page import EXAMPLES, FOR_EACH, SETUP
from tests.harness import REPO
from tests.wait import patient


def _matches(pattern: str, line: str) -> bool:
    return re.fullmatch(".*?".join(re.escape(part) for part in pattern.split("...")), line) is not None


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_runs_as_written(name: str, tmp_path: Path) -> None:
    entry = EXAMPLES[name]
    folder = tmp_path / name
    for path, text in entry["files"].items():  # type: ignore[union-attr]
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    command, *expected = entry["run"]  # type: ignore[misc]
    assert command.startswith("$ python -m stacks local "), command
    argv = shlex.split(command[2:])
    # the repository's packages, as an install would give them; nothing of the page's folder is changed
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    for line in FOR_EACH[len(SETUP) :]:  # after the setup, which env and this Python stand for
        written = shlex.split(line)
        assert written[0] == "python", line
        planned = subprocess.run(
            [sys.executable, *written[1:]], cwd=folder, env=env, capture_output=True, text=True, timeout=patient(120)
        )
        assert planned.returncode == 0, planned.stderr
        assert "plan of stack mine" in planned.stdout, planned.stdout
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=folder, env=env, capture_output=True, text=True, timeout=patient(600)
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for pattern in expected:
        assert any(_matches(pattern, line) for line in lines), f"{pattern!r} not in:\n{done.stdout}"
