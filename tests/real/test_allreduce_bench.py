"""Tests of ``training/allreduce_bench.py``: the formulas in-process, the script for real.

The end-to-end tests launch the real script under ``torchrun --standalone``
with two processes (gloo on CPU) and as a plain one-process ``python`` run;
nothing is mocked.  Every child runs in its own process group, which is
killed in ``finally`` whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training"))

import allreduce_bench as bench  # found through the sys.path entry above

from tests.wait import patient

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH_PY = REPO_ROOT / "training" / "allreduce_bench.py"

MIB = 1 << 20
SMALL_SIZES = [MIB, 2 * MIB, 4 * MIB]
RUN_TIMEOUT = 60.0


# --------------------------------------------------------------------------- #
# Running the script
# --------------------------------------------------------------------------- #
@dataclass
class Completed:
    """Exit code and output of one finished command."""

    returncode: int
    stdout: str
    stderr: str

    def events(self, name: str) -> list[dict[str, Any]]:
        """The JSON lines on stdout whose ``event`` is ``name``."""
        found = []
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("event") == name:
                    found.append(record)
        return found

    def summary(self) -> dict[str, Any]:
        """The single ``allreduce_summary`` record."""
        summaries = self.events("allreduce_summary")
        assert len(summaries) == 1, self.describe()
        return summaries[0]

    def describe(self) -> str:
        """Everything useful for an assertion message."""
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr[-4000:]}"


def run_command(cmd: list[str], timeout: Optional[float] = None) -> Completed:
    """Run ``cmd`` in a new process group (CPU, one OpenMP thread); kill the group in any case."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
        CUDA_VISIBLE_DEVICES="",
        PYTHONUNBUFFERED="1",
    )
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=patient(RUN_TIMEOUT) if timeout is None else timeout)
        return Completed(proc.returncode, stdout, stderr)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def torchrun(*script_args: str) -> Completed:
    """``torchrun --standalone --nnodes=1 --nproc-per-node=2 allreduce_bench.py ARGS``."""
    return run_command(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            "--nproc-per-node=2",
            "--max-restarts=0",
            str(BENCH_PY),
            *script_args,
        ]
    )


def assert_bandwidths_consistent(summary: dict[str, Any]) -> None:
    """algbw = bytes/time and busbw = algbw * 2(n-1)/n for every size, within the output rounding."""
    factor = 2.0 * (summary["world_size"] - 1) / summary["world_size"]
    for entry in summary["sizes"]:
        assert entry["correct"] is True and entry["wrong_elements"] == 0, entry
        assert entry["count"] * 4 == entry["size_bytes"]
        assert entry["time_us"] >= entry["time_us_min_rank"] > 0.0, entry
        assert entry["algbw_gbps"] == pytest.approx(
            entry["size_bytes"] / (entry["time_us"] * 1e3), rel=1e-3, abs=2e-4
        ), entry
        assert entry["busbw_gbps"] == pytest.approx(entry["algbw_gbps"] * factor, abs=2e-4), entry


# --------------------------------------------------------------------------- #
# Pure functions
# --------------------------------------------------------------------------- #
def test_bandwidth_formula_matches_nccl_tests() -> None:
    """algbw = S/t, busbw = algbw * 2(n-1)/n, in units of 1e9 bytes per second."""
    assert bench.allreduce_bus_factor(1) == 0.0
    assert bench.allreduce_bus_factor(2) == 1.0
    assert bench.allreduce_bus_factor(8) == pytest.approx(1.75)
    assert bench.allreduce_bus_factor(16) == pytest.approx(1.875)

    algbw, busbw = bench.allreduce_bandwidth_gbps(1 << 30, 0.1, 16)
    assert algbw == pytest.approx(10.73741824)
    assert busbw == pytest.approx(10.73741824 * 1.875)
    algbw, busbw = bench.allreduce_bandwidth_gbps(4_000_000_000, 2.0, 3)
    assert algbw == pytest.approx(2.0) and busbw == pytest.approx(2.0 * 4 / 3)
    assert bench.allreduce_bandwidth_gbps(MIB, 1e-3, 1)[1] == 0.0  # one process: busbw 0
    for bad_time in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            bench.allreduce_bandwidth_gbps(MIB, bad_time, 2)
    with pytest.raises(ValueError):
        bench.allreduce_bus_factor(0)


