"""``Admission``: Kueue (https://kueue.sigs.k8s.io) from its pinned Helm chart, with the stack's queues.

It registers the ResourceFlavors, the WorkloadPriorityClasses, one ClusterQueue and one LocalQueue. With teams it
adds a ClusterQueue per team in one cohort, and its LocalQueue (:func:`queue_spec`, Kueue v0.19's ``v1beta2`` API).
The manager's Configuration (:func:`kueue_configuration`) is one value, read by the chart and by the box
(``stacks.box.kueue``): it integrates :data:`FRAMEWORKS` and sets ``waitForPodsReady``. With ``topologies`` it adds a
Topology per set of levels and the gate (:func:`feature_gates`). With ``provisioning`` it adds the ProvisioningRequest
check (:func:`provisioning_config_spec`), after the CRD (``depends_on``).

Why: docs/explanation/admission.md ("A job starts whole or waits holding nothing", "With the cluster autoscaler",
"Topology-aware placement on the EC2 network")."""

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml
from typing_extensions import NotRequired

from components.catalog import HELM_CHARTS, MANIFESTS
from components.catalog.charts import CHART_IMAGES, chart_image_values
from components.conventions import KUEUE_NAMESPACE
from components.helm import pinned_release
from components.kubernetes_provider import warn_without_kubernetes_provider
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


class FlavorArgs(TypedDict):
    """One ResourceFlavor (a node group) and its nominal quota."""

    name: str
    node_labels: Mapping[str, str]
    node_taints: Sequence[Mapping[str, str]]
    quota: Mapping[str, str]
    """Resource -> quantity, for every resource of :attr:`AdmissionArgs.resources`."""
    topology_name: NotRequired[str]
    """The Topology (:attr:`AdmissionArgs.topologies`) of a topology-aware group: Kueue places the flavor's pod sets
    by its levels, on nodes that carry every level's label."""


class TopologyArgs(TypedDict):
    """A Kueue Topology: its levels are node labels, top first; the lowest may be ``kubernetes.io/hostname``."""

    name: str
    levels: Sequence[str]


class TeamQueueArgs(TypedDict):
    """One team's LocalQueue (in its namespace) and ClusterQueue (in the cohort)."""

    namespace: pulumi.Input[str]
    """The team's namespace (the LocalQueue is created in it, after it)."""
    namespace_name: str
    """Its name (the ClusterQueue admits workloads of that namespace only)."""
    local_queue: str
    cluster_queue: str
    quota: Mapping[str, Mapping[str, str]]
    """Flavor -> resource -> nominal quantity."""
    may_borrow: bool
    """Else ``borrowingLimit: 0`` on every resource."""
    may_lend: bool
    """Else ``lendingLimit: 0`` on every resource."""


class AdmissionArgs(TypedDict):
    """Inputs of :class:`Admission` (the stack's :class:`stacks.plan.queues.AdmissionPlan`)."""

    namespace: pulumi.Input[str]
    """The namespace of the jobs (the LocalQueue's)."""
    local_queue: str
    cluster_queue: str
    flavors: Sequence[FlavorArgs]
    resources: Sequence[str]
    priorities: Mapping[str, int]
    """WorkloadPriorityClass name -> value."""
    queueing_strategy: str
    pods_ready_timeout_s: int
    requeue_backoff_base_s: int
    requeue_backoff_max_s: int
    node_selector: Mapping[str, str]
    """Where the controller runs (the system nodes)."""
    cohort: NotRequired[str]
    """With teams: the cohort of the stack's ClusterQueue and the teams' (each reclaims its lent quota:
    ``reclaimWithinCohort: Any``), the stack's ClusterQueue then admits its namespace's workloads only."""
    own_quota: NotRequired[Mapping[str, Mapping[str, str]]]
    """With teams: flavor -> resource -> the stack's ClusterQueue's nominal quota (default: the flavors' quota)."""
    namespace_name: NotRequired[str]
    """With teams: the name of :attr:`namespace` (the stack's ClusterQueue's namespace selector)."""
    teams: NotRequired[Sequence[TeamQueueArgs]]
    depends_on: NotRequired[Sequence[pulumi.Resource]]
    """Installed after these (the MPI Operator: Kueue enables its MPIJob integration only when the CRD exists)."""
    topologies: NotRequired[Sequence[TopologyArgs]]
    """The Topologies the flavors name (topology-aware scheduling, on by default in Kueue v0.19 and enabled
    explicitly in the chart's values when there are any: :data:`TAS_FEATURE_GATE`)."""
    provisioning: NotRequired["ProvisioningArgs"]
    """The ProvisioningRequest admission check and the flavors it runs on (the ProvisioningRequest CRD must be among
    :attr:`depends_on`)."""


class ProvisioningArgs(TypedDict):
    """Kueue's ProvisioningRequest admission check (:class:`stacks.plan.queues.ProvisioningPlan`)."""

    check: str
    """The AdmissionCheck's name."""
    config: str
    """The ProvisioningRequestConfig's name."""
    provisioning_class: str
    flavors: Sequence[str]
    """The ResourceFlavors whose workloads pass the check (``onFlavors``)."""
    backoff_base_s: int
    backoff_max_s: int
    backoff_limit_count: int


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
    teams: list[tuple[TeamQueueArgs, dict[str, Any]]]
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


class Admission(pulumi.ComponentResource):
    """Kueue and the stack's queues. Needs a ``kubernetes`` provider in ``opts``."""

    queue_name: pulumi.Output[str]
    """The LocalQueue's name; resolves once it and the WorkloadPriorityClasses exist (jobs are created after it)."""
    flavor_specs: dict[str, pulumi.Output[Any]]
    """Each ResourceFlavor's ``spec`` as the provider reports it after this update, by name: what the cluster holds
    (a flavor the update left out, as with ``--target``, keeps the spec it had); each resolves once it is applied."""

    def __init__(self, name: str, args: AdmissionArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:Admission", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        chart = HELM_CHARTS["kueue"]
        specs = _specs(args, chart.version)
        release = pinned_release(
            self,
            name,
            chart,
            release_name="kueue",
            namespace=KUEUE_NAMESPACE,
            values=specs.values,
            depends_on=args.get("depends_on"),
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
        """Team ClusterQueue -> its LocalQueue's name, once the queues exist."""
        self.register_outputs({"queue_name": self.queue_name, "flavor_specs": self.flavor_specs})

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
        provisioning: "ProvisioningArgs",
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
