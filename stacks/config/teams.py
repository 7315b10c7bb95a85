"""Teams sharing one cluster (key ``teams``): per team a namespace, a LocalQueue and a ClusterQueue in one Kueue
cohort with a share of the fleet's quota (:mod:`stacks.plan.admission` derives the queues).

A team's jobs are registered by its own stack (a jobs-only stack, :mod:`stacks.jobs_only`) that takes this stack by a
``pulumi.StackReference``; this stack makes what they need in the team's namespace.
"""

import json
import re
from typing import Any, Mapping, Optional

from pydantic import Field, field_validator

from stacks.config.base import NAME_RE, RESERVED_NAMESPACES, ROLE_ARN_RE, Model
from stacks.config.errors import check, key

#: Longest team name: it names the team's ClusterQueue (``team-<name>``) and LocalQueue.
TEAM_NAME_MAX = 40


class TeamConfig(Model):
    """One team (``teams.<name>``)."""

    namespace: Optional[str] = None
    """Where the team's jobs run (default: the team's name)."""
    quota_percent: int = Field(ge=1, le=100)
    """The team's nominal quota: this percent of every node group's ``maxSize`` nodes (rounded down to whole nodes)."""
    may_borrow: bool = True
    """Jobs of the team may use idle quota of the other queues of the cohort (``borrowingLimit`` unset, else 0)."""
    may_lend: bool = True
    """The team's idle quota may be used by the other queues (``lendingLimit`` unset, else 0)."""
    member_role_arns: list[str] = Field(default_factory=list)
    """IAM roles of the team's members, who deploy its jobs-only stack: each gets an EKS access entry with the
    AmazonEKSAdminPolicy scoped to the team's namespace and the Kubernetes group eks-training-team-<name>, which may
    also create MPIJobs and read Kueue's Workloads there (they also need the IAM rights to create their jobs' roles
    and Pod Identity associations); default none: only the cluster's admins can deploy the team's stack."""

    @field_validator("member_role_arns")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        check(
            [
                (f"[{i}]", f"{arn!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/NAME)")
                for i, arn in enumerate(v)
                if not ROLE_ARN_RE.match(arn)
            ]
        )
        return v

    def namespace_name(self, team: str) -> str:
        return self.namespace or team


def teams_problems(teams: Mapping[str, TeamConfig], raw_names: list[str], training_namespace: str) -> list[str]:
    """Names, namespaces and shares of ``teams`` (``raw_names``: every team as written, also those whose own
    validation failed)."""
    problems = []
    misnamed = set()
    for name in raw_names:
        if not (isinstance(name, str) and NAME_RE.match(name) and len(name) <= TEAM_NAME_MAX):
            misnamed.add(name)
            problems.append(
                f"{key(f'teams.{name}')}: the name must be 1-{TEAM_NAME_MAX} lowercase letters, digits and "
                f"'-', starting and ending with a letter or digit (it names the team's queues); rename it"
            )
    if "default" in raw_names:
        # Kueue labels a Job created without a queue into its namespace's LocalQueue named default
        # (LocalQueueDefaulting: pkg/controller/jobframework/defaults.go), so the team's staging Jobs would queue
        problems.append(
            f"{key('teams.default')}: the team's LocalQueue takes its name, and Kueue puts every Job of its namespace "
            "that names no queue into a LocalQueue named default, the staging Jobs too; rename the team"
        )
    seen: dict[str, str] = {}
    for name, team in teams.items():
        if name in misnamed and team.namespace is None:
            continue  # its namespace is its name, already refused: renaming it is the one fix
        ns = team.namespace_name(name)
        path = f"teams.{name}.namespace"
        if not (NAME_RE.match(ns) and len(ns) <= 63):
            problems.append(
                f"{key(path)}: {ns!r} is not a namespace name (1-63 lowercase letters, digits and '-', "
                f"starting and ending with a letter or digit); set another"
            )
        elif ns in RESERVED_NAMESPACES:
            problems.append(
                f"{key(path)}: {ns!r} is a namespace of Kubernetes or of a controller the stack installs; "
                f"set another (e.g. {('team-' + name)[:63]!r})"
            )
        elif ns == training_namespace:
            problems.append(
                f"{key(path)}: {ns!r} is the stack's own training namespace ({key('storage.namespace')}), "
                f"whose jobs are the stack's; set another (e.g. {('team-' + name)[:63]!r})"
            )
        elif ns in seen:
            problems.append(
                f"{key(path)}: {ns!r} is also the namespace of {key(f'teams.{seen[ns]}')}; each team needs "
                f"its own namespace: set another"
            )
        else:
            seen[ns] = name
    total = sum(t.quota_percent for t in teams.values())
    if total > 100:
        shares = ", ".join(f"{n} {t.quota_percent}" for n, t in teams.items())
        problems.append(
            f"{key('teams')}: the teams' quotaPercent add up to {total} ({shares}), more than the fleet "
            f"(100); lower them so they add up to at most 100 (the rest is the stack's own queue's)"
        )
    return problems


