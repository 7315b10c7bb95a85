"""A job's code folder, content-addressed (components/job_code.py) and extracted in the pods (training/fetch_code.py):
the zip the program uploads is the same bytes for the same folder, and what the init container extracts is what
was in the folder (modes, symlinks), never anything outside its destination."""

import importlib.util
import os
import shutil
import stat
import warnings
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from components.code_folder import (
    DEFAULT_CODE_IGNORES,
    code_hash,
    code_key,
    code_zip_path,
    collect_code,
    stage_code,
    write_code_zip,
)
from tests.harness import REPO


def _fetch_code() -> ModuleType:
    """training/fetch_code.py as the init container runs it (a script of the toolbox image, not a package)."""
    spec = importlib.util.spec_from_file_location("fetch_code_under_test", REPO / "training" / "fetch_code.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fetch_code = _fetch_code()


def _project(root: Path, reverse: bool = False) -> Path:
    """A code folder: a script, a package, an executable, a symlink inside it; files written in either order."""
    files = [
        ("fit.py", b"print('fit')\n", 0o644),
        ("lib/util.py", b"X = 1\n", 0o600),
        ("run.sh", b"#!/bin/sh\necho hi\n", 0o750),
        ("lib/data/table.csv", b"a,b\n1,2\n", 0o644),
    ]
    for rel, body, mode in reversed(files) if reverse else files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        path.chmod(mode)
    (root / "lib" / "latest.csv").symlink_to("data/table.csv")
    return root


def _tree(root: Path) -> dict[str, tuple[str, object]]:
    """Relative path -> (kind, content or link target) and the mode of every file below ``root``."""
    out: dict[str, tuple[str, object]] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("symlink", os.readlink(p))
        elif p.is_file():
            out[rel] = (f"file {stat.S_IMODE(p.stat().st_mode):o}", p.read_bytes())
    return out


def test_the_same_folder_gives_the_same_hash_and_the_same_bytes(tmp_path: Path) -> None:
    a = _project(tmp_path / "a")
    b = _project(tmp_path / "elsewhere" / "b", reverse=True)
    os.utime(b / "fit.py", (1, 1))  # mtimes, locations, the order files were written in: none matters
    assert code_hash(str(a)) == code_hash(str(b))
    ha, hb = write_code_zip(str(a), str(tmp_path / "a.zip")), write_code_zip(str(b), str(tmp_path / "b.zip"))
    assert ha == hb == code_hash(str(a))
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    assert code_key(ha) == f"code/{ha}.zip"


@pytest.mark.parametrize("change", ["content", "mode", "new file", "renamed", "link target"])
def test_a_changed_folder_gives_a_new_hash(tmp_path: Path, change: str) -> None:
    folder = _project(tmp_path / "src")
    before = code_hash(str(folder))
    if change == "content":
        (folder / "lib" / "util.py").write_bytes(b"X = 2\n")
    elif change == "mode":
        (folder / "fit.py").chmod(0o755)
    elif change == "new file":
        (folder / "extra.py").write_bytes(b"")
    elif change == "renamed":
        (folder / "fit.py").rename(folder / "fit2.py")
    else:
        (folder / "lib" / "latest.csv").unlink()
        (folder / "lib" / "latest.csv").symlink_to("util.py")
    assert code_hash(str(folder)) != before


def test_what_a_local_run_leaves_is_not_code(tmp_path: Path) -> None:
    """Python's byte code beside imported modules, a virtualenv, git, the local runner's folder: a local run in the
    folder does not change its hash (and so neither its object nor its run); its .dockerignore is honoured."""
    folder = _project(tmp_path / "src")
    before = code_hash(str(folder))
    for rel in (
        "lib/__pycache__/util.cpython-311.pyc",
        "__pycache__/x.pyc",
        "old.pyc",
        ".git/HEAD",
        ".venv/bin/python",
        ".local/dev/runs.json",
    ):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(b"\0")
    assert code_hash(str(folder)) == before
    assert {".git", ".venv", ".local", "**/__pycache__", "**/*.pyc"} == set(DEFAULT_CODE_IGNORES)
    (folder / "notes.md").write_text("x")
    assert code_hash(str(folder)) != before
    (folder / ".dockerignore").write_text("notes.md\n!.git/HEAD\n")
    paths = [e.path for e in collect_code(str(folder))]
    assert "notes.md" not in paths and ".git/HEAD" in paths and ".dockerignore" in paths


def test_extract_gives_back_the_folder_with_its_modes_and_links(tmp_path: Path) -> None:
    folder = _project(tmp_path / "src")
    write_code_zip(str(folder), str(tmp_path / "code.zip"))
    dest = tmp_path / "workspace"
    assert fetch_code.extract(tmp_path / "code.zip", dest) == 5
    tree = _tree(dest)
    assert tree["run.sh"] == ("file 755", b"#!/bin/sh\necho hi\n"), "an executable stays executable"
    assert tree["lib/util.py"] == ("file 644", b"X = 1\n") and tree["fit.py"][0] == "file 644"
    assert tree["lib/latest.csv"] == ("symlink", "data/table.csv")
    assert (dest / "lib" / "latest.csv").read_bytes() == b"a,b\n1,2\n"
    assert set(tree) == {"fit.py", "run.sh", "lib/util.py", "lib/data/table.csv", "lib/latest.csv"}
    # extracting again (an init container run twice in a pod) gives the same folder
    assert fetch_code.extract(tmp_path / "code.zip", dest) == 5 and _tree(dest) == tree


def _zip(path: Path, entries: list[tuple[str, bytes, int]]) -> Path:
    """A zip with ``(name, content, unix mode)`` entries written as given (names not cleaned)."""
    with zipfile.ZipFile(path, "w") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name": the point of one case
        for name, body, mode in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = mode << 16
            zf.writestr(info, body)
    return path


F = stat.S_IFREG | 0o644
L = stat.S_IFLNK | 0o777
EVIL = {
    "parent": ([("ok.py", b"1", F), ("../escaped.py", b"owned", F)], "outside the destination"),
    "deep parent": ([("a/../../escaped.py", b"owned", F)], "outside the destination"),
    "absolute": ([("/tmp/escaped.py", b"owned", F)], "outside the destination"),
    "backslash": ([("..\\escaped.py", b"owned", F)], "outside the destination"),
    "link out": ([("out", b"../..", L)], "leads outside"),
    "absolute link": ([("etc", b"/etc", L)], "leads outside"),
    "through a link": (
        [("lib", b"sub", L), ("sub/x", b"1", F), ("lib/y.py", b"owned", F)],
        "through the symlink 'lib'",
    ),
    "twice": ([("a.py", b"1", F), ("a.py", b"2", F)], "twice"),
    "a device": ([("dev", b"", stat.S_IFCHR | 0o644)], "not a file"),
}


@pytest.mark.parametrize("case", sorted(EVIL))
def test_extract_refuses_entries_that_escape_and_writes_nothing(tmp_path: Path, case: str) -> None:
    entries, message = EVIL[case]
    archive = _zip(tmp_path / "evil.zip", entries)
    dest = tmp_path / "deep" / "workspace"
    with pytest.raises(ValueError, match=message):
        fetch_code.extract(archive, dest)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p != archive] == [], "nothing written, inside or outside"


