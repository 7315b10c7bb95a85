"""Messages name root causes only: a section that failed its own validation is not reported again by the rules
that depend on it, a misspelt key is one mistake (not "unknown key" plus "missing key"), and a default the user
did not set is not blamed. Each cascade has a case with its single expected message and a control showing the
dependent rule still fires when the root cause is absent."""

from typing import Any

import pytest

from stacks.bundle import REFERENCE
from tests.config_support import CPU, P5, TRAIN, problems, without

TYPO_GROUP = without(P5, "instanceTypes", instanceType="p5.48xlarge")
VPC = {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]}
SUBNET_GROUP = without(P5, "availabilityZone", subnetId="subnet-0123456789abcdef0")

# (id, sections, the single message's fragments, sections of the control where the dependent rule fires, its fragment)
CASES: list[tuple[str, dict[str, Any], list[str], dict[str, Any], str]] = [
    (
        # the first cascade: the group that failed is not reported again as missing by the job on it
        "misspelt instanceTypes in a group a job runs on",
        {"nodeGroups": {"cpu": CPU, "h100": TYPO_GROUP}, "jobs": {"train": TRAIN}},
        ["eks-training:nodeGroups.h100.instanceType: unknown key; did you mean instanceTypes"],
        {"nodeGroups": {"cpu": CPU}, "jobs": {"train": TRAIN}},
        "eks-training:jobs.train.nodeGroup: 'h100' is not a worker group",
    ),
    (
        # the second cascade: maxNodes defaults to the group's maxSize; only nodes is blamed
        "nodes above maxSize with the derived maxNodes",
        {"nodeGroups": {"h100": P5}, "jobs": {"train": {**TRAIN, "nodes": 4, "minNodes": 1}}},
        ["eks-training:jobs.train.nodes: 4 > eks-training:nodeGroups.h100.maxSize (2)"],
        {"nodeGroups": {"h100": P5}, "jobs": {"train": {**TRAIN, "maxNodes": 4}}},
        "eks-training:jobs.train.maxNodes: 4 > eks-training:nodeGroups.h100.maxSize (2)",
    ),
    (
        "misspelt required key in a taint",
        {"nodeGroups": {"h100": {**P5, "taints": [{"key": "team", "efect": "NoSchedule"}]}}},
        ["eks-training:nodeGroups.h100.taints[0].efect: unknown key; did you mean effect"],
        {"nodeGroups": {"h100": {**P5, "taints": [{"key": "team"}]}}},
        "eks-training:nodeGroups.h100.taints[0].effect: required key is missing",
    ),
    (
        "nodeGroups not a mapping",
        {"nodeGroups": [P5], "jobs": {"train": without(TRAIN, "nodeGroup")}},
        ["eks-training:nodeGroups: must be an object"],
        {"nodeGroups": {"h100": P5, "cpu": CPU}, "jobs": {"train": without(TRAIN, "nodeGroup")}},
        "eks-training:jobs.train.nodeGroup: required when there is not exactly one worker group",
    ),
    (
        "an image that failed its own validation",
        {
            "nodeGroups": {"h100": P5},
            "jobs": {"train": {**TRAIN, "image": "mine"}},
            "images": {"mine": {"context": "training", "prebuilt": "a/b:1"}},
        },
        ["eks-training:images.mine: set exactly one of context"],
        {"nodeGroups": {"h100": P5}, "jobs": {"train": {**TRAIN, "image": "mine"}}},
        "eks-training:jobs.train.image: 'mine' is not an image",
    ),
    (
        "a dataset that failed its own validation",
        {
            "nodeGroups": {"h100": P5},
            "jobs": {"train": {**TRAIN, "dataset": "d"}},
            "datasets": {"d": {"source": "ftp://x/y"}},
        },
        ["eks-training:datasets.d.source: 'ftp://x/y' must be an https:// URL"],
        {"nodeGroups": {"h100": P5}, "jobs": {"train": {**TRAIN, "dataset": "d"}}},
        "eks-training:jobs.train.dataset: 'd' is not a dataset",
    ),
    (
        "an existingVpc that failed: its groups' and file system's subnets are not 'only for existingVpc'",
        {
            "existingVpc": {**VPC, "vpcId": "vpc-bad"},
            "nodeGroups": {"h100": SUBNET_GROUP},
            "jobs": {"train": TRAIN},
            "storage": {"backend": "fsx", "fsx": {"subnetId": "subnet-0123456789abcdef0"}},
        },
        ["eks-training:existingVpc.vpcId: 'vpc-bad' is not a VPC id"],
        {"nodeGroups": {"h100": SUBNET_GROUP}, "jobs": {"train": TRAIN}},
        "eks-training:nodeGroups.h100.subnetId: only for existingVpc",
    ),
    (
        "a systemNodeGroup that failed: a job on it is not compared with the default maxSize",
        {
            "systemNodeGroup": {"maxSize": 5, "diskSize": 30},
            "nodeGroups": {"h100": P5},
            "jobs": {"train": TRAIN, "ev": {"kind": "command", "command": ["true"], "nodeGroup": "system", "nodes": 4}},
        },
        ["eks-training:systemNodeGroup.diskSize: unknown key; did you mean diskSizeGib?"],
        {
            "nodeGroups": {"h100": P5},
            "jobs": {"train": TRAIN, "ev": {"kind": "command", "command": ["true"], "nodeGroup": "system", "nodes": 4}},
        },
        "eks-training:jobs.ev.nodes: 4 > eks-training:systemNodeGroup.maxSize (3, the default)",
    ),
    (
        "instanceFacts not a mapping: the types it meant to describe are not 'unknown'",
        {"instanceFacts": ["p9.x"], "nodeGroups": {"h100": {**P5, "instanceTypes": ["p9.x"]}}},
        ["eks-training:instanceFacts: must be an object"],
        {"nodeGroups": {"h100": {**P5, "instanceTypes": ["p9.x"]}}},
        "unknown instance type 'p9.x'",
    ),
    (
        "EFA file system with a capacity EFA rules out: the refused efa is the one root cause, not the capacity",
        {
            "nodeGroups": {"h100": P5},
            "jobs": {"train": TRAIN},
            "storage": {"backend": "fsx", "fsx": {"efa": True, "storageCapacityGib": 2400}},
        },
        [
            "eks-training:storage.fsx.efa: an EFA-enabled file system is reached over EFA only from nodes that run "
            "LNet",
            "remove efa",
        ],
        {
            "nodeGroups": {"h100": P5},
            "jobs": {"train": TRAIN},
            "storage": {"backend": "fsx", "fsx": {"storageCapacityGib": 2000}},
        },
        "eks-training:storage.fsx.storageCapacityGib: 2000 GiB",
    ),
]


