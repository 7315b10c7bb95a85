"""The ``cluster`` tier: every preset's Kubernetes objects on the cluster in a box (:mod:`stacks.box`).

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
import json
import re
import shlex
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from components.catalog import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from stacks.box import build as box_build
from stacks.box.apply import apply_stack
from stacks.box.cli import create_nodes
from stacks.box.charts import chart_key, render
from stacks.box.cluster import Box, establish_crds
from stacks.box.devices import Registrar
from stacks.box.poller import Poller
from stacks.box.kueue import crds as kueue_crds, kueue_release_configuration
from stacks.box.manifests import registered_objects
from stacks.box.nodes import DEVICES_ANNOTATION, group_nodes, plan_nodes
from stacks.box.rehearse import EXIT_CODE, RUN_MS, Rehearsal, RehearsalError, pod_templates, predecessors, steps_of
from stacks.box.timeline import Recorder, report
from stacks.plan.admission import launcher_requests
from stacks.stackfile import plan_stack
from stacks.outputs import workload_conditions_command
from tests.harness import run_program, stack_config, stack_names

pytestmark = pytest.mark.cluster

STACKS = stack_names()
MINORS = {"kubernetes": DEFAULT_KUBERNETES_VERSION, "kubernetes-oldest": SUPPORTED_KUBERNETES_VERSIONS[0]}


@pytest.fixture(scope="session")
def binaries() -> dict[str, Path]:
    return box_build.build()


@pytest.fixture(scope="session")
def objects_of():
    cache: dict[str, list[dict]] = {}

    def get(stack: str) -> list[dict]:
        if stack not in cache:
            cache[stack] = registered_objects(run_program(stack).registrations)
        return copy.deepcopy(cache[stack])

    return get


def _box(binaries: dict[str, Path], tmp_path: Path, name: str, control_plane: str) -> Box:
    return Box(name=name, workdir=tmp_path, binaries=binaries, control_plane=control_plane)


def test_the_box_runs_the_pinned_minors(binaries, tmp_path) -> None:
    """The servers report the versions the modules pin (a server without the ldflags reports v0.0.0-master, which
    clients that parse it refuse), and each module sits at the minor the config means."""
    box_build.check_pins()
    for folder, minor in MINORS.items():
        with _box(binaries, tmp_path, f"v-{minor.replace('.', '-')}", folder) as box:
            server = json.loads(box.kubectl("version", "-o", "json").stdout)["serverVersion"]
            assert server["gitVersion"] == box_build.MODULES[folder].version()
            assert f"{server['major']}.{server['minor']}" == minor


@pytest.fixture(scope="session")
def oldest_box(binaries, tmp_path_factory):
    """One apiserver at the oldest minor for every preset's objects (one per xdist worker): bringing a box up per
    preset cost more than applying its objects. Each test removes what it applied (:func:`_remove`) and first checks
    what would make a shared box more lenient than a fresh one (:func:`_self_contained`)."""
    box = _box(binaries, tmp_path_factory.mktemp("oldest"), "apply", "kubernetes-oldest")
    box.up()
    box.built_in_groups = {g["name"] for g in box.api.request("GET", "/apis")[1]["groups"]} | {""}
    yield box
    box.down()


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
    import yaml

    rest = [d for d in docs if d["kind"] not in ("Namespace", "CustomResourceDefinition")]
    box.kubectl("delete", "--wait=false", "--ignore-not-found", "-f", "-", input=yaml.safe_dump_all(rest))

    for doc in rest:
        if box.exists(*_ref(doc)):
            box.kubectl("patch", *_ref(doc), "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
    box.wait_for(lambda: not any(box.exists(*_ref(d)) for d in rest), timeout_s=60, what="the preset's objects gone")


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_is_accepted_by_the_apiserver(oldest_box, objects_of, stack: str) -> None:
    """At the oldest minor (the apiserver alone: nothing runs). At the default minor, every object is applied by the
    rehearsal (test_every_job_runs_through_in_order) with the same strict server-side apply."""
    docs = objects_of(stack)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "Job"} <= kinds or {"Namespace", "MPIJob"} <= kinds
    box = oldest_box
    assert not _self_contained(docs, box.built_in_groups), _self_contained(docs, box.built_in_groups)
    # A CRD an earlier preset applied with the same content (the same chart's) is not applied again: it was accepted
    # then, and re-applying 1.8 MB of Kueue's CRDs cost the apiserver seconds per preset.
    held = box.__dict__.setdefault("crds", {})
    todo = [
        d
        for d in docs
        if d["kind"] != "CustomResourceDefinition" or held.get(d["metadata"]["name"]) != json.dumps(d, sort_keys=True)
    ]
    try:
        refused = apply_stack(box, todo)
        assert not refused, (
            f"{stack} at Kubernetes {MINORS['kubernetes-oldest']}: the apiserver refused:\n"
            + "\n".join(str(r) for r in refused)
        )
        # Every object is there, as applied.
        for doc in docs:
            assert box.get(*_ref(doc))["metadata"]["name"] == doc["metadata"]["name"]
        held.update(
            {
                d["metadata"]["name"]: json.dumps(d, sort_keys=True)
                for d in docs
                if d["kind"] == "CustomResourceDefinition"
            }
        )
    finally:
        _remove(box, docs)


def test_a_shared_box_refuses_what_a_fresh_one_would() -> None:
    """Control of the shared box's checks: an object in a Namespace the stack does not create, and a custom resource
    whose CRD the stack does not install, are reported."""
    docs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "training"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {},
        },
    ]
    assert _self_contained(docs, {"", "apps", "batch", "apiextensions.k8s.io"}) == [
        "ServiceAccount training/a: no Namespace training",
        "LocalQueue q: no CustomResourceDefinition for kueue.x-k8s.io",
    ]
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "training"}})
    docs.append(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "localqueues.kueue.x-k8s.io"},
            "spec": {"group": "kueue.x-k8s.io", "names": {"kind": "LocalQueue"}},
        }
    )
    assert _self_contained(docs, {"", "apps", "batch", "apiextensions.k8s.io"}) == []


def test_the_apiserver_check_can_fail(binaries, objects_of, tmp_path) -> None:
    """Control: a Job whose podFailurePolicy exit codes are out of order (the bug of issue 25) is refused, naming the
    field; so is an MPIJob that breaks its CRD's schema."""
    docs = objects_of("dev")
    job = next(d for d in docs if d["kind"] == "Job" and (d["spec"].get("podFailurePolicy") or {}).get("rules"))
    rule = next(r for r in job["spec"]["podFailurePolicy"]["rules"] if r.get("onExitCodes"))
    rule["onExitCodes"]["values"] = [143, 69]
    with _box(binaries, tmp_path, "control", "kubernetes") as box:
        refused = apply_stack(box, docs)
    assert [r.name for r in refused] == [f"{job['metadata']['namespace']}/{job['metadata']['name']}"]
    assert "must be ordered" in refused[0].message


