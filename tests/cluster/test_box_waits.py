"""What ``pulumi up`` waits for, on the box: the provider's own await code (``pulumi-await``, built from
pulumi-kubernetes) answers for every awaited object, each registration is awaited for its registered timeout; a job
object's on a clock 60 times faster than the wall's (ten minutes are ten seconds), as its pods' runs are scaled. The
rest (the device plugin's DaemonSet, the operator's Deployment) is ready in the machine's time and keeps the wall's
clock: on a busy machine it takes more than ten seconds.

The held-out stack ``awaited-mpi`` (tests/variants.py): ``prep`` holds the 2-node group first; the MPIJob ``nccl``,
which ``pulumi up`` awaits and ``train`` comes after, queues behind it; ``smoke``, with a 10 s deadline, queues longer
than its deadline.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time

import pytest

from components.workloads.job_objects import BATCH_JOB, JOB_OBJECTS, MPI_JOB
from stacks.box.awaits import Awaiter
from stacks.box.devices import Registrar
from stacks.box.rehearse import RehearsalError
from stacks.config import load_config
from stacks.plan import build_plan
from tests.cluster.support import _rehearsal, admitted
from tests.harness import PROJECT
from tests.variants import HELD_OUT, held_out_program
from tests.wait import patient

STACK = "awaited-mpi"
#: The box's clock against the wall's: a registration's timeout runs out 60 times sooner.
SCALE = 60.0
#: prep's run: longer than ten minutes on the scaled clock (the provider's default wait) and than smoke's deadline.
PREP_MS = 20_000


def _job_step(steps, name: str):
    return next(s for s in steps for d in s.docs if d["kind"] in JOB_OBJECTS and d["metadata"]["name"] == name)


def _after_prep(steps) -> None:
    """``nccl`` and ``smoke`` are created once Kueue admitted ``prep``: they queue behind it whatever order Kueue's
    job reconcilers create the Workloads in (their creation times tie within a second)."""
    for name in ("nccl", "smoke"):
        _job_step(steps, name).gate = admitted("prep")


def _box_for(binaries, tmp_path, mutate, **kwargs):
    plan = build_plan(load_config(PROJECT, STACK, HELD_OUT[STACK]))
    return _rehearsal(
        binaries, tmp_path, held_out_program(STACK).registrations, STACK, plan=plan, mutate=mutate, **kwargs
    )


def _conditions(obj) -> dict[str, dict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


@pytest.mark.parametrize("obj", list(JOB_OBJECTS.values()), ids=list(JOB_OBJECTS))
def test_the_provider_ends_the_wait_when_a_job_object_succeeded_or_failed(binaries, obj) -> None:
    """The program's waitFor expression, read by the provider's own code: met once the object succeeded or failed,
    not while it is created, suspended or running."""
    inputs = {
        "apiVersion": obj.api_version,
        "kind": obj.kind,
        "metadata": {"name": "j", "namespace": "t", "annotations": {"pulumi.com/waitFor": obj.finished}},
        "spec": {"template": {}},
    }

    def live(*conditions: tuple[str, str]) -> dict:
        status = {"startTime": "2026-11-28T10:00:00Z", "conditions": [{"type": t, "status": s} for t, s in conditions]}
        return {**inputs, "status": status}

    with Awaiter(binaries["pulumi-await"]) as awaiter:
        for state in ([], [("Suspended", "True")], [("Running", "True")], [(obj.failed, "False")]):
            answer = awaiter.answer(inputs, live(*state))
            assert answer.awaited and not answer.ready and not answer.error, (state, answer)
        for state in ([(obj.succeeded, "True")], [("FailureTarget", "True"), (obj.failed, "True")]):
            answer = awaiter.answer(inputs, live(*state))
            assert answer.awaited and answer.ready and not answer.error, (state, answer)
        skipped = {**inputs, "metadata": {**inputs["metadata"], "annotations": {"pulumi.com/skipAwait": "true"}}}
        assert awaiter.answer(skipped, live()).ready


def test_the_providers_job_awaiter_waits_on_a_job_its_pod_failure_policy_failed(binaries) -> None:
    """Why an awaited Job carries the finished expression too: without it the provider's Job awaiter ends the wait
    only for BackoffLimitExceeded and DeadlineExceeded; a Job failed by its pod failure policy is waited on until the
    timeout."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "t"}, "spec": {}}

    def failed(reason: str) -> dict:
        cond = {"type": "Failed", "status": "True", "reason": reason, "message": "m"}
        return {**job, "status": {"startTime": "2026-11-28T10:00:00Z", "failed": 1, "conditions": [cond]}}

    with Awaiter(binaries["pulumi-await"]) as awaiter:
        assert awaiter.answer(job, failed("BackoffLimitExceeded")).error == "[BackoffLimitExceeded] m"
        policy = awaiter.answer(job, failed("PodFailurePolicy"))
        assert not policy.ready and not policy.error, policy
        # the program's Job: its finished expression ends the wait on any failure (the program then reports it)
        meta = {**job["metadata"], "annotations": {"pulumi.com/waitFor": BATCH_JOB.finished}}
        assert awaiter.answer({**job, "metadata": meta}, {**failed("PodFailurePolicy"), "metadata": meta}).ready