@pytest.mark.parametrize("sections,fragments,control,control_fragment", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_one_root_cause_message(
    sections: dict[str, Any], fragments: list[str], control: dict[str, Any], control_fragment: str
) -> None:
    found = problems(**sections)
    assert len(found) == 1, found
    for fragment in fragments:
        assert fragment in found[0], found[0]
    # the control: without the root cause, the dependent rule reports its own problem
    assert any(control_fragment in p for p in problems(**control)), problems(**control)


def test_an_unknown_key_names_the_closest_valid_key_only_when_one_is_close() -> None:
    [typo] = problems(nodeGroups={"h100": {**P5, "diskSizeGb": 200}})
    assert "eks-training:nodeGroups.h100.diskSizeGb: unknown key; did you mean diskSizeGib?" in typo
    [far] = problems(nodeGroups={"h100": {**P5, "colour": "blue"}})
    assert "eks-training:nodeGroups.h100.colour: unknown key; remove it" in far and "did you mean" not in far


def test_a_misspelt_key_and_an_unrelated_missing_key_are_two_problems() -> None:
    found = problems(nodeGroups={"h100": without(P5, "instanceTypes", "maxSize", instanceType="p5.48xlarge")})
    assert sorted(found) == [
        "eks-training:nodeGroups.h100.instanceType: unknown key; did you mean instanceTypes (a required key, not set)? "
        "Rename it",
        f"eks-training:nodeGroups.h100.maxSize: required key is missing; set it (see {REFERENCE})",
    ]
