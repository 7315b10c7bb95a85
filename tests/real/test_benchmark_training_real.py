"""The synthetic ResNet benchmark as a job runs it: two ranks under torchrun on 127.0.0.1
(training/synthetic_benchmark.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import training_support as ts
from tests.wait import patient


def test_two_ranks_under_torchrun_report_images_per_second(tmp_path: Path) -> None:
    """Two processes (gloo) train ResNet-18 on 32x32 synthetic images: rank 0 reports the throughput of both,
    writes metrics.json and the DONE marker launch.py checks."""
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OUTPUT_DIR": str(out)}
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run(
        [
            str(torchrun),
            "--standalone",
            "--nnodes=1",
            "--nproc-per-node=2",
            str(ts.TRAINING_DIR / "synthetic_benchmark.py"),
            "--model",
            "resnet18",
            "--batch-size",
            "2",
            "--image-size",
            "32",
            "--classes",
            "10",
            "--warmup-steps",
            "1",
            "--steps",
            "2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=patient(300),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    result = next(e for e in events if e["event"] == "benchmark_result")
    assert result["world_size"] == 2 and result["images_per_sec"] > 0
    assert result["images_per_sec"] == pytest.approx(2 * 2 * 2 / result["timed_s"], rel=0.01)
    written = json.loads((out / "metrics.json").read_text())
    assert written["throughput"] == result["images_per_sec"] and written["throughput_unit"] == "images/s"
    assert written["world_size"] == 2 and written["final_loss"] == result["final_loss"] and written["wall_time_s"] > 0
    assert (out / "DONE").is_file() and json.loads((out / "synthetic_benchmark.json").read_text()) == {
        k: v for k, v in result.items() if k not in ("event", "time")
    }
