"""Rules over the whole stack: operations against the GPU groups, the add-ons the groups and storage need, a jobs-only
stack's keys, and the teams (their namespaces, and their refusal with FSx for Lustre)."""

from stacks.config.addons import addon_needs, addon_problems
from stacks.config.errors import key
from stacks.config.operations import has_gpu_groups, operations_problems
from stacks.config.rules.sections import Sections
from stacks.config.teams import jobs_only_problems, teams_problems


def check_operations(s: Sections, problems: list[str]) -> None:
    """Operations' settings against the worker groups (metrics on GPU groups)."""
    if "operations" not in s.failed:
        problems.extend(operations_problems(s.operations, has_gpu_groups(s.groups, s.catalog)))


def check_addons(s: Sections, problems: list[str]) -> None:
    """The add-on versions the cluster pins support what the groups, metrics and storage need (a cluster stack)."""
    if not {"cluster", "operations", "storage"} & s.failed and s.cluster.stack_reference is None:
        needs = addon_needs(
            s.groups,
            s.catalog,
            metrics=s.operations.metrics_enabled(has_gpu_groups(s.groups, s.catalog)),
            storage=s.storage,
        )
        problems.extend(addon_problems(needs, s.cluster))


def check_teams(s: Sections, problems: list[str]) -> None:
    """The teams' own problems, their namespaces, and no teams with FSx for Lustre."""
    problems.extend(s.team_entry_problems)
    problems.extend(teams_problems(s.teams, s.team_names, s.storage.namespace))
    if s.teams and s.storage.backend == "fsx":
        # The cluster stack places the Lustre file system and installs its client by its own jobs' groups
        # (stacks.config.derive.fsx_location); the teams' jobs come from other stacks. A static PersistentVolume
        # binds one claim (https://kubernetes.io/docs/concepts/storage/persistent-volumes/#binding), so a claim per
        # team would need a volume and a directory per team. EFS gives each dynamically provisioned claim its own.
        problems.append(
            f"{key('teams')}: the teams' jobs come from their own stacks, and with "
            f"{key('storage.backend')} fsx the cluster stack places the Lustre file system (one zone) "
            f"and installs its client only by the node groups of its own jobs, and one static volume "
            f"binds one claim (a team would need its own volume and directory): teams are refused with "
            f"FSx for Lustre; use backend efs (each team's claim gets its own directory) or remove teams"
        )


def check_stack(s: Sections, problems: list[str]) -> None:
    """The rules over the whole stack, after the cross-section ones."""
    check_operations(s, problems)
    check_addons(s, problems)
    problems.extend(jobs_only_problems(s.raw, s.cluster))
    check_teams(s, problems)
