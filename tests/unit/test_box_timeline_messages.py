"""The rehearsal's "what waited, and why" phrases (stacks/box/timeline.py) for states the held-out stacks showed: a
pod held by its wait-for-jobs or wait-for-workers init container before the scheduler binds it (the report said
``on None``), and a Workload Kueue has not evaluated yet (``QuotaReserved=Unknown (Pending: )``)."""

import pytest

from stacks.box.rehearse import HELD
from stacks.box.timeline import pending_reason, workload_state


def _held(node: str | None) -> dict:
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"annotations": {HELD: "jobs/a,jobs/b"}}, "spec": spec, "status": {}}


def test_a_held_pod_names_its_node_or_says_it_has_none_yet() -> None:
    assert pending_reason(_held(None)) == "not scheduled yet, its wait-for-jobs init container waits for jobs/a, jobs/b"
    assert pending_reason(_held("gpu-0")) == "on gpu-0, its wait-for-jobs init container waits for jobs/a, jobs/b"


def test_a_held_launcher_names_the_workers_it_waits_for() -> None:
    pod = {"metadata": {"annotations": {HELD: "mpijobs/a,pods/b-worker-0,pods/b-worker-1"}}, "spec": {}, "status": {}}
    assert pending_reason(pod) == (
        "not scheduled yet, its wait-for-jobs init container waits for mpijobs/a; "
        "its wait-for-workers init container waits for b-worker-0, b-worker-1"
    )


def test_a_workload_kueue_has_not_looked_at_says_so() -> None:
    assert workload_state({"status": {}}) == "queued, not yet evaluated by Kueue"
    waiting = {
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient quota"}
            ]
        }
    }
    assert workload_state(waiting) == "queued, not admitted: QuotaReserved=False (Pending: insufficient quota)"


def test_a_stack_at_another_kubernetes_version_is_told_which_the_box_runs() -> None:
    """A stack at 1.32 was rehearsed on the box's default minor without a word about it."""
    from components.catalog.platform import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS
    from stacks.box.rehearse_cli import version_note

    oldest = SUPPORTED_KUBERNETES_VERSIONS[0]
    assert version_note({}) is None
    assert version_note({"eks-training:cluster": {"kubernetesVersion": DEFAULT_KUBERNETES_VERSION}}) is None
    note = version_note({"eks-training:cluster": {"kubernetesVersion": oldest}})
    assert note is not None and f"Kubernetes {DEFAULT_KUBERNETES_VERSION}" in note and f"runs {oldest}" in note


def test_a_job_that_ran_between_two_passes_gets_its_controllers_start(monkeypatch, tmp_path) -> None:
    """A short MPIJob started and succeeded between two of the rehearsal's passes: the report must not say
    ``started -``. Its start is then the controller's ``status.startTime``, within the rehearsal."""
    import datetime

    from stacks.box import jobs, rehearse

    class Box:
        home = tmp_path

        def get(self, kind: str, *args: str) -> dict:
            return {"items": [job] if kind == "mpijobs" else []}

    monkeypatch.setattr(jobs, "crd_established", lambda box, crd: True)
    run = rehearse.Rehearsal(Box(), [])
    stamp = datetime.datetime.fromtimestamp(run.start_wall + 2, datetime.timezone.utc)
    job = {
        "kind": "MPIJob",
        "metadata": {"name": "nccl"},
        "status": {
            "startTime": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "conditions": [{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}],
        },
    }
    run.start -= 5  # the pass comes 5 s after the start
    jobs.watch_jobs(run.box, run.jobs, run.start, run.start_wall, run.note)
    rec = run.jobs["nccl"]
    assert rec["outcome"] == "Succeeded" and rec["finished"] >= 5
    assert 0 <= rec["started"] <= rec["finished"] and abs(rec["started"] - 2) <= 1  # whole seconds
    job["status"].pop("startTime")
    run.jobs.clear()
    jobs.watch_jobs(run.box, run.jobs, run.start, run.start_wall, run.note)
    assert run.jobs["nccl"]["started"] == run.jobs["nccl"]["finished"]  # no stamp: took 0 s, never "-"


