"""Decisions derived from the configuration that both the config rules and the plan read (where the FSx file
system lives, which groups read the shared claim, which datasets it imports)."""

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from components.catalog import (
    Catalog,
)
from components.scheduling import SYSTEM_ROLE
from stacks.config.errors import key
from stacks.config.jobs import (
    DatasetConfig,
    JobConfig,
)
from stacks.config.nodegroups import NodeGroupConfig
from stacks.config.storage import FsxConfig, StorageConfig

#: The shared volume's folder of the jobs' runs: a job's default output folder is ``runs/<run id>``.
RUNS_DIR = "runs"


@dataclass(frozen=True)
class FsxLocation:
    """Where the FSx file system lives: one zone (a new VPC) or one subnet (an existing VPC)."""

    zone: Optional[str]
    """The zone (new VPC), else ``None``."""
    subnet_id: Optional[str]
    """The private subnet (existing VPC), else ``None``."""
    key: str
    """The config key the location comes from (``storage.fsx.availabilityZone`` or a group's zone key)."""
    client_groups: tuple[str, ...]
    """Worker groups pinned to the same place (the groups of the jobs first)."""
    efa_client_groups: tuple[str, ...]
    """Those of them that use EFA (clients of an EFA-enabled file system)."""


def imported(storage: StorageConfig, dataset: DatasetConfig) -> bool:
    """The FSx file system imports ``dataset`` from its linked bucket (an S3 prefix): no staging Job copies it."""
    return storage.backend == "fsx" and dataset.is_prefix


def claim_readers(jobs: Mapping[str, JobConfig]) -> dict[str, list[str]]:
    """Worker groups whose jobs mount the shared claim (every job does), each with its jobs, in config order.
    The system group is left out: it spans the VPC's zones and only runs light jobs."""
    out: dict[str, list[str]] = {}
    for name, job in jobs.items():
        if job.node_group is not None and job.node_group != SYSTEM_ROLE:
            out.setdefault(job.node_group, []).append(name)
    return out


def fsx_location(
    fsx: FsxConfig,
    groups: Mapping[str, NodeGroupConfig],
    readers: Mapping[str, Sequence[str]],
    existing_vpc: bool,
    catalog: Catalog,
) -> tuple[Optional[FsxLocation], list[str]]:
    """The one zone (or subnet) of the FSx file system and the problems that prevent choosing it.

    The rule: the file system is in the zone of **every pinned worker group whose jobs mount the shared
    claim** (``readers``: group -> its jobs; in practice the GPU/EFA groups that train), because Lustre
    traffic across zones costs and slows. So those groups must share one zone (else
    ``nodeGroups.<group>.availabilityZone`` is an error naming the groups, their jobs and the fixes), and
    ``storage.fsx.availabilityZone`` may only repeat it. Unpinned groups (several zones) and the system group
    reach the file system from any zone and do not decide. Without a pinned reader: the explicit key, else
    the zone of the only pinned group; several pinned groups without jobs, or none pinned, need the key.
    With an existing VPC the same holds for subnets (``subnetId``). The plan and these rules both call this.
    """
    fld = "subnetId" if existing_vpc else "availabilityZone"
    unit = "subnet" if existing_vpc else "zone"
    explicit = fsx.subnet_id if existing_vpc else fsx.availability_zone
    explicit_key = key(f"storage.fsx.{fld}")

    def place(g: NodeGroupConfig) -> Optional[str]:
        return g.subnet_id if existing_vpc else g.availability_zone

    def jobs_of(group: str) -> str:
        names = list(readers[group])
        return f"job{'s' if len(names) > 1 else ''} {', '.join(names)}"

    pinned = {name: at for name, g in groups.items() if (at := place(g)) is not None}
    pinned_readers = {g: pinned[g] for g in readers if g in pinned}
    problems: list[str] = []
    where: Optional[str] = None
    source = explicit_key
    if pinned_readers:
        first = next(iter(pinned_readers))
        where, source = pinned_readers[first], key(f"nodeGroups.{first}.{fld}")
        for g, at in pinned_readers.items():
            if at != where:
                problems.append(
                    f"{key(f'nodeGroups.{g}.{fld}')}: {at} differs from {source} ({where}), and the jobs of both "
                    f"groups mount the FSx for Lustre file system ({first}: {jobs_of(first)}; {g}: {jobs_of(g)}), "
                    f"which lives in one {unit}; pin {g} to {where}, run those jobs on one group, or use "
                    f"{key('storage.backend')}: efs (a mount target in every zone)"
                )
        if explicit is not None and explicit != where:
            problems.append(
                f"{explicit_key}: {explicit} is not where the jobs that mount the file system run ({source} is "
                f"{where}: {jobs_of(first)}); the file system must be in their {unit} (cross-zone traffic costs and "
                f"slows): set it to {where} or remove it"
            )
    elif explicit is not None:
        where = explicit
    elif len(set(pinned.values())) == 1:
        name = sorted(pinned)[0]
        where, source = pinned[name], key(f"nodeGroups.{name}.{fld}")
    elif pinned:
        listing = ", ".join(f"{n} ({z})" for n, z in sorted(pinned.items()))
        problems.append(
            f"{explicit_key}: several groups are pinned ({listing}) and no job runs on them; an FSx file system lives "
            f"in one {unit}: set it to that of the group that reads the data"
        )
    else:
        problems.append(
            f"{explicit_key}: an FSx file system lives in one {unit} and no worker group is pinned to one; set it, or "
            f"pin the group whose jobs read the data (nodeGroups.<group>.{fld}) and the file system follows it"
        )
    if where is None:
        return None, problems
    clients = sorted((n for n, w in pinned.items() if w == where), key=lambda n: (n not in readers, n))
    efa_clients = tuple(n for n in clients if groups[n].uses_efa(catalog))
    if fsx.efa and not efa_clients:
        problems.append(
            f"{key('storage.fsx.efa')}: an EFA-enabled file system needs EFA clients, and no EFA worker group runs in "
            f"{where}; set efa: false, or pin an EFA group (p4d, p5, p5en, p6-b200) there"
        )
    return FsxLocation(
        zone=None if existing_vpc else where,
        subnet_id=where if existing_vpc else None,
        key=source,
        client_groups=tuple(clients),
        efa_client_groups=efa_clients,
    ), problems
