"""Which availability zones a new VPC uses, decided by zone ID: one function for the program and for preflight.

Zone names map to different physical zones (zone IDs) in every account, and EKS refuses control-plane subnets in
some zone IDs (``EKS_UNSUPPORTED_ZONE_IDS``, e.g. use1-az3). So the config may name a zone by name
(``us-east-1a``) or by ID (``use1-az1``); zones are chosen automatically only among IDs EKS supports, and a zone
the user pins that EKS refuses still gets its subnets (nodes may run there) but stays out of the cluster's
control-plane subnets, of which EKS needs two zones.
"""

from dataclasses import dataclass
from typing import Optional, Sequence

from components.catalog import EKS_UNSUPPORTED_ZONE_IDS, MIN_CONTROL_PLANE_ZONES
from stacks.config import ConfigError, StackConfig, key


@dataclass(frozen=True, order=True)
class Zone:
    """One availability zone of the account: its name and its zone ID."""

    name: str
    zone_id: str

    @property
    def control_plane(self) -> bool:
        """EKS accepts control-plane subnets in this zone."""
        return self.zone_id not in EKS_UNSUPPORTED_ZONE_IDS

    def __str__(self) -> str:
        return f"{self.name} ({self.zone_id})"

    def matches(self, ref: str) -> bool:
        """``ref`` is this zone's name or ID."""
        return ref in (self.name, self.zone_id)


def find_zone(ref: str, zones: Sequence[Zone]) -> Optional[Zone]:
    """The zone named ``ref`` (a name or an ID) among ``zones``."""
    return next((z for z in zones if z.matches(ref)), None)


def control_plane_zones(zones: Sequence[Zone]) -> list[Zone]:
    """The zones whose subnets the EKS control plane may use."""
    return [z for z in zones if z.control_plane]


def _listing(zones: Sequence[Zone]) -> str:
    return ", ".join(str(z) for z in zones)


def zone_pins(cfg: StackConfig) -> dict[str, str]:
    """The zones node groups and an FSx file system are pinned to, by key (a zone name or ID each)."""
    pins = {f"nodeGroups.{g}.availabilityZone": ng.availability_zone for g, ng in cfg.node_groups.items()}
    if cfg.storage.backend == "fsx":
        pins["storage.fsx.availabilityZone"] = cfg.storage.fsx_settings.availability_zone
    return {k: str(v) for k, v in pins.items() if v}


def choose_zones(cfg: StackConfig, available: Sequence[Zone]) -> list[Zone]:
    """The zones a new VPC uses, given the region's available zones: ``network.availabilityZones`` when listed
    (each must be available), else the zones node groups (and an FSx file system) are pinned to plus the first other
    available zones that EKS supports (by name order), ``availabilityZoneCount`` in all, and at least two EKS supports.
    The program (through the ``aws.getAvailabilityZones`` invoke) and preflight (through boto3) both call this.

    Raises :class:`ConfigError` naming the key when the region cannot satisfy the configuration.
    """
    assert cfg.network is not None, "choose_zones is for a new VPC (network)"
    avail = sorted(available)
    problems = []
    pins = zone_pins(cfg)
    pinned: list[Zone] = []
    for path, ref in pins.items():
        zone = find_zone(ref, avail)
        if zone is None:
            problems.append(
                f"{key(path)}: {ref} is not an available zone of this region; choose a name or ID from "
                f"{_listing(avail)}"
            )
        elif zone not in pinned:
            pinned.append(zone)
    if problems:
        raise ConfigError(problems)
    supported = control_plane_zones(avail)
    if cfg.network.availability_zones:
        listed = [(ref, find_zone(ref, avail)) for ref in cfg.network.availability_zones]
        missing = [ref for ref, z in listed if z is None]
        if missing:
            raise ConfigError(
                [
                    f"{key('network.availabilityZones')}: {', '.join(missing)} not available in this region; choose "
                    f"names or IDs from {_listing(avail)}"
                ]
            )
        chosen = [z for _ref, z in listed if z is not None]
        if len(control_plane_zones(chosen)) < MIN_CONTROL_PLANE_ZONES:
            refused = [z for z in chosen if not z.control_plane]
            raise ConfigError(
                [
                    f"{key('network.availabilityZones')}: EKS needs control-plane subnets in {MIN_CONTROL_PLANE_ZONES} "
                    f"zones it supports; {_listing(refused) or 'none'} it refuses; add zones from {_listing(supported)}"
                ]
            )
        return chosen
    count = cfg.network.availability_zone_count
    chosen = list(pinned)
    for z in supported:
        if len(chosen) >= count and len(control_plane_zones(chosen)) >= MIN_CONTROL_PLANE_ZONES:
            break
        if z not in chosen:
            chosen.append(z)
    if len(chosen) < count or len(control_plane_zones(chosen)) < MIN_CONTROL_PLANE_ZONES:
        raise ConfigError(
            [
                f"{key('network.availabilityZoneCount')}: the region has {len(supported)} zones EKS supports "
                f"({_listing(supported)}) of {len(avail)}, asked for {count}; lower it"
            ]
        )
    return sorted(chosen)


@dataclass(frozen=True)
class RegionZones:
    """The region's available zones, as ``pulumi up`` reads them: which zones a configuration's new VPC uses
    (:func:`choose_zones`), and whether a zone is available now."""

    zones: tuple[Zone, ...]

    def of(self, cfg: StackConfig) -> list[str]:
        """The names of the zones ``cfg``'s new VPC uses, in its subnets' order; :class:`ConfigError` where the region
        cannot place it."""
        return [z.name for z in choose_zones(cfg, self.zones)]

    def has(self, ref: str) -> bool:
        """Whether the zone named ``ref`` (a name or an ID) is available now."""
        return find_zone(ref, self.zones) is not None
