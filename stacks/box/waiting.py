"""What waits in a rehearsal and why, the text of its error: every Pending pod with the scheduler's reason or its
hold, Kueue's reason a Workload is not admitted, and the Jobs in the Job controller's back-off."""

from __future__ import annotations

from typing import Mapping

from components.workloads.job_objects import JOB_OBJECTS
from stacks.box.cluster import Box
from stacks.box.kueue import workload_conditions
from stacks.box.pods import HELD
from stacks.box.steps import Step

#: The finalizer the Job controller keeps on a pod until it has counted its end (pkg/controller/job).
JOB_TRACKING = "batch.kubernetes.io/job-tracking"


def pending_reasons(box: Box, applied: Mapping[str, Step], kueue_runs: bool) -> list[str]:
    """Every Pending pod and why it waits; with Kueue running, each of the stack's Workloads not admitted."""
    out = []
    for pod in box.get("pods", "-A")["items"]:
        if (pod.get("status") or {}).get("phase") != "Pending":
            continue
        conds = (pod.get("status") or {}).get("conditions") or []
        why = next(
            (
                c.get("message") or c.get("reason")
                for c in conds
                if c["type"] == "PodScheduled" and c["status"] == "False"
            ),
            None,
        )
        held = (pod["metadata"].get("annotations") or {}).get(HELD)
        out.append(
            f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: "
            + (why or (f"waiting for {held}" if held else "scheduled, not started"))
        )
    if kueue_runs:
        for ns in sorted(
            {d["metadata"]["namespace"] for s in applied.values() for d in s.docs if d["kind"] in JOB_OBJECTS}
        ):
            out += workload_conditions(box, ns)
    return out


def retrying(box: Box, applied: Mapping[str, Step]) -> list[str]:
    """The Jobs whose pods failed and that wait to start the next, within the Job's backoffLimit: the Job controller's
    back-off, 10 s doubling to at most 10 minutes (``MaxJobPodFailureBackOff``, kubernetes
    pkg/controller/job/job_controller.go; the Kubernetes page's six minutes is older). It counts every failed pod,
    those the Job's podFailurePolicy ignores too (``newBackoffRecord``, pkg/controller/job/backoff_utils.go), which
    the Job's status does not count."""
    out = []
    for ns in sorted(
        {d["metadata"]["namespace"] for s in applied.values() for d in s.docs if "namespace" in d["metadata"]}
    ):
        pods = box.get("pods", "-n", ns)["items"]
        for job in box.get("jobs", "-n", ns)["items"]:
            status = job.get("status") or {}
            over = any(
                c.get("status") == "True"
                for c in status.get("conditions") or []
                if c.get("type") in ("Complete", "Failed")
            )
            name = job["metadata"]["name"]
            uncounted = set((status.get("uncountedTerminatedPods") or {}).get("failed") or [])
            failed = sum(  # the failed pods the Job controller has handled (counted or ignored)
                1
                for p in pods
                if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == name
                and (p.get("status") or {}).get("phase") == "Failed"
                and p["metadata"].get("uid") not in uncounted
                and JOB_TRACKING not in (p["metadata"].get("finalizers") or [])
            )
            counted = status.get("failed") or 0
            if over or status.get("active") or not (counted or failed):
                continue
            limit = job["spec"].get("backoffLimit", 6)
            if failed > counted:
                out.append(
                    f"{ns}/{name}: {failed} pod(s) failed, {counted} of them counted against the {limit} the Job "
                    "allows (its podFailurePolicy ignores the others); the next pods start after the Job controller's "
                    "back-off, which counts every failed pod (10 s, doubling to 10 min): a longer --timeout shows "
                    "the outcome"
                )
            else:
                out.append(
                    f"{ns}/{name}: {counted} pod(s) failed, of the {limit} the Job allows; the next starts after the "
                    "Job controller's back-off (10 s, doubling to 10 min): a longer --timeout shows the outcome"
                )
    return out
