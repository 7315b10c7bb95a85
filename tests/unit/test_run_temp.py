"""The processes a test run starts write their temporary files in a folder of the run, which the run removes at its
end, so torchrun's ``torchelastic_*`` logs, multiprocessing's ``pymp-*`` and TensorFlow's autograph files stay out of
the machine's ``/tmp`` (tests/conftest.py ``temp_of_the_run``)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest


def test_a_process_the_tests_start_writes_in_the_runs_temporary_folder() -> None:
    folder = Path(os.environ["TMPDIR"])
    assert folder.name.startswith(conftest.TEMP_PREFIX) and folder.is_dir()
    made = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp(prefix='torchelastic_'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(made).parent == folder


def test_the_run_removes_its_temporary_folder_at_its_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    folder = Path(conftest.temp_of_the_run())
    assert folder.parent == tmp_path and os.environ["TMPDIR"] == str(folder)
    (folder / "torchelastic_x").mkdir()
    stash = pytest.Stash()
    stash[conftest._temp] = str(folder)
    conftest.pytest_unconfigure(SimpleNamespace(stash=stash))  # type: ignore[arg-type]
    assert not folder.exists() and tmp_path.is_dir()
