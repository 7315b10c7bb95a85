"""Scale: 256 p5 nodes (a health check within 60 s, a 32-node job in one network block) and the benchmark command."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import pytest
import yaml

from stacks.box.devices import Registrar
from stacks.box.nodes import DEVICES_ANNOTATION
from tests.cluster.support import _doc, _processes_under, _rehearsal
from tests.harness import run_program, stack_config
from tests.wait import patient


@pytest.mark.alone
def test_p5_health_check_on_256_nodes_starts_within_60_s(binaries, registrations_of, tmp_path) -> None:
    """The p5 preset's GPU group at 256 nodes (2,048 GPUs; maxSize 256, so its quota holds them): its health-check
    Job widened to 256 pods, each a whole node (8 GPUs, 32 EFA devices, the huge pages); admitted by Kueue, every pod
    scheduled, one per node, and started within 60 s of the Job's creation (device plugins registering on all 256
    nodes included)."""
    config = stack_config("p5")
    config["eks-training:nodeGroups"]["gpu"].update(desiredSize=256, maxSize=256)

    def widen(steps) -> None:
        steps[:] = [
            s
            for s in steps
            if not any(d["kind"] == "Job" and d["metadata"]["name"] in ("train", "evaluate") for d in s.docs)
        ]
        spec = _doc(steps, "Job", "train-allreduce")["spec"]
        spec["parallelism"] = spec["completions"] = 256

    start = time.monotonic()
    # The Job makes exactly 256 pods, each a whole node: one that waited for another to finish would run on that
    # pod's node, which the count of nodes below refuses. So a pod's 10 s need not outlast the others' starts.
    box, _plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        run_program("p5", config=config).registrations,
        "p5",
        sizes={"gpu": 256},
        mutate=widen,
        run_ms={"train-allreduce": 10000},
    )
    up_s = time.monotonic() - start
    try:
        with Registrar(box):
            rehearsal.run(binaries, timeout_s=patient(240))
            job = box.get("job", "train-allreduce", "-n", "training")
    finally:
        rehearsal.stop_operator()
        box.down()
    pods = [
        p for p in rehearsal.pods.values() if (p["metadata"].get("labels") or {}).get("job-name") == "train-allreduce"
    ]
    assert len(pods) == 256
    assert len({p["spec"]["nodeName"] for p in pods}) == 256
    created = datetime.fromisoformat(job["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    last = max(datetime.fromisoformat(p["status"]["startTime"].replace("Z", "+00:00")) for p in pods)
    took = (last - created).total_seconds()
    print(f"box with 258 nodes up in {up_s:.1f} s; 256 pods started {took:.0f} s after the Job's creation")
    assert took <= 60, took


def test_a_32_node_job_on_256_p5_nodes_lands_in_one_network_block(binaries, tmp_path) -> None:
    """Topology-aware placement through the real Kueue with topology-aware scheduling as the release
    enables it: the p5 preset's GPU group at 256 nodes, whose network-topology labels put 32 nodes under each
    lowest-layer network node (blocks, :mod:`stacks.box.nodes`); one node of each of the first 7 blocks cordoned, so
    that only the last block has 32 free nodes. The training job at 32 nodes and its all-reduce health check (32 too)
    each land every pod in that block. Without the pods' preferred-topology annotation Kueue never admits them (the
    flavor is topology-aware); without topology-aware scheduling at all the scheduler spreads them over the blocks. It
    asserts no timing (its run's bound stretches with the load), so it runs beside other tests."""
    config = stack_config("p5")
    # a fixed-size fleet (minSize = maxSize), where topology-aware placement is on by default (stacks/plan/admission.py)
    config["eks-training:nodeGroups"]["gpu"].update(minSize=256, desiredSize=256, maxSize=256)
    config["eks-training:jobs"]["train"].update(nodes=32)
    block = "topology.k8s.aws/network-node-layer-3"

    def trim(steps) -> None:
        steps[:] = [
            s for s in steps if not any(d["kind"] == "Job" and d["metadata"]["name"] == "evaluate" for d in s.docs)
        ]

    start = time.monotonic()
    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, run_program("p5", config=config).registrations, "p5", sizes={"gpu": 256}, mutate=trim
    )
    try:
        nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in box.get("nodes")["items"]}
        blocks: dict[str, list[str]] = {}
        for name, labels in sorted(nodes.items(), key=lambda kv: int(kv[0].rpartition("-")[2])):
            if block in labels:
                blocks.setdefault(labels[block], []).append(name)
        assert len(blocks) == 8 and {len(b) for b in blocks.values()} == {32}, {k: len(v) for k, v in blocks.items()}
        *taken, free = sorted(blocks, key=lambda b: int(b.rpartition("-")[2]))
        box.kubectl("cordon", *[blocks[b][0] for b in taken])
        # A fleet that has been up: its device plugins registered every node's GPUs and EFA devices long ago. (Kueue
        # counts a node's GPUs once registered, as on EKS: a job admitted while some nodes had none yet would be
        # spread over the blocks whose nodes had them -- the annotation prefers one block, it does not wait for one.)
        devices = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": n["metadata"]["name"]},
                "status": {"capacity": counts, "allocatable": counts},
            }
            for n in box.get("nodes")["items"]
            if (counts := {r: str(c) for r, c in json.loads(n["metadata"]["annotations"][DEVICES_ANNOTATION]).items()})
        ]
        box.kubectl(
            "apply",
            "--server-side",
            "--subresource=status",
            "--field-manager=box-device-plugins",
            "-f",
            "-",
            input=yaml.safe_dump_all(devices),
        )
        with Registrar(box):
            rehearsal.run(binaries, timeout_s=patient(240))
    finally:
        rehearsal.stop_operator()
        box.down()
    took = time.monotonic() - start
    for job in ("train-allreduce", "train"):
        pods = [p for p in rehearsal.pods.values() if (p["metadata"].get("labels") or {}).get("job-name") == job]
        assert len(pods) >= 32, (job, len(pods))
        placed = {nodes[p["spec"]["nodeName"]].get(block) for p in pods}
        assert placed == {free}, f"{job}: pods in blocks {sorted(placed, key=str)}, not all in {free}"
    print(f"256-node p5 box: two 32-node jobs each placed in block {free} in {took:.0f} s")


