"""Kueue's objects as the plan holds them: the queues, flavors, teams, priorities, Topologies and the
ProvisioningRequest check of a stack (:class:`AdmissionPlan`), with the labels and names they use.
:mod:`stacks.plan.admission` derives them from a plan; the Kueue component (:mod:`components.admission`) registers
them.

Why, with Kueue's and the autoscaler's sources: docs/explanation/admission.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

#: The LocalQueue (in the training namespace) and the ClusterQueue every job of the stack is queued in.
LOCAL_QUEUE = "training"
CLUSTER_QUEUE = "training"
#: Kueue's job label naming the LocalQueue (https://kueue.sigs.k8s.io/docs/concepts/local_queue/).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue's job label naming the WorkloadPriorityClass.
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
QUEUEING_STRATEGY = "StrictFIFO"
#: Priority of stage 0 (jobs that wait for none) and the step down per stage.
STAGE_PRIORITY = 1000
STAGE_STEP = 100
#: The kinds of work the stacks queue, first to last within a stage, and what each adds to its stage's priority (less
#: than :data:`STAGE_STEP` apart in all, so the stage decides first: a job still outranks every job that waits for
#: it). Health checks are short and gate a job's start; evaluations are short and report on finished training;
#: training runs long; experiments (the benchmark's) measure the fleet and may wait for the rest.
KIND_OFFSET: Mapping[str, int] = {"health-check": 40, "evaluation": 30, "training": 20, "experiment": 10}
#: With teams, the priority classes exist for the stages 0..TEAM_STAGES-1 of every kind (the teams' jobs-only stacks
#: use them; their WorkloadPriorityClasses are cluster-scoped, made by the cluster stack).
TEAM_STAGES = 10
#: The Kubernetes group of a team's members is this prefix and the team's name.
TEAM_GROUP_PREFIX = "eks-training-team-"
#: waitForPodsReady: an admitted job's pods must all run within this (covers a scale-up from zero of GPU nodes,
#: 3-10 min on EKS, and pulling a multi-GiB training image), else it is evicted and requeued after
#: ``backoffBase * 2^(n-1)`` seconds (capped at the max). A job ``after`` others is admitted at once when its quota is
#: free and its pods wait for them in an init container (not Ready): while they run it is evicted and requeued in
#: this cycle, so the cap bounds how late it starts after they completed (10 min).
PODS_READY_TIMEOUT_S = 1200
REQUEUE_BACKOFF_BASE_S = 60
REQUEUE_BACKOFF_MAX_S = 600
#: Resources the ClusterQueue covers, in the order Kueue's resource group lists them.
RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi")
#: The cohort of the stack's ClusterQueue and the teams' (``spec.cohortName``; a name, no object:
#: https://kueue.sigs.k8s.io/docs/concepts/cohort/), only when there are teams.
COHORT = "eks-training"
#: A team's ClusterQueue is ``team-<name>`` (cluster-scoped: the prefix keeps it apart from the stack's ``training``).
TEAM_QUEUE_PREFIX = "team-"
#: The label every namespace carries with its own name (set by the API server, so a namespace selector on it cannot
#: be claimed by another namespace): https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True, kw_only=True)
class FlavorPlan:
    """One node group as a Kueue ResourceFlavor and its nominal quota."""

    name: str
    group: str
    """The node group (``system`` for the system group)."""
    path: str
    """The group's config path (``nodeGroups.gpu``)."""
    node_labels: Mapping[str, str]
    node_taints: tuple[Mapping[str, str], ...]
    max_size: int
    quota: Mapping[str, str]
    """Resource -> quantity (Kubernetes spelling) for every resource of :data:`RESOURCES`."""
    per_node: Mapping[str, int]
    """Resource -> per-node amount (millicores, MiB, devices) the quota is ``max_size`` times."""
    topology: Optional[TopologyPlan] = None
    """Topology-aware placement on the group (:func:`with_topology`): the Topology its ResourceFlavor names."""
    provisioned: bool = False
    """The group is topology-aware and autoscales: its workloads pass the ProvisioningRequest admission check
    (:attr:`AdmissionPlan.provisioning`) before Kueue assigns their topology."""


