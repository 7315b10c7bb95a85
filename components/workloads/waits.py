"""What ``pulumi up`` waits for when it waits for a job, and for how long: one place for every kind of job object.

pulumi-kubernetes awaits a batch Job until it completes (its built-in awaiter ends early only on some failures), and
a custom resource only as its ``pulumi.com/waitFor`` annotation says, for the resource's custom timeouts, else ten
minutes
(https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/await/await.go). A job Kueue queues is created
suspended, and its deadline runs only while it is not suspended
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#suspending-a-job): the wait is the deadline plus the
time the job may queue.
"""

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import pulumi

#: How long ``pulumi up`` allows an awaited job to wait in its queue and for nodes, on top of its deadline.
DEFAULT_QUEUE_TIMEOUT_HOURS = 1.0
#: After an awaited job's deadline and its pods' grace period: time for its controller to record the failure, so the
#: job's own reason ends the wait rather than the timeout.
FAILURE_REPORT_S = 60
#: Kubernetes' ``terminationGracePeriodSeconds`` when a pod sets none.
KUBERNETES_GRACE_S = 30


@dataclass(frozen=True)
class JobObject:
    """A Kubernetes object a job runs as: how it is named and how it ends."""

    kind: str
    api_version: str
    resource: str
    """Its resource name (``kubectl get <resource>``)."""
    succeeded: str
    """The condition type it gets when it succeeded."""
    pod_label: str
    """The label its controller puts on its pods, valued with the object's name."""
    failed: str = "Failed"
    """The condition type it gets when it failed for good."""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def finished(self) -> str:
        """A ``pulumi.com/waitFor`` expression met once the object succeeded or failed (RFC 9535 JSONPath, as
        pulumi-kubernetes reads it), so a failure ends the wait at once."""
        return (
            "jsonpath={.status.conditions[?("
            f'@.status=="True" && (@.type=="{self.succeeded}" || @.type=="{self.failed}")'
            ")].type}"
        )

    def failure(self, obj: Optional[Mapping[str, Any]]) -> Optional[str]:
        """``reason: message`` of the object's failed condition, or ``None`` while it has not failed."""
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == self.failed and c.get("status") == "True":
                return ": ".join(p for p in (c.get("reason"), c.get("message")) if p) or self.failed
        return None

    def succeeded_or_raise(
        self, name: str, status: Optional[Mapping[str, Any]], namespace: str = "", urn: str = ""
    ) -> str:
        """``name``, unless ``status`` says the object failed: then ``pulumi up`` stops with the reason, where to look
        and how to run the job again once its cause is fixed."""
        failure = self.failure({"status": status})
        if failure is not None:
            where = f" -n {namespace}" if namespace else ""
            raise pulumi.RunError(
                f"{self.kind} {name} failed: {failure}. Its pods: kubectl get pods{where} -l {self.pod_label}={name}; "
                f"their logs: kubectl logs{where} -l {self.pod_label}={name} --all-containers --tail=50. Fix the "
                f"cause, then run it again: pulumi up --replace '{urn or '<its URN: pulumi stack --show-urns>'}'"
            )
        return name


#: A batch Job (Indexed Jobs of every kind but MPI, health checks, staging).
BATCH_JOB = JobObject(
    kind="Job", api_version="batch/v1", resource="jobs", succeeded="Complete", pod_label="batch.kubernetes.io/job-name"
)
#: A Kubeflow MPIJob (v2beta1; https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/apis/kubeflow/v2beta1/types.go).
MPI_JOB = JobObject(
    kind="MPIJob",
    api_version="kubeflow.org/v2beta1",
    resource="mpijobs",
    succeeded="Succeeded",
    pod_label="training.kubeflow.org/job-name",
)
#: Every job object, by kind.
JOB_OBJECTS: Mapping[str, JobObject] = {o.kind: o for o in (BATCH_JOB, MPI_JOB)}


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
