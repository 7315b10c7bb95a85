"""``Admission``: Kueue (https://kueue.sigs.k8s.io) from its pinned Helm chart, with the stack's queues.

It registers the ResourceFlavors, the WorkloadPriorityClasses, one ClusterQueue and one LocalQueue. With teams it
adds a ClusterQueue per team in one cohort, and its LocalQueue (:func:`queue_spec`, Kueue v0.19's ``v1beta2`` API).
The manager's Configuration (:func:`kueue_configuration`) is one value, read by the chart and by the box
(``stacks.box.kueue``): it integrates :data:`FRAMEWORKS` and sets ``waitForPodsReady``. With ``topologies`` it adds a
Topology per set of levels and the gate (:func:`feature_gates`). With ``provisioning`` it adds the ProvisioningRequest
check (:func:`provisioning_config_spec`), after the CRD (``after``).

Why: docs/explanation/admission.md ("A job starts whole or waits holding nothing", "With the cluster autoscaler",
"Topology-aware placement on the EC2 network")."""

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import HELM_CHARTS, MANIFESTS
from components.catalog.charts import CHART_IMAGES, chart_image_values
from components.conventions import KUEUE_NAMESPACE
from components.helm import pinned_release
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.naming import DNS_SUBDOMAIN_RE
from components.ordering import ordered_after
from components.scheduling import TAINT_EFFECTS
from components.workloads.job_objects import JOB_OBJECTS

#: The job kinds the stacks render, as Kueue's integration names.
FRAMEWORKS: tuple[str, ...] = tuple(o.kueue_framework for o in JOB_OBJECTS.values())
KUEUE_API = "kueue.x-k8s.io/v1beta2"
#: The controller's image: the release the chart version names, from the Kubernetes project's registry, pinned by
#: digest (the catalog's, :data:`components.catalog.charts.CHART_IMAGES`).
KUEUE_IMAGE = CHART_IMAGES["kueue"].ref
PRIORITY_DESCRIPTION = (
    "a job outranks the jobs that wait for it; within a stage, health checks > evaluations > "
    "training > experiments (stacks/plan/admission.py)"
)


class QueueFlavor(TypedDict):
    """One ResourceFlavor (a node group) and its nominal quota."""

    name: str
    """The ResourceFlavor's name (a DNS label, such as the node group's)."""
    node_labels: Mapping[str, str]
    """Labels every node of the group carries (``TrainingNodeGroup.node_labels``): a pod set gets this flavor when
    its node selector agrees with them."""
    node_taints: Sequence[Mapping[str, str]]
    """The group's taints (``key``, ``value``, ``effect``; ``TrainingNodeGroup.node_taints``): a pod set gets this
    flavor only if it tolerates them. Empty for an untainted group."""
    quota: Mapping[str, str]
    """Resource -> nominal quantity, for every resource of :attr:`AdmissionArgs.resources` (the group's maximum size
    times each node's allocatable: ``{"cpu": "32", "memory": "120Gi", "nvidia.com/gpu": "8"}``)."""
    topology_name: NotRequired[str]
    """The Topology (:attr:`AdmissionArgs.topologies`) of a topology-aware group: Kueue places the flavor's pod sets
    by its levels, on nodes that carry every level's label."""


class QueueTopology(TypedDict):
    """A Kueue Topology: its levels are node labels, top first; the lowest may be ``kubernetes.io/hostname``."""

    name: str
    """The Topology's name (what :attr:`QueueFlavor.topology_name` names)."""
    levels: Sequence[str]
    """Node labels, the widest level first (such as the EC2 network nodes' labels, then ``kubernetes.io/hostname``)."""


class TeamQueue(TypedDict):
    """One team's LocalQueue (in its namespace) and ClusterQueue (in the cohort)."""

    namespace: pulumi.Input[str]
    """The team's namespace (the LocalQueue is created in it, after it)."""
    namespace_name: str
    """Its name (the ClusterQueue admits workloads of that namespace only)."""
    local_queue: str
    """The team's LocalQueue: its jobs' ``kueue.x-k8s.io/queue-name`` label."""
    cluster_queue: str
    """The team's ClusterQueue (cluster-wide: unique among every queue)."""
    quota: Mapping[str, Mapping[str, str]]
    """Flavor -> resource -> nominal quantity, for every flavor and resource."""
    may_borrow: bool
    """Else ``borrowingLimit: 0`` on every resource."""
    may_lend: bool
    """Else ``lendingLimit: 0`` on every resource."""


