"""Admission on the box: Kueue's reasons, the device plugins, its chart, gang admission, two MPIJobs on one group,
teams."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import time
from typing import Optional

import pytest
import yaml

from components.catalog import DEFAULT_KUBERNETES_VERSION
from stacks.box.charts import render
from stacks.box.cluster import establish_crds
from stacks.box.devices import Registrar
from stacks.box.kueue import crds as kueue_crds
from stacks.box.kueue import kueue_release_configuration
from stacks.box.nodes import plan_nodes
from stacks.box.rehearse import RUN_MS, RehearsalError, pod_templates, steps_of
from stacks.box.session import create_nodes
from stacks.box.watch import Watch
from stacks.outputs import workload_conditions_command
from stacks.plan.admission import launcher_requests
from stacks.stackfile import plan_stack
from tests.cluster.support import (
    GPU_JOBS,
    STACKS,
    TEAMS_REFERENCE,
    _box,
    _jobs_only_registrations,
    _no_gpu_toleration,
    _one,
    _Polls,
    _rehearsal,
    _release,
    _run,
    _sixteen_gpus,
    _with_values,
    admitted,
    holding,
    job_of,
    mpijob_of,
    stamp,
)
from tests.harness import run_program, stack_config
from tests.wait import patient


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
        _run(box, rehearsal, timeout_s=patient(120), stuck=lambda reasons: any(re.search(pattern, r) for r in reasons))
    message = str(err.value)
    assert re.search(r"waiting: [^;]*\beks-training-p5-train-job\b", message), message
    assert re.search(pattern, message), message
    assert not any(p["metadata"]["name"].startswith("train-allreduce") for p in rehearsal.pods.values())


def test_a_device_plugin_that_cannot_land_leaves_the_job_pending(binaries, registrations_of, tmp_path) -> None:
    """With release values that do not tolerate the GPU taint (the stack passes a toleration of every taint; the box
    renders the values into the plugin's DaemonSet), no node reports GPUs: the training job never starts, and the
    rehearsal names Kueue's reason (its topology-aware placement counts no GPU on the group's nodes; the class: a
    plugin's scheduling is part of the stack)."""

    def untolerating(values) -> None:
        assert values["tolerations"] == [{"operator": "Exists"}], values["tolerations"]
        values["tolerations"] = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]

    registrations = _with_values(registrations_of("p5"), "nvidia-device-plugin", untolerating)
    box, _plan, rehearsal = _rehearsal(binaries, tmp_path, registrations, "p5")
    pattern = (
        r"training/train-allreduce: queued, not admitted: SecondPassFailed: .*topology \"ec2-network-3-layers\" "
        r"doesn't allow to fit any of 2 pod\(s\)\. Total nodes: 2; excluded: resource \"nvidia.com/gpu\": 2"
    )
    # Kueue reserves its quota, the ProvisioningRequest brings 2 GPU nodes, and the topology assignment finds no GPU
    with pytest.raises(RehearsalError) as err:
        _run(box, rehearsal, timeout_s=patient(120), stuck=lambda reasons: any(re.search(pattern, r) for r in reasons))
    assert re.search(pattern, str(err.value))


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
    pinned = re.escape(charts.HELM_CHARTS["kueue"].version)
    monkeypatch.setattr(
        charts,
        "HELM_CHARTS",
        {**charts.HELM_CHARTS, "kueue": dataclasses.replace(charts.HELM_CHARTS["kueue"], version="0.16.2")},
    )
    with pytest.raises(
        charts.ChartError,
        match=r"pins the chart kueue at 0\.16\.2, but charts/kueue/Chart\.yaml of "
        rf"sigs\.k8s\.io/kueue v{pinned} \(box/kueue/go\.mod\) is version {pinned}",
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

        pods = box.wait_for(running, timeout_s=patient(60), what="the Kueue manager's pod Running")
        node = box.get("node", pods[0]["spec"]["nodeName"])
        assert node["metadata"]["labels"]["eks-training/role"] == "system"


def test_two_mpijobs_on_one_group_both_complete(binaries, registrations_of, tmp_path) -> None:
    """mpi-horovod's two MPIJobs on its 2-node GPU group must both complete in either order. The program creates
    horovod (after nccl) once nccl exists; here horovod is applied first, as when a later update makes nccl again.
    Applied horovod first, without admission its workers took both
    nodes and its launcher waited for nccl, whose workers never fit: a deadlock, every time. Through Kueue the two
    run one after the other, and while one waits no pod of it exists (it holds no node). Each MPIJob's
    ``waitCommand`` finds its Workload (Kueue's generic reconciler owns it by the MPIJob) and prints it admitted."""

    def horovod_first(steps) -> None:
        mpi = {s.docs[0]["metadata"]["name"]: s for s in steps if any(d["kind"] == "MPIJob" for d in s.docs)}
        mpi["horovod"].deps.discard(mpi["nccl"].urn)
        mpi["nccl"].deps.add(mpi["horovod"].urn)

    box, plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        registrations_of("mpi-horovod"),
        "mpi-horovod",
        mutate=horovod_first,
        run_ms={"nccl": 3000, "horovod": 3000},
    )
    # what each MPIJob's waitCommand prints of its Workload (stacks.outputs: found by the MPIJob's ownerReference)
    waits = {job: shlex.split(workload_conditions_command("training", job)) for job in ("nccl", "horovod")}
    printed: set[str] = set()

    def poll() -> None:
        for words in waits.values():
            printed.update(box.kubectl(*words[1:], check=False).stdout.splitlines())

    # each look is two kubectl processes; what it waits for (Admitted=True) lasts past the job's end
    watch = _Polls(box, poll, interval_s=1.0)
    workers = Watch(box.api, "pods", "training", "training.kubeflow.org/job-role=worker")
    try:
        with Registrar(box) as registrar, workers, watch:
            rehearsal.run(binaries, timeout_s=patient(90))
        assert registrar.error is None, registrar.error
        assert watch.error is None and workers.error is None, (watch.error, workers.error)
        poll()  # after both finished too: Kueue keeps Admitted=True on a finished Workload
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
    for job in ("nccl", "horovod"):
        assert f"{job}: Admitted=True" in {line.split(" (", 1)[0] for line in printed}, sorted(printed)
    # Never did workers of both hold nodes at once with pods that stay (the deadlock: one node each); both did hold
    # nodes at some time (after each change to a worker pod, in the apiserver's order). A preempted MPIJob's workers
    # may still be terminating when the other's start: MPI Operator v0.8.0 counts a suspended job's workers inactive
    # as it deletes them (cleanUpWorkerPods,
    # https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go#L737-L749), and
    # Kueue frees the quota of a job that is no longer active. Those pods leave; they cannot deadlock.
    events = list(workers.events)
    samples = holding(events, mpijob_of)
    both = [s for s in holding(events, mpijob_of, terminating=False) if s.get("nccl") and s.get("horovod")]
    assert not both, both
    assert any(s.get("nccl") for s in samples) and any(s.get("horovod") for s in samples), samples
    # In sequence: once nccl's last worker had finished (or was leaving), two horovod workers held nodes and ran to
    # the end (a horovod admitted first is preempted by nccl, which outranks it: horovod waits for it). In the
    # apiserver's order of the workers' changes, not by timestamps: Kueue admits horovod once nccl's pods have
    # finished, which may be a second or more before the MPI Operator writes nccl's completionTime on a busy machine;
    # and horovod's new workers may be created while nccl's finished ones are still being deleted.
    nccl_left = max(i for i, s in enumerate(holding(events, mpijob_of, terminating=False)) if s.get("nccl"))
    later = {
        pod["metadata"]["uid"]
        for _kind, pod in events[nccl_left + 1 :]
        if mpijob_of(pod) == "horovod" and pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")
    }
    assert len(later) == 2, (finished, rehearsal.timeline())