def test_a_wait_for_another_boxs_lock_moves_only_the_clocks_running_then(tmp_path) -> None:
    """Another box holding the MPI Operator's lock for a minute moves only the clocks of the steps waiting then;
    a later step keeps its own timeout (else the default-wait control in tests/cluster/test_box_waits.py cannot fail
    under xdist)."""
    from stacks.box import rehearse

    class Box:
        home = tmp_path

    waiting = rehearse.Step("urn:waiting", "waiting", [], timeout_s=10.0)
    later = rehearse.Step("urn:later", "later", [], timeout_s=10.0)
    run = rehearse.Rehearsal(Box(), [waiting, later])
    start = rehearse.time.monotonic()
    progress = run.progress
    progress.applied[waiting.urn], progress.waits_from[waiting.urn] = waiting, start - 9.0
    progress.host_waited(60.0)
    progress.seen_waiting[waiting.urn] = start
    assert progress.late() == []
    progress.applied[later.urn], progress.waits_from[later.urn] = later, start - 11.0
    progress.seen_waiting[later.urn] = start
    assert progress.late() == ["later (timeout 10 s)"]
    assert progress.host_wait_s == 60.0


def test_the_boxs_own_work_is_not_charged_to_the_steps_waiting(monkeypatch, tmp_path) -> None:
    """Starting Kueue can take 11 s on a busy machine, 11 minutes on a clock 60 times faster: applying and
    starting Kueue are the box's work, not charged to the job objects waiting then; a step is judged by when it was
    last seen waiting, not by when a long pass ends. The scaled clock is a job object's (its pods' runs are scaled);
    another object is ready in the machine's time and awaited on the wall's."""
    from stacks.box import operators, rehearse

    class Box:
        home = tmp_path

    class SlowKueue:
        process = None

        def __init__(self, *args, **kwargs) -> None:
            pass

        def start(self) -> float:
            clock[0] += 11.4
            return 11.4

    clock = [1000.0]
    monkeypatch.setattr(rehearse.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(operators, "Kueue", SlowKueue)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "t"}}
    queued = rehearse.Step("urn:queued", "queued", [job], timeout_s=600.0)
    config_map = {"kind": "ConfigMap", "metadata": {"name": "c"}}
    applied = rehearse.Step("urn:applied", "applied", [config_map], timeout_s=600.0)
    run = rehearse.Rehearsal(Box(), [queued, applied], time_scale=60.0)
    progress = run.progress
    progress.applied[queued.urn], progress.waits_from[queued.urn] = queued, clock[0]

    def slow_apply(box, steps, progress, *args) -> None:
        clock[0] += 18.0
        for step in steps:
            progress.applied[step.urn], progress.waits_from[step.urn] = step, clock[0]

    monkeypatch.setattr(rehearse, "apply_steps", slow_apply)
    run._apply([applied])
    run.operators.start_kueue({"kueue": tmp_path / "kueue"}, rehearse.Step("urn:kueue", "kueue", [], kueue={}))
    progress.seen_waiting = {queued.urn: clock[0], applied.urn: clock[0]}
    assert progress.late() == [], (progress.waits_from, clock)
    assert progress.host_wait_s == 18.0 + 11.4
    # the step applied by the slow apply is charged only for what came after it (Kueue's start, the box's too)
    assert progress.waits_from[applied.urn] == 1018.0 + 11.4
    # a step past its timeout when last seen waiting is late; one seen only before its timeout ran out is not yet
    progress.seen_waiting[queued.urn] = progress.waits_from[queued.urn] + 10.5
    assert progress.late() == ["queued (timeout 600 s, 10.0 s on the box's clock)"]
    clock[0] += 100.0
    progress.seen_waiting[queued.urn] = progress.waits_from[queued.urn] + 9.5
    assert progress.late() == []
    # the ConfigMap's step is on the wall's clock: late only past its 600 s
    progress.seen_waiting[applied.urn] = progress.waits_from[applied.urn] + 599.0
    assert progress.late() == []
    progress.seen_waiting[applied.urn] = progress.waits_from[applied.urn] + 601.0
    assert progress.late() == ["applied (timeout 600 s)"]


