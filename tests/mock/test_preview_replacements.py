"""A preview of an update that replaces one resource shows only what the update changes.

In a preview, a replaced resource's outputs are unknown, and so is every input made from them. pulumi-kubernetes
replaces everything a provider made when its kubeconfig is unknown (``DiffConfig`` in
https://github.com/pulumi/pulumi-kubernetes/blob/94977969d64112b04e19945818a7d5d5f38f631d/provider/pkg/provider/provider.go),
and an EKS add-on whose ``cluster_name`` is unknown is replaced too (a ForceNew field). `pulumi up` then resolves
the same values and replaces nothing, but its preview, the one the user confirms, showed every job replaced. So
inputs that only order a resource after another carry that resource (``components.ordering.ordered_after``), not
its value.

Each stack is evaluated as the preview of an update that replaces what a running stack replaces alone: the system
node group (a new instance type), the cluster's add-ons, the FSx import associations (a new prefix) and every job
object (a new definition: staging, the volume's init, training, MPI).
"""

from typing import Callable

import pytest

from tests.harness import JOB_OBJECT_TYPES, Program, contains_unknown, run_program, stack_names

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
PREPULL = "kubernetes:apps/v1:DaemonSet"


def _alone(t: str, n: str) -> bool:
    """What an update replaces with nothing else changing."""
    return (
        (t == NODE_GROUP and n.endswith("-system-ng"))
        or (t == ADDON and "-addon-" in n)  # the cluster's own add-ons (vpc-cni, the Pod Identity agent, ...)
        or t == ASSOCIATION
        or t in JOB_OBJECT_TYPES
    )


def unknown_inputs(program: Program, replaced: Callable[[str, str], bool]) -> dict[tuple[str, str], list[str]]:
    """Each custom resource the update does not replace itself whose inputs are unknown: its input keys."""
    return {
        (r.type, r.name): sorted(k for k, v in r.inputs.items() if contains_unknown(v))
        for r in program.registrations
        if r.custom and not replaced(r.type, r.name) and contains_unknown(r.inputs)
    }


def _legitimate(key: tuple[str, str], inputs: list[str]) -> bool:
    """The one input that does take the system group's new value: a pre-pull on the system nodes names its group
    (``eks-training/node-group``, an update of the annotation)."""
    t, n = key
    return t == PREPULL and "-prepull-system-" in n and inputs == ["metadata"]


@pytest.mark.parametrize("stack", stack_names())
def test_replacing_what_is_replaced_alone_leaves_every_other_input_known(stack: str) -> None:
    program = run_program(stack, preview=True, replaced=_alone)
    replaced = [(r.type, r.name) for r in program.registrations if _alone(r.type, r.name)]
    assert sum(t == NODE_GROUP for t, _ in replaced) == 1 and sum(t == ADDON for t, _ in replaced) >= 5, replaced
    unknown = unknown_inputs(program, _alone)
    assert {k: v for k, v in unknown.items() if not _legitimate(k, v)} == {}
    # every resource the provider made is compared, not replaced: its kubeconfig is known
    provider = program.one("pulumi:providers:kubernetes")
    assert not contains_unknown(provider.inputs["kubeconfig"])


def test_an_fsx_stack_replaces_its_associations_in_the_check() -> None:
    """The FSx part of the check above has something to replace (p5 links a bucket)."""
    program = run_program("p5", preview=True, replaced=_alone)
    assert [r.name for r in program.of_type(ASSOCIATION)], "p5 has no FSx association"


def test_the_check_sees_an_input_made_from_a_replaced_resource() -> None:
    """Control: a replaced worker group's autoscaling tags name its new Auto Scaling group, and a new image build's
    digest is in every job that runs the image: the check reports both."""
    worker: Callable[[str, str], bool] = lambda t, n: t == NODE_GROUP and n.endswith("-cpu-ng")  # noqa: E731
    tags = unknown_inputs(run_program("dev", preview=True, replaced=worker), worker)
    assert {k for k in tags if k[0] == "aws:autoscaling/tag:Tag"} and all(
        v == ["autoscalingGroupName"] for k, v in tags.items() if k[0] == "aws:autoscaling/tag:Tag"
    ), tags
    build: Callable[[str, str], bool] = lambda t, n: t.startswith("pulumi-python:dynamic/")  # noqa: E731
    jobs = unknown_inputs(run_program("dev", preview=True, replaced=build), build)
    assert ("kubernetes:batch/v1:Job", "eks-training-dev-train-job") in jobs, jobs