def _job_of(pod) -> str | None:
    labels = pod["metadata"].get("labels") or {}
    if labels.get("training.kubeflow.org/job-role") == "launcher":
        return None
    return labels.get("training.kubeflow.org/job-name") or labels.get("job-name")


def test_a_job_starts_whole_or_not_at_all(binaries, tmp_path) -> None:
    """Gang admission: the benchmark's GPU group at 4 nodes (its quota: maxSize 4), the 4-worker experiment created
    once the 1-worker one is admitted: it has 3 free nodes and gets no pod until the fourth is free (then all 4), and
    Kueue records why it waits (its QuotaReserved reason, which the stack's waitCommand prints). Every experiment
    completes. Read from the box's records (Kueue's Events, the pods' and jobs' time stamps), not from samples."""
    config = stack_config("benchmark")
    gpu = config["eks-training:nodeGroups"]["gpu"]
    gpu.update(desiredSize=4, maxSize=4)
    registrations = run_program("benchmark", config=config).registrations
    blocker, wide = "resnet50-1-worker", "resnet50-4-workers"

    def blocker_first(steps) -> None:
        jobs = {d["metadata"]["name"]: s for s in steps for d in s.docs if d["kind"] in ("Job", "MPIJob")}
        jobs[wide].gate = admitted(blocker)

    box, _plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        registrations,
        "benchmark",
        sizes={"gpu": 4},
        mutate=blocker_first,
        run_ms={blocker: 3000, wide: 3000},
    )
    try:
        with Registrar(box) as registrar:
            rehearsal.run(binaries, timeout_s=patient(150))
        assert registrar.error is None, registrar.error
        jobs = {o["metadata"]["name"]: o for r in ("jobs", "mpijobs") for o in box.get(r, "-n", "training")["items"]}
        workloads = box.get("workloads", "-n", "training")["items"]
        events = box.get("events", "-n", "training")["items"]
        shown = box.kubectl(*shlex.split(workload_conditions_command("training", wide))[1:]).stdout
    finally:
        rehearsal.stop_operator()
        box.down()
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] in ("Complete", "Succeeded"), (name, rec, rehearsal.timeline())
    pods: dict[str, list[dict]] = {}
    for pod in rehearsal.pods.values():
        if (job := _job_of(pod)) is not None:
            pods.setdefault(job, []).append(pod)
    assert len(pods.get(blocker, [])) == 1, rehearsal.timeline()
    # All 4 at once, each on its own node, none created before the blocker's job had completed.
    wide_pods = pods.get(wide, [])
    assert len({p["spec"]["nodeName"] for p in wide_pods}) == 4 == len(wide_pods), wide_pods
    span = {
        job: (
            min(stamp(p["metadata"]["creationTimestamp"]) for p in ps),
            stamp(jobs[job]["status"]["completionTime"]),
        )
        for job, ps in pods.items()
        if job in GPU_JOBS
    }
    assert span[wide][0] >= span[blocker][1], span
    # Never a pod of the wide job beside another GPU job's: their spans do not overlap.
    overlapping = [j for j, (start, end) in span.items() if j != wide and start < span[wide][1] and span[wide][0] < end]
    assert not overlapping, span
    # Kueue's record of the wait: a Pending event on the wide job's Workload, with the reason the waitCommand shows.
    names = {
        wl["metadata"]["name"]
        for wl in workloads
        if any(r.get("name") == wide for r in wl["metadata"].get("ownerReferences") or [])
    }
    why = [
        e.get("message") or e.get("note") or ""
        for e in events
        if (e.get("involvedObject") or e.get("regarding") or {}).get("name") in names and e.get("reason") == "Pending"
    ]
    assert any("insufficient unused quota" in w and "nvidia.com/gpu" in w for w in why), (why, events)
    assert re.search(rf"^{wide}: QuotaReserved=True", shown, re.M), shown