# --- the stacks run on the box ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def registrations_of():
    cache: dict[str, list] = {}

    def get(stack: str) -> list:
        if stack not in cache:
            cache[stack] = run_program(stack).registrations
        return cache[stack]

    return get


def _rehearsal(binaries, tmp_path, registrations, stack: str, *, sizes=None, mutate=None, **kwargs):
    """A box with ``stack``'s nodes (``sizes`` overrides group sizes), the stack's steps (``mutate(steps)`` may alter
    them), device registration running; returns (box, rehearsal) -- the caller runs it and brings the box down."""
    _config, plan = plan_stack(stack)
    box = _box(binaries, tmp_path, "run", "kubernetes")
    box.up()
    try:
        create_nodes(box, plan_nodes(plan, "us-east-1", sizes))
    except BaseException:
        box.down()  # else its processes outlive the test
        raise
    steps = steps_of(registrations)
    if mutate:
        mutate(steps)
    return box, plan, Rehearsal(box, steps, **kwargs)


def _run(box, rehearsal, timeout_s: float, stuck=None) -> None:
    try:
        with Registrar(box) as registrar:
            rehearsal.run(box.binaries, timeout_s=timeout_s, stuck=stuck)
        assert registrar.error is None, registrar.error
    finally:
        rehearsal.stop_operator()
        box.down()


def _doc(steps, kind: str, name: str) -> dict:
    return next(d for s in steps for d in s.docs if d["kind"] == kind and d["metadata"]["name"] == name)


class _Watch(Poller):
    """``poll()`` every 0.2 s in a thread while a rehearsal runs (``with _Watch(box, poll): ...``)."""

    def __init__(self, box, poll) -> None:
        super().__init__(0.2)
        self.poll = poll  # type: ignore[method-assign]


def _bound_workers(box) -> dict[str, set[str]]:
    """MPIJob -> its worker pods holding a node now: bound and not finished (terminating ones included: they hold the
    node until gone)."""
    out: dict[str, set[str]] = {}
    for pod in box.get("pods", "-n", "training", "-l", "training.kubeflow.org/job-role=worker")["items"]:
        if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            out.setdefault(pod["metadata"]["labels"]["training.kubeflow.org/job-name"], set()).add(
                pod["metadata"]["name"]
            )
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_job_runs_through_in_order(binaries, registrations_of, tmp_path, stack: str) -> None:
    """Every object applied in the stack's dependency order (strict server-side apply at the default minor), every
    job's pods scheduled on its group's nodes (GPUs and EFA devices only where their device plugins run), MPI jobs
    through the real MPI Operator, and every job completed, a job that waits for others only after they did."""
    box, plan, rehearsal = _rehearsal(binaries, tmp_path, registrations_of(stack), stack)
    pods_by_job: dict[str, list[dict]] = {}
    completed: dict[str, str] = {}
    recorder = Recorder(box, rehearsal.start)
    try:
        with Registrar(box) as registrar, recorder:
            rehearsal.run(binaries, timeout_s=180)
            for pod in rehearsal.pods.values():
                labels = pod["metadata"].get("labels") or {}
                job = labels.get("training.kubeflow.org/job-name") or labels.get("job-name")
                if job:
                    pods_by_job.setdefault(job, []).append(pod)
            kinds = ["jobs"] + (["mpijobs"] if _has_mpijobs(rehearsal) else [])
            for kind in kinds:
                for obj in box.get(kind, "-n", "training")["items"]:
                    if not obj["metadata"].get("ownerReferences"):
                        completed[obj["metadata"]["name"]] = obj["status"]["completionTime"]
            nodes = {n["metadata"]["name"]: n for n in box.get("nodes")["items"]}
        assert registrar.error is None, registrar.error
    finally:
        rehearsal.stop_operator()
        box.down()
    jobs = rehearsal.jobs
    assert set(plan.jobs) <= set(jobs), f"jobs of the plan that never ran: {set(plan.jobs) - set(jobs)}"
    assert_report_covers(report(rehearsal, recorder), rehearsal, recorder)  # what python -m stacks.rehearse prints
    for name, rec in jobs.items():
        assert rec["outcome"] in ("Complete", "Succeeded"), (name, rec, rehearsal.timeline())
    # A job that waits for others (its wait-for-jobs init container) started only after they completed (the
    # apiserver's times: a pod's startTime, a job's completionTime). Only the pods that carry the wait count: an MPI
    # job's workers (sshd, no wait) may start as soon as Kueue admits the job, which it may do once the predecessor's
    # pods have finished and before the MPI Operator writes the predecessor's completionTime; its launcher, which runs
    # the program, waits.
    waits = 0
    for step in rehearsal.steps:
        for doc in step.docs:
            for template in pod_templates(doc):
                for ref in predecessors(template):
                    waiting = [
                        p
                        for p in pods_by_job[doc["metadata"]["name"]]
                        if any(c["name"] == "wait-for-jobs" for c in p["spec"].get("initContainers") or [])
                    ]
                    assert waiting, f"no pod of {doc['metadata']['name']} carries its wait"
                    first_start = min(p["status"]["startTime"] for p in waiting)
                    assert first_start >= completed[ref.partition("/")[2]], rehearsal.timeline()
                    waits += 1
    # Every `after` of the config is such a wait (else nothing orders the jobs: pulumi does not await them).
    assert waits == sum(len(j.after) for j in plan.jobs.values()), rehearsal.timeline()
    # Each plan job's workers ran on nodes of its group, one per node (an MPI launcher runs on the system group).
    for name, job in plan.jobs.items():
        workers = [
            p
            for p in pods_by_job.get(name, [])
            if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-role", "worker") == "worker"
        ]
        assert len(workers) >= job.nodes, f"{name}: {len(workers)} worker pods ran, the plan has {job.nodes} nodes"
        for pod in workers:
            node = nodes[pod["spec"]["nodeName"]]
            assert node["metadata"]["labels"]["eks-training/role"] == job.group.name, (name, pod["spec"]["nodeName"])


def _has_mpijobs(rehearsal) -> bool:
    return any(d["kind"] == "MPIJob" for s in rehearsal.steps for d in s.docs)


def _no_gpu_toleration(steps) -> None:
    _doc(steps, "Job", "train-allreduce")["spec"]["template"]["spec"]["tolerations"] = []