class ProvisioningCheck(TypedDict):
    """Kueue's ProvisioningRequest admission check: the cluster autoscaler books a job's nodes before it is admitted."""

    check: str
    """The AdmissionCheck's name."""
    config: str
    """The ProvisioningRequestConfig's name."""
    provisioning_class: str
    """The autoscaler's provisioning class, such as ``check-capacity.autoscaling.x-k8s.io``."""
    flavors: Sequence[str]
    """The ResourceFlavors whose workloads pass the check (``onFlavors``)."""
    backoff_base_s: int
    """Seconds before a failed or expired request is tried again; doubled each time."""
    backoff_max_s: int
    """The longest wait between two requests."""
    backoff_limit_count: int
    """How many times a failed request is tried again (Kueue's ``retryStrategy.backoffLimitCount``)."""


class AdmissionArgs(TypedDict):
    """Inputs of :class:`Admission`."""

    namespace: pulumi.Input[str]
    """The namespace of the jobs (the LocalQueue's); the LocalQueue is created after it."""
    local_queue: str
    """The LocalQueue: the jobs' ``kueue.x-k8s.io/queue-name`` label (``JobSpec.queue_labels``)."""
    cluster_queue: str
    """The ClusterQueue the LocalQueue feeds."""
    flavors: Sequence[QueueFlavor]
    """A ResourceFlavor per node group the jobs run on, each with its quota (at least one)."""
    resources: Sequence[str]
    """The resources the queue counts, such as ``["cpu", "memory", "nvidia.com/gpu"]``: every flavor's quota names
    each."""
    priorities: Mapping[str, int]
    """WorkloadPriorityClass name -> value (a higher value is admitted first and may preempt a lower one): the jobs'
    ``kueue.x-k8s.io/priority-class`` label names one."""
    queueing_strategy: str
    """``BestEffortFIFO`` (a job that does not fit lets smaller ones pass) or ``StrictFIFO``."""
    pods_ready_timeout_s: int
    """Seconds an admitted job's pods have to be ready before Kueue evicts it and queues it again
    (``waitForPodsReady``)."""
    requeue_backoff_base_s: int
    """Seconds before an evicted job is queued again; doubled at each eviction."""
    requeue_backoff_max_s: int
    """The longest wait before an evicted job is queued again."""
    node_selector: Mapping[str, str]
    """Where the controller runs (the system nodes: ``system_node_selector()``)."""
    cohort: NotRequired[str]
    """With teams: the cohort of the stack's ClusterQueue and the teams' (each reclaims its lent quota:
    ``reclaimWithinCohort: Any``), the stack's ClusterQueue then admits its namespace's workloads only."""
    own_quota: NotRequired[Mapping[str, Mapping[str, str]]]
    """With teams: flavor -> resource -> the stack's ClusterQueue's nominal quota (default: the flavors' quota)."""
    namespace_name: NotRequired[str]
    """With teams: the name of :attr:`namespace` (the stack's ClusterQueue's namespace selector)."""
    teams: NotRequired[Sequence[TeamQueue]]
    """With ``cohort``: each team's queues, which borrow and lend quota in the cohort."""
    after: NotRequired[Sequence[pulumi.Input[str]]]
    """Outputs Kueue is installed after. With :attr:`provisioning`: the ``urn`` of the ProvisioningRequest CRD applied
    from :data:`PROVISIONING_CRD_URL` (Kueue starts its ProvisioningRequest controller only if the CRD exists when it
    starts). The program also passes the MPI Operator's, which Kueue does not need (it waits for the MPIJob API)."""
    topologies: NotRequired[Sequence[QueueTopology]]
    """The Topologies the flavors name (topology-aware scheduling, on by default in Kueue v0.19 and enabled
    explicitly in the chart's values when there are any: :data:`TAS_FEATURE_GATE`)."""
    provisioning: NotRequired[ProvisioningCheck]
    """The ProvisioningRequest admission check and the flavors it runs on (an Output of the ProvisioningRequest CRD
    must be in :attr:`after`)."""


