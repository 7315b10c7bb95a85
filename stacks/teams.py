"""What the teams' jobs need in their namespaces (``teams``, :mod:`stacks.config.teams`), registered by the cluster
stack; the jobs themselves come from each team's jobs-only stack (:mod:`stacks.jobs_only`).

Per team: the **Namespace** (Pod Security ``baseline``, label ``eks-training/team``); its default-deny
**NetworkPolicies** (:class:`~components.workloads.TrainingNetworkPolicies` without jobs; the jobs-only stack adds
each job's within-job policy); a **claim of the shared EFS file system** (``storage.pvcName``, a directory of its
own); its **LocalQueue** and **ClusterQueue** in the cohort (:class:`components.admission.Admission`); and a
**RoleBinding** of the members' Kubernetes group to :data:`MEMBER_ROLE` (MPIJobs, reading Kueue's Workloads and
LocalQueues for ``waitCommand``). A job's service account and Pod Identity association are made with the job.
Why: "Teams: a cohort of queues" in docs/explanation/admission.md."""

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.storage import EfsStorage
from components.workloads import TrainingNetworkPolicies
from stacks.environment import Environment
from stacks.kinds import KINDS

#: The ClusterRole of :data:`MEMBER_ROLE_RULES`.
MEMBER_ROLE = "eks-training-team-member"
#: The label on a team's namespace naming the team.
TEAM_LABEL = "eks-training/team"
#: Pod Security Standard the namespaces of jobs enforce (as the training namespace does).
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "baseline"}
#: API groups whose objects Kubernetes' admin role already covers
#: (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles).
BUILT_IN_GROUPS = ("batch",)
#: The ClusterRole bound in a team's namespace to its members' group: the custom resources a jobs-only stack makes (its
#: kinds' objects outside :data:`BUILT_IN_GROUPS`, :mod:`stacks.kinds`) or reads (Kubernetes' admin role covers the
#: built-in kinds; these CRDs' own roles are not aggregated into it).
MEMBER_ROLE_RULES: list[k8s.rbac.v1.PolicyRuleArgsDict] = [
    *[
        k8s.rbac.v1.PolicyRuleArgsDict(
            api_groups=[group],
            resources=[resource, f"{resource}/status"],
            verbs=["get", "list", "watch", "create", "update", "patch", "delete"],
        )
        for group, resource in dict.fromkeys((k.job_object.group, k.job_object.resource) for k in KINDS.values())
        if group not in BUILT_IN_GROUPS
    ],
    {"api_groups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]},
]


@dataclass
class TeamNamespace:
    """A team's namespace as its jobs see it."""

    namespace: pulumi.Output[str]
    """The namespace's name, resolved once its network policies exist (objects in it come after them)."""
    pvc_name: pulumi.Output[str]
    policies: TrainingNetworkPolicies


def build_team_namespaces(env: Environment) -> dict[str, TeamNamespace]:
    """Team name -> its namespace, policies and claim (none without teams)."""
    plan, cfg = env.plan, env.config
    if plan.admission is None or not plan.admission.teams:
        return {}
    storage = env.storage.component
    assert isinstance(storage, EfsStorage), "teams need the EFS backend (checked by the config loader)"
    out: dict[str, TeamNamespace] = {}
    member_role = None
    if any(t.member_role_arns for t in plan.admission.teams):
        member_role = k8s.rbac.v1.ClusterRole(
            f"{cfg.cluster_name}-team-member-role",
            metadata={"name": MEMBER_ROLE, "labels": {"app.kubernetes.io/managed-by": "pulumi"}},
            rules=MEMBER_ROLE_RULES,
            opts=env.k8s_opts,
        )
    for team in plan.admission.teams:
        base = f"{cfg.cluster_name}-team-{team.name}"
        ns = k8s.core.v1.Namespace(
            f"{base}-namespace",
            metadata={
                "name": team.namespace,
                "labels": {"app.kubernetes.io/managed-by": "pulumi", TEAM_LABEL: team.name, **POD_SECURITY},
            },
            opts=env.k8s_opts,
        )
        policies = TrainingNetworkPolicies(
            f"{base}-network-policies", {"namespace": ns.metadata.name, "jobs": []}, opts=env.k8s_opts
        )
        pvc = k8s.core.v1.PersistentVolumeClaim(
            f"{base}-pvc",
            metadata={"name": cfg.storage.pvc_name, "namespace": policies.namespace},
            spec={
                "access_modes": ["ReadWriteMany"],
                "storage_class_name": storage.storage_class_name,
                "resources": {"requests": {"storage": cfg.storage.capacity}},
            },
            opts=env.k8s_opts,
        )
        if member_role is not None and team.member_role_arns:
            k8s.rbac.v1.RoleBinding(
                f"{base}-members",
                metadata={"name": "eks-training-team-members", "namespace": policies.namespace},
                role_ref={
                    "api_group": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": member_role.metadata.name,
                },
                subjects=[{"kind": "Group", "name": team.kubernetes_group, "api_group": "rbac.authorization.k8s.io"}],
                opts=env.k8s_opts,
            )
        out[team.name] = TeamNamespace(namespace=policies.namespace, pvc_name=pvc.metadata.name, policies=policies)
    return out
