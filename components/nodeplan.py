"""What a node group's instance type means for the group and for the pods on it: pure functions.

:func:`node_profile` turns an instance type's catalog row (and the group's role, EFA setting, labels
and taints) into everything derived from it: the EFA profile (interfaces, ``efa-only`` interfaces,
huge pages, NCCL/libfabric environment, the VPC CNI that needs), labels and taints, the AMI type,
the size of a pod that fills one node, and the cluster-autoscaler node-template tags. The stack's
plan (:mod:`stacks.plan`) and :class:`components.nodegroup.TrainingNodeGroup` both call it, so the
launch template, the pods' requests, the autoscaler's tags and the health check agree by construction.
:func:`node_update_strategy` decides, from the group's capacity, how EKS rolls its nodes; the node group registers
it and the plan's reports (:mod:`stacks.plan.upgrade_text`) describe it, with the same :func:`roll_minutes`.
"""

import base64
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, Optional, Sequence, TypedDict, get_args

from typing_extensions import NotRequired

from components.catalog import (
    AMI_TYPES,
    EFA_ENV_BY_FAMILY,
    EFA_ENV_COMMON,
    EFA_HUGEPAGES_2MI,
    EFA_ONLY_MIN_VPC_CNI,
    EFA_PREALLOCATED_HUGEPAGES_2MI,
    ENI_MAX_PODS,
    FASTEST_GPU_LINK_GBYTES_PER_S,
    InstanceType,
    accelerator_label_value,
)
from components.catalog.fsx import HostRequirement
from components.catalog.gpus import GPU_MODELS
from components.catalog.platform import NO_SURGE_CAPACITY, NODE_UPDATE_STRATEGIES, NodeUpdateStrategy, NoSurge
from components.catalog.sources import SOURCES
from components.catalog.timings import NODE_ROLL, NODE_SURGE
from components.scheduling import NodeTaint, node_scheduling

#: EKS capacity types (listed once).
CapacityType = Literal["ON_DEMAND", "SPOT", "CAPACITY_BLOCK"]
CAPACITY_TYPES: tuple[str, ...] = get_args(CapacityType)
#: A group's capacity type when the caller gives none (the stack config's default too:
#: ``nodeGroups.<g>.capacityType``).
DEFAULT_CAPACITY_TYPE: CapacityType = "ON_DEMAND"
#: A worker group's root volume (gp3, encrypted) when the caller gives no ``disk_size_gib`` (the stack config's
#: default too: ``nodeGroups.<g>.diskSizeGib``).
DEFAULT_DISK_SIZE_GIB = 100
#: The system nodes' root volume (gp3, encrypted) when the caller gives no ``disk_size_gib`` (the stack config's
#: default too: ``systemNodeGroup.diskSizeGib``).
SYSTEM_DISK_SIZE_GIB = 50

#: Fraction of a node's allocatable CPU and memory a pod that fills the node requests (the rest is
#: left for DaemonSets: VPC CNI, kube-proxy, CSI node plugins, Pod Identity agent, device plugins).
NODE_SHARE = 0.8
#: Share of a system node a job on the system group requests (the rest stays with add-ons and controllers).
SYSTEM_JOB_SHARE = 0.25
#: Data-loader workers pass batches through ``/dev/shm``: a quarter of the pod's memory, at most 64 GiB.
MAX_SHM_MIB = 64 * 1024
#: cluster-autoscaler reads a group's template node from tags with this prefix when it has no nodes.
AUTOSCALER_TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template"


class RepairOverrideSpec(TypedDict):
    """One of EKS's ``nodeRepairConfigOverrides``: the repair action for one condition and reason the node monitoring
    agent reports (https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html)."""

    condition: str
    """The node condition, e.g. ``AcceleratedHardwareReady``."""
    reason: str
    """The agent's reason, e.g. ``DCGMError`` or ``NvidiaXID31Error``."""
    wait_minutes: int
    """How long the condition must stay before the node is eligible for repair (>= 1)."""
    action: str
    """``Replace``, ``Reboot`` or ``NoAction``."""


