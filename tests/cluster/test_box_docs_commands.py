"""The box's commands of the rehearse guide (``docs/how-to/rehearse.md``) run as written: every shell block marked
``<!-- commands: box ... -->`` is run by bash in the repository's folder, with this Python first on ``PATH``, and
exits as the marker says (0, or the ``exits N`` it names). A block marked ``long`` runs with the smaller size the
marker names (``--nodes 16 --run-ms 5000`` for the 1,024-node benchmark, which is not a timed test).

Each block runs in a folder of its own: the boxes' state goes to a ``clusters`` folder beside a link to the binaries'
cache (``EKS_TRAINING_BOX_CACHE``), so the blocks' default box names (``eks-training``, ``rehearse-dev``) never meet
another test's box, while the binaries and the locks that order the boxes' creation stay the shared ones."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.box import build as box_build
from tests.command_pages import box_blocks
from tests.harness import REPO
from tests.wait import patient

BLOCKS = box_blocks()


@pytest.mark.parametrize("marker, block", BLOCKS, ids=[b.splitlines()[0] for _, b in BLOCKS])
def test_a_box_block_runs_as_written(marker: str, block: str, binaries, tmp_path: Path) -> None:
    expected = int(m.group(1)) if (m := re.search(r"exits (\d+)", marker)) else 0
    if (m := re.search(r"long: the cluster tier runs it with ((?:--\S+ \S+ ?)+)", marker)) is not None:
        for option, value in re.findall(r"(--\S+) (\S+)", m.group(1)):  # each replaces the block's, or is added
            if re.search(rf"{re.escape(option)} \S+", block):
                block = re.sub(rf"{re.escape(option)} \S+", f"{option} {value}", block)
            else:
                block = block.rstrip("\n") + f" {option} {value}\n"
    (tmp_path / "box").symlink_to(box_build.cache_root().resolve(), target_is_directory=True)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "EKS_TRAINING_BOX_CACHE": str(tmp_path / "box"),
        "PYTHONUNBUFFERED": "1",
    }
    flags = "-euo" if expected == 0 else "-uo"
    done = subprocess.run(
        ["bash", flags, "pipefail", "-c", block],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=patient(900),
    )
    try:
        assert done.returncode == expected, f"{block}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        assert (done.stdout + done.stderr).strip()
    finally:
        clusters = tmp_path / "clusters"
        for name in (p.name for p in clusters.iterdir()) if clusters.is_dir() else ():
            subprocess.run(
                [sys.executable, "-m", "stacks", "box", "down", "--name", name],
                cwd=REPO,
                env=env,
                capture_output=True,
                timeout=patient(300),
            )
