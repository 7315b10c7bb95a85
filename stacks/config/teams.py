"""Teams sharing one cluster (key ``teams``): per team a namespace, a LocalQueue and a ClusterQueue in one Kueue
cohort with a share of the fleet's quota (:mod:`stacks.plan.admission` derives the queues).

A team's jobs are registered by its own stack (a jobs-only stack, :mod:`stacks.jobs_only`) that takes this stack by a
``pulumi.StackReference``; this stack makes what they need in the team's namespace.
"""

from typing import Mapping, Optional

from pydantic import Field

from stacks.config.base import NAME_RE, Model
from stacks.config.errors import key

#: Longest team name: it names the team's ClusterQueue (``team-<name>``) and LocalQueue.
TEAM_NAME_MAX = 40
#: Namespaces a team may not take: Kubernetes' own, those the stack installs its controllers in (Kueue, the MPI
#: Operator, the CloudWatch Observability add-on's agents), and the stack's training namespace (``storage.namespace``,
#: checked separately).
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "kueue-system", "mpi-operator",
                       "amazon-cloudwatch")


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

    def namespace_name(self, team: str) -> str:
        return self.namespace or team


def teams_problems(teams: Mapping[str, TeamConfig], raw_names: list[str], training_namespace: str) -> list[str]:
    """Names, namespaces and shares of ``teams`` (``raw_names``: every team as written, also those whose own
    validation failed)."""
    problems = []
    for name in raw_names:
        if not (isinstance(name, str) and NAME_RE.match(name) and len(name) <= TEAM_NAME_MAX):
            problems.append(f"{key(f'teams.{name}')}: the name must be 1-{TEAM_NAME_MAX} lowercase letters, digits and "
                            f"'-', starting and ending with a letter or digit (it names the team's queues); rename it")
    seen: dict[str, str] = {}
    for name, team in teams.items():
        ns = team.namespace_name(name)
        path = f"teams.{name}.namespace"
        if not (NAME_RE.match(ns) and len(ns) <= 63):
            problems.append(f"{key(path)}: {ns!r} is not a namespace name (1-63 lowercase letters, digits and '-', "
                            f"starting and ending with a letter or digit); set another")
        elif ns in RESERVED_NAMESPACES:
            problems.append(f"{key(path)}: {ns!r} is a namespace of Kubernetes or of a controller the stack installs; "
                            f"set another (e.g. {('team-' + name)[:63]!r})")
        elif ns == training_namespace:
            problems.append(f"{key(path)}: {ns!r} is the stack's own training namespace ({key('storage.namespace')}), "
                            f"whose jobs are the stack's; set another (e.g. {('team-' + name)[:63]!r})")
        elif ns in seen:
            problems.append(f"{key(path)}: {ns!r} is also the namespace of {key(f'teams.{seen[ns]}')}; each team needs "
                            f"its own namespace: set another")
        else:
            seen[ns] = name
    total = sum(t.quota_percent for t in teams.values())
    if total > 100:
        shares = ", ".join(f"{n} {t.quota_percent}" for n, t in teams.items())
        problems.append(f"{key('teams')}: the teams' quotaPercent add up to {total} ({shares}), more than the fleet "
                        f"(100); lower them so they add up to at most 100 (the rest is the stack's own queue's)")
    return problems
