"""The README's "Bring your own job" guide runs exactly as written (issue 19): each example's files, taken from the
README (``<!-- example NAME: file PATH -->`` before a block), are written into a folder of their own outside the
repository, its command (``<!-- example NAME: run -->``, the ``$`` line) runs in that folder with this Python, and every
line the README shows after it is in the output (``...`` stands for what differs from run to run: paths, times, the
pod that holds rank 0). The stack file is also planned (``python -m stacks.plan``), as the guide says."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO

_MARK = re.compile(r"<!-- example ([\w-]+): (file (\S+)|run) -->\n```\w*\n(.*?)```", re.S)


def examples() -> dict[str, dict[str, object]]:
    """Example name -> ``{"files": {path: text}, "run": [lines]}`` from the README."""
    out: dict[str, dict[str, object]] = {}
    for m in _MARK.finditer((REPO / "README.md").read_text()):
        name, what, path, body = m.groups()
        entry = out.setdefault(name, {"files": {}, "run": None})
        if what == "run":
            entry["run"] = body.rstrip("\n").splitlines()
        else:
            entry["files"][path] = body  # type: ignore[index]
    return out


EXAMPLES = examples()


def test_the_guide_has_an_example_of_each_kind() -> None:
    assert set(EXAMPLES) == {"pytorch", "command", "mpi"}
    for name, entry in EXAMPLES.items():
        assert entry["run"] and entry["files"], name


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
    assert command.startswith("$ python -m stacks.local "), command
    argv = shlex.split(command[2:])
    # the repository's packages, as an install would give them; nothing of the README's folder is changed
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    planned = subprocess.run(
        [sys.executable, "-m", "stacks.plan", "--stack", "mine"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert planned.returncode == 0, planned.stderr
    done = subprocess.run([sys.executable, *argv[1:]], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for pattern in expected:
        assert any(_matches(pattern, line) for line in lines), f"{pattern!r} not in:\n{done.stdout}"