def _sixteen_gpus(steps) -> None:
    resources = _doc(steps, "Job", "train-allreduce")["spec"]["template"]["spec"]["containers"][0]["resources"]
    for part in ("requests", "limits"):
        resources[part]["nvidia.com/gpu"] = 16


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (_no_gpu_toleration, r"untolerated taint"),
        (_sixteen_gpus, r"insufficient quota for nvidia.com/gpu"),
    ],
)
def test_a_job_that_cannot_fit_is_reported_with_kueues_reason(
    binaries, registrations_of, tmp_path, mutate, reason
) -> None:
    """The health check (p5) without the GPU taint's toleration, or asking for more GPUs than its group holds, is never
    admitted: no pod of it is created, and the rehearsal fails naming what waits (pulumi up would wait on the health
    check, and the training job after it) with Kueue's reason (the Workload's QuotaReserved condition)."""
    box, _plan, rehearsal = _rehearsal(binaries, tmp_path, registrations_of("p5"), "p5", mutate=mutate)
    pattern = rf"training/train-allreduce: queued, not admitted: Pending: .*{reason}"
    with pytest.raises(RehearsalError) as err:  # ends once Kueue states its reason (else at the deadline)
        _run(box, rehearsal, timeout_s=120, stuck=lambda reasons: any(re.search(pattern, r) for r in reasons))
    message = str(err.value)
    assert re.search(r"waiting: [^;]*\beks-training-p5-train-job\b", message), message
    assert re.search(pattern, message), message
    assert not any(p["metadata"]["name"].startswith("train-allreduce") for p in rehearsal.pods.values())


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


def test_a_device_plugin_that_cannot_land_leaves_the_job_pending(binaries, registrations_of, tmp_path) -> None:
    """Without the GPU taint's toleration in the NVIDIA device plugin's release values (what the stack passes, rendered
    into the plugin's DaemonSet by the box), no node reports GPUs: the training job never schedules (the class: a
    plugin's scheduling is part of the stack)."""

    def untolerating(values) -> None:
        values["tolerations"] = [t for t in values["tolerations"] if t["key"] != "nvidia.com/gpu"]

    registrations = _with_values(registrations_of("p5"), "nvidia-device-plugin", untolerating)
    box, _plan, rehearsal = _rehearsal(binaries, tmp_path, registrations, "p5")
    pattern = r"train-allreduce-0-\w+: 0/4 nodes are available:.*2 Insufficient nvidia.com/gpu"
    with pytest.raises(RehearsalError) as err:  # Kueue admits it (its quota is free); the scheduler finds no GPU
        _run(box, rehearsal, timeout_s=120, stuck=lambda reasons: any(re.search(pattern, r) for r in reasons))
    assert re.search(pattern, str(err.value))


# --- the charts the stacks install, rendered by helm template ----------------------------------------------------------


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


def test_the_kueue_chart_renders_what_each_stack_passes(binaries, registrations_of) -> None:
    """Every preset's Kueue release rendered by ``helm template`` from the chart's own source at the catalog's version
    (:mod:`stacks.box.charts`; each distinct set of values once): the manager's Configuration is the stack's (the one
    the box runs Kueue with, plus the in-cluster certificate management the chart adds when none is set), its
    Deployment runs the release's image, and its nodeSelector selects the plan's system nodes and no other. A value
    under a key the chart does not read leaves the chart's default (no nodeSelector, the chart's staging image, its
    default Configuration), and this fails."""
    manager = ["templates/manager/manager.yaml", "templates/manager/manager-config.yaml"]
    rendered_values: dict[str, list[dict]] = {}
    for stack in STACKS:
        release = _release(registrations_of(stack), "kueue")
        values = release["values"]
        key = json.dumps(values, sort_keys=True)
        if key not in rendered_values:
            rendered_values[key] = render(release, DEFAULT_KUBERNETES_VERSION, helm=binaries["helm"], show_only=manager)
        docs = rendered_values[key]
        rendered = yaml.safe_load(_one(docs, "ConfigMap")["data"]["controller_manager_config.yaml"])
        wanted = kueue_release_configuration(values)
        assert rendered.pop("internalCertManagement") == wanted.pop(
            "internalCertManagement",
            {
                "enable": True,
                "webhookServiceName": "kueue-webhook-service",
                "webhookSecretName": "kueue-webhook-server-cert",
            },
        ), stack
        assert rendered == wanted, stack
        pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
        image = values["controllerManager"]["manager"]["image"]
        assert [c["image"] for c in pod["containers"] if c["name"] == "manager"] == [
            f"{image['repository']}:{image['tag']}"
        ], stack
        _config, plan = plan_stack(stack)
        selector = pod.get("nodeSelector") or {}
        assert selector, f"{stack}: the Kueue manager's Deployment has no nodeSelector"
        selected = {
            n["metadata"]["labels"]["eks-training/role"]
            for n in plan_nodes(plan, "us-east-1")
            if selector.items() <= n["metadata"]["labels"].items()
        }
        assert selected == {"system"}, (stack, selector, selected)


def test_a_chart_source_at_another_version_than_the_catalogs_is_refused(monkeypatch) -> None:
    """The source the box renders is the catalog's chart: a catalog pin that differs from the source's Chart.yaml
    fails naming both and the module that pins the source."""
    from stacks.box import charts

    assert charts.chart_dir("kueue").name == "kueue"
    monkeypatch.setattr(
        charts,
        "HELM_CHARTS",
        {**charts.HELM_CHARTS, "kueue": dataclasses.replace(charts.HELM_CHARTS["kueue"], version="0.16.2")},
    )
    with pytest.raises(
        charts.ChartError,
        match=r"pins the chart kueue at 0\.16\.2, but charts/kueue/Chart\.yaml of "
        r"sigs\.k8s\.io/kueue v0\.17\.0 \(box/kueue/go\.mod\) is version 0\.17\.0",
    ):
        charts.chart_dir("kueue")


def test_the_kueue_chart_is_accepted_and_its_manager_lands_on_a_system_node(
    binaries, registrations_of, tmp_path
) -> None:
    """Every object the Kueue chart renders from p5's release is accepted by the real apiserver (strict server-side
    apply), and the scheduler places the manager's pod on a node of the system group, where kwok runs it. The webhook
    configurations and the visibility APIService are sent as a server-side dry run only: their Service has no real
    endpoints in the box, so registering them would make every admission (or discovery) call fail; the box's Kueue
    registers its own (:mod:`stacks.box.kueue`)."""
    release = _release(registrations_of("p5"), "kueue")
    docs = render(release, DEFAULT_KUBERNETES_VERSION, helm=binaries["helm"])

    # The chart's CRDs are the ones the rehearsal applies from the same module (stacks/box/kueue.py) but for the
    # conversion webhook, which the chart points at the manager's in-cluster Service (the box's Kueue runs out of
    # cluster and registers no conversion).
    def schemas(crds):
        return {d["metadata"]["name"]: {k: v for k, v in d["spec"].items() if k != "conversion"} for d in crds}

    chart_crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert schemas(chart_crds) == schemas(kueue_crds())
    _config, plan = plan_stack("p5")
    probe = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService")
    with _box(binaries, tmp_path, "chart", "kubernetes") as box:
        create_nodes(box, plan_nodes(plan, "us-east-1"))
        box.apply(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": release["namespace"]}}]
        )  # createNamespace
        crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
        box.apply(crds)
        establish_crds(box, [d["metadata"]["name"] for d in crds])
        box.apply([d for d in docs if d["kind"] not in probe and d["kind"] != "CustomResourceDefinition"])
        dry = [d for d in docs if d["kind"] in probe]
        assert dry, "the chart renders no webhook configuration"
        box.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(dry))
        deployment = _one(docs, "Deployment")
        selector = ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items())

        def running():
            pods = box.get("pods", "-n", release["namespace"], "-l", selector)["items"]
            return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]

        pods = box.wait_for(running, timeout_s=60, what="the Kueue manager's pod Running")
        node = box.get("node", pods[0]["spec"]["nodeName"])
        assert node["metadata"]["labels"]["eks-training/role"] == "system"


