"""Rules on a job's health check against the nodes it runs on (the benchmark's all-reduce)."""

from components.catalog import (
    REFERENCE_ALLREDUCE,
    InstanceType,
)
from components.catalog.gpus import GPU_MODELS
from components.nodeplan import (
    allreduce_busbw_ceiling,
    gpu_link_gbytes_per_s,
    network_gbytes_per_s,
    pod_size,
    system_job_pod,
)
from stacks.config.errors import key
from stacks.config.jobs import (
    JobConfig,
)
from stacks.config.rules.sections import Sections


def check_health(
    s: Sections,
    path: str,
    job: JobConfig,
    types: list[InstanceType],
    problems: list[str],
    system: bool = False,
    efa: bool = False,
    group: str = "",
) -> None:
    """The health check's values against the nodes it runs on: an enforced check needs a threshold (configured, or a
    published figure for the type, measured with EFA, so only where the worker group ``group`` has ``efa``); a
    threshold (GB/s) above what the nodes' network can carry, or a message (bytes) larger than a GPU's (or, on CPU
    nodes, a process's share of the pod's) memory, can never pass: they name the unit the value is in and the
    conversion the user probably meant. ``system``: the job runs on the system group, whose pods get a share of a
    node."""
    h = job.health_check
    if h is None or not h.enabled or not types:
        return
    hkey = f"{path}.healthCheck"
    slowest = min(types, key=lambda t: t.network_gbps)
    procs = job.processes_per_node or max(1, slowest.gpus)
    _threshold_problems(hkey, job, types, slowest, procs, problems, efa=efa, group=group)
    if h.max_bytes is not None:
        _max_bytes_problems(hkey, h.max_bytes, types, procs, problems, system=system)


def _threshold_problems(
    hkey: str,
    job: JobConfig,
    types: list[InstanceType],
    slowest: InstanceType,
    procs: int,
    problems: list[str],
    *,
    efa: bool,
    group: str,
) -> None:
    """The bus bandwidth the check enforces: a threshold one process cannot reach, one above what the nodes' network
    (or, on one node, their GPUs' links) can carry, or an enforced check without a threshold to derive. ``slowest``:
    the type with the slowest network."""
    h = job.health_check
    assert h is not None
    threshold = h.min_bus_bandwidth_gbytes_per_s
    if job.nodes * procs < 2 and (threshold is not None or h.enforce):
        problems.append(
            f"{key(hkey)}: the check runs one process, whose all-reduce moves no data (its bus bandwidth is 0 by "
            "definition), so it can never reach a threshold; remove enforce and minBusBandwidthGBps, or run the job "
            "on 2 or more nodes or processes"
        )
    elif threshold is not None:
        # across nodes the slowest network bounds it; inside one node, the slowest link between a type's GPUs
        bound = slowest if job.nodes >= 2 else min(types, key=gpu_link_gbytes_per_s)
        ceiling = allreduce_busbw_ceiling(bound, job.nodes, procs)
        if threshold > ceiling:
            problems.append(
                f"{key(f'{hkey}.minBusBandwidthGBps')}: {_bandwidth_problem(threshold, ceiling, bound, job.nodes)}"
            )
    elif h.enforce and slowest.name in REFERENCE_ALLREDUCE and not efa:
        problems.append(
            f"{key(f'{hkey}.enforce')}: the published all-reduce bandwidth of {slowest.name}, which a threshold "
            f"derives from, is with EFA, and {key(f'nodeGroups.{group}.efa')} is off; set it to true, or set "
            f"{key(f'{hkey}.minBusBandwidthGBps')} (GB/s) for TCP, or enforce: false"
        )
    elif h.enforce and slowest.name not in REFERENCE_ALLREDUCE:
        problems.append(
            f"{key(f'{hkey}.enforce')}: there is no published all-reduce bandwidth for {slowest.name} to "
            f"derive a threshold from; set {key(f'{hkey}.minBusBandwidthGBps')} (GB/s)"
        )


def _max_bytes_problems(
    hkey: str, max_bytes: int, types: list[InstanceType], procs: int, problems: list[str], *, system: bool
) -> None:
    """A message larger than a GPU's memory (or, on CPU nodes, a process's share of the pod's) can never pass: name
    the unit and a size that fits."""
    smallest = min(types, key=lambda t: (t.gpu_memory_mib or 0) if t.is_gpu else t.memory_mib)
    if smallest.is_gpu and smallest.gpu_memory_mib is not None:
        room, where = (
            smallest.gpu_memory_mib * MIB,
            f"the {smallest.gpu_memory_mib} MiB of one {smallest.gpu_model} GPU of {smallest.name}",
        )
    elif not smallest.is_gpu:
        pod = system_job_pod(pod_size(smallest)) if system else pod_size(smallest)
        room = pod.memory_mib * MIB // procs
        where = f"a process's share of the {pod.memory_mib} MiB a pod on {smallest.name} requests" + (
            f" ({procs} processes)" if procs > 1 else ""
        )
    else:
        return
    if max_bytes >= room:
        problems.append(
            f"{key(f'{hkey}.maxBytes')}: {max_bytes} bytes ({max_bytes / GIB:g} GiB) does not fit in {where}: "
            "every process all-reduces one buffer of maxBytes; the value is in bytes, use a power of two below "
            f"{room} (e.g. {_power_of_two_below(room)})"
        )


#: Bytes in a MiB and a GiB.
MIB = 1 << 20


GIB = 1 << 30


def _power_of_two_below(n: int) -> int:
    return 1 << ((n - 1).bit_length() - 1)


def _bandwidth_problem(value: float, ceiling: float, facts: InstanceType, nodes: int) -> str:
    """Why a bus-bandwidth threshold (GB/s) cannot be reached, and the unit the user probably wrote instead."""
    if nodes >= 2:
        why = (
            f"{value:g} GB/s is above the {ceiling:.4g} GB/s an all-reduce across {nodes} x {facts.name} can reach (a "
            f"node's network is {facts.network_gbps:g} Gbit/s = {network_gbytes_per_s(facts):g} GB/s, and across N "
            "nodes the bus bandwidth is at most N/(N-1) x (n-1)/n times that over n ranks)"
        )
    else:
        model = GPU_MODELS.get(facts.gpu_model or "")
        if model is not None and model.link_gbytes_per_s:
            link = f"the link between its {facts.gpu_model} GPUs"
        elif facts.is_gpu:
            link = f"the fastest GPU link: NVIDIA publishes no link figure for the {facts.gpu_model}"
        else:
            link = "the fastest GPU link"
        why = f"{value:g} GB/s is above the {ceiling:.4g} GB/s an all-reduce inside one {facts.name} can reach ({link})"
    guesses = [
        (f"{value:g} bytes/s", "bytes/s", value / 1e9),
        (f"{value:g} Gbit/s", "Gbit/s", value / 8),
        (f"{value:g} MB/s", "MB/s", value / 1e3),
    ]
    for written, unit, gbytes in guesses:
        if 0.1 <= gbytes <= ceiling:
            return (
                f"{why}; did you write {unit}? the value is in GB/s (1e9 bytes/s, as nccl-tests reports busbw): "
                f"{written} is {gbytes:g}"
            )
    return f"{why}; the value is in GB/s (1e9 bytes/s, as nccl-tests reports busbw)"
