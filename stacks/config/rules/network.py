"""Rules on the cluster's name, the VPC and the way zones and entries are written."""

import ipaddress

from components.catalog import EKS_UNSUPPORTED_ZONE_IDS, MIN_CONTROL_PLANE_ZONES, SOURCES
from stacks.config.base import NAME_RE, ZONE_ID_RE, entry_name_problem
from stacks.config.errors import key
from stacks.config.rules.sections import CLUSTER_NAME_MAX, Sections


def check_cluster_name(s: Sections, problems: list[str]) -> None:
    """The cluster name prefixes AWS names."""
    if not NAME_RE.match(s.cluster_name) or len(s.cluster_name) > CLUSTER_NAME_MAX:
        rule = (
            f"must be 1-{CLUSTER_NAME_MAX} lowercase letters, digits and '-', starting and ending with a letter or "
            "digit (it prefixes IAM role names, which are limited to 64 characters)"
        )
        if "clusterName" in s.set_keys:
            problems.append(f"{key('clusterName')}: {s.cluster_name!r} {rule}")
        else:  # the default, <project>-<stack>: not the user's to fix there, but theirs to set
            problems.append(
                f"{key('clusterName')} is not set, and its default {s.cluster_name!r} (the project's name, then the "
                f"stack's) {rule}: set {key('clusterName')}"
            )


def check_network(s: Sections, problems: list[str]) -> None:
    """A new VPC or an existing one, not both; the service range outside the VPC."""
    if "network" in s.set_keys and "existingVpc" in s.set_keys:
        problems.append(
            f"{key('network')} and {key('existingVpc')} are both set; keep {key('existingVpc')} to deploy into "
            f"an existing VPC, or {key('network')} to create one"
        )
    listed = (s.network.availability_zones or []) if s.network is not None else []
    refused = [z for z in listed if z in EKS_UNSUPPORTED_ZONE_IDS]
    if refused and len(listed) - len(refused) < MIN_CONTROL_PLANE_ZONES:
        problems.append(
            f"{key('network.availabilityZones')}: EKS needs control-plane subnets in {MIN_CONTROL_PLANE_ZONES} zones "
            f"it supports, and it refuses {', '.join(refused)} ({SOURCES['eks-network-requirements'].url}); list "
            f"at least {MIN_CONTROL_PLANE_ZONES} zones EKS supports"
        )
    if s.cluster.service_cidr and s.network is not None:
        svc, vpc = ipaddress.IPv4Network(s.cluster.service_cidr), ipaddress.IPv4Network(s.network.vpc_cidr)
        if svc.overlaps(vpc):
            problems.append(
                f"{key('cluster.serviceCidr')}: {svc} overlaps {key('network.vpcCidr')} {vpc}; pick a service range "
                "outside the VPC, e.g. 172.20.0.0/16"
            )


def zone_refs(s: Sections) -> list[tuple[str, str]]:
    """Every zone the stack names, with its config path: the new VPC's, the node groups' and the FSx file system's."""
    refs: list[tuple[str, str]] = []
    if s.network is not None:
        refs += [(f"network.availabilityZones[{i}]", z) for i, z in enumerate(s.network.availability_zones or [])]
    refs += [
        (f"nodeGroups.{n}.availabilityZone", g.availability_zone) for n, g in s.groups.items() if g.availability_zone
    ]
    if s.storage.backend == "fsx" and s.storage.fsx_settings.availability_zone:
        refs.append(("storage.fsx.availabilityZone", s.storage.fsx_settings.availability_zone))
    return refs


def zone_region_problems(refs: list[tuple[str, str]], region: str) -> list[str]:
    """Zone names of another region than ``region``: a zone's name starts with its region's (us-east-1a); a zone ID
    (use1-az1) is checked in the account, where the region's zones are listed."""
    return [
        f"{key(path)}: {z} is not a zone of aws:region {region}; name one of its zones (such as {region}a) or a zone "
        "ID, or change aws:region"
        for path, z in refs
        if not ZONE_ID_RE.match(z) and not z.startswith(region)
    ]


def check_zone_forms(s: Sections, problems: list[str]) -> None:
    """Zones are written one way in a stack, all names or all zone IDs: which name is which ID is only known in
    the account, so rules comparing zones offline (a group in the VPC's zones, FSx beside its readers) need one form."""
    refs = zone_refs(s)
    ids = [(path, z) for path, z in refs if ZONE_ID_RE.match(z)]
    names = [(path, z) for path, z in refs if not ZONE_ID_RE.match(z)]
    if ids and names:
        path, z = names[0]
        id_path, id_z = ids[0]
        problems.append(
            f"{key(path)}: {z} is a zone name while {key(id_path)} is a zone ID ({id_z}); write every zone of the "
            "stack the same way, all names or all IDs"
        )


def check_entry_names(s: Sections, problems: list[str]) -> None:
    """Names of node groups, jobs, images and datasets: DNS labels within :data:`ENTRY_NAME_MAX` (jobs start with a
    letter: :data:`~stacks.config.base.JOB_NAME_RE`)."""
    for section, names in s.entry_names.items():
        for name in names:
            why = entry_name_problem(section, name, "it")
            if why is not None:
                problems.append(f"{key(f'{section}.{name}')}: {why}")
