"""Rules across sections, one module per part of the configuration: :mod:`.network` (cluster name, VPC, zones),
:mod:`.nodegroups`, :mod:`.images`, :mod:`.kind_images` (what a job's kind needs in its image), :mod:`.jobs`,
:mod:`.health` (the health check), :mod:`.storage` and :mod:`.stack` (operations, add-ons, jobs-only stacks, teams).
:func:`check` runs them all on :class:`Sections`.

Each rule reports only root causes: a section that failed its own validation is not reported again by rules that
depend on it, and defaults the user did not set are not blamed.
"""

from stacks.config.amis import ami_release_problems
from stacks.config.rules.health import check_health
from stacks.config.rules.images import check_image_gpus, check_image_scripts, check_images
from stacks.config.rules.jobs import check_code, check_jobs
from stacks.config.rules.kind_images import check_image_package, check_mpi_image
from stacks.config.rules.network import check_cluster_name, check_entry_names, check_network, check_zone_forms
from stacks.config.rules.nodegroups import check_efa, check_group, check_group_names, check_system_group, check_topology
from stacks.config.rules.sections import CLUSTER_NAME_MAX, Sections, job_path, known_type
from stacks.config.rules.stack import check_stack
from stacks.config.rules.storage import check_imported_datasets, check_storage

__all__ = [
    "CLUSTER_NAME_MAX",
    "Sections",
    "check",
    "check_cluster_name",
    "check_code",
    "check_efa",
    "check_entry_names",
    "check_group",
    "check_group_names",
    "check_health",
    "check_image_gpus",
    "check_images",
    "check_imported_datasets",
    "check_jobs",
    "check_image_package",
    "check_mpi_image",
    "check_image_scripts",
    "check_network",
    "check_stack",
    "check_storage",
    "check_system_group",
    "check_topology",
    "check_zone_forms",
    "cross_section",
    "job_path",
]


def cross_section(s: Sections) -> list[str]:
    """Every cross-section rule; returns the problems (the rules fill in nothing)."""
    problems: list[str] = []
    check_cluster_name(s, problems)
    check_network(s, problems)
    check_zone_forms(s, problems)
    check_system_group(s, problems)
    check_entry_names(s, problems)
    check_group_names(s, problems)
    for name, g in s.groups.items():
        check_group(s, name, g, problems)
    for name, types in s.failed_group_types.items():
        for i, t in enumerate(types):
            known_type(s, t, f"nodeGroups.{name}.instanceTypes[{i}]", problems)
    check_images(s, problems)
    check_image_scripts(s, problems)
    check_jobs(s, problems)
    check_storage(s, s.jobs, problems)
    groups = [("systemNodeGroup", s.system.ami_release, [s.system.instance_type])]
    groups += [(f"nodeGroups.{n}", g.ami_release, list(g.instance_types)) for n, g in s.groups.items()]
    problems.extend(ami_release_problems(s.cluster, groups, s.catalog))
    return problems


def check(s: Sections) -> list[str]:
    """Every rule, the cross-section ones first, then those over the whole stack; returns the problems."""
    problems = cross_section(s)
    check_stack(s, problems)
    return problems