def test_two_mpijobs_on_one_group_both_complete(binaries, registrations_of, tmp_path) -> None:
    """mpi-horovod's two MPIJobs on its 2-node GPU group must both complete whatever order pulumi applies them in (it
    applies independent resources concurrently). Applied horovod first, without admission its workers took both
    nodes and its launcher waited for nccl, whose workers never fit: a deadlock, every time. Through Kueue the two
    run one after the other, and while one waits no pod of it exists (it holds no node)."""

    def horovod_first(steps) -> None:
        mpi = {s.docs[0]["metadata"]["name"]: s for s in steps if any(d["kind"] == "MPIJob" for d in s.docs)}
        mpi["nccl"].deps.add(mpi["horovod"].urn)

    box, plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        registrations_of("mpi-horovod"),
        "mpi-horovod",
        mutate=horovod_first,
        run_ms={"nccl": 3000, "horovod": 3000},
    )
    samples: list[dict[str, set[str]]] = []  # per poll: MPIJob -> its worker pods bound to a node
    watch = _Watch(box, lambda: samples.append(_bound_workers(box)))
    try:
        with Registrar(box) as registrar, watch:
            rehearsal.run(binaries, timeout_s=90)
        assert registrar.error is None, registrar.error
        assert watch.error is None, watch.error
        finished = {
            j["metadata"]["name"]: j["status"]["completionTime"] for j in box.get("mpijobs", "-n", "training")["items"]
        }
        workloads = box.get("workloads", "-n", "training")["items"]
    finally:
        rehearsal.stop_operator()
        box.down()
    jobs = rehearsal.jobs
    assert jobs["nccl"]["outcome"] == jobs["horovod"]["outcome"] == "Succeeded", rehearsal.timeline()
    # The real Kueue admitted each MPIJob's launcher against the system group's flavor, with the requests the plan
    # counts in the workload's quota there (stacks/plan/admission.py launcher_requests)
    launchers = {}
    for wl in workloads:
        owner = next(o["name"] for o in wl["metadata"]["ownerReferences"])
        if owner in ("nccl", "horovod"):
            launchers[owner] = next(
                a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == "launcher"
            )
    assert set(launchers) == {"nccl", "horovod"}, [w["metadata"]["name"] for w in workloads]
    for name, launcher in launchers.items():
        counted = launcher_requests(plan, plan.jobs[name])[plan.system.name]
        assert set(launcher["flavors"].values()) == {plan.admission.flavor(plan.system.name).name}, launcher
        assert launcher["resourceUsage"] == {"cpu": f"{counted['cpu']}m", "memory": f"{counted['memory']}Mi"}, launcher
    # Never did workers of both hold nodes at once (the deadlock: one node each); both did hold nodes at some time.
    both = [s for s in samples if s.get("nccl") and s.get("horovod")]
    assert not both, both
    assert any(s.get("nccl") for s in samples) and any(s.get("horovod") for s in samples), samples
    # In sequence: the horovod workers that ran to the end started after nccl completed (a horovod admitted first is
    # preempted by nccl, which outranks it: horovod waits for it).
    done = [
        p
        for p in rehearsal.pods.values()
        if p["metadata"]["name"].startswith("horovod-worker") and p["metadata"]["creationTimestamp"] >= finished["nccl"]
    ]
    assert len(done) == 2, rehearsal.timeline()


def test_a_job_starts_whole_or_not_at_all(binaries, tmp_path) -> None:
    """Gang admission: the benchmark's GPU group at 4 nodes (its quota: maxSize 4), the 1-worker experiment created
    first and running on one node: the 4-worker experiment has 3 free nodes and starts no pod until the fourth is
    free (then all 4 at once); while it waits, the stack's waitCommand shows why (Kueue's QuotaReserved condition).
    Every experiment completes."""
    config = stack_config("benchmark")
    gpu = config["eks-training:nodeGroups"]["gpu"]
    gpu.update(desiredSize=4, maxSize=4)
    registrations = run_program("benchmark", config=config).registrations

    def blocker_first(steps) -> None:
        jobs = {d["metadata"]["name"]: s for s in steps for d in s.docs if d["kind"] in ("Job", "MPIJob")}
        jobs["resnet50-4-workers"].deps.add(jobs["resnet50-1-worker"].urn)

    box, _plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        registrations,
        "benchmark",
        sizes={"gpu": 4},
        mutate=blocker_first,
        run_ms={"resnet50-1-worker": 6000},
    )
    wide = "resnet50-4-workers"
    waits = shlex.split(workload_conditions_command("training", wide))
    samples: list[dict[str, set[str]]] = []
    why: list[str] = []

    def poll() -> None:
        samples.append(_bound_pods(box))
        if not samples[-1].get(wide):
            out = box.kubectl(*waits[1:], check=False).stdout
            if "QuotaReserved=False" in out:
                why.append(out)

    watch = _Watch(box, poll)
    try:
        with Registrar(box) as registrar, watch:
            rehearsal.run(binaries, timeout_s=150)
        assert registrar.error is None, registrar.error
        assert watch.error is None, watch.error
    finally:
        rehearsal.stop_operator()
        box.down()
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] in ("Complete", "Succeeded"), (name, rec, rehearsal.timeline())
    assert any(len(s.get("resnet50-1-worker", ())) == 1 for s in samples), "the blocker never ran"
    ran = [s for s in samples if s.get(wide)]
    assert ran and max(len(s[wide]) for s in ran) == 4, ran
    # Never a pod of the wide job beside another GPU job's: it started whole, on 4 free nodes, or not at all.
    others = [s for s in ran if any(k != wide and k in GPU_JOBS for k in s)]
    assert not others, others
    assert why and "insufficient unused quota" in why[0] and "nvidia.com/gpu" in why[0], why[:1]


GPU_JOBS = ("resnet50-1-worker", "resnet50-2-workers", "resnet50-4-workers", "nccl-allreduce-2-nodes")


