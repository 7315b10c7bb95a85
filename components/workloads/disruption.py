"""``JobDisruptionBudget``: the PodDisruptionBudget of a job's pods, which says how many of them a voluntary
disruption may take at once (a node drained by a managed node group update, or by hand).

A Job is not a controller with a scale subresource, so the budget counts its pods with an integer ``minAvailable``
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/#arbitrary-controllers-and-selectors). The eviction
API refuses an eviction that would leave fewer ready pods; EKS's node group update retries for 15 minutes, then fails
with PodEvictionFailure unless forced (https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html).

A budget never holds a node for a pod that is done or broken: the eviction API deletes a Succeeded, Failed or Pending
pod whatever the budget says (``canIgnorePDB``,
https://github.com/kubernetes/kubernetes/blob/v1.32.13/pkg/registry/core/pod/storage/eviction.go),
and ``unhealthyPodEvictionPolicy: AlwaysAllow`` (GA in Kubernetes 1.31) lets a running pod that is not ready go too
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/#unhealthy-pod-eviction-policy).
"""

from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.conventions import COMMON_LABELS, JOB_LABEL
from components.naming import k8s_name


class JobDisruptionBudgetArgs(TypedDict):
    """Inputs of :class:`JobDisruptionBudget`."""

    namespace: pulumi.Input[str]
    """The job's namespace."""
    job_name: str
    """The job's name (its pods carry it as ``eks-training/job``)."""
    min_available: int
    """Of the selected pods, how many a voluntary disruption must leave running (0: any may go)."""
    selector: NotRequired[Mapping[str, str]]
    """Labels that narrow the pods further (an MPIJob's workers: ``training.kubeflow.org/job-role: worker``)."""


class JobDisruptionBudget(pulumi.ComponentResource):
    """A ``policy/v1`` PodDisruptionBudget over one job's pods."""

    budget_name: pulumi.Output[str]
    """The PodDisruptionBudget's name."""

    def __init__(self, name: str, args: JobDisruptionBudgetArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:JobDisruptionBudget", name, None, opts)
        if args["min_available"] < 0:
            raise ValueError(f"{name}: min_available must be >= 0")
        job = args["job_name"]
        selector = {JOB_LABEL: job, **dict(args.get("selector") or {})}
        budget = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata={
                "name": k8s_name(job, "disruption"),
                "namespace": args["namespace"],
                "labels": {**COMMON_LABELS, JOB_LABEL: job},
            },
            spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
                min_available=args["min_available"],
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                unhealthy_pod_eviction_policy="AlwaysAllow",
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.budget_name = budget.metadata.name
        self.register_outputs({"budget_name": self.budget_name})
