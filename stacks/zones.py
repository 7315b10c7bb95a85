"""Which availability zones a new VPC uses: one function for the program and for preflight."""

from typing import Sequence

from stacks.config import ConfigError, StackConfig, key


def choose_zones(cfg: StackConfig, available: Sequence[str]) -> list[str]:
    """The zones a new VPC uses, given the region's available zones: ``network.availabilityZones`` when
    listed (each must be available), else the zones node groups (and an FSx file system) are pinned to
    plus the first other available zones (sorted), ``availabilityZoneCount`` in all. The program (through the
    ``aws.getAvailabilityZones`` invoke) and preflight (through boto3) both call this.

    Raises :class:`ConfigError` naming the key when the region cannot satisfy the configuration.
    """
    assert cfg.network is not None, "choose_zones is for a new VPC (network)"
    avail = sorted(available)
    pinned = {f"nodeGroups.{g}.availabilityZone": ng.availability_zone for g, ng in cfg.node_groups.items() if ng.availability_zone}
    if cfg.storage.backend == "fsx" and cfg.storage.fsx_settings.availability_zone:
        pinned["storage.fsx.availabilityZone"] = cfg.storage.fsx_settings.availability_zone
    bad = [
        f"{key(path)}: {az} is not available in this region; choose from {', '.join(avail)}"
        for path, az in pinned.items()
        if az not in avail
    ]
    if bad:
        raise ConfigError(bad)
    if cfg.network.availability_zones:
        missing = [z for z in cfg.network.availability_zones if z not in avail]
        if missing:
            raise ConfigError(
                [f"{key('network.availabilityZones')}: {', '.join(missing)} not available in this region; choose from {', '.join(avail)}"]
            )
        return list(cfg.network.availability_zones)
    count = cfg.network.availability_zone_count
    if len(avail) < count:
        raise ConfigError(
            [
                f"{key('network.availabilityZoneCount')}: the region has {len(avail)} zones ({', '.join(avail)}), "
                f"asked for {count}; lower it"
            ]
        )
    chosen = sorted(set(pinned.values()))
    for az in avail:
        if len(chosen) >= count:
            break
        if az not in chosen:
            chosen.append(az)
    return sorted(chosen)
