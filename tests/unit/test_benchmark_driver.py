"""``python -m stacks.benchmark``'s sequencing with the Automation API's stack replaced at its boundary (a fake with
``up``, ``destroy`` and ``outputs``) and the run's S3 folder replaced by a dictionary: up, follow, summary and
destroy in ``finally`` on success, failure, timeout and interrupt; ``--keep``; ``--dry-run``; ``--help``."""

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import yaml

from components.catalog import HOURS_PER_MONTH, SERVICE_PRICES
from components.catalog.instances import INSTANCE_TYPES
from components.nodeplan import DEFAULT_DISK_SIZE_GIB
from stacks.benchmark import cli, driver, layout
from stacks.config.benchmark import RUN_ENV
from tests.harness import REPO

EXPERIMENTS = ["resnet50-1-worker", "resnet50-2-workers", "resnet50-4-workers", "nccl-allreduce-2-nodes"]


class FakeStack:
    """Records the calls; ``up`` may raise; ``outputs`` are what the program exports."""

    def __init__(self, calls: list[str], run: str, up_error: Optional[BaseException] = None) -> None:
        self.calls = calls
        self.run = run
        self.up_error = up_error

    def up(self, *, on_output: Any = None) -> None:
        self.calls.append("up")
        if on_output:
            on_output("Updating (benchmark): + 120 created")
        if self.up_error is not None:
            raise self.up_error

    def outputs(self) -> dict[str, Any]:
        self.calls.append("outputs")

        class OutputValue:  # what the Automation API returns: the value in .value
            def __init__(self, value: Any) -> None:
                self.value, self.secret = value, False

        return {
            "benchmark": OutputValue(
                {
                    "run": self.run,
                    "bucket": "results-bucket",
                    "prefix": f"benchmarks/{self.run}/",
                    "region": "us-east-1",
                    "experiments": {e: {} for e in EXPERIMENTS},
                }
            )
        }

    def destroy(self, *, on_output: Any = None) -> None:
        self.calls.append("destroy")


class FakeStore:
    """The run's folder: objects appear as the collector would write them, one poll after another."""

    def __init__(self, calls: list[str], script: list[dict[str, Any]]) -> None:
        self.calls = calls
        self.script = script
        self.objects: dict[str, Any] = {}
        self.reads = 0

    def get_json(self, rel: str) -> Optional[dict[str, Any]]:
        if rel == layout.DONE_FILE:
            self.reads += 1
            if self.script:
                self.objects.update(self.script.pop(0))
        value = self.objects.get(rel)
        return value if value is None or isinstance(value, dict) else None

    def put(self, rel: str, data: bytes, content_type: str) -> str:
        self.calls.append(f"put {rel}")
        self.objects[rel] = data
        return f"s3://results-bucket/{rel}"


def metrics(status: str, **fields: Any) -> dict[str, Any]:
    return {"status": status, "wall_time_s": 90.0, "job_duration_s": 120.0, **fields}


def progress(phase: str, collected: list[str]) -> dict[str, Any]:
    return {
        "updatedAt": "2026-05-21T10:01:00Z",
        "collected": collected,
        "experiments": {e: {"phase": phase, "elapsedSeconds": 61, "pods": {phase: 1}} for e in EXPERIMENTS},
    }


def finished(failed: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "experiments": {
            e: {
                "status": "Failed" if e in failed else "Succeeded",
                "metrics": metrics(
                    "Failed" if e in failed else "Succeeded", throughput=100.0, throughput_unit="images/s"
                ),
            }
            for e in EXPERIMENTS
        }
    }


def run_cli(
    argv: list[str],
    calls: list[str],
    store: Optional[FakeStore] = None,
    up_error: Optional[BaseException] = None,
    monkeypatch: Optional[pytest.MonkeyPatch] = None,
    sleep: Optional[Callable[[float], None]] = None,
) -> tuple[int, str, list[FakeStack]]:
    out = io.StringIO()
    stacks: list[FakeStack] = []

    def open_stack(name: str, env: dict[str, str]) -> FakeStack:
        calls.append(f"open {name} {env[RUN_ENV]}")
        stack = FakeStack(calls, env[RUN_ENV], up_error)
        stacks.append(stack)
        return stack

    def open_store(target: driver.Target) -> FakeStore:
        calls.append(f"store {target.uri}")
        assert store is not None
        return store

    if monkeypatch is not None and sleep is not None:
        monkeypatch.setattr(driver.time, "sleep", sleep)
    code = cli.main(argv, out=out, open_stack=open_stack, open_store=open_store)
    return code, out.getvalue(), stacks


