"""Variants of the shipped stacks that push what the mocks cannot see: every name at the longest the loader
accepts (and starting with a digit where it accepts one), another partition (aws-cn), a private-only API
endpoint, and the first job's code from a folder of the project (uploaded by the program).
``stress_program(stack)`` evaluates the variant of a stack once per session. ``kept_config(stack)``: the stack with
its shared storage kept on destroy (``storage.retainOnDelete``; an FSx stack moved into an existing VPC, which a kept
Lustre file system needs).
"""

import copy
import re
from collections.abc import Callable
from typing import Any

from stacks.config.base import ENTRY_NAME_MAX, ENTRY_NAME_RE
from stacks.config.rules import CLUSTER_NAME_MAX
from tests.harness import PROJECT, REGION, Program, run_program, shared, stack_config

P = f"{PROJECT}:"
#: The region of the variant: the aws-cn partition.
STRESS_REGION = "cn-northwest-1"


def _longest(name: str, limit: int, filler: str) -> str:
    """``name`` padded to ``limit`` characters (a valid DNS label)."""
    return (name + "-" + filler * limit)[:limit].rstrip("-")[: limit - 1] + filler


def _entry(section: str, name: str, filler: str) -> str:
    """The longest name of an entry of ``section``, starting with a digit wherever the loader accepts one (a name
    derived from it that must start with a letter then shows up in tests/mock/test_names.py)."""
    digit_first = "0" + name
    if ENTRY_NAME_RE[section].match(digit_first):
        name = digit_first
    return _longest(name, ENTRY_NAME_MAX[section], filler)


def _env_name(job: str) -> str:
    return job.upper().replace("-", "_")


def long_names(config: dict[str, Any]) -> dict[str, Any]:
    """Every user-given name at its longest: the cluster, node groups, jobs, benchmark experiments, images,
    datasets (references renamed with them)."""
    cfg = copy.deepcopy(config)
    cfg[P + "clusterName"] = _longest("ml-platform", CLUSTER_NAME_MAX, "c")
    groups = {g: _entry("nodeGroups", g, "g") for g in cfg.get(P + "nodeGroups") or {}}
    jobs = {j: _entry("jobs", j, "j") for j in cfg.get(P + "jobs") or {}}
    datasets = {d: _entry("datasets", d, "d") for d in cfg.get(P + "datasets") or {}}
    images = {i: _entry("images", i, "i") for i in cfg.get(P + "images") or {}}
    if groups:
        cfg[P + "nodeGroups"] = {groups[g]: v for g, v in cfg[P + "nodeGroups"].items()}
    if datasets:
        cfg[P + "datasets"] = {datasets[d]: v for d, v in cfg[P + "datasets"].items()}
    if images:
        cfg[P + "images"] = {images[i]: v for i, v in cfg[P + "images"].items()}

    bench = cfg.get(P + "benchmark")
    experiments = {e: _entry("jobs", e, "e") for e in (bench or {}).get("experiments") or {}}
    every = {**jobs, **experiments}

    def rename_refs(text: str) -> str:
        for old, new in every.items():
            text = text.replace(f"$({_env_name(old)}_OUTPUT_DIR)", f"$({_env_name(new)}_OUTPUT_DIR)")
        return text

    def renamed_job(v: dict[str, Any]) -> dict[str, Any]:
        v = dict(v)
        if v.get("nodeGroup") in groups:
            v["nodeGroup"] = groups[v["nodeGroup"]]
        if v.get("dataset") in datasets:
            v["dataset"] = datasets[v["dataset"]]
        if v.get("image") in images:
            v["image"] = images[v["image"]]
        if v.get("from") in experiments:
            v["from"] = experiments[v["from"]]
        if "after" in v:
            v["after"] = [every[a] for a in v["after"]]
        for k in ("args", "command", "launcherCommand"):
            if k in v:
                v[k] = [rename_refs(a) if isinstance(a, str) else a for a in v[k]]
        return v

    if jobs:
        cfg[P + "jobs"] = {jobs[j]: renamed_job(v) for j, v in cfg[P + "jobs"].items()}
    if experiments:
        cfg[P + "benchmark"] = {
            **bench,
            "experiments": {experiments[e]: renamed_job(v) for e, v in bench["experiments"].items()},
        }
    return cfg