def test_a_team_borrows_idle_gpus_and_gives_them_back_when_the_lender_submits(binaries, tmp_path) -> None:
    """Teams in one cohort: g5's fleet (2 GPU nodes) as a cluster stack without jobs of its own, teams a and b at 50 %
    each (one GPU node of nominal quota each), and each team's jobs-only stack (its objects as the real program
    registers them, through the StackReference). Team a's 2-node job borrows b's idle node and is admitted whole; when
    team b submits a 1-node job, b's ClusterQueue reclaims its quota (reclaimWithinCohort: Any): a's workload is
    preempted (Kueue's InCohortReclamation), its pods deleted, b's job admitted and run while a holds nothing; a's job
    is requeued and completes after."""
    import pulumi
    import yaml

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
        binaries, tmp_path, cluster.registrations, "g5", mutate=with_team_a, run_ms={"wide": 20000}
    )
    submitted: list[float] = []
    pods = Watch(box.api, "pods", None)

    def team_job(pod) -> Optional[str]:
        return job_of(pod) if pod["metadata"]["namespace"] in ("a", "b") else None

    def poll() -> None:
        held = holding(list(pods.events), team_job)
        if not submitted and held and len(held[-1].get("wide", ())) == 2:
            box.kubectl("apply", "--server-side", "--field-manager=test", "-f", "-", input=yaml.safe_dump_all(b_docs))
            submitted.append(time.monotonic())

    watch = _Polls(box, poll)
    start = time.monotonic()
    try:
        with Registrar(box) as registrar, pods, watch:
            rehearsal.run(binaries, timeout_s=patient(120))
        assert registrar.error is None, registrar.error
        assert watch.error is None and pods.error is None, (watch.error, pods.error)
        narrow = box.get("job", "narrow", "-n", "b")
        queues = {q["metadata"]["name"]: q for q in box.get("clusterqueues")["items"]}
        # Kueue's Event on the preempted Workload (its Preempted condition is reset once it is admitted again)
        preempted = [e for e in box.get("events", "-n", "a")["items"] if e["reason"] == "Preempted"]
    finally:
        rehearsal.stop_operator()
        box.down()
    took = time.monotonic() - start
    print(f"teams: box up, borrow, reclaim and both jobs complete in {took:.0f} s")
    samples = holding(pods.events, team_job)  # after each change to a pod, in the apiserver's order
    assert {"training", "team-a", "team-b"} <= set(queues)
    assert {"eks-training-team-member"} <= {
        d["metadata"]["name"] for s in rehearsal.progress.applied.values() for d in s.docs if d["kind"] == "ClusterRole"
    }
    assert {q["spec"].get("cohortName") for q in queues.values()} == {"eks-training"}
    # a's job ran whole on both GPU nodes (one of them b's nominal quota: borrowed) before b submitted
    assert submitted, f"team a's 2-node job never ran on both GPU nodes: {samples[-5:]}\n{rehearsal.timeline()}"
    # b's submission took the borrowed node back: a's workload was preempted for the reclamation (Kueue's message
    # names the reason InCohortReclamation so: pkg/scheduler/preemption/preemption.go at v0.19.1)
    assert len(preempted) == 1, (preempted, rehearsal.timeline())
    message = preempted[0]["message"]
    assert preempted[0]["involvedObject"]["kind"] == "Workload", preempted[0]
    assert "due to reclamation within the cohort; " in message, message
    assert "preemptor path: /eks-training/team-b; preemptee path: /eks-training/team-a" in message, message
    # b ran while none of a's pods held a node, and never beside a's 2
    assert any(s.get("narrow") and not s.get("wide") for s in samples), samples
    assert not any(s.get("narrow") and len(s.get("wide", ())) == 2 for s in samples), samples
    assert (narrow["status"].get("succeeded") or 0) == 1, narrow["status"]
    assert rehearsal.jobs["wide"]["outcome"] == "Complete", rehearsal.timeline()


