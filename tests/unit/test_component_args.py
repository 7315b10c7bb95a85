"""Every component refuses an ``args`` key its TypedDict lacks, and a required key left out, nested ones too, before it
registers anything: Python does not check a TypedDict at run time, a key written wrong would be ignored for its
default, a missing one would raise a bare ``KeyError`` after some children were registered, and a Kubernetes minor
outside the catalog has no add-on, autoscaler or node image facts."""

import re
from typing import Any

import pulumi
import pytest

import components
from components.args import key_problems, value_problem
from components.catalog.platform import SUPPORTED_KUBERNETES_VERSIONS
from components.cluster import TrainingClusterArgs
from components.network import TrainingVpcArgs
from components.observability import FleetObservabilityArgs
from components.storage import EfsStorageArgs


@pytest.mark.parametrize("cls", list(components.COMPONENTS), ids=lambda c: c.__name__)
def test_every_component_refuses_an_unknown_key_before_it_registers(cls, monkeypatch) -> None:
    def registered(*_args, **_kwargs):
        raise AssertionError(f"{cls.__name__} registered before it checked its args")

    monkeypatch.setattr(pulumi.ComponentResource, "__init__", registered)
    with pytest.raises(ValueError) as err:
        cls("x", {"not_a_key_of_any_component": 1})
    assert str(err.value).startswith(f"{cls.__name__}('x').args.not_a_key_of_any_component: not a key of ")


def test_the_key_is_named_with_its_path_and_the_nearest_name() -> None:
    vpc = {"cluster_name": "c", "cidr_block": "10.0.0.0/16", "availability_zones": ["a", "b"]}
    vpc |= {"private_subnet_cidrs": ["10.0.0.0/20", "10.0.16.0/20"], "public_subnet_cidrs": ["10.0.128.0/24"] * 2}
    assert key_problems(TrainingVpcArgs, {**vpc, "nat_gateway_per_zone": True}, "v") == [
        "v.nat_gateway_per_zone: not a key of TrainingVpcArgs; did you mean nat_gateway_per_az?"
    ]
    cluster = {"cluster_name": "c", "kubernetes_version": "1.36", "vpc_id": "vpc-1", "private_subnet_ids": ["s"]}
    system = {"instance_type": "m5.large", "min_size": 1, "max_size": 2, "desired_size": 1}
    assert key_problems(
        TrainingClusterArgs, {**cluster, "system_node_group": {**system, "instance_typ": "x"}}, "c"
    ) == ["c.system_node_group.instance_typ: not a key of SystemNodeGroupSpec; did you mean instance_type?"]
    (problem,) = key_problems(FleetObservabilityArgs, {"gpu_groups": [{"name": "gpu", "zzz": 1}]}, "o")[:1]
    assert problem.startswith("o.gpu_groups[0].zzz: not a key of GpuGroupSpec; known keys: ")
    assert key_problems(TrainingVpcArgs, {**vpc, "nat_gateway_per_az": True}, "v") == []
    assert key_problems(TrainingClusterArgs, {**cluster, "system_node_group": system}, "c") == []


def _spec(cls: type) -> Any:
    """A component's args TypedDict."""
    spec = cls.__init__.__annotations__["args"]  # type: ignore[misc]
    return cls.__init__.__globals__[spec] if isinstance(spec, str) else spec  # type: ignore[misc]


#: The components that require some key (MpiOperator requires none).
REQUIRING = [c for c in components.COMPONENTS if _spec(c).__required_keys__]


def test_only_mpi_operator_requires_no_key() -> None:
    assert {c.__name__ for c in components.COMPONENTS} - {c.__name__ for c in REQUIRING} == {"MpiOperator"}


@pytest.mark.parametrize("cls", REQUIRING, ids=lambda c: c.__name__)
def test_every_component_refuses_a_missing_required_key_before_it_registers(cls, monkeypatch) -> None:
    def registered(*_args, **_kwargs):
        raise AssertionError(f"{cls.__name__} registered before it checked its args")

    monkeypatch.setattr(pulumi.ComponentResource, "__init__", registered)
    with pytest.raises(ValueError) as err:
        cls("x", {})
    first = sorted(_spec(cls).__required_keys__)[0]
    assert str(err.value).split("; ")[0] == f"{cls.__name__}('x').args.{first}: missing"


