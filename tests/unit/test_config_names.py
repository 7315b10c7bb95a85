"""Names and labels as the services that take them read them: a group's node labels as the kubelet does
(``--node-labels``: it refuses one in the ``kubernetes.io`` or ``k8s.io`` namespace, or a subdomain of them, outside
its own ``kubelet.kubernetes.io`` and ``node.kubernetes.io``; ``ValidateKubeletFlags``, kubernetes
cmd/kubelet/app/options/options.go), and the cluster's name, which prefixes IAM role names."""

import pytest

from components.scheduling import kubelet_refuses_label


@pytest.mark.parametrize(
    "key, refused",
    [
        ("node-role.kubernetes.io/worker", True),
        ("kubernetes.io/role", True),
        ("example.k8s.io/x", True),
        ("node-restriction.kubernetes.io/pool", True),
        ("topology.kubernetes.io/zone", False),  # well-known: the kubelet takes it (and sets it itself)
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


def test_a_default_cluster_name_too_long_names_the_key_to_set() -> None:
    """The cluster's name defaults to <project>-<stack>: a long stack name makes one IAM's limits refuse. The message
    says the default is at fault and which key to set, not that the user's value is wrong."""
    from stacks.config import ConfigError, load_config
    from tests.harness import PROJECT, stack_config

    stack = "research-vision-experiments-quarter4-2026"
    with pytest.raises(ConfigError) as err:
        load_config(PROJECT, stack, stack_config("dev"))
    (problem,) = err.value.problems
    assert problem.startswith(
        f"eks-training:clusterName is not set, and its default 'eks-training-{stack}' (the project's name, then the "
        "stack's) must be 1-40 lowercase letters"
    ), problem
    assert problem.endswith(": set eks-training:clusterName")
    assert load_config(PROJECT, stack, {**stack_config("dev"), f"{PROJECT}:clusterName": "vision"})


@pytest.mark.parametrize("written", ["NVIDIA B300", "NVIDIA GB200", "NVIDIA H800", "NVIDIA A10", "NVIDIA T4g"])
def test_a_gpu_the_catalog_does_not_know_is_not_taken_for_a_misspelling(written: str) -> None:
    """EC2 names other GPUs one character from the catalog's (B300 and B200, A10 and A10G): they are GPUs of their
    own, not misspellings; only a catalogued name written another way is (H100 for NVIDIA H100)."""
    from stacks.config.instance_facts import _catalogued_model

    assert _catalogued_model(written) is None
    assert _catalogued_model("H100") == "NVIDIA H100" and _catalogued_model("nvidia  h100") == "NVIDIA H100"


def test_eks_limits_on_a_groups_labels_and_taints() -> None:
    """EKS takes node group label keys and values of 1-63 characters (UpdateLabelsPayload), prefix included, and taint
    keys of at most 63: a Kubernetes key that is longer, or an empty label value, fails at CreateNodegroup. A
    well-known label is the kubelet's to set."""
    from pydantic import ValidationError

    from stacks.config.nodegroups import NodeGroupConfig

    sizes = {"instanceTypes": ["m5.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1}

    def problems(**fields) -> str:
        with pytest.raises(ValidationError) as err:
            NodeGroupConfig.model_validate({**sizes, **fields})
        return str(err.value)

    long_key = "team-infrastructure.platform.example.com/accelerator-generations"  # 64 characters
    assert "has 64 characters, and EKS takes node group label keys of at most 63" in problems(labels={long_key: "a"})
    assert "is empty, and EKS takes node group label values of 1-63 characters" in problems(labels={"team": ""})
    assert "a label the kubelet sets on every node itself" in problems(labels={"topology.kubernetes.io/zone": "a"})
    taint = {"key": long_key, "value": "", "effect": "NoSchedule"}
    assert "EKS takes taint keys of at most 63" in problems(taints=[taint])
    NodeGroupConfig.model_validate({**sizes, "labels": {long_key[1:]: "a"}, "taints": [{**taint, "key": long_key[1:]}]})
