"""The figures ``python -m stacks.plan`` prints are what the program registers: for every stack, each node group's
types, sizes, capacity type, zone, EFA interfaces and AMI, each job's nodes, processes and per-pod GPUs and EFA
interfaces, the storage, and the cost recomputed from the registered resources with the catalog's prices."""

from typing import Any

import pytest

from components.catalog import FSX_LUSTRE_PRICES, HOURS_PER_MONTH, INSTANCE_TYPES, SERVICE_PRICES
from components.scheduling import NODE_ROLE_LABEL
from stacks.plan.report import render
from tests.config_support import stack_report
from tests.harness import Program, Registration, stack_names

STACKS = stack_names()


def _launch_template(p: Program, ng: Registration) -> Registration:
    return p.one("aws:ec2/launchTemplate:LaunchTemplate", lambda r: r.parent == ng.parent)


@pytest.mark.parametrize("stack", STACKS)
def test_node_groups_are_what_the_program_registers(program_for, stack: str) -> None:
    p: Program = program_for(stack, False)
    r = stack_report(stack)
    private_subnets = len(p.of_type("aws:ec2/subnet:Subnet")) // 2 if r["network"]["kind"] == "new VPC" else None
    registered = {ng.inputs["labels"][NODE_ROLE_LABEL]: ng for ng in p.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert set(registered) == {g["name"] for g in r["nodeGroups"]}
    for g in r["nodeGroups"]:
        ng = registered[g["name"]]
        scaling = ng.inputs["scalingConfig"]
        assert ng.inputs["instanceTypes"] == g["instanceTypes"], g["name"]
        assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (
            g["minSize"],
            g["desiredSize"],
            g["maxSize"],
        )
        assert ng.inputs["capacityType"] == g["capacityType"] and ng.inputs["amiType"] == g["amiType"]
        lt = _launch_template(p, ng)
        assert len(lt.inputs.get("networkInterfaces") or []) == g["efaInterfacesPerNode"]
        assert lt.inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] == g["diskSizeGib"]
        pinned = g["zone"] != "every zone of the VPC"
        expected = 1 if pinned else (private_subnets or len(ng.inputs["subnetIds"]))
        assert len(ng.inputs["subnetIds"]) == expected, g["name"]
        facts = INSTANCE_TYPES[g["instanceTypes"][0]]
        assert g["gpusPerNode"] == facts.gpus and ("nvidia.com/gpu" in str(ng.inputs.get("taints"))) == bool(facts.gpus)