@pytest.fixture(autouse=True)
def _no_run_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """cli.main sets the run id in the environment (for the program it starts): unset again after each test."""
    monkeypatch.setenv(RUN_ENV, "recorded-so-that-teardown-removes-it")
    monkeypatch.delenv(RUN_ENV)


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--stack",
        "benchmark",
        "--run",
        "run-20260521-101500",
        "--poll-seconds",
        "0.01",
        "--output-dir",
        str(tmp_path),
        *extra,
    ]


def test_success_runs_up_follow_summary_then_destroy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    store = FakeStore(
        calls,
        [
            {layout.PROGRESS_FILE: progress("Pending", [])},
            {layout.PROGRESS_FILE: progress("Running", [])},
            {layout.PROGRESS_FILE: progress("Succeeded", EXPERIMENTS), layout.DONE_FILE: finished()},
        ],
    )
    code, out, _ = run_cli(_args(tmp_path), calls, store, monkeypatch=monkeypatch, sleep=lambda s: None)
    assert code == driver.EXIT_OK, out
    assert calls[:4] == [
        "open benchmark run-20260521-101500",
        "up",
        "outputs",
        "store s3://results-bucket/benchmarks/run-20260521-101500/",
    ]
    assert calls[4:8] == [f"put summary/{n}" for n in layout.SUMMARY_FILES]
    assert calls[-1] == "destroy" and calls.count("destroy") == 1
    # the progress display: each experiment's phase and elapsed time, printed when it changes
    assert "resnet50-4-workers      Pending    0:01:01  1 pending" in out and "Running    0:01:01  1 running" in out
    assert "4/4 collected" in out and "pulumi destroy --stack benchmark" in out
    assert {p.name for p in tmp_path.iterdir()} == set(layout.SUMMARY_FILES)
    assert json.loads((tmp_path / "summary.json").read_text())["run"] == "run-20260521-101500"


def test_a_failed_experiment_still_gets_its_summary_and_the_teardown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    store = FakeStore(calls, [{layout.DONE_FILE: finished(failed=("resnet50-2-workers",))}])
    code, out, _ = run_cli(_args(tmp_path), calls, store, monkeypatch=monkeypatch, sleep=lambda s: None)
    assert code == driver.EXIT_EXPERIMENT_FAILED
    assert "not succeeded: resnet50-2-workers" in out
    assert "put summary/summary.csv" in calls and calls[-1] == "destroy"


def test_a_failed_up_is_torn_down(tmp_path: Path) -> None:
    calls: list[str] = []
    code, out, _ = run_cli(_args(tmp_path), calls, up_error=RuntimeError("CommandError: code 255 (quota exceeded)"))
    assert code == driver.EXIT_UP_FAILED
    assert calls == ["open benchmark run-20260521-101500", "up", "destroy"]
    assert "pulumi up failed: CommandError: code 255 (quota exceeded)" in out