def test_the_benchmark_command_prints_its_figures(binaries, tmp_path, capsys) -> None:
    """``python -m stacks.box bench --stack p5 --nodes 16`` (the README reports it at 1,024): p5's GPU group at 16
    nodes plus its 2 system nodes, the health check widened to 16 pods; every figure printed and sane (the check's 16
    pods each on a node of its own, scheduled no later than running, the control plane's memory read from its
    processes); the box is brought down."""
    from stacks.box import cli as box_cli

    code = box_cli.main(["bench", "--stack", "p5", "--nodes", "16", "--run-ms", "5000", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == (
        "Benchmark of stack p5: group gpu at 16 nodes (p5.48xlarge), health check train-allreduce "
        "widened to 16 pods, each asking for a whole node"
    ), out
    figures = {}
    for line in lines[1:]:
        assert not line.startswith("note: "), out
        key, _, value = line.strip().partition(":")
        figures[key] = value.strip()
    assert set(figures) == {
        "box up",
        "nodes Ready",
        "pods scheduled",
        "pods running",
        "kube-apiserver memory",
        "kube-scheduler memory",
        "load average (1 min)",
    }, out
    up = re.fullmatch(r"([\d.]+) s", figures["box up"])
    ready = re.fullmatch(r"([\d.]+) s after their creation \(18 nodes\)", figures["nodes Ready"])
    scheduled = re.fullmatch(r"(\d+) s after the Job's creation \(16 of 16\)", figures["pods scheduled"])
    running = re.fullmatch(r"(\d+) s after the Job's creation \(16 of 16, on 16 nodes\)", figures["pods running"])
    assert up and ready and scheduled and running, out
    assert 0 < float(up.group(1)) < 120 and 0 < float(ready.group(1)) < 120, out
    assert 0 <= int(scheduled.group(1)) <= int(running.group(1)) <= 120, out
    for name, low in (("kube-apiserver", 100), ("kube-scheduler", 10)):
        mem = re.fullmatch(r"(\d+) MiB resident, peak (\d+) MiB", figures[f"{name} memory"])
        assert mem and low <= int(mem.group(1)) <= int(mem.group(2)) < 16384, (name, out)
    assert re.fullmatch(r"[\d.]+ at the start, [\d.]+ at the end \(\d+ cores\)", figures["load average (1 min)"]), out
    assert not (tmp_path / "bench-p5").exists()
    assert not _processes_under(tmp_path), _processes_under(tmp_path)
