"""Bad stack configs stop the program with one clear error, before any resource is registered."""

from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from components.catalog import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from stacks.config import ConfigError, load_config
from stacks.plan.report import main as plan_main
from tests.harness import PROJECT, REPO, run_program, stack_config, stack_names

GPU = {"instanceTypes": ["g5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 2}


def base() -> dict[str, Any]:
    return stack_config("dev")


def setk(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(cfg: dict[str, Any]) -> None:
        cfg[f"{PROJECT}:{key}"] = value

    return apply


def group(**fields: Any) -> Callable[[dict[str, Any]], None]:
    """Add (or replace) a worker group ``gpu`` next to the dev stack's groups."""

    def apply(cfg: dict[str, Any]) -> None:
        groups = dict(cfg.get(f"{PROJECT}:nodeGroups") or {})
        groups["gpu"] = {**GPU, **fields}
        cfg[f"{PROJECT}:nodeGroups"] = groups

    return apply


def both(*fns: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(cfg: dict[str, Any]) -> None:
        for f in fns:
            f(cfg)

    return apply


def renamed(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    """The section ``old`` written as ``new``."""

    def apply(cfg: dict[str, Any]) -> None:
        cfg[f"{PROJECT}:{new}"] = cfg.pop(f"{PROJECT}:{old}")

    return apply


def job(name: str = "train", **fields: Any) -> Callable[[dict[str, Any]], None]:
    """Change (or add) a job of the dev stack; a field set to None is removed."""

    def apply(cfg: dict[str, Any]) -> None:
        jobs = {k: dict(v) for k, v in (cfg.get(f"{PROJECT}:jobs") or {}).items()}
        entry = jobs.setdefault(name, {"kind": "command", "command": ["true"]})
        for k, v in fields.items():
            if v is None:
                entry.pop(k, None)
            else:
                entry[k] = v
        cfg[f"{PROJECT}:jobs"] = jobs

    return apply


def nulled(field: str, name: str = "train") -> Callable[[dict[str, Any]], None]:
    """The job's ``field`` written with nothing after it (YAML null)."""

    def apply(cfg: dict[str, Any]) -> None:
        jobs = {k: dict(v) for k, v in cfg[f"{PROJECT}:jobs"].items()}
        jobs[name][field] = None
        cfg[f"{PROJECT}:jobs"] = jobs

    return apply


def finetune_in(folder: str) -> Callable[[dict[str, Any]], None]:
    """The training job's output in runs/exp, and a second pytorch job after it whose outputDir is ``folder``."""
    second = {"kind": "pytorch", "script": "/app/train.py", "outputDir": folder, "after": ["train"], "command": None}
    return both(job(outputDir="runs/exp"), job("finetune", nodeGroup="cpu", **second))


def drop(key: str) -> Callable[[dict[str, Any]], None]:
    def apply(cfg: dict[str, Any]) -> None:
        cfg.pop(f"{PROJECT}:{key}", None)

    return apply


def fsx(**fields: Any) -> Callable[[dict[str, Any]], None]:
    """Switch the dev stack to FSx with these ``storage.fsx`` fields (and a zone unless given)."""
    return setk("storage", {"backend": "fsx", "fsx": {"availabilityZone": "us-east-1a", **fields}})


def add_group(name: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    """Add a worker group ``name`` (GPU defaults) next to the dev stack's groups."""

    def apply(cfg: dict[str, Any]) -> None:
        cfg[f"{PROJECT}:nodeGroups"] = {**(cfg.get(f"{PROJECT}:nodeGroups") or {}), name: {**GPU, **fields}}

    return apply


#: A small experiment for the dev stack's CPU group.
EXPERIMENT = {"kind": "command", "nodeGroup": "cpu", "command": ["python", "/app/allreduce_bench.py"]}


def bench(**fields: Any) -> Callable[[dict[str, Any]], None]:
    """Give the dev stack a benchmark section (one experiment unless ``experiments`` is given)."""
    return setk("benchmark", {"experiments": {"one": EXPERIMENT}, **fields})


#: The dev stack's training job on a p4d group pinned to us-east-1a.
P4D_TRAINING = both(
    group(instanceTypes=["p4d.24xlarge"], availabilityZone="us-east-1a"),
    job(nodeGroup="gpu", nodes=1, minNodes=1),
)

# (case id, change to the dev stack's config, fragments the error must contain)
CASES: list[tuple[str, Callable[[dict[str, Any]], None], list[str]]] = [
    ("unknown top-level key", setk("nodegroups", {}), ["eks-training:nodegroups: unknown key", "nodeGroups"]),
    ("unknown key in a group", group(minsize=1), ["eks-training:nodeGroups.gpu.minsize: unknown key"]),
    (
        "unknown key in network",
        setk("network", {"vpcCidr": "10.0.0.0/16", "natGateway": "single"}),
        ["eks-training:network.natGateway: unknown key"],
    ),
    ("wrong type", group(maxSize="many"), ["eks-training:nodeGroups.gpu.maxSize", "integer"]),
    (
        "an integer beyond 32 bits",
        group(maxSize=2**31),
        ["eks-training:nodeGroups.gpu.maxSize: 2147483648 is larger than 2147483647", "set a smaller number"],
    ),
    (
        "an integer beyond 32 bits in a job",
        job(processesPerNode=10**10),
        ["eks-training:jobs.train.processesPerNode: 10000000000 is larger than 2147483647"],
    ),
    (
        "variables written as a shell's",
        job(args=["--out", "${OUTPUT_DIR}/x", "--lr", "$LR", "--cost", "$$5", "$$(LR)", "$HOME"], env={"LR": "0.1"}),
        [
            "eks-training:jobs.train.args[1]: ${OUTPUT_DIR} reaches the program as written: no shell runs the "
            "command, and Kubernetes expands only $(NAME); write $(OUTPUT_DIR)",
            "eks-training:jobs.train.args[3]: $LR reaches the program as written",
        ],
    ),
    (
        "an integer beyond 32 bits in an experiment",
        bench(experiments={"one": {**EXPERIMENT, "nodes": 2**32}}),
        ["eks-training:benchmark.experiments.one.nodes: 4294967296 is larger than 2147483647"],
    ),
    (
        "missing required key",
        setk("nodeGroups", {"gpu": {"instanceTypes": ["g5.xlarge"], "minSize": 0, "maxSize": 1}}),
        ["eks-training:nodeGroups.gpu.desiredSize: required key is missing"],
    ),
    (
        "min > max",
        group(minSize=3, desiredSize=3, maxSize=2),
        ["eks-training:nodeGroups.gpu.minSize: 3 > eks-training:nodeGroups.gpu.maxSize (2)", "set minSize <= maxSize"],
    ),
    (
        "desired outside range",
        group(minSize=1, desiredSize=5, maxSize=2),
        ["eks-training:nodeGroups.gpu.desiredSize: 5 is outside [minSize, maxSize] = [1, 2]"],
    ),
    (
        "system min > max",
        setk("systemNodeGroup", {"minSize": 3, "desiredSize": 3, "maxSize": 2}),
        ["eks-training:systemNodeGroup.minSize: 3 > eks-training:systemNodeGroup.maxSize (2)"],
    ),
    (
        "unknown instance type",
        group(instanceTypes=["p9.mega"]),
        ["eks-training:nodeGroups.gpu.instanceTypes[0]: unknown instance type 'p9.mega'", "instanceFacts"],
    ),
    (
        "misspelt instance type",
        group(instanceTypes=["g5.xlarg"]),
        ["unknown instance type 'g5.xlarg'; did you mean g5.xlarge? use one of"],
    ),
    (
        "instance type in capitals",
        group(instanceTypes=["G5.xlarge"]),
        ["unknown instance type 'G5.xlarge'; did you mean g5.xlarge? use one of"],
    ),
    (
        "GPU type for system group",
        setk("systemNodeGroup", {"instanceType": "g5.xlarge", "minSize": 1, "desiredSize": 1, "maxSize": 1}),
        ["eks-training:systemNodeGroup.instanceType: g5.xlarge is a GPU type"],
    ),
    (
        "mixed GPU counts",
        group(instanceTypes=["g5.xlarge", "g5.48xlarge"], capacityType="SPOT"),
        ["different GPU counts", "separate groups"],
    ),
    (
        "several on-demand types",
        group(instanceTypes=["g5.xlarge", "g6.xlarge"]),
        [
            "an On-Demand group takes one type here: EKS would launch the first while it has capacity",
            "list one type or set capacityType: SPOT",
        ],
    ),
    (
        "bad capacity type",
        group(capacityType="RESERVED"),
        ["eks-training:nodeGroups.gpu.capacityType", "ON_DEMAND", "SPOT"],
    ),
    (
        "one availability zone",
        setk("network", {"availabilityZoneCount": 1}),
        ["eks-training:network.availabilityZoneCount: 1 is below the minimum 2; set it to 2 or more"],
    ),
    (
        "one listed zone",
        setk("network", {"availabilityZones": ["us-east-1a"]}),
        ["eks-training:network.availabilityZones: EKS needs at least 2 availability zones"],
    ),
    (
        "zone not in region",
        setk("network", {"availabilityZones": ["us-east-1a", "us-east-1g"]}),
        ["us-east-1g not available in this region", "choose names or IDs from us-east-1a (use1-az6)"],
    ),
    (
        "only one zone EKS accepts",
        setk("network", {"availabilityZones": ["us-east-1a", "us-east-1e"]}),
        [
            "eks-training:network.availabilityZones: EKS needs control-plane subnets in 2 zones it supports; "
            "us-east-1e (use1-az3) it refuses; add zones from us-east-1a (use1-az6), us-east-1b (use1-az1), us-east-1c "
            "(use1-az2), us-east-1d (use1-az4), us-east-1f (use1-az5)"
        ],
    ),
    (
        "only one zone ID EKS accepts",
        setk("network", {"availabilityZones": ["use1-az6", "use1-az3"]}),
        [
            "eks-training:network.availabilityZones: EKS needs control-plane subnets in 2 zones it supports, and it "
            "refuses use1-az3 (https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html); list at least 2 "
            "zones EKS supports"
        ],
    ),
    (
        "zones written both ways",
        both(setk("network", {"availabilityZones": ["us-east-1a", "us-east-1b"]}), group(availabilityZone="use1-az6")),
        [
            "eks-training:network.availabilityZones[0]: us-east-1a is a zone name while "
            "eks-training:nodeGroups.gpu.availabilityZone is a zone ID (use1-az6); write every zone of the stack the "
            "same way"
        ],
    ),
    (
        "zone named in another region",
        group(availabilityZone="us-west-2a"),
        [
            "eks-training:nodeGroups.gpu.availabilityZone: us-west-2a is not a zone of aws:region us-east-1; name one "
            "of its zones (such as us-east-1a) or a zone ID, or change aws:region"
        ],
    ),
    (
        "listed zone named in another region",
        setk("network", {"availabilityZones": ["us-east-1a", "eu-west-1b"]}),
        ["eks-training:network.availabilityZones[1]: eu-west-1b is not a zone of aws:region us-east-1"],
    ),
    (
        "zone neither name nor ID",
        group(availabilityZone="east-1a"),
        [
            "eks-training:nodeGroups.gpu.availabilityZone: 'east-1a' is not a zone name (us-east-1a) or zone ID "
            "(use1-az1)"
        ],
    ),
    (
        "pinned zone ID the account lacks",
        group(availabilityZone="use1-az7"),
        ["eks-training:nodeGroups.gpu.availabilityZone: use1-az7 is not an available zone of this region"],
    ),
    (
        "taint with bad effect",
        group(taints=[{"key": "team", "value": "ml", "effect": "NoScheduling"}]),
        ["eks-training:nodeGroups.gpu.taints[0].effect", "NoSchedule"],
    ),
    (
        "taint with bad key",
        group(taints=[{"key": "bad key!", "effect": "NoSchedule"}]),
        ["eks-training:nodeGroups.gpu.taints[0].key: 'bad key!' is not a valid taint key"],
    ),
    (
        "gpu taint given by hand",
        group(taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]),
        ["added to GPU groups automatically"],
    ),
    (
        "invalid VPC CIDR",
        setk("network", {"vpcCidr": "10.0.0.1/16"}),
        ["eks-training:network.vpcCidr: '10.0.0.1/16' is not a valid CIDR"],
    ),
    (
        "an API endpoint CIDR without its prefix",
        setk("cluster", {"publicAccessCidrs": ["203.0.113.7"]}),
        [
            "eks-training:cluster.publicAccessCidrs[0]: '203.0.113.7' has no prefix length; write 203.0.113.7/32 for "
            "one address"
        ],
    ),
    (
        "overlapping subnets",
        setk(
            "network",
            {
                "availabilityZoneCount": 2,
                "privateSubnetCidrs": ["10.0.0.0/18", "10.0.32.0/19"],
                "publicSubnetCidrs": ["10.0.192.0/22", "10.0.196.0/22"],
            },
        ),
        [
            "eks-training:network.privateSubnetCidrs[0]: 10.0.0.0/18 overlaps "
            "eks-training:network.privateSubnetCidrs[1] 10.0.32.0/19"
        ],
    ),
    (
        "subnet outside VPC",
        setk(
            "network",
            {
                "availabilityZoneCount": 2,
                "privateSubnetCidrs": ["10.0.0.0/18", "10.1.0.0/18"],
                "publicSubnetCidrs": ["10.0.192.0/22", "10.0.196.0/22"],
            },
        ),
        ["eks-training:network.privateSubnetCidrs[1]: 10.1.0.0/18 is outside network.vpcCidr"],
    ),
    (
        "service CIDR overlaps VPC",
        setk("cluster", {"serviceCidr": "10.0.128.0/16"}),
        ["eks-training:cluster.serviceCidr: '10.0.128.0/16' is not a valid CIDR"],
    ),
    (
        "service range outside the private blocks",
        setk("cluster", {"serviceCidr": "100.64.0.0/16"}),
        [
            "eks-training:cluster.serviceCidr: 100.64.0.0/16 is not within 10.0.0.0/8, 172.16.0.0/12 or "
            "192.168.0.0/16, where EKS takes a service range"
        ],
    ),
    (
        "service CIDR inside VPC",
        setk("cluster", {"serviceCidr": "10.0.0.0/20"}),
        ["eks-training:cluster.serviceCidr: 10.0.0.0/20 overlaps eks-training:network.vpcCidr 10.0.0.0/16"],
    ),
    (
        "wrong subnet count for zones",
        setk("network", {"availabilityZoneCount": 3, "privateSubnetCidrs": ["10.0.0.0/18", "10.0.64.0/18"]}),
        ["eks-training:network.privateSubnetCidrs: 2 CIDRs for 3 availability zones"],
    ),
    (
        "existing VPC with one subnet",
        both(
            drop("network"),
            setk("existingVpc", {"vpcId": "vpc-0abc1234def567890", "privateSubnetIds": ["subnet-0aaa1111bbbb22223"]}),
        ),
        ["eks-training:existingVpc.privateSubnetIds: EKS needs private subnets in at least 2 availability zones"],
    ),
    (
        "existing VPC without subnets",
        both(drop("network"), setk("existingVpc", {"vpcId": "vpc-0abc1234def567890"})),
        ["eks-training:existingVpc.privateSubnetIds: required key is missing"],
    ),
    (
        "existing VPC and network",
        setk(
            "existingVpc",
            {
                "vpcId": "vpc-0abc1234def567890",
                "privateSubnetIds": ["subnet-0aaa1111bbbb22223", "subnet-0ccc3333dddd44445"],
            },
        ),
        ["eks-training:network and eks-training:existingVpc are both set"],
    ),
    (
        "bad VPC id",
        both(
            drop("network"),
            setk(
                "existingVpc",
                {"vpcId": "my-vpc", "privateSubnetIds": ["subnet-0aaa1111bbbb22223", "subnet-0ccc3333dddd44445"]},
            ),
        ),
        ["eks-training:existingVpc.vpcId: 'my-vpc' is not a VPC id"],
    ),
    (
        "unsupported Kubernetes version",
        setk("cluster", {"kubernetesVersion": "1.24"}),
        [
            "eks-training:cluster.kubernetesVersion: '1.24' is not supported; use one of 1.34, 1.35, 1.36 (or 1.32, "
            "1.33, past standard support, with extendedSupport: true)"
        ],
    ),
    (
        "AMI release that is neither a tag nor a release version",
        setk("cluster", {"amiRelease": "latest"}),
        ["eks-training:cluster.amiRelease: 'latest' is not an EKS AMI release", "a release tag such as v2"],
    ),
    (
        "AMI release tag the catalog lacks",
        group(amiRelease="v20990101"),
        [
            "eks-training:nodeGroups.gpu.amiRelease: v20990101 is not a release this project knows",
            "use one of v20260610",
        ],
    ),
    (
        "AMI release version of another Kubernetes minor",
        setk("cluster", {"amiRelease": "1.35.6-20260714"}),
        ["eks-training:cluster.amiRelease: 1.35.6-20260714 is a release version of Kubernetes 1.35, not of 1.36"],
    ),
    (
        "AMI release version not in its release",
        setk("systemNodeGroup", {**stack_config("dev")[f"{PROJECT}:systemNodeGroup"], "amiRelease": "1.36.9-20260714"}),
        [
            "eks-training:systemNodeGroup.amiRelease: 1.36.9-20260714 is not in release v20260714",
            "1.36.2-20260714",
        ],
    ),
    (
        "update strategy EKS has no way to do",
        group(updateStrategy="drainAll"),
        ["eks-training:nodeGroups.gpu.updateStrategy", "rolling", "whenIdle"],
    ),
    (
        "bad admin ARN",
        setk("cluster", {"adminRoleArns": ["arn:aws:iam::123:user/bob"]}),
        ["eks-training:cluster.adminRoleArns[0]", "is not an IAM role ARN"],
    ),
    ("bad log type", setk("cluster", {"logTypes": ["api", "everything"]}), ["eks-training:cluster.logTypes[1]"]),
    ("reserved label prefix", group(labels={"kubernetes.io/role": "x"}), ["uses a reserved prefix"]),
    (
        "label the kubelet refuses",
        group(labels={"node-role.kubernetes.io/worker": ""}),
        ["'node-role.kubernetes.io/worker' is in the kubernetes.io or k8s.io namespace", "would never join"],
    ),
    ("label of a k8s.io subdomain", group(labels={"example.k8s.io/x": "y"}), ["the kubelet refuses to start with"]),
    (
        "bad cluster name",
        setk("clusterName", "My_Cluster"),
        ["eks-training:clusterName: 'My_Cluster' must be 1-40 lowercase letters"],
    ),
    (
        "cluster name ending in a dash",
        setk("clusterName", "bad-cluster-"),
        [
            "eks-training:clusterName: 'bad-cluster-' must be 1-40 lowercase letters, digits and '-', starting and "
            "ending with a letter or digit"
        ],
    ),
    (
        "bad storage quantity",
        setk("storage", {"capacity": "lots"}),
        ["eks-training:storage.capacity: 'lots' is not a Kubernetes quantity"],
    ),
    (
        "a claim of nothing",
        setk("storage", {"capacity": "0Gi"}),
        ["eks-training:storage.capacity: '0Gi' claims nothing: Kubernetes refuses a claim of 0"],
    ),
    (
        "a Dockerfile outside the image's context",
        setk("images", {"training": {"context": "training", "dockerfile": "/tmp/training/Dockerfile"}}),
        ["eks-training:images.training.dockerfile: '/tmp/training/Dockerfile' must be a relative path inside the"],
    ),
    (
        "a dataset in a zip",
        setk("datasets", {"cifar10": {"source": "https://example.com/data.zip"}}),
        ["eks-training:datasets.cifar10.source: 'https://example.com/data.zip' is a .zip archive; the staging job"],
    ),
    (
        "instance facts for a known type",
        setk("instanceFacts", {"g5.xlarge": {"vcpus": 4, "memoryMib": 16384, "source": "me"}}),
        ["eks-training:instanceFacts.g5.xlarge: g5.xlarge is already in the catalog"],
    ),
    (
        "instance facts without source",
        both(setk("instanceFacts", {"x9.large": {"vcpus": 2, "memoryMib": 8192}}), group(instanceTypes=["x9.large"])),
        ["eks-training:instanceFacts.x9.large.source: required key is missing"],
    ),
    ("nodeGroups not an object", setk("nodeGroups", ["gpu"]), ["eks-training:nodeGroups: must be an object"]),
    ("reserved group name", setk("nodeGroups", {"system": GPU}), ["'system' is reserved"]),
    (
        "empty nodeGroups",
        both(drop("jobs"), setk("nodeGroups", {})),
        ["eks-training:nodeGroups: define at least one worker group"],
    ),
    (
        "job on a missing group",
        job(nodeGroup="gpus"),
        ["eks-training:jobs.train.nodeGroup: 'gpus' is not a worker group; use one of cpu"],
    ),
    (
        "more nodes than the group has",
        job(nodes=3),
        ["eks-training:jobs.train.nodes: 3 > eks-training:nodeGroups.cpu.maxSize (2)", "one pod runs per node"],
    ),
    (
        "maxNodes above the group",
        job(maxNodes=5),
        ["eks-training:jobs.train.maxNodes: 5 > eks-training:nodeGroups.cpu.maxSize (2)"],
    ),
    (
        "minNodes > nodes",
        job(nodes=1, minNodes=2),
        ["eks-training:jobs.train.minNodes: 2 > eks-training:jobs.train.nodes (1)"],
    ),
    (
        "queue time of a job pulumi up does not wait for",
        job("extra", queueTimeoutHours=2),
        [
            "eks-training:jobs.extra.queueTimeoutHours: read only when `pulumi up` waits for the job or its health "
            "check; set waitForCompletion: true, or remove it"
        ],
    ),
    (
        "negative queue time",
        job(waitForCompletion=True, queueTimeoutHours=-1),
        ["eks-training:jobs.train.queueTimeoutHours"],
    ),
    (
        "ambiguous job group",
        both(group(), job(nodeGroup=None)),
        ["eks-training:jobs.train.nodeGroup: required when there is not exactly one worker group"],
    ),
    (
        "bad rendezvous backend",
        job(rendezvousBackend="etcd-v3"),
        ["eks-training:jobs.train.rendezvousBackend", "etcd-v2", "c10d"],
    ),
    (
        "unpinned prebuilt image",
        setk("images", {"training": {"prebuilt": "pytorch/pytorch"}}),
        ["eks-training:images.training.prebuilt", "neither a tag nor a @sha256 digest"],
    ),
    (
        "prebuilt image on latest",
        setk("images", {"training": {"prebuilt": "nvcr.io/nvidia/pytorch:latest"}}),
        ["eks-training:images.training.prebuilt", "floats on :latest (each pull may get another image)"],
    ),
    (
        "image with URL scheme",
        setk("images", {"x": {"prebuilt": "https://123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1"}}),
        ["eks-training:images.x.prebuilt", "URL scheme"],
    ),
    (
        "image folder without a Dockerfile",
        both(setk("images", {"mine": {"context": "stacks"}}), job(image="mine")),
        [
            "eks-training:images.mine.context: stacks/Dockerfile does not exist in the project folder ",
            "give a folder of your Pulumi project that holds the Dockerfile (or one this package ships: training, "
            "images/nccl-tests, images/horovod, images/tensorflow)",
        ],
    ),
    (
        "image with context and prebuilt",
        setk("images", {"x": {"context": "training", "prebuilt": "a/b:1"}}),
        ["eks-training:images.x: set exactly one of context"],
    ),
    (
        "image whose base does not support the group's GPU",
        both(
            group(instanceTypes=["p3.2xlarge"]),
            setk("images", {"training": {"context": "training"}, "horovod": {"context": "images/horovod"}}),
            job("bench", kind="command", nodeGroup="gpu", image="horovod", command=["python", "-c", "pass"]),
        ),
        [
            "eks-training:jobs.bench.image: job bench runs image 'horovod', built on nvcr.io/nvidia/tensorflow:25.02",
            "whose publisher supports GPUs of compute capability 7.5 and later",
            "not the NVIDIA V100 GPU (compute capability 7.0) of p3.2xlarge in node group gpu; run the job on a "
            "group whose GPUs the base supports, such as ",
        ],
    ),
    (
        "the bundled image on a group of GPUs no one torch build has kernels for",
        both(
            group(instanceTypes=["p3.16xlarge", "p6-b200.48xlarge"], capacityType="SPOT"),
            job(nodeGroup="gpu"),
        ),
        [
            "eks-training:jobs.train.image: job train runs image 'training', which installs torch 2.13.0 in the CUDA "
            "build of its GPUs, on node group gpu, whose types p3.16xlarge (NVIDIA V100, 7.0), p6-b200.48xlarge "
            "(NVIDIA B200, 10.0) no one build has kernels for (cu130: sm_75",
            "put the types of each GPU generation in a node group of their own",
        ],
    ),
    (
        "job with an unknown image",
        job(image="nope"),
        ["eks-training:jobs.train.image: 'nope' is not an image; use one of training"],
    ),
    (
        "dataset from ftp",
        setk("datasets", {"cifar10": {"source": "ftp://example.com/cifar.tgz"}}),
        [
            "eks-training:datasets.cifar10.source: 'ftp://example.com/cifar.tgz' must be an https:// URL or an "
            "s3://bucket/key URI"
        ],
    ),
    (
        "bad dataset md5",
        setk("datasets", {"cifar10": {"source": "s3://my-bucket/cifar.tgz", "md5": "xyz"}}),
        ["eks-training:datasets.cifar10.md5: 'xyz' is not an MD5 hex digest"],
    ),
    (
        "dataset path escapes volume",
        setk("datasets", {"cifar10": {"path": "../etc"}}),
        ["eks-training:datasets.cifar10.path: '../etc' must be a relative path"],
    ),
    (
        "two datasets staged into one folder",
        setk("datasets", {"cifar10": {}, "mine": {"source": "s3://my-bucket/mine.tgz", "path": "datasets/cifar10/x"}}),
        [
            "eks-training:datasets.mine.path: datasets/cifar10/x overlaps datasets.cifar10 (datasets/cifar10), and "
            "staging replaces what is in a dataset's folder; give it a folder of its own (the default is datasets/mine)"
        ],
    ),
    (
        "a job's output folder holding a dataset's default folder",
        job("evaluate", outputDir="."),
        [
            "eks-training:jobs.evaluate.outputDir: . overlaps the folder of eks-training:datasets.cifar10 "
            "(datasets/cifar10), and staging replaces what is in a dataset's folder; give the job a folder of its own"
        ],
    ),
    (
        "a dataset staged into the volume's root",
        setk("datasets", {"cifar10": {"path": "."}}),
        ["eks-training:datasets.cifar10.path: . overlaps the runs' folder (runs)"],
    ),
    (
        "a dataset staged among the runs",
        setk("datasets", {"cifar10": {"path": "runs/data"}}),
        ["eks-training:datasets.cifar10.path: runs/data overlaps the runs' folder (runs)"],
    ),
    (
        "job with an unknown dataset",
        job(dataset="imagenet"),
        ["eks-training:jobs.train.dataset: 'imagenet' is not a dataset; use one of cifar10"],
    ),
    (
        "after an unknown job",
        job("evaluate", after=["nope"]),
        ["eks-training:jobs.evaluate.after[0]: 'nope' is not a job; use one of train"],
    ),
    (
        "after itself",
        job("evaluate", after=["evaluate"]),
        ["eks-training:jobs.evaluate.after[0]: a job cannot wait for itself"],
    ),
    (
        "a job named as another job's health check",
        both(job(healthCheck={}), job("train-allreduce", nodeGroup="cpu")),
        [
            "eks-training:jobs.train-allreduce: the name of train's health check Job "
            "(eks-training:jobs.train.healthCheck); rename this job"
        ],
    ),
    (
        "jobs waiting in a cycle",
        both(job("train", after=["evaluate"]), job("evaluate", after=["train"])),
        ["the jobs wait for each other in a cycle (evaluate -> train -> evaluate)"],
    ),
    (
        "unknown job kind",
        job(kind="horovod"),
        ["eks-training:jobs.train.kind", "pytorch", "mpi", "tensorflow", "command"],
    ),
    ("bad job name", job("Train_1"), ["eks-training:jobs.Train_1: the name must be 1-40 lowercase letters"]),
    (
        "job name with a leading digit",
        job("2node-hello"),
        [
            "eks-training:jobs.2node-hello: the name must be 1-40 lowercase letters, digits and '-', starting with a "
            "letter",
            "rename it (e.g. 'job-2node-hello')",
        ],
    ),
    (
        "experiment name with a leading digit",
        bench(experiments={"1gpu": EXPERIMENT}),
        [
            "eks-training:benchmark.experiments.1gpu: the name must be 1-40 lowercase letters, digits and '-', "
            "starting with a letter",
            "rename the experiment",
        ],
    ),
    (
        "job name too long",
        job("t" * 41),
        [f"eks-training:jobs.{'t' * 41}: the name must be 1-40 lowercase letters", "rename it (e.g."],
    ),
    (
        "group name too long",
        setk("nodeGroups", {"g" * 21: GPU}),
        [f"eks-training:nodeGroups.{'g' * 21}: the name must be 1-20"],
    ),
    (
        "image name with capitals",
        setk("images", {"MyImage": {"prebuilt": "a/b:1"}}),
        ["eks-training:images.MyImage: the name must be 1-40 lowercase letters"],
    ),
    (
        "dataset name too long",
        setk("datasets", {"d" * 41: {"source": "s3://my-bucket/x.tgz"}}),
        [f"eks-training:datasets.{'d' * 41}: the name must be 1-40"],
    ),
    (
        "version past standard support",
        setk("cluster", {"kubernetesVersion": "1.32"}),
        [
            "eks-training:cluster.kubernetesVersion: 1.32 left EKS standard support on 2026-03-23",
            "$0.60 instead of $0.10",
            "eks-training:cluster.extendedSupport: true",
        ],
    ),
    (
        "log retention CloudWatch does not offer",
        setk("cluster", {"logRetentionDays": 45}),
        ["eks-training:cluster.logRetentionDays: 45 is not a CloudWatch retention", "30, 60"],
    ),
    (
        "CIDRs with a private endpoint",
        setk(
            "cluster",
            {"endpointPublicAccess": False, "publicAccessCidrs": ["10.0.0.0/8"], "privateAccessCidrs": ["10.0.0.0/8"]},
        ),
        ["eks-training:cluster.publicAccessCidrs: only applies to a public endpoint"],
    ),
    (
        "a private endpoint nothing may reach",
        setk("cluster", {"endpointPublicAccess": False}),
        ["eks-training:cluster.privateAccessCidrs: empty while endpointPublicAccess is false", "a bastion's subnet"],
    ),
    (
        "a private access CIDR listed twice",
        setk("cluster", {"privateAccessCidrs": ["10.0.200.0/24", "10.0.200.0/24"]}),
        ["eks-training:cluster.privateAccessCidrs[1]: 10.0.200.0/24 is listed twice; remove one"],
    ),
    (
        "a private access CIDR without its prefix",
        setk("cluster", {"privateAccessCidrs": ["10.0.200.7"]}),
        ["eks-training:cluster.privateAccessCidrs[0]: '10.0.200.7' has no prefix length"],
    ),
    (
        "pytorch job without a script",
        job(script=None),
        ["eks-training:jobs.train.script: a pytorch job runs a script under torchrun"],
    ),
    (
        "checkpoint cadence on a command job",
        job("evaluate", checkpointEverySeconds=60),
        ["eks-training:jobs.evaluate.checkpointEverySeconds: only pytorch jobs pass it to their trainer"],
    ),
    (
        "collective timeout too short",
        job(collectiveTimeoutSeconds=5),
        ["eks-training:jobs.train.collectiveTimeoutSeconds"],
    ),
    (
        "grace period too short to checkpoint",
        job(stopGracePeriodSeconds=10),
        ["eks-training:jobs.train.stopGracePeriodSeconds"],
    ),
    (
        "env the program sets",
        job(env={"TENSORBOARD_DIR": "/tmp/tb"}),
        ["eks-training:jobs.train.env.TENSORBOARD_DIR: TENSORBOARD_DIR is set in the job's pods by this project"],
    ),
    (
        "command job without a command",
        job("evaluate", command=None),
        ["eks-training:jobs.evaluate.command: a command job needs a command"],
    ),
    (
        "elastic tensorflow job",
        job("tf", kind="tensorflow", command=["python", "t.py"], nodeGroup="cpu", minNodes=1),
        [
            "eks-training:jobs.tf.minNodes: tensorflow jobs cannot change size while running "
            "(MultiWorkerMirroredStrategy has a fixed cluster"
        ],
    ),
    (
        "tensorflow job on the training image",
        job("tf", kind="tensorflow", command=["python", "t.py"], nodeGroup="cpu"),
        [
            "eks-training:jobs.tf.image: tensorflow job tf runs image 'training'",
            "which has no tensorflow",
            "eks-training:images.tensorflow: {context: images/tensorflow}, then image: tensorflow",
        ],
    ),
    (
        "elastic MPI job",
        job("bench", kind="mpi", command=["all_reduce_perf"], nodeGroup="cpu", maxNodes=2),
        ["eks-training:jobs.bench.maxNodes: mpi jobs cannot change size while running"],
    ),
    (
        "more processes than GPUs",
        both(group(), job(nodeGroup="gpu", processesPerNode=2)),
        ["eks-training:jobs.train.processesPerNode: 2 > the 1 GPUs of g5.xlarge"],
    ),
    (
        "pytorch job on the system group",
        job(nodeGroup="system"),
        ["eks-training:jobs.train.nodeGroup: the system group runs add-ons and light command jobs only"],
    ),
    (
        "program-set environment",
        job(env={"OUTPUT_DIR": "/tmp"}),
        [
            "eks-training:jobs.train.env.OUTPUT_DIR: OUTPUT_DIR is set in the job's pods by this project; remove it, "
            "and set the job's outputDir instead"
        ],
    ),
    (
        "outputDir written as the pods see it",
        job(outputDir="/data/runs/train-3f2dabc7f6"),
        [
            "eks-training:jobs.train.outputDir: '/data/runs/train-3f2dabc7f6' must be a relative path inside the "
            "shared volume: drop the leading /data/, 'runs/train-3f2dabc7f6'"
        ],
    ),
    (
        "tensorboard folder written as the pods see it",
        job(tensorboard="/data/runs/x/tb"),
        [
            "eks-training:jobs.train.tensorboard: '/data/runs/x/tb' must be a relative path inside the job's output "
            "folder"
        ],
    ),
    (
        "code not an s3 prefix",
        job(code="s3://bucket/main.py"),
        ["eks-training:jobs.train.code: 's3://bucket/main.py' is not an s3://bucket/prefix/ URI"],
    ),
    (
        "code that is a file",
        job(code="training/train.py"),
        [
            "eks-training:jobs.train.code: training/train.py is a file; give a folder of your project, the one that "
            "holds it (training), and the file as the job's script or command"
        ],
    ),
    (
        "code folder not in the project",
        job(code="./no-such-src"),
        [
            "eks-training:jobs.train.code: the folder ./no-such-src does not exist in the project folder",
            "give a folder of your Pulumi project",
        ],
    ),
    (
        "code outside the project",
        job(code="../src"),
        ["eks-training:jobs.train.code: '../src' is neither a folder of your project", "s3://bucket/prefix/"],
    ),
    (
        "EFA on a type without EFA",
        group(efa=True),
        ["eks-training:nodeGroups.gpu.efa: g5.xlarge has no EFA", "p5.48xlarge"],
    ),
    (
        "EFA group without a zone",
        group(instanceTypes=["p5.48xlarge"]),
        [
            "eks-training:nodeGroups.gpu.availabilityZone: efa defaults to true for p5.48xlarge, and EFA groups run in "
            "one zone",
            "either set availabilityZone (the zone where its capacity is) to keep EFA",
            "or set efa: false (or capacityType: SPOT, whose groups default to efa: false) to spread the group over "
            "the VPC's zones",
        ],
    ),
    (
        "spot group asking for EFA without a zone",
        group(instanceTypes=["p5.48xlarge"], capacityType="SPOT", efa=True),
        [
            "eks-training:nodeGroups.gpu.availabilityZone: EFA groups run in one zone",
            "either set availabilityZone",
            "or remove efa: true to spread the group over the VPC's zones without EFA (what spot capacity needs",
        ],
    ),
    (
        "EFA zone outside the VPC's zones",
        both(
            setk("network", {"availabilityZones": ["us-east-1a", "us-east-1b"]}),
            group(instanceTypes=["p4d.24xlarge"], availabilityZone="us-east-1c"),
        ),
        [
            "eks-training:nodeGroups.gpu.availabilityZone: us-east-1c is not one of "
            "eks-training:network.availabilityZones"
        ],
    ),
    (
        "EFA zone not in the region",
        group(instanceTypes=["p4d.24xlarge"], availabilityZone="us-east-1g"),
        ["eks-training:nodeGroups.gpu.availabilityZone: us-east-1g is not an available zone of this region"],
    ),
    (
        "spot with a capacity reservation",
        group(capacityType="SPOT", capacityReservationId="cr-0123456789abcdef0", availabilityZone="us-east-1a"),
        ["eks-training:nodeGroups.gpu.capacityType: SPOT cannot use a capacity reservation"],
    ),
    (
        "capacity block without reservation",
        group(instanceTypes=["p5.48xlarge"], availabilityZone="us-east-1a", capacityType="CAPACITY_BLOCK"),
        ["eks-training:nodeGroups.gpu.capacityReservationId: capacityType CAPACITY_BLOCK needs"],
    ),
    (
        "reservation without a zone",
        group(capacityReservationId="cr-0123456789abcdef0"),
        ["eks-training:nodeGroups.gpu.availabilityZone: a capacity reservation lives in one zone"],
    ),
    (
        "bad reservation id",
        group(capacityReservationId="res-1", availabilityZone="us-east-1a"),
        ["eks-training:nodeGroups.gpu.capacityReservationId: 'res-1' is not a reservation id"],
    ),
    (
        "EFA types with different interface counts",
        group(
            instanceTypes=["p5.48xlarge", "p5en.48xlarge"], capacityType="SPOT", efa=True, availabilityZone="us-east-1a"
        ),
        ["EFA groups need one interface count", "p5.48xlarge (32)", "p5en.48xlarge (16)"],
    ),
    (
        "old VPC CNI for efa-only",
        both(
            group(instanceTypes=["p5.48xlarge"], availabilityZone="us-east-1a"),
            setk("cluster", {"addonVersions": {"vpc-cni": "v1.18.3-eksbuild.1"}}),
        ),
        [
            "eks-training:cluster.addonVersions.vpc-cni: v1.18.3-eksbuild.1 lacks efa-only network interfaces "
            "(v1.18.5 or later), needed by nodeGroups.gpu (p5.48xlarge); remove the pin to get this project's "
            "v1.22.4-eksbuild.3"
        ],
    ),
    (
        "VPC CNI without NetworkPolicy enforcement",
        setk("cluster", {"addonVersions": {"vpc-cni": "v1.13.4-eksbuild.1"}}),
        [
            "eks-training:cluster.addonVersions.vpc-cni: v1.13.4-eksbuild.1 lacks NetworkPolicy enforcement "
            "(v1.14.0 or later), needed by the stack's network policies"
        ],
    ),
    (
        "node monitoring agent without dcgmAgent.tolerations",
        setk("cluster", {"addonVersions": {"eks-node-monitoring-agent": "v1.2.0-eksbuild.1"}}),
        [
            "eks-training:cluster.addonVersions.eks-node-monitoring-agent: v1.2.0-eksbuild.1 lacks dcgmAgent."
            "tolerations",
            "(v1.3.0 or later), needed by the node monitoring agent's configuration",
            "; pin a version that has it (aws eks describe-addon-versions --addon-name "
            "eks-node-monitoring-agent --kubernetes-version 1.36",
        ],
    ),
    (
        "node monitoring agent without a DCGM host engine on p6-b200",
        both(
            group(instanceTypes=["p6-b200.48xlarge"], availabilityZone="us-east-1a"),
            setk("cluster", {"addonVersions": {"eks-node-monitoring-agent": "v1.4.2-eksbuild.1"}}),
        ),
        [
            "eks-training:cluster.addonVersions.eks-node-monitoring-agent: v1.4.2-eksbuild.1 lacks its DCGM host "
            "engine",
            "on p6-b200.48xlarge (v1.4.3 or later), needed by nodeGroups.gpu",
        ],
    ),
    (
        "CloudWatch add-on without p6-b200 GPU metrics",
        both(
            group(instanceTypes=["p6-b200.48xlarge"], availabilityZone="us-east-1a"),
            setk("cluster", {"addonVersions": {"amazon-cloudwatch-observability": "v5.2.3-eksbuild.1"}}),
        ),
        [
            "eks-training:cluster.addonVersions.amazon-cloudwatch-observability: v5.2.3-eksbuild.1 lacks its DCGM "
            "exporter",
            "on p6-b200.48xlarge (v4.8.0 up to (not including) v5.0.0, or v5.3.0 or later), needed by nodeGroups.gpu",
        ],
    ),
    (
        "CloudWatch add-on without Pod Identity",
        both(
            setk("operations", {"metrics": True}),
            setk("cluster", {"addonVersions": {"amazon-cloudwatch-observability": "v3.0.0-eksbuild.1"}}),
        ),
        [
            "eks-training:cluster.addonVersions.amazon-cloudwatch-observability: v3.0.0-eksbuild.1 lacks EKS Pod "
            "Identity for the CloudWatch agent (v3.1.0 or later), needed by operations.metrics"
        ],
    ),
    (
        "EFS CSI driver without Pod Identity",
        setk("cluster", {"addonVersions": {"aws-efs-csi-driver": "v2.0.4-eksbuild.1"}}),
        [
            "eks-training:cluster.addonVersions.aws-efs-csi-driver: v2.0.4-eksbuild.1 lacks EKS Pod Identity for the "
            "EFS CSI controller (v2.0.5 or later), needed by storage.backend"
        ],
    ),
    (
        "enforced check without a reference",
        both(group(instanceTypes=["g5.48xlarge"], efa=False), job(nodeGroup="gpu", healthCheck={"enforce": True})),
        [
            "eks-training:jobs.train.healthCheck.enforce: there is no published all-reduce bandwidth for g5.48xlarge",
            "minBusBandwidthGBps",
        ],
    ),
    (
        "enforced check whose reference is with EFA, on a group without it",
        both(
            group(instanceTypes=["p5.48xlarge"], efa=False, maxSize=2),
            job(nodeGroup="gpu", nodes=2, healthCheck={"enforce": True}),
        ),
        [
            "eks-training:jobs.train.healthCheck.enforce: the published all-reduce bandwidth of p5.48xlarge, which a "
            "threshold derives from, is with EFA, and eks-training:nodeGroups.gpu.efa is off; set it to true, or set "
            "eks-training:jobs.train.healthCheck.minBusBandwidthGBps (GB/s) for TCP, or enforce: false"
        ],
    ),
    (
        "unknown type without facts",
        group(instanceTypes=["p7.96xlarge"]),
        ["unknown instance type 'p7.96xlarge'", "instanceFacts.p7.96xlarge"],
    ),
    (
        "maxIO with elastic throughput",
        setk("storage", {"performanceMode": "maxIO"}),
        ["eks-training:storage.performanceMode: maxIO does not support Elastic throughput"],
    ),
    (
        "more pods than nodes with the autoscaler off",
        both(setk("autoscaler", {"enabled": False}), group(desiredSize=0), job(nodeGroup="gpu", nodes=2)),
        [
            "eks-training:jobs.train.nodes: 2 pods, one per node, on nodeGroups.gpu, which keeps its "
            "eks-training:nodeGroups.gpu.desiredSize (0) nodes: with eks-training:autoscaler.enabled false nothing "
            "adds nodes to it, so 2 of its pods would never get a node and the job would never finish; raise "
            "desiredSize (at most maxSize, 2), lower nodes, or turn the autoscaler on"
        ],
    ),
    (
        "health check tuned while off",
        job(healthCheck={"enabled": False, "enforce": True, "timeoutMinutes": 30}),
        [
            "eks-training:jobs.train.healthCheck.enforce: tunes the health check, which enabled: false turns off",
            "eks-training:jobs.train.healthCheck.timeoutMinutes: tunes the health check",
        ],
    ),
    (
        "health check size not a power of two",
        job(healthCheck={"maxBytes": 3000000}),
        ["eks-training:jobs.train.healthCheck.maxBytes: 3000000 is not a power of two"],
    ),
    ("empty jobs", setk("jobs", {}), ["eks-training:jobs: define at least one job, or remove the key"]),
    # FSx for Lustre
    (
        "FSx capacity not a valid increment",
        fsx(storageCapacityGib=3600),
        [
            "eks-training:storage.fsx.storageCapacityGib: 3600 GiB is not a valid PERSISTENT_2 SSD capacity",
            "try 2400 or 4800",
        ],
    ),
    (
        "FSx capacity below the minimum",
        fsx(storageCapacityGib=1000),
        ["eks-training:storage.fsx.storageCapacityGib: 1000 GiB", "try 1200"],
    ),
    (
        "FSx throughput tier not offered",
        fsx(throughputPerTib=200),
        [
            "eks-training:storage.fsx.throughputPerTib: 200 MB/s/TiB is not offered for PERSISTENT_2 SSD",
            "125, 250, 500, 1000",
        ],
    ),
    (
        "FSx without a zone",
        setk("storage", {"backend": "fsx"}),
        [
            "eks-training:storage.fsx.availabilityZone: an FSx file system lives in one zone and no worker group is "
            "pinned",
            "nodeGroups.<group>.availabilityZone",
        ],
    ),
    (
        "FSx zone not where the jobs run",
        both(P4D_TRAINING, fsx(availabilityZone="us-east-1b")),
        [
            "eks-training:storage.fsx.availabilityZone: us-east-1b is not where the jobs that mount the file system "
            "run (eks-training:nodeGroups.gpu.availabilityZone is us-east-1a: job train)",
            "cross-zone",
            "set it to us-east-1a or remove it",
        ],
    ),
    (
        "FSx read from groups in two zones",
        both(
            P4D_TRAINING,
            setk("storage", {"backend": "fsx"}),
            add_group("gpu2", instanceTypes=["p4d.24xlarge"], availabilityZone="us-east-1b"),
            job("finetune", kind="command", command=["true"], nodeGroup="gpu2"),
        ),
        [
            "eks-training:nodeGroups.gpu2.availabilityZone: us-east-1b differs from "
            "eks-training:nodeGroups.gpu.availabilityZone (us-east-1a), and the jobs of both groups mount the FSx for "
            "Lustre file system (gpu: job train; gpu2: job finetune)",
            "pin gpu2 to us-east-1a",
            "eks-training:storage.backend: efs",
        ],
    ),
    (
        "FSx with several pinned groups",
        both(
            group(instanceTypes=["p4d.24xlarge"], availabilityZone="us-east-1a"),
            setk(
                "nodeGroups",
                {
                    "cpu": {
                        "instanceTypes": ["m5.xlarge"],
                        "minSize": 0,
                        "desiredSize": 1,
                        "maxSize": 2,
                        "availabilityZone": "us-east-1b",
                    },
                    "gpu": {**GPU, "instanceTypes": ["p4d.24xlarge"], "availabilityZone": "us-east-1a"},
                },
            ),
            drop("jobs"),
            drop("datasets"),
            setk("storage", {"backend": "fsx"}),
        ),
        [
            "eks-training:storage.fsx.availabilityZone: several groups are pinned (cpu (us-east-1b), gpu (us-east-1a)) "
            "and no job runs on them"
        ],
    ),
    (
        "FSx zone not in the region",
        fsx(availabilityZone="us-east-1g"),
        ["eks-training:storage.fsx.availabilityZone: us-east-1g is not an available zone of this region"],
    ),
    (
        "FSx zone outside the listed zones",
        both(setk("network", {"availabilityZones": ["us-east-1a", "us-east-1b"]}), fsx(availabilityZone="us-east-1c")),
        ["eks-training:storage.fsx.availabilityZone: us-east-1c is not one of eks-training:network.availabilityZones"],
    ),
    (
        "data repository path without a slash",
        fsx(dataRepository={"s3Path": "s3://my-datasets"}),
        [
            "eks-training:storage.fsx.dataRepository.s3Path: 's3://my-datasets' is not a data repository path; use "
            "s3://bucket/ or s3://bucket/prefix/"
        ],
    ),
    (
        "export beside an import from the bucket's root",
        fsx(dataRepository={"s3Path": "s3://my-datasets/", "exportPath": "/runs"}),
        [
            "eks-training:storage.fsx.dataRepository.exportPath: exports into the bucket s3://my-datasets/ imports "
            "from its root: each association needs its own S3 prefix; give eks-training:storage.fsx.dataRepository."
            "s3Path a prefix"
        ],
    ),
    (
        "data repository path without a trailing slash",
        fsx(dataRepository={"s3Path": "s3://my-datasets/imagenet"}),
        ["eks-training:storage.fsx.dataRepository.s3Path", "s3://bucket/prefix/"],
    ),
    (
        "data repository bucket name",
        fsx(dataRepository={"s3Path": "s3://My_Datasets/imagenet/"}),
        [
            "eks-training:storage.fsx.dataRepository.s3Path: 'My_Datasets' in 's3://My_Datasets/imagenet/' is not a "
            "valid S3 bucket name"
        ],
    ),
    (
        "data repository prefix with a path",
        fsx(dataRepository={"s3Path": "s3://my-datasets/imagenet/", "prefix": "other/"}),
        ["eks-training:storage.fsx.dataRepository.prefix: is for the bucket the stack creates"],
    ),
    (
        "export path nested in the import path",
        fsx(dataRepository={"exportPath": "/datasets/out"}),
        [
            "eks-training:storage.fsx.dataRepository.exportPath: /datasets/out overlaps "
            "eks-training:storage.fsx.dataRepository.fileSystemPath /datasets"
        ],
    ),
    (
        "file-system path not absolute",
        fsx(dataRepository={"fileSystemPath": "datasets"}),
        ["eks-training:storage.fsx.dataRepository.fileSystemPath: 'datasets' is not a directory of the file system"],
    ),
    (
        "EFA FSx (no node runs LNet over EFA)",
        fsx(efa=True, storageCapacityGib=19200),
        [
            "eks-training:storage.fsx.efa: an EFA-enabled file system is reached over EFA only from nodes that run "
            "LNet over EFA",
            "remove efa",
        ],
    ),
    (
        "user-provisioned metadata without IOPS",
        fsx(metadataMode="USER_PROVISIONED"),
        [
            "eks-training:storage.fsx.metadataIops: required with eks-training:storage.fsx.metadataMode: "
            "USER_PROVISIONED"
        ],
    ),
    (
        "metadata IOPS not offered",
        fsx(metadataMode="USER_PROVISIONED", metadataIops=5000),
        ["eks-training:storage.fsx.metadataIops: 5000 is not offered"],
    ),
    (
        "metadata IOPS with automatic mode",
        fsx(metadataIops=3000),
        ["eks-training:storage.fsx.metadataIops: set with metadataMode AUTOMATIC"],
    ),
    (
        "EFS-only key with FSx",
        setk("storage", {"backend": "fsx", "capacity": "2Ti", "fsx": {"availabilityZone": "us-east-1a"}}),
        ["eks-training:storage.capacity: applies to EFS only"],
    ),
    (
        "fsx settings with EFS",
        setk("storage", {"fsx": {"storageCapacityGib": 1200}}),
        ["eks-training:storage.fsx: set while eks-training:storage.backend is efs"],
    ),
    (
        "kept FSx in a new VPC",
        setk("storage", {"backend": "fsx", "retainOnDelete": True, "fsx": {"availabilityZone": "us-east-1a"}}),
        ["eks-training:storage.retainOnDelete: a kept Lustre file system keeps its network interfaces", "existingVpc"],
    ),
    (
        "adopted FSx without its security group and bucket",
        setk(
            "storage",
            {"backend": "fsx", "fileSystemId": "fs-0123456789abcdef0", "fsx": {"availabilityZone": "us-east-1a"}},
        ),
        [
            "eks-training:storage.fsx.securityGroupId: required with eks-training:storage.fileSystemId",
            "eks-training:storage.fsx.dataRepository.s3Path: required with eks-training:storage.fileSystemId",
        ],
    ),
    (
        "adopted FSx in a new VPC",
        setk(
            "storage",
            {
                "backend": "fsx",
                "fileSystemId": "fs-0123456789abcdef0",
                "fsx": {
                    "availabilityZone": "us-east-1a",
                    "securityGroupId": "sg-0123456789abcdef0",
                    "dataRepository": {"s3Path": "s3://kept/datasets/"},
                },
            },
        ),
        [
            "eks-training:storage.fileSystemId: a kept Lustre file system lives in a subnet of the VPC it was created "
            "in",
            "existingVpc",
        ],
    ),
    ("unknown backend", setk("storage", {"backend": "lustre"}), ["eks-training:storage.backend", "efs", "fsx"]),
    # datasets imported by the FSx data repository (an S3 prefix) instead of staged
    (
        "S3 prefix dataset on EFS",
        setk("datasets", {"cifar10": {}, "imagenet": {"source": "s3://my-data/datasets/imagenet/"}}),
        [
            "eks-training:datasets.imagenet.source: s3://my-data/datasets/imagenet/ is an S3 prefix (a folder of "
            "objects), which only an FSx for Lustre data repository imports",
            "eks-training:storage.backend: fsx",
        ],
    ),
    (
        "S3 prefix dataset with the stack's own bucket",
        both(
            P4D_TRAINING,
            setk("storage", {"backend": "fsx"}),
            setk("datasets", {"cifar10": {}, "imagenet": {"source": "s3://my-data/datasets/imagenet/"}}),
        ),
        [
            "eks-training:datasets.imagenet.source: s3://my-data/datasets/imagenet/ is an S3 prefix, imported only "
            "from the bucket linked to the file system",
            "eks-training:storage.fsx.dataRepository.s3Path",
        ],
    ),
    (
        "S3 prefix dataset outside the linked path",
        both(
            P4D_TRAINING,
            setk("storage", {"backend": "fsx", "fsx": {"dataRepository": {"s3Path": "s3://my-data/datasets/"}}}),
            setk("datasets", {"cifar10": {}, "imagenet": {"source": "s3://other-data/imagenet/"}}),
        ),
        [
            "eks-training:datasets.imagenet.source: s3://other-data/imagenet/ is not under "
            "eks-training:storage.fsx.dataRepository.s3Path (s3://my-data/datasets/)"
        ],
    ),
    (
        "imported dataset with a path",
        both(
            P4D_TRAINING,
            setk("storage", {"backend": "fsx", "fsx": {"dataRepository": {"s3Path": "s3://my-data/datasets/"}}}),
            setk(
                "datasets",
                {"cifar10": {}, "imagenet": {"source": "s3://my-data/datasets/imagenet/", "path": "imagenet"}},
            ),
        ),
        [
            "eks-training:datasets.imagenet.path: an imported dataset appears where the data repository puts it "
            "(datasets/imagenet); remove path"
        ],
    ),
    (
        "S3 prefix dataset with an md5",
        setk(
            "datasets",
            {
                "cifar10": {},
                "imagenet": {"source": "s3://my-data/datasets/imagenet/", "md5": "c58f30108f718f92721af3b95e74349a"},
            },
        ),
        [
            "eks-training:datasets.imagenet.md5: verifies one downloaded object; an S3 prefix is imported object by "
            "object"
        ],
    ),
    # operations: node repair, metrics, dashboard, idle-GPU alarm
    (
        "repair threshold as count and percentage",
        group(nodeRepair={"maxUnhealthyNodes": 2, "maxUnhealthyPercent": 20}),
        [
            "eks-training:nodeGroups.gpu.nodeRepair.maxUnhealthyPercent: set together with "
            "eks-training:nodeGroups.gpu.nodeRepair.maxUnhealthyNodes; EKS takes a count or a percentage, not both"
        ],
    ),
    (
        "repair parallelism above 100%",
        group(nodeRepair={"maxParallelPercent": 150}),
        ["eks-training:nodeGroups.gpu.nodeRepair.maxParallelPercent", "100"],
    ),
    (
        "repair tuned while off",
        group(nodeRepair={"enabled": False, "maxParallelNodes": 2}),
        ["eks-training:nodeGroups.gpu.nodeRepair.maxParallelNodes: tunes node repair, which enabled: false turns off"],
    ),
    (
        "unknown repair key",
        group(nodeRepair={"maxUnhealthy": 2}),
        ["eks-training:nodeGroups.gpu.nodeRepair.maxUnhealthy: unknown key"],
    ),
    (
        "idle alarm after too few minutes",
        both(group(), setk("operations", {"idleGpuAlarm": {"minutes": 2}})),
        ["eks-training:operations.idleGpuAlarm.minutes", "5"],
    ),
    (
        "idle alarm longer than its query reads",
        both(group(), setk("operations", {"idleGpuAlarm": {"minutes": 200}})),
        ["eks-training:operations.idleGpuAlarm.minutes", "180"],
    ),
    (
        "idle threshold that is not idle",
        both(group(), setk("operations", {"idleGpuAlarm": {"utilizationPercent": 80}})),
        ["eks-training:operations.idleGpuAlarm.utilizationPercent", "50"],
    ),
    (
        "alarm e-mail that is not one",
        both(group(), setk("operations", {"alarmEmail": "ops at example.com"})),
        ["eks-training:operations.alarmEmail: 'ops at example.com' is not an e-mail address"],
    ),
    (
        "alarm e-mail with a display name",
        both(group(), setk("operations", {"alarmEmail": "Ops <ops@example.com>"})),
        ["eks-training:operations.alarmEmail: 'Ops <ops@example.com>' is not an e-mail address"],
    ),
    (
        "dashboard without metrics",
        both(group(), setk("operations", {"metrics": False, "dashboard": True})),
        [
            "eks-training:operations.dashboard: plots the metrics of the Container Insights add-on",
            "eks-training:operations.metrics: true",
        ],
    ),
    (
        "idle alarm without metrics",
        both(group(), setk("operations", {"metrics": False, "idleGpuAlarm": {"enabled": True}})),
        ["eks-training:operations.idleGpuAlarm.enabled: watches node_gpu_utilization"],
    ),
    (
        "idle alarm without GPU groups",
        setk("operations", {"idleGpuAlarm": {"enabled": True}}),
        ["eks-training:operations.idleGpuAlarm.enabled: the stack has no GPU group to watch"],
    ),
    (
        "application signals without metrics",
        both(group(), setk("operations", {"metrics": False, "applicationSignals": True})),
        [
            "eks-training:operations.applicationSignals: is part of the Container Insights add-on",
            "eks-training:operations.metrics: true",
        ],
    ),
    (
        "application signals not a boolean",
        both(group(), setk("operations", {"applicationSignals": "sometimes"})),
        ["eks-training:operations.applicationSignals"],
    ),
    (
        "idle alarm tuned while off",
        both(group(), setk("operations", {"idleGpuAlarm": {"enabled": False, "minutes": 60}})),
        ["eks-training:operations.idleGpuAlarm.minutes: not read (the idle-GPU alarm is off"],
    ),
    (
        "idle alarm tuned without metrics",
        both(group(), setk("operations", {"metrics": False, "idleGpuAlarm": {"utilizationPercent": 5}})),
        ["eks-training:operations.idleGpuAlarm.utilizationPercent: not read (the idle-GPU alarm is off"],
    ),
    (
        "alarm e-mail without an alarm",
        setk("operations", {"alarmEmail": "ops@example.com"}),
        ["eks-training:operations.alarmEmail: no alarm would send to it"],
    ),
    # benchmark
    ("benchmark without experiments", bench(experiments={}), ["eks-training:benchmark.experiments", "at least 1"]),
    (
        "experiment from an unknown experiment",
        bench(experiments={"b": {"from": "nope", "nodes": 1}}),
        ["eks-training:benchmark.experiments.b.from: 'nope' is not an experiment; name one of (no other experiment)"],
    ),
    (
        "experiments based on each other",
        bench(experiments={"a": {"from": "b"}, "b": {"from": "a"}}),
        [
            "eks-training:benchmark.experiments.a.from: the experiments are based on each other in a cycle (a -> b -> "
            "a); write one of them out in full"
        ],
    ),
    (
        "experiment after another experiment",
        bench(experiments={"a": EXPERIMENT, "b": {"from": "a", "after": ["a"]}}),
        [
            "eks-training:benchmark.experiments.b.after[0]: 'a' is another experiment; experiments run side by side "
            "and never wait for each other"
        ],
    ),
    (
        "experiment with an output folder",
        bench(experiments={"a": {**EXPERIMENT, "outputDir": "runs/x"}}),
        [
            "eks-training:benchmark.experiments.a.outputDir: each run gives every experiment a fresh folder, "
            "benchmarks/<run>/<experiment>; remove it"
        ],
    ),
    (
        "experiment waited for by pulumi up",
        bench(experiments={"a": {**EXPERIMENT, "waitForCompletion": True}}),
        [
            "eks-training:benchmark.experiments.a.waitForCompletion: the driver (`python -m stacks benchmark`) follows "
            "the experiments"
        ],
    ),
    (
        "experiment named like a job",
        bench(experiments={"train": EXPERIMENT}),
        [
            "eks-training:benchmark.experiments.train: eks-training:jobs.train has the same name, and an experiment "
            "runs as a job of its name; rename one of them"
        ],
    ),
    (
        "experiment with a job's error",
        bench(experiments={"a": {"kind": "pytorch", "command": ["python"]}}),
        [
            "eks-training:benchmark.experiments.a.command: a pytorch job's command is torchrun; remove command, and "
            "give the script and args instead"
        ],
    ),
    (
        "inherited error reported once, at its base",
        bench(experiments={"a": {"kind": "mpi", "command": ["x"], "minNodes": 1}, "b": {"from": "a", "nodes": 2}}),
        ["eks-training:benchmark.experiments.a.minNodes: mpi jobs cannot change size while running"],
    ),
    (
        "experiment larger than its group",
        bench(experiments={"a": {**EXPERIMENT, "nodes": 9}}),
        [
            "eks-training:benchmark.experiments.a.nodes: 9 > eks-training:nodeGroups.cpu.maxSize (2): one pod runs per "
            "node; raise maxSize or lower nodes"
        ],
    ),
    (
        "experiment with an unknown image",
        bench(experiments={"a": {**EXPERIMENT, "image": "nccl"}}),
        ["eks-training:benchmark.experiments.a.image: 'nccl' is not an image; use one of training"],
    ),
    (
        "experiment name too long",
        bench(experiments={"e" * 41: EXPERIMENT}),
        ["eks-training:benchmark.experiments." + "e" * 41 + ": the name must be 1-40 lowercase letters"],
    ),
    (
        "experiment named like the collector",
        bench(experiments={"benchmark-collector": EXPERIMENT}),
        [
            "eks-training:benchmark.experiments.benchmark-collector: benchmark-collector is the collector's name; "
            "rename the experiment"
        ],
    ),
    (
        "results not an S3 prefix",
        bench(results={"s3Path": "s3://My_Bucket/x"}),
        ["eks-training:benchmark.results.s3Path: 's3://My_Bucket/x' is not s3://bucket/prefix/"],
    ),
    (
        # the results' collector writes under a prefix (components/workloads/collector.py): a data repository may
        # take a bucket's root, the results may not
        "results at a bucket's root",
        bench(results={"s3Path": "s3://team-results/"}),
        ["eks-training:benchmark.results.s3Path: 's3://team-results/' is not s3://bucket/prefix/"],
    ),
    (
        "results with both bucket forms",
        bench(results={"s3Path": "s3://results-bucket/runs/", "prefix": "x/"}),
        [
            "eks-training:benchmark.results.prefix: only for the bucket the stack creates; with "
            "eks-training:benchmark.results.s3Path the prefix is part of the path, remove prefix"
        ],
    ),
    (
        "kept outputs outside the folder",
        bench(keep={"outputs": ["../secrets/*"]}),
        ["eks-training:benchmark.keep.outputs[0]: '../secrets/*' must be a glob relative to the output folder"],
    ),
    ("unknown benchmark key", bench(experiment={}), ["eks-training:benchmark.experiment: unknown key"]),
    # --- how users get it wrong: a value of the wrong YAML type, with the value to write instead ------------------
    (
        "nodes as a quoted number",
        job(nodes="2"),
        ["eks-training:jobs.train.nodes: '2' is a string, not a whole number; write 2 without quotes"],
    ),
    (
        "maxSize as a quoted number",
        group(maxSize="2"),
        ["eks-training:nodeGroups.gpu.maxSize: '2' is a string, not a whole number; write 2 without quotes"],
    ),
    (
        "nodes as a boolean",
        job(nodes=True),
        ["eks-training:jobs.train.nodes: true is a boolean, not a whole number; write an integer such as 1"],
    ),
    (
        "boolean written yes",
        job(waitForCompletion="yes"),
        ["eks-training:jobs.train.waitForCompletion: 'yes' is a string, not a boolean; write true without quotes"],
    ),
    (
        "boolean written as a quoted word",
        setk("autoscaler", {"enabled": "false"}),
        ["eks-training:autoscaler.enabled: 'false' is a string, not a boolean; write false without quotes"],
    ),
    (
        "Kubernetes version as a number",
        setk("cluster", {"kubernetesVersion": 1.3}),
        [
            "eks-training:cluster.kubernetesVersion: 1.3 is a number, not a string (YAML reads 1.30 as the number "
            "1.3); write the minor quoted: one of " + ", ".join(f"'{m}'" for m in SUPPORTED_KUBERNETES_VERSIONS)
        ],
    ),
    (
        "Kubernetes version as a number whose zero YAML dropped",
        setk("cluster", {"kubernetesVersion": float(DEFAULT_KUBERNETES_VERSION)}),
        [
            f"eks-training:cluster.kubernetesVersion: {float(DEFAULT_KUBERNETES_VERSION)} is a number, not a string",
            f"write the minor quoted: '{DEFAULT_KUBERNETES_VERSION}'",
        ],
    ),
    (
        "an environment value written as a whole number",
        job(env={"EPOCHS": 10}),
        ["eks-training:jobs.train.env.EPOCHS: 10 is a number, not a string; quote it: '10'"],
    ),
    (
        "command as one string",
        job(command="python train.py --epochs 1"),
        [
            "eks-training:jobs.train.command: 'python train.py --epochs 1' is a string, not a list; write a YAML list, "
            "e.g. ['python', 'train.py', '--epochs', '1']"
        ],
    ),
    (
        "instance types as one string",
        group(instanceTypes="g5.xlarge"),
        [
            "eks-training:nodeGroups.gpu.instanceTypes: 'g5.xlarge' is a string, not a list; write a YAML list, e.g. "
            "['g5.xlarge']"
        ],
    ),
    (
        "taints as one string",
        group(taints="dedicated=ml:NoSchedule"),
        [
            "eks-training:nodeGroups.gpu.taints: 'dedicated=ml:NoSchedule' is a string, not a list; write a YAML list "
            "of mappings, each with the keys key, value, effect"
        ],
    ),
    (
        "a group left empty",
        setk("nodeGroups", {"cpu": None}),
        ["eks-training:nodeGroups.cpu: null (an empty value) is not a mapping of its keys; set one, or remove the key"],
    ),
    (
        "a job given as a list",
        setk("jobs", {"train": ["kind: command", "nodeGroup: cpu"]}),
        ["eks-training:jobs.train: a list ['kind: command', 'nodeGroup: cpu'] is not an object; write a YAML mapping"],
    ),
    (
        "nodes left empty",
        setk("jobs", {"train": {"kind": "command", "nodeGroup": "cpu", "command": ["true"], "nodes": None}}),
        ["eks-training:jobs.train.nodes: null (an empty value) is not a whole number; set one, or remove the key"],
    ),
    (
        "a section left empty",
        setk("jobs", None),
        [
            "eks-training:jobs: must be an object (a YAML mapping), got null (an empty value): give its keys, or "
            "remove it"
        ],
    ),
    # --- a key written almost right, at every level --------------------------------------------------------------
    (
        "team key without its unit",
        setk("teams", {"research": {"quota": 50}}),
        [
            "eks-training:teams.research.quota: unknown key; did you mean quotaPercent (a required key, not set)? "
            "Rename it"
        ],
    ),
    (
        "FSx key without its unit",
        fsx(storageCapacity=2400),
        ["eks-training:storage.fsx.storageCapacity: unknown key; did you mean storageCapacityGib?"],
    ),
    ("misspelt job key", job(nodess=2), ["eks-training:jobs.train.nodess: unknown key; did you mean nodes?"]),
    (
        "misspelt health-check key",
        job(healthCheck={"enabeld": False}),
        ["eks-training:jobs.train.healthCheck.enabeld: unknown key; did you mean enabled?"],
    ),
    (
        "misspelt storage key",
        setk("storage", {"backnd": "efs"}),
        ["eks-training:storage.backnd: unknown key; did you mean backend?"],
    ),
    (
        "script not in the code folder",
        job(kind="pytorch", command=None, code="./training", script="trian.py"),
        [
            "eks-training:jobs.train.script: 'trian.py' is not a file of the job's code folder ./training (uploaded: ",
            "did you mean train.py? give its path relative to that folder",
        ],
    ),
    (
        "script written with the code folder's name",
        job(kind="pytorch", command=None, code="./training", script="training/train.py"),
        ["did you mean train.py?"],
    ),
    # --- AWS's own rules ------------------------------------------------------------------------------------------
    (
        "region that does not exist",
        lambda cfg: cfg.update({"aws:region": "us-east-9"}),
        ["aws:region: 'us-east-9' is not a region EKS is offered in", "did you mean us-east-2?"],
    ),
    (
        "tag with AWS's prefix",
        setk("tags", {"aws:team": "ml"}),
        ["eks-training:tags.aws:team: the aws: prefix is reserved for AWS's own tags; rename the tag without it"],
    ),
    (
        "tag value a number",
        setk("tags", {"cost-center": 1234}),
        ["eks-training:tags.cost-center: tag values must be strings, got int; quote it: '1234'"],
    ),
    (
        "tag value AWS refuses",
        setk("tags", {"owner": "a;b"}),
        ["eks-training:tags.owner: a tag value is 0-256 letters"],
    ),
    ("tag value null", setk("tags", {"team": None}), ["eks-training:tags.team: null (an empty value); write the tag"]),
    ("cluster name null", setk("clusterName", None), ["eks-training:clusterName: empty (null or '')"]),
    ("cluster name empty", setk("clusterName", ""), ["eks-training:clusterName: empty (null or '')"]),
    (
        "health check left empty",
        nulled("healthCheck"),
        [
            "eks-training:jobs.train.healthCheck: null (an empty value) is not an object; write {} to set it with its "
            "defaults"
        ],
    ),
    (
        "node repair left empty",
        group(nodeRepair=None),
        ["eks-training:nodeGroups.gpu.nodeRepair: null (an empty value) is not an object"],
    ),
    (
        "fsx left empty",
        setk("storage", {"backend": "fsx", "fsx": None}),
        ["eks-training:storage.fsx: null (an empty value) is not an object"],
    ),
    (
        "tensorboard a number",
        job(tensorboard=1),
        ["eks-training:jobs.train.tensorboard: 1 is neither true, false nor a folder"],
    ),
    ("script empty", job(script=""), ["eks-training:jobs.train.script: empty; name the script torchrun runs"]),
    (
        "command's program empty",
        job("evaluate", command=["", "x.py"]),
        ["eks-training:jobs.evaluate.command: its first item is the program to run, and it is empty"],
    ),
    (
        "two pytorch jobs in one output folder",
        finetune_in("runs/exp/"),
        [
            "eks-training:jobs.finetune.outputDir: runs/exp is also job train's output folder: a pytorch "
            "job whose folder holds DONE runs nothing",
            "reads its folder as $(TRAIN_OUTPUT_DIR)",
        ],
    ),
    (
        "two pytorch jobs in one output folder, written otherwise",
        finetune_in("./runs//exp"),
        ["eks-training:jobs.finetune.outputDir: runs/exp is also job train's output folder"],
    ),
    (
        "an enforced health check of one process",
        job(healthCheck={"enforce": True, "minBusBandwidthGBps": 1}),
        ["eks-training:jobs.train.healthCheck: the check runs one process, whose all-reduce moves no data"],
    ),
    (
        "an enforced health check of one process on the system group",
        job("evaluate", healthCheck={"enforce": True, "minBusBandwidthGBps": 1}),
        ["eks-training:jobs.evaluate.healthCheck: the check runs one process, whose all-reduce moves no data"],
    ),
    (
        "an instance type listed twice",
        group(instanceTypes=["g5.xlarge", "g5.xlarge"]),
        ["eks-training:nodeGroups.gpu.instanceTypes: g5.xlarge listed twice; list each type once"],
    ),
    (
        "an add-on pinned to no version",
        setk("cluster", {"addonVersions": {"coredns": ""}}),
        ["eks-training:cluster.addonVersions: no version for coredns; give one EKS offers"],
    ),
    (
        "instance facts of GPUs without their model",
        setk("instanceFacts", {"x9.large": {"vcpus": 4, "memoryMib": 16384, "gpus": 8, "source": "manual entry"}}),
        ["eks-training:instanceFacts.x9.large.gpuModel: required with gpus (8): the GPU decides which CUDA build"],
    ),
    (
        "a health check's message larger than a system-group pod's memory",
        job("evaluate", healthCheck={"maxBytes": 2 << 30}),
        [
            "eks-training:jobs.evaluate.healthCheck.maxBytes: 2147483648 bytes (2 GiB) does not fit in a process's "
            "share of the 1536 MiB a pod on m5.large requests"
        ],
    ),
    (
        "after names a job twice",
        job("evaluate", after=["train", "train"]),
        ["eks-training:jobs.evaluate.after[1]: 'train' is given twice; remove this one"],
    ),
    (
        "another job's output folder without after",
        job("report", command=["python", "eval.py", "--model", "$(TRAIN_OUTPUT_DIR)"]),
        [
            "eks-training:jobs.report.command[3]: $(TRAIN_OUTPUT_DIR) is job train's output folder, which only the "
            "jobs after it get; add train to after"
        ],
    ),
    (
        "a misspelt variable",
        job("report", command=["sh", "-c", "ls $(OUTPTU_DIR)"]),
        [
            "eks-training:jobs.report.command[2]: $(OUTPTU_DIR) is not a variable of the job's pods (Kubernetes "
            "would pass it as written); did you mean $(OUTPUT_DIR)?"
        ],
    ),
    (
        "a variable without its suffix",
        job("report", command=["sh", "-c", "ls $(OUTPUT)"]),
        [
            "eks-training:jobs.report.command[2]: $(OUTPUT) is not a variable of the job's pods (Kubernetes would "
            "pass it as written); did you mean $(OUTPUT_DIR)?"
        ],
    ),
    (
        "a variable in other letters, escaped twice",
        job("report", command=["sh", "-c", "ls $$$(output-dir)"]),
        [
            "eks-training:jobs.report.command[2]: $(output-dir) is not a variable of the job's pods (Kubernetes would "
            "pass it as written); did you mean $(OUTPUT_DIR)?"
        ],
    ),
    (
        "a job's own folder by its name",
        job("report", command=["ls", "$(REPORT_OUTPUT_DIR)"]),
        [
            "eks-training:jobs.report.command[1]: $(REPORT_OUTPUT_DIR) is this job's own output folder; write "
            "$(OUTPUT_DIR)"
        ],
    ),
    (
        "the dataset's folder in a job without one",
        job("report", command=["ls", "$(DATA_DIR)"]),
        [
            "eks-training:jobs.report.command[1]: $(DATA_DIR) is the dataset's folder, and the job has none; set "
            "eks-training:jobs.report.dataset"
        ],
    ),
    (
        "TensorBoard's folder in a job without it",
        job("report", command=["ls", "$(TENSORBOARD_DIR)"]),
        ["eks-training:jobs.report.command[1]: $(TENSORBOARD_DIR) is TensorBoard's folder, which is off; set"],
    ),
    (
        "an output folder variable of no job",
        job("report", env={"MODEL": "$(BASELINE_OUTPUT_DIR)/model.pt"}, after=["train"]),
        [
            "eks-training:jobs.report.env.MODEL: $(BASELINE_OUTPUT_DIR) is no job's output folder; this job gets "
            "TRAIN_OUTPUT_DIR (its after)"
        ],
    ),
    (
        "another kind's variable: the peers of a command job in a pytorch job",
        job(args=["--peers", "$(JOB_PEERS)"]),
        [
            "eks-training:jobs.train.args[1]: $(JOB_PEERS) is set in the pods of command jobs, not in those of "
            "pytorch jobs (Kubernetes would pass it as written); set it in eks-training:jobs.train.env or write the "
            "value"
        ],
    ),
    (
        "a variable torchrun sets in its workers, in a pytorch job's env",
        job(env={"ADDR": "$(MASTER_ADDR)"}),
        [
            "eks-training:jobs.train.env.ADDR: $(MASTER_ADDR) is set by torchrun in each process it starts, not in "
            "the pod (Kubernetes would pass it as written); read it from the environment in the program"
        ],
    ),
    (
        "torchrun's local rank in a pytorch job's args",
        job(args=["--local-rank", "$(LOCAL_RANK)"]),
        ["eks-training:jobs.train.args[1]: $(LOCAL_RANK) is set by torchrun in each process it starts, not in the pod"],
    ),
    (
        "Open MPI's rank in a command job, which runs no mpirun",
        job("report", command=["sh", "-c", "echo $(OMPI_COMM_WORLD_RANK)"]),
        [
            "eks-training:jobs.report.command[2]: $(OMPI_COMM_WORLD_RANK) is set by mpirun (Open MPI) in each process "
            "it starts, and command jobs do not run it (Kubernetes would pass it as written); command jobs' pods get "
            "$(JOB_INDEX), $(JOB_PEERS), $(MASTER_ADDR), $(MASTER_PORT), $(NODE_RANK), $(RANK), $(WORLD_SIZE) besides "
            "every job's"
        ],
    ),
    (
        "a variable nobody sets: a flag's value the user meant to set in env",
        job(args=["--lr", "$(LR)"]),
        [
            "eks-training:jobs.train.args[1]: $(LR) is not a variable of the job's pods, which get only the program's "
            "and their own env (not the image's ENV), so Kubernetes would pass it as written; set it in "
            "eks-training:jobs.train.env, write the value itself, or write $$(LR) for the text $(LR)"
        ],
    ),
    (
        "Pod Identity's region in an env value, which the kubelet expands against the earlier entries only",
        job(env={"REGION": "$(AWS_REGION)"}),
        ["eks-training:jobs.train.env.REGION: $(AWS_REGION) is not a variable of the job's pods"],
    ),
    (
        "the image's PATH in a command's args",
        job("report", command=["sh", "-c", "echo $(PATH)"]),
        ["eks-training:jobs.report.command[2]: $(PATH) is not a variable of the job's pods"],
    ),
    (
        "a command job's peer variable in a tensorflow job, which no launcher of its sets",
        job("tf", kind="tensorflow", command=["python", "-c", "pass"], args=["$(RANK)"]),
        ["eks-training:jobs.tf.args[0]: $(RANK) is set in the pods of command jobs, not in those of tensorflow jobs"],
    ),
    (
        "the checkpoint cadence's variable in a pytorch job that does not set it",
        job(args=["--every", "$(CHECKPOINT_EVERY_SECONDS)"]),
        [
            "eks-training:jobs.train.args[1]: $(CHECKPOINT_EVERY_SECONDS) is set only with "
            "eks-training:jobs.train.checkpointEverySeconds"
        ],
    ),
    (
        "a variable of the job's env that names itself",
        job(env={"PATH": "$(PATH):/opt/tools/bin"}),
        [
            "eks-training:jobs.train.env.PATH: $(PATH) names the variable itself; Kubernetes expands only variables "
            "defined before it (not the image's ENV), so it would stay as written; write its value out"
        ],
    ),
    (
        "variables of the job's env that name each other",
        job(env={"A": "$(B)/a", "B": "$(A)/b"}),
        ["eks-training:jobs.train.env.A: A -> B -> A name each other; Kubernetes expands a $(NAME) only to a variable"],
    ),
    (
        "the Job controller's index in the job's env, which it comes after",
        job("report", env={"SHARD": "$(JOB_COMPLETION_INDEX)"}),
        [
            "eks-training:jobs.report.env.SHARD: $(JOB_COMPLETION_INDEX) comes after the job's env in the pod (the Job "
            "controller appends it), so Kubernetes would leave it as written here; write $(JOB_INDEX)"
        ],
    ),
    (
        "a misspelt index of an Indexed Job's pod",
        job("report", command=["sh", "-c", "echo $(JOB_INDX)"]),
        ["eks-training:jobs.report.command[2]: $(JOB_INDX) is not a variable of the job's pods", "$(JOB_INDEX)?"],
    ),
    # --- an ML engineer's and a platform engineer's own stack files ----------------------------------------------
    (
        "a script written with its arguments",
        job(script="/app/train.py --epochs 3"),
        [
            "eks-training:jobs.train.script: '/app/train.py --epochs 3' is the script's path, and torchrun does not "
            "split it into words; write script: /app/train.py and put the rest in args: ['--epochs', '3']"
        ],
    ),
    (
        "a command written as one item of a list",
        job("evaluate", command=["python /app/evaluate.py --fast"]),
        [
            "eks-training:jobs.evaluate.command: its first item 'python /app/evaluate.py --fast' is the program to "
            "run, and no shell splits it into words (the container would look for a program of that name); write "
            "each word as an item: ['python', '/app/evaluate.py', '--fast']"
        ],
    ),
    (
        "an MPI launcher written as one item",
        setk(
            "jobs",
            {
                "hvd": {
                    "kind": "mpi",
                    "nodeGroup": "cpu",
                    "command": ["python", "x.py"],
                    "launcherCommand": ["python3 /opt/report.py --"],
                }
            },
        ),
        ["eks-training:jobs.hvd.launcherCommand: its first item 'python3 /opt/report.py --' is the program to run"],
    ),
    (
        "two taints of one key and effect",
        group(
            taints=[
                {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
                {"key": "dedicated", "value": "vision", "effect": "NoSchedule"},
            ]
        ),
        [
            "eks-training:nodeGroups.gpu.taints[1]: repeats the key 'dedicated' and effect NoSchedule of taints[0]; "
            "Kubernetes takes one taint per key and effect"
        ],
    ),
    (
        "zones listed and counted",
        setk("network", {"availabilityZones": ["us-east-1a", "us-east-1b"], "availabilityZoneCount": 3}),
        [
            "eks-training:network.availabilityZoneCount: 3 is not read with eks-training:network.availabilityZones: "
            "the VPC spans the 2 zones listed there; remove availabilityZoneCount"
        ],
    ),
    (
        "subnet ids as the AWS CLI takes them",
        both(
            drop("network"),
            setk(
                "existingVpc",
                {
                    "vpcId": "vpc-0123456789abcdef0",
                    "privateSubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
                },
            ),
        ),
        [
            "eks-training:existingVpc.privateSubnetIds: 'subnet-0123456789abcdef0,subnet-0123456789abcdef1' is a "
            "string, not a list; write a YAML list, e.g. ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1']"
        ],
    ),
    (
        "arguments as one string, a flag's value holding a comma",
        job(args="--gpus=0,1 --epochs 2"),
        [
            "eks-training:jobs.train.args: '--gpus=0,1 --epochs 2' is a string, not a list; write a YAML list, e.g. "
            "['--gpus=0,1', '--epochs', '2']"
        ],
    ),
    (
        "one argument holding a comma",
        job(args="--gpus=0,1"),
        ["eks-training:jobs.train.args: '--gpus=0,1' is a string, not a list; write a YAML list, e.g. ['--gpus=0,1']"],
    ),
    (
        "zones separated by a comma and a space",
        setk("network", {"availabilityZones": "us-east-1a, us-east-1b"}),
        ["write a YAML list, e.g. ['us-east-1a', 'us-east-1b']"],
    ),
    (
        "a section's switch written as the section",
        setk("autoscaler", False),
        [
            "eks-training:autoscaler: must be an object (a YAML mapping), got false: write the switch as its key, "
            "enabled: false (one level further in: autoscaler: {enabled: false})"
        ],
    ),
    (
        "a section written as a word",
        setk("storage", "fsx"),
        ["eks-training:storage: must be an object (a YAML mapping), got 'fsx': write a YAML mapping of its keys"],
    ),
    (
        "the health check's switch written as the check",
        job(healthCheck=True),
        [
            "eks-training:jobs.train.healthCheck: true is not an object; write the switch as its key, enabled: true "
            "(one level further in: healthCheck: {enabled: true})"
        ],
    ),
    (
        "an empty command",
        job("evaluate", command=[]),
        ["eks-training:jobs.evaluate.command: an empty list; give at least 1 item"],
    ),
    (
        "an environment variable named as a flag",
        job(env={"learning-rate": "0.1"}),
        [
            "eks-training:jobs.train.env.learning-rate: 'learning-rate' is not an environment variable name; use "
            "letters, digits and '_', not starting with a digit, e.g. LEARNING_RATE"
        ],
    ),
    (
        "a label key with a space",
        group(labels={"gpu type": "a100"}),
        [
            "eks-training:nodeGroups.gpu.labels: 'gpu type' is not a valid Kubernetes label key; a name of at most "
            "63 letters, digits"
        ],
    ),
    (
        "a label value with a space",
        group(labels={"owner": "Jane Doe"}),
        ["eks-training:nodeGroups.gpu.labels.owner: 'Jane Doe' is not a valid Kubernetes label value; at most 63"],
    ),
    (
        "an add-on version as the chart spells it",
        setk("cluster", {"addonVersions": {"coredns": "1.12.0"}}),
        [
            "eks-training:cluster.addonVersions.coredns: '1.12.0' is not an EKS add-on version, which EKS spells "
            "vMAJOR.MINOR.PATCH-eksbuild.N (e.g. v1.12.0-eksbuild.1); give one EKS offers (aws eks "
            "describe-addon-versions --addon-name coredns)"
        ],
    ),
]


@pytest.mark.parametrize("change,fragments", [pytest.param(c, f, id=i) for i, c, f in CASES])
def test_bad_config_is_rejected_before_anything_is_registered(change, fragments: list[str]) -> None:
    cfg = base()
    change(cfg)
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError), f"expected ConfigError, got {p.error!r}"
    message = str(p.error)
    assert "no resource was created" in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    assert p.registrations == [], [r.name for r in p.registrations]


def test_many_problems_are_reported_together() -> None:
    cfg = base()
    group(minSize=3, desiredSize=3, maxSize=2, instanceTypes=["p9.mega"])(cfg)
    setk("cluster", {"kubernetesVersion": "1.20"})(cfg)
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError)
    assert len(p.error.problems) == 3, p.error.problems
    assert p.registrations == []


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 20


def test_a_bad_run_id_in_the_environment_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EKS_TRAINING_BENCHMARK_RUN", "Run 1")
    cfg = base()
    bench()(cfg)
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError)
    assert "eks-training:benchmark: environment variable EKS_TRAINING_BENCHMARK_RUN='Run 1' is not a run id" in str(
        p.error
    )
    assert p.registrations == []


def test_the_unmodified_config_passes() -> None:
    """The control case: the same harness with the unmodified config registers resources."""
    p = run_program("dev", config=base())
    assert p.error is None and p.registrations


@pytest.mark.parametrize(
    "setting, value",
    [
        ("aws:assumeRole", {"roleArn": "arn:aws:iam::123456789012:role/x"}),
        (
            "eks-training:nodeGroups",
            {"cpu": {"instanceTypes": ["m5.xlarge", "m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 2}},
        ),
    ],
)
def test_one_mistake_is_one_message(setting: str, value: Any) -> None:
    """A mistake two rules see is reported once, by the rule that names its fix."""
    cfg = {**base(), setting: value}
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError) and len(p.error.problems) == 1, p.error


def test_variables_the_pods_have_are_accepted() -> None:
    """The control of the variable rule: a predecessor's folder with after, the job's own env, the escaped form, a
    shell's command substitution."""
    cfg = base()
    command = [
        "sh",
        "-c",
        "cp $(TRAIN_OUTPUT_DIR)/m $(OUTPUT_DIR)/$(MY_OUTPUT_DIR) $$(NOT_EXPANDED) $(date) $OUTPUT_DIR",
    ]
    job("evaluate", command=command, after=["train"], env={"MY_OUTPUT_DIR": "x"})(cfg)
    # a setting's variable with the setting; a launcher's variable the job's env sets; the program's settings, the
    # cluster's variables (a Service's, Pod Identity's, the GPU device plugin's), an escaped name
    args = ["--every", "$(CHECKPOINT_EVERY_SECONDS)", "$(LOCAL_RANK)", "$(NCCL_DEBUG)", "$(OMP_NUM_THREADS)"]
    args += ["$(KUBERNETES_SERVICE_HOST)", "$(ETCD_PORT_2379_TCP_ADDR)", "$(AWS_REGION)", "$(NVIDIA_VISIBLE_DEVICES)"]
    job(args=[*args, "$$(LR)"], checkpointEverySeconds=60, env={"LOCAL_RANK": "0"})(cfg)
    p = run_program("dev", config=cfg)
    assert p.error is None and p.registrations
    # the MPI Operator's role variable, in an mpi job's launcher and workers
    mpi = stack_config("mpi-horovod")
    mpi[f"{PROJECT}:jobs"]["horovod"]["args"] = ["--role", "$(K_MPI_JOB_ROLE)"]
    p = run_program("mpi-horovod", config=mpi)
    assert p.error is None and p.registrations


def test_a_command_job_may_write_into_a_pytorch_jobs_output_folder() -> None:
    """The control of the output-folder rule: only two jobs the launcher runs (which skips a folder holding DONE)
    may not share one; an evaluation writing beside the model it reads is accepted."""
    cfg = base()
    both(job(outputDir="runs/exp"), job("evaluate", outputDir="runs/exp"))(cfg)
    p = run_program("dev", config=cfg)
    assert p.error is None and p.registrations
    # a pytorch job's folder inside another's: DONE and the checkpoints are read at a folder's top only
    cfg = base()
    finetune_in("runs/exp/finetune")(cfg)
    p = run_program("dev", config=cfg)
    assert p.error is None and p.registrations


@pytest.mark.parametrize(
    "change,message",
    [
        pytest.param(
            both(
                setk(
                    "nodeGroups",
                    {
                        "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 2},
                        "h100": {
                            "instanceType": "p5.48xlarge",
                            "minSize": 0,
                            "desiredSize": 2,
                            "maxSize": 2,
                            "availabilityZone": "us-east-1a",
                        },
                    },
                ),
                job(nodeGroup="h100", nodes=2),
            ),
            "eks-training:nodeGroups.h100.instanceType: unknown key; did you mean instanceTypes (a required key, not "
            "set)? Rename it",
            id="misspelt instanceTypes in the group a job runs on",
        ),
        pytest.param(
            job(nodes=4),
            "eks-training:jobs.train.nodes: 4 > eks-training:nodeGroups.cpu.maxSize (2): one pod runs per node; raise "
            "maxSize or lower nodes",
            id="nodes above maxSize, maxNodes left to its default",
        ),
        pytest.param(
            both(
                group(instanceTypes=["p5.48xlarge"], availabilityZone="us-east-1a"),
                job(nodeGroup="gpu", nodes=2, healthCheck={"enforce": True, "minBusBandwidthGBps": 3.5e11}),
            ),
            "eks-training:jobs.train.healthCheck.minBusBandwidthGBps: 3.5e+11 GB/s is above the 750 GB/s an all-reduce "
            "across 2 x p5.48xlarge can reach (a node's network is 3200 Gbit/s = 400 GB/s, and across N nodes the bus "
            "bandwidth is at most N/(N-1) x (n-1)/n times that over n ranks); did you write bytes/s? the value is in "
            "GB/s (1e9 bytes/s, as nccl-tests reports busbw): 3.5e+11 bytes/s is 350",
            id="bytes/s written as GB/s",
        ),
        pytest.param(
            job("evaluate", after=["trian"]),
            "eks-training:jobs.evaluate.after[0]: 'trian' is not a job; use one of train",
            id="a misspelt after, whose job's folder the args name",
        ),
        pytest.param(
            job(script=None, args=["--epochs", "1"], command=["python3", "fit.py", "--lr", "0.1"]),
            "eks-training:jobs.train.command: a pytorch job's command is torchrun; remove command and write script: "
            "fit.py, args: ['--lr', '0.1', '--epochs', '1']",
            id="a pytorch job's script written as its command",
        ),
        pytest.param(
            setk("teams", {"default": {"quotaPercent": 50, "namespace": "team-default"}}),
            "eks-training:teams.default: the team's LocalQueue takes its name, and Kueue puts every Job of its "
            "namespace that names no queue into a LocalQueue named default, the staging Jobs too; rename the team",
            id="a team named default, Kueue's default LocalQueue",
        ),
        pytest.param(
            setk("teams", {"ml_research": {"quotaPercent": 50}}),
            "eks-training:teams.ml_research: the name must be 1-40 lowercase letters, digits and '-', starting and "
            "ending with a letter or digit (it names the team's queues); rename it",
            id="a team's name with an underscore, which its namespace would repeat",
        ),
        pytest.param(
            both(
                setk(
                    "instanceFacts",
                    {"x9.large": {"vcpus": 4, "memoryMib": 16384, "gpus": 1, "gpuModel": "H100", "source": "manual"}},
                ),
                group(instanceTypes=["x9.large"]),
                job(nodeGroup="gpu"),
            ),
            "eks-training:instanceFacts.x9.large.gpuModel: 'H100' is not how the catalog names a GPU, so its compute "
            "capability (which CUDA build runs on it) would be unknown; did you mean 'NVIDIA H100'? "
            "(GpuInfo.Gpus[].Manufacturer and Name, with a space)",
            id="a GPU model without its maker, on the group a job runs on",
        ),
        pytest.param(
            job("evaluate", command=None, script="evaluate.py"),
            "eks-training:jobs.evaluate.script: only pytorch jobs take a script; put it in the command of a command "
            "job",
            id="a command job's program written as a script",
        ),
        pytest.param(
            both(
                lambda cfg: cfg.update({f"{PROJECT}:nodeGroups": {"system": cfg[f"{PROJECT}:nodeGroups"]["cpu"]}}),
                job(nodeGroup="system"),
            ),
            "eks-training:nodeGroups.system: 'system' is reserved for systemNodeGroup; rename the group",
            id="a worker group named system, which its pytorch job names",
        ),
    ],
)
def test_a_mistake_is_reported_once_by_the_program(change: Callable[[dict[str, Any]], None], message: str) -> None:
    """The issue's two cascades, through the real program: exactly one problem, naming the root cause."""
    cfg = base()
    change(cfg)
    p = run_program("dev", config=cfg, expect_error=True)
    assert isinstance(p.error, ConfigError) and p.error.problems == [message]
    assert p.registrations == []


def _misspelt_sections() -> list[tuple[str, str]]:
    return [
        (stack, k.split(":", 1)[1])
        for stack in stack_names()
        for k in stack_config(stack)
        if k.startswith(f"{PROJECT}:")
    ]


@pytest.mark.parametrize("stack, section", _misspelt_sections())
def test_a_misspelt_section_is_one_problem_whatever_names_its_entries(stack: str, section: str) -> None:
    """Every section every preset sets, written without its last letter (``nodeGroup``, ``dataset``, ``image``): one
    problem, the unknown key with its spelling, not one more per job, experiment or team that names an entry of it."""
    cfg = stack_config(stack)
    renamed(section, section[:-1])(cfg)
    with pytest.raises(ConfigError) as caught:
        load_config(PROJECT, stack, cfg)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{PROJECT}:{section[:-1]}: unknown key; did you mean {section}? rename it"), problem


#: Cases about the account's zones, which the program reads with ``aws.getAvailabilityZones`` (still before any
#: resource) and the offline plan cannot know: it lists them in its checklist for preflight instead. (A zone ID EKS
#: refuses is known offline: "only one zone ID EKS accepts" is the plan's too.)
ACCOUNT_ZONES = {
    "zone not in region",
    "only one zone EKS accepts",
    "pinned zone ID the account lacks",
    "EFA zone not in the region",
    "FSx read from groups in two zones",
    "FSx zone not in the region",
}


@pytest.mark.parametrize("change,fragments", [pytest.param(c, f, id=i) for i, c, f in CASES if i not in ACCOUNT_ZONES])
def test_the_plan_gives_the_same_message(tmp_path: Path, change, fragments: list[str]) -> None:
    """``python -m stacks.plan --stack-file`` refuses each bad config as the program does: exit 2, the same
    problems on stderr, no traceback."""
    cfg = base()
    change(cfg)
    stack_file = tmp_path / "Pulumi.bad.yaml"
    stack_file.write_text(yaml.safe_dump({"config": cfg}))
    (tmp_path / "training").symlink_to(REPO / "training")  # the folder the code cases name, as in the repository
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = plan_main(["--stack", "bad", "--stack-file", str(stack_file)])
    assert code == 2, (code, out.getvalue(), err.getvalue())
    for fragment in fragments:
        assert fragment in err.getvalue(), f"{fragment!r} not in:\n{err.getvalue()}"
    assert "Traceback" not in err.getvalue()


@pytest.mark.parametrize("field", ["args", "command"])
def test_the_list_a_refusal_suggests_is_taken(field: str) -> None:
    """A string where a list goes is refused with the list to write instead; written as suggested, that list is
    taken (every word quoted: ``[--epochs, 3]`` would be refused in turn, and Pulumi's YAML 1.2 reads 1e-4 and 08 as
    numbers)."""
    cfg = base()
    given = "python train.py --epochs 3 --lr 1e-4 --resume true --seed 08"
    kind = {"args": "pytorch", "command": "command"}[field]
    other = {"script": "/app/train.py"} if kind == "pytorch" else {}
    cfg[f"{PROJECT}:jobs"] = {"fit": {"kind": kind, "nodeGroup": "cpu", field: given, **other}}
    with pytest.raises(ConfigError) as refused:
        load_config(PROJECT, "dev", cfg, project_dir=REPO)
    (problem,) = [p for p in refused.value.problems if f"jobs.fit.{field}" in p]
    suggested = yaml.safe_load(problem.split("e.g. ", 1)[1])
    assert suggested == given.split()
    assert all(f"'{word}'" in problem for word in ("3", "1e-4", "08"))
    cfg[f"{PROJECT}:jobs"]["fit"][field] = suggested
    load_config(PROJECT, "dev", cfg, project_dir=REPO)


def test_an_mpi_images_missing_context_is_one_problem() -> None:
    """An MPI job's image whose context holds no Dockerfile: the context's problem only, not also an mpiPrefix the
    Dockerfile would have given (there is no Dockerfile to read)."""
    cfg = stack_config("mpi-horovod")
    cfg[f"{PROJECT}:images"] = {**cfg[f"{PROJECT}:images"], "horovod": {"context": "images/nope"}}
    with pytest.raises(ConfigError) as err:
        load_config(PROJECT, "mpi-horovod", cfg, project_dir=REPO)
    (problem,) = err.value.problems
    assert problem.startswith("eks-training:images.horovod.context: images/nope/Dockerfile does not exist"), problem


def test_pulumi_up_refuses_a_setting_written_outside_config(tmp_path: Path) -> None:
    """Pulumi ignores a stack file's top-level keys other than its own five, so ``eks-training:jobs`` written at the
    top level would never reach the program: the program reads the file's keys itself and refuses it, before any
    resource (the control: the same file with the setting under config: passes)."""
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (tmp_path / "training").symlink_to(REPO / "training")
    stray = {"config": {"aws:region": "us-east-1"}, "eks-training:jobs": {"train": {}}}
    (tmp_path / "Pulumi.mine.yaml").write_text(yaml.safe_dump(stray))
    p = run_program("mine", config=base(), project_dir=tmp_path, expect_error=True)
    assert isinstance(p.error, ConfigError) and p.registrations == []
    assert p.error.problems == [
        "Pulumi.mine.yaml: eks-training:jobs is at the top level, where Pulumi reads no setting: indent it under "
        "config:"
    ]
    (tmp_path / "Pulumi.mine.yaml").write_text(yaml.safe_dump({"config": {"aws:region": "us-east-1"}}))
    assert run_program("mine", config=base(), project_dir=tmp_path).error is None
    # not the file Pulumi read (--config-file, settings in Pulumi Cloud): its settings are not the ones passed
    (tmp_path / "Pulumi.mine.yaml").write_text(yaml.safe_dump({**stray, "config": {"aws:profile": "other"}}))
    assert run_program("mine", config=base(), project_dir=tmp_path).error is None
    # the project's stackConfigDir holds the stack file
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text() + "stackConfigDir: settings\n")
    (tmp_path / "settings").mkdir()
    (tmp_path / "settings" / "Pulumi.mine.yaml").write_text(yaml.safe_dump(stray))
    p = run_program("mine", config=base(), project_dir=tmp_path, expect_error=True)
    assert isinstance(p.error, ConfigError) and p.error.problems[0].startswith("Pulumi.mine.yaml: eks-training:jobs")


def test_an_md5_in_capitals_is_taken_as_the_same_digest() -> None:
    """md5sum prints lowercase hex; a digest copied in capitals (as some sites publish it) is the same digest: it is
    taken, as the staging job compares it, in lowercase."""
    config = stack_config("dev")
    config[f"{PROJECT}:datasets"] = {
        "cifar10": {"source": "s3://my-bucket/cifar.tgz", "md5": "C58F30108F718F92721AF3B95E74349A"}
    }
    assert (
        load_config(PROJECT, "dev", config, project_dir=REPO).datasets["cifar10"].md5
        == "c58f30108f718f92721af3b95e74349a"
    )
