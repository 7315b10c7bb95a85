"""Topology-aware placement on a group that scales from zero (issue 26): Kueue's ProvisioningRequest admission check,
the real Kueue, and the box's stand-in of the cluster autoscaler (:mod:`stacks.box.provisioner`)."""

from __future__ import annotations

import copy
import time

import yaml

from stacks.box.devices import Registrar
from stacks.box.provisioner import RESOURCE
from stacks.plan.admission import PROVISIONING_CLASS
from stacks.stackfile import plan_stack
from tests.cluster.support import _rehearsal
from tests.harness import run_program, stack_config

BLOCK = "topology.k8s.aws/network-node-layer-3"


def _config() -> dict:
    """The p5 preset with its GPU group scaling from 0 to 64 nodes and its training job (and health check) at 32:
    topology-aware (``topology: true``, as the default is), through the ProvisioningRequest check; room for both
    jobs at once (the check's capacity stays booked while the training job asks for its own)."""
    config = copy.deepcopy(stack_config("p5"))
    config["eks-training:nodeGroups"]["gpu"].update(minSize=0, desiredSize=0, maxSize=64, topology=True)
    config["eks-training:jobs"]["train"].update(nodes=32, minNodes=32, maxNodes=32)
    return config


def _edit(config: dict) -> None:
    fresh = _config()
    config.clear()
    config.update(fresh)


def test_a_32_node_job_on_a_group_scaling_from_zero_gets_its_nodes_and_one_network_block(binaries, tmp_path) -> None:
    """No GPU node before; Kueue reserves the quota of the 32-node health check, writes a ProvisioningRequest of the
    autoscaler's best-effort-atomic class for its pods, the stand-in scales the group (creates 32 kwok nodes with the
    network-topology labels, :mod:`stacks.box.nodes`: blocks of 32) and marks it Provisioned, and Kueue assigns the
    topology on the nodes that now exist: every pod of the check, then every pod of the training job (its own request:
    the check's capacity is still booked for 10 minutes, so the group grows to 64), lands in one bottom-layer network
    block. Then a request for more pods than the group's maxSize (as Kueue writes one) gets Provisioned=False
    (CapacityIsNotFound) and no node."""
    config = _config()
    _, plan = plan_stack("p5", edit=_edit)
    assert plan.admission is not None and plan.admission.provisioning is not None
    assert plan.admission.provisioning.flavors == ("gpu",)

    def trim(steps) -> None:
        steps[:] = [
            s for s in steps if not any(d["kind"] == "Job" and d["metadata"]["name"] == "evaluate" for d in s.docs)
        ]

    start = time.monotonic()
    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, run_program("p5", config=config).registrations, "p5", plan=plan, mutate=trim
    )
    try:
        before = [n for n in box.get("nodes")["items"] if n["metadata"]["labels"].get("eks-training/role") == "gpu"]
        assert before == [], [n["metadata"]["name"] for n in before]
        with Registrar(box) as registrar:
            rehearsal.run(binaries, timeout_s=300)
        assert registrar.error is None, registrar.error
        requests = box.get(RESOURCE, "-n", "training")["items"]
        nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in box.get("nodes")["items"]}
        # more than maxSize: the whole request or nothing (here: nothing)
        template = box.get("podtemplates", "-n", "training")["items"][0]
        big = {
            "apiVersion": "autoscaling.x-k8s.io/v1",
            "kind": "ProvisioningRequest",
            "metadata": {"name": "more-than-max-size", "namespace": "training"},
            "spec": {
                "provisioningClassName": PROVISIONING_CLASS,
                "podSets": [{"podTemplateRef": {"name": template["metadata"]["name"]}, "count": 65}],
            },
        }
        box.kubectl("create", "-f", "-", input=yaml.safe_dump(big))
        provisioner = rehearsal.provisioner
        assert provisioner is not None
        provisioner.poll()
        big_status = box.get(RESOURCE, "more-than-max-size", "-n", "training").get("status") or {}
        gpu_after = [n for n in box.get("nodes")["items"] if n["metadata"]["labels"].get("eks-training/role") == "gpu"]
    finally:
        rehearsal.stop_operator()
        box.down()
    took = time.monotonic() - start
    # Kueue asked, for each job, with the pods of its pod set; the stand-in provisioned each by scaling the group
    assert {r["spec"]["provisioningClassName"] for r in requests} == {PROVISIONING_CLASS}, requests
    assert len(requests) == 2, [r["metadata"]["name"] for r in requests]
    for r in requests:
        assert [ps["count"] for ps in r["spec"]["podSets"]] == [32], r["spec"]
        conds = {c["type"]: c for c in r["status"]["conditions"]}
        assert conds["Provisioned"]["status"] == "True", conds
    scaled = [d for d in provisioner.decisions if d.added]
    assert [d.added for d in scaled] == [{"gpu": 32}, {"gpu": 32}], provisioner.decisions
    gpu = {n: labels for n, labels in nodes.items() if labels.get("eks-training/role") == "gpu"}
    assert len(gpu) == 64 and all(BLOCK in labels for labels in gpu.values()), sorted(gpu)
    for job in ("train-allreduce", "train"):
        pods = [p for p in rehearsal.pods.values() if (p["metadata"].get("labels") or {}).get("job-name") == job]
        assert len(pods) >= 32, (job, len(pods))
        placed = {nodes[p["spec"]["nodeName"]][BLOCK] for p in pods}
        assert len(placed) == 1, f"{job}: pods in blocks {sorted(placed)}"
    conds = {c["type"]: c for c in big_status.get("conditions") or []}
    assert conds["Provisioned"]["status"] == "False" and conds["Provisioned"]["reason"] == "CapacityIsNotFound", conds
    assert len(gpu_after) == 64, len(gpu_after)
    print(f"p5 group from 0 to 64 nodes through two ProvisioningRequests, each job in one block, in {took:.0f} s")
