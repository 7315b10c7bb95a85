"""Values with units are checked against what the instance type can physically do, and a value that cannot be
right names the unit it is in and the conversion the user probably meant."""

import pytest

from components.catalog import FASTEST_GPU_LINK_GBYTES_PER_S, INSTANCE_TYPES, REFERENCE_ALLREDUCE
from components.nodeplan import allreduce_busbw_ceiling, network_gbytes_per_s
from tests.config_support import P5, TRAIN, problems

P3 = {**P5, "instanceTypes": ["p3.16xlarge"]}
M5 = {**P5, "instanceTypes": ["m5.xlarge"]}


def health(group: dict, **check: object) -> list[str]:
    return problems(nodeGroups={"h100": group}, jobs={"train": {**TRAIN, "healthCheck": check}})


def test_the_bus_bandwidth_ceiling_follows_from_the_network() -> None:
    p5 = INSTANCE_TYPES["p5.48xlarge"]
    assert network_gbytes_per_s(p5) == 400  # 3200 Gbit/s
    assert allreduce_busbw_ceiling(p5, 2, 8) == pytest.approx(400 * 2 * 15 / 16)
    # more nodes: closer to the network bandwidth itself; one node: the data never leaves it
    assert allreduce_busbw_ceiling(p5, 16, 8) == pytest.approx(400 * 16 / 15 * 127 / 128)
    # one node: the GPUs' own link (NVLink 4 on H100), the fastest of any where there is no figure
    assert allreduce_busbw_ceiling(p5, 1, 8) == 900
    assert allreduce_busbw_ceiling(INSTANCE_TYPES["g6.48xlarge"], 1, 8) == 64  # L4s over PCIe Gen4
    assert allreduce_busbw_ceiling(INSTANCE_TYPES["m5.xlarge"], 1, 4) == FASTEST_GPU_LINK_GBYTES_PER_S


def test_every_published_figure_is_below_its_ceiling() -> None:
    """The published two-node results (what enforced checks default to 80% of) are physically possible."""
    for name, ref in REFERENCE_ALLREDUCE.items():
        facts = INSTANCE_TYPES[name]
        assert ref.busbw_gbytes_per_s < allreduce_busbw_ceiling(facts, 2, facts.gpus), name


def test_bytes_per_second_written_as_gbytes_per_second() -> None:
    """The issue's example: 3.5e11 (bytes/s) under minBusBandwidthGBps could never pass with enforce: true."""
    [problem] = health(P5, enforce=True, minBusBandwidthGBps=3.5e11)
    assert problem.startswith(
        "eks-training:jobs.train.healthCheck.minBusBandwidthGBps: 3.5e+11 GB/s is above the 750 GB/s "
        "an all-reduce across 2 x p5.48xlarge can reach"
    )
    assert "a node's network is 3200 Gbit/s = 400 GB/s" in problem
    assert (
        "did you write bytes/s? the value is in GB/s (1e9 bytes/s, as nccl-tests reports busbw): 3.5e+11 bytes/s is 350"
        in problem
    )
    assert health(P5, enforce=True, minBusBandwidthGBps=350) == []


def test_gbits_per_second_written_as_gbytes_per_second() -> None:
    [problem] = health(P5, minBusBandwidthGBps=3000)
    assert "did you write Gbit/s?" in problem and "3000 Gbit/s is 375" in problem


def test_a_threshold_on_one_node_is_bounded_by_the_link_between_its_gpus() -> None:
    [problem] = problems(
        nodeGroups={"h100": P5}, jobs={"train": {**TRAIN, "nodes": 1, "healthCheck": {"minBusBandwidthGBps": 1500}}}
    )
    assert problem.startswith(
        "eks-training:jobs.train.healthCheck.minBusBandwidthGBps: 1500 GB/s is above the 900 GB/s an all-reduce inside "
        "one p5.48xlarge can reach (the link between its NVIDIA H100 GPUs)"
    )
    assert (
        problems(
            nodeGroups={"h100": P5}, jobs={"train": {**TRAIN, "nodes": 1, "healthCheck": {"minBusBandwidthGBps": 450}}}
        )
        == []
    )


def test_a_message_larger_than_a_gpu_memory() -> None:
    [problem] = health(P3, maxBytes=1 << 34)
    assert problem.startswith(
        "eks-training:jobs.train.healthCheck.maxBytes: 17179869184 bytes (16 GiB) does not fit in the "
        "16384 MiB of one NVIDIA V100 GPU of p3.16xlarge"
    )
    assert "the value is in bytes" in problem and "(e.g. 8589934592)" in problem
    assert health(P3, maxBytes=1 << 33) == []


def test_a_message_larger_than_a_cpu_process_share_of_the_pod() -> None:
    [problem] = health(M5, maxBytes=1 << 34)
    assert "does not fit in a process's share of the 11008 MiB a pod on m5.xlarge requests" in problem
    assert health(M5, maxBytes=1 << 30) == []


def test_a_message_size_written_in_mib() -> None:
    [problem] = health(M5, maxBytes=1024)
    assert problem == (
        "eks-training:jobs.train.healthCheck.maxBytes: 1024 bytes is below 1 MiB (1048576), the smallest "
        "maxBytes; the value is in bytes; did you write MiB? 1024 MiB is 1073741824"
    )


FACTS = {
    "vcpus": 96,
    "memoryMib": 786432,
    "gpus": 8,
    "gpuModel": "NVIDIA H100",
    "gpuMemoryMib": 81920,
    "source": "aws ec2 describe-instance-types",
}


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        (
            "memoryMib",
            768,
            "memoryMib: 768 MiB for 96 vCPUs is 8 MiB per vCPU, and EC2 types have 0.25 to 64 GiB per vCPU; "
            "did you write GiB? 768 GiB is 786432 MiB; the value is in MiB",
        ),
        ("memoryMib", 768 << 30, "did you write bytes? 824633720832 bytes is 786432 MiB"),
        (
            "gpuMemoryMib",
            80,
            "gpuMemoryMib: 80 MiB per GPU is outside the 1024 to 524288 MiB of any GPU; did you write GiB? "
            "80 GiB is 81920 MiB",
        ),
    ],
)
def test_instance_facts_in_the_wrong_unit(field: str, value: int, fragment: str) -> None:
    group = {**P5, "instanceTypes": ["p9.48xlarge"]}
    [problem] = problems(instanceFacts={"p9.48xlarge": {**FACTS, field: value}}, nodeGroups={"h100": group})
    assert problem.startswith("eks-training:instanceFacts.p9.48xlarge.") and fragment in problem, problem
    assert problems(instanceFacts={"p9.48xlarge": FACTS}, nodeGroups={"h100": group}) == []


def test_a_one_node_threshold_on_a_gpu_without_a_link_figure_says_so() -> None:
    """The A10G (g5) has no datasheet: the bound falls back to the fastest link of any GPU, and the message says why."""
    g5 = {**P5, "instanceTypes": ["g5.12xlarge"]}
    [problem] = problems(
        nodeGroups={"h100": g5}, jobs={"train": {**TRAIN, "nodes": 1, "healthCheck": {"minBusBandwidthGBps": 5000}}}
    )
    assert "above the 1800 GB/s an all-reduce inside one g5.12xlarge can reach (the fastest GPU link: NVIDIA" in problem
