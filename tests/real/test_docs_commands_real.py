"""The offline commands of the tutorials and how-to guides run as written: every shell block marked
``<!-- commands: offline -->`` is run by bash in the repository's folder, with this Python first on ``PATH`` (the
pages' ``python`` is the one the tutorial's virtual environment gives), and must exit 0 and print. What needs a
download, an AWS account or the box's binaries says so in its own marker (``tests/unit/test_docs_prose.py``); the
own-job examples run in ``tests/real/test_guide_real.py``."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.command_pages import offline_blocks
from tests.harness import REPO
from tests.wait import patient

BLOCKS = offline_blocks()


@pytest.mark.parametrize("page, block", BLOCKS, ids=[f"{p}:{b.splitlines()[0]}" for p, b in BLOCKS])
def test_an_offline_block_runs_as_written(page: str, block: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),  # nothing of the user's: no Pulumi, no AWS settings
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("AWS_PROFILE", None)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=patient(300),
    )
    assert done.returncode == 0, f"{page}: {block}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{page}: {block} printed nothing"
