"""Scheduling conventions: the labels and taints node groups carry and pods select and tolerate.

One function, :func:`node_scheduling`, decides a group's labels and taints; node groups are built
from it and workload placement selects and tolerates with it, so they cannot disagree. Taints are
written in Kubernetes spelling everywhere; :data:`TAINT_EFFECTS_EKS` converts to the EKS API's.
"""

from typing import Literal, Mapping, Optional, Sequence, TypedDict, get_args

from typing_extensions import NotRequired

from components.catalog.platform import AUTOSCALER_GPU_LABEL

#: Kubernetes taint effects (listed once; config models and components read this).
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TAINT_EFFECTS: tuple[str, ...] = get_args(TaintEffect)
#: Kubernetes spelling -> EKS node group API spelling.
TAINT_EFFECTS_EKS: Mapping[str, str] = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}

#: Label every node of a group carries with the group's name (``system`` for the system group).
NODE_ROLE_LABEL = "eks-training/role"
#: Our label on GPU nodes (the NVIDIA device plugin selects it) and the taint they carry.
GPU_LABEL = ("eks-training/accelerator", "nvidia")
GPU_TAINT: Mapping[str, str] = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
#: Our label on EFA nodes (the EFA device plugin selects it).
EFA_LABEL = ("eks-training/efa", "true")
#: Role of the system node group (add-ons, controllers, etcd, staging, evaluation).
SYSTEM_ROLE = "system"
#: Label prefixes users may not set on their groups (Kubernetes', EKS's and ours).
RESERVED_LABEL_PREFIXES: tuple[str, ...] = (
    "kubernetes.io/",
    "k8s.io/",
    "eks.amazonaws.com/",
    "k8s.amazonaws.com/",
    "eks-training/",
)
#: The longest label or taint key, prefix included, that EKS takes on a managed node group (UpdateLabelsPayload,
#: https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateLabelsPayload.html).
EKS_LABEL_KEY_MAX = 63
#: The well-known node labels the kubelet sets itself and takes in ``--node-labels`` too (``kubeletLabels``,
#: kubernetes staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go).
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)


def kubelet_refuses_label(k: str) -> bool:
    """A node label the kubelet refuses to start with: one in the ``kubernetes.io`` or ``k8s.io`` namespace (or a
    subdomain of them) outside its own ``kubelet.kubernetes.io`` and ``node.kubernetes.io`` (``ValidateKubeletFlags``,
    https://github.com/kubernetes/kubernetes/blob/v1.36.3/cmd/kubelet/app/options/options.go) but the well-known
    :data:`KUBELET_LABELS`."""
    namespace = k.split("/", 1)[0] if "/" in k else ""

    def under(*domains: str) -> bool:
        return any(namespace == d or namespace.endswith("." + d) for d in domains)

    kubelets = k in KUBELET_LABELS or under("kubelet.kubernetes.io", "node.kubernetes.io")
    return under("kubernetes.io", "k8s.io") and not kubelets


class NodeTaint(TypedDict):
    """A taint in Kubernetes spelling."""

    key: str
    """Taint key."""
    value: NotRequired[str]
    """Taint value (may be empty)."""
    effect: str
    """``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``."""


class Toleration(TypedDict):
    """A pod toleration (Kubernetes spelling)."""

    key: str
    """Taint key tolerated."""
    operator: str
    """``Equal`` or ``Exists``."""
    value: NotRequired[str]
    """Taint value (with ``Equal``)."""
    effect: NotRequired[str]
    """Taint effect tolerated (all when absent)."""


def node_scheduling(
    role: str,
    gpus: int,
    efa: bool,
    labels: Optional[Mapping[str, str]] = None,
    taints: Optional[Sequence[NodeTaint]] = None,
    accelerator: Optional[str] = None,
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The labels and taints (Kubernetes spelling) every node of a group carries: its role label, on GPU
    types our GPU label, cluster-autoscaler's ``k8s.amazonaws.com/accelerator=<accelerator>`` and the GPU
    taint, the EFA label on EFA groups, then the user's own."""
    out_labels = {NODE_ROLE_LABEL: role, **dict(labels or {})}
    out_taints: list[dict[str, str]] = []
    if gpus > 0:
        out_labels[GPU_LABEL[0]] = GPU_LABEL[1]
        out_labels[AUTOSCALER_GPU_LABEL] = accelerator or "nvidia"
        out_taints.append(dict(GPU_TAINT))
    if efa:
        out_labels[EFA_LABEL[0]] = EFA_LABEL[1]
    for t in taints or []:
        if t["effect"] not in TAINT_EFFECTS:
            raise ValueError(f"taint {t['key']!r}: effect {t['effect']!r} is not one of {', '.join(TAINT_EFFECTS)}")
        out_taints.append({"key": t["key"], "value": t.get("value", ""), "effect": t["effect"]})
    return out_labels, out_taints


def tolerations_for(taints: Sequence[Mapping[str, str]]) -> list[Toleration]:
    """Tolerations that match ``taints`` (Kubernetes spelling) exactly."""
    return [{"key": t["key"], "operator": "Equal", "value": t.get("value", ""), "effect": t["effect"]} for t in taints]


def system_node_selector() -> dict[str, str]:
    """Selects the system node group."""
    return {NODE_ROLE_LABEL: SYSTEM_ROLE}
