"""The device plugins run on every node whose devices they register: their DaemonSets, as the charts render the values
each stack passes (:data:`stacks.box.devices.PLUGIN_CHARTS`), select every GPU (EFA) group's nodes and tolerate the
group's taints, and any taint a user may give a group (``nodeGroups.<name>.taints``). A plugin kept off a node leaves
its devices unallocatable, and every job that needs them Pending."""

from typing import Any

import pytest

from components.scheduling import EFA_LABEL, GPU_LABEL, TAINT_EFFECTS_EKS
from stacks.box.devices import PLUGIN_CHARTS
from stacks.box.provisioner import tolerates
from tests.harness import Program, run_program, stack_names
from tests.variants import HELD_OUT, held_out_program

pytestmark = pytest.mark.mock

K8S_EFFECT = {v: k for k, v in TAINT_EFFECTS_EKS.items()}
#: Taints a user may give a group, of every effect.
USER_TAINTS = [{"key": "dedicated", "value": "ml-team", "effect": e} for e in K8S_EFFECT.values()]
#: Which plugin each group's nodes need, by the label the group's nodes carry.
NEEDS = {"nvidia-device-plugin": GPU_LABEL, "aws-efa-k8s-device-plugin": EFA_LABEL}


def _program(source: str, stack: str) -> Program:
    return held_out_program(stack) if source == "held-out" else run_program(stack)


def _selected(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """The DaemonSet's nodeSelector and required node affinity (its terms on the labels given) pick the node."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        or {}
    ).get("nodeSelectorTerms")
    if not terms:
        return True
    return any(all(_matches(e, labels) for e in term["matchExpressions"]) for term in terms)


def _matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    """One node selector requirement, as the scheduler reads it: ``NotIn`` and ``DoesNotExist`` also match a node
    without the label (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#operators)."""
    op, value = expression["operator"], labels.get(expression["key"])
    if op == "In":
        return value in expression["values"]
    if op == "NotIn":
        return value not in expression["values"]
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    raise AssertionError(f"operator {op} is not read here")


@pytest.mark.parametrize(
    "source,stack",
    [*(("preset", s) for s in stack_names()), *(("held-out", s) for s in sorted(HELD_OUT))],
    ids=lambda v: v,
)
def test_a_device_plugin_runs_on_every_node_of_the_groups_that_need_it(source: str, stack: str) -> None:
    p = _program(source, stack)
    values = {
        str(r.inputs["chart"]).rsplit("/", 1)[-1]: r.inputs.get("values") or {}
        for r in p.registrations
        if r.type == "kubernetes:helm.sh/v3:Release"
    }
    needed = set()
    for group in p.of_type("aws:eks/nodeGroup:NodeGroup"):
        labels = dict(group.inputs.get("labels") or {})
        instance_types = group.inputs.get("instanceTypes") or []
        taints = [
            {"key": t["key"], "value": t.get("value", ""), "effect": K8S_EFFECT[t["effect"]]}
            for t in group.inputs.get("taints") or []
        ]
        for chart, (label, value) in NEEDS.items():
            if labels.get(label) != value:
                continue
            needed.add(chart)
            assert chart in values, f"{group.name}: its nodes need {chart}, which the stack does not install"
            spec = PLUGIN_CHARTS[chart].render(values[chart])
            for instance_type in instance_types:
                node = {**labels, "node.kubernetes.io/instance-type": instance_type}
                assert _selected(spec, node), f"{chart} does not select {group.name}'s {instance_type} nodes"
            kept_off = [t for t in [*taints, *USER_TAINTS] if not tolerates(spec["tolerations"], t)]
            assert kept_off == [], f"{chart} is kept off {group.name}'s nodes by {kept_off}"
    assert needed <= set(values)


def test_the_check_finds_a_plugin_kept_off_a_tainted_group() -> None:
    """The chart's own default tolerations (the GPU taint only) would keep the plugin off a group's own taint."""
    spec = PLUGIN_CHARTS["nvidia-device-plugin"].render(
        {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    )
    assert tolerates(spec["tolerations"], {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"})
    assert not tolerates(spec["tolerations"], USER_TAINTS[0])
    assert not _selected({"nodeSelector": {GPU_LABEL[0]: GPU_LABEL[1]}}, {})
