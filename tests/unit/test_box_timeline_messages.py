"""The rehearsal's "what waited, and why" phrases (stacks/box/timeline.py) for states the held-out stacks showed: a
pod held by its wait-for-jobs init container before the scheduler binds it (the report said ``on None``), and a
Workload Kueue has not evaluated yet (``QuotaReserved=Unknown (Pending: )``)."""

from stacks.box.rehearse import HELD
from stacks.box.timeline import pending_reason, workload_state


def _held(node: str | None) -> dict:
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"annotations": {HELD: "jobs/a,jobs/b"}}, "spec": spec, "status": {}}


def test_a_held_pod_names_its_node_or_says_it_has_none_yet() -> None:
    assert pending_reason(_held(None)) == "not scheduled yet, its wait-for-jobs init container waits for jobs/a, jobs/b"
    assert pending_reason(_held("gpu-0")) == "on gpu-0, its wait-for-jobs init container waits for jobs/a, jobs/b"


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
    from stacks.rehearse import version_note

    oldest = SUPPORTED_KUBERNETES_VERSIONS[0]
    assert version_note({}) is None
    assert version_note({"eks-training:cluster": {"kubernetesVersion": DEFAULT_KUBERNETES_VERSION}}) is None
    note = version_note({"eks-training:cluster": {"kubernetesVersion": oldest}})
    assert note is not None and f"Kubernetes {DEFAULT_KUBERNETES_VERSION}" in note and f"runs {oldest}" in note


def test_a_job_that_ran_between_two_passes_gets_its_controllers_start(monkeypatch, tmp_path) -> None:
    """A short MPIJob started and succeeded between two of the rehearsal's passes: the report said ``started -``
    (a fresh-clone run at cf0c815). Its start is then the controller's ``status.startTime``, within the rehearsal."""
    import datetime

    from stacks.box import rehearse

    class Box:
        home = tmp_path

        def get(self, kind: str, *args: str) -> dict:
            return {"items": [job] if kind == "mpijobs" else []}

    monkeypatch.setattr(rehearse, "crd_established", lambda box, crd: True)
    run = rehearse.Rehearsal(Box(), [])  # type: ignore[arg-type]
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
    run._watch_jobs()
    rec = run.jobs["nccl"]
    assert rec["outcome"] == "Succeeded" and rec["finished"] >= 5
    assert 0 <= rec["started"] <= rec["finished"] and abs(rec["started"] - 2) <= 1  # whole seconds
    job["status"].pop("startTime")
    run.jobs.clear()
    run._watch_jobs()
    assert run.jobs["nccl"]["started"] == run.jobs["nccl"]["finished"]  # no stamp: took 0 s, never "-"


def test_a_wait_for_another_boxs_lock_moves_only_the_clocks_running_then(tmp_path) -> None:
    """The MPI Operator's lock, held by another box for a minute, gave every later step a minute more than its
    timeout: the default-wait control in tests/cluster/test_box_waits.py did not fail under xdist (CI at 8e704ec)."""
    from stacks.box import rehearse

    class Box:
        home = tmp_path

    waiting = rehearse.Step("urn:waiting", "waiting", [], timeout_s=10.0)
    later = rehearse.Step("urn:later", "later", [], timeout_s=10.0)
    run = rehearse.Rehearsal(Box(), [waiting, later])  # type: ignore[arg-type]
    start = rehearse.time.monotonic()
    run.applied[waiting.urn], run.applied_at[waiting.urn] = waiting, start - 9.0
    run._host_waited(60.0)
    assert run._late() == []
    run.applied[later.urn], run.applied_at[later.urn] = later, start - 11.0
    assert run._late() == ["later (timeout 10 s)"]
    assert run.host_wait_s == 60.0
