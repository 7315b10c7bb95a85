"""The benchmark collector: wait for a run's experiments and copy each finished one's configuration, manifests,
logs, metrics and kept outputs to S3, so the results survive whatever happens to the driver.

Usage (the collector Job's command; the config is the collector's ConfigMap):
``python /app/collect_results.py --config /etc/benchmark/benchmark.json --region us-east-1``. It reads Kubernetes with
the pod's service account and the output folders from the shared volume (read-only), and writes S3 with single
PutObject requests only. An experiment is collected once it succeeded or failed; at ``--timeout-seconds`` the rest
are collected as they are (``TimedOut``); a failed request is retried at the next poll. Exit codes: 0 every
experiment collected (whatever their status), 1 S3 refused the results, 2 usage error. Every line on stdout is one
JSON object. The config and the layout it writes under ``s3://<bucket>/<prefix><run>/``: "The benchmark collector"
in docs/explanation/programs.md."""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import json
import os
import sys
import time
import urllib.error
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from kube_api import RESOURCES, Api, add_api_arguments  # beside this script in the image (/app)

#: The files of a run's folder (``python -m stacks.benchmark`` reads them; a test ties both sides).
RUN_FILE = "run.json"
CLUSTER_FILE = "cluster.json"
STORAGE_FILE = "storage.json"
PROGRESS_FILE = "progress.json"
DONE_FILE = "collector.json"
EXPERIMENTS_DIR = "experiments"
METRICS_FILE = "metrics.json"
#: The label every pod of an experiment carries (its job's name).
JOB_LABEL = "eks-training/job"
SUCCEEDED, FAILED, TIMED_OUT, RUNNING, PENDING = "Succeeded", "Failed", "TimedOut", "Running", "Pending"
FINAL = frozenset({SUCCEEDED, FAILED})
EXIT_OK, EXIT_S3, EXIT_USAGE = 0, 1, 2


def log(event: str, **fields: Any) -> None:
    """One JSON object on stdout."""
    print(
        json.dumps(
            {"event": event, "component": "collect_results", "time": round(time.time(), 3), **fields}, default=str
        ),
        flush=True,
    )


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> dt.datetime | None:
    """A Kubernetes timestamp (RFC 3339, ``2026-05-21T10:15:00Z``), or ``None``."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


# --------------------------------------------------------------------------------------------------------- Kubernetes
def condition_time(obj: dict[str, Any], kind: str) -> str | None:
    """When the object's condition ``kind`` became true."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond.get("lastTransitionTime")
    return None


def phase_of(obj: dict[str, Any] | None, success: str, pods: list[dict[str, Any]]) -> str:
    """``Succeeded`` or ``Failed`` from the object's conditions, else ``Running`` when a pod runs, else ``Pending``
    (not created yet, waiting for nodes, pulling images)."""
    if obj is not None:
        conditions = {
            c.get("type") for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
        }
        if success in conditions:
            return SUCCEEDED
        if "Failed" in conditions:
            return FAILED
    if any((p.get("status") or {}).get("phase") == "Running" for p in pods):
        return RUNNING
    return PENDING


@dataclass
class State:
    """What the collector knows of one experiment."""

    phase: str = PENDING
    started_at: str | None = None
    finished_at: str | None = None
    pods: dict[str, int] = field(default_factory=dict)
    """Pod phase -> count."""
    obj: dict[str, Any] | None = None
    pod_objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def duration_s(self) -> float | None:
        """Seconds from the start Kubernetes recorded to the finish (or to now, while it runs)."""
        start = parse_time(self.started_at)
        if start is None:
            return None
        end = parse_time(self.finished_at) or dt.datetime.now(dt.UTC)
        return round((end - start).total_seconds(), 3)

    def progress(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "elapsedSeconds": self.duration_s,
            "pods": dict(self.pods),
        }


