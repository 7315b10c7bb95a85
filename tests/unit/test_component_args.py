"""Every component refuses an ``args`` key its TypedDict lacks, nested ones too, before it registers anything: Python
does not check a TypedDict at run time, and a key written wrong would be ignored for its default."""

import pulumi
import pytest

import components
from components.args import unknown_keys
from components.cluster import TrainingClusterArgs
from components.network import TrainingVpcArgs
from components.observability import FleetObservabilityArgs


@pytest.mark.parametrize("cls", list(components.COMPONENTS), ids=lambda c: c.__name__)
def test_every_component_refuses_an_unknown_key_before_it_registers(cls, monkeypatch) -> None:
    def registered(*_args, **_kwargs):
        raise AssertionError(f"{cls.__name__} registered before it checked its args")

    monkeypatch.setattr(pulumi.ComponentResource, "__init__", registered)
    with pytest.raises(ValueError) as err:
        cls("x", {"not_a_key_of_any_component": 1})
    assert str(err.value).startswith(f"{cls.__name__}('x').args.not_a_key_of_any_component: not a key of ")


def test_the_key_is_named_with_its_path_and_the_nearest_name() -> None:
    assert unknown_keys(TrainingVpcArgs, {"cluster_name": "c", "nat_gateway_per_zone": True}, "v") == [
        "v.nat_gateway_per_zone: not a key of TrainingVpcArgs; did you mean nat_gateway_per_az?"
    ]
    assert unknown_keys(TrainingClusterArgs, {"system_node_group": {"instance_typ": "m5.large"}}, "c") == [
        "c.system_node_group.instance_typ: not a key of SystemNodeGroupSpec; did you mean instance_type?"
    ]
    (problem,) = unknown_keys(FleetObservabilityArgs, {"gpu_groups": [{"name": "gpu", "zzz": 1}]}, "o")
    assert problem.startswith("o.gpu_groups[0].zzz: not a key of GpuGroupSpec; known keys: ")
    assert unknown_keys(TrainingVpcArgs, {"cluster_name": "c", "nat_gateway_per_az": True}, "v") == []
