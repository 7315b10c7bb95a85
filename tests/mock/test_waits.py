"""What ``pulumi up`` waits for, over everything every stack registers: each job object it awaits has a timeout of
its deadline plus the time it may queue (:mod:`components.workloads.waits`), an awaited MPIJob's wait ends when it
succeeded or failed, and a failed one stops the program with its reason.

pulumi-kubernetes waits ten minutes for a resource without custom timeouts
(https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/await/await.go): an MPIJob awaited so failed
``pulumi up`` while it still queued or ran.
"""

import copy
import math
from typing import Any, Iterator, Mapping

import pytest

from components.conventions import check_job_name
from components.workloads.job_objects import JOB_OBJECTS, MPI_JOB
from components.workloads.spec import DEFAULT_STOP_GRACE_S
from components.workloads.waits import DEFAULT_QUEUE_TIMEOUT_HOURS, FAILURE_REPORT_S, KUBERNETES_GRACE_S
from stacks import mocked
from stacks.box.awaits import go_duration_s
from tests.harness import PROJECT, Program, Registration, run_program, stack_config, stack_names
from tests.variants import HELD_OUT, held_out_program, stress_config, stress_program

STACKS = stack_names()
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WAIT_FOR = "pulumi.com/waitFor"
SKIP = "pulumi.com/skipAwait"


def _queue_hours(config: Mapping[str, Any]) -> dict[str, float]:
    """Kubernetes job name (the object's name) -> its job's queueTimeoutHours (a job's and its health check's)."""
    jobs = dict(config.get(f"{PROJECT}:jobs") or {})
    jobs.update(((config.get(f"{PROJECT}:benchmark") or {}).get("experiments")) or {})
    out: dict[str, float] = {}
    for name, job in jobs.items():
        hours = float((job or {}).get("queueTimeoutHours", DEFAULT_QUEUE_TIMEOUT_HOURS))
        out[name] = out[check_job_name(name)] = hours
    return out


def _deadline_and_grace(r: Registration) -> tuple[int, int]:
    spec = r.inputs["spec"]
    if r.inputs["kind"] == MPI_JOB.kind:  # the launcher's grace: its Job is what the MPI Operator fails
        pod = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        return int(spec["runPolicy"]["activeDeadlineSeconds"]), int(
            pod.get("terminationGracePeriodSeconds", KUBERNETES_GRACE_S)
        )
    pod = spec["template"]["spec"]
    return int(spec["activeDeadlineSeconds"]), int(pod.get("terminationGracePeriodSeconds", KUBERNETES_GRACE_S))


def wait_problems(program: Program, config: Mapping[str, Any]) -> Iterator[str]:
    """Every awaited job object without the timeout its deadline and queue time give, or whose wait does not end
    when it failed; any object awaited through ``waitFor`` without a timeout of its own."""
    hours = _queue_hours(config)
    for r in program.registrations:
        if not r.type.startswith("kubernetes:") or not isinstance(r.inputs.get("metadata"), dict):
            continue
        meta = r.inputs["metadata"]
        annotations = meta.get("annotations") or {}
        obj = JOB_OBJECTS.get(str(r.inputs.get("kind")))
        if WAIT_FOR in annotations and not r.custom_timeouts.get("create"):
            yield f"{r.name}: awaited through {WAIT_FOR} with the provider's default of 10 minutes"
        if obj is None or r.inputs.get("apiVersion") != obj.api_version or annotations.get(SKIP) == "true":
            continue
        if annotations.get(WAIT_FOR) != obj.finished:
            # the provider's Job awaiter ends the wait only for BackoffLimitExceeded and DeadlineExceeded
            yield f"{r.name}: an awaited {obj.kind} waits for {annotations.get(WAIT_FOR)!r}, not for {obj.finished!r}"
        deadline, grace = _deadline_and_grace(r)
        labels = meta.get("labels") or {}
        queued = QUEUE_LABEL in labels
        queue_s = int(hours.get(str(meta.get("name")), DEFAULT_QUEUE_TIMEOUT_HOURS) * 3600) if queued else 0
        want = math.ceil((queue_s + deadline + grace + FAILURE_REPORT_S) / 60) * 60
        for op in ("create", "update"):
            got = r.custom_timeouts.get(op)
            if got is None or go_duration_s(got) != want:
                yield (
                    f"{r.name}: {op} timeout {got}, not {want // 60}m (queue {queue_s} s + deadline {deadline} s + "
                    f"grace {grace} s + {FAILURE_REPORT_S} s)"
                )


@pytest.mark.parametrize("variant", ["shipped", "stress"])
@pytest.mark.parametrize("stack", STACKS)
def test_every_awaited_job_waits_its_deadline_and_queue_time(program_for: Any, stack: str, variant: str) -> None:
    program = program_for(stack, False) if variant == "shipped" else stress_program(stack)
    config = stack_config(stack) if variant == "shipped" else stress_config(stack)
    found = list(wait_problems(program, config))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("stack", sorted(HELD_OUT))
def test_every_awaited_job_of_a_held_out_stack_waits_its_deadline_and_queue_time(stack: str) -> None:
    found = list(wait_problems(held_out_program(stack), HELD_OUT[stack]))
    assert not found, "\n".join(found)