def kueue_configuration(args: Mapping[str, Any]) -> dict[str, Any]:
    """The manager's ``config.kueue.x-k8s.io/v1beta2`` Configuration: the pinned chart's own (its values'
    ``managerConfig.controllerManagerConfigYaml``: ports, leader election, concurrency, client rates) and the
    stack's settings (waitForPodsReady, integrations, jobs without a queue left alone)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": f"{int(args['pods_ready_timeout_s'])}s",
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": int(args["requeue_backoff_base_s"]),
                "backoffMaxSeconds": int(args["requeue_backoff_max_s"]),
            },
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }


#: The annotation of Kueue's manager pods when the stack uses the ProvisioningRequest check (:func:`chart_values`):
#: the CRD's release file, so a change of it restarts Kueue too.
PROVISIONING_ANNOTATION = "eks-training/provisioning-request-crd"
PROVISIONING_CRD_URL = MANIFESTS["provisioning-request-crd"].url


def chart_values(args: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Helm values: the Configuration, the release's image (pinned by digest; its tag is the chart's version), the
    controller on the system nodes (with Topologies: the topology-aware scheduling gate on, :func:`feature_gates`)."""
    image = chart_image_values(KUEUE_IMAGE)
    if not image["tag"].startswith(f"v{version}@"):
        raise ValueError(
            f"the Kueue image {KUEUE_IMAGE} is not the chart {version}'s release (components/catalog/charts.py)"
        )
    values: dict[str, Any] = {
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_configuration(args), sort_keys=False)},
        "controllerManager": {
            "manager": {"image": {**image, "pullPolicy": "IfNotPresent"}},
            "nodeSelector": dict(args["node_selector"]),
        },
    }
    gates = feature_gates(args)
    if gates:
        values["controllerManager"]["featureGates"] = [{"name": n, "enabled": v} for n, v in gates.items()]
    if args.get("provisioning"):
        # Kueue starts its ProvisioningRequest controller only if the CRD exists when it starts (cmd/kueue/main.go,
        # v0.19.1), and without the controller the check never turns Active and every ClusterQueue naming it is
        # inactive. The annotation changes the manager's pod template when the check appears on a running stack,
        # so Kueue restarts after the CRD (a dependency of the release) is applied.
        values["controllerManager"]["manager"]["podAnnotations"] = {PROVISIONING_ANNOTATION: PROVISIONING_CRD_URL}
    return values


def resource_flavor(flavor: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(flavor["node_labels"])}
    if flavor["node_taints"]:
        spec["nodeTaints"] = [dict(t) for t in flavor["node_taints"]]
    if flavor.get("topology_name"):
        spec["topologyName"] = flavor["topology_name"]
    return spec


#: Within a ClusterQueue, a pending workload preempts admitted ones of lower priority (a job outranks the jobs that
#: wait for it, so it takes back the nodes such a job holds).
WITHIN_CLUSTER_QUEUE = "LowerPriority"
#: Across the cohort (teams): a queue whose nominal quota is lent to (used by) another queue's workloads takes it back
#: by preempting them whatever their priority; a workload that must borrow preempts nothing to do so.
RECLAIM_WITHIN_COHORT = "Any"
BORROW_WITHIN_COHORT = "Never"
#: The label every namespace carries with its own name, set by the API server
#: (https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def queue_spec(
    args: Mapping[str, Any],
    quota: Mapping[str, Mapping[str, str]],
    *,
    cohort: Optional[str] = None,
    namespace: Optional[str] = None,
    may_borrow: bool = True,
    may_lend: bool = True,
) -> dict[str, Any]:
    """A ClusterQueue: one resource group covering every resource, a flavor per node group (a pod set gets the flavor
    whose node labels its node selector agrees with and whose taints it tolerates) with ``quota``. In a ``cohort``:
    the queue admits workloads of ``namespace`` only, may borrow the cohort's idle quota and lend its own unless told
    otherwise (``borrowingLimit``/``lendingLimit`` 0), and reclaims what it lent (:data:`RECLAIM_WITHIN_COHORT`)."""

    def resource(f: str, r: str) -> dict[str, Any]:
        out: dict[str, Any] = {"name": r, "nominalQuota": quota[f][r]}
        if cohort and not may_borrow:
            out["borrowingLimit"] = "0"
        if cohort and not may_lend:
            out["lendingLimit"] = "0"
        return out

    spec: dict[str, Any] = {}
    if cohort:
        spec["cohortName"] = cohort
    spec.update(
        {
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}} if cohort and namespace else {},
            "queueingStrategy": args["queueing_strategy"],
            "resourceGroups": [
                {
                    "coveredResources": list(args["resources"]),
                    "flavors": [
                        {"name": f["name"], "resources": [resource(f["name"], r) for r in args["resources"]]}
                        for f in args["flavors"]
                    ],
                }
            ],
            "preemption": {"withinClusterQueue": WITHIN_CLUSTER_QUEUE, "reclaimWithinCohort": "Never"},
        }
    )
    if cohort:
        spec["preemption"] = {
            "withinClusterQueue": WITHIN_CLUSTER_QUEUE,
            "reclaimWithinCohort": RECLAIM_WITHIN_COHORT,
            "borrowWithinCohort": {"policy": BORROW_WITHIN_COHORT},
        }
    provisioning = args.get("provisioning")
    if provisioning:
        spec["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": provisioning["check"], "onFlavors": list(provisioning["flavors"])}]
        }
    return spec


