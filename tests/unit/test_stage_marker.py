"""The staging's check that an earlier staging is intact (training/stage_data.py ``already_staged``), called directly
on a temporary folder: every file its marker lists is there, a regular file of the listed size, checked many at a
time (on EFS each check is a round trip). The real-process runs (tests/real/test_training_real.py) show the whole
staging skip a second download."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"
if str(TRAINING_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINING_DIR))

import stage_data  # noqa: E402

pytestmark = pytest.mark.unit

SOURCE = "https://example.com/data.tar.gz"


def staged(dest: Path, n: int = 10) -> dict[str, Any]:
    """A staging of ``n`` files in two folders, with its marker."""
    files = {}
    for i in range(n):
        path = dest / f"part-{i % 2}" / f"{i}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * i)
        files[path.relative_to(dest).as_posix()] = i
    marker = {"source": SOURCE, "md5": None, "entries": ["part-0", "part-1"], "files": files}
    (dest / stage_data.MARKER_NAME).write_text(json.dumps(marker))
    return marker


def _shrink(dest: Path) -> None:
    (dest / "part-1" / "9.bin").write_bytes(b"x")


def _remove(dest: Path) -> None:
    (dest / "part-0" / "4.bin").unlink()


def _folder(dest: Path) -> None:
    (dest / "part-0" / "0.bin").unlink()
    (dest / "part-0" / "0.bin").mkdir()


@pytest.mark.parametrize("damage", [_shrink, _remove, _folder], ids=["another-size", "missing", "a-folder"])
def test_a_damaged_file_in_any_batch_means_stage_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Callable[[Path], None]
) -> None:
    monkeypatch.setattr(stage_data, "STAT_BATCH", 3)  # 10 files: four batches, the last damaged file in the last
    marker = staged(tmp_path)
    assert stage_data.already_staged(tmp_path, SOURCE, None) == marker  # the control: intact
    damage(tmp_path)
    assert stage_data.already_staged(tmp_path, SOURCE, None) is None


def test_each_file_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = staged(tmp_path, n=200)
    seen: list[str] = []
    real = stage_data._intact

    def intact(path: Path, size: Any) -> bool:
        seen.append(path.name)
        return real(path, size)

    monkeypatch.setattr(stage_data, "_intact", intact)
    assert stage_data.already_staged(tmp_path, SOURCE, None) == marker
    assert sorted(seen) == sorted(Path(name).name for name in marker["files"])


def test_another_source_is_not_staged(tmp_path: Path) -> None:
    staged(tmp_path)
    assert stage_data.already_staged(tmp_path, "https://example.com/other.tar.gz", None) is None


def test_an_error_other_than_a_missing_file_fails_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An I/O error (or a stale NFS handle, a denied access) is not a damaged staging: the staging fails and its Job
    retries, rather than staging again over what training pods may be reading."""
    staged(tmp_path)
    real = Path.stat

    def stat(self: Path, **kwargs: Any) -> Any:
        if self.name == "7.bin":
            raise OSError(errno.EIO, "Input/output error", str(self))
        return real(self, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    with pytest.raises(OSError, match="Input/output error"):
        stage_data.already_staged(tmp_path, SOURCE, None)
