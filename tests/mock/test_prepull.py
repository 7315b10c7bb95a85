"""Every stack registers one ImagePrePull per pre-pull its plan decides (:mod:`stacks.plan.prepull`): a DaemonSet in
the jobs' namespace on the nodes the image's pods select, its init container the image by digest running the no-op,
tiny requests, no service account token, nothing waiting for it, and nothing it waits for but the namespace, the
image and the node group."""

from typing import Any

import pytest

from components.workloads.pods import IMAGE_UID
from components.workloads.prepull import CPU, MEMORY
from stacks.plan.prepull import prepulls
from stacks.stackfile import plan_stack
from tests.harness import Program, stack_names

STACKS = stack_names()


@pytest.mark.parametrize("stack", STACKS)
def test_every_pre_pull_is_a_daemon_set_on_the_pods_nodes(program_for: Any, stack: str) -> None:
    p: Program = program_for(stack, False)
    _config, plan = plan_stack(stack)
    wanted = {f"{plan.config.cluster_name}-prepull-{w.name}": w for w in prepulls(plan)}
    components = p.of_type("eks-training:index:ImagePrePull")
    assert {c.name for c in components} == set(wanted)
    for c in components:
        w = wanted[c.name]
        ds = p.one("kubernetes:apps/v1:DaemonSet", lambda r, c=c: r.parent == c.urn)
        assert ds.name == f"{c.name}-daemonset"
        assert ds.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        assert ds.inputs["metadata"]["namespace"] == plan.config.storage.namespace
        pod = ds.inputs["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == dict(w.node_selector)
        assert pod["tolerations"] == [dict(t) for t in w.tolerations]
        assert pod["automountServiceAccountToken"] is False
        # the no-op runs as the job's pods do (an image may work for that user only)
        assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["runAsGroup"] == IMAGE_UID
        # a new image is pulled on every node at once, not one node after another (maxUnavailable defaults to 1)
        assert ds.inputs["spec"]["updateStrategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "100%"},
        }
        (init,) = pod["initContainers"]
        assert init["command"] == list(w.command) and "@sha256:" in init["image"]
        for container in (init, *pod["containers"]):
            assert container["resources"] == {
                "requests": {"cpu": CPU, "memory": MEMORY},
                "limits": {"cpu": CPU, "memory": MEMORY},
            }
        for t in ("kubernetes:batch/v1:Job", "kubernetes:core/v1:PersistentVolumeClaim"):
            assert not [r.name for r in p.of_type(t) if p.waits_for(ds, r.urn)], f"{ds.name} waits for a {t}"
