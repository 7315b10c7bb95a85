"""Whether a rehearsal's step is ready, as ``pulumi up`` awaits it: Deployments rolled out, Helm releases'
DaemonSets ready, CRDs Established, Jobs and ``waitFor`` objects by the provider's own await code
(:mod:`stacks.box.awaits`).

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from stacks.box.api import BoxError
from stacks.box.awaits import SKIP_AWAIT, Awaiter, asks_provider, failure_of
from stacks.box.cluster import Box, crd_established
from stacks.box.steps import RehearsalError, Step


def rolled_out(deployment: Mapping[str, Any]) -> bool:
    """Whether the provider's wait for a Deployment (its creation, or a change such as a patch's) is over: the
    controller saw this generation, the Deployment is Available and, past its first generation, its new ReplicaSet
    is (pulumi-kubernetes ``provider/pkg/await/deployment.go``)."""
    status = deployment.get("status") or {}
    generation = deployment["metadata"].get("generation") or 1
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    return (
        (status.get("observedGeneration") or 0) >= generation
        and (conditions.get("Available") or {}).get("status") == "True"
        and (generation <= 1 or (conditions.get("Progressing") or {}).get("reason") == "NewReplicaSetAvailable")
    )


def is_ready(
    box: Box,
    step: Step,
    awaiter: Optional[Awaiter],
    *,
    kueue_started: bool,
    await_jobs: set[str],
    jobs: Mapping[str, Mapping[str, Any]],
    note: Callable[[str], None],
    timeline: Callable[[], str],
) -> bool:
    """Whether ``step`` is ready: Kueue's release once its manager started, each awaited object of the others (a job
    of ``await_jobs`` once ``jobs`` has its outcome)."""
    if step.kueue is not None:
        return kueue_started
    for doc in step.docs:
        ann = (doc.get("metadata") or {}).get("annotations") or {}
        if ann.get(SKIP_AWAIT) == "true":
            continue
        kind, meta = doc["kind"], doc["metadata"]
        ns = ["-n", meta["namespace"]] if meta.get("namespace") else []
        if meta["name"] in await_jobs:
            if "outcome" not in jobs.get(meta["name"], {}):
                return False
        elif kind == "DaemonSet":  # a Helm release's stand-in: pulumi awaits a release's resources
            status = box.get("daemonset", meta["name"], *ns).get("status") or {}
            if not status.get("observedGeneration") or (status.get("numberReady") or 0) != (
                status.get("desiredNumberScheduled") or 0
            ):
                return False
        elif asks_provider(doc):
            if not provider_ready(box, awaiter, step, doc, note, timeline):
                return False
        elif kind == "Deployment":
            if not rolled_out(box.get("deployment", meta["name"], *ns)):
                return False
        elif kind == "CustomResourceDefinition":
            if not crd_established(box, meta["name"]):
                return False
    return True


def provider_ready(
    box: Box,
    awaiter: Optional[Awaiter],
    step: Step,
    doc: Mapping[str, Any],
    note: Callable[[str], None],
    timeline: Callable[[], str],
) -> bool:
    """The provider's answer for ``doc`` (a Job, or an object with ``waitFor``); a failure, the provider's or the
    program's check of a job object it awaited (its failed condition), stops the rehearsal as ``pulumi up``."""
    assert awaiter is not None, "run() starts the awaiter"
    meta = doc["metadata"]
    group = doc["apiVersion"].rpartition("/")[0]
    resource = doc["kind"].lower() + (f".{group}" if group else "")
    try:
        live = box.get(resource, meta["name"], *(["-n", meta["namespace"]] if meta.get("namespace") else []))
    except BoxError:
        return False  # not served yet
    answer = awaiter.answer(doc, live)
    failure = answer.error or (answer.ready and answer.awaited and failure_of(doc["kind"], live))
    if failure:
        note(f"{doc['kind']} {meta['name']}: the wait ended: {failure}")
        raise RehearsalError(
            f"{step.name}: {doc['kind']} {meta['name']} failed: {failure} (pulumi up stops here)\ntimeline:\n"
            + timeline()
        )
    return answer.ready
