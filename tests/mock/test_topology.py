"""Topology-aware placement over what every stack registers, with Kueue v0.19.1's own rules.

Every preset (those whose GPU type carries EC2 network-topology labels scale it from zero: topology-aware by default,
through the ProvisioningRequest admission check), and each of those as a fixed-size fleet (minSize = maxSize) and
scaling from zero to twice its jobs: every Topology and topology-aware ResourceFlavor validates
against the CRDs of the pinned Kueue module (the structural schema, and the CEL rules the apiserver would apply,
restated); every flavor's ``topologyName`` names a Topology the stack registers; every queued pod set on a
topology-aware flavor asks for a level of that flavor's Topology (Kueue refuses a pod set without a topology request
on such a flavor, and one with a request on a flavor without a Topology: ``checkPodSetAndFlavorMatchForTAS``,
pkg/scheduler/flavorassigner/tas_flavorassigner.go at v0.19.1); the box's nodes of those groups carry every level's
label (``NodeMatchesFlavor``, pkg/util/tas/node.go: other nodes are not counted). The real Kueue places a 32-node job
in one block of a 256-node box in the cluster tier (tests/cluster/test_box_scale.py).
"""

import copy
import functools
import re
from types import SimpleNamespace
from typing import Any, Mapping

import jsonschema
import pytest

from components.admission import TAS_FEATURE_GATE
from components.catalog import (
    CLUSTER_AUTOSCALER,
    INSTANCE_TYPES,
    NETWORK_TOPOLOGY,
    chart_image_values,
    network_topology,
)
from stacks.box.kueue import crds, kueue_dir
from stacks.box.nodes import BLOCK_NODES, network_labels, plan_nodes
from stacks.config import ConfigError
from stacks.plan.queues import HOSTNAME_LABEL, QUEUE_LABEL, TAS_ANNOTATIONS, TOPOLOGY_ANNOTATION
from stacks.stackfile import plan_stack
from tests.harness import JOB_OBJECT_TYPES, PROJECT, run_program, stack_config, stack_names
from tests.mock.test_admission import _flavor_fits, _pod_sets

PRESETS = stack_names()
#: The presets whose GPU group's type carries the labels, as fixed-size fleets (the group at its maxSize).
FLEETS = [
    s
    for s in PRESETS
    if any(
        t in NETWORK_TOPOLOGY
        for g in (stack_config(s).get(f"{PROJECT}:nodeGroups") or {}).values()
        for t in g["instanceTypes"]
    )
]


def fleet_config(stack: str) -> dict[str, Any]:
    cfg = copy.deepcopy(stack_config(stack))
    for g in cfg[f"{PROJECT}:nodeGroups"].values():
        g.update(minSize=g["maxSize"], desiredSize=g["maxSize"])
    return cfg


def scaled_config(stack: str) -> dict[str, Any]:
    """``stack`` with its GPU group autoscaling from zero to twice its jobs' size and ``topology: true`` set (as the
    default is): topology-aware placement through the ProvisioningRequest admission check, with room for two jobs."""
    cfg = copy.deepcopy(stack_config(stack))
    gpu = cfg[f"{PROJECT}:nodeGroups"]["gpu"]
    jobs = [j for j in cfg[f"{PROJECT}:jobs"].values() if j.get("nodeGroup") == "gpu"]
    size = max(j.get("nodes", 1) for j in jobs)
    gpu.update(minSize=0, maxSize=2 * size, topology=True)
    for j in jobs:
        j["maxNodes"] = j.get("nodes", 1)
    return cfg


class _Programs(dict):
    """``programs[name]``: a preset's program (evaluated once per session), or ``<preset>-fleet``'s, on first use."""

    def __missing__(self, name: str) -> Any:
        stack = name.removesuffix("-fleet").removesuffix("-scaled")
        if name == stack:
            p = run_program(stack)
        else:
            p = run_program(stack, config=config_of(name))
        assert p.error is None, (name, p.error)
        self[name] = p
        return p


@pytest.fixture(scope="module")
def programs() -> dict[str, Any]:
    return _Programs()


def _kueue(program, kind: str) -> list[dict[str, Any]]:
    return [
        r.inputs
        for r in program.registrations
        if r.type.startswith("kubernetes:kueue.x-k8s.io/") and r.inputs["kind"] == kind
    ]


@functools.cache  # the pinned module's CRDs (read only here), parsed once per worker
def _schema(kind_plural: str) -> dict[str, Any]:
    crd = next(c for c in crds() if c["metadata"]["name"] == f"{kind_plural}.kueue.x-k8s.io")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2" and v["served"])
    return _python_patterns(copy.deepcopy(version["schema"]["openAPIV3Schema"]))


