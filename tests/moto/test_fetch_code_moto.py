"""``training/fetch_code.py`` (the init container of a job with ``code``) as a real process against a real
``moto_server`` on 127.0.0.1, found through ``AWS_ENDPOINT_URL`` as boto3 finds any endpoint: an ``s3://`` prefix, and
the zip the program uploads for a ``code`` folder of the project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.code_folder import code_key, write_code_zip
from tests import aws_support
from tests import training_support as ts
from tests.wait import patient

FETCH_PY = ts.TRAINING_DIR / "fetch_code.py"
BUCKET = "team-code"


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str]]]:
    """A moto S3 with the bucket, a client and the environment the script runs with."""
    with aws_support.moto_s3(tmp_path_factory.mktemp("moto")) as moto:
        moto.s3.create_bucket(Bucket=BUCKET)
        yield moto.s3, moto.env


def fetch(env: dict[str, str], source: str, dest: Path) -> tuple[int, list[dict[str, Any]], str]:
    """Run the script; exit code, its JSON lines, stderr."""
    done = subprocess.run(
        [sys.executable, str(FETCH_PY), "--source", source, "--dest", str(dest)],
        capture_output=True,
        text=True,
        env=env,
        timeout=patient(120),
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.strip()], done.stderr


def files(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every file below ``root``."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_copies_every_object_under_the_prefix_and_nothing_else(
    moto: tuple[Any, dict[str, str]], tmp_path: Path
) -> None:
    s3, env = moto
    objects = {
        "prep/prep.py": b"print('prep')\n",
        "prep/lib/util.py": b"X = 1\n",
        "prep/data/big.bin": os.urandom(3 << 20),
        "prep/lib/": b"",
    }  # a folder marker, as the S3 console makes
    for key, body in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    s3.put_object(Bucket=BUCKET, Key="prepare/other.py", Body=b"not ours")  # shares the prefix's letters only
    s3.put_object(Bucket=BUCKET, Key="torch/main.py", Body=b"not ours either")
    dest = tmp_path / "workspace"
    code, events, stderr = fetch(env, f"s3://{BUCKET}/prep/", dest)
    assert code == 0, (events, stderr)
    assert events[-1]["event"] == "fetched" and events[-1]["files"] == 3
    assert files(dest) == {
        "prep.py": objects["prep/prep.py"],
        "lib/util.py": objects["prep/lib/util.py"],
        "data/big.bin": objects["prep/data/big.bin"],
    }


def test_refuses_a_key_that_would_escape_the_folder(moto: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    s3, env = moto
    s3.put_object(Bucket=BUCKET, Key="evil/../../escaped.py", Body=b"owned")
    dest = tmp_path / "deep" / "workspace"
    code, events, stderr = fetch(env, f"s3://{BUCKET}/evil/", dest)
    assert code == 1, (events, stderr)
    assert events[-1]["event"] == "fetch_failed" and "refusing key 'evil/../../escaped.py'" in events[-1]["error"]
    assert files(tmp_path) == {}, "nothing written, inside or outside the folder"


def test_an_empty_prefix_or_a_missing_bucket_fails(moto: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    _, env = moto
    code, events, _ = fetch(env, f"s3://{BUCKET}/nothing-here/", tmp_path / "a")
    assert code == 1 and events[-1] == {**events[-1], "event": "fetch_failed", "error": "no object under the prefix"}
    code, events, _ = fetch(env, "s3://no-such-bucket/prep/", tmp_path / "b")
    assert code == 1 and "NoSuchBucket" in events[-1]["error"]
    code, _, stderr = fetch(env, f"s3://{BUCKET}/prep", tmp_path / "c")
    assert code == 2 and "ending in '/'" in stderr


def test_downloads_and_extracts_a_code_folders_zip(moto: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    """The object the program uploads for a ``code`` folder (components/job_code.py), from a real S3 API: the folder
    comes back in /workspace with its executables executable and its symlinks."""
    s3, env = moto
    src = tmp_path / "src"
    (src / "lib").mkdir(parents=True)
    (src / "fit.py").write_bytes(b"from lib import util\n")
    (src / "lib" / "util.py").write_bytes(b"X = 1\n")
    (src / "run.sh").write_bytes(b"#!/bin/sh\nexec python fit.py\n")
    (src / "run.sh").chmod(0o755)
    (src / "main.py").symlink_to("fit.py")
    digest = write_code_zip(str(src), str(tmp_path / "code.zip"))
    key = code_key(digest)
    s3.put_object(Bucket=BUCKET, Key=key, Body=(tmp_path / "code.zip").read_bytes())
    dest = tmp_path / "workspace"
    code, events, stderr = fetch(env, f"s3://{BUCKET}/{key}", dest)
    assert code == 0, (events, stderr)
    assert events[-1]["event"] == "fetched" and events[-1]["files"] == 4
    assert files(dest) == {
        "fit.py": b"from lib import util\n",
        "lib/util.py": b"X = 1\n",
        "run.sh": b"#!/bin/sh\nexec python fit.py\n",
        "main.py": b"from lib import util\n",
    }
    assert os.access(dest / "run.sh", os.X_OK) and not os.access(dest / "fit.py", os.X_OK)
    assert os.readlink(dest / "main.py") == "fit.py"
    assert not list(tmp_path.glob("workspace/.*")), "no partial file left"


def test_refuses_an_archive_that_escapes_and_a_missing_object(moto: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    s3, env = moto
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ok.py", b"1")
        zf.writestr("../../escaped.py", b"owned")
    s3.put_object(Bucket=BUCKET, Key="code/evil.zip", Body=archive.read_bytes())
    dest = tmp_path / "deep" / "workspace"
    code, events, stderr = fetch(env, f"s3://{BUCKET}/code/evil.zip", dest)
    assert code == 1, (events, stderr)
    assert events[-1]["event"] == "fetch_failed" and "refusing entry '../../escaped.py'" in events[-1]["error"]
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p != archive] == [], "nothing written, inside or outside"
    code, events, _ = fetch(env, f"s3://{BUCKET}/code/missing.zip", tmp_path / "m")
    assert code == 1 and events[-1]["event"] == "fetch_failed" and "404" in events[-1]["error"]
