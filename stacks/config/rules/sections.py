"""What every rule reads: the parsed sections (:class:`Sections`) and the lookups rules share."""

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from components.catalog import (
    Catalog,
    InstanceType,
)
from components.image.dockerfile import Dockerfile, read_dockerfile
from stacks.config.cluster import ClusterConfig
from stacks.config.datasets import DatasetConfig
from stacks.config.errors import key
from stacks.config.images import ImageConfig
from stacks.config.jobs import JobConfig
from stacks.config.network import ExistingVpcConfig, NetworkConfig
from stacks.config.nodegroups import NodeGroupConfig, SystemNodeGroupConfig
from stacks.config.operations import OperationsConfig
from stacks.config.storage import StorageConfig
from stacks.config.teams import TeamConfig

#: Cluster names prefix IAM role names (64 characters at most).
CLUSTER_NAME_MAX = 40


@dataclass
class Sections:
    """The parsed sections a rule looks at, and which paths failed their own validation."""

    set_keys: set[str]
    """Top-level keys the stack sets."""
    cluster_name: str
    network: Optional[NetworkConfig]
    existing_vpc: Optional[ExistingVpcConfig]
    cluster: ClusterConfig
    system: SystemNodeGroupConfig
    groups: dict[str, NodeGroupConfig]
    """Worker groups that passed their own validation."""
    group_names: list[str]
    """Every worker group the stack names (valid or not)."""
    catalog: Catalog
    images: dict[str, ImageConfig]
    """Every image (the default training image included)."""
    datasets: dict[str, DatasetConfig]
    jobs: dict[str, JobConfig]
    """Jobs that passed their own validation."""
    job_names: list[str]
    """Every job the stack names (valid or not), the benchmark's experiments included."""
    job_paths: dict[str, str] = field(default_factory=dict)
    """Config paths of jobs that are not under ``jobs`` (the benchmark's experiments); default ``jobs.<name>``."""
    entry_names: dict[str, list[str]] = field(default_factory=dict)
    """Every entry name of each map section (``nodeGroups``, ``jobs``, ``images``, ``datasets``) as written."""
    storage: StorageConfig = field(default_factory=StorageConfig)
    failed: set[str] = field(default_factory=set)
    """Config paths (``cluster``, ``nodeGroups.gpu``) whose own validation failed."""
    failed_group_types: dict[str, list[str]] = field(default_factory=dict)
    """Instance types named by groups that failed their own validation (still checked against the catalog)."""
    image_folders: dict[str, Path] = field(default_factory=dict)
    """Each built image's folder (:func:`stacks.bundle.context_folder`)."""
    project_dir: Path = field(default_factory=Path.cwd)
    """The Pulumi project's folder (image contexts are its folders)."""
    raw: Mapping[str, str] = field(default_factory=dict)
    """Each top-level key as the stack sets it (objects as JSON text)."""
    operations: OperationsConfig = field(default_factory=OperationsConfig)
    teams: dict[str, TeamConfig] = field(default_factory=dict)
    """Teams that passed their own validation."""
    team_names: list[str] = field(default_factory=list)
    """Every team the stack names (valid or not)."""
    team_entry_problems: list[str] = field(default_factory=list)
    """The teams' own validation problems (reported after the jobs-only rules)."""


def known_type(s: "Sections", name: str, path: str, problems: list[str]) -> Optional[InstanceType]:
    it = s.catalog.get(name)
    # a failed facts entry (or instanceFacts itself) is reported there
    if it is None and f"instanceFacts.{name}" not in s.failed and "instanceFacts" not in s.failed:
        known = sorted(s.catalog.instance_types)
        # EC2's type names are lowercase (m5.xlarge): a capital or a dropped letter is a near miss, named first
        near = [k for k in known if k == name.lower().strip()] or difflib.get_close_matches(
            name, known, n=1, cutoff=0.8
        )
        hint = f"did you mean {near[0]}? " if near else ""
        problems.append(
            f"{key(path)}: unknown instance type {name!r}; {hint}use one of {', '.join(known)}, "
            f"or describe it under {key('instanceFacts')}.{name} (vcpus, memoryMib, gpus, ..., source)"
        )
    return it


def in_existing_vpc(s: "Sections") -> bool:
    """The stack deploys into an existing VPC: ``existingVpc`` is set (even when it failed its own validation,
    so rules about subnets do not tell the user to set what they did set)."""
    return s.existing_vpc is not None or "existingVpc" in s.failed


def job_path(s: Sections, name: str) -> str:
    """The config path of a job: ``jobs.<name>``, or ``benchmark.experiments.<name>`` for an experiment."""
    return s.job_paths.get(name, f"jobs.{name}")


def named(s: Sections, section: str, name: str) -> bool:
    """``name`` is an entry of the map ``section`` as written (perhaps one that failed its own validation, which is
    reported there), or the section itself failed (its entries are unknown)."""
    return section in s.failed or name in s.entry_names.get(section, [])


def image_dockerfile(s: Sections, name: str, image: ImageConfig) -> Optional[Dockerfile]:
    """The Dockerfile of a built image (its folder resolved as check_images resolves it), or ``None`` (prebuilt, or
    a folder without it: reported by check_images)."""
    if image.context is None:
        return None
    folder = s.image_folders.get(name, s.project_dir / image.context)
    if not (folder / image.dockerfile).is_file():
        return None
    return read_dockerfile(folder, image.dockerfile)


def reference_cycle(refers: dict[str, list[str]]) -> Optional[list[str]]:
    """A cycle of references (``after``, or ``$(NAME)`` in ``env``) as a path ``a -> b -> a``, or ``None``."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> Optional[list[str]]:
        state[n] = 1
        path.append(n)
        for m in refers.get(n, []):
            if state.get(m) == 1:
                return path[path.index(m) :] + [m]
            if m in refers and state.get(m) is None and (found := visit(m)):
                return found
        state[n] = 2
        path.pop()
        return None

    for n in sorted(refers):
        if state.get(n) is None and (found := visit(n)):
            return found
    return None
