"""The node labels a group may carry, as the kubelet reads them (``--node-labels``): it refuses to start with one in
the ``kubernetes.io`` or ``k8s.io`` namespace, or a subdomain of them, outside its own ``kubelet.kubernetes.io`` and
``node.kubernetes.io`` (``ValidateKubeletFlags``, kubernetes cmd/kubelet/app/options/options.go)."""

import pytest

from stacks.config.base import kubelet_refuses_label


@pytest.mark.parametrize(
    "key, refused",
    [
        ("node-role.kubernetes.io/worker", True),
        ("kubernetes.io/role", True),
        ("example.k8s.io/x", True),
        ("node-restriction.kubernetes.io/pool", True),
        ("node.kubernetes.io/pool", False),
        ("kubelet.kubernetes.io/x", False),
        ("team.node.kubernetes.io/x", False),
        ("kubernetes.io.example.com/x", False),
        ("example.com/x", False),
        ("team", False),
    ],
)
def test_the_kubelets_namespace_rule(key: str, refused: bool) -> None:
    assert kubelet_refuses_label(key) is refused