def in_region(config: dict[str, Any], region: str) -> dict[str, Any]:
    """The config moved to ``region`` (zone names pinned in node groups follow)."""
    cfg = copy.deepcopy(config)
    old = str(cfg.get("aws:region", REGION))
    cfg["aws:region"] = region

    def move(value: Any) -> Any:
        if isinstance(value, str) and re.fullmatch(rf"{re.escape(old)}[a-z]", value):
            return region + value[-1]
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        if isinstance(value, list):
            return [move(v) for v in value]
        return value

    return {k: move(v) for k, v in cfg.items()}


#: The networks the private-endpoint variant lets reach the API server.
PRIVATE_ACCESS_CIDRS = ("10.0.200.0/24", "172.31.0.0/16")


def private_endpoint(config: dict[str, Any]) -> dict[str, Any]:
    """The API server reachable from inside the VPC only: from a bastion's subnet and a VPN's range."""
    cfg = copy.deepcopy(config)
    cluster = dict(cfg.get(P + "cluster") or {})
    cluster.pop("publicAccessCidrs", None)
    cluster["endpointPublicAccess"] = False
    cluster["privateAccessCidrs"] = list(PRIVATE_ACCESS_CIDRS)
    cfg[P + "cluster"] = cluster
    return cfg


#: A folder of the project (the repository, where the harness runs the program) standing for a job's own code.
STRESS_CODE_FOLDER = "tests/programs"


def local_code(config: dict[str, Any]) -> dict[str, Any]:
    """The first job's ``code`` a folder of the project (the program uploads it; its pods read exactly that object)."""
    cfg = copy.deepcopy(config)
    jobs = cfg.get(P + "jobs") or {}
    if jobs:
        first = next(iter(jobs))
        jobs[first] = {**jobs[first], "code": STRESS_CODE_FOLDER}
    return cfg


def stress_config(stack: str) -> dict[str, Any]:
    """A shipped stack with the longest names, in the aws-cn partition, with a private endpoint, and its first job's
    code from a folder of the project."""
    return local_code(private_endpoint(in_region(long_names(stack_config(stack)), STRESS_REGION)))


_EVALUATED: dict[tuple[str, str], Program] = {}


def _evaluated(variant: str, stack: str, config: Callable[[str], dict[str, Any]]) -> Program:
    """``config(stack)`` evaluated under mocks, once per session and variant; it must evaluate without error."""
    if (variant, stack) not in _EVALUATED:
        program = shared(f"{variant}-{stack}", lambda: run_program(stack, config=config(stack), expect_error=True))
        assert program.error is None, f"{stack} ({variant} variant): {program.error}"
        _EVALUATED[variant, stack] = program
    return _EVALUATED[variant, stack]


def stress_program(stack: str) -> Program:
    """The evaluated :func:`stress_config` of ``stack`` (once per session)."""
    return _evaluated("stress", stack, stress_config)


#: The existing VPC of the kept FSx variants: one private subnet per zone letter a, b, c.
KEPT_SUBNETS = {"a": "subnet-0aaa1111bbbb22223", "b": "subnet-0ccc3333dddd44445", "c": "subnet-0eee5555ffff66667"}