def test_a_job_in_its_back_off_is_named_with_the_failures_its_policy_ignored() -> None:
    """The Job controller's back-off counts every failed pod, those the Job's podFailurePolicy ignores too (exit 69):
    a rehearsal that waits on one names the back-off and says how many failures counted, where before it named
    nothing. A failed pod the controller has not handled yet (its finalizer on) is not counted either way."""
    from stacks.box.steps import Step
    from stacks.box.waiting import JOB_TRACKING, retrying

    def pod(name: str, finalizers=()) -> dict:
        labels = {"batch.kubernetes.io/job-name": "train"}
        return {
            "metadata": {"name": name, "uid": name, "labels": labels, "finalizers": list(finalizers)},
            "status": {"phase": "Failed"},
        }

    class Box:
        def __init__(self, pods: list, status: dict) -> None:
            self.pods, self.status = pods, status

        def get(self, kind: str, *args: str) -> dict:
            if kind == "pods":
                return {"items": self.pods}
            return {"items": [{"metadata": {"name": "train"}, "spec": {"backoffLimit": 3}, "status": self.status}]}

    step = Step("urn:train", "train", [{"kind": "Job", "metadata": {"name": "train", "namespace": "training"}}])
    applied = {"train": step}
    ignored = retrying(Box([pod("a"), pod("b")], {}), applied)
    assert ignored == [
        "training/train: 2 pod(s) failed, 0 of them counted against the 3 the Job allows (its podFailurePolicy "
        "ignores the others); the next pods start after the Job controller's back-off, which counts every failed pod "
        "(10 s, doubling to 10 min): a longer --timeout shows the outcome"
    ]
    counted = retrying(Box([pod("a")], {"failed": 1}), applied)
    assert counted[0].startswith("training/train: 1 pod(s) failed, of the 3 the Job allows; the next starts after")
    assert retrying(Box([pod("a", [JOB_TRACKING])], {}), applied) == []
    assert retrying(Box([pod("a")], {"active": 1}), applied) == []


def test_a_failed_job_is_reported_with_its_reason(monkeypatch, tmp_path) -> None:
    """A Job ended by its deadline is reported as ``Failed (DeadlineExceeded)`` (the reason of its Failed condition),
    not a bare ``Failed``; a succeeded one is not given its condition's reason."""
    from stacks.box import jobs, rehearse
    from stacks.box.timeline import Recorder, report

    class Box:
        home = tmp_path

        def get(self, kind: str, *args: str) -> dict:
            return {"items": listed if kind == "jobs" else []}

    def job(name: str, kind: str, reason: str) -> dict:
        return {
            "kind": "Job",
            "metadata": {"name": name},
            "status": {"conditions": [{"type": kind, "status": "True", "reason": reason}]},
        }

    listed = [job("train", "Failed", "DeadlineExceeded"), job("stage", "Complete", "CompletionsReached")]
    monkeypatch.setattr(jobs, "crd_established", lambda box, crd: False)  # no MPIJob CRD
    run = rehearse.Rehearsal(Box(), [])
    jobs.watch_jobs(run.box, run.jobs, run.start, run.start_wall, run.note)
    assert run.jobs["train"]["outcome"] == "Failed" and run.jobs["train"]["reason"] == "DeadlineExceeded"
    assert "reason" not in run.jobs["stage"]
    run.jobs["later"] = {"kind": "Job"}
    text = report(run, Recorder(run.box, run.start))
    assert "  train (Job): Failed (DeadlineExceeded), started" in text, text
    assert "  stage (Job): Complete, started" in text, text
    assert "  later (Job): not finished, started -" in text, text
    assert any(e.text == "Job train: Failed (DeadlineExceeded)" for e in run.events), run.events


def test_the_run_records_the_failure_that_stopped_it(monkeypatch, tmp_path) -> None:
    """The provider's wait reports a failed awaited job before a pass records it (``is_ready`` raises first): the
    run looks at the jobs once more as it ends, so the report says ``Failed``, not ``not finished``."""
    from stacks.box import jobs, rehearse

    class Box:
        home = tmp_path

        def get(self, kind: str, *args: str) -> dict:
            failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
            return {"items": [{"kind": "Job", "metadata": {"name": "nccl"}, "status": {"conditions": [failed]}}]}

    class Awaiter:
        def close(self) -> None:
            pass

    def stopped(*args, **kwargs) -> None:
        raise rehearse.RehearsalError("nccl failed (pulumi up stops here)")

    class Changes:
        def __init__(self, *args) -> None:
            pass

        open = close = lambda self: None

    monkeypatch.setattr(jobs, "crd_established", lambda box, crd: False)
    monkeypatch.setattr(rehearse, "Changes", Changes)
    monkeypatch.setattr(rehearse, "record_started", lambda changes, pods: None)
    run = rehearse.Rehearsal(Box(), [])
    run.box.api = None
    run.awaiter = Awaiter()
    monkeypatch.setattr(run, "_run", stopped)
    with pytest.raises(rehearse.RehearsalError):
        run.run({})
    assert (run.jobs["nccl"]["outcome"], run.jobs["nccl"]["reason"]) == ("Failed", "BackoffLimitExceeded")
