"""Admission (Kueue) over everything every stack registers: every job queued and created suspended, the suspend field
left to Kueue, every pod set of every job given a flavor by Kueue's own rules, quotas that are the fleet at its
maximum size, integrations for every job kind rendered. The box runs the same objects through the real Kueue
(tests/cluster/test_box_admission.py)."""

import dataclasses
from typing import Any, Mapping

import pytest
import yaml

from components.admission import FRAMEWORKS, chart_values, kueue_configuration
from components.catalog import HELM_CHARTS
from components.catalog.charts import CHART_IMAGES
from components.nodeplan import node_allocatable
from components.quantities import mebibytes_of, millicores_of
from stacks.plan.admission import admission_plan, job_and_launcher_requests, never_admitted
from stacks.plan.queues import PRIORITY_LABEL, QUEUE_LABEL, RESOURCES
from stacks.stackfile import plan_stack
from tests.harness import JOB_OBJECT_TYPES, run_program, stack_config, stack_names

STACKS = stack_names()
#: The Kueue integration of each job kind a stack may register (Kueue's framework names,
#: https://kueue.sigs.k8s.io/docs/overview/#built-in-integrations-with-jobs).
INTEGRATION = {("batch/v1", "Job"): "batch/job", ("kubeflow.org/v2beta1", "MPIJob"): "kubeflow.org/mpijob"}
#: Where each kind keeps its suspend field (Kueue flips it) and its pod sets.
SUSPEND = {"Job": ("spec", "suspend"), "MPIJob": ("spec", "runPolicy", "suspend")}