@dataclass(frozen=True, kw_only=True)
class TeamPlan:
    """One team's queues (:mod:`stacks.config.teams`): its namespace, its LocalQueue, its ClusterQueue in the cohort."""

    name: str
    path: str
    """``teams.<name>``."""
    namespace: str
    local_queue: str
    cluster_queue: str
    nodes: Mapping[str, int]
    """Flavor -> the team's nominal quota in whole nodes of that group (``quotaPercent`` of maxSize, rounded down)."""
    quota: Mapping[str, Mapping[str, str]]
    """Flavor -> resource -> quantity: ``nodes`` times a node's amount."""
    may_borrow: bool
    may_lend: bool
    member_role_arns: tuple[str, ...] = ()
    """IAM roles of the team's members (access to the team's namespace, :data:`TEAM_GROUP_PREFIX` + name)."""

    @property
    def kubernetes_group(self) -> str:
        """The Kubernetes group of the team's members (their access entries; bound in the team's namespace)."""
        return f"{TEAM_GROUP_PREFIX}{self.name}"


@dataclass(frozen=True, kw_only=True)
class AdmissionPlan:
    """The stack's queues, quotas and priorities (see the module docstring)."""

    local_queue: str
    cluster_queue: str
    flavors: tuple[FlavorPlan, ...]
    priorities: Mapping[str, int]
    """WorkloadPriorityClass name -> value."""
    job_priority: Mapping[str, str] = field(default_factory=dict)
    """Job name -> its WorkloadPriorityClass."""
    check_priority: Mapping[str, str] = field(default_factory=dict)
    """Job name -> its health check's WorkloadPriorityClass (kind ``health-check``, the job's stage)."""
    queueing_strategy: str = QUEUEING_STRATEGY
    pods_ready_timeout_s: int = PODS_READY_TIMEOUT_S
    requeue_backoff_base_s: int = REQUEUE_BACKOFF_BASE_S
    requeue_backoff_max_s: int = REQUEUE_BACKOFF_MAX_S
    namespace: str
    """The stack's training namespace (its LocalQueue's)."""
    cohort: Optional[str] = None
    """The cohort of every ClusterQueue (``None`` without teams: one ClusterQueue, no cohort)."""
    teams: tuple[TeamPlan, ...] = ()
    own_nodes: Mapping[str, int] = field(default_factory=dict)
    """Flavor -> the whole nodes of its group in the stack's own ClusterQueue: its maxSize less the teams' nodes."""
    own_quota: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Flavor -> resource -> the stack's own ClusterQueue's nominal quota: the fleet less the teams' nodes (the whole
    fleet without teams), so the cohort's quota is the fleet."""
    provisioning: Optional[ProvisioningPlan] = None
    """The ProvisioningRequest admission check, when some flavor is :attr:`FlavorPlan.provisioned` (else none)."""

    def labels(self, job: str, team: Optional[str] = None) -> dict[str, str]:
        """The labels that queue ``job`` (in ``team``'s LocalQueue, named after the team, in a jobs-only stack)."""
        return {QUEUE_LABEL: team or self.local_queue, PRIORITY_LABEL: self.job_priority[job]}

    def check_labels(self, job: str, team: Optional[str] = None) -> dict[str, str]:
        """The labels that queue ``job``'s health check."""
        return {QUEUE_LABEL: team or self.local_queue, PRIORITY_LABEL: self.check_priority[job]}

    def flavor(self, group: str) -> FlavorPlan:
        return next(f for f in self.flavors if f.group == group)

    @property
    def topologies(self) -> tuple[TopologyPlan, ...]:
        """The Kueue Topologies the flavors name, one per distinct set of levels."""
        return tuple({f.topology.name: f.topology for f in self.flavors if f.topology is not None}.values())

    def pod_annotations(self, group: str) -> dict[str, str]:
        """The pod-template annotations of a job's pods on ``group`` (:func:`with_topology`): on a topology-aware
        group, share the lowest network layer they fit in; none elsewhere."""
        t = self.flavor(group).topology
        return {} if t is None else {TOPOLOGY_ANNOTATION: t.placement_level}


