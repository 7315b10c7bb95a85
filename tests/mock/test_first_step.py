"""The path from an empty account to each preset's first training step, modelled on what its program registers
(:mod:`stacks.plan.timeline`, the durations of components/catalog/timings.py): within its targets, with no
wait on it that a real cluster does not need, and shown by the plan report."""

from typing import Any

import pytest

from components.catalog.timings import (
    CREATION,
    FINISHED_JOB_CACHED,
    KUBERNETES_OBJECT,
    PODS_START,
    PODS_START_CACHED,
)
from stacks.config import load_config
from stacks.plan import build_plan
from stacks.plan.report import first_step_report, render
from stacks.plan.timeline import CLUSTER_TYPE, NODE_GROUP_TYPE, FirstStep, first_step
from stacks.stackfile import plan_stack
from tests.config_support import stack_report
from tests.harness import PROJECT, Program, run_program, stack_config, stack_names

STACKS = stack_names()
#: Every preset reaches its first training step within this many times the floor (the cluster, one node group and
#: the pods' start, one after the other).
TARGET = 1.2
#: The workshop's own target.
WORKSHOP_TARGET = 1.15
#: What no path to a first step may wait for: waits a real cluster does not need.
#: (type, name ending) pairs.
NOT_ON_THE_PATH = [
    ("aws:eks/addon:Addon", "-addon-eks-pod-identity-agent"),  # node groups need the CNI and kube-proxy only
    ("aws:eks/addon:Addon", "-addon-metrics-server"),  # nothing waits for metrics-server
    ("aws:eks/addon:Addon", "-addon-eks-node-monitoring-agent"),  # nor for the node monitoring agent
    ("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", ""),  # the queues need Kueue, not each other
    ("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", ""),
    ("kubernetes:kueue.x-k8s.io/v1beta2:Topology", ""),
    ("aws:ec2/launchTemplate:LaunchTemplate", ""),  # a launch template waits for no add-on
    ("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", "-nodes-out"),  # FSx checks its own rules only
]


def _first(p: Program) -> FirstStep:
    _config, plan = plan_stack(p.stack)
    first = first_step(plan, p.registrations)
    assert first is not None, f"{p.stack}: no training job among the registrations"
    return first


@pytest.mark.parametrize("stack", STACKS)
def test_the_first_step_is_within_the_target(program_for: Any, stack: str) -> None:
    first = _first(program_for(stack, False))
    ceiling = WORKSHOP_TARGET if stack == "workshop" else TARGET
    assert first.ratio <= ceiling + 1e-9, (
        f"{stack}: first training step after {first.minutes:.2f} min, {first.ratio:.3f} x the floor "
        f"{first.floor:.1f} (at most {ceiling}); path: " + " -> ".join(f"{s.name} ({s.minutes:g})" for s in first.path)
    )


@pytest.mark.parametrize("stack", ["workshop", "tensorflow"])
def test_the_training_image_is_pre_pulled_while_the_volume_and_the_awaited_jobs_are_made(
    program_for: Any, stack: str
) -> None:
    """The image's pull does not follow the awaited Jobs (the check, the staging): it runs beside the file system's
    add-on and claim: the pre-pull's DaemonSet waits for neither, and the path reaches the training pods through its
    pull."""
    p: Program = program_for(stack, False)
    first = _first(p)
    pulls = [s for s in first.path if s.type == "kubernetes:apps/v1:DaemonSet"]
    assert len(pulls) == 1 and pulls[0].minutes == pytest.approx(KUBERNETES_OBJECT.minutes + PODS_START.minutes)
    ds = p.one("kubernetes:apps/v1:DaemonSet", lambda r: r.name == pulls[0].name)
    not_waited = [
        *p.of_type("kubernetes:core/v1:PersistentVolumeClaim"),
        *p.of_type("kubernetes:batch/v1:Job"),
        *[r for r in p.of_type("aws:eks/addon:Addon") if r.name.endswith("-efs-csi-addon")],
    ]
    assert not_waited and not [r.name for r in not_waited if p.waits_for(ds, r.urn)]
    assert first.path[-1].minutes == PODS_START_CACHED.minutes
    awaited = first.path[-2]
    assert awaited.type == "kubernetes:batch/v1:Job" and awaited.minutes == FINISHED_JOB_CACHED.minutes
    assert awaited.start == pytest.approx(pulls[0].end), "the awaited Job runs once the pull ends, never before"


