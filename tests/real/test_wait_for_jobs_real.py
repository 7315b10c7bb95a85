"""``training/wait_for_jobs.py`` (the init container of a job with ``after``) as a real process against a small
HTTP server on 127.0.0.1 that answers like the Kubernetes API: Job and MPIJob objects whose status conditions
change from one request to the next, 404 for a job not created yet, 500 for a passing fault."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

import pytest

from components.workloads.spec import PREDECESSOR_FAILED_EXIT_CODE
from stacks.ports import free_port
from tests import training_support as ts
from tests.wait import patient

WAIT_PY = ts.TRAINING_DIR / "wait_for_jobs.py"
TOKEN = "service-account-token-for-the-test"
JOB_PATH = "/apis/batch/v1/namespaces/training/jobs/{}"
MPIJOB_PATH = "/apis/kubeflow.org/v2beta1/namespaces/training/mpijobs/{}"
RUN_TIMEOUT = 60.0


def job(kind: str, name: str, *conditions: tuple[str, str]) -> tuple[int, dict[str, Any]]:
    """A 200 answer: the object with these ``(type, status)`` conditions."""
    api = "batch/v1" if kind == "Job" else "kubeflow.org/v2beta1"
    return 200, {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": "training"},
        "status": {"conditions": [{"type": t, "status": s, "reason": t} for t, s in conditions]},
    }


NOT_FOUND = (404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
FAULT = (500, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500})


@dataclass
class FakeApi:
    """Answers per path, one after the other (the last one repeats), and every request it got."""

    answers: dict[str, list[tuple[int, dict[str, Any]]]]
    requests: list[tuple[str, Optional[str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, path: str, authorization: Optional[str]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append((path, authorization))
            queue = self.answers.get(path)
            if not queue:
                return NOT_FOUND
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def paths(self) -> list[str]:
        with self.lock:
            return [p for p, _ in self.requests]


@pytest.fixture()
def serve() -> Iterator[Any]:
    """``serve(answers)`` starts a FakeApi on 127.0.0.1 and returns (api, its URL); stopped at the end."""
    servers: list[ThreadingHTTPServer] = []

    def start(answers: dict[str, list[tuple[int, dict[str, Any]]]]) -> tuple[FakeApi, str]:
        api = FakeApi(answers)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                code, body = api.answer(self.path, self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return api, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run_wait(
    tmp_path: Path, api_url: str, *jobs: str, extra: tuple[str, ...] = ()
) -> tuple[int, list[dict[str, Any]], str]:
    """Run the script as the init container does (with a token file); exit code, its JSON lines, stderr."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    argv = [
        sys.executable,
        str(WAIT_PY),
        "--namespace",
        "training",
        *[a for j in jobs for a in ("--job", j)],
        "--poll-seconds",
        "0.05",
        "--api-server",
        api_url,
        "--token-file",
        str(token),
        "--ca-file",
        str(tmp_path / "no-ca.crt"),
        *extra,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=patient(RUN_TIMEOUT))
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.strip()], done.stderr


def test_waits_through_missing_running_and_faults_until_every_job_completed(tmp_path: Path, serve: Any) -> None:
    api, url = serve(
        {
            JOB_PATH.format("prep"): [
                NOT_FOUND,
                NOT_FOUND,
                job("Job", "prep"),
                FAULT,
                job("Job", "prep", ("Complete", "False")),
                job("Job", "prep", ("Complete", "True")),
            ],
            MPIJOB_PATH.format("bench"): [
                job("MPIJob", "bench", ("Created", "True"), ("Running", "True")),
                job("MPIJob", "bench", ("Created", "True"), ("Succeeded", "True")),
            ],
        }
    )
    code, events, stderr = run_wait(tmp_path, url, "jobs/prep", "mpijobs/bench")
    assert code == 0, (events, stderr)
    assert [e["event"] for e in events if e["event"] != "api_error"] == [
        "waiting",
        "completed",
        "completed",
        "all_completed",
    ]
    assert [e["job"] for e in events if e["event"] == "completed"] == ["mpijobs/bench", "jobs/prep"]
    assert [e["job"] for e in events if e["event"] == "api_error"] == ["jobs/prep"], "the 500 is logged and retried"
    paths = api.paths()
    assert paths.count(JOB_PATH.format("prep")) == 6, (
        "asked until Complete=True, through 404s, a 500 and Complete=False"
    )
    assert paths.count(MPIJOB_PATH.format("bench")) == 2, "a completed job is not asked again"
    assert {auth for _, auth in api.requests} == {f"Bearer {TOKEN}"}, (
        "every request carries the service account's token"
    )