#: Kueue's pod-template annotation that asks for one domain of a Topology level, else the level above, and so on up,
#: else spread (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/#user-facing-apis). Preferred, not
#: ``kueue.x-k8s.io/podset-required-topology``: a job larger than one lowest-layer domain (or one that finds none
#: free) still starts, on the fewest domains Kueue finds, instead of waiting for ever.
TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
#: Kueue's other TAS annotations: a pod set carrying any of them asks for topology-aware placement.
TAS_ANNOTATIONS = (
    TOPOLOGY_ANNOTATION,
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
)
#: The lowest level of every Topology: one domain per node, so Kueue assigns each pod its node and respects the
#: nodes' taints (Kueue's sample GPU Topology, site/static/examples/tas/sample-gpu-queues.yaml at v0.19.1).
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, kw_only=True)
class TopologyPlan:
    """A Kueue ``Topology``: the EC2 network layers' node labels, top first, then :data:`HOSTNAME_LABEL`."""

    name: str
    levels: tuple[str, ...]

    @property
    def placement_level(self) -> str:
        """What a job's pods ask to share: the lowest network layer (the network node the instances connect to)."""
        return self.levels[-2]


#: The cluster autoscaler's class that scales up for a whole ProvisioningRequest at once (within the node groups'
#: maximum) and marks it Provisioned once the scale-up is requested (source key ``ca-provreq-best-effort-atomic``).
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: The AdmissionCheck and the ProvisioningRequestConfig it names (both cluster-scoped).
PROVISIONING_CHECK = "cluster-autoscaler"
PROVISIONING_CONFIG = "best-effort-atomic-scale-up"
#: Kueue's retries of a request the autoscaler gave up on (``Failed``: 7 days without capacity, or pods it could not
#: make) or whose booking expired before Kueue admitted the job (``BookingExpired``: 10 minutes after Provisioned, e.g.
#: nodes not yet Ready or fewer than asked for): each retry evicts the workload (its quota freed, it holds nothing),
#: requeues it after ``base * 2^(n-1)`` seconds capped at the max, and makes a new request. The same base and cap as
#: waitForPodsReady's requeueing; and as there, no limit: Kueue's default (3) deactivates the job after about 40
#: minutes of a short EC2 supply, and it would wait for a person to reactivate it. The limit is the CRD's largest
#: (``format: int32``): the retry count never reaches it.
PROVISIONING_RETRY_LIMIT = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class ProvisioningPlan:
    """Kueue's ProvisioningRequest admission check for the flavors of topology-aware groups that autoscale
    (``onFlavors``: fixed groups and the system group are not affected).

    ``managedResources`` is left empty (every resource managed), so the request holds every pod set of the
    workload: a job is admitted whole, the MPI launcher included (the autoscaler finds room for it on the nodes that
    exist, or scales its group in the same decision); a pod set on such a group that asked for none of a narrower list
    would count as ready without a node, and Kueue would wait for nodes that never come (``requiredPodSets``,
    pkg/controller/admissionchecks/provisioning/controller.go at v0.19.1)."""

    check: str = PROVISIONING_CHECK
    config: str = PROVISIONING_CONFIG
    provisioning_class: str = PROVISIONING_CLASS
    flavors: tuple[str, ...]
    """The flavors whose workloads pass the check."""
    backoff_base_s: int = REQUEUE_BACKOFF_BASE_S
    backoff_max_s: int = REQUEUE_BACKOFF_MAX_S
    backoff_limit_count: int = PROVISIONING_RETRY_LIMIT