def _bound_pods(box) -> dict[str, set[str]]:
    """Job (a Job's or an MPIJob's worker) -> its pods holding a node now: bound and not finished (terminating ones
    included)."""
    out: dict[str, set[str]] = {}
    for pod in box.get("pods", "-n", "training")["items"]:
        labels = pod["metadata"].get("labels") or {}
        if labels.get("training.kubeflow.org/job-role") == "launcher":
            continue
        job = labels.get("training.kubeflow.org/job-name") or labels.get("job-name")
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if job and pod["spec"].get("nodeName") and not finished:
            out.setdefault(job, set()).add(pod["metadata"]["name"])
    return out


# --- faults with the real Job controller ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, outcome",
    [
        # 2 (USAGE_ERROR_EXIT_CODE, the policy's FailJob: fails at once) runs through the user's command:
        # test_the_rehearse_command_prints_the_log_of_a_failed_jobs_pod
        (69, "retried, not counted"),  # the launcher's lost-rendezvous code: Ignore, the pod is replaced
        (1, "retried, counted"),  # any other failure counts against backoffLimit
    ],
)
def test_a_failing_training_pod_is_retried_or_fails_the_job_as_the_policy_says(
    binaries, registrations_of, tmp_path, code: int, outcome: str
) -> None:
    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, registrations_of("dev"), "dev", exit_codes={"train": (code, "worker")}
    )
    try:
        with Registrar(box):
            with pytest.raises(RehearsalError) as err:
                rehearsal.run(binaries, timeout_s=40)
            job = box.get("job", "train", "-n", "training")
            pods = box.get("pods", "-n", "training", "-l", "job-name=train")["items"]
    finally:
        rehearsal.stop_operator()
        box.down()
    conditions = {c["type"]: c for c in job["status"].get("conditions") or []}
    status = job["status"]
    assert "not done after" in str(err.value), str(err.value)
    assert "Failed" not in conditions or conditions["Failed"]["status"] != "True", conditions
    assert len(pods) >= 2, f"the failed pod was not replaced: {[p['metadata']['name'] for p in pods]}"
    if outcome == "retried, not counted":
        assert not status.get("failed"), status
    else:
        assert status.get("failed", 0) >= 1, status


# --- scale ------------------------------------------------------------------------------------------------------------


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
    # Each pod runs 30 s, so all 256 must run at once, one per node (none may wait for another to finish).
    box, _plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        run_program("p5", config=config).registrations,
        "p5",
        sizes={"gpu": 256},
        mutate=widen,
        run_ms={"train-allreduce": 30000},
    )
    up_s = time.monotonic() - start
    try:
        with Registrar(box):
            rehearsal.run(binaries, timeout_s=240)
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


@pytest.mark.alone
def test_a_32_node_job_on_256_p5_nodes_lands_in_one_network_block(binaries, tmp_path) -> None:
    """Topology-aware placement (issue 26, item 5) through the real Kueue with topology-aware scheduling as the release
    enables it: the p5 preset's GPU group at 256 nodes, whose network-topology labels put 32 nodes under each
    lowest-layer network node (blocks, :mod:`stacks.box.nodes`); one node of each of the first 7 blocks cordoned, so
    that only the last block has 32 free nodes. The training job at 32 nodes and its all-reduce health check (32 too)
    each land every pod in that block. Without the pods' preferred-topology annotation Kueue never admits them (the
    flavor is topology-aware); without topology-aware scheduling at all the scheduler spreads them over the blocks."""
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
            rehearsal.run(binaries, timeout_s=240)
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


# --- teams: a cohort of queues ----------------------------------------------------------------------------------------

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


def test_a_team_borrows_idle_gpus_and_gives_them_back_when_the_lender_submits(binaries, tmp_path) -> None:
    """Teams in one cohort: g5's fleet (2 GPU nodes) as a cluster stack without jobs of its own, teams a and b at 50 %
    each (one GPU node of nominal quota each), and each team's jobs-only stack (its objects as the real program
    registers them, through the StackReference). Team a's 2-node job borrows b's idle node and is admitted whole; when
    team b submits a 1-node job, b's ClusterQueue reclaims its quota (reclaimWithinCohort: Any): a's workload is
    preempted (Kueue's InCohortReclamation), its pods deleted, b's job admitted and run while a holds nothing; a's job
    is requeued and completes after."""
    import pulumi
    import yaml

    from stacks.box.rehearse import RUN_MS
    from tests.harness import STACK_OUTPUTS, resolve

    config = stack_config("g5")
    for k in ("eks-training:jobs", "eks-training:datasets"):
        config.pop(k)
    # team a's members: their ClusterRole and RoleBinding go through the real apiserver too
    config["eks-training:teams"] = {
        "a": {"quotaPercent": 50, "memberRoleArns": ["arn:aws:iam::123456789012:role/A"]},
        "b": {"quotaPercent": 50},
    }
    cluster = run_program("shared", config=config)
    STACK_OUTPUTS[TEAMS_REFERENCE] = {k: resolve(pulumi.Output.from_input(v)) for k, v in cluster.outputs.items()}
    try:
        team_a = steps_of(_jobs_only_registrations(config, "a", "wide", 2))
        team_b = steps_of(_jobs_only_registrations(config, "b", "narrow", 1))
    finally:
        STACK_OUTPUTS.pop(TEAMS_REFERENCE)
    assert {d["metadata"].get("namespace") for s in team_a for d in s.docs} == {"a"}
    b_docs = [d for s in team_b for d in s.docs]
    assert {d["metadata"].get("namespace") for d in b_docs} == {"b"}
    for doc in b_docs:
        for template in pod_templates(doc):
            template.setdefault("metadata", {}).setdefault("annotations", {})[RUN_MS] = "2000ms"

    def with_team_a(steps) -> None:
        # team a's stack comes after its namespace, claim and queue exist (as it does: the cluster stack is up)
        cluster_a = {s.urn for s in steps for d in s.docs if d["metadata"].get("namespace") == "a"}
        for s in team_a:
            s.deps |= cluster_a
        steps.extend(team_a)

    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, cluster.registrations, "g5", mutate=with_team_a, run_ms={"wide": 6000}
    )
    samples: list[dict[str, set[str]]] = []
    submitted: list[float] = []
    preempted: list[dict] = []  # the Preempted conditions of team a's workloads while they held

    def poll() -> None:
        samples.append({**_bound_pods_in(box, "a"), **_bound_pods_in(box, "b")})
        if not submitted and len(samples[-1].get("wide", ())) == 2:
            box.kubectl("apply", "--server-side", "--field-manager=test", "-f", "-", input=yaml.safe_dump_all(b_docs))
            submitted.append(time.monotonic())
        if submitted and not preempted:
            preempted.extend(
                c
                for wl in box.get("workloads", "-n", "a")["items"]
                for c in (wl.get("status") or {}).get("conditions") or []
                if c["type"] == "Preempted" and c["status"] == "True"
            )

    watch = _Watch(box, poll)
    start = time.monotonic()
    try:
        with Registrar(box) as registrar, watch:
            rehearsal.run(binaries, timeout_s=120)
        assert registrar.error is None, registrar.error
        assert watch.error is None, watch.error
        narrow = box.get("job", "narrow", "-n", "b")
        queues = {q["metadata"]["name"]: q for q in box.get("clusterqueues")["items"]}
    finally:
        rehearsal.stop_operator()
        box.down()
    took = time.monotonic() - start
    print(f"teams: box up, borrow, reclaim and both jobs complete in {took:.0f} s")
    assert {"training", "team-a", "team-b"} <= set(queues)
    assert {"eks-training-team-member"} <= {
        d["metadata"]["name"] for s in rehearsal.applied.values() for d in s.docs if d["kind"] == "ClusterRole"
    }
    assert {q["spec"].get("cohortName") for q in queues.values()} == {"eks-training"}
    # a's job ran whole on both GPU nodes (one of them b's nominal quota: borrowed) before b submitted
    assert submitted, f"team a's 2-node job never ran on both GPU nodes: {samples[-5:]}\n{rehearsal.timeline()}"
    # b's submission took the borrowed node back: a's workload was preempted for the reclamation
    assert preempted and preempted[0]["reason"] == "InCohortReclamation", (preempted, rehearsal.timeline())
    assert "preemptor path: /eks-training/team-b; preemptee path: /eks-training/team-a" in preempted[0]["message"]
    # b ran while none of a's pods held a node, and never beside a's 2
    assert any(s.get("narrow") and not s.get("wide") for s in samples), samples
    assert not any(s.get("narrow") and len(s.get("wide", ())) == 2 for s in samples), samples
    assert (narrow["status"].get("succeeded") or 0) == 1, narrow["status"]
    assert rehearsal.jobs["wide"]["outcome"] == "Complete", rehearsal.timeline()


