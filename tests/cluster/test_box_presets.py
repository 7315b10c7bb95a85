"""Every preset's jobs run through, in order, on the box's real scheduler, controllers, MPI Operator and Kueue."""

from __future__ import annotations

import pytest

from components.scheduling import NODE_ROLE_LABEL, SYSTEM_ROLE
from components.workloads.job_objects import MPI_JOB
from stacks.box.devices import Registrar
from stacks.box.rehearse import peer_pods, pod_templates, predecessors
from stacks.box.timeline import Recorder, report
from stacks.config import load_config
from stacks.plan import build_plan
from stacks.plan.queues import QUEUE_LABEL
from tests.cluster.support import STACKS, _has_mpijobs, _rehearsal, assert_report_covers
from tests.harness import PROJECT
from tests.variants import HELD_OUT, held_out_program, stress_config, stress_program
from tests.wait import patient


@pytest.mark.parametrize("stack", STACKS)
def test_every_job_runs_through_in_order(binaries, registrations_of, tmp_path, stack: str) -> None:
    """Every object applied in the stack's dependency order (strict server-side apply at the default minor), every
    job's pods scheduled on its group's nodes (GPUs and EFA devices only where their device plugins run), MPI jobs
    through the real MPI Operator, the EFA presets' jobs placed topology-aware on GPU groups scaling from zero through
    Kueue's ProvisioningRequest check, and every job completed, a job that waits for others only after they did."""
    _runs_through_in_order(binaries, tmp_path, registrations_of(stack), stack)


#: The held-out stacks (tests/variants.py) the box runs: the one that found the box's nodes lacked the zone-ID label
#: (a group pinned by zone ID, Kueue's topology-aware placement); the others' objects and labels are checked in the
#: mock tier (tests/mock/test_k8s_rules.py, test_k8s_schema.py, test_box_nodes.py). About 25 s.
HELD_OUT_ON_THE_BOX = ["zone-id-topology"]


@pytest.mark.parametrize("stack", HELD_OUT_ON_THE_BOX)
def test_a_held_out_stack_runs_through_in_order(binaries, tmp_path, stack: str) -> None:
    """The same run-through for a stack no preset resembles."""
    program = held_out_program(stack)
    plan = build_plan(load_config(PROJECT, stack, HELD_OUT[stack]))
    _runs_through_in_order(binaries, tmp_path, program.registrations, stack, plan)


def test_an_mpi_job_with_code_runs_through_in_order(binaries, tmp_path) -> None:
    """The MPI preset's stress variant, whose first job (an MPI job) has a code folder: its workers download the code
    too (the job's service account, an init container, restartPolicy OnFailure), which the apiserver and MPI Operator
    v0.8.0 take; tests/mock/test_job_code_program.py checks the templates of every stack."""
    stack = "mpi-horovod"
    program = stress_program(stack)
    workers = [r.inputs["spec"]["mpiReplicaSpecs"]["Worker"] for r in program.of_type(MPI_JOB.type_token)]
    assert [w["restartPolicy"] for w in workers if w["template"]["spec"].get("initContainers")] == ["OnFailure"]
    plan = build_plan(load_config(PROJECT, stack, stress_config(stack)))
    _runs_through_in_order(binaries, tmp_path, program.registrations, stack, plan)


def _labels(doc: dict) -> dict:
    return doc["metadata"].get("labels") or {}


def _runs_through_in_order(binaries, tmp_path, registrations, stack: str, plan=None) -> None:
    # an MPI job's workers start 2 s after they are scheduled, as pulls and sshd take time: its launcher waits them out
    box, plan, rehearsal = _rehearsal(binaries, tmp_path, registrations, stack, plan=plan, worker_start_ms=2000)
    pods_by_job: dict[str, list[dict]] = {}
    completed: dict[str, str] = {}
    recorder = Recorder(box, rehearsal.start)
    try:
        with Registrar(box) as registrar, recorder:
            rehearsal.run(binaries, timeout_s=patient(180))
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
            controllers = [
                p
                for p in box.get("pods", "-A")["items"]
                if any(o["kind"] == "ReplicaSet" for o in p["metadata"].get("ownerReferences") or [])
                and not p["metadata"].get("deletionTimestamp")
            ]
        assert registrar.error is None, registrar.error
    finally:
        rehearsal.stop_operator()
        box.down()
    # Every Deployment's pods (etcd, TensorBoard, the MPI Operator's: its release manifest's, moved by a patch) run on
    # system nodes
    deployments = {
        (d["metadata"]["namespace"], d["metadata"]["name"])
        for s in rehearsal.steps
        for d in s.docs
        if d["kind"] == "Deployment"
    }
    placed = {}
    for pod in controllers:
        owner = next(o["name"] for o in pod["metadata"]["ownerReferences"] if o["kind"] == "ReplicaSet")
        placed[(pod["metadata"]["namespace"], owner.rpartition("-")[0])] = pod["spec"]["nodeName"]
    assert set(placed) == deployments, (placed, deployments)
    assert any(name == "mpi-operator" for _ns, name in deployments) == _has_mpijobs(rehearsal), deployments
    for (ns, name), node in placed.items():
        assert nodes[node]["metadata"]["labels"][NODE_ROLE_LABEL] == SYSTEM_ROLE, (ns, name, node)
    # A topology-aware group that autoscales (the EFA presets' GPU groups) got its nodes only through Kueue's
    # ProvisioningRequests, each answered by the autoscaler's stand-in; no other preset makes any
    provisioned = plan.admission.provisioning if plan.admission else None
    decisions = rehearsal.provisioner.decisions if rehearsal.provisioner else []
    if provisioned:
        assert decisions and all(d.status == "True" for d in decisions), decisions
        assert any(d.added for d in decisions), decisions
    else:
        assert not decisions, decisions
    jobs = rehearsal.jobs
    assert set(plan.jobs) <= set(jobs), f"jobs of the plan that never ran: {set(plan.jobs) - set(jobs)}"
    assert_report_covers(report(rehearsal, recorder), rehearsal, recorder)  # what python -m stacks.rehearse prints
    # The report's recorder saw Kueue admit every job created in a queue.
    queued = [d["metadata"]["name"] for s in rehearsal.steps for d in s.docs if QUEUE_LABEL in _labels(d)]
    assert bool(queued) == bool(plan.admission), queued
    for name in queued:
        assert "admitted" in {state for _t, state in recorder.workloads.get(name, [])}, (name, recorder.workloads)
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
    # An MPI launcher (its wait-for-workers init container) started only once every worker of its job was ready: MPI
    # Operator v0.8.0 starts a queued job's launcher with its workers (kubeflow/mpi-operator#615).
    by_name = {p["metadata"]["name"]: p for p in rehearsal.pods.values()}
    launchers = 0
    for step in rehearsal.steps:
        for doc in step.docs:
            for template in pod_templates(doc):
                peers = peer_pods(template)
                if not peers:
                    continue
                launchers += 1
                started = [p for p in pods_by_job[doc["metadata"]["name"]] if p["metadata"]["name"] not in peers]
                assert started and all(name in by_name for name in peers), (peers, sorted(by_name))
                ready = max(by_name[name]["status"]["startTime"] for name in peers)  # kwok: started and ready at once
                assert min(p["status"]["startTime"] for p in started) >= ready, rehearsal.timeline()
    assert launchers == sum(1 for j in plan.jobs.values() if j.kind == "mpi"), rehearsal.timeline()
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