def kept_config(stack: str) -> dict[str, Any]:
    """``stack`` with ``storage.retainOnDelete: true``. A kept FSx file system needs an existing VPC (its network
    interfaces stay in its subnet): the VPC's network becomes ``existingVpc`` and zones pinned by name become the
    zone's subnet."""
    cfg = copy.deepcopy(stack_config(stack))
    storage = dict(cfg.get(P + "storage") or {})
    storage["retainOnDelete"] = True
    if storage.get("backend") == "fsx":
        cfg.pop(P + "network", None)
        cfg[P + "existingVpc"] = {"vpcId": "vpc-0abc1234def567890", "privateSubnetIds": list(KEPT_SUBNETS.values())}

        def subnet_for(holder: dict[str, Any]) -> dict[str, Any]:
            zone = holder.get("availabilityZone")
            if not zone:
                return holder
            return {**{k: v for k, v in holder.items() if k != "availabilityZone"}, "subnetId": KEPT_SUBNETS[zone[-1]]}

        cfg[P + "nodeGroups"] = {n: subnet_for(g) for n, g in (cfg.get(P + "nodeGroups") or {}).items()}
        storage["fsx"] = subnet_for(dict(storage.get("fsx") or {}))
    cfg[P + "storage"] = storage
    return cfg


def kept_program(stack: str) -> Program:
    """The evaluated :func:`kept_config` of ``stack`` (once per session)."""
    return _evaluated("kept", stack, kept_config)


# --- held-out stacks: what a user would plausibly write, which the presets do not cover ------------------------------