def _python_patterns(schema: Any) -> Any:
    """The schema with Go's leading inline flags (``^(?i)...``, RE2 accepts them anywhere) where Python's ``re``
    needs them (first)."""
    if isinstance(schema, dict):
        for k, v in schema.items():
            if k == "pattern" and isinstance(v, str) and v.startswith("^(?i)"):
                schema[k] = "(?i)^" + v[len("^(?i)") :]
            else:
                _python_patterns(v)
    elif isinstance(schema, list):
        for v in schema:
            _python_patterns(v)
    return schema


@functools.cache
def _validator(kind_plural: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(_schema(kind_plural))


def _unknown_fields(schema: Mapping[str, Any], obj: Any, path: str = "") -> list[str]:
    """Paths of ``obj`` the structural schema does not declare (the apiserver prunes them, or refuses them strictly)."""
    out = []
    if isinstance(obj, dict):
        props = schema.get("properties")
        if props is None:
            return (
                [] if schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema else [path]
            )
        for k, v in obj.items():
            out += [f"{path}.{k}"] if k not in props else _unknown_fields(props[k], v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _unknown_fields(schema.get("items") or {}, v, f"{path}[{i}]")
    return out


def crd_problems(doc: Mapping[str, Any]) -> list[str]:
    """What kueue v0.19.1's v1beta2 CRD would refuse in a Topology or ResourceFlavor: its OpenAPI schema (types,
    patterns, lengths, item counts, required fields; unknown fields), and its CEL rules (``x-kubernetes-validations``,
    the rules that apply on create), restated: a Topology's levels are unique and ``kubernetes.io/hostname`` only the
    last; a ResourceFlavor with ``topologyName`` has at least one node label."""
    plural = {
        "Topology": "topologies",
        "ResourceFlavor": "resourceflavors",
        "ProvisioningRequestConfig": "provisioningrequestconfigs",
        "AdmissionCheck": "admissionchecks",
        "ClusterQueue": "clusterqueues",
    }[doc["kind"]]
    schema = _schema(plural)
    problems = [
        f"{doc['metadata']['name']}: {e.message} at {list(e.absolute_path)}"
        for e in _validator(plural).iter_errors(dict(doc))
    ]
    problems += [
        f"{doc['metadata']['name']}: unknown field {p}"
        for p in _unknown_fields(schema, dict(doc))
        if not p.startswith(".metadata")
    ]
    spec = doc["spec"]
    if doc["kind"] == "Topology":
        labels = [lv["nodeLabel"] for lv in spec["levels"]]
        if len(set(labels)) != len(labels):
            problems.append(f"{doc['metadata']['name']}: levels must be unique")
        if HOSTNAME_LABEL in labels and labels[-1] != HOSTNAME_LABEL:
            problems.append(f"{doc['metadata']['name']}: {HOSTNAME_LABEL} only at the lowest level")
    elif doc["kind"] == "ResourceFlavor" and spec.get("topologyName") and not spec.get("nodeLabels"):
        problems.append(f"{doc['metadata']['name']}: at least one nodeLabel is required when topology is set")
    elif doc["kind"] == "ClusterQueue" and not spec.get("cohortName"):
        # the ClusterQueue spec's CEL rule: 'borrowingLimit must be nil when cohort is empty'
        for rg in spec.get("resourceGroups") or []:
            for f in rg["flavors"]:
                if any("borrowingLimit" in r for r in f["resources"]):
                    problems.append(f"{doc['metadata']['name']}: borrowingLimit must be nil when cohort is empty")
    return problems


def tas_problems(program) -> list[str]:
    """Kueue's topology rules over one program's registrations (see the module docstring)."""
    problems = []
    topologies = {
        t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]] for t in _kueue(program, "Topology")
    }
    flavors = _kueue(program, "ResourceFlavor")
    for doc in [
        *_kueue(program, "Topology"),
        *[f for f in flavors if f["spec"].get("topologyName")],
        *_kueue(program, "ProvisioningRequestConfig"),
        *_kueue(program, "AdmissionCheck"),
        *_kueue(program, "ClusterQueue"),
    ]:
        problems += crd_problems(doc)
    named = {f["spec"]["topologyName"] for f in flavors if f["spec"].get("topologyName")}
    problems += [
        f"ResourceFlavor names Topology {t}, which the stack does not register" for t in named - set(topologies)
    ]
    problems += [f"Topology {t} is named by no ResourceFlavor" for t in set(topologies) - named]
    for r in program.registrations:
        if r.type not in JOB_OBJECT_TYPES:
            continue
        if QUEUE_LABEL not in (r.inputs["metadata"].get("labels") or {}):
            continue
        templates = (
            [r.inputs["spec"]["template"]]
            if r.inputs["kind"] == "Job"
            else [x["template"] for x in r.inputs["spec"]["mpiReplicaSpecs"].values()]
        )
        for (pod_set, _, pod), template in zip(_pod_sets(r.inputs["kind"], r.inputs), templates):
            where = f"{r.inputs['metadata']['name']}/{pod_set}"
            (flavor,) = [f for f in flavors if _flavor_fits(pod, f)]
            asks = {
                k: v
                for k, v in ((template.get("metadata") or {}).get("annotations") or {}).items()
                if k in TAS_ANNOTATIONS
            }
            topology = flavor["spec"].get("topologyName")
            if topology is None:
                if asks:
                    problems.append(
                        f"{where}: asks {asks} on flavor {flavor['metadata']['name']}, which has no "
                        f"Topology: Kueue would never admit it"
                    )
                continue
            if len(asks) != 1:
                problems.append(
                    f"{where}: on topology-aware flavor {flavor['metadata']['name']} the pod set must ask "
                    f"for one topology level (it asks {asks}): Kueue would never admit it"
                )
                continue
            ((annotation, level),) = asks.items()
            levels = topologies.get(topology, [])
            if annotation != "kueue.x-k8s.io/podset-unconstrained-topology" and level not in levels:
                problems.append(f"{where}: {annotation}={level} is no level of Topology {topology} {levels}")
    return problems


