"""The model of `pulumi up`'s creation time (:mod:`stacks.plan.timeline`) on small graphs made by hand: what a
resource waits for (its dependencies, a component's children, its provider, its parent's registration and a
component's providers), how long each kind takes, and the path it reports. The presets' own graphs are in
tests/mock/test_first_step.py."""

from dataclasses import dataclass, field
from typing import Any

from components.catalog.charts import IMAGES, MANIFESTS
from components.catalog.timings import (
    AWS_RESOURCE,
    CREATION,
    FINISHED_HELPER_JOB,
    FINISHED_JOB,
    KUBERNETES_OBJECT,
    PODS_START,
)
from stacks.plan.timeline import Timeline, duration, floor_minutes

STACK = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"


@dataclass
class Reg:
    """A registration as the model reads it."""

    type: str
    name: str
    parent: str = STACK
    custom: bool = True
    remote: bool = False
    provider: str = ""
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)

    @property
    def urn(self) -> str:
        return f"urn:pulumi:s::p::{self.type}::{self.name}"


def component(name: str, **kw: Any) -> Reg:
    return Reg("eks-training:index:Thing", name, custom=False, **kw)


def job(name: str, image: str = "repo/train@sha256:1", skip: bool = False, **kw: Any) -> Reg:
    annotations = {"pulumi.com/skipAwait": "true"} if skip else {}
    spec = {"template": {"spec": {"containers": [{"image": image}]}}}
    return Reg("kubernetes:batch/v1:Job", name, inputs={"metadata": {"annotations": annotations}, "spec": spec}, **kw)


CLUSTER = Reg("eks:index:Cluster", "eks", remote=True)
NODES = Reg("aws:eks/nodeGroup:NodeGroup", "ng", property_dependencies={"clusterName": [CLUSTER.urn]})


def test_a_resource_starts_once_its_dependencies_are_done() -> None:
    t = Timeline([CLUSTER, NODES])
    assert (t.start(CLUSTER.urn), t.end(CLUSTER.urn)) == (0, CREATION["eks:index:Cluster"].minutes)
    assert t.start(NODES.urn) == 10 and t.end(NODES.urn) == 14
    assert [s.name for s in t.path(NODES.urn)] == ["eks", "ng"]


def test_a_kubernetes_object_waits_for_its_provider_and_a_component_for_the_providers_in_its_options() -> None:
    provider = Reg("pulumi:providers:kubernetes", "k8s", dependencies=[NODES.urn])
    ref = f"{provider.urn}::id"
    ns = Reg("kubernetes:core/v1:Namespace", "ns", provider=ref)
    storage = component("storage", providers={"kubernetes": ref})
    fs = Reg("aws:efs/fileSystem:FileSystem", "fs", parent=storage.urn)
    free = component("free")
    fs2 = Reg("aws:efs/fileSystem:FileSystem", "fs2", parent=free.urn)
    t = Timeline([CLUSTER, NODES, provider, ns, storage, fs, free, fs2])
    assert t.start(ns.urn) == t.end(provider.urn) == 14
    # the SDK registers a component once its providers exist, and its children once it is registered
    assert t.start(fs.urn) == 14 and [s.name for s in t.path(fs.urn)] == ["eks", "ng", "k8s", "storage", "fs"]
    assert t.start(fs2.urn) == 0


def test_a_child_waits_for_its_parents_dependencies_and_a_dependency_on_a_component_for_all_its_children() -> None:
    parent = component("parent", dependencies=[CLUSTER.urn])
    child = Reg("aws:ec2/launchTemplate:LaunchTemplate", "lt", parent=parent.urn)
    slow = Reg("aws:eks/nodeGroup:NodeGroup", "slow", parent=parent.urn)
    after = Reg("aws:iam/role:Role", "after", dependencies=[parent.urn])
    t = Timeline([CLUSTER, parent, child, slow, after])
    assert t.start(child.urn) == 10, "a child is registered once its parent's dependencies are done"
    assert t.end(parent.urn) == 14 and t.start(after.urn) == 14
    assert [s.name for s in t.path(after.urn)] == ["eks", "parent", "slow", "after"]


def test_what_each_kind_of_resource_takes() -> None:
    assert duration(Reg("aws:iam/role:Role", "r")) is AWS_RESOURCE
    assert duration(Reg("kubernetes:core/v1:Service", "s")) is KUBERNETES_OBJECT
    assert duration(component("c")).minutes == 0
    assert duration(job("j")) is FINISHED_JOB, "Pulumi waits for a Job to complete"
    assert duration(job("j", skip=True)) is KUBERNETES_OBJECT, "unless told to skip the wait"
    assert duration(job("j", image=IMAGES["busybox"].ref)) is FINISHED_HELPER_JOB
    waited = Reg("kubernetes:kubeflow.org/v2beta1:MPIJob", "m", inputs={"metadata": {"annotations": {}}})
    assert duration(waited) is KUBERNETES_OBJECT
    waited.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] = "condition=Succeeded"
    assert duration(waited) is FINISHED_JOB
    operator = Reg("kubernetes:yaml/v2:ConfigFile", "op", remote=True, inputs={"file": MANIFESTS["mpi-operator"].url})
    crd = Reg(
        "kubernetes:yaml/v2:ConfigFile", "crd", remote=True, inputs={"file": MANIFESTS["provisioning-request-crd"].url}
    )
    assert duration(operator) is CREATION["kubernetes:yaml/v2:ConfigFile"], "its Deployment is waited for"
    assert duration(crd) is KUBERNETES_OBJECT, "a manifest of definitions only"
    assert floor_minutes() == CREATION["eks:index:Cluster"].minutes + CREATION[NODES.type].minutes + PODS_START.minutes


def test_no_first_step_without_a_registered_training_job() -> None:
    from stacks.plan.timeline import first_step
    from stacks.stackfile import plan_stack

    _config, plan = plan_stack("dev")
    assert plan.jobs and first_step(plan, []) is None
    assert first_step(plan, [CLUSTER, NODES]) is None
