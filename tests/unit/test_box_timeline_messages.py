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