@pytest.mark.parametrize("stack", [*PRESETS, *(f"{s}-fleet" for s in FLEETS), *(f"{s}-scaled" for s in FLEETS)])
def test_kueues_topology_rules_hold_for_every_stack(programs, stack: str) -> None:
    assert not tas_problems(programs[stack]), tas_problems(programs[stack])
    problems = provisioning_problems(programs[stack], config_of(stack))
    assert not problems, problems


def config_of(name: str) -> dict[str, Any]:
    """The config a program of :class:`_Programs` was evaluated with."""
    stack = name.removesuffix("-fleet").removesuffix("-scaled")
    if name == stack:
        return stack_config(stack)
    return (fleet_config if name.endswith("-fleet") else scaled_config)(stack)


def _releases(program, chart: str) -> list[Any]:
    return [
        r
        for r in program.registrations
        if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"].rpartition("/")[2] == chart
    ]


def autoscaler_content_type_problems(values: dict) -> list[str]:
    """An autoscaler that handles ProvisioningRequests must write them as JSON: a release whose ProvisioningRequest
    client inherits the global content type (protobuf) never writes a request's Accepted condition
    (kubernetes/autoscaler#8855, fixed by #9546 from 1.33 on: ``AutoscalerRelease.provisioning_requests_json``), so
    such a release runs with ``--kube-api-content-type=application/json``."""
    image = values["image"]
    (release,) = [r for r in CLUSTER_AUTOSCALER.values() if chart_image_values(r.image.ref) == image]
    if release.provisioning_requests_json or values["extraArgs"].get("kube-api-content-type") == "application/json":
        return []
    return [f"the autoscaler {release.image.ref.split('@')[0]} writes ProvisioningRequests as protobuf, which fails"]


