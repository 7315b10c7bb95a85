"""Topology-aware placement on a group that scales from zero: Kueue's ProvisioningRequest admission check,
the real Kueue, and the box's stand-in of the cluster autoscaler (:mod:`stacks.box.provisioner`)."""

from __future__ import annotations

import copy
import re
import shlex
import time

import yaml

from stacks.box.api import BoxError
from stacks.box.devices import Registrar
from stacks.box.provisioner import RESOURCE
from stacks.outputs import workload_conditions_command
from stacks.plan.queues import PROVISIONING_CHECK, PROVISIONING_CLASS
from stacks.stackfile import plan_stack
from tests.cluster.support import _Polls, _rehearsal
from tests.harness import run_program, stack_config
from tests.wait import patient

BLOCK = "topology.k8s.aws/network-node-layer-3"


def _config() -> dict:
    """The p5 preset with its GPU group scaling from 0 to 64 nodes and its training job (and health check) at 32:
    topology-aware (``topology: true``, as the default is), through the ProvisioningRequest check; room for both
    jobs' requests at once, were the check's still booked when the training job asks for its own."""
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
    topology on the nodes that now exist: every pod of the check, then every pod of the training job, lands in one
    bottom-layer network block. Kueue deletes a request once its job finished (v0.19.1), which ends its booking: the
    training job's own request finds the 32 nodes the check ran on (CapacityIsFound) and the group stays at 32. Then a
    request for more pods than the group's maxSize (as Kueue writes one) gets Provisioned=False (CapacityIsNotFound)
    and no node."""
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
        # Kueue deletes a finished workload's requests (and their PodTemplates go with them: pkg/controller/
        # admissionchecks/provisioning/controller.go at v0.19.1), so they are recorded while the jobs run
        seen: dict[str, dict] = {}
        templates: dict[str, dict] = {}
        # what the stack's waitCommand prints of the health check's Workload while it waits (stacks.outputs)
        waits = shlex.split(workload_conditions_command("training", "train-allreduce"))
        printed: set[str] = set()

        def record() -> None:
            try:
                for r in box.get(RESOURCE, "-n", "training")["items"]:
                    seen[r["metadata"]["name"]] = r
                for t in box.get("podtemplates", "-n", "training")["items"]:
                    templates[t["metadata"]["name"]] = t
            except BoxError:
                pass  # the CRD not yet applied or serving: the next look reads it
            printed.update(box.kubectl(*waits[1:], check=False).stdout.splitlines())

        with Registrar(box) as registrar, _Polls(box, record) as watch:
            rehearsal.run(binaries, timeout_s=patient(300))
        assert registrar.error is None and watch.error is None, (registrar.error, watch.error)
        requests = list(seen.values())
        assert box.get(RESOURCE, "-n", "training")["items"] == [], "Kueue left a finished workload's requests"
        nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in box.get("nodes")["items"]}
        # more than maxSize: the whole request or nothing (here: nothing), on one of Kueue's templates
        template = {k: v for k, v in next(iter(templates.values())).items() if k in ("apiVersion", "kind", "template")}
        template["metadata"] = {"name": "more-than-max-size", "namespace": "training"}
        box.kubectl("create", "-f", "-", input=yaml.safe_dump(template))
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
    # the check's request scaled the group; Kueue deleted it when the check finished (its booking with it), before
    # the training job (applied once the check completed, as pulumi awaits it) asked: its request found the 32 nodes
    decided = {d.request.partition("/")[2]: d for d in provisioner.decisions}
    check = next(d for n, d in decided.items() if n.startswith("job-train-allreduce-"))
    train = next(d for n, d in decided.items() if n.startswith("job-train-") and d is not check)
    assert check.added == {"gpu": 32} and check.reason == "CapacityIsProvisioned", provisioner.decisions
    # each request Kueue made was marked Provisioned (the stand-in's record: Kueue deletes a request once its
    # workload finishes, maybe before a look saw it provisioned)
    assert {r["metadata"]["name"] for r in requests} <= set(decided), (sorted(decided), requests)
    assert all(decided[r["metadata"]["name"]].status == "True" for r in requests), provisioner.decisions
    assert train.added == {} and train.reason == "CapacityIsFound", provisioner.decisions
    gpu = {n: labels for n, labels in nodes.items() if labels.get("eks-training/role") == "gpu"}
    assert len(gpu) == 32 and all(BLOCK in labels for labels in gpu.values()), sorted(gpu)
    for job in ("train-allreduce", "train"):
        pods = [p for p in rehearsal.pods.values() if (p["metadata"].get("labels") or {}).get("job-name") == job]
        assert len(pods) >= 32, (job, len(pods))
        placed = {nodes[p["spec"]["nodeName"]][BLOCK] for p in pods}
        assert len(placed) == 1, f"{job}: pods in blocks {sorted(placed)}"
    # the waitCommand named the admission check the job waited on, with its state
    checks = sorted(line for line in printed if line.startswith("train-allreduce: admission check "))
    named = rf"train-allreduce: admission check {re.escape(PROVISIONING_CHECK)}=(Pending|Ready) \(.*\)"
    assert checks and all(re.fullmatch(named, c) for c in checks), sorted(printed)
    conds = {c["type"]: c for c in big_status.get("conditions") or []}
    assert conds["Provisioned"]["status"] == "False" and conds["Provisioned"]["reason"] == "CapacityIsNotFound", conds
    assert len(gpu_after) == 32, len(gpu_after)
    print(f"p5 group from 0 to 32 nodes through two ProvisioningRequests, each job in one block, in {took:.0f} s")
