"""Decisions derived from the configuration that both the config rules and the plan read (where the FSx file
system lives, which groups read the shared claim, which datasets it imports)."""

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from components.catalog import (
    Catalog,
)
from components.scheduling import SYSTEM_ROLE
from stacks.config.datasets import DatasetConfig
from stacks.config.errors import key
from stacks.config.jobs import JobConfig
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


@dataclass(frozen=True)
class _Where:
    """How the file system's place is named: a zone (a new VPC) or a subnet (an existing VPC)."""

    existing_vpc: bool
    explicit: Optional[str]
    """``storage.fsx.availabilityZone`` or ``storage.fsx.subnetId``, as set."""
    readers: Mapping[str, Sequence[str]]

    @property
    def field(self) -> str:
        return "subnetId" if self.existing_vpc else "availabilityZone"

    @property
    def unit(self) -> str:
        return "subnet" if self.existing_vpc else "zone"

    @property
    def explicit_key(self) -> str:
        return key(f"storage.fsx.{self.field}")

    def group_key(self, group: str) -> str:
        return key(f"nodeGroups.{group}.{self.field}")

    def of(self, g: NodeGroupConfig) -> Optional[str]:
        return g.subnet_id if self.existing_vpc else g.availability_zone

    def jobs_of(self, group: str) -> str:
        names = list(self.readers[group])
        return f"job{'s' if len(names) > 1 else ''} {', '.join(names)}"


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
    w = _Where(existing_vpc, fsx.subnet_id if existing_vpc else fsx.availability_zone, readers)
    pinned = {name: at for name, g in groups.items() if (at := w.of(g)) is not None}
    pinned_readers = {g: pinned[g] for g in readers if g in pinned}
    found = _where_readers_are(w, pinned_readers) if pinned_readers else _where_without_readers(w, pinned)
    where, source, problems = found
    if where is None:
        return None, problems
    clients = sorted((n for n, at in pinned.items() if at == where), key=lambda n: (n not in readers, n))
    efa_clients = tuple(n for n in clients if groups[n].uses_efa(catalog))
    if fsx.efa and not efa_clients:
        families = ", ".join(sorted({t.family for t in catalog.instance_types.values() if t.supports_efa}))
        problems.append(
            f"{key('storage.fsx.efa')}: an EFA-enabled file system needs EFA clients, and no EFA worker group runs in "
            f"{where}; set efa: false, or pin an EFA group ({families}) there"
        )
    return FsxLocation(
        zone=None if existing_vpc else where,
        subnet_id=where if existing_vpc else None,
        key=source,
        client_groups=tuple(clients),
        efa_client_groups=efa_clients,
    ), problems


def _where_readers_are(w: _Where, pinned_readers: Mapping[str, str]) -> tuple[str, str, list[str]]:
    """The place of the first pinned group whose jobs mount the claim, its key, and every other reader or the
    explicit key that names another place."""
    first = next(iter(pinned_readers))
    where, source = pinned_readers[first], w.group_key(first)
    problems = [
        f"{w.group_key(g)}: {at} differs from {source} ({where}), and the jobs of both "
        f"groups mount the FSx for Lustre file system ({first}: {w.jobs_of(first)}; {g}: {w.jobs_of(g)}), "
        f"which lives in one {w.unit}; pin {g} to {where}, run those jobs on one group, or use "
        f"{key('storage.backend')}: efs (a mount target in every zone)"
        for g, at in pinned_readers.items()
        if at != where
    ]
    if w.explicit is not None and w.explicit != where:
        problems.append(
            f"{w.explicit_key}: {w.explicit} is not where the jobs that mount the file system run ({source} is "
            f"{where}: {w.jobs_of(first)}); the file system must be in their {w.unit} (cross-zone traffic costs and "
            f"slows): set it to {where} or remove it"
        )
    return where, source, problems


def _where_without_readers(w: _Where, pinned: Mapping[str, str]) -> tuple[Optional[str], str, list[str]]:
    """With no pinned group whose jobs mount the claim: the explicit key, else the one place every pinned group
    shares, else a problem asking for the key."""
    if w.explicit is not None:
        return w.explicit, w.explicit_key, []
    if len(set(pinned.values())) == 1:
        name = sorted(pinned)[0]
        return pinned[name], w.group_key(name), []
    if pinned:
        listing = ", ".join(f"{n} ({z})" for n, z in sorted(pinned.items()))
        problem = (
            f"{w.explicit_key}: several groups are pinned ({listing}) and no job runs on them; an FSx file system "
            f"lives in one {w.unit}: set it to that of the group that reads the data"
        )
    else:
        problem = (
            f"{w.explicit_key}: an FSx file system lives in one {w.unit} and no worker group is pinned to one; set "
            f"it, or pin the group whose jobs read the data (nodeGroups.<group>.{w.field}) and the file system "
            "follows it"
        )
    return None, w.explicit_key, [problem]