def _bound_pods_in(box, namespace: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for pod in box.get("pods", "-n", namespace)["items"]:
        job = (pod["metadata"].get("labels") or {}).get("job-name")
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if job and pod["spec"].get("nodeName") and not finished:
            out.setdefault(job, set()).add(pod["metadata"]["name"])
    return out


# --- the user's command: python -m stacks.rehearse ---------------------------------------------------------------------


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


def test_the_rehearse_command_prints_the_run(binaries, tmp_path, capsys) -> None:
    """``python -m stacks.rehearse --stack dev --keep``'s main, in this process: exit 0; the timeline says what ran
    where (every pod of every job on its group's node), what waited and why (the evaluation's pod held by its
    wait-for-jobs init container until the training job completed), each job's outcome and duration; the stack's
    waitCommand, rewritten, works against the kept box; ``python -m stacks.box down`` then stops the operators the
    rehearsal left running (by pid, waited for) and deletes the box."""
    from stacks import rehearse
    from stacks.box import cli as box_cli
    from stacks.box.operators import FILE, _runs

    code = rehearse.main(["--stack", "dev", "--keep", "--workdir", str(tmp_path), "--timeout", "120"])
    out = capsys.readouterr().out
    home = tmp_path / "rehearse-dev"
    try:
        assert code == 0, out
        assert out.startswith("Rehearsal of stack dev on 2 simulated nodes (system: 1, cpu: 1)\n"), out
        assert "Every job completed (4)." in out
        jobs = out.split("\nJobs:\n", 1)[1]
        for job in ("eks-training-dev-stage-cifar10", "train-allreduce", "train", "evaluate"):
            assert re.search(
                rf"^  {job} \(Job\): Complete, started [\d.]+ s, finished [\d.]+ s, took [\d.]+ s$", jobs, re.M
            ), jobs
        ran = out.split("\nWhere each pod ran:\n", 1)[1].split("\n\n", 1)[0]
        assert re.search(r"^  training/train-0-\w+ \(Job train\) on cpu-0: started [\d.]+ s, Succeeded", ran, re.M), ran
        assert re.search(
            r"^  training/evaluate-0-\w+ \(Job evaluate\) on system-0: started [\d.]+ s, Succeeded", ran, re.M
        ), ran
        waited = out.split("\nWhat waited, and why:\n", 1)[1]
        assert re.search(
            r"^  pod training/evaluate-0-\w+ \(Job evaluate\) [\d.]+-[\d.]+ s: on system-0, its "
            r"wait-for-jobs init container waits for jobs/train$",
            waited,
            re.M,
        ), waited
        timeline = out.split("\nWhere each pod ran:\n", 1)[0]
        assert re.search(r"^ +[\d.]+ s  Job train: admitted$", timeline, re.M), timeline
        assert re.search(r"^ +[\d.]+ s  Job train: Complete$", timeline, re.M), timeline
        # the stack's waitCommand for train, as printed, against the kept box
        wait = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("  train waitCommand: "))
        assert f"--kubeconfig {home / 'kubeconfig'}" in wait
        done = subprocess.run(["bash", "-c", wait], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "train: Admitted=True" in done.stdout and "job.batch/train condition met" in done.stdout, done.stdout
        # and its logsCommand (kubectl logs -f -l eks-training/job=train, through the apiserver from kwok's kubelet
        # server): the box's log of the training pod, what the Stage did and how the container ended
        logs = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("  train logsCommand: "))
        assert f"--kubeconfig {home / 'kubeconfig'} logs " in logs, logs
        printed = _follow(logs, r"\[box\] pod training/train-0-\w+: Succeeded")
        pod = re.escape(f"[pod/{re.search(r'training/(train-0-[a-z0-9]+)', printed).group(1)}/worker]")  # type: ignore[union-attr]
        assert re.search(
            rf"^{pod} \[box\] pod training/train-0-\w+ \(Job train\) started on node cpu-0; container "
            rf"worker, image \S+: simulated by kwok, nothing ran$",
            printed,
            re.M,
        ), printed
        assert re.search(
            rf"^{pod} \[box\] container worker: runs 1000ms \(box.eks-training/run-ms\), then exits 0$", printed, re.M
        ), printed
        assert re.search(rf"^{pod} \[box\] container worker: exited 0 \(Completed\)$", printed, re.M), printed
        operators = json.loads((home / FILE).read_text())
        assert [o["name"] for o in operators] == ["kueue"]  # dev runs no MPIJob
        assert all(_runs(o["pid"], o["binary"]) for o in operators)
    finally:
        assert box_cli.main(["down", "--name", "rehearse-dev", "--workdir", str(tmp_path)]) == 0
    assert not any(_runs(o["pid"], o["binary"]) for o in operators)
    assert not home.exists()