def test_a_missing_nested_key_is_named_with_its_path() -> None:
    cluster = {"cluster_name": "c", "kubernetes_version": "1.36", "vpc_id": "vpc-1", "private_subnet_ids": ["s"]}
    problems = key_problems(TrainingClusterArgs, {**cluster, "system_node_group": {"min_size": 1}}, "c")
    assert problems == [
        f"c.system_node_group.{k}: missing; SystemNodeGroupSpec requires it (docs/reference/components.md lists "
        "each key)"
        for k in ("desired_size", "instance_type", "max_size")
    ]


@pytest.mark.parametrize(
    "cls",
    [c for c in components.COMPONENTS if "kubernetes_version" in _spec(c).__annotations__],
    ids=lambda c: c.__name__,
)
def test_a_kubernetes_minor_outside_the_catalog_is_refused_before_it_registers(cls, monkeypatch) -> None:
    def registered(*_args, **_kwargs):
        raise AssertionError(f"{cls.__name__} registered before it checked its args")

    monkeypatch.setattr(pulumi.ComponentResource, "__init__", registered)
    with pytest.raises(ValueError) as err:
        cls("x", {"kubernetes_version": "1.29"})
    supported = ", ".join(SUPPORTED_KUBERNETES_VERSIONS)
    assert f"{cls.__name__}('x').args.kubernetes_version: '1.29' is not supported; use one of {supported}" in str(
        err.value
    )
    assert value_problem("kubernetes_version", SUPPORTED_KUBERNETES_VERSIONS[-1], "p") == []


def test_a_nested_kubernetes_minor_is_refused_too() -> None:
    efs = {"vpc_id": "v", "subnet_ids": ["s"], "node_security_group_id": "g"}
    (problem,) = key_problems(
        EfsStorageArgs, {**efs, "csi_driver": {"cluster_name": "c", "kubernetes_version": "1.2"}}, "e"
    )
    assert problem.startswith("e.csi_driver.kubernetes_version: '1.2' is not supported; use one of ")


def test_a_plain_field_refuses_an_output_or_another_type() -> None:
    """A field typed as a plain value (a name, a size, a switch, a list of them) is read when the program runs:
    an Output there would print as "Calling __str__ on an Output[T]..." inside resource names, and a float minor or
    a string of subnet ids fails later inside a provider, without the key's path. Each is refused naming the key."""
    vpc = {"cluster_name": "c", "cidr_block": "10.0.0.0/16", "availability_zones": ["a", "b"]}
    vpc |= {"private_subnet_cidrs": ["10.0.0.0/20", "10.0.16.0/20"], "public_subnet_cidrs": ["10.0.128.0/24"] * 2}
    assert key_problems(TrainingVpcArgs, {**vpc, "cluster_name": pulumi.Output.from_input("c")}, "v") == [
        "v.cluster_name: an Output, where a plain value is needed (it is read when the program runs, before any "
        "resource exists: a name, a size, a switch); pass the value itself"
    ]
    assert key_problems(TrainingVpcArgs, {**vpc, "availability_zones": "us-east-1a"}, "v") == [
        "v.availability_zones: 'us-east-1a' is not a list; pass a list of strings"
    ]
    assert key_problems(TrainingVpcArgs, {**vpc, "nat_gateway_per_az": "yes"}, "v") == [
        "v.nat_gateway_per_az: 'yes' is not true or false; pass true or false"
    ]
    cluster = {"cluster_name": "c", "kubernetes_version": "1.36", "vpc_id": "vpc-1", "private_subnet_ids": ["s"]}
    system = {"instance_type": "m5.large", "min_size": 1, "max_size": 2, "desired_size": 1}
    assert key_problems(
        TrainingClusterArgs, {**cluster, "kubernetes_version": 1.36, "system_node_group": system}, "c"
    ) == ["c.kubernetes_version: 1.36 is not a string; pass a string"]
    assert key_problems(TrainingClusterArgs, {**cluster, "system_node_group": {**system, "max_size": True}}, "c") == [
        "c.system_node_group.max_size: True is not a whole number; pass a whole number"
    ]
    efs = {"vpc_id": "vpc-1", "subnet_ids": pulumi.Output.from_input(["s1", "s2"]), "cluster_name": "c"}
    assert [p for p in key_problems(EfsStorageArgs, efs, "e") if p.startswith("e.subnet_ids")] == [
        "e.subnet_ids: an Output, where a list is needed (the component reads its items when the program runs); pass a "
        "list whose items may be Outputs (one Output per item, such as TrainingVpc's private_subnet_id_list)"
    ]
    # the control: an Input field takes an Output
    assert (
        key_problems(
            TrainingClusterArgs,
            {**cluster, "vpc_id": pulumi.Output.from_input("vpc-1"), "system_node_group": system},
            "c",
        )
        == []
    )