def test_a_failed_job_fails_the_wait_with_the_code_the_pod_failure_policy_expects(tmp_path: Path, serve: Any) -> None:
    api, url = serve(
        {
            JOB_PATH.format("prep"): [job("Job", "prep")],
            MPIJOB_PATH.format("bench"): [
                job("MPIJob", "bench", ("Running", "True")),
                job("MPIJob", "bench", ("Running", "False"), ("Failed", "True")),
            ],
        }
    )
    code, events, stderr = run_wait(tmp_path, url, "jobs/prep", "mpijobs/bench")
    assert code == PREDECESSOR_FAILED_EXIT_CODE == 3, (events, stderr)
    (failed,) = [e for e in events if e["event"] == "predecessor_failed"]
    assert failed["job"] == "mpijobs/bench" and "cannot run" in failed["text"]
    assert not any(e["event"] == "all_completed" for e in events)


def test_gives_up_when_the_api_does_not_answer(tmp_path: Path) -> None:
    code, events, stderr = run_wait(
        tmp_path, f"http://127.0.0.1:{free_port()}", "jobs/prep", extra=("--timeout-seconds", "1")
    )
    assert code == 1, (events, stderr)
    assert events[-1]["event"] == "gave_up" and any(e["event"] == "api_error" for e in events)


def test_sigterm_stops_the_wait_at_once(tmp_path: Path, serve: Any) -> None:
    """The pod deleted or the job suspended while it waits: 143 at once, not the pod's whole grace period."""
    api, url = serve({})  # the job does not exist yet
    token = tmp_path / "token"
    token.write_text(TOKEN)
    argv = [sys.executable, str(WAIT_PY), "--namespace", "training", "--job", "jobs/prep", "--poll-seconds", "30"]
    argv += ["--api-server", url, "--token-file", str(token), "--ca-file", str(tmp_path / "no-ca.crt")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + patient(30)
        while not api.paths() and time.monotonic() < deadline:  # asked once, now in its 30 s sleep
            time.sleep(0.05)
        assert api.paths(), proc.poll()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=patient(10))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, (out, err)
    assert json.loads(out.splitlines()[-1])["event"] == "stopped", out


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    code, _, stderr = run_wait(tmp_path, "http://127.0.0.1:1", "pods/prep")
    assert code == 2 and "use jobs/NAME or mpijobs/NAME" in stderr


#: A SIGTERM whose handler runs inside a finalizer: urllib's HTTP error (the 404 of a job not yet created) closes its
#: response in ``__del__``, where an exception is printed and ignored. Then the wait went on to its next poll.
IN_A_FINALIZER = """
import sys, time
sys.path.insert(0, sys.argv[1])
waits = __import__(sys.argv[2])
class Closing:
    def __del__(self):
        waits.stop(15, None)
Closing()
time.sleep(30)
print("still waiting")
"""


@pytest.mark.parametrize("script", ["wait_for_jobs", "wait_for_workers"])
def test_a_stop_that_lands_in_a_finalizer_still_ends_the_wait(script: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", IN_A_FINALIZER, str(ts.TRAINING_DIR), script],
        capture_output=True,
        text=True,
        timeout=patient(20),
    )
    assert done.returncode == 143, (done.stdout, done.stderr)
    assert "still waiting" not in done.stdout and json.loads(done.stdout.splitlines()[-1])["event"] == "stopped"