def test_an_awaited_mpijob_queued_past_ten_minutes_and_a_job_queued_past_its_deadline_complete(
    binaries, tmp_path
) -> None:
    """``nccl`` queues behind ``prep`` longer than the provider's default wait (ten minutes, scaled) and is awaited to
    success for its own timeout; ``train``, created after it, completes. ``smoke`` queues longer than its 10 s deadline,
    which runs only once Kueue admits it, and completes within it."""
    box, plan, rehearsal = _box_for(
        binaries,
        tmp_path,
        _after_prep,
        time_scale=SCALE,
        run_ms={"prep": PREP_MS, "nccl": 2000, "smoke": 1000, "train": 1000},
    )
    try:
        with Registrar(box) as registrar:
            rehearsal.run(binaries, timeout_s=patient(240))
        assert registrar.error is None, registrar.error
        smoke = box.get("job", "smoke", "-n", "training")
    finally:
        rehearsal.stop_operator()
        box.down()
    jobs, timeline = rehearsal.jobs, rehearsal.timeline()
    assert {n: jobs[n]["outcome"] for n in plan.jobs} == {
        "prep": "Complete",
        "nccl": "Succeeded",
        "smoke": "Complete",
        "train": "Complete",
    }, timeline
    nccl_step, smoke_step = _job_step(rehearsal.steps, "nccl"), _job_step(rehearsal.steps, "smoke")
    # nccl waited in the queue (created, not started) past the provider's default of ten minutes on this clock
    queued = jobs["nccl"]["started"] - (rehearsal.progress.applied_at[nccl_step.urn] - rehearsal.start)
    assert queued > 600 / SCALE, timeline
    assert nccl_step.timeout_s / SCALE > queued, (nccl_step.timeout_s, timeline)
    # train was created (its step applied) only once nccl had succeeded
    train_step = _job_step(rehearsal.steps, "train")
    assert rehearsal.progress.applied_at[train_step.urn] - rehearsal.start >= jobs["nccl"]["finished"] - 1, timeline
    # smoke queued longer than its deadline, then ran within it
    deadline = smoke["spec"]["activeDeadlineSeconds"]
    assert deadline == 10, smoke["spec"]
    waited = jobs["smoke"]["started"] - (rehearsal.progress.applied_at[smoke_step.urn] - rehearsal.start)
    assert waited > deadline, timeline
    assert _conditions(smoke)["Complete"]["status"] == "True", smoke["status"]


def test_the_providers_default_wait_fails_the_mpijob_queued_past_ten_minutes(binaries, tmp_path) -> None:
    """Control: the MPIJob registered as before (no custom timeouts: the provider's ten minutes) makes the rehearsal
    stop, as ``pulumi up`` did, while nccl is still queued."""

    def default_wait(steps) -> None:
        _after_prep(steps)
        _job_step(steps, "nccl").timeout_s = 600.0

    box, _plan, rehearsal = _box_for(
        binaries, tmp_path, default_wait, time_scale=SCALE, run_ms={"prep": PREP_MS, "nccl": 2000, "smoke": 1000}
    )
    try:
        with Registrar(box):
            with pytest.raises(RehearsalError) as err:
                rehearsal.run(binaries, timeout_s=patient(240))
    finally:
        rehearsal.stop_operator()
        box.down()
    assert "eks-training-awaited-mpi-nccl-mpijob (timeout 600 s, 10.0 s on the box's clock)" in str(err.value), str(
        err.value
    )
    assert "outcome" not in rehearsal.jobs.get("nccl", {}), rehearsal.timeline()


def test_a_failed_awaited_mpijob_ends_the_wait_at_once_with_its_reason(binaries, tmp_path) -> None:
    """nccl's launcher outlives the MPIJob's deadline (5 s here): the MPI Operator marks it Failed with the launcher
    Job's reason, the provider's wait ends there and the program stops with the reason, long before the timeout;
    train is never created."""

    def short_deadline(steps) -> None:
        doc = next(d for d in _job_step(steps, "nccl").docs if d["kind"] == MPI_JOB.kind)
        doc["spec"]["runPolicy"]["activeDeadlineSeconds"] = 5

    box, _plan, rehearsal = _box_for(
        binaries, tmp_path, short_deadline, time_scale=SCALE, run_ms={"prep": 1000, "nccl": 60_000, "smoke": 1000}
    )
    try:
        with Registrar(box):
            with pytest.raises(RehearsalError) as err:
                rehearsal.run(binaries, timeout_s=patient(240))
            stopped = time.time()
            mpijob = box.get("mpijobs", "nccl", "-n", "training")
    finally:
        rehearsal.stop_operator()
        box.down()
    message = str(err.value)
    assert "MPIJob nccl failed: DeadlineExceeded" in message, message
    # the report gives the outcome and its reason, though the wait ended before a pass recorded it
    assert (rehearsal.jobs["nccl"]["outcome"], rehearsal.jobs["nccl"].get("reason")) == ("Failed", "DeadlineExceeded")
    failed = _conditions(mpijob)["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "DeadlineExceeded", mpijob["status"]
    # ended within seconds of the failure (the condition's stamp has whole seconds), not at the 26-minute timeout
    stamp = datetime.datetime.fromisoformat(failed["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
    assert stopped - stamp < 10, (stopped - stamp, rehearsal.timeline())
    train_step = _job_step(rehearsal.steps, "train")
    assert train_step.urn not in rehearsal.progress.applied, rehearsal.timeline()


def test_the_await_command_answers_each_line(binaries) -> None:
    """The protocol the rehearsal speaks: one JSON request per line, one answer per line."""
    req = {"inputs": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "live": {}}
    req["live"] = req["inputs"]
    out = subprocess.run(
        [str(binaries["pulumi-await"])],
        input=json.dumps(req) + "\n" + json.dumps(req) + "\n",
        capture_output=True,
        text=True,
        timeout=patient(30),
        check=True,
    ).stdout.splitlines()
    assert [json.loads(line) for line in out] == [{"awaited": False, "ready": True}] * 2