def _get(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for p in path:
        obj = (obj or {}).get(p)  # type: ignore[assignment]
    return obj


def _pod_sets(kind: str, inputs: Mapping[str, Any]) -> list[tuple[str, int, Mapping[str, Any]]]:
    """(name, count, pod spec) of a job, as Kueue's integration makes pod sets of it."""
    spec = inputs["spec"]
    if kind == "Job":
        return [("main", int(spec["parallelism"]), spec["template"]["spec"])]
    return [
        (role.lower(), int(r.get("replicas", 1)), r["template"]["spec"]) for role, r in spec["mpiReplicaSpecs"].items()
    ]


def _quantity(value: str, resource: str) -> int:
    """CPU in millicores, memory in MiB, devices as counts (the spellings the stacks use)."""
    v = str(value)
    if resource == "cpu":
        return int(v[:-1]) if v.endswith("m") else int(float(v) * 1000)
    if v.endswith("Mi"):
        return int(v[:-2])
    if v.endswith("Gi"):
        return int(v[:-2]) * 1024
    return int(v)


def _tolerates(tolerations: list[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """Kubernetes' ToleratesTaint (k8s.io/api/core/v1/toleration.go), which Kueue applies to a flavor's nodeTaints."""
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _flavor_fits(pod: Mapping[str, Any], flavor: Mapping[str, Any]) -> bool:
    """Kueue's flavor assignment (pkg/scheduler/flavorassigner/flavorassigner.go, ``checkFlavorForPodSets``): the
    pod's nodeSelector must agree with the flavor's nodeLabels on every key both have, and the pod must tolerate the
    flavor's nodeTaints."""
    spec = flavor["spec"]
    selector = pod.get("nodeSelector") or {}
    for k, v in (spec.get("nodeLabels") or {}).items():
        if k in selector and selector[k] != v:
            return False
    return all(_tolerates(pod.get("tolerations") or [], t) for t in spec.get("nodeTaints") or [])


@pytest.fixture(scope="module")
def programs() -> dict[str, Any]:
    return {s: run_program(s) for s in STACKS}


def _kueue_objects(program) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in program.registrations:
        if r.type.startswith("kubernetes:kueue.x-k8s.io/"):
            out.setdefault(r.inputs["kind"], []).append(r.inputs)
    return out


def _jobs(program):
    return [r for r in program.registrations if r.type in JOB_OBJECT_TYPES]


@pytest.mark.parametrize("stack", STACKS)
def test_every_job_of_the_plan_is_queued_suspended_and_leaves_suspend_to_kueue(programs, stack: str) -> None:
    program = programs[stack]
    _, plan = plan_stack(stack)
    kueue = _kueue_objects(program)
    local_queues = {q["metadata"]["name"] for q in kueue.get("LocalQueue", [])}
    priorities = {p["metadata"]["name"] for p in kueue.get("WorkloadPriorityClass", [])}
    queue_urn = next(r.urn for r in program.registrations if r.type.endswith(":LocalQueue"))
    queued = set()
    for r in _jobs(program):
        labels = r.inputs["metadata"].get("labels") or {}
        if QUEUE_LABEL not in labels:
            continue
        kind = r.inputs["kind"]
        queued.add(r.inputs["metadata"]["name"])
        assert labels[QUEUE_LABEL] in local_queues, (r.name, labels)
        assert labels[PRIORITY_LABEL] in priorities, (r.name, labels)
        assert _get(r.inputs, SUSPEND[kind]) is True, f"{r.name}: created unsuspended, it would start before admission"
        # pulumi must never set suspend again (Kueue flips it): ignored, or everything is (a run-once check)
        path = ".".join(SUSPEND[kind][:-1] + SUSPEND[kind][-1:])
        assert path in r.ignore_changes or "spec" in r.ignore_changes, (r.name, r.ignore_changes)
        assert program.depends_transitively(r, queue_urn), f"{r.name} may be created before its queue"
    expected = set(plan.jobs) | {f"{n}-allreduce" for n, j in plan.jobs.items() if j.health_check}
    # (a Capacity Block not started yet defers jobs: none of the presets has one)
    assert expected <= queued, f"{stack}: jobs not queued: {sorted(expected - queued)}"


def test_a_job_kind_without_an_integration_is_caught(programs) -> None:
    """Every kind of job any stack registers with a queue label has a Kueue integration enabled."""
    kinds = {
        (r.inputs["apiVersion"], r.inputs["kind"])
        for p in programs.values()
        for r in _jobs(p)
        if QUEUE_LABEL in (r.inputs["metadata"].get("labels") or {})
    }
    assert kinds == set(INTEGRATION), kinds
    frameworks = set(
        kueue_configuration({"pods_ready_timeout_s": 1, "requeue_backoff_base_s": 1, "requeue_backoff_max_s": 1})[
            "integrations"
        ]["frameworks"]
    )
    assert {INTEGRATION[k] for k in kinds} <= frameworks
    assert set(FRAMEWORKS) == frameworks


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_set_gets_its_groups_flavor_and_fits_its_quota(programs, stack: str) -> None:
    """Kueue's rules over every queued job of every stack: each pod set fits exactly the flavor of the group it is
    placed on (else Kueue would put it on another group's quota, or never admit it), and the job at its size fits
    that flavor's quota."""
    program = programs[stack]
    kueue = _kueue_objects(program)
    flavors = {f["metadata"]["name"]: f for f in kueue["ResourceFlavor"]}
    (cq,) = kueue["ClusterQueue"]
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == list(RESOURCES)
    quota = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert set(quota) == set(flavors)
    checked = 0
    for r in _jobs(program):
        if QUEUE_LABEL not in (r.inputs["metadata"].get("labels") or {}):
            continue
        for name, count, pod in _pod_sets(r.inputs["kind"], r.inputs):
            fits = [f for f in flavors.values() if _flavor_fits(pod, f)]
            role = (pod.get("nodeSelector") or {}).get("eks-training/role")
            assert [f["metadata"]["name"] for f in fits] == [role], (
                stack,
                r.name,
                name,
                [f["metadata"]["name"] for f in fits],
            )
            requests: dict[str, int] = {}
            for c in pod["containers"]:
                for res, v in ((c.get("resources") or {}).get("requests") or {}).items():
                    requests[res] = requests.get(res, 0) + _quantity(v, res)
            for res, v in requests.items():
                assert res in RESOURCES, (
                    f"{r.name}: {res} is not covered by the ClusterQueue: Kueue would never admit it"
                )
                assert v * count <= _quantity(quota[role][res], res), (stack, r.name, res, v, count, quota[role][res])
            checked += 1
    assert checked


@pytest.mark.parametrize("stack", STACKS)
def test_quota_is_the_fleet_at_its_maximum_size(stack: str) -> None:
    """A worker group's quota is maxSize of the pods a node holds (one whole-node pod each), so Kueue never admits
    more of them than the group has nodes: a quota of the nodes' allocatable CPU would admit 5 pods on 4 m5.xlarge
    (each asks 80% of a node), whose pods, waiting for a job before them, would hold every node. The system group's
    is its nodes' allocatable (its jobs' pods share a node)."""
    _, plan = plan_stack(stack)
    admission = plan.admission
    assert admission is not None
    for g in plan.all_groups:
        f = admission.flavor(g.name)
        assert f.quota["nvidia.com/gpu"] == str(g.profile.gpus * g.max_size)
        assert f.quota["vpc.amazonaws.com/efa"] == str((g.efa.interfaces if g.efa else 0) * g.max_size)
        if g.name == "system":
            alloc = node_allocatable(g.profile.instance, g.efa)
            assert f.quota["cpu"] == f"{alloc.cpu_millis * g.max_size}m"
            assert f.quota["memory"] == f"{alloc.memory_mib * g.max_size}Mi"
        else:
            pod = g.placement()
            assert millicores_of(f.quota["cpu"]) // pod["cpu_millis"] == g.max_size
            assert mebibytes_of(f.quota["memory"]) // pod["memory_mib"] == g.max_size
        assert dict(f.node_labels) == dict(g.profile.labels)
        assert [dict(t) for t in f.node_taints] == [dict(t) for t in g.profile.taints]


def test_a_job_kueue_could_never_admit_fails_with_the_numbers() -> None:
    """The plan's own check against the quotas it derives (the loader's nodes <= maxSize rule makes it hold for every
    valid configuration; a quota derived wrong would break it): a group whose maximum is below the job's size."""
    _, plan = plan_stack("p5")
    gpu = plan.groups["gpu"]
    small = dataclasses.replace(
        plan,
        groups={**plan.groups, "gpu": dataclasses.replace(gpu, max_size=1)},
        jobs={
            n: dataclasses.replace(j, group=dataclasses.replace(j.group, max_size=1)) if j.group.name == "gpu" else j
            for n, j in plan.jobs.items()
        },
    )
    problems = never_admitted(small, admission_plan(small))
    assert any(
        "eks-training:jobs.train.nodes" in p
        and "16 nvidia.com/gpu" in p
        and "(1 x 8 = 8)" in p
        and "eks-training:nodeGroups.gpu.maxSize" in p
        for p in problems
    ), problems
    assert not never_admitted(plan, admission_plan(plan))


def test_a_waiting_job_ranks_below_the_jobs_it_waits_for() -> None:
    """The preemption that breaks the mpi-horovod deadlock: horovod (after nccl) ranks below nccl."""
    _, plan = plan_stack("mpi-horovod")
    a = plan.admission
    assert a is not None
    for name, job in plan.jobs.items():
        for before in job.after:
            assert a.priorities[a.job_priority[before]] > a.priorities[a.job_priority[name]], (before, name)


def test_the_chart_gets_the_configuration() -> None:
    program = run_program("mpi-horovod")
    release = next(
        r
        for r in program.registrations
        if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"].endswith("/kueue")
    )
    chart = HELM_CHARTS["kueue"]
    assert release.inputs["chart"] == f"{chart.repo}/{chart.chart}" and release.inputs["version"] == chart.version
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    _, plan = plan_stack("mpi-horovod")
    assert plan.admission is not None
    assert config["waitForPodsReady"]["timeout"] == f"{plan.admission.pods_ready_timeout_s}s"
    assert config["manageJobsWithoutQueueName"] is False
    image = release.inputs["values"]["controllerManager"]["manager"]["image"]
    # the chart's manager template writes repository:tag: the release's tag, pinned by its digest
    assert f"{image['repository']}:{image['tag']}" == CHART_IMAGES["kueue"].ref
    assert image["tag"].startswith(f"v{chart.version}@sha256:"), image
    with pytest.raises(ValueError, match="is not the chart 0.18.0's release"):
        chart_values(
            {"pods_ready_timeout_s": 1, "requeue_backoff_base_s": 1, "requeue_backoff_max_s": 1, "node_selector": {}},
            "0.18.0",
        )


def _effective_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """A pod's requests as the scheduler and Kueue count them: the larger of the sum of its containers' and each
    init container's, per resource
    (https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers)."""
    out: dict[str, int] = {}
    for c in pod["containers"]:
        for res, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[res] = out.get(res, 0) + _quantity(v, res)
    for c in pod.get("initContainers") or []:
        for res, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[res] = max(out.get(res, 0), _quantity(v, res))
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_the_plan_counts_every_pod_set_off_the_jobs_group(programs, stack: str) -> None:
    """A pod set Kueue admits against another flavor than the job's group (an MPIJob's launcher, on the system
    group) is counted by the plan's check of what can ever be admitted (:func:`job_and_launcher_requests`), with
    the requests the pods render: else a launcher a team's or the stack's system quota cannot hold would pass."""
    program = programs[stack]
    _, plan = plan_stack(stack)
    flavors = {f["metadata"]["name"]: f for f in _kueue_objects(program)["ResourceFlavor"]}
    for r in _jobs(program):
        name = r.inputs["metadata"]["name"]
        if QUEUE_LABEL not in (r.inputs["metadata"].get("labels") or {}) or name not in plan.jobs:
            continue
        job = plan.jobs[name]
        off_group: dict[str, dict[str, int]] = {}
        for _, count, pod in _pod_sets(r.inputs["kind"], r.inputs):
            (flavor,) = [f for f in flavors.values() if _flavor_fits(pod, f)]
            group = next(
                g.name for g in plan.all_groups if plan.admission.flavor(g.name).name == flavor["metadata"]["name"]
            )
            if group == job.group.name:
                continue
            mine = off_group.setdefault(group, {})
            for res, v in _effective_requests(pod).items():
                mine[res] = mine.get(res, 0) + v * count
        counted = {
            g: {res: v for res, v in asks.items() if v}
            for g, asks in job_and_launcher_requests(plan, job).items()
            if g != job.group.name
        }
        assert off_group == counted, (stack, name, off_group, counted)


def test_a_job_is_created_after_every_job_it_waits_for(programs) -> None:
    """Kueue admits by priority, then creation time. A job created before a job it waits for is admitted first and
    holds nodes until that one preempts it; one whose predecessor is never made (its health check failed, which stops
    ``pulumi up``) would wait in its init container holding nodes for ever. Awaited or not, each predecessor's Job
    is a dependency."""
    pairs = 0
    for stack in STACKS:
        program = programs[stack]
        _, plan = plan_stack(stack)
        jobs = {r.inputs["metadata"]["name"]: r for r in _jobs(program)}
        for name, job in plan.jobs.items():
            for before in job.after:
                pairs += 1
                assert program.depends_transitively(jobs[name], jobs[before].urn), (stack, name, before)
    assert pairs >= 5, pairs


def test_a_health_check_is_created_after_the_jobs_its_job_waits_for() -> None:
    """A job's health check is admitted on the job's nodes before the job: made before the jobs the job waits for,
    it could hold their nodes, or pass long before the job starts."""
    config = stack_config("g6")
    jobs = config["eks-training:jobs"]
    jobs["finetune"] = {**jobs["train"], "after": ["train"], "healthCheck": {}}
    program = run_program("g6", config=config)
    made = {r.inputs["metadata"]["name"]: r for r in _jobs(program)}
    assert program.depends_transitively(made["finetune-allreduce"], made["train"].urn)
    assert program.depends_transitively(made["finetune"], made["finetune-allreduce"].urn)
    assert not program.depends_transitively(made["train-allreduce"], made["train"].urn)


#: Jobs not ordered after Kueue: the FSx file system's volume-init Job (components/storage/fsx.py), made with the
#: storage in the environment, before the workloads install Kueue. It waits for the file system and its data
#: repository associations, so it usually comes long after Kueue is ready, but nothing orders it (a known gap).
BEFORE_KUEUE = {"fsx-volume-init"}


@pytest.mark.parametrize("stack", STACKS)
def test_every_job_is_created_once_kueues_webhook_serves(programs, stack: str) -> None:
    """Kueue's webhooks check every batch Job and MPIJob created, queued or not, outside kube-system and Kueue's
    namespace (``mjob.kb.io``, ``failurePolicy: Fail``, no object selector: the v0.19.1 chart's
    templates/webhook/manifests.yaml), and refuse them while Kueue starts: a Job created then fails ``pulumi up``.
    Every Job is made after Kueue's release, which is atomic: Helm returns once Kueue's pod, and so its webhook
    server, is ready."""
    program = programs[stack]
    queue = next(
        r.urn
        for r in program.registrations
        if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"].endswith("/kueue")
    )
    early = [
        r.name
        for r in _jobs(program)
        if not program.depends_transitively(r, queue) and not any(r.name.endswith(b) for b in BEFORE_KUEUE)
    ]
    assert early == [], f"{stack}: made while Kueue may still be starting: {early}"