def test_experiments_waiting_for_their_block_are_said_and_torn_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before their Capacity Block starts, pulumi up makes neither the experiments nor the collector, so the stack has
    no benchmark output: the command says why, and tears down (nothing ran), instead of reading a missing output."""
    calls: list[str] = []
    monkeypatch.setattr(FakeStack, "outputs", lambda self: {})
    code, out, _ = run_cli(_args(tmp_path), calls)
    assert code == driver.EXIT_UP_FAILED and calls[-1] == "destroy", calls
    assert "pulumi up made no collector: the experiments wait for their Capacity Block to start" in out, out


def test_ctrl_c_during_up_is_torn_down(tmp_path: Path) -> None:
    calls: list[str] = []
    code, out, _ = run_cli(_args(tmp_path), calls, up_error=KeyboardInterrupt())
    assert code == driver.EXIT_INTERRUPTED and calls[-1] == "destroy" and "interrupted" in out


def test_ctrl_c_while_following_is_torn_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    store = FakeStore(calls, [{layout.PROGRESS_FILE: progress("Running", [])}])

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    code, out, _ = run_cli(_args(tmp_path), calls, store, monkeypatch=monkeypatch, sleep=interrupt)
    assert code == driver.EXIT_INTERRUPTED
    assert calls[-1] == "destroy" and not [c for c in calls if c.startswith("put")], "no summary of an unfinished run"


def test_a_timeout_is_torn_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    store = FakeStore(calls, [{layout.PROGRESS_FILE: progress("Running", [])}])
    now = [0.0]
    monkeypatch.setattr(driver.time, "monotonic", lambda: now[0])

    def tick(seconds: float) -> None:
        now[0] += 60.0

    code, out, _ = run_cli(_args(tmp_path, "--timeout", "5"), calls, store, monkeypatch=monkeypatch, sleep=tick)
    assert code == driver.EXIT_TIMEOUT
    assert "timeout: the collector did not finish within 5 minutes" in out
    assert store.reads == 6 and calls[-1] == "destroy"


def test_keep_leaves_the_environment_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    store = FakeStore(calls, [{layout.DONE_FILE: finished()}])
    code, out, _ = run_cli(_args(tmp_path, "--keep"), calls, store, monkeypatch=monkeypatch, sleep=lambda s: None)
    assert code == driver.EXIT_OK and "destroy" not in calls
    assert "keeping the environment (pulumi destroy --stack benchmark removes it)" in out
    calls.clear()
    code, _, _ = run_cli(_args(tmp_path, "--keep"), calls, up_error=RuntimeError("boom"))
    assert code == driver.EXIT_UP_FAILED and "destroy" not in calls


def test_a_failing_destroy_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    store = FakeStore(calls, [{layout.DONE_FILE: finished()}])

    def broken(self: FakeStack, *, on_output: Any = None) -> None:
        raise RuntimeError("lock held")

    monkeypatch.setattr(FakeStack, "destroy", broken)
    code, out, _ = run_cli(_args(tmp_path), calls, store, monkeypatch=monkeypatch, sleep=lambda s: None)
    assert code == driver.EXIT_UP_FAILED
    assert "pulumi destroy failed: lock held; run `pulumi destroy --stack benchmark`" in out


def test_dry_run_prints_the_plan_and_creates_nothing(tmp_path: Path) -> None:
    calls: list[str] = []
    code, out, stacks = run_cli(["--stack", "benchmark", "--dry-run", "--run", "run-1"], calls)
    assert code == driver.EXIT_OK and calls == [] and stacks == []
    assert "benchmark of stack benchmark, run run-1" in out
    assert "resnet50-4-workers: pytorch, 4 x g6.xlarge (group gpu), 1 process(es) per node, image training" in out
    assert "nccl-allreduce-2-nodes: mpi, 2 x g6.xlarge" in out and "/opt/nccl-tests/build/all_reduce_perf" in out
    assert "output /data/benchmarks/run-1/resnet50-1-worker" in out
    assert "results: s3://<a bucket the stack creates, kept on destroy>/benchmarks/run-1/" in out
    assert "dry run: nothing was created" in out


def test_a_stack_without_a_benchmark_or_with_a_bad_config_stops_before_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[str] = []
    assert run_cli(["--stack", "dev"], calls)[0] == driver.EXIT_CONFIG and calls == []
    assert "has no eks-training:benchmark section" in capsys.readouterr().err
    assert run_cli(["--stack", "no-such-stack"], calls)[0] == driver.EXIT_CONFIG and calls == []


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_args(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    options = [a for a in cli.build_parser()._actions if "--help" not in a.option_strings]
    assert sorted(o for a in options for o in a.option_strings) == [
        "--dry-run",
        "--keep",
        "--output-dir",
        "--poll-seconds",
        "--run",
        "--stack",
        "--timeout",
    ]
    for action in options:
        assert action.help and len(action.help) > 20, action.option_strings
        assert action.option_strings[0] in text
        assert " ".join(action.help.split())[:40] in text, action.option_strings
    assert "exit status: 0 every experiment succeeded" in text and "pulumi destroy" in text


def test_the_real_stack_is_the_local_program_with_the_run_in_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Automation API boundary itself: create_or_select_stack with this repository as the work dir."""
    from pulumi import automation as auto

    seen: dict[str, Any] = {}

    def create_or_select_stack(**kwargs: Any) -> str:
        seen.update(kwargs)
        return "the stack"

    monkeypatch.setattr(auto, "create_or_select_stack", create_or_select_stack)
    assert cli.automation_stack("benchmark", {RUN_ENV: "run-7"}) == "the stack"
    assert seen["stack_name"] == "benchmark" and seen["work_dir"] == str(REPO)
    assert seen["opts"].work_dir == str(REPO) and seen["opts"].env_vars == {RUN_ENV: "run-7"}
    assert "program" not in seen, "the local program (Pulumi.yaml + __main__.py), not an inline one"


