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