#: A stack reference: ``org/project/stack`` (the DIY backends' organization is ``organization``),
#: https://www.pulumi.com/docs/iac/concepts/stacks/#stackreferences.
STACK_REFERENCE_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
#: Keys a jobs-only stack reads: its jobs and what they are made of; the node groups and the system group (the jobs'
#: placement, checked at deploy against the referenced stack's); ``cluster.stackReference`` and ``cluster.team``;
#: ``preflight`` (a jobs-only stack has no account checks of its own: the cluster stack's quotas and zones).
JOBS_ONLY_KEYS = (
    "clusterName",
    "cluster",
    "nodeGroups",
    "systemNodeGroup",
    "instanceFacts",
    "tags",
    "images",
    "imageBuild",
    "datasets",
    "jobs",
    "preflight",
)
JOBS_ONLY_CLUSTER_KEYS = ("stackReference", "team")


def jobs_only_problems(raw: Mapping[str, str], cluster: Any) -> list[str]:
    """A jobs-only stack (``cluster.stackReference``): a team, a reference ``org/project/stack``, and none of the keys
    that make a cluster (they would be ignored)."""
    ref = getattr(cluster, "stack_reference", None)
    team = getattr(cluster, "team", None)
    problems = []
    if ref is None:
        if team is not None:
            problems.append(
                f"{key('cluster.team')}: only a jobs-only stack names its team; set "
                f"{key('cluster.stackReference')} (the cluster stack, org/project/stack) or remove it"
            )
        return problems
    if not STACK_REFERENCE_RE.match(ref):
        problems.append(
            f"{key('cluster.stackReference')}: {ref!r} is not a stack reference; write org/project/stack "
            f"(organization/<project>/<stack> with a local or S3 backend)"
        )
    if team is None:
        problems.append(
            f"{key('cluster.team')}: a jobs-only stack ({key('cluster.stackReference')}) submits to a "
            f"team's queue: set it to a team of the referenced stack's teams"
        )
    elif not (NAME_RE.match(team) and len(team) <= TEAM_NAME_MAX):
        problems.append(f"{key('cluster.team')}: {team!r} is not a team name (a key of the referenced stack's teams)")
    for k in sorted(raw):
        if k not in JOBS_ONLY_KEYS:
            problems.append(
                f"{key(k)}: a jobs-only stack ({key('cluster.stackReference')}) registers only its jobs; "
                f"this key configures the cluster, which the referenced stack makes: remove it"
            )
    try:
        written = json.loads(raw.get("cluster") or "{}")
    except json.JSONDecodeError:
        written = {}
    for k in sorted(written if isinstance(written, dict) else {}):
        if k not in JOBS_ONLY_CLUSTER_KEYS:
            problems.append(
                f"{key('cluster.' + k)}: a jobs-only stack reads only cluster.stackReference and "
                f"cluster.team (the referenced stack makes the cluster): remove it"
            )
    return problems