def test_kueue_admits_no_more_whole_node_pods_than_the_group_has_nodes(binaries, tmp_path) -> None:
    """Four m5.xlarge nodes (maxSize 4), job second (3 pods, after first) admitted before job first (2 pods) is
    created: the quota is 4 pods' worth, so Kueue does not admit first beside second's 3 but preempts second (a later
    stage, a lower priority), and first's pods run at once. A quota of the nodes' allocatable CPU held 5 pods of 80% of
    a node: first was admitted too, with one free node for its two pods, which ran one after the other (a training
    job's ranks would wait for each other there for ever, beside second's pods waiting for it)."""

    def two_jobs(config: dict) -> None:
        config.pop("eks-training:datasets", None)
        cpu = config["eks-training:nodeGroups"]["cpu"]
        cpu.update(instanceTypes=["m5.xlarge"], minSize=0, desiredSize=0, maxSize=4)
        config["eks-training:jobs"] = {
            "first": {"kind": "command", "nodes": 2, "command": ["true"]},
            "second": {"kind": "command", "nodes": 3, "command": ["true"], "after": ["first"]},
        }

    config = stack_config("dev")
    two_jobs(config)
    registrations = run_program("dev", config=config).registrations

    def second_first(steps) -> None:
        # second created before first, as when a later update makes first again: the program creates a job after
        # the jobs it waits for, so second's step waits for first's, which this gate would never let through
        jobs = {d["metadata"]["name"]: s for s in steps for d in s.docs if d["kind"] == "Job"}
        jobs["second"].deps.discard(jobs["first"].urn)
        jobs["first"].gate = admitted("second")

    # long enough that pods started as second's free their nodes one by one on a busy box still overlap; with the
    # old quota first's second pod could start only once its first had ended, however long that ran
    run_s = 20
    box, _plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        registrations,
        "dev",
        plan=plan_stack("dev", edit=two_jobs)[1],
        sizes={"cpu": 4},
        mutate=second_first,
        run_ms={"first": run_s * 1000, "second": 1000},
    )
    try:
        rehearsal.run(binaries, timeout_s=patient(150))
    finally:
        rehearsal.stop_operator()
        box.down()
    timeline = rehearsal.timeline()
    assert {n: r["outcome"] for n, r in rehearsal.jobs.items()} == {"first": "Complete", "second": "Complete"}, timeline
    # every pod of first started before any of them ended (each runs run_s from its start): the job ran whole
    started = sorted(stamp(p["status"]["startTime"]) for p in rehearsal.pods.values() if job_of(p) == "first")
    assert len(started) == 2 and started[-1] < started[0] + run_s, (started, timeline)