def cluster_queue_spec(args: Mapping[str, Any]) -> dict[str, Any]:
    """The stack's own ClusterQueue (with teams: in the cohort, its quota the fleet less the teams')."""
    quota = args.get("own_quota") or {f["name"]: f["quota"] for f in args["flavors"]}
    return queue_spec(args, quota, cohort=args.get("cohort"), namespace=args.get("namespace_name"))


def team_queue_spec(args: Mapping[str, Any], team: Mapping[str, Any]) -> dict[str, Any]:
    return queue_spec(
        args,
        team["quota"],
        cohort=args["cohort"],
        namespace=team["namespace_name"],
        may_borrow=team["may_borrow"],
        may_lend=team["may_lend"],
    )


@dataclass(frozen=True)
class _Specs:
    """Every object's spec, built from the arguments before any resource exists (a bad argument fails here)."""

    values: dict[str, Any]
    """The chart's values."""
    topologies: list[tuple[str, dict[str, Any]]]
    """Topology name -> spec, in the arguments' order."""
    provisioning: Optional[tuple[dict[str, Any], dict[str, Any]]]
    """The ProvisioningRequestConfig's and the AdmissionCheck's specs, with the check."""
    flavors: list[tuple[str, dict[str, Any]]]
    """ResourceFlavor name -> spec, in the arguments' order."""
    cluster_queue: dict[str, Any]
    """The stack's ClusterQueue."""
    teams: list[tuple[TeamQueue, dict[str, Any]]]
    """Each team with its ClusterQueue's spec."""


def _specs(args: AdmissionArgs, chart_version: str) -> _Specs:
    """The chart's values and the spec of every Kueue object the stack registers."""
    provisioning = args.get("provisioning")
    return _Specs(
        values=chart_values(args, chart_version),
        topologies=[(t["name"], topology_spec(t)) for t in args.get("topologies") or []],
        provisioning=(
            (provisioning_config_spec(provisioning), admission_check_spec(provisioning)) if provisioning else None
        ),
        flavors=[(f["name"], resource_flavor(f)) for f in args["flavors"]],
        cluster_queue=cluster_queue_spec(args),
        teams=[(team, team_queue_spec(args, team)) for team in args.get("teams") or []],
    )


#: Kueue's queueing strategies (``QueueingStrategy``, apis/kueue/v1beta2/clusterqueue_types.go at v0.19.1).
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")


def _name_problems(args: Mapping[str, Any]) -> list[str]:
    """The objects' names the API server would refuse, and taint effects a ResourceFlavor does not take."""
    names = [("local_queue", args["local_queue"]), ("cluster_queue", args["cluster_queue"])]
    names += [(f"flavors[{i}].name", f["name"]) for i, f in enumerate(args["flavors"])]
    names += [(f"priorities[{p!r}]", p) for p in args["priorities"]]
    names += [(f"topologies[{i}].name", t["name"]) for i, t in enumerate(args.get("topologies") or [])]
    for i, t in enumerate(args.get("teams") or []):
        names += [(f"teams[{i}].local_queue", t["local_queue"]), (f"teams[{i}].cluster_queue", t["cluster_queue"])]
    found = [
        f"{key}: {name!r} is not a Kubernetes object name; use lowercase letters, digits, '-' and '.'"
        for key, name in names
        if not (isinstance(name, str) and len(name) <= 253 and DNS_SUBDOMAIN_RE.match(name))
    ]
    for i, f in enumerate(args["flavors"]):
        for j, taint in enumerate(f["node_taints"]):
            if taint.get("effect") not in TAINT_EFFECTS:
                found.append(
                    f"flavors[{i}].node_taints[{j}].effect: {taint.get('effect')!r}; use one of "
                    f"{', '.join(TAINT_EFFECTS)} (Kubernetes' spelling)"
                )
    return found


