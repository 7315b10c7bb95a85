"""The model of `pulumi up`'s creation time (:mod:`stacks.plan.timeline`) on small graphs made by hand: what a
resource waits for (its dependencies, a component's children, its provider, its parent's registration and a
component's providers), how long each kind takes, and the path it reports. The presets' own graphs are in
tests/mock/test_first_step.py."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from components.catalog.charts import IMAGES, MANIFESTS
from components.catalog.timings import (
    AWS_RESOURCE,
    CREATION,
    FINISHED_HELPER_JOB,
    FINISHED_JOB,
    FINISHED_JOB_CACHED,
    KUBERNETES_OBJECT,
    PODS_START,
    PODS_START_CACHED,
)
from stacks.plan.timeline import PREPULL_TYPE, Timeline, duration, floor_minutes

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
#: The catalog's minutes of the cluster's and a node group's creation.
EKS, NODE_GROUP = CREATION[CLUSTER.type].minutes, CREATION[NODES.type].minutes


def test_a_resource_starts_once_its_dependencies_are_done() -> None:
    t = Timeline([CLUSTER, NODES])
    assert (t.start(CLUSTER.urn), t.end(CLUSTER.urn)) == (0, EKS)
    assert t.start(NODES.urn) == EKS and t.end(NODES.urn) == EKS + NODE_GROUP
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
    assert t.start(ns.urn) == t.end(provider.urn) == EKS + NODE_GROUP
    # the SDK registers a component once its providers exist, and its children once it is registered
    assert t.start(fs.urn) == EKS + NODE_GROUP and [s.name for s in t.path(fs.urn)] == [
        "eks",
        "ng",
        "k8s",
        "storage",
        "fs",
    ]
    assert t.start(fs2.urn) == 0


def test_a_child_waits_for_its_parents_dependencies_and_a_dependency_on_a_component_for_all_its_children() -> None:
    parent = component("parent", dependencies=[CLUSTER.urn])
    child = Reg("aws:ec2/launchTemplate:LaunchTemplate", "lt", parent=parent.urn)
    slow = Reg("aws:eks/nodeGroup:NodeGroup", "slow", parent=parent.urn)
    after = Reg("aws:iam/role:Role", "after", dependencies=[parent.urn])
    t = Timeline([CLUSTER, parent, child, slow, after])
    assert t.start(child.urn) == EKS, "a child is registered once its parent's dependencies are done"
    assert t.end(parent.urn) == t.start(after.urn) == EKS + NODE_GROUP
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


def _pod_job(name: str, image: str, selector: dict[str, str], **kw: Any) -> Reg:
    spec = {"template": {"spec": {"nodeSelector": selector, "containers": [{"image": image}]}}}
    return Reg("kubernetes:batch/v1:Job", name, inputs={"metadata": {"annotations": {}}, "spec": spec}, **kw)


def _prepull(name: str, image: str, selector: dict[str, str], **kw: Any) -> tuple[Reg, Reg]:
    parent = Reg(PREPULL_TYPE, name, custom=False)
    pod = {
        "nodeSelector": selector,
        "initContainers": [{"name": "prepull", "image": image}],
        "containers": [{"name": "hold", "image": IMAGES["busybox"].ref}],
    }
    ds = Reg(
        "kubernetes:apps/v1:DaemonSet",
        f"{name}-daemonset",
        parent=parent.urn,
        inputs={"metadata": {"annotations": {"pulumi.com/skipAwait": "true"}}, "spec": {"template": {"spec": pod}}},
        **kw,
    )
    return parent, ds


GPU = {"eks-training/role": "gpu"}
IMAGE = "repo/train@sha256:1"


def test_an_awaited_job_whose_image_is_pre_pulled_runs_once_the_pull_ends_never_before() -> None:
    """The pre-pull starts with the nodes; the Job created before its pull ends waits for it (the same pull), then
    runs without one; the training pods after it start from the cached image."""
    parent, ds = _prepull("pp", IMAGE, GPU, dependencies=[NODES.urn])
    volume = Reg("aws:eks/addon:Addon", "efs", dependencies=[NODES.urn])
    check = _pod_job("check", IMAGE, {**GPU, "zone": "a"}, dependencies=[volume.urn])
    t = Timeline([CLUSTER, NODES, parent, ds, volume, check])
    assert duration(ds) is KUBERNETES_OBJECT, "nothing waits for the DaemonSet"
    ready = t.end(ds.urn) + PODS_START.minutes
    assert t.start(check.urn) == EKS + NODE_GROUP + CREATION[volume.type].minutes < ready
    assert t.image_ready(check) == (ready, ds.urn)
    assert t.end(check.urn) == ready + FINISHED_JOB_CACHED.minutes < t.start(check.urn) + FINISHED_JOB.minutes
    assert t.pull_bound(check.urn) == (ready, ds.urn)
    after = Reg("kubernetes:core/v1:ConfigMap", "after", dependencies=[check.urn])
    t = Timeline([CLUSTER, NODES, parent, ds, volume, check, after])
    path = t.path(after.urn)
    assert [s.name for s in path] == ["eks", "ng", "pp-daemonset", "check", "after"]
    for before, step in zip(path, path[1:]):
        assert step.start == pytest.approx(before.end), (before, step)
    assert path[2].minutes == pytest.approx(KUBERNETES_OBJECT.minutes + PODS_START.minutes)


def test_a_pre_pull_covers_only_its_image_on_its_nodes_and_never_slows_a_job() -> None:
    parent, ds = _prepull("pp", IMAGE, GPU, dependencies=[NODES.urn])
    other_image = _pod_job("other-image", "repo/other@sha256:2", GPU, dependencies=[NODES.urn])
    other_nodes = _pod_job("other-nodes", IMAGE, {"eks-training/role": "system"}, dependencies=[NODES.urn])
    early = _pod_job("early", IMAGE, GPU)  # created long before the pre-pull could end: it pulls itself
    t = Timeline([CLUSTER, NODES, parent, ds, other_image, other_nodes, early])
    for j in (other_image, other_nodes):
        assert t.image_ready(j) is None and t.end(j.urn) == t.start(j.urn) + FINISHED_JOB.minutes
    assert t.image_ready(early) is not None and t.end(early.urn) == FINISHED_JOB.minutes
    assert t.took(early.urn) is FINISHED_JOB and t.pull_bound(early.urn) is None


@pytest.mark.parametrize("before_the_pull_ends", [2.5, 2.0, 1.6, 1.5, 1.2, 0.5, 0.0, -1.0])
def test_waiting_for_the_pre_pull_never_ends_a_job_later_than_its_own_pull(before_the_pull_ends: float) -> None:
    """A Job created shortly before the pre-pull ends waits for it only when waiting and then running ends no later
    than pulling the image itself; the same for the training pods' start."""
    parent, ds = _prepull("pp", IMAGE, GPU, dependencies=[NODES.urn])
    job = _pod_job("job", IMAGE, GPU, dependencies=[NODES.urn])
    t = Timeline([CLUSTER, NODES, parent, ds, job])
    ready = t.end(ds.urn) + PODS_START.minutes
    created = ready - before_the_pull_ends
    for cached, uncached in ((FINISHED_JOB_CACHED, FINISHED_JOB), (PODS_START_CACHED, PODS_START)):
        run = t.cached_run(job, created, cached, uncached)
        end = created + uncached.minutes if run is None else run[0] + cached.minutes
        assert end == pytest.approx(min(created + uncached.minutes, max(ready, created) + cached.minutes))