class NodeRepairSpec(TypedDict):
    """EKS node auto repair of the group (https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html): nodes
    whose health condition stays bad (10 minutes for GPU faults the node monitoring agent reports, 30 for the others)
    are rebooted or replaced. A threshold is a count or a percentage, not both."""

    enabled: bool
    """Repair the group's nodes."""
    max_unhealthy_nodes: NotRequired[int]
    """Repair stops while more nodes than this are unhealthy."""
    max_unhealthy_percent: NotRequired[int]
    """... or more than this percentage of the group."""
    max_parallel_nodes: NotRequired[int]
    """At most this many nodes are repaired at once."""
    max_parallel_percent: NotRequired[int]
    """... or this percentage of the unhealthy nodes."""
    overrides: NotRequired[Sequence[RepairOverrideSpec]]
    """Repair actions per condition and reason, instead of EKS's defaults."""


class InconsistentFacts(ValueError):
    """An instance type's facts contradict each other (e.g. EFA interfaces vs network cards)."""


@dataclass(frozen=True, kw_only=True)
class EfaProfile:
    """EFA on one instance type: everything derived from its interface count."""

    interfaces: int
    """EFA interfaces per node: one per network card (launch template, pod request, autoscaler tag)."""
    efa_only_interfaces: int
    """Interfaces on cards 1..N-1, typed ``efa-only`` (card 0 is ``efa``: EFA with ENA, the primary)."""
    hugepages_2mi: str
    """Huge pages a pod on the node requests."""
    env: Mapping[str, str]
    """NCCL/libfabric environment of pods on the node."""
    min_vpc_cni: Optional[tuple[int, int, int]]
    """The VPC CNI the cluster needs for ``efa-only`` interfaces (``None`` when there are none)."""


def efa_profile(facts: InstanceType) -> EfaProfile:
    """The EFA profile of an EFA-capable type; :class:`InconsistentFacts` when its interface count and
    network cards disagree (one EFA interface goes on each network card)."""
    if not facts.supports_efa:
        raise InconsistentFacts(f"{facts.name} has no EFA interfaces")
    if facts.max_efa_interfaces != facts.network_cards:
        raise InconsistentFacts(
            f"{facts.name}: maxEfaInterfaces ({facts.max_efa_interfaces}) must equal networkCards "
            f"({facts.network_cards}): an EFA group gets one EFA interface per network card"
        )
    count = facts.max_efa_interfaces
    return EfaProfile(
        interfaces=count,
        efa_only_interfaces=count - 1,
        hugepages_2mi=EFA_HUGEPAGES_2MI,
        env={**EFA_ENV_COMMON, **EFA_ENV_BY_FAMILY.get(facts.family, {})},
        min_vpc_cni=EFA_ONLY_MIN_VPC_CNI if count > 1 else None,
    )


def efa_default(facts: InstanceType, capacity_type: str = DEFAULT_CAPACITY_TYPE) -> bool:
    """Whether a group of this type uses EFA when its config does not say: on for types that have it, except
    for ``SPOT`` groups. EFA pins a group to one zone and a cluster placement group, the opposite of what spot
    capacity needs (it is found by spreading over zones and types), so spot groups get EFA only when asked."""
    return facts.supports_efa and capacity_type != "SPOT"


def network_gbytes_per_s(facts: InstanceType) -> float:
    """A node's network bandwidth in GB/s (1e9 bytes/s): the catalog's Gbit/s divided by 8."""
    return facts.network_gbps / 8


def gpu_link_gbytes_per_s(facts: InstanceType) -> float:
    """The link between the type's GPUs (GB/s, both directions), or the fastest of any GPU where there is no figure
    (a CPU type, a GPU without a datasheet)."""
    model = GPU_MODELS.get(facts.gpu_model or "")
    return (model.link_gbytes_per_s if model else None) or FASTEST_GPU_LINK_GBYTES_PER_S