def admission_problems(args: Mapping[str, Any]) -> list[str]:
    """What Kueue would refuse or never admit, each as ``<key>: <problem>; <fix>``: names that do not match (a quota
    without a resource, a topology or check flavor that does not exist), names and taint effects the API server
    refuses, a strategy Kueue does not know, an empty flavor list, team keys without a cohort."""
    found = _name_problems(args)
    resources = list(args["resources"])
    flavors = [f["name"] for f in args["flavors"]]
    if not flavors:
        found.append("flavors: empty; give a flavor per node group the jobs run on")
    if not resources:
        found.append('resources: empty; name the resources the queue counts, such as ["cpu", "memory"]')
    for dup in sorted({f for f in flavors if flavors.count(f) > 1}):
        found.append(f"flavors: {dup!r} twice; give each flavor its own name")
    if args["queueing_strategy"] not in QUEUEING_STRATEGIES:
        found.append(f"queueing_strategy: {args['queueing_strategy']!r}; use {' or '.join(QUEUEING_STRATEGIES)}")
    for key in ("pods_ready_timeout_s", "requeue_backoff_base_s", "requeue_backoff_max_s"):
        if args[key] <= 0:
            found.append(f"{key}: {args[key]}; give a number of seconds above 0")
    topologies = {t["name"] for t in args.get("topologies") or []}

    def quota_problems(path: str, quota: Mapping[str, Any]) -> list[str]:
        out = []
        if missing := [r for r in resources if r not in quota]:
            out.append(f"{path}: no quota of {', '.join(missing)}; give one of every resource")
        if extra := [r for r in quota if r not in resources]:
            out.append(f"{path}: {', '.join(extra)} not among resources; add it to resources or remove it")
        return out

    for i, f in enumerate(args["flavors"]):
        found += quota_problems(f"flavors[{i}].quota", f["quota"])
        if f.get("topology_name") and f["topology_name"] not in topologies:
            found.append(f"flavors[{i}].topology_name: {f['topology_name']!r} is not in topologies; add it there")
    provisioning = args.get("provisioning")
    for f in (provisioning or {}).get("flavors", []):
        if f not in flavors:
            found.append(f"provisioning.flavors: {f!r} is not a flavor; name one of {', '.join(flavors)}")
    cohort_keys = [k for k in ("own_quota", "namespace_name", "teams") if args.get(k)]
    if cohort_keys and not args.get("cohort"):
        found.append(f"{', '.join(cohort_keys)}: given without cohort; set cohort (the teams' queues share it)")
    for i, team in enumerate(args.get("teams") or []):
        for flavor in flavors:
            if flavor not in team["quota"]:
                found.append(f"teams[{i}].quota: no quota on flavor {flavor!r}; give one (\"0\" for none)")
            else:
                found += quota_problems(f"teams[{i}].quota[{flavor!r}]", team["quota"][flavor])
    queues = [args["cluster_queue"], *(t["cluster_queue"] for t in args.get("teams") or [])]
    for dup in sorted({q for q in queues if queues.count(q) > 1}):
        found.append(f"teams: cluster queue {dup!r} twice; give each team its own")
    return found


