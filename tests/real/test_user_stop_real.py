"""A user's own ``pytorch`` script that stops as the job contract shows ("What a stop means", its code as written):
one pod of two is drained, the other gets no signal. The shared flag stops every rank after one step, rank 0 saves,
every rank exits 75; torchrun starts the remaining rank again, it resumes from the checkpoint and finishes. The run
is recorded finished (``DONE``) only at its last step, and with ``maxRestarts: 0`` the stop is no failure."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from stacks.local.processes import process_env
from tests import training_support as ts
from tests.harness import REPO
from tests.wait import patient, wait_for

if str(REPO / "training") not in sys.path:  # training/'s modules import their siblings as top-level modules
    sys.path.insert(0, str(REPO / "training"))

import goodput  # noqa: E402
import launch  # noqa: E402
import run_script  # noqa: E402

#: Steps of 0.05 s: the drain lands after step 20, and the run is still far from its end however slow the machine.
STEPS = 300
#: The script around the job contract's snippet, which runs at the end of every step.
SCRIPT = '''
import json, os, signal, sys, threading, time
from pathlib import Path

import torch
import torch.distributed as dist

out = Path(os.environ["OUTPUT_DIR"])
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
device = torch.device("cpu")


def save_checkpoint():
    (out / "ckpt.tmp").write_text(json.dumps({{"step": step}}))
    os.replace(out / "ckpt.tmp", out / "ckpt.json")


dist.init_process_group("gloo")
step = json.loads((out / "ckpt.json").read_text())["step"] if (out / "ckpt.json").exists() else 0
if dist.get_rank() == 0:
    print(json.dumps({{"event": "user_start", "step": step, "world_size": dist.get_world_size()}}), flush=True)
while step < {steps}:
    time.sleep(0.05)
    step += 1
    if dist.get_rank() == 0 and step % 10 == 0:
        print(json.dumps({{"event": "user_step", "step": step}}), flush=True)
{snippet}
if dist.get_rank() == 0:
    (out / "result.json").write_text(json.dumps({{"step": step, "world_size": dist.get_world_size()}}))
dist.destroy_process_group()
'''


def contract_snippet() -> str:
    """The stop code of docs/reference/job-contract.md's "What a stop means", as written."""
    page = (REPO / "docs" / "reference" / "job-contract.md").read_text()
    section = page.split("## What a stop means", 1)[1].split("\n## ", 1)[0]
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "all_reduce" in b]
    return code


def test_a_users_script_stopped_on_one_pod_resumes_and_finishes_once(
    tmp_path: Path, etcd_server: ts.EtcdServer
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    assert f"sys.exit({run_script.EXIT_STOPPED})" in contract_snippet()  # the status a stop counts no failure with
    snippet = "".join(f"    {line}\n" if line else "\n" for line in contract_snippet().splitlines())
    (code / "stop_flag.py").write_text(SCRIPT.format(steps=STEPS, snippet=snippet))
    job_name = "stopper"
    job_config = {
        "kind": "pytorch",
        "nodeGroup": "cpu",
        "nodes": 2,
        "minNodes": 1,
        "code": "s3://my-bucket/stopper/",
        "script": "stop_flag.py",
        "maxRestarts": 0,  # the stop must not count: one counted failure would end the run
    }
    runner, plan = ts.local_stack_runner(
        "workshop", {job_name: job_config}, tmp_path / "work", code={job_name: code}, etcd_endpoint=etcd_server.endpoint
    )
    job = plan.jobs[job_name]
    output = Path(runner.host_path(job.output_dir, runner.image_dir(job), runner.work))
    pods = [
        ts.ManagedProcess(p.argv, tmp_path / f"pod-{p.index}.log", env=process_env(p), cwd=p.cwd)
        for p in runner.pods(job)
    ]
    try:

        def rank0() -> ts.ManagedProcess | None:
            for pod in pods:
                if any(e.get("event") == "user_step" and e["step"] >= 20 for e in ts.json_events(pod.output())):
                    return pod
            return None

        keeper = wait_for(rank0, patient(120), what="rank 0 past step 20 at world size 2")
        victim = next(p for p in pods if p is not keeper)
        starts = [e for e in ts.json_events(keeper.output()) if e.get("event") == "user_start"]
        assert starts and starts[-1]["world_size"] == 2, keeper.output()[-3000:]
        term_at = time.time()
        os.kill(victim.pid, signal.SIGTERM)  # the kubelet's stop, to the drained pod's launcher only
        assert victim.wait(patient(60)) == launch.EXIT_STOPPED, victim.output()[-3000:]
        assert keeper.wait(patient(180)) == 0, keeper.output()[-3000:]
        result = json.loads((output / "result.json").read_text())
        assert result == {"step": STEPS, "world_size": 1}, result  # it went on alone, to the last step
        resumed = [e for e in ts.json_events(keeper.output()) if e.get("event") == "user_start"][-1]
        assert resumed["world_size"] == 1 and 20 <= resumed["step"] < STEPS, resumed  # from the stop's checkpoint
        assert (output / "DONE").is_file() and not (output / "FAILED").exists()
        assert (output / "DONE").stat().st_mtime >= (output / "result.json").stat().st_mtime >= term_at
        # goodput's ledgers: the drained pod's launcher recorded its command's exit with the stop signal it got (an
        # orderly stop, not a failure), the other's with none
        exits = [r for r in goodput.read_ledgers(output) if r["kind"] == "exit"]
        assert sorted(str(r.get("stop_signal")) for r in exits) == ["None", "SIGTERM"], exits
    finally:
        for pod in pods:
            pod.kill()