def observe(api: Api, namespace: str, experiment: dict[str, Any]) -> State:
    """The experiment's object, pods, phase and times."""
    path, success, _ = RESOURCES[experiment["resource"]]
    obj = api.get(path.format(ns=namespace, name=experiment["name"]))
    selector = urllib.parse.quote(f"{JOB_LABEL}={experiment['name']}", safe="")
    listing = api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}") or {}
    pods = list(listing.get("items") or [])
    phase = phase_of(obj, success, pods)
    status = (obj or {}).get("status") or {}
    finished = None
    if phase == SUCCEEDED:
        finished = status.get("completionTime") or condition_time(obj or {}, success)
    elif phase == FAILED:
        finished = condition_time(obj or {}, "Failed") or status.get("completionTime")
    counts: dict[str, int] = {}
    for p in pods:
        ph = (p.get("status") or {}).get("phase") or "Unknown"
        counts[ph] = counts.get(ph, 0) + 1
    return State(
        phase=phase, started_at=status.get("startTime"), finished_at=finished, pods=counts, obj=obj, pod_objects=pods
    )


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without ``metadata.managedFields`` (server-side apply bookkeeping, long and useless here)."""
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": md}


def pod_logs(api: Api, namespace: str, pod: dict[str, Any]) -> dict[str, str]:
    """Container name -> its log, init containers first (a container that never started has none)."""
    spec = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name")
    out: dict[str, str] = {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        text = api.text(f"/api/v1/namespaces/{namespace}/pods/{name}/log?container={urllib.parse.quote(c['name'])}")
        if text is not None:
            out[c["name"]] = text
    return out


# ------------------------------------------------------------------------------------------------------------------ S3
class ObjectStore(Protocol):
    """What the collector needs of S3: one PutObject."""

    def put_object(self, **kwargs: Any) -> Any: ...


@dataclass
class Writer:
    """Writes under ``s3://<bucket>/<prefix><run>/`` with single PutObject requests, and remembers what it wrote."""

    client: ObjectStore
    bucket: str
    run_prefix: str
    written: list[str] = field(default_factory=list)

    def put(self, rel: str, body: bytes | str, content_type: str = "application/octet-stream") -> str:
        key = self.run_prefix + rel
        data = body.encode() if isinstance(body, str) else body
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)
        self.written.append(key)
        return key

    def put_json(self, rel: str, value: Any) -> str:
        return self.put(rel, json.dumps(value, indent=1, sort_keys=True, default=str) + "\n", "application/json")


def experiment_key(experiment: str, *parts: str) -> str:
    """``experiments/<experiment>/<parts...>`` (relative to the run's folder)."""
    return "/".join((EXPERIMENTS_DIR, experiment, *parts))


def kept_files(output_dir: Path, patterns: list[str]) -> list[Path]:
    """Files under ``output_dir`` whose path relative to it matches one of ``patterns`` (``metrics.json`` is copied
    on its own), sorted."""
    if not output_dir.is_dir():
        return []
    found = []
    for path in sorted(output_dir.rglob("*")):
        rel = path.relative_to(output_dir).as_posix()
        if path.is_file() and rel != METRICS_FILE and any(fnmatch.fnmatch(rel, p) for p in patterns):
            found.append(path)
    return found


def merged_metrics(name: str, own: dict[str, Any] | None, state: State) -> dict[str, Any]:
    """The experiment's own ``metrics.json`` (if it wrote one) with its status and Kubernetes' times: ``wall_time_s``
    is the program's measurement when it gave one, else the job's duration; ``metrics_source`` says whether the
    program wrote a ``metrics.json``."""
    record: dict[str, Any] = dict(own or {})
    record.setdefault("schema", "eks-training.metrics/1")
    for k in (
        "program",
        "wall_time_s",
        "throughput",
        "throughput_unit",
        "final_loss",
        "final_accuracy",
        "busbw_gbps",
        "world_size",
    ):
        record.setdefault(k, None)
    duration = state.duration_s
    record.update(
        experiment=name,
        status=state.phase,
        started_at=state.started_at,
        finished_at=state.finished_at,
        job_duration_s=duration,
        metrics_source="program" if own else "kubernetes",
    )
    if record.get("wall_time_s") is None:
        record["wall_time_s"] = duration
    return record


