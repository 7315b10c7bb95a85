"""The box's nodes (stacks/box/nodes.py) carry every label the stack's pods select, for every preset, its stress
variant and every held-out stack (tests/variants.py): a label the product selects that the box's nodes lack makes a
rehearsal wait for ever on a stack that would run on EKS. The held-out ``zone-id-topology`` stack (a group pinned by
zone ID, as the README recommends for EFA groups) waited 300 s for a node with ``topology.k8s.aws/zone-id``, the label
the AWS cloud provider gives every node (https://kubernetes.io/docs/reference/labels-annotations-taints/)."""

from typing import Any, Iterator, Mapping

import pytest

from stacks.box.nodes import group_nodes, node_zone
from stacks.config import load_config
from stacks.plan import ZONE_ID_LABEL, ZONE_LABEL, Plan, build_plan
from tests.harness import PROJECT, REGION, Program, stack_config, stack_names
from tests.variants import HELD_OUT, STRESS_REGION, held_out_program, stress_config, stress_program

STACKS = stack_names()
#: Kinds whose pod template's nodeSelector the scheduler matches against the nodes.
WORKLOADS = {
    "kubernetes:batch/v1:Job",
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:kubeflow.org/v2beta1:MPIJob",
}


def _templates(program: Program) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for r in program.registrations:
        if r.type not in WORKLOADS:
            continue
        spec = r.inputs.get("spec") or {}
        if r.type.endswith(":MPIJob"):
            for role, replica in (spec.get("mpiReplicaSpecs") or {}).items():
                yield f"{r.name} ({role})", replica.get("template") or {}
        else:
            yield r.name, spec.get("template") or {}


def unmatched_selectors(program: Program, plan: Plan, region: str) -> list[str]:
    """Pod templates of ``program`` whose nodeSelector no node of the box (one of each of ``plan``'s groups) has."""
    nodes = [n for g in plan.all_groups for n in group_nodes(g, region, 1)]
    problems = []
    for name, template in _templates(program):
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        if selector and not any(all(n["metadata"]["labels"].get(k) == v for k, v in selector.items()) for n in nodes):
            closest = max(nodes, key=lambda n: sum(n["metadata"]["labels"].get(k) == v for k, v in selector.items()))
            missing = {k: v for k, v in selector.items() if closest["metadata"]["labels"].get(k) != v}
            problems.append(f"{name}: no box node has {missing} (closest: {closest['metadata']['name']})")
    return problems


def _case(variant: str, stack: str) -> tuple[Program, Plan, str]:
    if variant == "held-out":
        cfg = HELD_OUT[stack]
        return held_out_program(stack), build_plan(load_config(PROJECT, stack, cfg)), str(cfg["aws:region"])
    if variant == "stress":
        return stress_program(stack), build_plan(load_config(PROJECT, stack, stress_config(stack))), STRESS_REGION
    from tests.harness import run_program

    cfg = stack_config(stack)
    return run_program(stack), build_plan(load_config(PROJECT, stack, cfg)), str(cfg.get("aws:region", REGION))


CASES = [
    *[pytest.param(v, s, id=f"{s}-{v}") for s in STACKS for v in ("shipped", "stress")],
    *[pytest.param("held-out", s, id=f"{s}-held-out") for s in HELD_OUT],
]


@pytest.mark.parametrize("variant, stack", CASES)
def test_the_box_nodes_carry_every_label_the_stacks_pods_select(variant: str, stack: str) -> None:
    program, plan, region = _case(variant, stack)
    assert any(True for _ in _templates(program)), f"{stack} ({variant}) registers no workload"
    found = unmatched_selectors(program, plan, region)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("zone", ["use1-az6", "us-east-1b"])
def test_a_box_node_carries_its_zones_name_and_id(zone: str) -> None:
    """Whichever way the config names the zone, the node has both labels, one of them the zone as written."""
    labels = node_zone(zone, "us-east-1")
    assert set(labels) == {ZONE_LABEL, ZONE_ID_LABEL} and zone in labels.values(), labels


@pytest.mark.parametrize("variant, stack", CASES)
def test_a_rehearsal_gets_the_autoscalers_stand_in_exactly_when_the_stack_asks_for_provisioning(
    variant: str, stack: str, tmp_path
) -> None:
    """The benchmark rehearsed p5 without the cluster autoscaler's stand-in after the EFA presets' default became
    Kueue's ProvisioningRequest check: its health check waited for a request nothing answered until the 900 s timeout.
    The plan's decision (:func:`stacks.box.provisioner.provisioner_for`) and the
    registered AdmissionCheck agree for every stack, and a rehearsal of a guarded stack without the stand-in is refused
    at once."""
    from components.admission import PROVISIONING_CONTROLLER
    from stacks.box.provisioner import provisioner_for
    from stacks.box.rehearse import Rehearsal, RehearsalError, steps_of

    class Box:
        home = tmp_path

    program, plan, region = _case(variant, stack)
    steps = steps_of(program.registrations)
    guarded = any(
        d["kind"] == "AdmissionCheck" and d["spec"]["controllerName"] == PROVISIONING_CONTROLLER
        for s in steps
        for d in s.docs
    )
    assert guarded == (provisioner_for(Box(), plan, region) is not None), (stack, variant, guarded)  # type: ignore[arg-type]
    if guarded:
        with pytest.raises(RehearsalError, match="provisioner_for"):
            Rehearsal(Box(), steps)  # type: ignore[arg-type]
    else:
        Rehearsal(Box(), steps)  # type: ignore[arg-type]