@pytest.mark.parametrize("stack", STACKS)
def test_the_path_waits_for_nothing_a_real_cluster_does_not_need(program_for: Any, stack: str) -> None:
    first = _first(program_for(stack, False))
    on_path = [
        s.name for s in first.path for t, end in NOT_ON_THE_PATH if s.type == t and s.name.endswith(end or s.name)
    ]
    assert not on_path, f"{stack}: {on_path} on the path to the first step"
    # the path is one chain: each step starts when the one before it is done, from the first resource on
    assert first.path[0].start == 0
    for before, after in zip(first.path, first.path[1:]):
        assert after.start == pytest.approx(before.end), (before, after)
    assert first.minutes == pytest.approx(first.path[-1].end)
    assert first.floor == CREATION[CLUSTER_TYPE].minutes + CREATION[NODE_GROUP_TYPE].minutes + PODS_START.minutes
    assert {CLUSTER_TYPE, NODE_GROUP_TYPE} <= {s.type for s in first.path}


@pytest.mark.parametrize("stack", STACKS)
def test_storage_is_built_while_the_cluster_is(program_for: Any, stack: str) -> None:
    """The file system (EFS, FSx for Lustre: minutes to create) waits neither for the Kubernetes provider, whose
    kubeconfig resolves once the system nodes are up, nor for the EKS cluster: only its Kubernetes objects do."""
    p: Program = program_for(stack, False)
    provider = p.one("pulumi:providers:kubernetes")
    cluster = p.one("eks:index:Cluster")
    file_systems = [
        r
        for r in p.registrations
        if r.type in ("aws:efs/fileSystem:FileSystem", "aws:efs/mountTarget:MountTarget")
        or r.type == "aws:fsx/lustreFileSystem:LustreFileSystem"
    ]
    assert file_systems
    for fs in file_systems:
        assert not p.waits_for(fs, provider.urn) and not p.waits_for(fs, cluster.urn), fs.name
    storage = [
        r for r in p.registrations if r.type.startswith("kubernetes:") and ("-efs-" in r.name or "-fsx-" in r.name)
    ]
    assert storage and all(p.waits_for(r, provider.urn) for r in storage)


@pytest.mark.parametrize("stack", ["workshop", "p5"])
def test_the_plan_report_shows_the_path(stack: str) -> None:
    r = stack_report(stack)
    fs = r["firstStep"]
    assert fs["ratio"] == round(fs["minutes"] / fs["floorMinutes"], 3) and fs["durations"].endswith("timings.py")
    text = render(r)
    head = f"first training step (modelled): {fs['job']}'s pods start {fs['minutes']:.1f} min after `pulumi up` begins"
    assert head in text and f"{fs['ratio']:.2f} x the floor of {fs['floorMinutes']:.1f} min" in text
    for step in fs["path"]:
        assert f"+{step['minutes']:5.2f}  " in text and step["name"] in text
    assert first_step_report(None) is None
    assert "first training step: not modelled (why)" in render({**r, "firstStep": first_step_report(None, "why")})


def test_a_job_that_waits_for_another_is_not_the_first_step() -> None:
    """A training job with ``after`` starts training once the jobs it names completed, which the model cannot time:
    the first step is its predecessor's, even when the waiting job's name sorts first and its Job object is created
    at the same moment. With every training job waiting, the step is not modelled."""
    cfg = stack_config("dev")
    jobs = {
        **cfg[f"{PROJECT}:jobs"],
        "check": {"kind": "command", "nodeGroup": "cpu", "command": ["python", "-c", "pass"], "after": ["train"]},
    }
    changed = {**cfg, f"{PROJECT}:jobs": jobs}
    first = first_step(
        build_plan(load_config(PROJECT, "dev", changed)), run_program("dev", config=changed).registrations
    )
    assert first is not None and first.job == "train", first

    jobs["train"] = {**jobs["train"], "purpose": "evaluation"}
    changed = {**cfg, f"{PROJECT}:jobs": jobs}
    assert (
        first_step(build_plan(load_config(PROJECT, "dev", changed)), run_program("dev", config=changed).registrations)
        is None
    )