class Admission(pulumi.ComponentResource):
    """Kueue and the queues jobs wait in: a job labelled with :attr:`queue_name` starts once its whole pod set fits.
    Needs a ``kubernetes`` provider in ``opts``."""

    queue_name: pulumi.Output[str]
    """The LocalQueue's name; resolves once it and the WorkloadPriorityClasses exist (jobs are created after it)."""
    flavor_specs: dict[str, pulumi.Output[Any]]
    """Each ResourceFlavor's ``spec`` as the provider reports it after this update, by name: what the cluster holds
    (a flavor the update left out, as with ``--target``, keeps the spec it had); each resolves once it is applied."""
    team_queue_names: dict[str, pulumi.Output[str]]
    """Team ClusterQueue -> its LocalQueue's name, once the queues exist."""

    @checks_args
    def __init__(self, name: str, args: AdmissionArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        problems = admission_problems(args)
        if problems:
            raise ValueError("; ".join(f"Admission({name!r}).args.{p}" for p in problems))
        super().__init__("eks-training:index:Admission", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        chart = HELM_CHARTS["kueue"]
        specs = _specs(args, chart.version)
        # a component's depends_on does not reach its children; the values carry the resources of ``after``
        release = pinned_release(
            self,
            name,
            chart,
            release_name="kueue",
            namespace=KUEUE_NAMESPACE,
            values=ordered_after(pulumi.Output.from_input(specs.values), *(args.get("after") or [])),
            create_namespace=True,
        )
        topologies = self._topologies(name, specs, release)
        if specs.provisioning:
            self._provisioning_check(name, args["provisioning"], specs.provisioning, release)
        flavors = self._flavors(name, specs, release, topologies)
        # the SDK makes an output of each registered property (CustomResource types none)
        self.flavor_specs = {n: f.spec for (n, _), f in zip(specs.flavors, flavors)}  # type: ignore[attr-defined]
        priorities = self._priorities(name, args, release)
        # The queues need Kueue's webhooks (the release) and nothing of each other: a ClusterQueue whose flavors or
        # admission checks do not exist yet is created inactive (FlavorNotFound, AdmissionCheckNotFound) and a
        # LocalQueue whose ClusterQueue does not exist yet is accepted; their workloads wait and are admitted once all
        # exist (https://kueue.sigs.k8s.io/docs/tasks/troubleshooting/troubleshooting_queues/). They are created side
        # by side, and on destroy Kueue's resource-in-use finalizers hold a flavor until no ClusterQueue names it.
        # The jobs wait for their LocalQueue and the priority classes they name (a Workload is built only once its
        # WorkloadPriorityClass exists): the queue's name resolves once both exist.
        lq = self._queues(
            name, "", specs.cluster_queue, args["cluster_queue"], args["local_queue"], args["namespace"], release
        )
        self.queue_name = pulumi.Output.all(lq.id, *[p.id for p in priorities]).apply(lambda _: args["local_queue"])
        team_queues: dict[str, pulumi.Output[str]] = {}
        for team, spec in specs.teams:
            cq = team["cluster_queue"]
            tlq = self._queues(name, f"-{cq}", spec, cq, team["local_queue"], team["namespace"], release)
            team_queues[team["cluster_queue"]] = pulumi.Output.all(
                team["local_queue"], tlq.id, *[p.id for p in priorities]
            ).apply(lambda v: str(v[0]))
        self.team_queue_names = team_queues
        self.register_outputs(
            {"queue_name": self.queue_name, "flavor_specs": self.flavor_specs, "team_queue_names": team_queues}
        )

    def _topologies(
        self, name: str, specs: _Specs, release: k8s.helm.v3.Release
    ) -> list[k8s.apiextensions.CustomResource]:
        """The Topologies the flavors of topology-aware groups name."""
        return [
            k8s.apiextensions.CustomResource(
                f"{name}-topology-{topology}",
                api_version=KUEUE_API,
                kind="Topology",
                metadata={"name": topology},
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[release]),
            )
            for topology, spec in specs.topologies
        ]

    def _provisioning_check(
        self,
        name: str,
        provisioning: ProvisioningCheck,
        specs: tuple[dict[str, Any], dict[str, Any]],
        release: k8s.helm.v3.Release,
    ) -> None:
        """The ProvisioningRequestConfig and the AdmissionCheck that names it."""
        config_spec, check_spec = specs
        prc = k8s.apiextensions.CustomResource(
            f"{name}-provisioning-config",
            api_version=KUEUE_API,
            kind="ProvisioningRequestConfig",
            metadata={"name": provisioning["config"]},
            spec=config_spec,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[release]),
        )
        k8s.apiextensions.CustomResource(
            f"{name}-admission-check",
            api_version=KUEUE_API,
            kind="AdmissionCheck",
            metadata={"name": provisioning["check"]},
            spec=check_spec,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[release, prc]),
        )

    def _flavors(
        self,
        name: str,
        specs: _Specs,
        release: k8s.helm.v3.Release,
        topologies: list[k8s.apiextensions.CustomResource],
    ) -> list[k8s.apiextensions.CustomResource]:
        """A ResourceFlavor per node group, after the Topologies they name."""
        # a flavor naming a Topology that does not exist yet leaves its ClusterQueue inactive (TopologyNotFound)
        after = pulumi.ResourceOptions(parent=self, depends_on=[release, *topologies])
        return [
            k8s.apiextensions.CustomResource(
                f"{name}-flavor-{flavor}",
                api_version=KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": flavor},
                spec=spec,
                opts=after,
            )
            for flavor, spec in specs.flavors
        ]

    def _priorities(self, name: str, args: AdmissionArgs, release: k8s.helm.v3.Release) -> list[pulumi.CustomResource]:
        """A WorkloadPriorityClass per priority the jobs name."""
        # A WorkloadPriorityClass has its fields at the top level (no spec), which CustomResource cannot send: the
        # same registration with the object's own fields (the provider's type token for a custom kind).
        return [
            pulumi.CustomResource(
                f"kubernetes:{KUEUE_API}:WorkloadPriorityClass",
                f"{name}-priority-{p}",
                {
                    "apiVersion": KUEUE_API,
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": p},
                    "value": v,
                    "description": PRIORITY_DESCRIPTION,
                },
                # names no Topology: Kueue's webhooks (the release) are all it needs
                opts=pulumi.ResourceOptions(parent=self, depends_on=[release]),
            )
            for p, v in sorted(args["priorities"].items())
        ]

    def _queues(
        self,
        name: str,
        suffix: str,
        spec: dict[str, Any],
        cluster_queue: str,
        local_queue: str,
        namespace: pulumi.Input[str],
        release: k8s.helm.v3.Release,
    ) -> k8s.apiextensions.CustomResource:
        """A ClusterQueue and the LocalQueue that feeds it (the stack's, or a team's in its namespace)."""
        queue_opts = pulumi.ResourceOptions(parent=self, depends_on=[release])
        k8s.apiextensions.CustomResource(
            f"{name}-cluster-queue{suffix}",
            api_version=KUEUE_API,
            kind="ClusterQueue",
            metadata={"name": cluster_queue},
            spec=spec,
            opts=queue_opts,
        )
        return k8s.apiextensions.CustomResource(
            f"{name}-local-queue{suffix}",
            api_version=KUEUE_API,
            kind="LocalQueue",
            metadata={"name": local_queue, "namespace": namespace},
            spec={"clusterQueue": cluster_queue},
            opts=queue_opts,
        )


