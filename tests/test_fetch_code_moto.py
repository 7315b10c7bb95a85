"""``training/fetch_code.py`` (the init container of a job with ``code``) as a real process against a real
``moto_server`` on 127.0.0.1, found through ``AWS_ENDPOINT_URL`` as boto3 finds any endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import aws_support
from tests import training_support as ts

pytestmark = pytest.mark.moto

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
    done = subprocess.run([sys.executable, str(FETCH_PY), "--source", source, "--dest", str(dest)],
                          capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.strip()], done.stderr


def files(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every file below ``root``."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_copies_every_object_under_the_prefix_and_nothing_else(moto: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    s3, env = moto
    objects = {"prep/prep.py": b"print('prep')\n", "prep/lib/util.py": b"X = 1\n", "prep/data/big.bin": os.urandom(3 << 20),
               "prep/lib/": b""}  # a folder marker, as the S3 console makes
    for key, body in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    s3.put_object(Bucket=BUCKET, Key="prepare/other.py", Body=b"not ours")  # shares the prefix's letters only
    s3.put_object(Bucket=BUCKET, Key="torch/main.py", Body=b"not ours either")
    dest = tmp_path / "workspace"
    code, events, stderr = fetch(env, f"s3://{BUCKET}/prep/", dest)
    assert code == 0, (events, stderr)
    assert events[-1]["event"] == "fetched" and events[-1]["files"] == 3
    assert files(dest) == {"prep.py": objects["prep/prep.py"], "lib/util.py": objects["prep/lib/util.py"],
                           "data/big.bin": objects["prep/data/big.bin"]}


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