def allreduce_busbw_ceiling(facts: InstanceType, nodes: int, procs_per_node: int) -> float:
    """The highest all-reduce bus bandwidth (GB/s, as nccl-tests reports it) ``nodes`` nodes of this type can reach.

    Across nodes each node sends at least ``2(N-1)/N`` of the message over its network (source key
    ``allreduce-lower-bound``), so ``algbw <= N B / (2(N-1))`` for a node bandwidth ``B``; bus bandwidth is
    ``algbw x 2(n-1)/n`` over ``n`` ranks (``nccl-tests-busbw``), hence ``busbw <= B N (n-1) / ((N-1) n)``, below
    ``2B``. Inside one node the data never leaves it: the bound is the GPU's link (:func:`gpu_link_gbytes_per_s`)."""
    if nodes < 2:
        return gpu_link_gbytes_per_s(facts)
    ranks = nodes * max(1, procs_per_node)
    return network_gbytes_per_s(facts) * nodes * (ranks - 1) / ((nodes - 1) * ranks)


def interface_specs(count: int) -> list[dict[str, object]]:
    """Launch-template network interfaces for EFA: card 0 ``efa`` at device 0 (the primary, with an IP),
    cards 1..N-1 ``efa-only`` at device 1 (no IP), one per network card."""
    return [
        {
            "network_card_index": card,
            "device_index": 0 if card == 0 else 1,
            "interface_type": "efa" if card == 0 else "efa-only",
        }
        for card in range(count)
    ]


@dataclass(frozen=True, kw_only=True)
class PodSize:
    """What one pod that fills one node requests."""

    cpu_millis: int
    memory_mib: int
    gpus: int
    efa_devices: int
    hugepages_2mi: str
    """``""`` without EFA."""
    shm_mib: int
    procs_per_node: int
    """Processes per node by default: one per GPU, one on CPU nodes."""
    threads_per_proc: int


#: The kubelet's default ``maxPods`` (https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/), for a
#: type the catalog has no ENI figure for.
KUBELET_DEFAULT_MAX_PODS = 110


def _allocatable_cpu_mem(facts: InstanceType) -> tuple[int, int]:
    """Allocatable CPU (millicores) and memory (MiB) before huge pages: the catalog's, else 95 % / 85 %."""
    return (
        facts.allocatable_cpu_m or int(facts.vcpus * 1000 * 0.95),
        facts.allocatable_memory_mib or int(facts.memory_mib * 0.85),
    )


def max_pods(facts: InstanceType) -> int:
    """The ``maxPods`` EKS gives a managed node of the type: the EKS AMI's ENI figure, capped at 110 below 30 vCPUs and
    at 250 above (source keys ``eks-ami-eni-max-pods``, ``eks-mng-max-pods``)."""
    eni = ENI_MAX_PODS.get(facts.name, KUBELET_DEFAULT_MAX_PODS)
    return min(eni, 110 if facts.vcpus < 30 else 250)


@dataclass(frozen=True, kw_only=True)
class NodeAllocatable:
    """What a node of a type reports as allocatable before any device plugin registers (GPUs and EFA devices appear
    when their plugin does; see :mod:`stacks.box`)."""

    cpu_millis: int
    memory_mib: int
    """After the kubelet takes the pre-allocated huge pages off (pkg/kubelet/nodestatus/setters.go,
    https://github.com/kubernetes/kubernetes/blob/v1.36.3/pkg/kubelet/nodestatus/setters.go)."""
    pods: int
    hugepages_2mi_mib: int
    """0 without EFA."""


def node_allocatable(facts: InstanceType, efa: Optional[EfaProfile] = None) -> NodeAllocatable:
    """The allocatable resources of a node of ``facts``' type (EFA nodes: the driver's pre-allocated huge pages)."""
    cpu, mem = _allocatable_cpu_mem(facts)
    huge = EFA_PREALLOCATED_HUGEPAGES_2MI * 2 if efa is not None else 0
    return NodeAllocatable(cpu_millis=cpu, memory_mib=mem - huge, pods=max_pods(facts), hugepages_2mi_mib=huge)