def test_the_held_out_stack_awaits_an_mpijob_a_job_after_it_and_a_short_deadline() -> None:
    """The held-out stack the cluster tier queues (awaited-mpi): its MPIJob is awaited for its 24 h deadline and its
    2 h in the queue; the smoke test's 10 s deadline gets its hour in the queue and its pods' 60 s grace."""
    program = held_out_program("awaited-mpi")
    timeouts = {
        r.inputs["metadata"]["name"]: go_duration_s(r.custom_timeouts["create"])
        for r in program.registrations
        if r.inputs.get("kind") in JOB_OBJECTS and isinstance(r.inputs.get("metadata"), dict)
    }
    assert timeouts["nccl"] == math.ceil((2 * 3600 + 86400 + DEFAULT_STOP_GRACE_S + 60) / 60) * 60
    assert timeouts["smoke"] == math.ceil((3600 + 10 + DEFAULT_STOP_GRACE_S + 60) / 60) * 60


def test_the_rule_finds_an_mpijob_awaited_for_the_providers_default() -> None:
    """Control: the MPIJob as it was registered before (waitFor Succeeded, no custom timeouts) is reported."""
    program = held_out_program("awaited-mpi")
    mpijob = next(r for r in program.registrations if r.inputs.get("kind") == "MPIJob")
    before = copy.deepcopy(mpijob)
    before.inputs["metadata"]["annotations"][WAIT_FOR] = "condition=Succeeded"
    before.custom_timeouts = {}
    found = list(wait_problems(Program("x", False, [before], {}, [], None, [], frozenset()), HELD_OUT["awaited-mpi"]))
    assert any("default of 10 minutes" in f for f in found), found
    assert any("not for" in f for f in found), found
    assert any("create timeout None" in f for f in found), found


def test_a_job_failed_by_its_pod_failure_policy_stops_pulumi_up_with_its_reason(monkeypatch) -> None:
    """The smoke test fails at once (its pod failure policy's FailJob rule): the provider's Job awaiter would wait
    for it until the timeout; the finished condition ends the wait and the program stops with the reason."""
    failed = {
        "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "PodFailurePolicy"},
            {
                "type": "Failed",
                "status": "True",
                "reason": "PodFailurePolicy",
                "message": "Container worker for pod training/smoke-0-x failed with exit code 2 matching FailJob rule",
            },
        ]
    }
    monkeypatch.setitem(mocked.JOB_STATUS, "smoke", failed)
    program = run_program("awaited-mpi", config=copy.deepcopy(HELD_OUT["awaited-mpi"]), expect_error=True)
    assert str(program.error).startswith(
        "Job smoke failed: PodFailurePolicy: Container worker for pod training/smoke-0-x failed with exit code 2 "
        "matching FailJob rule. Its pods: kubectl get pods -n training -l batch.kubernetes.io/job-name=smoke; "
    ), repr(program.error)
    assert str(program.error).endswith(
        "run it again: pulumi up --replace "
        "'urn:pulumi:awaited-mpi::eks-training::eks-training:index:CommandJob$kubernetes:batch/v1:Job::"
        "eks-training-awaited-mpi-smoke-job'"
    ), repr(program.error)


def test_a_failed_awaited_mpijob_stops_pulumi_up_with_its_reason(monkeypatch) -> None:
    """The provider ends the wait when the MPIJob failed and returns it; the program stops there with the failed
    condition's reason and message, and the training after it is never registered."""
    failed = {
        "conditions": [
            {"type": "Created", "status": "True"},
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded/Error",
                "message": "Job has reached the specified backoff limit: mpirun exited 1",
            },
        ]
    }
    monkeypatch.setitem(mocked.JOB_STATUS, "nccl", failed)
    program = run_program("awaited-mpi", config=copy.deepcopy(HELD_OUT["awaited-mpi"]), expect_error=True)
    assert program.error is not None
    assert str(program.error).startswith(
        "MPIJob nccl failed: BackoffLimitExceeded/Error: Job has reached the specified backoff limit: mpirun exited 1. "
        "Its pods: kubectl get pods -n training -l training.kubeflow.org/job-name=nccl;"
    ), repr(program.error)
    names = {r.inputs["metadata"].get("name") for r in program.registrations if r.type == "kubernetes:batch/v1:Job"}
    assert "train" not in names, names


def test_a_job_pulumi_up_does_not_wait_for_is_not_judged_by_its_status(monkeypatch) -> None:
    """prep is not awaited: a Failed status a refresh stored does not stop `pulumi up` (its Job's failure is the
    cluster's business, and the jobs after it see it in their wait)."""
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
    monkeypatch.setitem(mocked.JOB_STATUS, "prep", failed)
    program = run_program("awaited-mpi", config=copy.deepcopy(HELD_OUT["awaited-mpi"]))
    assert program.error is None, program.error


def test_a_succeeded_awaited_mpijob_lets_the_job_after_it_be_created() -> None:
    program = held_out_program("awaited-mpi")
    assert program.error is None
    train = next(
        r
        for r in program.registrations
        if r.type == "kubernetes:batch/v1:Job" and r.inputs["metadata"]["name"] == "train"
    )
    mpijob = next(r for r in program.registrations if r.inputs.get("kind") == "MPIJob")
    # a resource dependency: the SDK registers train once nccl's awaited outputs resolved; not an input's, so a
    # replaced nccl does not replace train (tests/mock/test_replacement_cascade.py)
    assert mpijob.urn in train.dependencies, train.dependencies
    assert not any(mpijob.urn in urns for urns in train.property_dependencies.values()), train.property_dependencies