def test_message_sizes_are_powers_of_two() -> None:
    """Defaults span 1 MiB..64 MiB on CPU; bad bounds are rejected."""
    assert bench.message_sizes(MIB, 4 * MIB) == SMALL_SIZES
    assert bench.message_sizes(4, 4) == [4]
    assert len(bench.message_sizes(bench.DEFAULT_MIN_BYTES, bench.DEFAULT_MAX_BYTES_GPU)) == 11
    for low, high in ((3 * MIB, 4 * MIB), (MIB, 3 * MIB), (2, 8), (4 * MIB, MIB)):
        with pytest.raises(ValueError):
            bench.message_sizes(low, high)
    assert bench.parse_args([]).sizes == bench.message_sizes(MIB, 64 * MIB)  # CPU default


@pytest.mark.parametrize("world_size", [1, 2, 5, 64])
def test_result_check_counts_wrong_elements(world_size: int) -> None:
    """The check pattern summed over ``n`` ranks is accepted; any corrupted element is counted."""
    numel = 4096
    total = torch.zeros(numel, dtype=torch.float32)
    contribution = torch.empty(numel, dtype=torch.float32)
    for rank in range(world_size):
        bench.fill_check_pattern(contribution, rank)
        total += contribution
    assert bench.count_wrong_elements(total, world_size) == 0
    assert bench.count_wrong_elements(total, world_size + 1) == numel
    total[7] += 1.0
    total[-1] = math.nan
    assert bench.count_wrong_elements(total, world_size) == 2
    tiny = torch.empty(2, dtype=torch.float32)  # shorter than one pattern period
    bench.fill_check_pattern(tiny, 0)
    assert tiny.tolist() == [1.0, 2.0]


def test_outcome_and_exit_codes() -> None:
    """Wrong result 4 beats world size 5 beats bandwidth 3; one process passes only without a threshold."""
    assert bench.decide_outcome(True, 2, 1.0, None, None)[0] == 0
    assert bench.decide_outcome(True, 2, 1.0, 0.5, 2)[0] == 0
    assert bench.decide_outcome(True, 2, 0.4, 0.5, None)[0] == 3
    assert bench.decide_outcome(True, 1, 0.0, None, None)[0] == 0
    code, reason = bench.decide_outcome(True, 1, 0.0, 1e-9, None)
    assert code == 3 and "one process" in reason
    assert bench.decide_outcome(True, 1, 0.0, 0.5, 2)[0] == 5
    assert bench.decide_outcome(False, 1, 0.0, 0.5, 2)[0] == 4
    assert bench.decide_outcome(False, 2, 9.0, None, None)[0] == 4


def test_write_json_atomic_leaves_no_temp_files(tmp_path: Path) -> None:
    """The report replaces an older one in place and no temp file is left behind."""
    target = tmp_path / "sub" / "report.json"
    bench.write_json_atomic(target, {"a": 1})
    bench.write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]
    assert target.stat().st_mode & 0o777 == 0o644


# --------------------------------------------------------------------------- #
# The real script
# --------------------------------------------------------------------------- #
def test_torchrun_two_processes_reports_bandwidth(tmp_path: Path) -> None:
    """Two gloo processes: one line per size, a consistent summary on stdout and in the JSON file."""
    report = tmp_path / "allreduce.json"
    result = torchrun("--max-bytes", str(4 * MIB), "--iters", "5", "--output-json", str(report))
    assert result.returncode == 0, result.describe()
    assert "allreduce_bench: PASSED (exit 0)" in result.stderr

    per_size = result.events("allreduce_result")
    assert [r["size_bytes"] for r in per_size] == SMALL_SIZES  # printed by rank 0 only
    summary = result.summary()
    assert summary["world_size"] == 2 and summary["backend"] == "gloo"
    assert [s["size_bytes"] for s in summary["sizes"]] == SMALL_SIZES
    assert summary["iters"] == 5 and summary["warmup"] == 5
    assert_bandwidths_consistent(summary)
    assert all(s["busbw_gbps"] > 0.0 for s in summary["sizes"])
    assert summary["busbw_at_max_size_gbps"] == summary["sizes"][-1]["busbw_gbps"] > 0.0
    assert summary["max_busbw_gbps"] == max(s["busbw_gbps"] for s in summary["sizes"])
    assert summary["threshold_gbps"] is None
    assert summary["passed"] is True and summary["correct"] is True and summary["exit_code"] == 0

    assert json.loads(report.read_text()) == summary
    assert [p.name for p in tmp_path.iterdir()] == ["allreduce.json"]  # no temp file left


