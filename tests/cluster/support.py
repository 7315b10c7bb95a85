"""What the cluster tier's modules share: the stacks, the box's helpers, rehearsals and watches.

The ``cluster`` tier: every preset's Kubernetes objects on the cluster in a box (:mod:`stacks.box`).

A real kube-apiserver checks what no schema can: its validation beyond the OpenAPI schema (e.g. a Job's
``podFailurePolicy`` exit codes must be in ascending order, ``pkg/apis/batch/validation``), CRD validation of custom
resources (MPIJobs against the MPI Operator's CRD), admission, strict field validation. Every object is applied as
``pulumi up`` would (server-side apply, Namespaces and CRDs first, then the stack's order), at the stacks' default
Kubernetes minor and at the oldest minor the config accepts (validation changes between minors).

The binaries are built from the pinned modules in ``box/`` (or reused from the cache); a machine that cannot build
them fails this tier, it does not skip it.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

from components.catalog import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from stacks.box.api import BoxError
from stacks.box.charts import chart_key
from stacks.box.cluster import Box
from stacks.box.nodes import plan_nodes
from stacks.box.poller import Poller
from stacks.box.rehearse import RUN_MS, steps_of
from stacks.box.session import Session
from stacks.box.timeline import workload_state
from stacks.stackfile import plan_stack
from stacks.yaml_text import dump_yaml_documents
from tests.harness import run_program, stack_names
from tests.wait import patient

STACKS = stack_names()


MINORS = {"kubernetes": DEFAULT_KUBERNETES_VERSION, "kubernetes-oldest": SUPPORTED_KUBERNETES_VERSIONS[0]}


def _box(binaries: dict[str, Path], tmp_path: Path, name: str, control_plane: str) -> Box:
    return Box(name=name, workdir=tmp_path, binaries=binaries, control_plane=control_plane)


#: Namespaces every cluster has (kube-apiserver creates them).
BUILT_IN_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}


def _self_contained(docs, built_in_groups: set[str]) -> list[str]:
    """What a fresh apiserver would refuse that a box holding an earlier preset's objects would not: a namespaced
    object whose Namespace is neither built in nor among ``docs`` (NamespaceLifecycle admission), a custom resource
    whose CRD is not among ``docs`` (its group is not one the apiserver serves by itself, ``built_in_groups``). Kept
    between presets, a box would hide both."""
    namespaces = BUILT_IN_NAMESPACES | {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    crds = {(d["spec"]["group"], d["spec"]["names"]["kind"]) for d in docs if d["kind"] == "CustomResourceDefinition"}
    missing = []
    for d in docs:
        ns = d["metadata"].get("namespace")
        if ns and ns not in namespaces:
            missing.append(f"{d['kind']} {ns}/{d['metadata']['name']}: no Namespace {ns}")
        group = d["apiVersion"].rpartition("/")[0]
        if group not in built_in_groups and (group, d["kind"]) not in crds:
            missing.append(f"{d['kind']} {d['metadata']['name']}: no CustomResourceDefinition for {group}")
    return missing


def _ref(doc) -> list[str]:
    """``doc`` as kubectl names it: ``<kind>.<group> <name> [-n <namespace>]``."""
    group = doc["apiVersion"].rpartition("/")[0]
    out = [doc["kind"].lower() + (f".{group}" if group else ""), doc["metadata"]["name"]]
    return out + (["-n", doc["metadata"]["namespace"]] if doc["metadata"].get("namespace") else [])


def _remove(box, docs) -> None:
    """Delete every object of ``docs`` but Namespaces and CRDs (a Namespace cannot finish deleting without the
    namespace controller, which this box does not run; the presets' CRDs are the same charts'), finalizers included
    (no controller removes them here), and wait until they are gone."""

    rest = [d for d in docs if d["kind"] not in ("Namespace", "CustomResourceDefinition")]
    box.kubectl("delete", "--wait=false", "--ignore-not-found", "-f", "-", input=dump_yaml_documents(rest))

    for doc in rest:
        if box.exists(*_ref(doc)):
            box.kubectl("patch", *_ref(doc), "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
    box.wait_for(
        lambda: not any(box.exists(*_ref(d)) for d in rest), timeout_s=patient(60), what="the preset's objects gone"
    )


def _rehearsal(binaries, tmp_path, registrations, stack: str, *, sizes=None, mutate=None, plan=None, **kwargs):
    """A box with ``stack``'s nodes (``sizes`` overrides group sizes; ``plan`` the preset's plan), the stack's steps
    (``mutate(steps)`` may alter them), the cluster autoscaler's stand-in for ProvisioningRequests when the plan uses
    them; returns (box, plan, rehearsal) -- the caller runs it and brings the box down."""
    if plan is None:
        _config, plan = plan_stack(stack)
    session = Session(_box(binaries, tmp_path, "run", "kubernetes"))
    session.up()
    try:
        session.nodes(plan_nodes(plan, "us-east-1", sizes))
    except BaseException:
        session.close()  # else its processes outlive the test
        raise
    steps = steps_of(registrations)
    if mutate:
        mutate(steps)
    return session.box, plan, session.rehearse(plan, steps, region="us-east-1", **kwargs)


def _run(box, rehearsal, timeout_s: float, stuck=None) -> None:
    with Session(box, rehearsal=rehearsal) as session:
        error = session.run(timeout_s, stuck=stuck)
        assert error is None, error


def _doc(steps, kind: str, name: str) -> dict:
    return next(d for s in steps for d in s.docs if d["kind"] == kind and d["metadata"]["name"] == name)


def admitted(job: str):
    """A step gate (:attr:`stacks.box.rehearse.Step.gate`): Kueue admitted ``job``'s Workload, read from the box.
    A job gated on another's admission queues behind it whatever order Kueue's reconcilers create the two Workloads
    in (their creation times, whole seconds, can tie)."""

    def gate(box: Box) -> bool:
        try:
            workloads = box.get("workloads", "-A")["items"]
        except BoxError:
            return False  # Kueue's CRDs not served yet
        return any(
            ref.get("name") == job and workload_state(wl) in ("admitted", "finished")
            for wl in workloads
            for ref in wl["metadata"].get("ownerReferences") or []
        )

    return gate


def stamp(text: str) -> float:
    """An apiserver time stamp (RFC 3339, whole seconds) as seconds since the epoch."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class _Polls(Poller):
    """``poll()`` every ``interval_s`` in a thread while a rehearsal runs (``with _Polls(box, poll): ...``): for a test
    that acts on a state that lasts until it acts. What happened at some moment is read from a
    :class:`stacks.box.watch.Watch`."""

    def __init__(self, box, poll, interval_s: float = 0.2) -> None:
        super().__init__(interval_s)
        self.poll = poll  # type: ignore[method-assign]