def provisioning_problems(program, config: Mapping[str, Any]) -> list[str]:
    """What the ProvisioningRequest admission check needs on a real cluster, over one program's registrations:

    - every ClusterQueue runs it exactly on the flavors of topology-aware groups that autoscale (``onFlavors``; Kueue
      delays the topology assignment only for a flavor with a ProvisioningRequest check,
      ``HasProvRequestAdmissionCheck`` in pkg/scheduler/flavorassigner/tas_flavorassigner.go at v0.19.1: without it, a
      job on such a group waits for nodes nobody adds), and on no other flavor (a fixed group's jobs would wait for a
      request for nothing);
    - the AdmissionChecks a queue names exist, are Kueue's ProvisioningRequest controller's and name a registered
      ProvisioningRequestConfig of the autoscaler's best-effort-atomic class;
    - the ProvisioningRequest CRD is applied, and Kueue's release and the autoscaler's are installed after it (both
      handle requests only when it exists at their start: Kueue's ``ServerSupportsProvisioningRequest``,
      cmd/kueue/main.go); the autoscaler runs with ``--enable-provisioning-requests`` and is granted what it reads and
      writes (:data:`components.autoscaler.PROVISIONING_REQUEST_RULES`, by a ClusterRole bound to its service account,
      which its release waits for);
    - none of it without such a flavor."""
    from components.admission import PROVISIONING_ANNOTATION, PROVISIONING_CONTROLLER
    from components.autoscaler import NAMESPACE, PROVISIONING_REQUEST_RULES, SERVICE_ACCOUNT
    from components.catalog import MANIFESTS
    from stacks.plan.queues import PROVISIONING_CLASS

    problems = []
    groups = config.get(f"{PROJECT}:nodeGroups") or {}
    autoscaler = _releases(program, "cluster-autoscaler")
    flavors = {f["metadata"]["name"]: f for f in _kueue(program, "ResourceFlavor")}
    scaled = {
        name
        for name, f in flavors.items()
        if f["spec"].get("topologyName")
        and name in groups
        and groups[name].get("minSize", 0) < groups[name]["maxSize"]
        and autoscaler
    }
    checks = {c["metadata"]["name"]: c for c in _kueue(program, "AdmissionCheck")}
    configs = {c["metadata"]["name"]: c for c in _kueue(program, "ProvisioningRequestConfig")}
    for cq in _kueue(program, "ClusterQueue"):
        rules = (cq["spec"].get("admissionChecksStrategy") or {}).get("admissionChecks") or []
        on = {f for r in rules for f in r.get("onFlavors") or []}
        if any(not r.get("onFlavors") for r in rules):
            problems.append(f"ClusterQueue {cq['metadata']['name']}: a check without onFlavors runs on every flavor")
        if on != scaled:
            problems.append(
                f"ClusterQueue {cq['metadata']['name']}: the check runs on {sorted(on)}, the autoscaled "
                f"topology-aware flavors are {sorted(scaled)}"
            )
        for r in rules:
            check = checks.get(r["name"])
            if check is None:
                problems.append(f"ClusterQueue {cq['metadata']['name']}: AdmissionCheck {r['name']} is not registered")
                continue
            params = check["spec"].get("parameters") or {}
            prc = configs.get(params.get("name", ""))
            if check["spec"]["controllerName"] != PROVISIONING_CONTROLLER or params.get("kind") != (
                "ProvisioningRequestConfig"
            ):
                problems.append(f"AdmissionCheck {r['name']}: not Kueue's ProvisioningRequest controller's")
            elif prc is None:
                problems.append(f"AdmissionCheck {r['name']}: ProvisioningRequestConfig {params.get('name')} missing")
            elif prc["spec"]["provisioningClassName"] != PROVISIONING_CLASS:
                problems.append(f"ProvisioningRequestConfig {prc['metadata']['name']}: not {PROVISIONING_CLASS}")
    crd = [
        r
        for r in program.registrations
        if r.type == "kubernetes:yaml/v2:ConfigFile" and r.inputs["file"] == MANIFESTS["provisioning-request-crd"].url
    ]
    if not scaled:
        if crd or checks or configs:
            problems.append("the ProvisioningRequest CRD or admission check is registered with no flavor needing it")
        for r in autoscaler:
            if "enable-provisioning-requests" in r.inputs["values"]["extraArgs"]:
                problems.append("the autoscaler handles ProvisioningRequests with no flavor needing it")
        return problems
    if len(crd) != 1:
        return problems + ["the ProvisioningRequest CRD is not registered (once)"]
    (kueue,) = _releases(program, "kueue")
    for name, release in [("Kueue", kueue), *(("the cluster autoscaler", r) for r in autoscaler)]:
        if crd[0].urn not in release.dependencies:
            problems.append(f"{name}'s release does not wait for the ProvisioningRequest CRD")
    # on a running stack the release's values must change the manager's pod template, or Kueue keeps running
    # without its ProvisioningRequest controller (started only if the CRD exists at its start)
    manager = kueue.inputs["values"]["controllerManager"]["manager"]
    if (manager.get("podAnnotations") or {}).get(PROVISIONING_ANNOTATION) != MANIFESTS["provisioning-request-crd"].url:
        problems.append("Kueue's manager pods are not restarted when the check and its CRD appear")
    for r in autoscaler:
        values = r.inputs["values"]
        if values["extraArgs"].get("enable-provisioning-requests") != "true":
            problems.append("the autoscaler runs without --enable-provisioning-requests")
        problems.extend(autoscaler_content_type_problems(values))
        # what the autoscaler's service account is granted beyond its chart's ClusterRole: the ClusterRoles bound to
        # it (the pinned charts' own roles lack these rules before 9.57.0, and 9.46.6 renders no extra rules)
        bindings = [
            b
            for b in program.registrations
            if b.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
            and {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE} in b.inputs["subjects"]
        ]
        bound = {b.inputs["roleRef"]["name"] for b in bindings}
        granted = [
            rule
            for role in program.registrations
            if role.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
            and role.inputs["metadata"]["name"] in bound
            for rule in role.inputs["rules"]
        ]
        if not any(b.urn in r.dependencies for b in bindings):
            problems.append("the autoscaler's release does not wait for its ProvisioningRequest permissions")
        for rule in PROVISIONING_REQUEST_RULES:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        if not any(
                            group in g["apiGroups"] and resource in g["resources"] and verb in g["verbs"]
                            for g in granted
                        ):
                            problems.append(f"the autoscaler may not {verb} {resource} ({group or 'core'})")
    return problems