def test_torchrun_below_threshold_fails_with_exit_3(tmp_path: Path) -> None:
    """An unreachable --min-busbw-gbps: every worker exits 3, the report says passed false.

    torchrun itself exits 1 when a worker fails; it names the worker exit code
    in its failure report.
    """
    report = tmp_path / "allreduce.json"
    result = torchrun(
        "--max-bytes",
        str(2 * MIB),
        "--iters",
        "3",
        "--warmup",
        "1",
        "--min-busbw-gbps",
        "1e9",
        "--output-json",
        str(report),
    )
    assert result.returncode != 0, result.describe()
    assert "exitcode  : 3" in result.stderr, result.describe()
    assert "exitcode  : 0" not in result.stderr
    assert "FAILED (exit 3)" in result.stderr and "below the threshold" in result.stderr
    summary = result.summary()
    assert summary["passed"] is False and summary["exit_code"] == 3
    assert summary["correct"] is True and summary["threshold_gbps"] == 1e9
    assert summary["world_size"] == 2 and summary["busbw_at_max_size_gbps"] > 0.0
    assert_bandwidths_consistent(summary)
    assert json.loads(report.read_text()) == summary


def test_single_process_busbw_is_zero_and_threshold_fails(tmp_path: Path) -> None:
    """Plain ``python`` (world size 1): busbw 0 at every size, so any threshold fails with exit 3."""
    report = tmp_path / "one.json"
    result = run_command(
        [
            sys.executable,
            str(BENCH_PY),
            "--max-bytes",
            str(2 * MIB),
            "--iters",
            "2",
            "--warmup",
            "1",
            "--min-busbw-gbps",
            "0.001",
            "--output-json",
            str(report),
        ]
    )
    assert result.returncode == 3, result.describe()
    summary = json.loads(report.read_text())
    assert summary == result.summary()
    assert summary["world_size"] == 1 and summary["passed"] is False and summary["correct"] is True
    assert summary["max_busbw_gbps"] == 0.0
    assert all(s["busbw_gbps"] == 0.0 for s in summary["sizes"])
    assert "0 by definition" in summary["reason"]


def test_efa_readiness_needs_devices_and_the_ofi_plugin(tmp_path: Path) -> None:
    """--require-efa: a node without the EFA devices or without aws-ofi-nccl fails the check (exit 6)
    instead of measuring TCP and passing as if it were EFA."""
    dev = tmp_path / "dev"
    lib = tmp_path / "lib" / "x86_64-linux-gnu"
    dev.mkdir()
    lib.mkdir(parents=True)
    problems = bench.efa_problems(2, dev_dir=dev, library_path=str(tmp_path / "lib"))
    assert len(problems) == 2 and "0 EFA device(s)" in problems[0] and "libnccl-net" in problems[1]
    (dev / "uverbs0").touch()
    (dev / "uverbs1").touch()
    (lib / "libnccl-net.so").touch()
    assert bench.efa_problems(2, dev_dir=dev, library_path=str(tmp_path / "lib")) == []
    assert len(bench.efa_problems(4, dev_dir=dev, library_path=str(tmp_path / "lib"))) == 1


def test_require_efa_fails_a_node_without_efa(tmp_path: Path) -> None:
    """A real single-process run on this machine (no EFA here) exits 6 and says why."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH_PY),
            "--max-bytes",
            "1048576",
            "--iters",
            "1",
            "--require-efa",
            "1",
            "--output-json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=patient(120),
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 6, proc.stderr
    summary = json.loads(report.read_text())
    assert summary["passed"] is False and "EFA is not usable" in summary["reason"]