def read_own_metrics(output_dir: Path) -> dict[str, Any] | None:
    """The experiment's ``metrics.json``, or ``None`` (missing or not a JSON object)."""
    try:
        value = json.loads((output_dir / METRICS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def collect_experiment(
    writer: Writer,
    api: Api,
    namespace: str,
    experiment: dict[str, Any],
    state: State,
    keep: dict[str, Any],
    volume_root: Path = Path("/"),
) -> dict[str, Any]:
    """Copy one experiment's manifests, logs, kept outputs and metrics; returns its merged metrics (with the files
    skipped as too large under ``skippedFiles``)."""
    name = experiment["name"]
    kind = RESOURCES[experiment["resource"]].kind
    if state.obj is not None:
        writer.put_json(experiment_key(name, "config", "manifests", f"{kind}.json"), without_managed_fields(state.obj))
    writer.put_json(
        experiment_key(name, "config", "manifests", "pods.json"), [without_managed_fields(p) for p in state.pod_objects]
    )
    for pod in state.pod_objects:
        pod_name = (pod.get("metadata") or {}).get("name", "pod")
        for container, text in pod_logs(api, namespace, pod).items():
            writer.put(
                experiment_key(name, "output", "logs", pod_name, f"{container}.log"), text, "text/plain; charset=utf-8"
            )
    output_dir = volume_root / experiment["outputDir"].lstrip("/")
    limit = int(keep.get("maxFileMib", 1024)) * 1024 * 1024
    skipped = []
    for path in kept_files(output_dir, list(keep.get("outputs") or [])):
        rel = path.relative_to(output_dir).as_posix()
        size = path.stat().st_size
        if size > limit:
            skipped.append({"path": rel, "bytes": size})
            continue
        writer.put(experiment_key(name, "output", "files", rel), path.read_bytes())
    metrics = merged_metrics(name, read_own_metrics(output_dir), state)
    if skipped:
        metrics["skippedFiles"] = skipped
    writer.put_json(experiment_key(name, "output", METRICS_FILE), metrics)
    log("collected", experiment=name, status=state.phase)
    return metrics


def start_run(writer: Writer, config: dict[str, Any]) -> None:
    """What is known before any experiment finishes: the run, the cluster, the storage, each experiment's config."""
    writer.put_json(
        RUN_FILE,
        {
            "run": config["run"],
            "experiments": sorted(config["experiments"]),
            "collectorStartedAt": now_iso(),
            "namespace": config["namespace"],
        },
    )
    writer.put_json(CLUSTER_FILE, config.get("cluster") or {})
    writer.put_json(STORAGE_FILE, config.get("storage") or {})
    for name, exp in config["experiments"].items():
        writer.put_json(experiment_key(name, "config", "experiment.json"), exp.get("config") or {})


def collect(
    config: dict[str, Any],
    api: Api,
    writer: Writer,
    *,
    poll_seconds: float,
    timeout_seconds: float,
    volume_root: Path = Path("/"),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Wait for every experiment, collect each as it finishes, write progress as it goes and ``collector.json``
    at the end (returned)."""
    namespace = config["namespace"]
    experiments: dict[str, dict[str, Any]] = config["experiments"]
    start_run(writer, config)
    deadline = clock() + timeout_seconds
    states = {name: State() for name in experiments}
    results: dict[str, dict[str, Any]] = {}
    while True:
        for name, exp in experiments.items():
            if name in results:
                continue
            try:
                states[name] = observe(api, namespace, exp)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                log("api_error", experiment=name, error=str(exc))
                continue
            if states[name].phase in FINAL:
                results[name] = collect_experiment(
                    writer, api, namespace, exp, states[name], config.get("keep") or {}, volume_root
                )
        timed_out = clock() >= deadline
        if timed_out:
            for name, exp in experiments.items():
                if name not in results:
                    states[name].phase = TIMED_OUT
                    results[name] = collect_experiment(
                        writer, api, namespace, exp, states[name], config.get("keep") or {}, volume_root
                    )
        writer.put_json(
            PROGRESS_FILE,
            {
                "run": config["run"],
                "updatedAt": now_iso(),
                "experiments": {n: s.progress() for n, s in states.items()},
                "collected": sorted(results),
            },
        )
        if len(results) == len(experiments):
            break
        sleep(poll_seconds)
    done = {
        "run": config["run"],
        "finishedAt": now_iso(),
        "experiments": {n: {"status": results[n]["status"], "metrics": results[n]} for n in experiments},
    }
    writer.put_json(DONE_FILE, done)
    log("done", experiments={n: r["status"] for n, r in results.items()})
    return done


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True, help="the collector's ConfigMap file (benchmark.json)")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION"), help="the bucket's region")
    parser.add_argument("--poll-seconds", type=float, default=15.0)
    parser.add_argument(
        "--timeout-seconds",
        type=float,
        default=25 * 3600.0,
        help="collect the experiments still running after this long as they are (TimedOut)",
    )
    parser.add_argument(
        "--volume-root",
        type=Path,
        default=Path("/"),
        help="where the pods' paths are (the shared volume is mounted at <root>/data)",
    )
    add_api_arguments(parser)
    args = parser.parse_args(argv)
    if args.poll_seconds <= 0 or args.timeout_seconds <= 0:
        parser.error("--poll-seconds and --timeout-seconds must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        config = json.loads(args.config.read_text())
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    except (OSError, ValueError) as exc:
        print(f"collect_results.py: error: cannot read --config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    import boto3  # the toolbox image has it (staging, code download)
    import botocore.exceptions

    api = Api.from_args(args, timeout_s=60.0)
    writer = Writer(
        boto3.client("s3", region_name=args.region), config["bucket"], f"{config['prefix']}{config['run']}/"
    )
    try:
        collect(
            config,
            api,
            writer,
            poll_seconds=args.poll_seconds,
            timeout_seconds=args.timeout_seconds,
            volume_root=args.volume_root,
        )
    except botocore.exceptions.BotoCoreError as exc:
        log("s3_error", error=str(exc))
        return EXIT_S3
    except botocore.exceptions.ClientError as exc:
        log("s3_error", error=str(exc))
        return EXIT_S3
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