# --- topology-aware scheduling (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/) ------------------

#: Kueue's feature gate of topology-aware scheduling: beta and on by default since v0.14 (pkg/features/kube_features.go
#: at v0.19.1); set explicitly when a stack relies on it, so a chart whose default differs cannot turn it off silently.
TAS_FEATURE_GATE = "TopologyAwareScheduling"


def feature_gates(args: Mapping[str, Any]) -> dict[str, bool]:
    """The manager's feature gates the stack sets (the chart's ``controllerManager.featureGates``)."""
    return {TAS_FEATURE_GATE: True} if args.get("topologies") else {}


def topology_spec(topology: Mapping[str, Any]) -> dict[str, Any]:
    return {"levels": [{"nodeLabel": label} for label in topology["levels"]]}


# --- the ProvisioningRequest admission check ------------------------------------------------------------------------
# https://kueue.sigs.k8s.io/docs/admission-check-controllers/provisioning/


#: Kueue's controller of ProvisioningRequest admission checks (``ProvisioningRequestControllerName``,
#: apis/kueue/v1beta2/provisioningrequestconfig_types.go at v0.19.1).
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def provisioning_config_spec(provisioning: Mapping[str, Any]) -> dict[str, Any]:
    """A ``ProvisioningRequestConfig``: the autoscaler's class, no ``managedResources`` (every pod set of the workload
    is in the request: :class:`stacks.plan.queues.ProvisioningPlan`), and how Kueue retries a request that failed
    or whose booking expired before admission (``retryStrategy``)."""
    return {
        "provisioningClassName": provisioning["provisioning_class"],
        "retryStrategy": {
            "backoffLimitCount": int(provisioning["backoff_limit_count"]),
            "backoffBaseSeconds": int(provisioning["backoff_base_s"]),
            "backoffMaxSeconds": int(provisioning["backoff_max_s"]),
        },
    }


def admission_check_spec(provisioning: Mapping[str, Any]) -> dict[str, Any]:
    """The ``AdmissionCheck`` Kueue's ProvisioningRequest controller runs, naming its config."""
    return {
        "controllerName": PROVISIONING_CONTROLLER,
        "parameters": {
            "apiGroup": "kueue.x-k8s.io",
            "kind": "ProvisioningRequestConfig",
            "name": provisioning["config"],
        },
    }
