"""Rules on the node groups: instance types against the catalog, EFA, network topology, names."""

from components.catalog import (
    INSTANCE_TYPES,
    NETWORK_TOPOLOGY,
    InstanceType,
)
from components.nodeplan import (
    InconsistentFacts,
    efa_profile,
)
from stacks.config.errors import key
from stacks.config.nodegroups import NodeGroupConfig
from stacks.config.rules.sections import Sections, in_existing_vpc, known_type


def check_system_group(s: Sections, problems: list[str]) -> None:
    """The system group runs add-ons on a known CPU type."""
    it = known_type(s, s.system.instance_type, "systemNodeGroup.instanceType", problems)
    if it is not None and it.is_gpu:
        problems.append(
            f"{key('systemNodeGroup.instanceType')}: {it.name} is a GPU type; the system group runs add-ons only, "
            "use a small CPU type such as m5.large"
        )


def check_group_names(s: Sections, problems: list[str]) -> None:
    """Group names: not ``system``; at least one group when the key is set."""
    for name in s.group_names:
        path = f"nodeGroups.{name}"
        if name == "system":
            problems.append(f"{key(path)}: 'system' is reserved for systemNodeGroup; rename the group")
    if "nodeGroups" in s.set_keys and not s.group_names and "nodeGroups" not in s.failed:
        problems.append(f"{key('nodeGroups')}: define at least one worker group, or remove the key")


def check_group(s: Sections, name: str, g: NodeGroupConfig, problems: list[str]) -> None:
    """One worker group against the catalog, the network and the cluster."""
    path = f"nodeGroups.{name}"
    facts = [known_type(s, t, f"{path}.instanceTypes[{i}]", problems) for i, t in enumerate(g.instance_types)]
    present = [f for f in facts if f is not None]
    if len({f.gpus for f in present}) > 1:
        problems.append(
            f"{key(f'{path}.instanceTypes')}: {', '.join(f'{f.name} ({f.gpus} GPUs)' for f in present)} have different "
            "GPU counts; pods request a whole node's GPUs, so put them in separate groups"
        )
    if g.subnet_id is not None:
        if s.existing_vpc is None and "existingVpc" not in s.failed:  # a failed existingVpc is reported there
            problems.append(f"{key(f'{path}.subnetId')}: only for existingVpc; with a new VPC set availabilityZone")
        elif s.existing_vpc is not None and g.subnet_id not in s.existing_vpc.private_subnet_ids:
            problems.append(
                f"{key(f'{path}.subnetId')}: {g.subnet_id} is not one of {key('existingVpc.privateSubnetIds')}"
            )
    if g.availability_zone is not None:
        if in_existing_vpc(s):
            problems.append(f"{key(f'{path}.availabilityZone')}: with existingVpc pin the group with subnetId instead")
        elif (
            s.network is not None
            and s.network.availability_zones
            and g.availability_zone not in s.network.availability_zones
        ):
            problems.append(
                f"{key(f'{path}.availabilityZone')}: {g.availability_zone} is not one of "
                f"{key('network.availabilityZones')} {s.network.availability_zones}"
            )
    if not present or len(present) != len(facts):
        return
    check_efa(s, path, g, present, problems)
    check_topology(path, g, present, problems)


def check_efa(s: Sections, path: str, g: NodeGroupConfig, facts: list[InstanceType], problems: list[str]) -> None:
    """EFA on the group's types: supported, one consistent interface count, one zone, a VPC CNI that
    supports efa-only interfaces."""
    if g.efa and not all(f.supports_efa for f in facts):
        without = ", ".join(f.name for f in facts if not f.supports_efa)
        with_efa = ", ".join(sorted(n for n, t in INSTANCE_TYPES.items() if t.supports_efa))
        problems.append(
            f"{key(f'{path}.efa')}: {without} has no EFA; remove efa: true or use a type with EFA ({with_efa})"
        )
        return
    if not g.uses_efa(s.catalog):
        return
    for f in facts:
        try:
            efa_profile(f)
        except InconsistentFacts as exc:
            where = f"instanceFacts.{f.name}" if f.user_supplied else f"{path}.instanceTypes"
            problems.append(f"{key(where)}: {exc}")
            return
    if len({f.max_efa_interfaces for f in facts}) > 1:
        problems.append(
            f"{key(f'{path}.instanceTypes')}: EFA groups need one interface count; "
            f"{', '.join(f'{f.name} ({f.max_efa_interfaces})' for f in facts)} differ, split them into groups"
        )
    if not g.single_zone:
        fld = "subnetId" if in_existing_vpc(s) else "availabilityZone"
        where = "a private subnet of that zone" if fld == "subnetId" else "the zone where its capacity is"
        if g.efa is None:  # on by default for the type: the user may not want EFA at all
            off = (
                "set efa: false (or capacityType: SPOT, whose groups default to efa: false) to spread the group over "
                "the VPC's zones without EFA"
            )
            why = f"efa defaults to true for {facts[0].name}, and "
        else:
            off = "remove efa: true to spread the group over the VPC's zones without EFA" + (
                " (what spot capacity needs: it is found across zones)" if g.capacity_type == "SPOT" else ""
            )
            why = ""
        problems.append(
            f"{key(f'{path}.{fld}')}: {why}EFA groups run in one zone (with a cluster placement group); either set "
            f"{fld} ({where}) to keep EFA, or {off}"
        )


def check_topology(path: str, g: NodeGroupConfig, facts: list[InstanceType], problems: list[str]) -> None:
    """``topology: true`` needs types whose nodes all carry the same EC2 network-topology labels (the catalog's
    :data:`~components.catalog.NETWORK_TOPOLOGY`): Kueue places a topology-aware job only on nodes that carry every
    level's label, so on others it would never start."""
    if not g.topology:
        return
    layers = {f.name: NETWORK_TOPOLOGY[f.name].layers if f.name in NETWORK_TOPOLOGY else 0 for f in facts}
    if 0 in layers.values():
        without = ", ".join(n for n, v in layers.items() if not v)
        problems.append(
            f"{key(f'{path}.topology')}: {without} nodes carry no EC2 network-topology labels; remove "
            f"topology: true or use a type that has them ({', '.join(sorted(NETWORK_TOPOLOGY))})"
        )
    elif len(set(layers.values())) > 1:
        problems.append(
            f"{key(f'{path}.topology')}: the group's types have different network layers "
            f"({', '.join(f'{n} {v}' for n, v in layers.items())}); split them into groups"
        )
