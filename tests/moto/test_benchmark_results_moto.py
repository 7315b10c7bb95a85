"""The benchmark's results for real: ``training/collect_results.py`` as a process, with the collector config the
program registers for the ``benchmark`` preset, a small HTTP server on 127.0.0.1 answering like the Kubernetes API
(the experiments' Jobs and MPIJob, their pods and logs) and experiment outputs this test writes, copies everything
to a real ``moto_server`` S3; then the driver's summary writer reads the metrics back from S3 and writes the table,
CSV, JSON and PNG there."""

from __future__ import annotations

import csv
import io
import json
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pulumi
import pytest

from stacks.benchmark import cli, driver, layout
from stacks.benchmark.summary import COLUMNS
from tests import aws_support
from tests import training_support as ts
from tests.harness import PROJECT, run_program, stack_config
from tests.wait import patient

COLLECT_PY = ts.TRAINING_DIR / "collect_results.py"
TOKEN = "collector-token"
START, END = "2026-05-21T10:00:00Z", "2026-05-21T10:05:00Z"


def job(
    kind: str, name: str, conditions: list[tuple[str, str]], start: str | None = START, end: str | None = None
) -> dict[str, Any]:
    api = "batch/v1" if kind == "Job" else "kubeflow.org/v2beta1"
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": at} for t, at in conditions]
    }
    if start:
        status["startTime"] = start
    if end:
        status["completionTime"] = end
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": "training", "managedFields": [{"x": 1}]},
        "status": status,
    }


def pod(name: str, phase: str, containers: list[str], init: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "managedFields": [{"x": 1}]},
        "spec": {"initContainers": [{"name": c} for c in init], "containers": [{"name": c} for c in containers]},
        "status": {"phase": phase},
    }


class FakeKube:
    """Answers per path (a list: one answer per request, the last repeats); records the Authorization headers."""

    def __init__(self, answers: dict[str, list[tuple[int, Any]]]) -> None:
        self.answers = answers
        self.lock = threading.Lock()
        self.auth: set[str | None] = set()
        self.paths: list[str] = []

    def answer(self, path: str, authorization: str | None) -> tuple[int, Any]:
        with self.lock:
            self.auth.add(authorization)
            self.paths.append(path)
            queue = self.answers.get(path)
            if not queue:
                return 404, {"kind": "Status", "code": 404}
            return queue.pop(0) if len(queue) > 1 else queue[0]


@pytest.fixture()
def kube() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(answers: dict[str, list[tuple[int, Any]]]) -> tuple[FakeKube, str]:
        api = FakeKube(answers)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                code, body = api.answer(self.path, self.headers.get("Authorization"))
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", aws_support.free_port()), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return api, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str], str]]:
    with aws_support.moto_s3(tmp_path_factory.mktemp("moto")) as moto:
        yield moto.s3, moto.env, moto.server.endpoint


@pytest.fixture(scope="module")
def collector_config() -> dict[str, Any]:
    """The ConfigMap the program gives the collector of the benchmark preset (under mocks)."""
    p = run_program("benchmark", config=stack_config("benchmark"))
    cm = p.one("kubernetes:core/v1:ConfigMap", lambda r: r.name.endswith("-bench-config"))
    return json.loads(cm.inputs["data"]["benchmark.json"])


def _objects(s3: Any, bucket: str, prefix: str) -> dict[str, bytes]:
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"][len(prefix) :]] = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
    return out