def test_the_efa_fleets_are_topology_aware_and_ask_for_the_lowest_network_layer(programs) -> None:
    """p4d, p5, p5en and p6-b200 as fixed-size fleets: a Topology of their network layers down to the node, the GPU
    flavor naming it, every GPU pod set preferring one lowest-layer network node; the chart turns TAS on."""
    assert set(FLEETS) >= {"p4d", "p5", "p5en", "p6-b200"}, FLEETS
    for stack in FLEETS:
        program = programs[f"{stack}-fleet"]
        (topology,) = _kueue(program, "Topology")
        network = NETWORK_TOPOLOGY[stack_config(stack)[f"{PROJECT}:nodeGroups"]["gpu"]["instanceTypes"][0]]
        assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == [*network.labels, HOSTNAME_LABEL]
        gpu = next(f for f in _kueue(program, "ResourceFlavor") if f["metadata"]["name"] == "gpu")
        assert gpu["spec"]["topologyName"] == topology["metadata"]["name"]
        asked = [
            ((t.get("metadata") or {}).get("annotations") or {}).get(TOPOLOGY_ANNOTATION)
            for r in program.registrations
            if r.type in JOB_OBJECT_TYPES
            for t in (
                [r.inputs["spec"]["template"]]
                if r.inputs["kind"] == "Job"
                else [x["template"] for x in r.inputs["spec"]["mpiReplicaSpecs"].values()]
            )
            if (t["spec"].get("nodeSelector") or {}).get("eks-training/role") == "gpu"
        ]
        assert asked and set(asked) == {network.labels[-1]}, (stack, asked)
        release = next(
            r
            for r in program.registrations
            if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"].endswith("/kueue")
        )
        assert {"name": TAS_FEATURE_GATE, "enabled": True} in release.inputs["values"]["controllerManager"][
            "featureGates"
        ]
        # the presets themselves scale their GPU groups from zero to the size of their jobs: topology-aware by
        # default there too, through the ProvisioningRequest check (test_autoscaled_topology_groups_carry_...)
        assert _kueue(programs[stack], "Topology") == [topology], stack


def test_autoscaled_topology_groups_carry_the_provisioning_request_check(programs) -> None:
    """The EFA presets as shipped (GPU groups scaling from zero to their jobs' size, no ``topology`` set) and scaling
    from zero to twice their jobs: the GPU flavor is topology-aware and every ClusterQueue runs the ProvisioningRequest
    check on it (and on nothing else); the CRD comes first; the autoscaler handles the requests. The class, the retry
    strategy and the check's controller are Kueue's and the autoscaler's names."""
    from components.admission import PROVISIONING_CONTROLLER
    from stacks.plan.queues import PROVISIONING_CLASS, PROVISIONING_RETRY_LIMIT

    for stack in [*FLEETS, *(f"{s}-scaled" for s in FLEETS)]:
        program = programs[stack]
        gpu = next(f for f in _kueue(program, "ResourceFlavor") if f["metadata"]["name"] == "gpu")
        assert gpu["spec"]["topologyName"], stack
        (cq,) = _kueue(program, "ClusterQueue")
        assert cq["spec"]["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": "cluster-autoscaler", "onFlavors": ["gpu"]}]
        }, stack
        (check,) = _kueue(program, "AdmissionCheck")
        assert check["spec"]["controllerName"] == PROVISIONING_CONTROLLER
        (prc,) = _kueue(program, "ProvisioningRequestConfig")
        assert prc["spec"] == {
            "provisioningClassName": PROVISIONING_CLASS,
            "retryStrategy": {
                "backoffLimitCount": PROVISIONING_RETRY_LIMIT,
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 600,
            },
        }
        assert PROVISIONING_RETRY_LIMIT == 2**31 - 1  # the CRD's int32 maximum