def _pod(p: Program, job: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(pods, the worker container's resource requests, its environment) of a job as registered."""
    if job["kind"] == "mpi":
        mpi = p.one("kubernetes:kubeflow.org/v2beta1:MPIJob", lambda r: r.inputs["metadata"]["name"] == job["name"])
        worker = mpi.inputs["spec"]["mpiReplicaSpecs"]["Worker"]
        (c,) = worker["template"]["spec"]["containers"]
        return (
            int(worker["replicas"]),
            c["resources"]["requests"],
            {e["name"]: e.get("value") for e in c.get("env", [])},
        )
    k8s_job = p.one("kubernetes:batch/v1:Job", lambda r: r.inputs["metadata"]["name"] == job["name"])
    (c,) = k8s_job.inputs["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    return int(k8s_job.inputs["spec"]["completions"]), c["resources"]["requests"], env


@pytest.mark.parametrize("stack", STACKS)
def test_jobs_are_what_the_program_registers(program_for, stack: str) -> None:
    p: Program = program_for(stack, False)
    r = stack_report(stack)
    for job in r["jobs"]:
        pods, requests, env = _pod(p, job)
        assert pods == job["nodes"], job["name"]
        assert int(requests.get("nvidia.com/gpu", 0)) == job["gpusPerPod"], job["name"]
        assert int(requests.get("vpc.amazonaws.com/efa", 0)) == job["efaInterfacesPerPod"], job["name"]
        if job["kind"] != "mpi":
            assert env["JOB_SIZE"] == str(job["nodes"]) and env["PROCS_PER_NODE"] == str(job["processesPerNode"])


def _registered_cost(p: Program) -> tuple[float, float]:
    """USD per hour (running, idle) of what the program registered, priced with the catalog's list prices."""
    hourly = {k: v.usd / HOURS_PER_MONTH if v.unit == "month" else v.usd for k, v in SERVICE_PRICES.items()}
    (cluster,) = p.of_type("eks:index:Cluster")
    extended = cluster.inputs["upgradePolicy"]["supportType"] == "EXTENDED"
    fixed = hourly["eks-cluster-extended" if extended else "eks-cluster"]
    fixed += hourly["kms-key"] * len(p.of_type("aws:kms/key:Key"))
    fixed += (hourly["nat-gateway"] + hourly["public-ipv4"]) * len(p.of_type("aws:ec2/natGateway:NatGateway"))
    for fs in p.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):
        price = FSX_LUSTRE_PRICES[int(fs.inputs["perUnitStorageThroughput"])]
        fixed += fs.inputs["storageCapacity"] * price.usd / HOURS_PER_MONTH
    running = idle = fixed
    for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
        disk = _launch_template(p, ng).inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"]
        price = INSTANCE_TYPES[ng.inputs["instanceTypes"][0]].price_per_hour or 0.0
        if ng.inputs["capacityType"] == "SPOT":
            pytest.fail("no preset is spot; price spot here before adding one")
        node = price + disk * SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH
        running += node * ng.inputs["scalingConfig"]["desiredSize"]
        idle += node * ng.inputs["scalingConfig"]["minSize"]
    return round(running, 3), round(idle, 3)


@pytest.mark.parametrize("stack", STACKS)
def test_cost_is_the_registered_resources_priced(program_for, stack: str) -> None:
    r = stack_report(stack)
    assert (r["cost"]["runningPerHour"], r["cost"]["idlePerHour"]) == _registered_cost(program_for(stack, False))


@pytest.mark.parametrize("stack", STACKS)
def test_storage_is_what_the_program_registers(program_for, stack: str) -> None:
    p: Program = program_for(stack, False)
    st = stack_report(stack)["storage"]
    fsx = p.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert (st["backend"] == "fsx") == bool(fsx) and (st["backend"] == "efs") == bool(
        p.of_type("aws:efs/fileSystem:FileSystem")
    )
    if fsx:
        (fs,) = fsx
        assert (fs.inputs["storageCapacity"], fs.inputs["perUnitStorageThroughput"]) == (
            st["capacityGib"],
            st["throughputPerTib"],
        )
        sid = fs.inputs["subnetIds"]
        (subnet,) = [
            s for s in p.of_type("aws:ec2/subnet:Subnet") if s.id == (sid[0] if isinstance(sid, list) else sid)
        ]
        assert subnet.inputs["availabilityZone"] == st["zone"]


def test_the_text_names_every_group_job_and_total() -> None:
    r = stack_report("p5")
    text = render(r)
    for g in r["nodeGroups"]:
        assert (
            f"  {g['name']:<12} {', '.join(g['instanceTypes'])}: min {g['minSize']} / desired {g['desiredSize']}"
            in text
        )
    assert (
        "1. train (pytorch) on gpu: 2 node(s) (1-2 elastic) x 8 process(es); per pod 8 GPU(s), 32 EFA interface(s)"
        in text
    )
    assert (
        "2. evaluate (command) on system: 1 node(s) x 1 process (the command; PROCS_PER_NODE=1 in its environment)"
        in text
        and "after train" in text
    )
    assert (
        f"estimated cost: running ${r['cost']['runningPerHour']:.3f}/h, idle ${r['cost']['idlePerHour']:.3f}/h" in text
    )


def test_side_by_side_jobs_share_a_step() -> None:
    """A benchmark's experiments run side by side: the plan puts them all in step 1, not numbered as if in a row."""
    text = render(stack_report("benchmark"))
    steps = [line.split(".")[0].strip() for line in text.splitlines() if line.startswith("  ") and ") on gpu:" in line]
    assert steps == ["1", "1", "1", "1"], text
    assert "nccl-allreduce-2-nodes (mpi) on gpu: 2 node(s) x 1 process(es)" in text