def _write_outputs(root: Path, cfg: dict[str, Any]) -> dict[str, Path]:
    """What the experiments left on the shared volume: the metrics their programs write, other outputs."""
    dirs = {n: root / e["outputDir"].lstrip("/") for n, e in cfg["experiments"].items()}
    for d in dirs.values():
        d.mkdir(parents=True)
    one = dirs["resnet50-1-worker"]
    (one / "metrics.json").write_text(
        json.dumps(
            {
                "schema": "eks-training.metrics/1",
                "program": "synthetic_benchmark.py",
                "wall_time_s": 95.5,
                "throughput": 410.2,
                "throughput_unit": "images/s",
                "final_loss": 6.9,
                "final_accuracy": None,
                "busbw_gbps": None,
                "world_size": 1,
            }
        )
    )
    (one / "synthetic_benchmark.json").write_text('{"images_per_sec": 410.2}')
    (one / "model.pt").write_bytes(b"not kept: not a *.json")
    (one / "big.json").write_bytes(b"[" + b"0," * (1 << 20) + b"0]")  # 2 MiB, above maxFileMib 1
    four = dirs["resnet50-4-workers"]
    (four / "metrics.json").write_text(
        json.dumps(
            {
                "schema": "eks-training.metrics/1",
                "program": "synthetic_benchmark.py",
                "wall_time_s": 101.0,
                "throughput": 1540.0,
                "throughput_unit": "images/s",
                "final_loss": 6.8,
                "final_accuracy": None,
                "busbw_gbps": None,
                "world_size": 4,
            }
        )
    )
    nccl = dirs["nccl-allreduce-2-nodes"]
    (nccl / "metrics.json").write_text(
        json.dumps(
            {
                "schema": "eks-training.metrics/1",
                "program": "nccl_report.py",
                "wall_time_s": 40.0,
                "throughput": None,
                "throughput_unit": None,
                "final_loss": None,
                "final_accuracy": None,
                "busbw_gbps": 2.95,
                "world_size": None,
            }
        )
    )
    (nccl / "nccl-tests.json").write_text('{"busbw_gbps_at_max_size": 2.95}')
    (nccl / "sub").mkdir()
    (nccl / "sub" / "rank0.json").write_text("{}")
    return dirs


def _kube_answers(cfg: dict[str, Any]) -> dict[str, list[tuple[int, Any]]]:
    ns = "training"
    jobs = "/apis/batch/v1/namespaces/training/jobs/{}"
    pods = "/api/v1/namespaces/training/pods?labelSelector=eks-training%2Fjob%3D{}"
    log = "/api/v1/namespaces/training/pods/{}/log?container={}"
    a: dict[str, list[tuple[int, Any]]] = {
        # finished at once
        jobs.format("resnet50-1-worker"): [(200, job("Job", "resnet50-1-worker", [("Complete", END)], end=END))],
        pods.format("resnet50-1-worker"): [
            (200, {"items": [pod("resnet50-1-worker-0-abcde", "Succeeded", ["worker"])]})
        ],
        log.format("resnet50-1-worker-0-abcde", "worker"): [
            (200, '{"event": "benchmark_result", "images_per_sec": 410.2}\n')
        ],
        # failed: no metrics of its own
        jobs.format("resnet50-2-workers"): [
            (200, job("Job", "resnet50-2-workers", [("Failed", "2026-05-21T10:02:30Z")]))
        ],
        pods.format("resnet50-2-workers"): [
            (
                200,
                {
                    "items": [
                        pod("resnet50-2-workers-0-x1", "Failed", ["worker"]),
                        pod("resnet50-2-workers-1-x2", "Failed", ["worker"]),
                    ]
                },
            )
        ],
        log.format("resnet50-2-workers-0-x1", "worker"): [(200, "CUDA out of memory\n")],
        log.format("resnet50-2-workers-1-x2", "worker"): [(200, "peer failed\n")],
        # not created yet, then pending, running, complete
        jobs.format("resnet50-4-workers"): [
            (404, {}),
            (200, job("Job", "resnet50-4-workers", [], start=None)),
            (200, job("Job", "resnet50-4-workers", [])),
            (200, job("Job", "resnet50-4-workers", [("Complete", END)], end=END)),
        ],
        pods.format("resnet50-4-workers"): [
            (200, {"items": []}),
            (200, {"items": [pod("r4-0", "Pending", ["worker"])]}),
            (200, {"items": [pod(f"r4-{i}", "Running", ["worker"]) for i in range(4)]}),
            (200, {"items": [pod(f"r4-{i}", "Succeeded", ["worker"]) for i in range(4)]}),
        ],
        # the MPIJob: its launcher (with the wait init container a job with after would have) and a worker
        "/apis/kubeflow.org/v2beta1/namespaces/training/mpijobs/nccl-allreduce-2-nodes": [
            (
                200,
                job(
                    "MPIJob",
                    "nccl-allreduce-2-nodes",
                    [("Created", START), ("Running", START), ("Succeeded", END)],
                    end=END,
                ),
            )
        ],
        pods.format("nccl-allreduce-2-nodes"): [
            (200, {"items": [pod("nccl-allreduce-2-nodes-launcher-q", "Succeeded", ["launcher"], ("wait-for-jobs",))]})
        ],
        log.format("nccl-allreduce-2-nodes-launcher-q", "wait-for-jobs"): [(200, "{}\n")],
        log.format("nccl-allreduce-2-nodes-launcher-q", "launcher"): [(200, "#  Avg bus bandwidth    : 2.95\n")],
    }
    for i in range(4):
        a[log.format(f"r4-{i}", "worker")] = [(200, f"rank {i}\n")]
    assert ns == "training"
    return a