def _follow(command: str, until: str, timeout_s: float = 60.0) -> str:
    """What ``command`` (a shell line) prints until a line matches ``until``; then the command is stopped (its
    process group: ``kubectl logs -f`` on the box follows until interrupted, see :mod:`stacks.box.podlogs`)."""
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
    proc.wait(timeout=10)
    reader.join(timeout=10)
    text = "".join(lines)
    assert re.search(until, text, re.M), f"{command!r} printed no line matching {until!r} in {timeout_s:.0f} s:\n{text}"
    return text


def test_the_rehearse_command_prints_the_log_of_a_failed_jobs_pod(binaries, tmp_path, capsys) -> None:
    """``python -m stacks.rehearse --stack dev --exit-code train=2:worker --keep``: the training pod's worker exits 2
    (USAGE_ERROR_EXIT_CODE), the pod failure policy's FailJob fails the Job at once (nothing retried), pulumi up would
    fail there; the command exits 1 naming the job and prints the last lines of its pod's log (the failed container's,
    served by kwok from the box's file, read back with kubectl logs --tail), which say what the Stage did and the exit
    code."""
    from stacks import rehearse
    from stacks.box import cli as box_cli

    code = rehearse.main(
        ["--stack", "dev", "--keep", "--workdir", str(tmp_path), "--timeout", "120", "--exit-code", "train=2:worker"]
    )
    out = capsys.readouterr().out
    box = Box(name="rehearse-dev", workdir=tmp_path, binaries=binaries)
    try:
        assert code == 1, out
        assert "FAILED: job(s) failed: train\n" in out, out
        shown = out.split("FAILED: job(s) failed: train\n", 1)[1]
        assert re.match(
            r"Last lines of the log of pod training/train-0-\w+ \(Job train, container worker, kubectl "
            r"logs --tail=10\):\n",
            shown,
        ), shown
        block = shown.split("\n\n", 1)[0].splitlines()[1:]
        assert re.fullmatch(
            r"  \[box\] pod training/train-0-\w+ \(Job train\) started on node cpu-0; container worker, "
            r"image \S+: simulated by kwok, nothing ran",
            block[0],
        ), block
        assert block[1:] == [
            "  [box] container worker: runs 1000ms (box.eks-training/run-ms), then exits 2 "
            "(box.eks-training/exit-code)",
            "  [box] container worker: exited 2 (Error)",
            f"  [box] pod training/{block[0].split('training/', 1)[1].split(' ', 1)[0]}: Failed",
        ], block
        # what the box says is what the apiserver has: the policy's FailJob, one pod, nothing retried
        job = box.get("job", "train", "-n", "training")
        conditions = {c["type"]: c for c in job["status"].get("conditions") or []}
        assert conditions["Failed"]["reason"] == "PodFailurePolicy", conditions
        assert len(box.get("pods", "-n", "training", "-l", "job-name=train")["items"]) == 1
    finally:
        assert box_cli.main(["down", "--name", "rehearse-dev", "--workdir", str(tmp_path)]) == 0


# --- faults with the real controllers: a lost node, a rescheduled rendezvous ------------------------------------------


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
    box.kubectl("annotate", "pod", pod["metadata"]["name"], "-n", "training", f"{RUN_MS}={run_ms}ms", "--overwrite")


def test_a_node_lost_mid_run_is_replaced_and_the_job_completes(binaries, registrations_of, tmp_path) -> None:
    """``kubectl delete node`` of the node running dev's training pod (a PyTorchJob's Indexed Job), as when its
    instance dies and the cloud's node lifecycle deletes the Node. What the README promises:

    - "Every job and health check goes through Kueue's admission ... it is created suspended and starts only when all
      of it fits", and "A job admitted but not all running within waitForPodsReady's 1200 s ... is evicted": a lost
      pod does not evict the job; it stays admitted, holding its quota, while its pod is replaced.
    - The pod failure policy: "disruptions (DisruptionTarget) never count against the backoff"
      (components/workloads/pods.py; the README's exit-code table: "143 | stopped by a signal | Ignore (like the
      DisruptionTarget condition)").
    - "A node is lost ...: the survivor's first resumed step came 6.9-12.6 s after the kill" -- that is torchrun, on a
      real process group; here the part Kubernetes plays: the lost pod is failed by the pod garbage collector with
      DisruptionTarget (reason DeletionByPodGC) once the Node is gone, 40-80 s later (kube-controller-manager's
      pkg/controller/podgc: a fixed 40 s quarantine for a missing node, on passes 20 s apart), the Job controller
      replaces it without counting it, the replacement waits Pending (the scheduler's reason: no node of the group)
      until the managed node group's replacement instance registers (the test creates it from the plan), runs there,
      and the job completes (the evaluation, which only follows training, is left out of the run).
    """
    box, plan, rehearsal = _rehearsal(
        binaries, tmp_path, registrations_of("dev"), "dev", run_ms={"train": 600_000}, mutate=_without_evaluation
    )
    cpu = next(g for g in plan.all_groups if g.name == "cpu")
    spare = group_nodes(cpu, "us-east-1", count=2)[1]  # the replacement instance: a new node of the group
    recorder = Recorder(box, rehearsal.start)
    seen: dict = {}

    def poll() -> None:
        pods = _train_pods(box)
        if "lost" not in seen:
            running = [p for p in pods if _phase(p) == "Running"]
            if running:
                seen["lost"] = running[0]
                box.kubectl("delete", "node", running[0]["spec"]["nodeName"])
                seen["deleted"] = time.monotonic()
            return
        new = [p for p in pods if p["metadata"]["uid"] != seen["lost"]["metadata"]["uid"]]
        if not new:
            return
        pod = new[0]
        seen.setdefault("replaced", time.monotonic())
        scheduled = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None
        )
        # the spare node only once the timeline shows the scheduler's reason (the recorder polls on its own)
        shown = any(
            w.reason.startswith("not scheduled")
            for r in list(recorder.pods.values())
            if r.name == pod["metadata"]["name"]
            for w in r.waits
        )
        if "spare" not in seen and scheduled and scheduled["status"] == "False" and shown:
            seen["pending"] = scheduled.get("message")
            create_nodes(box, [spare])
            seen["spare"] = time.monotonic()
        if _phase(pod) == "Running" and "ran" not in seen:
            seen["ran"] = pod
            _shorten(box, pod)

    watch = _Watch(box, poll)
    try:
        with Registrar(box) as registrar, recorder, watch:
            rehearsal.run(binaries, timeout_s=240)
        assert registrar.error is None and watch.error is None, (registrar.error, watch.error)
        job = box.get("job", "train", "-n", "training")
    finally:
        rehearsal.stop_operator()
        box.down()
    text = report(rehearsal, recorder)
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] == "Complete", (name, text)
    lost, ran = seen["lost"], seen["ran"]
    assert lost["spec"]["nodeName"] == "cpu-0" and ran["spec"]["nodeName"] == spare["metadata"]["name"], text
    # not counted: the DisruptionTarget rule of the pod failure policy matched the pod GC's condition
    assert not job["status"].get("failed"), job["status"]
    assert job["status"].get("succeeded") == 1
    # the pod GC's quarantine, then the replacement: Pending until a node of the group registered
    replaced_after = seen["replaced"] - seen["deleted"]
    assert replaced_after >= 39, replaced_after
    assert "didn't match Pod's node affinity/selector" in seen["pending"], seen["pending"]
    waits = [w.reason for r in recorder.pods.values() if r.name == ran["metadata"]["name"] for w in r.waits]
    assert any("not scheduled: 0/1 nodes are available" in w for w in waits), text
    # Kueue kept the job admitted throughout: never evicted, never queued again
    states = [s for _t, s in recorder.workloads["train"]]
    assert "admitted" in states and not any(
        s.startswith(("evicted", "queued")) for s in states[states.index("admitted") :]
    ), states
    print(
        f"pod replaced {replaced_after:.1f} s after its node was deleted; spare node at "
        f"{seen['spare'] - seen['deleted']:.1f} s\n{text}"
    )


