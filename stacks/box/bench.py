"""``python -m stacks.box bench --stack p5 --nodes 1024``: how the box's control plane copes with a large group.

:func:`bench` sizes the stack's training group at ``--nodes`` nodes, widens its all-reduce health check to one pod
per node, and runs it as the rehearsal does. :class:`Figures` holds what it measures: the box's start, the nodes
Ready, every pod scheduled and running, on how many nodes, the control plane's memory (:data:`MEMORY_FIELDS`) and the
machine's load. A benchmark, not a test: it prints figures; ``tests/cluster/test_box_scale.py`` runs it at a few nodes.

Why: docs/explanation/box.md, "Timing a large group"; a run: docs/explanation/verified.md."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional

from components.conventions import check_job_name
from components.workloads.job_objects import JOB_OBJECTS
from stacks.box.nodes import plan_nodes
from stacks.box.rehearse import RehearsalError, steps_of
from stacks.box.session import Session
from stacks.mocked import evaluate_stack
from stacks.stackfile import plan_stack

#: What :func:`resident_memory` reports per process: current and peak resident set, in MiB.
MEMORY_FIELDS = ("VmRSS", "VmHWM")


class BenchError(Exception):
    """The benchmark could not run (the message names why)."""


@dataclass
class Figures:
    stack: str
    group: str
    instance_type: str
    job: str
    nodes: int
    all_nodes: int
    box_up_s: float
    nodes_ready_s: float
    scheduled_s: float
    running_s: float
    pods: int
    on_nodes: int
    """Distinct nodes the pods ran on (fewer than the pods when one started on a node a finished pod had freed)."""
    memory_mib: dict[str, dict[str, float]]
    load: tuple[float, float]
    notes: list[str]

    def text(self) -> str:
        lines = [
            f"Benchmark of stack {self.stack}: group {self.group} at {self.nodes} nodes ({self.instance_type}), "
            f"health check {self.job} widened to {self.nodes} pods, each asking for a whole node",
            f"  box up:                 {self.box_up_s:.1f} s",
            f"  nodes Ready:            {self.nodes_ready_s:.1f} s after their creation ({self.all_nodes} nodes)",
            f"  pods scheduled:         {self.scheduled_s:.0f} s after the Job's creation "
            f"({self.pods} of {self.nodes})",
            f"  pods running:           {self.running_s:.0f} s after the Job's creation "
            f"({self.pods} of {self.nodes}, on {self.on_nodes} nodes)",
        ]
        for name, mem in self.memory_mib.items():
            lines.append(f"  {name + ' memory:':<24}{mem['VmRSS']:.0f} MiB resident, peak {mem['VmHWM']:.0f} MiB")
        lines.append(
            f"  load average (1 min):   {self.load[0]:.2f} at the start, {self.load[1]:.2f} at the end "
            f"({os.cpu_count()} cores)"
        )
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def resident_memory(
    home: Path, names: tuple[str, ...] = ("kube-apiserver", "kube-scheduler")
) -> dict[str, dict[str, float]]:
    """Per command of ``names`` run for the box at ``home`` (its command line names the box's folder): its
    :data:`MEMORY_FIELDS` in MiB, from ``/proc/<pid>/status``."""
    found: dict[str, dict[str, float]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            status = (proc / "status").read_text()
        except OSError:
            continue
        name = os.path.basename(argv[0].decode(errors="replace"))
        if name not in names or str(home).encode() not in b" ".join(argv):
            continue
        fields = {
            k: float(v.split()[0]) / 1024
            for k, _, v in (line.partition(":") for line in status.splitlines())
            if k in MEMORY_FIELDS
        }
        found[name] = fields
    missing = [n for n in names if n not in found]
    if missing:
        raise BenchError(f"no running {', '.join(missing)} of the box at {home}")
    return {n: found[n] for n in names}


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def training_job(plan: Any, job: Optional[str]) -> Any:
    """The plan's job to benchmark: ``job``, else the first with a health check (the training job)."""
    if job is not None:
        if job not in plan.jobs:
            raise BenchError(f"--job {job}: the stack has no such job (its jobs: {', '.join(sorted(plan.jobs))})")
        found = plan.jobs[job]
    else:
        found = next((j for j in plan.jobs.values() if j.health_check is not None), None)
        if found is None:
            raise BenchError("the stack has no job with a health check (jobs.<name>.healthCheck) to widen")
    if found.health_check is None:
        raise BenchError(f"job {found.name} has no health check (jobs.{found.name}.healthCheck) to widen")
    return found


def bench(
    stack: str,
    nodes: int,
    *,
    stack_file: Optional[Path] = None,
    job: Optional[str] = None,
    workdir: Path,
    name: str,
    run_ms: int = 30000,
    timeout_s: float = 900.0,
    log: Callable[[str], None] = lambda message: None,
) -> Figures:
    """Run the benchmark (see the module docstring); the box is brought down before it returns."""
    _config, plan = plan_stack(stack, stack_file)
    target = training_job(plan, job)
    group = target.group.name

    def widen_group(config: dict[str, Any]) -> None:
        config["eks-training:nodeGroups"][group].update(desiredSize=nodes, maxSize=nodes)

    config, plan, evaluation = evaluate_stack(stack, stack_file, edit=widen_group)
    check = check_job_name(target.name)
    steps = steps_of(evaluation.registrations)
    jobs = {s.urn for s in steps if any(d["kind"] in JOB_OBJECTS and d["metadata"]["name"] != check for d in s.docs)}
    steps = [s for s in steps if s.urn not in jobs]
    for s in steps:
        s.deps -= jobs
    check_doc = next(d for s in steps for d in s.docs if d["kind"] == "Job" and d["metadata"]["name"] == check)
    check_doc["spec"]["parallelism"] = check_doc["spec"]["completions"] = nodes

    session = Session.build(name, workdir, log=log)
    box = session.box
    node_objects = plan_nodes(plan, plan.config.region, {group: nodes})  # all up front, also where it scales from zero
    load_start = os.getloadavg()[0]
    with session:
        box_up_s = session.up()
        log(f"box {name} is up in {box_up_s:.1f} s; creating {len(node_objects)} nodes")
        nodes_ready_s = session.nodes(node_objects, timeout_s=max(120.0, nodes / 4))
        log(f"{len(node_objects)} nodes Ready in {nodes_ready_s:.1f} s; running {check} on {nodes} of them")
        rehearsal = session.rehearse(plan, steps, run_ms={check: run_ms})
        try:
            error = session.run(timeout_s)
        except RehearsalError as exc:
            raise BenchError(f"the run did not complete: {str(exc)[:3000]}") from exc
        # Every pod ran, so every node had its devices: an error of a later pass (a kubectl call that outlasted its
        # timeout on a busy machine) is reported with the figures, not instead of them.
        notes = (
            [f"the device registrar stopped after its devices were registered: {error}"] if error is not None else []
        )
        created = _time(
            box.get("job", check, "-n", check_doc["metadata"]["namespace"])["metadata"]["creationTimestamp"]
        )
        memory = resident_memory(box.home)
    pods = [p for p in rehearsal.pods.values() if (p["metadata"].get("labels") or {}).get("job-name") == check]
    if len(pods) != nodes:
        raise BenchError(f"{len(pods)} pods of {check} ran; expected {nodes}")
    scheduled = max(
        _time(next(c["lastTransitionTime"] for c in p["status"]["conditions"] if c["type"] == "PodScheduled"))
        for p in pods
    )
    running = max(_time(p["status"]["startTime"]) for p in pods)
    return Figures(
        stack=stack,
        group=group,
        instance_type=target.group.profile.instance.name,
        job=check,
        nodes=nodes,
        all_nodes=len(node_objects),
        box_up_s=box_up_s,
        nodes_ready_s=nodes_ready_s,
        scheduled_s=(scheduled - created).total_seconds(),
        running_s=(running - created).total_seconds(),
        pods=len(pods),
        on_nodes=len({p["spec"]["nodeName"] for p in pods}),
        memory_mib=memory,
        load=(load_start, os.getloadavg()[0]),
        notes=notes,
    )