def pod_size(facts: InstanceType, efa: Optional[EfaProfile] = None) -> PodSize:
    """Requests of a pod that fills a node of ``facts``' type (allocatable x :data:`NODE_SHARE`; memory: what the
    node reports as allocatable, after the EFA driver's huge pages, so the request fits on every type with EFA)."""
    node = node_allocatable(facts, efa)
    cpu = int(node.cpu_millis * NODE_SHARE) // 100 * 100
    mem = int(node.memory_mib * NODE_SHARE) // 256 * 256
    procs = max(1, facts.gpus)
    return PodSize(
        cpu_millis=cpu,
        memory_mib=mem,
        gpus=facts.gpus,
        efa_devices=efa.interfaces if efa else 0,
        hugepages_2mi=efa.hugepages_2mi if efa else "",
        shm_mib=min(mem // 4, MAX_SHM_MIB),
        procs_per_node=procs,
        threads_per_proc=max(1, (cpu // 1000) // procs),
    )


def system_job_pod(pod: PodSize) -> PodSize:
    """What a job's pod requests on a system node whose whole-node pod is ``pod``: :data:`SYSTEM_JOB_SHARE` of the
    node (the add-ons keep the rest)."""
    share = SYSTEM_JOB_SHARE / NODE_SHARE
    cpu = int(pod.cpu_millis * share) // 100 * 100
    mem = int(pod.memory_mib * share) // 256 * 256
    return replace(
        pod, cpu_millis=cpu, memory_mib=mem, shm_mib=min(pod.shm_mib, mem // 4), threads_per_proc=max(1, cpu // 1000)
    )


def ami_type(gpus: int) -> str:
    """The EKS managed node group AMI type for nodes with ``gpus`` NVIDIA GPUs."""
    return AMI_TYPES["nvidia"] if gpus > 0 else AMI_TYPES["cpu"]


def placement_group(efa: bool, reservation: Optional[str]) -> bool:
    """An EFA group's nodes go in a ``cluster`` placement group of their own, unless a capacity reservation (or a
    Capacity Block) places them."""
    return efa and not reservation


def surge_limit(capacity_type: str, reservation: Optional[str], efa: bool) -> Optional[NoSurge]:
    """What leaves a group with this capacity no room for an instance beyond its size (a Capacity Block, an
    On-Demand Capacity Reservation, its cluster placement group), ``None`` when nothing does."""
    if capacity_type == "CAPACITY_BLOCK":
        return NO_SURGE_CAPACITY["capacity-block"]
    if reservation:
        return NO_SURGE_CAPACITY["capacity-reservation"]
    if placement_group(efa, reservation):
        return NO_SURGE_CAPACITY["cluster-placement"]
    return None


def node_update_strategy(capacity_type: str, reservation: Optional[str], efa: bool) -> NodeUpdateStrategy:
    """How EKS rolls the group's nodes: ``MINIMAL`` (each old node terminated before its replacement launches) where
    :func:`surge_limit` finds no room for an extra instance, else ``DEFAULT`` (new nodes first)."""
    return NODE_UPDATE_STRATEGIES["MINIMAL" if surge_limit(capacity_type, reservation, efa) else "DEFAULT"]


def roll_minutes(nodes: int, strategy: NodeUpdateStrategy) -> float:
    """The modelled time of rolling ``nodes`` nodes one at a time: each drained and replaced (:data:`NODE_ROLL`),
    after the scale-up's new nodes (:data:`NODE_SURGE`) when the strategy launches them first."""
    return nodes * NODE_ROLL.minutes + (NODE_SURGE.minutes if strategy.surge else 0.0)


#: Boundary of the launch template's MIME user data (EKS merges its own nodeadm part into it).
USER_DATA_BOUNDARY = "//eks-training-host-setup"
#: How often a bootstrap install is tried (the package mirror may not be reachable the first second after boot).
INSTALL_ATTEMPTS = 5


def host_setup_script(requirements: Sequence[HostRequirement]) -> Optional[str]:
    """The shell script that gives a node the host side of ``requirements`` (their AL2023 packages), or ``None`` when
    there is nothing to install. On the EKS AL2023 AMIs, cloud-init runs it before ``nodeadm-run`` starts the kubelet
    (that unit is ``After=cloud-final.service``, amazon-eks-ami templates/al2023/runtime), so no pod lands on the node
    before it ran. A requirement whose bootstrap the node groups do not derive is an error here: the config refuses
    such features before anything is registered."""
    packages: list[str] = []
    lines: list[str] = []
    for r in requirements:
        if not r.bootstrapped:
            raise ValueError(f"no node bootstrap is derived for {r.feature}")
        lines.append(f"# {r.feature}: {'; '.join(r.needs)} ({SOURCES[r.source].url})")
        packages += [p for p in r.packages if p not in packages]
    if not packages:
        return None
    wanted = " ".join(packages)
    return "\n".join(
        [
            "#!/bin/bash",
            *lines,
            "set -u",
            f"for attempt in $(seq {INSTALL_ATTEMPTS}); do",
            f"  if dnf install -y {wanted}; then exit 0; fi",
            "  sleep $((attempt * 10))",
            "done",
            f'echo "eks-training: dnf install {wanted} failed {INSTALL_ATTEMPTS} times" >&2',
            "exit 1",
            "",
        ]
    )


def host_setup_user_data(requirements: Sequence[HostRequirement]) -> Optional[str]:
    """A launch template's user data for ``requirements``: a MIME multi-part document with one shell part, the form an
    EKS managed node group on AL2023 merges with its own ``NodeConfig`` part
    (https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html#launch-template-user-data); ``None``
    without anything to install (the launch template then has no user data)."""
    script = host_setup_script(requirements)
    if script is None:
        return None
    return "\n".join(
        [
            "MIME-Version: 1.0",
            f'Content-Type: multipart/mixed; boundary="{USER_DATA_BOUNDARY}"',
            "",
            f"--{USER_DATA_BOUNDARY}",
            'Content-Type: text/x-shellscript; charset="us-ascii"',
            "",
            script,
            f"--{USER_DATA_BOUNDARY}--",
            "",
        ]
    )


#: Hop limit 2 lets hostNetwork=false add-on pods that still read instance metadata (region, AZ) work, as in EKS's own
#: launch templates; credentials for workloads come from EKS Pod Identity.
IMDS_HOP_LIMIT = 2


def launch_template_data(
    name: str,
    *,
    disk_size_gib: int,
    tags: Mapping[str, str],
    efa_interfaces: int,
    capacity_type: str,
    reservation: Optional[str],
    instance_type: str,
    user_data: Optional[str],
) -> dict[str, Any]:
    """What a node group's launch template holds (pulumi-aws spelling), but the ids of the resources it names (the
    EFA interfaces' security groups, the placement group, which EFA without a reservation implies): a change is a new
    version, and the group's nodes roll. :class:`components.nodegroup.TrainingNodeGroup` registers it; the plan
    records its digest (:mod:`stacks.plan.templates`)."""
    block = capacity_type == "CAPACITY_BLOCK"
    return {
        "description": f"{name}: IMDSv2, encrypted gp3 root volume",
        "metadata_options": {
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": IMDS_HOP_LIMIT,
            "instance_metadata_tags": "disabled",
        },
        "block_device_mappings": [
            {
                "device_name": "/dev/xvda",
                "ebs": {
                    "volume_size": int(disk_size_gib),
                    "volume_type": "gp3",
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        "tag_specifications": [
            {"resource_type": kind, "tags": {**tags, "Name": name}} for kind in ("instance", "volume")
        ],
        "network_interfaces": [{**spec, "delete_on_termination": "true"} for spec in interface_specs(efa_interfaces)]
        or None,
        "capacity_reservation_specification": (
            {"capacity_reservation_target": {"capacity_reservation_id": reservation}} if reservation else None
        ),
        "instance_market_options": {"market_type": "capacity-block"} if block else None,
        # EKS rejects a Capacity Block group whose launch template lacks InstanceType (source key
        # ``eks-capacity-blocks-mng``); the node group then names no instance types
        "instance_type": instance_type if block else None,
        "user_data": base64.b64encode(user_data.encode()).decode() if user_data else None,
    }


def network_env(facts: InstanceType, efa: Optional[EfaProfile]) -> dict[str, str]:
    """NCCL/libfabric environment of pods on the type: the EFA profile's, else the family's NCCL settings
    on GPU types, else nothing."""
    if efa is not None:
        return dict(efa.env)
    if facts.is_gpu:
        return {k: v for k, v in EFA_ENV_BY_FAMILY.get(facts.family, {}).items() if k.startswith("NCCL_")}
    return {}


def autoscaler_template_tags(
    labels: Mapping[str, str], taints: Sequence[Mapping[str, str]], gpus: int, efa_interfaces: int
) -> dict[str, str]:
    """Auto Scaling group tags cluster-autoscaler reads to build a template node of a group at zero:
    its labels, taints and extended resources (managed node groups do not copy them to the ASG)."""
    tags = {f"{AUTOSCALER_TEMPLATE_PREFIX}/label/{k}": v for k, v in labels.items()}
    for t in taints:
        tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/taint/{t['key']}"] = f"{t['value']}:{t['effect']}"
    if gpus:
        tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/resources/nvidia.com/gpu"] = str(gpus)
    if efa_interfaces:
        tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/resources/vpc.amazonaws.com/efa"] = str(efa_interfaces)
        tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/resources/hugepages-2Mi"] = EFA_HUGEPAGES_2MI
    return tags


def sizing_type(facts: Sequence[InstanceType]) -> InstanceType:
    """The type pods of a group are sized for: the smallest (by allocatable CPU, then memory). All types
    of a group share GPU and EFA counts (the config loader checks), so such pods fit on any of them."""
    return min(facts, key=lambda f: (f.allocatable_cpu_m or f.vcpus * 1000, f.allocatable_memory_mib or f.memory_mib))


@dataclass(frozen=True, kw_only=True)
class NodeProfile:
    """Everything derived from a group's instance types, role, EFA setting, labels and taints."""

    role: str
    instance: InstanceType
    """The sizing type (see :func:`sizing_type`)."""
    accelerator: Optional[str]
    """Value of cluster-autoscaler's GPU label on GPU nodes (``None`` for CPU groups)."""
    gpus: int
    efa: Optional[EfaProfile]
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]
    ami_type: str
    pod: PodSize
    network_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces per node (0 without EFA)."""
        return self.efa.interfaces if self.efa else 0


def node_profile(
    role: str,
    facts: Sequence[InstanceType],
    *,
    efa: bool,
    labels: Optional[Mapping[str, str]] = None,
    taints: Optional[Sequence[NodeTaint]] = None,
) -> NodeProfile:
    """What a node group offers its jobs: its labels and taints, a whole node's pod size, its EFA devices and GPU
    label. Give the group's ``role``, its instance types (``INSTANCE_TYPES[name]``), its ``efa``, and the ``labels``
    and ``taints`` it was given (:class:`InconsistentFacts` for contradictory EFA facts)."""
    sizing = sizing_type(facts)
    profile = efa_profile(sizing) if efa else None
    accelerator = accelerator_label_value(sizing.gpu_model) if sizing.gpus else None
    node_labels, node_taints = node_scheduling(role, sizing.gpus, efa, labels, taints, accelerator=accelerator)
    return NodeProfile(
        role=role,
        accelerator=accelerator,
        instance=sizing,
        gpus=sizing.gpus,
        efa=profile,
        labels=node_labels,
        taints=tuple(node_taints),
        ami_type=ami_type(sizing.gpus),
        pod=pod_size(sizing, profile),
        network_env=network_env(sizing, profile),
    )
