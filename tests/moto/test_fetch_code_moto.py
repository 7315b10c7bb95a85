"""``training/fetch_code.py`` (the init container of a job with ``code``) as a real process against a real
``moto_server`` on 127.0.0.1, found through ``AWS_ENDPOINT_URL`` as boto3 finds any endpoint: an ``s3://`` prefix, and
the zip the program uploads for a ``code`` folder of the project."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


def fetch(env: dict[str, str], source: str, dest: Path, *argv: str) -> tuple[int, list[dict[str, Any]], str]:
    """Run the script (``argv``: more arguments); exit code, its JSON lines, stderr."""
    done = subprocess.run(
        [sys.executable, str(FETCH_PY), "--source", source, "--dest", str(dest), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=patient(120),
    )
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.strip()], done.stderr


def _zip_of(entries: dict[str, bytes]) -> bytes:
    """A zip archive holding ``entries`` (name -> content)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, body in entries.items():
            zf.writestr(name, body)
    return buf.getvalue()


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
    assert code == 1 and "NoSuchBucket" in events[-1]["error"] and len(events) == 1, "not tried again"
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
    assert code == 1 and [e["event"] for e in events] == ["fetch_failed"] and "404" in events[-1]["error"], events


class PodIdentityAgent:
    """A stand-in for the EKS Pod Identity agent on 127.0.0.1: it serves the pod's credentials
    (``AWS_CONTAINER_CREDENTIALS_FULL_URI``, the token of ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` in the
    ``Authorization`` header) once :attr:`ready` is set, and answers 500 before, as the agent does while the pod's
    association does not work yet."""

    TOKEN = "eks-pod-identity-token"

    def __init__(self, folder: Path) -> None:
        self.ready = threading.Event()
        self.headers: list[str] = []
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                agent.headers.append(self.headers.get("Authorization", ""))
                ok = agent.ready.is_set() and self.headers.get("Authorization") == agent.TOKEN
                body = json.dumps(
                    {
                        "AccessKeyId": "testing",
                        "SecretAccessKey": "testing",
                        "Token": "testing",
                        "AccountId": "123456789012",
                        "Expiration": (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=6)).isoformat(),
                    }
                    if ok
                    else {"message": "no association yet"}
                ).encode()
                self.send_response(200 if ok else 500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.token_file = folder / "eks-pod-identity-token"
        self.token_file.write_text(self.TOKEN)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def env(self, moto_env: dict[str, str]) -> dict[str, str]:
        """The script's environment as EKS sets it for a pod with an association: no keys, the agent's address."""
        env = {k: v for k, v in moto_env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        env = {k: v for k, v in env.items() if k not in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")}
        port = self.server.server_address[1]
        return env | {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"http://127.0.0.1:{port}/v1/credentials",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(self.token_file),
        }


@pytest.fixture()
def agent(tmp_path: Path) -> Iterator[PodIdentityAgent]:
    agent = PodIdentityAgent(tmp_path)
    yield agent
    agent.server.shutdown()


def fetch_until(env: dict[str, str], argv: list[str], event: str, then: Callable[[], None]) -> Iterator[dict[str, Any]]:
    """Run the script; at its first ``event`` line call ``then`` (the test's step, ordered after the script's own
    event); yields every JSON line, then ``{"exit": code}``."""
    with subprocess.Popen([sys.executable, str(FETCH_PY), *argv], stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        done = False
        for line in proc.stdout:
            row = json.loads(line)
            if row["event"] == event and not done:
                then()
                done = True
            yield row
        yield {"exit": proc.wait(timeout=patient(60))}


def test_waits_for_the_pod_identity_credentials_then_fetches(
    moto: tuple[Any, dict[str, str]], agent: PodIdentityAgent, tmp_path: Path
) -> None:
    """A new pod's association can take seconds to work: the agent answers 500, the script tries again (a logged
    ``fetch_retry`` naming the credentials) and copies once the agent serves them, with the pod's token."""
    s3, moto_env = moto
    s3.put_object(Bucket=BUCKET, Key="late/train.py", Body=b"print('late')\n")
    dest = tmp_path / "workspace"
    rows = list(
        fetch_until(
            agent.env(moto_env),
            ["--source", f"s3://{BUCKET}/late/", "--dest", str(dest)],
            "fetch_retry",
            agent.ready.set,
        )
    )
    retries = [r for r in rows if r.get("event") == "fetch_retry"]
    assert rows[-1] == {"exit": 0} and rows[-2]["event"] == "fetched", rows
    assert retries and "credential" in retries[0]["error"].lower(), rows
    assert files(dest) == {"train.py": b"print('late')\n"}
    assert set(agent.headers) == {PodIdentityAgent.TOKEN}, "every request carried the pod's token"


def test_without_credentials_for_the_whole_wait_it_fails_naming_them(
    moto: tuple[Any, dict[str, str]], agent: PodIdentityAgent, tmp_path: Path
) -> None:
    """The agent never serves: after ``--access-wait`` (longer than one try: botocore asks the agent three times, a
    second apart) the script fails with the credentials' error; with no wait it fails at the first try."""
    s3, moto_env = moto
    s3.put_object(Bucket=BUCKET, Key="never/train.py", Body=b"x")
    start = time.monotonic()
    code, events, _ = fetch(agent.env(moto_env), f"s3://{BUCKET}/never/", tmp_path / "a", "--access-wait", "8")
    assert code == 1 and time.monotonic() - start >= 8, events
    assert [e["event"] for e in events][-1] == "fetch_failed" and "credential" in events[-1]["error"].lower()
    assert [e for e in events if e["event"] == "fetch_retry"], events
    code, events, _ = fetch(agent.env(moto_env), f"s3://{BUCKET}/never/", tmp_path / "b", "--access-wait", "0")
    assert code == 1 and [e["event"] for e in events] == ["fetch_failed"], events
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p != agent.token_file] == [], "nothing written"


@pytest.fixture()
def iam_moto(tmp_path: Path) -> Iterator[tuple[Any, Any, dict[str, str]]]:
    """A moto server that checks IAM permissions after its first three requests (an administrator made with them):
    the administrator's IAM and S3 clients, and the environment of a reader with no policy yet."""
    import boto3

    server = aws_support.start_moto_server(
        tmp_path, log_name="iam-moto.log", env_extra={"INITIAL_NO_AUTH_ACTION_COUNT": "3"}
    )
    try:
        base = aws_support.aws_test_environment(server.endpoint, tmp_path)
        iam = boto3.client(
            "iam",
            endpoint_url=server.endpoint,
            region_name=aws_support.REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        iam.create_user(UserName="admin")
        iam.put_user_policy(
            UserName="admin",
            PolicyName="all",
            PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
            ),
        )
        admin = iam.create_access_key(UserName="admin")["AccessKey"]
        keys = {"aws_access_key_id": admin["AccessKeyId"], "aws_secret_access_key": admin["SecretAccessKey"]}
        iam = boto3.client("iam", endpoint_url=server.endpoint, region_name=aws_support.REGION, **keys)
        s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name=aws_support.REGION, **keys)
        iam.create_user(UserName="reader")
        reader = iam.create_access_key(UserName="reader")["AccessKey"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            {k: v for k, v in base.items() if v is not None and k not in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")}
        )
        env.update(AWS_ACCESS_KEY_ID=reader["AccessKeyId"], AWS_SECRET_ACCESS_KEY=reader["SecretAccessKey"])
        yield iam, s3, env
    finally:
        server.stop()


def test_a_policy_that_takes_effect_late_is_waited_for(
    iam_moto: tuple[Any, Any, dict[str, str]], tmp_path: Path
) -> None:
    """A new role's policy reaches S3 some seconds after it was made: S3 refuses the read (403), the script tries again
    and copies once the reader's policy allows it; a read it is never allowed fails with the refusal."""
    iam, s3, env = iam_moto
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="code/c.zip", Body=_zip_of({"train.py": b"print(1)\n"}))

    def allow() -> None:
        iam.put_user_policy(
            UserName="reader",
            PolicyName="code",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/code/c.zip"}
                    ],
                }
            ),
        )

    dest = tmp_path / "workspace"
    rows = list(fetch_until(env, ["--source", f"s3://{BUCKET}/code/c.zip", "--dest", str(dest)], "fetch_retry", allow))
    assert rows[-1] == {"exit": 0} and rows[-2]["event"] == "fetched", rows
    assert "403" in rows[0]["error"] or "AccessDenied" in rows[0]["error"], rows
    assert files(dest) == {"train.py": b"print(1)\n"}
    code, events, _ = fetch(env, f"s3://{BUCKET}/other.zip", tmp_path / "b", "--access-wait", "2")
    assert code == 1 and events[-1]["event"] == "fetch_failed" and "403" in events[-1]["error"], events


def test_a_pod_without_pod_identity_fails_at_once_naming_why(moto: tuple[Any, dict[str, str]], tmp_path: Path) -> None:
    """No keys and no agent address: Pod Identity's webhook sets the address when it makes the pod, or never, so no
    later try could find credentials; the script fails at the first try and says so (a new pod of the job gets it)."""
    s3, moto_env = moto
    s3.put_object(Bucket=BUCKET, Key="nocreds/train.py", Body=b"x")
    env = {
        k: v for k, v in moto_env.items() if not k.startswith(("AWS_ACCESS", "AWS_SECRET", "AWS_SESSION", "AWS_SEC"))
    }
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # the job's network policy keeps a pod from the instance's metadata
    code, events, _ = fetch(env, f"s3://{BUCKET}/nocreds/", tmp_path / "w")
    assert code == 1 and [e["event"] for e in events] == ["fetch_failed"], events
    assert "AWS_CONTAINER_CREDENTIALS_FULL_URI is not set" in events[-1]["error"], events
