"""The versions each update records (``deployedVersions``) are those of what the program registers, for every
preset; the next update names what a new version of the project moves, and only that."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.catalog.amis import RELEASE_VERSION_RE
from components.catalog.charts import HELM_CHARTS, IMAGES, MANIFESTS
from components.catalog.platform import EKS_ADDONS
from stacks import last_update
from stacks.config import ConfigError, load_config
from stacks.mocked import account
from stacks.plan import build_plan
from stacks.plan.flavor_change import FLAVOR_SUFFIX
from stacks.plan.installs import EKS_DEFAULT, installed_versions, render_moves, version_moves
from stacks.plan.job_changes import BUILD_SUFFIX
from stacks.plan.nodes import RELEASE_SUFFIX
from stacks.plan.program import PROGRAM_KEY, program_digest
from stacks.plan.storage_change import FSX_RECORD
from stacks.plan.templates import TEMPLATE_SUFFIX, launch_template, template_digest
from tests.harness import JOB_OBJECT_TYPES, PROJECT, REPO, Registration, run_program, stack_config, stack_names
from tests.last_update_support import NOW, PREVIOUS, P, deployed, pinned

#: How the program registers a Kueue ResourceFlavor.
FLAVOR_TYPE = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
#: The Helm charts the record names, by the chart a release installs (the last part of its name or OCI address).
CHART_KEYS = {"kueue", "nvidia-device-plugin", "aws-efa-k8s-device-plugin", "cluster-autoscaler"}


def _camel(value: Any) -> Any:
    """A launch template's settings as the engine receives them: camelCase keys, numbers as floats, no empty field."""
    if isinstance(value, dict):
        words = lambda k: k.split("_")[0] + "".join(w.title() for w in k.split("_")[1:])  # noqa: E731
        return {words(k): _camel(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _registered_templates(program, stack: str) -> dict[str, str]:
    """Each node group's launch template as registered, checked equal to the plan's (:func:`launch_template`, less the
    ids of the security groups and placement group it names), by the record's name, with the plan's digest."""
    plan = build_plan(load_config(PROJECT, stack, stack_config(stack), project_dir=REPO))
    registered = {r.name: r.inputs for r in program.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    found = {}
    for g in plan.all_groups:
        inputs = copy.deepcopy(registered.pop(f"{plan.config.cluster_name}-{g.name}-lt"))  # the run is shared
        for nic in inputs.get("networkInterfaces") or ():
            assert len(nic.pop("securityGroups")) == 2, nic  # the cluster's and the group's EFA security group
        assert ("placement" in inputs) == (g.efa is not None and not g.capacity_reservation_id), inputs
        inputs.pop("placement", None)
        own = {k: v for k, v in inputs["tagSpecifications"][0]["tags"].items() if k != "Name"}
        assert inputs.pop("tags") == own, inputs  # the template's own tags (no new version) are its instances'
        assert inputs.pop("updateDefaultVersion") is True
        assert inputs == _camel(launch_template(plan, g)), (g.path, inputs)
        found[g.path + TEMPLATE_SUFFIX] = template_digest(plan, g)
    assert not registered, f"launch templates no group of the plan has: {sorted(registered)}"
    return found


def _registered_releases(program, stack: str) -> dict[str, str]:
    """Each node group's AMI release as EKS reports it (the node group's output), by the record's name."""
    plan = build_plan(load_config(PROJECT, stack, stack_config(stack), project_dir=REPO))
    reported = {r.name: r.outputs["releaseVersion"] for r in program.of_type("aws:eks/nodeGroup:NodeGroup")}
    found = {g.path + RELEASE_SUFFIX: reported.pop(f"{plan.config.cluster_name}-{g.name}-ng") for g in plan.all_groups}
    assert not reported, f"node groups no group of the plan has: {sorted(reported)}"
    minor = plan.config.cluster.kubernetes_version
    for name, release in found.items():  # as EKS writes it: 1.36.2-20260714
        match = RELEASE_VERSION_RE.match(release)
        assert match is not None and match.group("minor") == minor, (name, release)
    return found


def _registered_flavors(program, stack: str) -> dict[str, str]:
    """Each ResourceFlavor's Topology and node labels as registered, by the record's name: the same JSON text, with
    sorted keys, whatever order the labels were registered in."""
    plan = build_plan(load_config(PROJECT, stack, stack_config(stack), project_dir=REPO))
    paths = {f.name: f.path for f in plan.admission.flavors} if plan.admission is not None else {}
    found = {}
    for r in program.of_type(FLAVOR_TYPE):
        spec = r.inputs["spec"]
        fields = {
            "nodeLabels": spec["nodeLabels"],
            **({"topologyName": spec["topologyName"]} if "topologyName" in spec else {}),
        }
        found[paths.pop(r.inputs["metadata"]["name"]) + FLAVOR_SUFFIX] = json.dumps(
            fields, sort_keys=True, separators=(",", ":")
        )
    assert not paths, f"flavors of the plan not registered: {sorted(paths)}"
    return found


def _registered_versions(program) -> dict[str, str]:
    """What the program registers, by the record's names: each add-on's version (pinned, or resolved from EKS's
    default), each chart's version, the MPI Operator's and the ProvisioningRequest CRD's manifest, etcd's image."""
    found: dict[str, str] = {}
    for r in program.of_type("aws:eks/addon:Addon"):
        found[r.inputs["addonName"]] = r.inputs["addonVersion"]
    for r in program.of_type("kubernetes:helm.sh/v3:Release"):
        chart = r.inputs["chart"].rsplit("/", 1)[-1]
        if chart in CHART_KEYS:
            found[chart] = f"chart {r.inputs['version']}"
    files = {r.inputs.get("file") for r in program.of_type("kubernetes:yaml/v2:ConfigFile")}
    for key in ("mpi-operator", "provisioning-request-crd"):
        if MANIFESTS[key].url in files:
            found[key] = MANIFESTS[key].version
    images = {
        c["image"]
        for r in program.of_type("kubernetes:apps/v1:Deployment")
        for c in r.inputs["spec"]["template"]["spec"]["containers"]
    }
    if IMAGES["etcd"].ref in images:
        found["etcd"] = IMAGES["etcd"].ref
    for r in program.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):  # the inputs that force a new one
        i = r.inputs
        found[FSX_RECORD] = f"{i['deploymentType']} {i['storageType']}, Lustre {i['fileSystemTypeVersion']}"
    return found


#: How the program registers an image's build (components/image/build_provider.py).
IMAGE_BUILD = "pulumi-python:dynamic/eks-training:ImageBuild"


def _containers(doc: Any) -> list[dict[str, Any]]:
    """Every container and init container of the pod templates in ``doc`` (a Job's, an MPIJob's roles')."""
    if isinstance(doc, list):
        return [c for d in doc for c in _containers(d)]
    if not isinstance(doc, dict):
        return []
    own = [c for k in ("containers", "initContainers") for c in doc.get(k) or () if isinstance(c, dict)]
    return own + [c for v in doc.values() for c in _containers(v)]


def _registered_builds(program, stack: str) -> dict[str, str]:
    """The build of each image the jobs' pods run (their own containers', their helpers'; not a dataset's staging
    Job), by the record's name
    (``images.<variant>.build``): the tag of the build whose image they run, its variant the key of ``imageUris``
    that names it."""
    jobs = build_plan(load_config(PROJECT, stack, stack_config(stack), project_dir=REPO)).jobs
    variants = {uri: variant for variant, uri in program.outputs["imageUris"].items()}
    tags = {r.outputs["image_uri"]: r.inputs["image_tag"] for r in program.of_type(IMAGE_BUILD)}
    found = {}
    for r in program.registrations:
        if r.type in JOB_OBJECT_TYPES and r.inputs["metadata"]["name"] in jobs:
            for c in _containers(r.inputs["spec"]):
                if c["image"] in variants:
                    found[f"images.{variants[c['image']]}{BUILD_SUFFIX}"] = tags[c["image"]]
    return found


@pytest.mark.parametrize("stack", stack_names())
def test_every_preset_records_the_versions_of_what_it_registers(stack: str) -> None:
    program = run_program(stack)
    recorded = program.outputs.get(last_update.VERSIONS_OUTPUT)
    if stack_config(stack).get(P + "cluster", {}).get("stackReference"):
        assert recorded is None  # a jobs-only stack installs none of them
        return
    assert last_update.VERSIONS_OUTPUT not in program.secret_outputs  # `pulumi stack output` shows it
    recorded = dict(recorded)
    assert recorded.pop(PROGRAM_KEY) == program_digest()  # the program that made the update, beside what it installs
    registered = {
        **_registered_versions(program),
        **_registered_templates(program, stack),
        **_registered_releases(program, stack),
        **_registered_flavors(program, stack),
        **_registered_builds(program, stack),
    }
    assert set(recorded) == set(registered), (sorted(recorded), sorted(registered))
    for name, version in recorded.items():
        if name in EKS_ADDONS:  # a pin is registered as it is; EKS's default is resolved from the account
            assert version == EKS_DEFAULT or registered[name] == version, (name, version, registered[name])
        elif name.endswith((TEMPLATE_SUFFIX, RELEASE_SUFFIX, FLAVOR_SUFFIX, BUILD_SUFFIX)):
            assert version == registered[name], (name, version, registered[name])
        elif name == FSX_RECORD:
            assert version == registered[name], (version, registered[name])
        elif name == "etcd":
            tag, _, digest = registered[name].partition("@")
            assert version == f"{tag.rsplit(':', 1)[1]}@{digest[:19]}", (version, registered[name])
        else:
            assert version.startswith(registered[name]), (name, version, registered[name])
    assert not (set(HELM_CHARTS) - CHART_KEYS), "a chart the catalog pins is not in the record"


def test_a_flavors_record_is_the_spec_the_cluster_holds_not_the_plans(monkeypatch) -> None:
    """A flavor is recorded from its spec as the provider reports it after the update. A flavor the update left out
    (``pulumi up --target``) keeps its earlier spec, and so does the record: the next update compares with what
    Kueue holds, not with what this one planned."""
    earlier = {"nodeLabels": {"eks-training/node-group": "gpu", "team": "a"}, "topologyName": "aws-ec2"}
    answer = account._kubernetes_object

    def kept(name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        rid = answer(name, inputs, out)
        if inputs.get("kind") == "ResourceFlavor" and inputs["metadata"]["name"] == "gpu":
            out["spec"] = earlier
        return rid

    monkeypatch.setattr(account, "_kubernetes_object", kept)
    program = run_program("p4d", fresh=True)
    recorded = program.outputs[last_update.VERSIONS_OUTPUT]
    assert json.loads(recorded["nodeGroups.gpu" + FLAVOR_SUFFIX]) == earlier
    assert (
        _registered_flavors(program, "p4d")["nodeGroups.gpu" + FLAVOR_SUFFIX]
        != recorded["nodeGroups.gpu" + FLAVOR_SUFFIX]
    )
    assert (
        recorded["systemNodeGroup" + FLAVOR_SUFFIX]
        == _registered_flavors(program, "p4d")["systemNodeGroup" + FLAVOR_SUFFIX]
    )


def _installs(program) -> list[Registration]:
    """What the record names a version of, as registered: every EKS add-on, chart release, manifest and etcd's
    Deployment, every node group (its AMI release) and every Kueue flavor (what it is applied with)."""
    manifests = {MANIFESTS[k].url for k in ("mpi-operator", "provisioning-request-crd")}
    return [
        r
        for r in program.registrations
        if r.type
        in ("aws:eks/addon:Addon", "kubernetes:helm.sh/v3:Release", "aws:eks/nodeGroup:NodeGroup", FLAVOR_TYPE)
        or (r.type == "kubernetes:yaml/v2:ConfigFile" and r.inputs.get("file") in manifests)
        or (
            r.type == "kubernetes:apps/v1:Deployment"
            and IMAGES["etcd"].ref in {c["image"] for c in r.inputs["spec"]["template"]["spec"]["containers"]}
        )
    ]


@pytest.mark.parametrize("stack", stack_names())
def test_the_records_wait_for_every_install_they_name(stack: str) -> None:
    """A failed update keeps the stack outputs it registered (pulumi/pulumi#15754), and the Python SDK registers them
    once every one resolves: each record resolves only once every add-on, chart, manifest and etcd it names is
    installed or applied, so a release a failed update rolled back, or a flavor Kueue refused, is not recorded."""
    program = run_program(stack)
    if last_update.VERSIONS_OUTPUT not in program.outputs:
        return  # a jobs-only stack installs none of them
    installs = _installs(program)
    assert {r.type for r in installs} >= {
        "aws:eks/addon:Addon",
        "kubernetes:helm.sh/v3:Release",
        "aws:eks/nodeGroup:NodeGroup",
        FLAVOR_TYPE,
    }
    for record in (last_update.VERSIONS_OUTPUT, last_update.CONFIG_OUTPUT):
        missed = [r.name for r in installs if not program.output_waits_for(record, r.urn)]
        assert missed == [], (record, missed)


def test_the_summary_names_what_a_new_version_moves_and_nothing_else(last_outputs) -> None:
    """The record of an update by an older version (Kueue 0.17.0, another etcd) at the same configuration: the summary
    names those two moves; an unchanged record says nothing; a record of something no longer installed is ignored."""
    config = json.loads(deployed())
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    now = run_program("dev", config=config, fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    last_outputs[last_update.VERSIONS_OUTPUT] = dict(now)
    assert run_program("dev", config=config, fresh=True).warnings == []
    old = {**now, "kueue": "chart 0.17.0, image v0.17.0@sha256:000000000000", "etcd": "3.5.17-0", "gone": "1.0"}
    last_outputs[last_update.VERSIONS_OUTPUT] = old
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    moves = [("kueue", old["kueue"], now["kueue"]), ("etcd", "3.5.17-0", now["etcd"])]
    assert summary == render_moves(moves), summary
    assert f"  kueue: chart 0.17.0, image v0.17.0@sha256:000000000000 -> {now['kueue']}" in summary


def test_the_summary_adds_the_moves_to_the_stack_files_own_changes(last_outputs) -> None:
    """A stack file that also changes (a bigger disk rolls the CPU group): the moves follow its summary."""
    config = json.loads(deployed())
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    now = run_program("dev", config=config, fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    last_outputs[last_update.VERSIONS_OUTPUT] = {**now, "etcd": "3.5.17-0"}
    groups = config[P + "nodeGroups"]
    groups["cpu"]["diskSizeGib"] += 50
    program = run_program("dev", config={**config, P + "nodeGroups": groups}, fresh=True)
    (summary,) = program.warnings
    assert "nodeGroups.cpu rolls" in summary, summary
    assert summary.endswith(render_moves([("etcd", "3.5.17-0", now["etcd"])])), summary


def test_what_this_update_no_longer_installs_or_holds_is_no_move(last_outputs) -> None:
    """A record whose cluster autoscaler and etcd differ from this version's: a stack file that turns the autoscaler
    off names no move of it (nothing installs it now), and etcd, still installed, is named."""
    config = json.loads(deployed())
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    now = run_program("dev", config=config, fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    old = {**now, "cluster-autoscaler": "chart 9.0.0, image v1.0.0", "etcd": "3.5.17-0"}
    last_outputs[last_update.VERSIONS_OUTPUT] = old
    program = run_program("dev", config={**config, P + "autoscaler": {"enabled": False}}, fresh=True)
    assert program.error is None, program.error
    summary = "\n".join(program.warnings)
    assert render_moves([("etcd", "3.5.17-0", now["etcd"])]) in summary, summary
    assert "  cluster-autoscaler: chart 9.0.0" not in summary, summary


def test_a_minor_move_names_the_autoscaler_release_the_record_says_ran(last_outputs) -> None:
    """The record's cluster autoscaler (an older release than this version pins for that minor): a move to the next
    minor names the record's release as the one it replaces, once, not this version's pin for the old minor."""
    config = json.loads(deployed(kubernetesVersion=PREVIOUS))
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    before = run_program("dev", config=config, fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    last_outputs[last_update.VERSIONS_OUTPUT] = {**before, "cluster-autoscaler": "chart 9.0.0, image v1.0.0"}
    program = run_program("dev", config=pinned(), fresh=True)
    assert program.error is None, program.error
    summary = "\n".join(program.warnings)
    now = program.outputs[last_update.VERSIONS_OUTPUT]["cluster-autoscaler"]
    assert summary.count("cluster-autoscaler") == 1, summary
    assert f"chart 9.0.0, image v1.0.0 -> {now}" in summary, summary
    assert before["cluster-autoscaler"] not in summary, summary


@pytest.mark.parametrize("recorded", [None, "not a mapping", ["kueue"]])
def test_an_unreadable_record_names_no_move(recorded: Any) -> None:
    plan = build_plan(load_config(PROJECT, "dev", stack_config("dev"), project_dir=REPO))
    assert version_moves(recorded, plan, plan) == []
    assert version_moves({"kueue": "chart 0.0.1"}, plan, plan) == [
        ("kueue", "chart 0.0.1", installed_versions(plan)["kueue"])
    ]


def test_a_launch_template_a_new_version_changes_rolls_its_group(last_outputs) -> None:
    """The record's digest of the system group's launch template differs from the one this version makes of the same
    configuration (its node setup changed, say): ``pulumi up`` names the system group's roll, and no version move."""
    config = json.loads(deployed())
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    now = run_program("dev", config=config, fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    key = "systemNodeGroup" + TEMPLATE_SUFFIX
    last_outputs[last_update.VERSIONS_OUTPUT] = {**now, key: "0123456789abcdef"}
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None, program.error
    (summary,) = program.warnings
    assert "systemNodeGroup rolls: launch template: this version of the project changes it" in summary, summary
    assert "nodeGroups.cpu rolls" not in summary and key not in summary, summary


def test_a_flavor_a_new_version_labels_otherwise_fails_before_any_resource_is_registered(last_outputs) -> None:
    """p4d's topology-aware gpu flavor, recorded with labels this version no longer derives from the same stack file
    (a label a later version dropped, say): Kueue would refuse the change partway, so ``pulumi up`` stops first,
    naming the record's key. The record as this version writes it goes on."""
    config = stack_config("p4d") | {P + "preflight": {"enabled": False}}
    config[P + "cluster"] = {**(config.get(P + "cluster") or {}), "kubernetesVersion": NOW}
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    now = run_program("dev", config=config, fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    key = "nodeGroups.gpu" + FLAVOR_SUFFIX
    applied = json.loads(now[key])
    applied["nodeLabels"]["team"] = "vision"
    last_outputs[last_update.VERSIONS_OUTPUT] = {**now, key: json.dumps(applied)}
    program = run_program("dev", config=config, fresh=True, expect_error=True)
    assert isinstance(program.error, ConfigError) and program.registrations == [], program.error
    (problem,) = program.error.problems
    assert problem.startswith(f"{P}nodeGroups.gpu: its Kueue flavor gpu has a Topology"), problem
    assert f"as deployedVersions' {key} records it (team vision -> unset)" in problem, problem
    last_outputs[last_update.VERSIONS_OUTPUT] = now
    again = run_program("dev", config=config, fresh=True)
    assert again.error is None and again.warnings == [], (again.error, again.warnings)


def test_new_stack_tags_roll_every_group_at_pulumi_up(last_outputs) -> None:
    """The stack's tags are its instances' tags, in every launch template: ``pulumi up`` names each group's roll."""
    config = json.loads(deployed())
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    last_outputs[last_update.VERSIONS_OUTPUT] = run_program("dev", config=config, fresh=True).outputs[
        last_update.VERSIONS_OUTPUT
    ]
    program = run_program("dev", config={**config, P + "tags": {"team": "research"}}, fresh=True)
    assert program.error is None, program.error
    (summary,) = program.warnings
    for group in ("systemNodeGroup", "nodeGroups.cpu"):
        assert f"{group} rolls: launch template: instance tags none -> team=research" in summary, summary
