"""The box's stand-in of the cluster autoscaler for ProvisioningRequests: how it reads a pod's requests and a node's
room (the rules :mod:`stacks.box.provisioner` restates), and the chart RBAC the autoscaler needs per chart version."""

from fractions import Fraction

from components.quantities import value_of as quantity
from stacks.box.provisioner import Slot, pod_requests, tolerates


def test_quantities_read_as_kubernetes_writes_them() -> None:
    assert quantity("500m") == Fraction(1, 2)
    assert quantity("2") == 2
    assert quantity("64Gi") == 64 * 2**30
    assert quantity("1.5") == Fraction(3, 2)
    assert quantity("10240Mi") == 10 * 2**30
    assert quantity("1k") == 1000


def test_a_pods_requests_are_its_effective_requests_with_limits_for_missing_ones() -> None:
    spec = {
        "initContainers": [{"name": "w", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "8"}}},
            {"name": "b", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}},
        ],
    }
    asks = pod_requests(spec)
    assert asks["cpu"] == 4  # the init container's 4 > the containers' 3
    assert asks["memory"] == 2 * 2**30
    assert asks["nvidia.com/gpu"] == 8  # the limit stands for the missing request
    assert asks["pods"] == 1


def test_a_slot_admits_a_pod_by_selector_taints_and_room() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    slot = Slot({"role": "gpu"}, [taint], {"cpu": Fraction(10), "pods": Fraction(110), "nvidia.com/gpu": Fraction(8)})
    spec = {"nodeSelector": {"role": "gpu"}, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    asks = {"cpu": Fraction(6), "nvidia.com/gpu": Fraction(8), "pods": Fraction(1)}
    assert slot.admits(spec, asks)
    assert not slot.admits({**spec, "nodeSelector": {"role": "cpu"}}, asks)
    assert not slot.admits({"nodeSelector": {"role": "gpu"}}, asks)  # the taint is not tolerated
    slot.take(asks)
    assert not slot.admits(spec, asks)  # no room left for a second one
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([{"key": "other", "operator": "Exists"}], taint)