@pytest.mark.parametrize(
    "sizes", [(0, 9, 4), (2, 1, 3), (0, 0, 0), (-1, 0, 1)], ids=["desired>max", "min>desired", "max 0", "min<0"]
)
def test_node_group_sizes_are_refused_before_anything_registers(sizes: tuple[int, int, int], monkeypatch) -> None:
    """EKS refuses a scalingConfig outside 0 <= min <= desired <= max, max >= 1 (API_NodegroupScalingConfig); the
    components refuse it first, the cluster's system group before the cluster registers."""
    from components import TrainingCluster, TrainingNodeGroup

    def registered(*_args, **_kwargs):
        raise AssertionError("registered before it checked the sizes")

    monkeypatch.setattr(pulumi.ComponentResource, "__init__", registered)
    lo, want, hi = sizes
    group = {"cluster_name": "c", "node_role_arn": "arn", "subnet_ids": ["s"], "instance_types": ["m5.xlarge"]}
    with pytest.raises(ValueError, match=rf"g: the sizes need 0 <= min_size \({lo}\) <= desired_size \({want}\)"):
        TrainingNodeGroup("g", {**group, "role": "cpu", "min_size": lo, "desired_size": want, "max_size": hi})
    cluster = {"cluster_name": "c", "kubernetes_version": "1.36", "vpc_id": "vpc-1", "private_subnet_ids": ["s"]}
    system = {"instance_type": "m5.large", "min_size": lo, "desired_size": want, "max_size": hi}
    with pytest.raises(ValueError, match=r"^k.system_node_group: the sizes need"):
        TrainingCluster("k", {**cluster, "system_node_group": system})


@pytest.mark.parametrize(
    "private,message",
    [
        (["10.0.0.0/20", "10.1.0.0/20"], "TrainingVpc: subnet 10.1.0.0/20 is outside cidr_block 10.0.0.0/16"),
        (["10.0.0.0/20", "10.0.8.0/21"], "TrainingVpc: subnets 10.0.0.0/20 and 10.0.8.0/21 overlap"),
        (["10.0.0.0/20", "10.0.16.0/33"], "TrainingVpc: "),
    ],
    ids=["outside the VPC", "overlapping", "not a block"],
)
def test_vpc_subnet_blocks_are_refused_before_anything_registers(private: list[str], message: str, monkeypatch) -> None:
    """EC2 refuses a subnet outside its VPC's block or overlapping another only after the VPC exists: the component
    refuses it first."""
    from components import TrainingVpc

    def registered(*_args, **_kwargs):
        raise AssertionError("registered before it checked the blocks")

    monkeypatch.setattr(pulumi.ComponentResource, "__init__", registered)
    vpc = {"cluster_name": "c", "cidr_block": "10.0.0.0/16", "availability_zones": ["a", "b"]}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        TrainingVpc(
            "v", {**vpc, "private_subnet_cidrs": private, "public_subnet_cidrs": ["10.0.128.0/24", "10.0.129.0/24"]}
        )