def holding(events, job_of, *, terminating: bool = True) -> list[dict[str, set[str]]]:
    """After each pod event of a :class:`stacks.box.watch.Watch`, in order: job -> its pods holding a node (bound, not
    finished, not deleted). A terminating pod holds its node until it is gone; ``terminating=False`` counts only the
    pods that stay (a deadlock needs pods that do not leave). ``job_of(pod)`` names the pod's job (``None``: not
    counted)."""
    held: dict[str, tuple[str, str]] = {}  # uid -> (job, pod)
    out: list[dict[str, set[str]]] = []
    for kind, pod in events:
        uid, job = pod["metadata"]["uid"], job_of(pod)
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        leaving = not terminating and pod["metadata"].get("deletionTimestamp")
        if kind != "DELETED" and job and pod["spec"].get("nodeName") and not finished and not leaving:
            held[uid] = (job, pod["metadata"]["name"])
        else:
            held.pop(uid, None)
        now: dict[str, set[str]] = {}
        for job_name, pod_name in held.values():
            now.setdefault(job_name, set()).add(pod_name)
        out.append(now)
    return out


def mpijob_of(pod) -> Optional[str]:
    return (pod["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name")


def job_of(pod) -> Optional[str]:
    return (pod["metadata"].get("labels") or {}).get("job-name")


def _has_mpijobs(rehearsal) -> bool:
    return any(d["kind"] == "MPIJob" for s in rehearsal.steps for d in s.docs)


def _no_gpu_toleration(steps) -> None:
    _doc(steps, "Job", "train-allreduce")["spec"]["template"]["spec"]["tolerations"] = []


def _sixteen_gpus(steps) -> None:
    resources = _doc(steps, "Job", "train-allreduce")["spec"]["template"]["spec"]["containers"][0]["resources"]
    for part in ("requests", "limits"):
        resources[part]["nvidia.com/gpu"] = 16


def _with_values(registrations, chart: str, change) -> list:
    """``registrations`` with ``change(values)`` applied to the values of the Helm release of ``chart`` (a copy)."""
    out, changed = [], 0
    for r in registrations:
        if r.type.startswith("kubernetes:helm.sh/") and r.inputs.get("chart") == chart:
            r = dataclasses.replace(r, inputs=copy.deepcopy(r.inputs))
            change(r.inputs["values"])
            changed += 1
        out.append(r)
    assert changed == 1, f"{changed} releases of {chart}"
    return out


def _release(registrations, key: str) -> dict:
    """The inputs of the stack's one Helm release of the catalog chart ``key``."""
    found = [
        r.inputs
        for r in registrations
        if r.type.startswith("kubernetes:helm.sh/") and chart_key(r.inputs.get("chart", "")) == key
    ]
    assert len(found) == 1, f"{len(found)} releases of {key}"
    return copy.deepcopy(found[0])


def _one(docs, kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} rendered: {[d['metadata']['name'] for d in found]}"
    return found[0]


GPU_JOBS = ("resnet50-1-worker", "resnet50-2-workers", "resnet50-4-workers", "nccl-allreduce-2-nodes")


TEAMS_REFERENCE = "organization/eks-training/shared"


def _jobs_only_registrations(cluster_config: dict, team: str, job: str, nodes: int) -> list:
    """What team ``team``'s jobs-only stack registers (the real program under mocks, reading the cluster stack's
    outputs through its StackReference): one command job of ``nodes`` GPU nodes."""
    config = {
        "aws:region": cluster_config["aws:region"],
        "eks-training:cluster": {"stackReference": TEAMS_REFERENCE, "team": team},
        "eks-training:nodeGroups": cluster_config["eks-training:nodeGroups"],
        "eks-training:jobs": {
            job: {
                "kind": "command",
                "nodeGroup": "gpu",
                "nodes": nodes,
                "command": ["python", "-c", "print('trained')"],
            }
        },
    }
    program = run_program(f"team-{team}", config=config)
    assert program.error is None, program.error
    return program.registrations


def assert_report_covers(text: str, rehearsal, recorder) -> None:
    """What ``python -m stacks.rehearse`` prints (:func:`stacks.box.timeline.report`) names every job with its
    outcome and duration, and every pod that ran with its node (what ran where)."""
    jobs = text.split("\nJobs:\n", 1)[1]
    for name, rec in rehearsal.jobs.items():
        assert re.search(
            rf"^  {re.escape(name)} \({rec['kind']}\): {rec['outcome']}, started [\d.]+ s, finished "
            rf"[\d.]+ s, took [\d.]+ s$",
            jobs,
            re.M,
        ), (name, jobs)
    ran = text.split("\nWhere each pod ran:\n", 1)[1].split("\n\n", 1)[0]
    for pod in rehearsal.pods.values():
        line = f"  {pod['metadata']['namespace']}/{pod['metadata']['name']} "
        assert any(
            w.startswith(line) and w.split(" on ", 1)[1].startswith(pod["spec"]["nodeName"] + ":")
            for w in ran.splitlines()
        ), (line, ran)
    assert recorder.error is None, recorder.error


def _follow(command: str, until: str, timeout_s: float | None = None) -> str:
    """What ``command`` (a shell line) prints until a line matches ``until``; then the command is stopped (its
    process group: ``kubectl logs -f`` on the box follows until interrupted, see :mod:`stacks.box.podlogs`);
    by default it has ``patient(60)`` seconds."""
    timeout_s = patient(60.0) if timeout_s is None else timeout_s
    import os
    import signal
    import threading

    proc = subprocess.Popen(
        ["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if re.search(until, line):
                found.set()
        found.set()  # the command ended

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    found.wait(timeout_s)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=patient(10))
    reader.join(timeout=patient(10))
    text = "".join(lines)
    assert re.search(until, text, re.M), f"{command!r} printed no line matching {until!r} in {timeout_s:.0f} s:\n{text}"
    return text


def _without_evaluation(steps) -> None:
    """dev's steps without its evaluation and TensorBoard (what follows training: the faults are in training)."""
    gone = {s.urn for s in steps if any(k in s.name for k in ("-evaluate-", "-tensorboard-"))}
    assert gone, [s.name for s in steps]
    steps[:] = [s for s in steps if s.urn not in gone]
    for s in steps:
        s.deps -= gone


def _train_pods(box) -> list[dict]:
    return box.get("pods", "-n", "training", "-l", "job-name=train")["items"]


def _phase(pod) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def _shorten(box, pod, run_ms: int = 1000) -> None:
    """The pod runs ``run_ms`` more (kwok re-plays its Stage when the pod changes): the rest of the training, after a
    fault, need not take the fault's time again."""
    box.annotate("pod", pod["metadata"]["name"], "training", {RUN_MS: f"{run_ms}ms"})


class WhileTraining:
    """A rehearsal's ``stuck`` callback that changes the box once, while dev's training pod runs (the rehearsal's loop
    waits meanwhile), notes it in the timeline, then lets the pod finish (:func:`_shorten`)."""

    def __init__(self, box) -> None:
        self.box = box
        self.rehearsal: Any = None
        self.at: Optional[float] = None
        """When the change began (wall clock)."""
        self.seconds = 0.0
        self.pod: Optional[dict[str, Any]] = None
        """The training pod that ran across the change."""

    def change(self) -> str:
        """Change the box; what the timeline notes."""
        raise NotImplementedError

    def __call__(self, _reasons: list[str]) -> bool:
        if self.at is not None:
            return False
        running = [p for p in _train_pods(self.box) if _phase(p) == "Running"]
        if not running:
            return False
        self.pod = running[0]
        self.at = time.time()
        note = self.change()
        self.seconds = time.time() - self.at
        if self.rehearsal is not None:
            self.rehearsal.note(f"{note} in {self.seconds:.1f} s")
        _shorten(self.box, self.pod)
        return False


def _processes_under(folder: Path) -> list[str]:
    """Command lines of the live processes that name ``folder`` (a box's control plane, its operators)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(folder) in cmdline and state != "Z":
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found
