"""The cluster tier's count of the pods that hold a node after each watch event (``tests.cluster.support.holding``):
a terminating pod holds its node until it is gone, and counts as leaving when only the pods that stay matter."""

from __future__ import annotations

import pytest

from tests.cluster.support import holding, mpijob_of

pytestmark = pytest.mark.unit


def _pod(name: str, job: str, *, node: str = "", deleting: bool = False) -> dict:
    meta = {"name": name, "uid": name, "labels": {"training.kubeflow.org/job-name": job}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": "Running"}}


#: A preempted job's worker terminating while the preemptor's worker starts on the node another one freed.
EVENTS = [
    ("ADDED", _pod("h-0", "horovod", node="n0")),
    ("ADDED", _pod("h-1", "horovod", node="n1")),
    ("MODIFIED", _pod("h-0", "horovod", node="n0", deleting=True)),
    ("MODIFIED", _pod("h-1", "horovod", node="n1", deleting=True)),
    ("DELETED", _pod("h-0", "horovod", node="n0", deleting=True)),
    ("ADDED", _pod("n-0", "nccl")),
    ("MODIFIED", _pod("n-0", "nccl", node="n0")),
    ("DELETED", _pod("h-1", "horovod", node="n1", deleting=True)),
]


def test_a_terminating_pod_holds_its_node_until_it_is_gone() -> None:
    samples = holding(EVENTS, mpijob_of)
    assert samples[6] == {"horovod": {"h-1"}, "nccl": {"n-0"}}
    assert samples[-1] == {"nccl": {"n-0"}}


def test_only_the_pods_that_stay_are_counted_when_asked() -> None:
    samples = holding(EVENTS, mpijob_of, terminating=False)
    assert samples[1] == {"horovod": {"h-0", "h-1"}}
    assert not [s for s in samples if s.get("horovod") and s.get("nccl")], samples
    assert samples[-1] == {"nccl": {"n-0"}}