def test_the_driver_reads_what_the_collector_writes() -> None:
    sys.path.insert(0, str(REPO / "training"))
    try:
        import collect_results
    finally:
        sys.path.remove(str(REPO / "training"))
    for name in (
        "RUN_FILE",
        "CLUSTER_FILE",
        "STORAGE_FILE",
        "PROGRESS_FILE",
        "DONE_FILE",
        "EXPERIMENTS_DIR",
        "METRICS_FILE",
    ):
        assert getattr(layout, name) == getattr(collect_results, name), name
    assert layout.metrics_key("x") == collect_results.experiment_key("x", "output", collect_results.METRICS_FILE)


def test_new_run_ids_are_valid_and_sort_by_time() -> None:
    import datetime as dt

    from stacks.config.benchmark import RUN_RE

    a = cli.new_run_id(dt.datetime(2026, 5, 21, 10, 15, 0, tzinfo=dt.UTC))
    b = cli.new_run_id(dt.datetime(2026, 5, 21, 10, 15, 1, tzinfo=dt.UTC))
    assert a == "run-20260521-101500" and a < b and RUN_RE.match(a)


def test_a_missing_pulumi_cli_stops_before_anything_with_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the Pulumi CLI the real run ends before `pulumi up` with the fix and its own exit status (4), not a
    FileNotFoundError traceback and 1, which --help says means "an experiment failed"."""
    from pulumi import automation as auto

    opened: list[str] = []
    monkeypatch.setattr(auto, "create_or_select_stack", lambda **kw: opened.append("stack"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi here
    out = io.StringIO()
    code = cli.main(_args(tmp_path), out=out)
    err = capsys.readouterr().err
    assert code == driver.EXIT_MISSING_TOOL == 4 and opened == [], err
    assert "the Pulumi CLI (`pulumi` is not on PATH): install it, https://www.pulumi.com/docs/install/" in err
    assert "nothing was created" in err and "4 a tool the run needs is missing" in cli.EPILOG
    fake = tmp_path / "pulumi"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert cli.missing_tools() == []  # the control: with the CLI on PATH (and matplotlib installed) nothing is missing


def test_dry_run_says_what_each_pod_starts_and_a_price_it_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tensorflow experiment's pod starts its command once (as the plan says); an experiment on a type described
    without a price has no cost per hour, said so, not ``$None``."""
    stack_file = tmp_path / "Pulumi.mine.yaml"
    stack_file.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "aws:region": "us-east-1",
                    "eks-training:instanceFacts": {
                        "x9.xlarge": {"vcpus": 4, "memoryMib": 16384, "source": "aws ec2 describe-instance-types"}
                    },
                    "eks-training:nodeGroups": {
                        "gpu": {
                            "instanceTypes": ["g5.12xlarge"],
                            "efa": False,
                            "minSize": 0,
                            "desiredSize": 2,
                            "maxSize": 2,
                        },
                        "cpu": {"instanceTypes": ["x9.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1},
                    },
                    "eks-training:images": {"tensorflow": {"context": "images/tensorflow"}},
                    "eks-training:benchmark": {
                        "experiments": {
                            "tf-2": {
                                "kind": "tensorflow",
                                "image": "tensorflow",
                                "nodeGroup": "gpu",
                                "nodes": 2,
                                "command": ["python", "/app/train_tf.py"],
                            },
                            "cpu-1": {"kind": "command", "nodeGroup": "cpu", "command": ["true"]},
                        }
                    },
                }
            }
        )
    )
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    monkeypatch.chdir(tmp_path)
    calls: list[str] = []
    code, out, _ = run_cli(["--stack", "mine", "--dry-run", "--run", "run-1"], calls)
    assert code == driver.EXIT_OK, out
    # two nodes at the catalog's On-Demand price, each with its default root volume (gp3, billed by the month)
    node = (
        INSTANCE_TYPES["g5.12xlarge"].price_per_hour
        + DEFAULT_DISK_SIZE_GIB * SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH
    )
    assert (
        "tf-2: tensorflow, 2 x g5.12xlarge (group gpu), 1 process (the command; PROCS_PER_NODE=4 in its environment) "
        f"per node, image tensorflow, ${2 * node:.4f}/h of nodes" in out
    ), out
    assert (
        "cpu-1: command, 1 x x9.xlarge (group cpu), 1 process (the command; PROCS_PER_NODE=1 in its environment) "
        "per node, image training, an unknown price (a type has no price)" in out
    ), out
    assert "$None" not in out
