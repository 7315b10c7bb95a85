"""The Kubernetes objects a job runs as, each declared once: its API, resource, conditions, pod label, the field Kueue
suspends it by and its CRD. The job kinds (:mod:`stacks.kinds`), the admission component, the waits, the collector and
the box read them; ``training/kube_api.py`` keeps a copy the image carries, tied by a test."""

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import pulumi


@dataclass(frozen=True)
class JobObject:
    """A Kubernetes object a job runs as: its API, how it is named, how it ends, what Kueue and Pulumi own of it."""

    kind: str
    api_version: str
    resource: str
    """Its resource name (``kubectl get <resource>``)."""
    succeeded: str
    """The condition type it gets when it succeeded."""
    pod_label: str
    """The label its controller puts on its pods, valued with the object's name."""
    suspend: str
    """The field Kueue flips when it admits (false) or evicts (true) it. Pulumi must never set it after creation (a
    later ``pulumi up`` would suspend a running job): its component puts it in ``ignore_changes``, which server-side
    apply drops from what it applies (https://github.com/pulumi/pulumi-kubernetes/pull/2566)."""
    crd: Optional[str] = None
    """Its CustomResourceDefinition's name, when an operator defines it."""
    failed: str = "Failed"
    """The condition type it gets when it failed for good."""

    @property
    def group(self) -> str:
        """Its API group (``batch``, ``kubeflow.org``)."""
        return self.api_version.rpartition("/")[0]

    @property
    def type_token(self) -> str:
        """Its Pulumi type token (``kubernetes:batch/v1:Job``): what pulumi-kubernetes registers it as."""
        return f"kubernetes:{self.api_version}:{self.kind}"

    @property
    def kubectl_name(self) -> str:
        """How ``kubectl`` names one of them (``job``, ``mpijob``)."""
        return self.kind.lower()

    @property
    def kueue_framework(self) -> str:
        """Kueue's integration that queues it (its configuration's ``integrations.frameworks``)."""
        return f"{self.group}/{self.kubectl_name}"

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
    kind="Job",
    api_version="batch/v1",
    resource="jobs",
    succeeded="Complete",
    pod_label="batch.kubernetes.io/job-name",
    suspend="spec.suspend",
)
#: The MPI Operator's CRD of MPIJobs.
MPIJOB_CRD = "mpijobs.kubeflow.org"
#: A Kubeflow MPIJob (v2beta1; https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/apis/kubeflow/v2beta1/types.go).
MPI_JOB = JobObject(
    kind="MPIJob",
    api_version="kubeflow.org/v2beta1",
    resource="mpijobs",
    succeeded="Succeeded",
    pod_label="training.kubeflow.org/job-name",
    suspend="spec.runPolicy.suspend",
    crd=MPIJOB_CRD,
)
#: Every job object, by kind: what a job's ``after_jobs`` (``<resource>/<name>``) and the benchmark's collector may
#: name (``wait_for_jobs.py`` and ``collect_results.py`` read ``training/kube_api.py``'s copy).
JOB_OBJECTS: Mapping[str, JobObject] = {o.kind: o for o in (BATCH_JOB, MPI_JOB)}