def test_the_collector_copies_every_experiment_and_the_summary_is_written(
    moto: tuple[Any, dict[str, str], str],
    collector_config: dict[str, Any],
    kube: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s3, env, endpoint = moto
    cfg = {**collector_config, "keep": {"outputs": ["*.json", "sub/*"], "maxFileMib": 1}}
    bucket, run = cfg["bucket"], cfg["run"]
    s3.create_bucket(Bucket=bucket)
    volume = tmp_path / "volume"
    _write_outputs(volume, cfg)
    api, url = kube(_kube_answers(cfg))
    (tmp_path / "token").write_text(TOKEN)
    config_file = tmp_path / "benchmark.json"
    config_file.write_text(json.dumps(cfg))
    done = subprocess.run(
        [
            sys.executable,
            str(COLLECT_PY),
            "--config",
            str(config_file),
            "--region",
            aws_support.REGION,
            "--poll-seconds",
            "0.2",
            "--timeout-seconds",
            "60",
            "--volume-root",
            str(volume),
            "--api-server",
            url,
            "--token-file",
            str(tmp_path / "token"),
            "--ca-file",
            str(tmp_path / "none"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=patient(120),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "done"
    assert api.auth == {f"Bearer {TOKEN}"}

    prefix = f"benchmarks/{run}/"
    objects = _objects(s3, bucket, prefix)
    exp = "experiments/"
    expected = {
        "run.json",
        "cluster.json",
        "storage.json",
        "progress.json",
        "collector.json",
        *(f"{exp}{n}/config/experiment.json" for n in cfg["experiments"]),
        *(f"{exp}{n}/config/manifests/pods.json" for n in cfg["experiments"]),
        *(f"{exp}{n}/output/metrics.json" for n in cfg["experiments"]),
        *(
            f"{exp}{n}/config/manifests/job.json"
            for n in ("resnet50-1-worker", "resnet50-2-workers", "resnet50-4-workers")
        ),
        f"{exp}nccl-allreduce-2-nodes/config/manifests/mpijob.json",
        f"{exp}resnet50-1-worker/output/logs/resnet50-1-worker-0-abcde/worker.log",
        f"{exp}resnet50-2-workers/output/logs/resnet50-2-workers-0-x1/worker.log",
        f"{exp}resnet50-2-workers/output/logs/resnet50-2-workers-1-x2/worker.log",
        *(f"{exp}resnet50-4-workers/output/logs/r4-{i}/worker.log" for i in range(4)),
        f"{exp}nccl-allreduce-2-nodes/output/logs/nccl-allreduce-2-nodes-launcher-q/wait-for-jobs.log",
        f"{exp}nccl-allreduce-2-nodes/output/logs/nccl-allreduce-2-nodes-launcher-q/launcher.log",
        f"{exp}resnet50-1-worker/output/files/synthetic_benchmark.json",
        f"{exp}nccl-allreduce-2-nodes/output/files/nccl-tests.json",
        f"{exp}nccl-allreduce-2-nodes/output/files/sub/rank0.json",
    }
    assert set(objects) == expected, (sorted(set(objects) ^ expected), [p for p in api.paths if "/log" in p][:5])
    # the configuration: the experiment as planned, the cluster, the storage
    assert json.loads(objects[f"{exp}resnet50-4-workers/config/experiment.json"])["nodes"] == 4
    assert json.loads(objects["cluster.json"])["nodeGroups"]["gpu"]["instanceTypes"] == ["g6.xlarge"]
    assert json.loads(objects["storage.json"])["backend"] == "efs"
    manifest = json.loads(objects[f"{exp}resnet50-1-worker/config/manifests/job.json"])
    assert manifest["kind"] == "Job" and "managedFields" not in manifest["metadata"]
    assert objects[f"{exp}resnet50-2-workers/output/logs/resnet50-2-workers-0-x1/worker.log"] == b"CUDA out of memory\n"
    # metrics: the program's, with status and Kubernetes' times; a failed experiment's from Kubernetes only
    one = json.loads(objects[f"{exp}resnet50-1-worker/output/metrics.json"])
    assert one["status"] == "Succeeded" and one["throughput"] == 410.2 and one["wall_time_s"] == 95.5
    assert one["job_duration_s"] == 300.0 and one["metrics_source"] == "program"
    assert one["skippedFiles"] == [
        {
            "path": "big.json",
            "bytes": (volume / cfg["experiments"]["resnet50-1-worker"]["outputDir"].lstrip("/") / "big.json")
            .stat()
            .st_size,
        }
    ]
    two = json.loads(objects[f"{exp}resnet50-2-workers/output/metrics.json"])
    assert (
        two["status"] == "Failed"
        and two["metrics_source"] == "kubernetes"
        and two["wall_time_s"] == two["job_duration_s"] == 150.0
    )
    assert json.loads(objects[f"{exp}nccl-allreduce-2-nodes/output/metrics.json"])["busbw_gbps"] == 2.95
    collected = json.loads(objects["collector.json"])
    assert {n: e["status"] for n, e in collected["experiments"].items()} == {
        "resnet50-1-worker": "Succeeded",
        "resnet50-2-workers": "Failed",
        "resnet50-4-workers": "Succeeded",
        "nccl-allreduce-2-nodes": "Succeeded",
    }
    progress = json.loads(objects["progress.json"])
    assert sorted(progress["collected"]) == sorted(cfg["experiments"])
    assert progress["experiments"]["resnet50-4-workers"]["pods"] == {"Succeeded": 4}

    # --- the driver: follow (already finished), summary to S3 and a local folder, destroy -----------------------------
    for k, v in env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("EKS_TRAINING_BENCHMARK_RUN", raising=False)
    plan = cli.load_plan("benchmark")
    assert plan.config.benchmark is not None and plan.config.benchmark.run == run

    class Stack:
        destroyed = False

        def up(self, *, on_output: Any = None) -> None:
            pass

        def outputs(self) -> dict[str, Any]:
            return {
                "benchmark": {
                    "run": run,
                    "bucket": bucket,
                    "prefix": prefix,
                    "region": aws_support.REGION,
                    "experiments": {n: {} for n in cfg["experiments"]},
                }
            }

        def destroy(self, *, on_output: Any = None) -> None:
            Stack.destroyed = True

    out = io.StringIO()
    opts = driver.Options(stack="benchmark", output_dir=tmp_path / "local", poll_s=0.01, timeout_s=patient(5))
    outcome = driver.run(opts, plan, Stack, cli.S3Store, out)
    assert outcome.code == driver.EXIT_EXPERIMENT_FAILED, out.getvalue()  # resnet50-2-workers failed
    assert Stack.destroyed and outcome.destroyed
    summary = {k: v for k, v in _objects(s3, bucket, prefix + "summary/").items()}
    assert set(summary) == set(layout.SUMMARY_FILES)
    for name in layout.SUMMARY_FILES:
        assert (tmp_path / "local" / name).read_bytes() == summary[name]
    rows = list(csv.DictReader(io.StringIO(summary["summary.csv"].decode())))
    assert list(rows[0]) == COLUMNS
    by_name = {r["experiment"]: r for r in rows}
    assert [r["experiment"] for r in rows] == [j.name for j in plan.experiments]  # config order
    assert (
        by_name["resnet50-1-worker"]["throughput"] == "410.2"
        and by_name["resnet50-1-worker"]["throughput_unit"] == "images/s"
    )
    assert by_name["resnet50-2-workers"]["status"] == "Failed" and by_name["resnet50-2-workers"]["throughput"] == ""
    assert by_name["nccl-allreduce-2-nodes"]["busbw_gbps"] == "2.95"
    # cost: the nodes' hourly price for the 300 s Kubernetes ran the experiment
    hourly = float(by_name["resnet50-4-workers"]["hourly_usd"])
    assert float(by_name["resnet50-4-workers"]["cost_usd"]) == pytest.approx(hourly * 300 / 3600, abs=1e-4)
    doc = json.loads(summary["summary.json"])
    assert doc["run"] == run and doc["resultsUri"] == f"s3://{bucket}/{prefix}" and len(doc["experiments"]) == 4
    assert doc["experimentsCostUsd"] == pytest.approx(sum(float(r["cost_usd"]) for r in rows), abs=1e-3)
    assert "resnet50-4-workers" in summary["summary.txt"].decode() and summary["summary.txt"].decode() in out.getvalue()
    png = summary["summary.png"]
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    assert width == 900 and height > 600, (width, height)
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        image.load()  # decodes every row
        assert image.size == (width, height) and image.format == "PNG"
        assert len(set(image.convert("RGB").getdata())) > 10, "the chart has bars and text, not a blank image"
    pulumi.runtime.set_all_config({}, [])
    assert PROJECT