#: Stack files a user would plausibly write that no preset resembles, by name (the ``config:`` of each). Tests that
#: iterate the presets' variants iterate these too (:func:`held_out_program`); tests/cluster runs them on the box.
#: ``zone-id-topology`` found that the box's nodes had no ``topology.k8s.aws/zone-id`` label, so a group pinned by
#: zone ID (which the README recommends for EFA groups) never ran in a rehearsal.
HELD_OUT: dict[str, dict[str, Any]] = {
    # p4de (no preset's type) in a fixed group pinned by zone ID: Kueue's topology-aware placement on by default; the
    # group's own taint (the device plugins must still run on its nodes).
    "zone-id-topology": {
        "aws:region": "us-east-1",
        P + "storage": {"backend": "fsx"},
        P + "nodeGroups": {
            "gpu": {
                "instanceTypes": ["p4de.24xlarge"],
                "availabilityZone": "use1-az6",
                "minSize": 2,
                "desiredSize": 2,
                "maxSize": 2,
                "taints": [{"key": "dedicated", "value": "training", "effect": "NoSchedule"}],
            }
        },
        P + "jobs": {
            "train": {
                "kind": "pytorch",
                "nodes": 2,
                "script": "/app/train.py",
                "args": ["--output-dir", "$(OUTPUT_DIR)"],
            }
        },
    },
    # A user's own PyTorch job on a 4-GPU type no preset uses (2 processes per node, c10d, elastic 2-4 nodes,
    # TensorBoard in a subfolder), then an MPI job on a Spot group of two 1-GPU types.
    "own-pytorch-spot-mpi": {
        "aws:region": "us-east-1",
        P + "network": {"availabilityZoneCount": 2},
        P + "systemNodeGroup": {"instanceType": "m5.large", "minSize": 1, "desiredSize": 1, "maxSize": 2},
        P + "nodeGroups": {
            "gpu": {"instanceTypes": ["g5.12xlarge"], "efa": False, "minSize": 0, "desiredSize": 3, "maxSize": 4},
            "spot": {
                "instanceTypes": ["g5.xlarge", "g6.xlarge"],
                "capacityType": "SPOT",
                "spotDiscount": 0.6,
                "minSize": 0,
                "desiredSize": 3,
                "maxSize": 4,
            },
        },
        P + "images": {"nccl-tests": {"context": "images/nccl-tests"}},
        P + "jobs": {
            "finetune": {
                "kind": "pytorch",
                "nodeGroup": "gpu",
                "nodes": 3,
                "minNodes": 2,
                "maxNodes": 4,
                "processesPerNode": 2,
                "rendezvousBackend": "c10d",
                "script": "/app/train.py",
                "args": ["--output-dir", "$(OUTPUT_DIR)", "--epochs", "2"],
                "tensorboard": "tb/logs",
                "checkpointEverySeconds": 600,
                "env": {"NCCL_DEBUG": "INFO"},
            },
            "allreduce": {
                "kind": "mpi",
                "image": "nccl-tests",
                "nodeGroup": "spot",
                "nodes": 3,
                "command": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "1"],
                "after": ["finetune"],
            },
        },
    },
    # An MPI bandwidth check that `pulumi up` waits for (waitForCompletion), then the training after it, on a group a
    # preparation job may hold first; and a short smoke test whose deadline is shorter than its time in the queue.
    "awaited-mpi": {
        "aws:region": "us-east-1",
        P + "network": {"availabilityZoneCount": 2},
        P + "nodeGroups": {
            "gpu": {"instanceTypes": ["g5.12xlarge"], "efa": False, "minSize": 0, "desiredSize": 2, "maxSize": 2}
        },
        P + "images": {"nccl-tests": {"context": "images/nccl-tests"}},
        P + "jobs": {
            "prep": {"kind": "command", "nodes": 2, "command": ["sh", "-c", "nvidia-smi -L"]},
            "nccl": {
                "kind": "mpi",
                "image": "nccl-tests",
                "nodes": 2,
                "command": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "1"],
                "waitForCompletion": True,
                "queueTimeoutHours": 2,
            },
            "smoke": {
                "kind": "command",
                "nodes": 2,
                "command": ["python", "-c", "import torch; print(torch.cuda.device_count())"],
                "timeoutHours": 0.003,
                "waitForCompletion": True,
            },
            "train": {
                "kind": "pytorch",
                "nodes": 2,
                "script": "/app/train.py",
                "args": ["--output-dir", "$(OUTPUT_DIR)", "--epochs", "1"],
                "after": ["nccl"],
            },
        },
    },
    # Two worker groups (a labelled, tainted CPU group for a 3-node command job; 3 T4 nodes for TensorFlow), an
    # evaluation on the system group, its own namespace, claim and storage class names, and two teams (one borrows,
    # one lends but may not borrow).
    "cpu-tf-teams": {
        "aws:region": "eu-west-1",
        P + "storage": {
            "namespace": "ml-research-experiments",
            "pvcName": "shared-datasets-and-checkpoints",
            "storageClassName": "efs-shared-research",
        },
        P + "nodeGroups": {
            "prep": {
                "instanceTypes": ["m5.xlarge"],
                "minSize": 0,
                "desiredSize": 3,
                "maxSize": 3,
                "labels": {"team": "data"},
                "taints": [{"key": "dedicated", "value": "prep", "effect": "NoSchedule"}],
            },
            "gpu": {"instanceTypes": ["g4dn.xlarge"], "minSize": 0, "desiredSize": 3, "maxSize": 3},
        },
        P + "images": {"tensorflow": {"context": "images/tensorflow"}},
        P + "datasets": {"cifar10": {}},
        P + "teams": {
            "vision": {"quotaPercent": 33},
            "nlp": {"namespace": "nlp-research", "quotaPercent": 34, "mayBorrow": False},
        },
        P + "jobs": {
            "preprocess": {
                "kind": "command",
                "nodeGroup": "prep",
                "nodes": 3,
                "command": ["python", "-c", "print('prep')"],
                "dataset": "cifar10",
                "outputDir": "experiments/prep-1",
            },
            "train-tf": {
                "kind": "tensorflow",
                "image": "tensorflow",
                "nodeGroup": "gpu",
                "nodes": 3,
                "command": ["python", "/app/train_tf.py"],
                "args": ["--epochs", "2"],
                "dataset": "cifar10",
                "after": ["preprocess"],
            },
            "report": {
                "kind": "command",
                "purpose": "evaluation",
                "nodeGroup": "system",
                "command": ["sh", "-c", "ls $(TRAIN_TF_OUTPUT_DIR)"],
                "after": ["train-tf"],
            },
        },
    },
}


def held_out_program(name: str) -> Program:
    """The evaluated held-out stack ``name`` (:data:`HELD_OUT`, once per session)."""
    return _evaluated("held-out", name, lambda n: copy.deepcopy(HELD_OUT[n]))
