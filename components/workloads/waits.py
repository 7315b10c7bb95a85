"""What ``pulumi up`` waits for when it waits for a job, and for how long: one place for every kind of job object.

pulumi-kubernetes awaits a batch Job until it completes (its built-in awaiter ends early only on some failures), and
a custom resource only as its ``pulumi.com/waitFor`` annotation says, for the resource's custom timeouts, else ten
minutes
(https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/await/await.go). A job Kueue queues is created
suspended, and its deadline runs only while it is not suspended
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#suspending-a-job): the wait is the deadline plus the
time the job may queue.

The job objects themselves (kinds, conditions, labels): :mod:`components.workloads.job_objects`.
"""

import math
from typing import Any, Optional

import pulumi

from components.workloads.job_objects import JobObject
from components.workloads.spec import DEFAULT_TIMEOUT_HOURS, JobSpec

#: How long ``pulumi up`` allows an awaited job to wait in its queue and for nodes, on top of its deadline.
DEFAULT_QUEUE_TIMEOUT_HOURS = 1.0
#: After an awaited job's deadline and its pods' grace period: time for its controller to record the failure, so the
#: job's own reason ends the wait rather than the timeout.
FAILURE_REPORT_S = 60
#: Kubernetes' ``terminationGracePeriodSeconds`` when a pod sets none.
KUBERNETES_GRACE_S = 30


def await_annotations(obj: JobObject, wait: bool) -> dict[str, str]:
    """The annotations that make ``pulumi up`` wait for ``obj`` until it succeeded or failed, or not at all.

    A batch Job too: the provider's own Job awaiter ends the wait only on the failure reasons
    ``BackoffLimitExceeded`` and ``DeadlineExceeded``, so a Job failed by its pod failure policy would be awaited
    until the timeout (https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/await/checker/job/check.go).
    """
    return {"pulumi.com/waitFor": obj.finished} if wait else {"pulumi.com/skipAwait": "true"}


def finished(obj: JobObject, name: str, resource: pulumi.CustomResource, *, awaited: bool) -> pulumi.Output[str]:
    """``name`` once ``resource`` exists; when ``pulumi up`` awaited it (the provider returns the object it awaited,
    with its status), only if it did not fail: a failure stops ``pulumi up`` with its reason. A job not awaited is
    never judged by a status a later refresh stored."""
    if not awaited:
        return resource.id.apply(lambda _: name)
    status: pulumi.Output[Any] = getattr(resource, "status")
    metadata: pulumi.Output[Any] = getattr(resource, "metadata")
    return pulumi.Output.all(resource.id, status, metadata, resource.urn).apply(
        lambda a: obj.succeeded_or_raise(name, a[1], str((a[2] or {}).get("namespace") or ""), a[3])
    )


def await_seconds(deadline_s: int, *, queue_s: int = 0, grace_s: int = KUBERNETES_GRACE_S) -> int:
    """How long ``pulumi up`` waits for a job it awaits: the time it may queue (``queue_s``), its deadline, its pods'
    grace period and :data:`FAILURE_REPORT_S`."""
    return int(queue_s) + int(deadline_s) + int(grace_s) + FAILURE_REPORT_S


def deadline_seconds(hours: float) -> int:
    """A job's ``timeoutHours`` as whole seconds (``activeDeadlineSeconds``), at least 1: a fraction of a second
    rounded to 0, which the Job controller reads as a deadline already past (the job failed at once)."""
    return max(1, int(float(hours) * 3600))


def job_deadline_seconds(spec: JobSpec) -> int:
    """A job's deadline as its Job (or MPIJob's ``runPolicy``) has it: ``timeout_hours``, or
    :data:`~components.workloads.spec.DEFAULT_TIMEOUT_HOURS`, in whole seconds (:func:`deadline_seconds`)."""
    return deadline_seconds(spec.get("timeout_hours", DEFAULT_TIMEOUT_HOURS))


def queue_seconds(queued: bool, queue_timeout_hours: Optional[float]) -> int:
    """The time a job may queue: none for a job Kueue does not queue."""
    if not queued:
        return 0
    hours = DEFAULT_QUEUE_TIMEOUT_HOURS if queue_timeout_hours is None else float(queue_timeout_hours)
    return int(hours * 3600)


#: What deleting a job's object adds to its pods' grace period: time for the controllers to remove it.
DELETE_MARGIN_S = 120
#: pulumi-kubernetes' own wait for a deletion (provider/pkg/await/await.go, ten minutes).
PROVIDER_DELETE_WAIT_S = 600


def await_timeouts(seconds: int, grace_s: int = KUBERNETES_GRACE_S) -> pulumi.CustomTimeouts:
    """Pulumi's create and update timeouts of ``seconds``; its delete timeout outlasts the pods' grace period (the
    provider deletes in the foreground: the object goes once its pods have), never below the provider's own ten
    minutes. Whole minutes, rounded up."""
    minutes = f"{math.ceil(seconds / 60)}m"
    delete_s = max(PROVIDER_DELETE_WAIT_S, grace_s + DELETE_MARGIN_S)
    return pulumi.CustomTimeouts(create=minutes, update=minutes, delete=f"{math.ceil(delete_s / 60)}m")
