"""AWS test plumbing shared by the moto-backed tests: a free port, a real ``moto_server`` process,
waiting until a moto server answers, polling, and the boto3 environment that points at it.

Nothing here patches boto3: the server is a separate process and boto3 reaches it through the
standard ``AWS_ENDPOINT_URL`` environment variable. A missing or dying ``moto_server`` fails the
test loudly (``RuntimeError``); it is never a reason to skip.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from stacks.ports import free_port
from tests.wait import patient, wait_for

REGION = "us-east-1"
MOTO_SERVER = Path(sys.executable).with_name("moto_server")


def wait_until_answers(
    endpoint: str, alive: Callable[[], bool], describe: Callable[[], str], timeout: float | None = None
) -> None:
    """Wait until the moto server at ``endpoint`` answers ``/moto-api/``.

    Raise ``RuntimeError`` (with ``describe()``, e.g. the log tail) if ``alive()`` turns false or
    the server does not answer within ``timeout`` seconds (by default ``patient(30)``).
    """
    timeout = patient(30.0) if timeout is None else timeout

    def answers() -> bool:
        if not alive():
            raise RuntimeError(f"moto server died: {describe()}")
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):
                return True
        except OSError:
            return False

    try:
        wait_for(answers, timeout, interval=0.1, what=f"moto server on {endpoint}")
    except TimeoutError:
        raise RuntimeError(f"moto server did not answer on {endpoint}: {describe()}") from None


@dataclass
class MotoProcess:
    """A running ``moto_server`` child process (request recording on when ``recording`` is set)."""

    process: "subprocess.Popen[bytes]"
    endpoint: str
    log: Path
    recording: Optional[Path] = None

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self.endpoint.rsplit(":", 1)[1])

    def stop(self) -> None:
        """Terminate the process (this one only)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=patient(10))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=patient(10))

    def recorded_requests(self, target_suffix: str) -> list[dict[str, Any]]:
        """JSON bodies of recorded requests whose ``X-Amz-Target`` ends with ``target_suffix``
        (e.g. ``.StartBuild``), in order: what went over the wire, which moto itself does not
        always keep (CodeBuild overrides, for one)."""
        if self.recording is None:
            raise RuntimeError("moto_server was started without request recording (record=True)")
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


@dataclass(frozen=True)
class RecordedCall:
    """One AWS API request as moto recorded it: which operation, signed by which key for which region."""

    operation: str
    """``X-Amz-Target``'s operation (JSON protocols) or the form's ``Action`` (query protocols, e.g. STS)."""
    params: dict[str, Any]
    """The JSON body, or the form fields (first value of each)."""
    access_key: str
    """Access key id of the SigV4 ``Authorization`` header ("" when unsigned)."""
    region: str
    """Region of the signature's credential scope."""
    service: str
    """Service of the signature's credential scope (``sts``, ``codebuild``, ``ecr``...)."""


def recorded_calls(server: "MotoProcess") -> list[RecordedCall]:
    """Every signed AWS request the recording server received, in order."""
    from urllib.parse import parse_qs

    if server.recording is None:
        raise RuntimeError("moto_server was started without request recording (record=True)")
    calls: list[RecordedCall] = []
    if not server.recording.exists():
        return calls
    for line in server.recording.read_text().splitlines():
        entry = json.loads(line)
        headers = entry.get("headers", {})
        auth = headers.get("Authorization", "")
        if "Credential=" not in auth:
            continue
        scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
        body = entry.get("body") or ""
        if entry.get("body_encoded"):
            body = base64.b64decode(body).decode("utf-8", errors="replace")
        target = headers.get("X-Amz-Target", "")
        operation, params = "", {}
        if target:
            operation, params = target.rsplit(".", 1)[-1], json.loads(body or "{}")
        elif headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            form = {k: v[0] for k, v in parse_qs(body).items()}
            operation, params = form.get("Action", ""), form
        calls.append(RecordedCall(operation, params, scope[0], scope[2], scope[3]))
    return calls


def start_moto_server(
    workdir: Path,
    *,
    record: bool = False,
    log_name: str = "moto-server.log",
    env_extra: Optional[dict[str, str]] = None,
) -> MotoProcess:
    """Start ``moto_server -H 127.0.0.1 -p <free port>`` in ``workdir`` and wait until it answers.

    Its output goes to ``workdir / log_name``. With ``record=True`` moto records every request
    (``MOTO_ENABLE_RECORDING``) to ``workdir / "moto-recording.jsonl"``, read back with
    :meth:`MotoProcess.recorded_requests`. ``env_extra`` adds moto settings to the server's environment
    (e.g. ``INITIAL_NO_AUTH_ACTION_COUNT=0``: check credentials and IAM permissions). Raise
    ``RuntimeError`` if ``moto_server`` is missing, exits, or does not answer.
    """
    if not MOTO_SERVER.is_file():
        raise RuntimeError(f"{MOTO_SERVER} not found: install moto[server] (requirements-dev.txt)")
    port = free_port()
    log = workdir / log_name
    env = dict(os.environ)
    env.pop("AWS_ENDPOINT_URL", None)
    recording: Optional[Path] = None
    if record:
        recording = workdir / "moto-recording.jsonl"
        env.update(MOTO_ENABLE_RECORDING="1", MOTO_RECORDER_FILEPATH=str(recording))
    env.update(env_extra or {})
    with open(log, "wb") as log_f:
        proc = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            env=env,
            stdout=log_f,
            stderr=subprocess.STDOUT,
            cwd=str(workdir),
        )
    server = MotoProcess(proc, f"http://127.0.0.1:{port}", log, recording)
    try:
        wait_until_answers(
            server.endpoint,
            lambda: proc.poll() is None,
            lambda: f"exit code {proc.poll()}; log tail:\n{log.read_text()[-2000:]}",
        )
    except RuntimeError:
        server.stop()
        raise
    return server


def aws_test_environment(
    endpoint: str, workdir: Path, *, max_attempts: Optional[int] = None
) -> dict[str, Optional[str]]:
    """Environment for boto3: the moto endpoint, dummy credentials, fixed region, no user AWS config
    (``None`` = unset the variable). ``max_attempts`` sets ``AWS_MAX_ATTEMPTS`` (e.g. 1: moto answers
    unimplemented operations with HTTP 500, which boto3 would otherwise retry with back-off)."""
    env: dict[str, Optional[str]] = {
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
    if max_attempts is not None:
        env["AWS_MAX_ATTEMPTS"] = str(max_attempts)
    return env


@dataclass
class MotoS3:
    """A running moto server used as S3: a client for the test, and the environment a script under test runs with."""

    server: MotoProcess
    s3: Any
    env: dict[str, str]
    """This process's environment without its ``AWS_*`` variables, plus :func:`aws_test_environment`'s."""


@contextlib.contextmanager
def moto_s3(workdir: Path) -> Iterator[MotoS3]:
    """A moto server for S3 for the length of a ``with`` block (module fixtures of the scripts' tests)."""
    import boto3

    server = start_moto_server(workdir)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({k: v for k, v in aws_test_environment(server.endpoint, workdir).items() if v is not None})
        s3 = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        yield MotoS3(server, s3, env)
    finally:
        server.stop()
