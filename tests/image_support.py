"""Helpers for tests/test_image_build_moto.py: a real ``moto_server`` process, AWS fixtures built
with boto3 against it, and tiny Docker build contexts.

Nothing here patches boto3: the server is a separate process and boto3 reaches it through the
standard ``AWS_ENDPOINT_URL`` environment variable.
"""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

REGION = "us-east-1"
MOTO_SERVER = Path(sys.executable).with_name("moto_server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MotoServer:
    """A running ``moto_server`` with request recording enabled."""

    process: "subprocess.Popen[bytes]"
    endpoint: str
    recording: Path
    log: Path

    def recorded_requests(self, target_suffix: str) -> list[dict[str, Any]]:
        """JSON bodies of recorded requests whose ``X-Amz-Target`` ends with ``target_suffix``
        (e.g. ``.StartBuild``), in order. This is what went over the wire, which moto itself does
        not keep for CodeBuild overrides."""
        bodies: list[dict[str, Any]] = []
        if not self.recording.exists():
            return bodies
        for line in self.recording.read_text().splitlines():
            entry = json.loads(line)
            target = entry.get("headers", {}).get("X-Amz-Target", "")
            if not target.endswith(target_suffix):
                continue
            body = entry.get("body") or "{}"
            if entry.get("body_encoded"):
                body = base64.b64decode(body).decode("utf-8")
            bodies.append(json.loads(body))
        return bodies


def start_moto_server(workdir: Path) -> MotoServer:
    """Start ``moto_server -H 127.0.0.1 -p <free port>``; fail loudly if it is missing or dead."""
    if not MOTO_SERVER.exists():
        raise RuntimeError(f"{MOTO_SERVER} not found: install moto[server] (requirements-dev.txt)")
    port = free_port()
    recording = workdir / "moto-recording.jsonl"
    log = workdir / "moto-server.log"
    env = dict(os.environ, MOTO_ENABLE_RECORDING="1", MOTO_RECORDER_FILEPATH=str(recording))
    env.pop("AWS_ENDPOINT_URL", None)
    with open(log, "wb") as log_f:
        proc = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            env=env,
            stdout=log_f,
            stderr=subprocess.STDOUT,
            cwd=str(workdir),
        )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto_server did not answer on {endpoint}: {log.read_text()[-2000:]}")
            time.sleep(0.1)
    return MotoServer(proc, endpoint, recording, log)


def stop_moto_server(server: MotoServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


def aws_test_environment(endpoint: str, workdir: Path) -> dict[str, Optional[str]]:
    """Environment for boto3: moto endpoint, dummy credentials, fixed region, no user config."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": str(workdir / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(workdir / "no-aws-credentials"),
        "AWS_PROFILE": None,
        "AWS_DEFAULT_PROFILE": None,
    }


def make_context(root: Path, files: dict[str, str], dockerignore: Optional[str] = None) -> Path:
    """A tiny Docker build context: a Dockerfile plus ``files`` (relative path -> text)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text("FROM public.ecr.aws/docker/library/python:3.11-slim\nCOPY . /app\n")
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    if dockerignore is not None:
        (root / ".dockerignore").write_text(dockerignore)
    return root


def copy_tree_reversed(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` creating files in reverse order (different directory order and mtimes)."""
    files = sorted((p for p in src.rglob("*") if p.is_file()), reverse=True)
    for p in files:
        target = dst / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
        os.chmod(target, os.stat(p).st_mode & 0o777)
        os.utime(target, (1_000_000_000, 1_000_000_000))


def fake_manifest(seed: str) -> str:
    """A Docker v2 image manifest whose digest differs per ``seed`` (what ``docker push`` uploads)."""
    import hashlib

    def dg(s: str) -> str:
        return "sha256:" + hashlib.sha256(s.encode()).hexdigest()

    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 1234, "digest": dg(seed + "c")},
            "layers": [
                {"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": 5678, "digest": dg(seed + "l")}
            ],
        }
    )


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll ``predicate()`` until it returns something truthy; raise on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def iter_statements(policy: dict[str, Any]) -> Iterator[dict[str, Any]]:
    stmts = policy["Statement"]
    yield from (stmts if isinstance(stmts, list) else [stmts])