def test_extract_refuses_a_symlink_already_there_that_leads_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "workspace"
    dest.mkdir()
    (dest / "lib").symlink_to(outside)
    archive = _zip(tmp_path / "code.zip", [("lib/x.py", b"owned", F)])
    with pytest.raises(ValueError, match="leads outside"):
        fetch_code.extract(archive, dest)
    assert list(outside.iterdir()) == []


def test_an_archive_without_unix_modes_gives_plain_files(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "dos.zip", "w") as zf:
        zf.writestr("a/b.py", b"print(1)\n")  # create_system of this platform, external_attr 0: no mode recorded
        info = zipfile.ZipInfo("c.py")
        info.create_system = 0  # MS-DOS: external_attr holds DOS attributes, no Unix mode
        info.external_attr = 0x20
        zf.writestr(info, b"x")
    assert fetch_code.extract(tmp_path / "dos.zip", tmp_path / "w") == 2
    assert _tree(tmp_path / "w") == {"a/b.py": ("file 644", b"print(1)\n"), "c.py": ("file 644", b"x")}


def test_sources_the_init_container_takes() -> None:
    assert fetch_code.split_source("s3://b/code/abc.zip") == ("b", "code/abc.zip")
    assert fetch_code.split_source("s3://b/fit/") == ("b", "fit/")
    with pytest.raises(ValueError, match="ending in '/'"):
        fetch_code.split_source("s3://b/fit")


def test_an_empty_folder_has_no_entries(tmp_path: Path) -> None:
    (tmp_path / "src" / "__pycache__").mkdir(parents=True)
    (tmp_path / "src" / "__pycache__" / "a.pyc").write_bytes(b"")
    assert collect_code(str(tmp_path / "src")) == []
    with pytest.raises(ValueError, match="holds no file"):
        stage_code(str(tmp_path / "src"))
    with pytest.raises(ValueError, match="does not exist"):
        collect_code(str(tmp_path / "missing"))
    shutil.rmtree(tmp_path / "src")


def test_a_staged_folder_is_the_zip_its_upload_reads(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    digest = stage_code(str(tmp_path / "src"))
    assert digest == code_hash(str(tmp_path / "src"))
    assert write_code_zip(str(tmp_path / "src"), str(tmp_path / "again.zip")) == digest
    assert Path(code_zip_path(digest)).read_bytes() == (tmp_path / "again.zip").read_bytes()