def test_the_rendezvous_rescheduled_mid_run_and_the_job_completes(binaries, registrations_of, tmp_path) -> None:
    """dev's etcd rendezvous pod deleted while the training pod runs. What the README promises ("etcd is
    rescheduled"): "its data is on the shared volume ... one member, replaced with Recreate, so it comes back with the
    rendezvous it had: the agents lose their connection (RendezvousConnectionError) about 2 s later and stop their
    workers, which checkpoint the step reached; the pods end with 69 (rendezvous lost), are replaced, and resume at
    that step", and the exit-code table: "69 | rendezvous lost with etcd | Ignore (the next pod waits for etcd)".

    Here: the Deployment's ReplicaSet brings a new etcd pod up, the Service's EndpointSlice follows it (the new pod's
    address, ready; the old one gone), the training pod exits 69 as the launcher does (tests/test_training_faults_real.py
    shows that part on real processes), the Job controller replaces it without counting the failure, and the job
    completes (the evaluation, which only follows training, is left out of the run)."""
    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, registrations_of("dev"), "dev", run_ms={"train": 600_000}, mutate=_without_evaluation
    )
    etcd = "eks-training-dev-etcd"
    recorder = Recorder(box, rehearsal.start)
    seen: dict = {}

    def etcd_pods() -> list[dict]:
        return [
            p
            for p in box.get("pods", "-n", "training")["items"]
            if p["metadata"]["name"].startswith(etcd + "-") and not p["metadata"].get("deletionTimestamp")
        ]

    def poll() -> None:
        pods = _train_pods(box)
        if "old" not in seen:
            if any(_phase(p) == "Running" for p in pods):
                old = next(p for p in etcd_pods() if _phase(p) == "Running")
                seen["old"], seen["train"] = old, next(p for p in pods if _phase(p) == "Running")
                box.kubectl("delete", "pod", old["metadata"]["name"], "-n", "training", "--wait=false")
                # the launcher loses its rendezvous and exits 69 (its agent stops the workers, which checkpoint)
                box.kubectl(
                    "annotate",
                    "pod",
                    seen["train"]["metadata"]["name"],
                    "-n",
                    "training",
                    f"{EXIT_CODE}=69",
                    "box.eks-training/container=worker",
                    f"{RUN_MS}=500ms",
                    "--overwrite",
                )
            return
        if "new" not in seen:
            new = [
                p
                for p in etcd_pods()
                if p["metadata"]["uid"] != seen["old"]["metadata"]["uid"]
                and _phase(p) == "Running"
                and p["status"].get("podIP")
            ]
            if new:
                seen["new"] = new[0]
        again = [p for p in pods if p["metadata"]["uid"] != seen["train"]["metadata"]["uid"] and _phase(p) == "Running"]
        if again and "again" not in seen:
            seen["again"] = again[0]
            _shorten(box, again[0])

    watch = _Watch(box, poll)
    try:
        with Registrar(box) as registrar, recorder, watch:
            rehearsal.run(binaries, timeout_s=120)
        assert registrar.error is None and watch.error is None, (registrar.error, watch.error)
        job = box.get("job", "train", "-n", "training")
        deployment = box.get("deployment", etcd, "-n", "training")
        slices = box.get("endpointslices", "-n", "training", "-l", f"kubernetes.io/service-name={etcd}")["items"]
    finally:
        rehearsal.stop_operator()
        box.down()
    text = report(rehearsal, recorder)
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] == "Complete", (name, text)
    assert deployment["status"].get("availableReplicas") == 1, deployment["status"]
    # the Service follows the new pod: its one ready endpoint is the new pod, at the new pod's address
    endpoints = [e for sl in slices for e in sl.get("endpoints") or []]
    assert [(e["targetRef"]["name"], e["addresses"], e["conditions"].get("ready")) for e in endpoints] == [
        (seen["new"]["metadata"]["name"], [seen["new"]["status"]["podIP"]], True)
    ], endpoints
    assert seen["new"]["spec"]["nodeName"].startswith("system-"), seen["new"]["spec"]["nodeName"]
    # the training pod's 69 was not counted (the pod failure policy's Ignore), and it was replaced
    first = next(r for r in recorder.pods.values() if r.name == seen["train"]["metadata"]["name"])
    assert first.outcome == "Failed (exit 69 in worker)", text
    assert not job["status"].get("failed"), job["status"]
    assert job["status"].get("succeeded") == 1 and "again" in seen, text


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


def test_the_rehearse_command_fails_naming_what_waits_and_cleans_up(binaries, tmp_path, capsys) -> None:
    """Pods that run 10 minutes against a 40 s timeout: the command exits 1, prints the timeline and a FAILED line
    naming what pulumi up would still be waiting for (the staging Job, which it awaits); without ``--keep`` the
    operators it started (Kueue at least) are stopped and the box deleted: no process names the box's folder
    afterwards."""
    from stacks import rehearse

    code = rehearse.main(["--stack", "dev", "--workdir", str(tmp_path), "--timeout", "40", "--run-ms", "600000"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert re.search(r"^ +[\d.]+ s  started Kueue \(pid \d+", out, re.M), out
    failed = next(line for line in out.splitlines() if line.startswith("FAILED: "))
    assert (
        failed.startswith("FAILED: not done after 40 s; waiting: ") and "eks-training-dev-stage-cifar10-job" in failed
    ), failed
    assert "The box is brought down" in out
    assert not (tmp_path / "rehearse-dev").exists()
    assert not _processes_under(tmp_path), _processes_under(tmp_path)