def test_the_provisioning_rules_catch_each_broken_registration(programs) -> None:
    """Each rule of provisioning_problems fails when its bug is put back."""
    program = programs["p5-scaled"]
    config = config_of("p5-scaled")
    assert not provisioning_problems(program, config)

    def broken(change) -> list[str]:
        regs = [
            SimpleNamespace(type=r.type, urn=r.urn, inputs=copy.deepcopy(r.inputs), dependencies=list(r.dependencies))
            for r in program.registrations
        ]
        change(regs)
        return provisioning_problems(SimpleNamespace(registrations=regs), config)

    def kind(regs, k):
        return next(r for r in regs if r.type.startswith("kubernetes:kueue.x-k8s.io/") and r.inputs["kind"] == k)

    def release(regs, chart):
        return next(r for r in regs if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"].endswith(chart))

    def crd_urn(regs):
        return next(r.urn for r in regs if r.type == "kubernetes:yaml/v2:ConfigFile" and "provisioning" in r.urn)

    def no_strategy(regs):
        del kind(regs, "ClusterQueue").inputs["spec"]["admissionChecksStrategy"]

    def on_system(regs):
        kind(regs, "ClusterQueue").inputs["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"].append(
            "system"
        )

    def every_flavor(regs):
        del kind(regs, "ClusterQueue").inputs["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"]

    def other_class(regs):
        kind(regs, "ProvisioningRequestConfig").inputs["spec"]["provisioningClassName"] = (
            "check-capacity.autoscaling.x-k8s.io"
        )

    def kueue_first(regs):
        r = release(regs, "/kueue")
        r.dependencies.remove(crd_urn(regs))

    def autoscaler_first(regs):
        r = release(regs, "cluster-autoscaler")
        r.dependencies.remove(crd_urn(regs))

    def no_flag(regs):
        del release(regs, "cluster-autoscaler").inputs["values"]["extraArgs"]["enable-provisioning-requests"]

    def no_delete(regs):
        role = next(r for r in regs if r.type.endswith(":ClusterRole") and "provisioning-requests" in r.urn)
        role.inputs["rules"] = [
            {**rule, "verbs": [v for v in rule["verbs"] if v != "delete"]} for rule in role.inputs["rules"]
        ]

    def not_restarted(regs):
        del release(regs, "/kueue").inputs["values"]["controllerManager"]["manager"]["podAnnotations"]

    def unbound(regs):
        binding = next(r for r in regs if r.type.endswith(":ClusterRoleBinding") and "provisioning-requests" in r.urn)
        binding.inputs["subjects"] = [{"kind": "ServiceAccount", "name": "other", "namespace": "kube-system"}]

    for change, fragment in [
        (no_strategy, "the check runs on [], the autoscaled topology-aware flavors are ['gpu']"),
        (on_system, "the check runs on ['gpu', 'system']"),
        (every_flavor, "a check without onFlavors runs on every flavor"),
        (other_class, "not best-effort-atomic-scale-up.autoscaling.x-k8s.io"),
        (kueue_first, "Kueue's release does not wait for the ProvisioningRequest CRD"),
        (autoscaler_first, "the cluster autoscaler's release does not wait"),
        (no_flag, "without --enable-provisioning-requests"),
        (no_delete, "may not delete provisioningrequests"),
        (unbound, "may not list provisioningrequests"),
        (not_restarted, "Kueue's manager pods are not restarted"),
    ]:
        problems = broken(change)
        assert any(fragment in p for p in problems), (change.__name__, problems)


def test_the_feature_gate_is_one_kueue_knows_and_on_by_default() -> None:
    """The gate the chart values set exists in the pinned release (an unknown gate stops the manager), beta and on."""
    text = (kueue_dir() / "pkg/features/kube_features.go").read_text()
    block = re.search(rf"\n\t{TAS_FEATURE_GATE}: {{\n(.*?)\n\t}},", text, re.S)
    assert block, f"{TAS_FEATURE_GATE} not among kueue's feature gates"
    assert "Default: true, PreRelease: featuregate.Beta" in block.group(1).splitlines()[-1], block.group(1)


def test_the_box_nodes_carry_every_level_of_their_flavors_topology() -> None:
    """What topology-aware scheduling counts (NodeMatchesFlavor): a node matching the flavor's node labels and carrying
    every level's label; blocks of BLOCK_NODES nodes share the lowest network layer."""
    _, plan = plan_stack("p5")
    nodes = [
        n
        for n in plan_nodes(plan, "us-east-1", {"gpu": 3 * BLOCK_NODES})
        if n["metadata"]["labels"].get("eks-training/role") == "gpu"
    ]
    network = network_topology("p5.48xlarge", "us-east-1")
    assert network is not None
    for i, n in enumerate(nodes):
        labels = n["metadata"]["labels"]
        assert all(lv in labels for lv in (*network.labels, HOSTNAME_LABEL)), labels
        assert labels[network.labels[-1]] == network_labels("gpu", "p5.48xlarge", "us-east-1", i)[network.labels[-1]]
    assert len({n["metadata"]["labels"][network.labels[-1]] for n in nodes}) == 3
    assert network_labels("gpu", "g5.xlarge", "us-east-1", 0) == {}
    assert network_labels("gpu", "p5.48xlarge", "ap-southeast-5", 0) == {}


def test_every_catalogued_topology_is_an_instance_type_of_the_catalog() -> None:
    for name, t in NETWORK_TOPOLOGY.items():
        assert name == t.instance_type and name in INSTANCE_TYPES and t.layers in (3, 4), name
    assert NETWORK_TOPOLOGY["p6-b200.48xlarge"].layers == 4


def test_the_rules_catch_each_broken_placement(programs) -> None:
    """Each rule fails when its bug is put back: the annotation removed, a level the Topology lacks, an annotation on
    the system group's launcher, a flavor naming no registered Topology, a hostname level not at the bottom."""
    program = programs["p5-fleet"]
    assert not tas_problems(program)

    def broken(change) -> list[str]:
        regs = [
            SimpleNamespace(type=r.type, inputs=copy.deepcopy(r.inputs))
            for r in program.registrations
            if r.type.startswith("kubernetes:kueue.x-k8s.io/") or r.type in JOB_OBJECT_TYPES
        ]
        change(regs)
        return tas_problems(SimpleNamespace(registrations=regs))

    def jobs(regs, name):
        return next(r for r in regs if r.type == "kubernetes:batch/v1:Job" and r.inputs["metadata"]["name"] == name)

    def drop(regs):
        del jobs(regs, "train").inputs["spec"]["template"]["metadata"]["annotations"][TOPOLOGY_ANNOTATION]

    def other_level(regs):
        jobs(regs, "train").inputs["spec"]["template"]["metadata"]["annotations"][TOPOLOGY_ANNOTATION] = "rack"

    def on_system(regs):
        meta = jobs(regs, "evaluate").inputs["spec"]["template"]["metadata"]
        meta.setdefault("annotations", {})[TOPOLOGY_ANNOTATION] = HOSTNAME_LABEL

    def no_topology(regs):
        regs[:] = [
            r for r in regs if not (r.type.startswith("kubernetes:kueue.x-k8s.io/") and r.inputs["kind"] == "Topology")
        ]

    def hostname_first(regs):
        t = next(r for r in regs if r.type.startswith("kubernetes:kueue.x-k8s.io/") and r.inputs["kind"] == "Topology")
        t.inputs["spec"]["levels"].insert(0, t.inputs["spec"]["levels"].pop())

    for change, fragment in [
        (drop, "must ask for one topology level"),
        (other_level, "is no level of Topology"),
        (on_system, "which has no Topology"),
        (no_topology, "which the stack does not register"),
        (hostname_first, "only at the lowest level"),
    ]:
        problems = broken(change)
        assert any(fragment in p for p in problems), (change.__name__, problems)


def _error(config: dict[str, Any]) -> ConfigError:
    p = run_program("p5", config=config, expect_error=True)
    assert isinstance(p.error, ConfigError), p.error
    assert p.registrations == []
    return p.error


def test_topology_true_where_kueue_could_never_place_the_jobs_fails_before_anything_is_registered() -> None:
    """Two ways to ask for topology-aware placement that would leave the jobs waiting for ever, each refused with
    the key and the fix: a type whose nodes carry no labels, a region where EC2 describes no topology. A job as large
    as its autoscaled group is not one of them (the pinned Kueue's second pass places it: source key
    ``kueue-second-pass-fix``; the cluster tier runs the presets' such jobs, tests/cluster/test_box_presets.py)."""
    cfg = copy.deepcopy(stack_config("p5"))
    cfg[f"{PROJECT}:nodeGroups"]["gpu"].update(instanceTypes=["g5.48xlarge"], topology=True, efa=False)
    message = str(_error(cfg))
    assert "eks-training:nodeGroups.gpu.topology" in message and "g5.48xlarge nodes carry no" in message, message

    cfg = copy.deepcopy(stack_config("p5"))
    cfg[f"{PROJECT}:nodeGroups"]["gpu"]["topology"] = True
    assert run_program("p5", config=cfg).error is None

    cfg = fleet_config("p5")
    cfg["aws:region"] = "ap-southeast-5"
    cfg[f"{PROJECT}:nodeGroups"]["gpu"].update(availabilityZone="ap-southeast-5a", topology=True)
    message = str(_error(cfg))
    assert "eks-training:nodeGroups.gpu.topology" in message and "ap-southeast-5" in message, message
    # there the default is off (the preset as shipped deploys as before)
    cfg = copy.deepcopy(stack_config("p5"))
    cfg["aws:region"] = "ap-southeast-5"
    cfg[f"{PROJECT}:nodeGroups"]["gpu"]["availabilityZone"] = "ap-southeast-5a"
    program = run_program("p5", config=cfg)
    assert program.error is None and not _kueue(program, "Topology") and not _kueue(program, "AdmissionCheck")

    cfg = fleet_config("p5")
    cfg[f"{PROJECT}:nodeGroups"]["gpu"]["topology"] = False
    program = run_program("p5", config=cfg)
    assert program.error is None and not _kueue(program, "Topology")


def test_the_plan_shows_the_topology_and_refuses_what_the_program_refuses() -> None:
    from stacks.plan.report import render, report
    from stacks.stackfile import StackLoadError

    _, plan = plan_stack("p5", edit=lambda c: c[f"{PROJECT}:nodeGroups"]["gpu"].update(minSize=2))
    text = render(report(plan, "us-east-1"))
    assert (
        "topology-aware (Topology ec2-network-3-layers: topology.k8s.aws/network-node-layer-1 > "
        "topology.k8s.aws/network-node-layer-2 > topology.k8s.aws/network-node-layer-3 > kubernetes.io/hostname): "
        "a job's pods share one topology.k8s.aws/network-node-layer-3"
    ) in text, text
    with pytest.raises(StackLoadError, match="nodeGroups.gpu.topology: EC2 describes no instance topology in "):
        plan_stack(
            "p5",
            region="ap-southeast-5",
            edit=lambda c: c[f"{PROJECT}:nodeGroups"]["gpu"].update(
                minSize=2, availabilityZone="ap-southeast-5a", topology=True
            ),
        )


def test_no_job_edit_switches_an_autoscaled_groups_topology() -> None:
    """A ResourceFlavor's topologyName cannot be changed or removed once set (Kueue v0.19.1's CRD rules), so a group's
    topology is derived from the group alone, never from its jobs or its size: p5 as shipped (a 2-node job on a group
    scaling from zero to 2), with the job at half the group, and as a fixed fleet all have the same Topology, the
    autoscaled ones through the ProvisioningRequest check; only ``topology: false`` turns it off."""
    from stacks.outputs import placement_of

    _, shipped = plan_stack("p5")
    _, half = plan_stack("p5", edit=lambda c: c[f"{PROJECT}:jobs"]["train"].update(nodes=1, maxNodes=1))
    _, fleet = plan_stack("p5", edit=lambda c: c[f"{PROJECT}:nodeGroups"]["gpu"].update(minSize=2))
    for plan in (shipped, half, fleet):
        assert placement_of(plan)["gpu"]["topology"] == "ec2-network-3-layers"
    assert shipped.admission.provisioning and shipped.admission.provisioning.flavors == ("gpu",)
    assert half.admission.provisioning == shipped.admission.provisioning
    assert fleet.admission.provisioning is None

    _, off = plan_stack("p5", edit=lambda c: c[f"{PROJECT}:nodeGroups"]["gpu"].update(topology=False))
    assert "topology" not in placement_of(off)["gpu"] and off.admission.provisioning is None


def test_a_jobs_only_stack_must_see_the_same_topology_as_the_cluster_stack() -> None:
    """A team's jobs ask for a topology level exactly when the cluster stack's flavor has a Topology (else Kueue never
    admits them): the cluster stack's nodeGroupPlacement output names the group's Topology, and a jobs-only stack whose
    own plan differs is refused naming the group."""
    from stacks.jobs_only import JobsOnlyError, team_of
    from stacks.outputs import placement_of

    _, fleet = plan_stack("p5", edit=lambda c: c[f"{PROJECT}:nodeGroups"]["gpu"].update(minSize=2))
    _, off = plan_stack("p5", edit=lambda c: c[f"{PROJECT}:nodeGroups"]["gpu"].update(minSize=2, topology=False))
    assert placement_of(fleet)["gpu"]["topology"] == "ec2-network-3-layers"
    assert "topology" not in placement_of(off)["gpu"]
    teams = {"a": {"namespace": "team-a", "nodes": {"gpu": 2}}}
    assert team_of(fleet, "org/p/cluster", "a", teams, placement_of(fleet)) == teams["a"]
    with pytest.raises(JobsOnlyError, match="eks-training:nodeGroups.gpu: differs from the referenced stack"):
        team_of(off, "org/p/cluster", "a", teams, placement_of(fleet))


@pytest.mark.parametrize("minor", sorted(CLUSTER_AUTOSCALER))
def test_the_autoscaler_of_every_minor_can_write_provisioning_requests(minor: str) -> None:
    """Whatever the cluster's minor, an autoscaler handling ProvisioningRequests writes them as JSON: the 1.32
    release (no fix for kubernetes/autoscaler#8855) runs with ``--kube-api-content-type=application/json``, the
    others need nothing (their ProvisioningRequest client talks JSON by itself); the rule fails with the flag left
    out where it is needed."""
    from components.autoscaler import cluster_autoscaler_values

    values = cluster_autoscaler_values("c", "us-east-1", minor, provisioning_request_crd="crd")
    assert autoscaler_content_type_problems(values) == []
    needs_flag = not CLUSTER_AUTOSCALER[minor].provisioning_requests_json
    assert ("kube-api-content-type" in values["extraArgs"]) == needs_flag, minor
    plain = cluster_autoscaler_values("c", "us-east-1", minor)  # no ProvisioningRequests: the default content type
    assert "kube-api-content-type" not in plain["extraArgs"]
    if needs_flag:
        del values["extraArgs"]["kube-api-content-type"]
        assert autoscaler_content_type_problems(values), minor


def test_kueues_configuration_keeps_the_pinned_charts_own_settings() -> None:
    """The Configuration the stack passes replaces the chart's whole ``controllerManagerConfigYaml``: what it keeps of
    the chart's (ports, leader election, controller concurrency, client rates) is the pinned chart's, read from its
    values.yaml at the pinned version, so a chart bump cannot leave an older release's settings behind."""
    import yaml

    from components.admission import kueue_configuration

    values = yaml.safe_load((kueue_dir() / "charts/kueue/values.yaml").read_text())
    chart = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    ours = kueue_configuration({"pods_ready_timeout_s": 1, "requeue_backoff_base_s": 1, "requeue_backoff_max_s": 1})
    for key in (
        "apiVersion",
        "kind",
        "health",
        "metrics",
        "webhook",
        "leaderElection",
        "controller",
        "clientConnection",
    ):
        assert ours[key] == chart[key], key
