"""``pulumi up`` says what it rolls since the stack's last update, before its first change: the program exports the
configuration it was given (a secret), reads it back from the stack's own outputs at the next update through the
engine's ``readStackOutputs`` (the mocks answer it as the engine does), and prints the ``--from`` summary; a move
EKS refuses fails before any resource is registered."""

import copy
import json
from typing import Any

import pulumi
import pytest

from components.catalog import KUBERNETES_VERSIONS, SUPPORTED_KUBERNETES_VERSIONS
from components.catalog.addons import addon_version_tuple, pinned_version
from components.catalog.amis import NEWEST_AMI_RELEASE, release_version
from stacks import last_update, preflight
from stacks.config import ConfigError, load_config
from stacks.config import cluster as config_cluster
from stacks.mocked import ORGANIZATION
from stacks.plan import build_plan
from stacks.plan.program import PROGRAM_KEY, program_digest
from stacks.plan.upgrade import compare
from stacks.preflight import cluster as preflight_cluster
from stacks.yaml_text import load_yaml
from tests.harness import PROJECT, REPO, STACK_OUTPUTS, run_program, stack_config, stack_names
from tests.last_update_support import NEXT, NOW, PREVIOUS, SKIPPED, P, deployed, pinned


def refused(stack: str, **kwargs: Any) -> str:
    """The one problem ``pulumi up`` stops at, before any resource is registered."""
    program = run_program(stack, expect_error=True, **kwargs)
    assert isinstance(program.error, ConfigError) and program.registrations == [], program.error
    (problem,) = program.error.problems
    return problem


@pytest.mark.parametrize("stack", stack_names())
def test_every_preset_exports_its_configuration_as_a_secret_that_plans_the_same(stack: str) -> None:
    program = run_program(stack)
    assert last_update.CONFIG_OUTPUT in program.secret_outputs
    exported = json.loads(program.outputs[last_update.CONFIG_OUTPUT])
    assert json.loads(exported[P + "preflight"]) == {"enabled": False}  # as Pulumi passed it: JSON
    # the minor it deployed, recorded even where the stack file leaves it to the project's default
    minor = (stack_config(stack).get(P + "cluster") or {}).get("kubernetesVersion", NOW)
    assert json.loads(exported[P + "cluster"])["kubernetesVersion"] == minor
    # the zones its new VPC was made in, in the order of its private subnets' blocks (an existing VPC's: none)
    config = load_config(PROJECT, stack, exported, project_dir=REPO)
    blocks = config.network.subnet_cidrs()[0] if config.network is not None else []
    by_block = {s.inputs["cidrBlock"]: s.inputs["availabilityZone"] for s in program.of_type("aws:ec2/subnet:Subnet")}
    assert program.outputs["clusterName"] == config.cluster_name  # what deployed_zones compares with
    assert program.outputs[last_update.REGION_OUTPUT] == config.region  # what refuse_new_region reads without a record
    zones = program.outputs.get(last_update.ZONES_OUTPUT)
    assert zones == ([by_block[b] for b in blocks] or None), (zones, by_block)
    # read back, it plans the same stack: the next update finds nothing to roll
    again = load_config(PROJECT, stack, stack_config(stack) | {P + "preflight": {"enabled": False}}, project_dir=REPO)
    u = compare(build_plan(config), build_plan(again))
    assert (u.groups, u.addons, u.old_minor) == ((), (), u.new_minor)
    # the first update of a stack reads an empty set of outputs: nothing is said
    assert program.warnings == []
    assert ("pulumi:pulumi:readStackOutputs", {"name": f"{ORGANIZATION}/{PROJECT}/{stack}"}) in program.invokes


def test_an_update_to_the_next_minor_says_what_rolls_before_anything_changes(last_outputs) -> None:
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=PREVIOUS)
    program = run_program("dev", config=pinned(), fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    assert summary.startswith(f"upgrade from {last_update.LAST_UPDATE}:"), summary
    assert f"Kubernetes {PREVIOUS} -> {NOW}: the control plane first" in summary
    assert f"nodeGroups.cpu rolls: Kubernetes {PREVIOUS} -> {NOW}" in summary and "job train:" in summary
    assert "expected duration: up to about" in summary
    # EKS may have moved it already (the end of standard support): the state's minor is then stale
    assert summary.endswith(
        f"If the cluster already runs {NOW} (EKS upgrades a cluster itself at the end of standard "
        f"or extended support), run `pulumi up --refresh` instead: Pulumi's state still holds "
        f"{PREVIOUS}, and EKS refuses an update to the minor a cluster runs"
    ), summary


def test_a_new_claim_name_is_said_though_nothing_rolls(last_outputs) -> None:
    """On EFS a new claim is a new, empty folder: ``pulumi up`` says so before its first change, though no node rolls
    and no version moves."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = pinned()
    config[P + "storage"] = {**(config.get(P + "storage") or {}), "pvcName": "results"}
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    assert f"\n  data: {P}storage.pvcName: the claim training/shared-data -> training/results; on EFS" in summary
    assert "node groups: none rolls" in summary


def test_a_job_that_starts_a_new_run_is_said_though_nothing_rolls(last_outputs) -> None:
    """New arguments are a new run of the job, from its first step in a new folder, and of the job after it:
    ``pulumi up`` says so before its first change, naming both folders."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = pinned()
    train = config[P + "jobs"]["train"]
    train["args"] = [*train["args"], "--lr", "0.05"]
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    assert "\n  job train: a new run (args) in /data/runs/train-" in summary, summary
    assert "\n  job evaluate: a new run (a new run of train) in /data/runs/evaluate-" in summary
    assert "\n    it starts from its first step, unless an earlier run of this definition left that folder" in summary
    assert "node groups: none rolls" in summary and "stays on the shared volume" in summary


def test_a_folder_the_last_update_exported_elsewhere_is_a_new_run_though_the_configuration_is_the_same(
    last_outputs,
) -> None:
    """The last update exported train's folder under another name (its image, its code or the project's version
    changed since, none of it in the configuration): ``pulumi up`` names the new run from that folder; a job whose
    exported folder is today's says nothing."""
    program = run_program("dev", config=pinned(), fresh=True)
    folders = {j: o["outputDir"] for j, o in program.outputs["jobs"].items()}
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    last_outputs["jobs"] = {
        "train": {"outputDir": "/data/runs/train-0000000000"},
        "evaluate": {"outputDir": folders["evaluate"]},
    }
    program = run_program("dev", config=pinned(), fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    assert (
        "\n  job train: a new run (its image, code or this project's version) in "
        f"{folders['train']}: its Job is replaced and its pods stop; /data/runs/train-0000000000 stays on the shared "
        "volume"
    ) in summary
    assert "job evaluate" not in summary


def test_an_unchanged_configuration_says_nothing(last_outputs) -> None:
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    program = run_program("dev", fresh=True)
    assert program.error is None and program.warnings == []


def test_a_skipped_minor_fails_before_any_resource_is_registered(last_outputs) -> None:
    """Preflight off (the stack file's setting here): nobody asked EKS which minor runs, so the refusal also says how
    to let the program read it, in case EKS made the move itself."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=SKIPPED)
    problem = refused("dev", config=pinned(), fresh=True)
    assert problem.startswith(f"{P}cluster.kubernetesVersion: {SKIPPED} -> {NOW} skips 1 minor"), problem
    assert problem.endswith(
        f"If the cluster already runs {NOW} (EKS upgrades a cluster itself at the end of standard or extended "
        "support), the program must read the minor it runs to step from it, and could not (preflight is off): set "
        f"{P}preflight.enabled to true for this update"
    ), problem


def test_an_addon_moves_from_the_version_the_record_says_the_last_update_installed(last_outputs) -> None:
    """The record of an update by an older version of the project names another VPC CNI than this version pins for
    its minor: the next minor's line starts from the record's, once. Two minors below the new pin, EKS would refuse
    the step after the control plane moved: refused before any resource is registered."""
    last_outputs[last_update.CONFIG_OUTPUT] = config = deployed(kubernetesVersion=PREVIOUS)
    before = run_program("dev", config=json.loads(config), fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    now = pinned_version("vpc-cni", NOW).version  # type: ignore[union-attr]
    major, minor, _ = addon_version_tuple(now)  # type: ignore[misc]
    last_outputs[last_update.VERSIONS_OUTPUT] = {**before, "vpc-cni": f"v{major}.{minor - 2}.0-eksbuild.1"}
    problem = refused("dev", config=pinned(), fresh=True)
    assert problem.startswith(
        f"{P}cluster.addonVersions.vpc-cni: v{major}.{minor - 2}.0-eksbuild.1 -> {now} moves 2"
    ), problem
    last_outputs[last_update.VERSIONS_OUTPUT] = {**before, "vpc-cni": f"v{major}.{minor - 1}.0-eksbuild.1"}
    program = run_program("dev", config=pinned(), fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    assert f"    vpc-cni: v{major}.{minor - 1}.0-eksbuild.1 -> {now}\n" in summary, summary
    assert summary.count("vpc-cni:") == 1, summary


def test_another_program_than_the_one_the_record_names_says_its_own_changes_do_not_show(last_outputs) -> None:
    """Both sides of the summary are planned with the program that runs, so its own changes to the stack's objects
    (a Job's pod template) show on neither: where the record names another program, the summary says so, and its
    "none restarts" is for the stack file's changes only. The program of the record: no such line."""
    last_outputs[last_update.CONFIG_OUTPUT] = config = deployed()
    before = run_program("dev", config=json.loads(config), fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    assert before[PROGRAM_KEY] == program_digest()
    rolled = pinned()
    rolled[P + "nodeGroups"]["cpu"]["diskSizeGib"] = rolled[P + "nodeGroups"]["cpu"].get("diskSizeGib", 50) + 10

    def summary(versions: dict[str, Any]) -> str:
        last_outputs[last_update.VERSIONS_OUTPUT] = versions
        program = run_program("dev", config=rolled, fresh=True)
        assert program.error is None and program.registrations
        (said,) = program.warnings
        return said

    same = summary(before)
    assert "\n  jobs: none restarts or starts a new run\n" in same and "another version" not in same, same
    changes = (
        "its own changes to the stack's objects, such as a Job's pod template, show only in the preview's list of "
        "changes (a replaced Job shows +-)"
    )
    for other in ({**before, PROGRAM_KEY: "0" * 16}, {k: v for k, v in before.items() if k != PROGRAM_KEY}):
        said = summary(other)
        assert "\n  jobs: none restarts or starts a new run for the stack file's changes\n" in said, said
        assert f"\n  another version of this project made the last update: {changes}\n" in said, said
    # the stack file unchanged: no summary, but the program's change is said
    last_outputs[last_update.VERSIONS_OUTPUT] = {**before, PROGRAM_KEY: "0" * 16}
    program = run_program("dev", config=pinned(), fresh=True)
    assert program.warnings == [f"Another version of this project made the stack's last update: {changes}"]
    last_outputs[last_update.VERSIONS_OUTPUT] = before
    assert run_program("dev", config=pinned(), fresh=True).warnings == []


def test_a_new_vpc_block_fails_before_any_resource_is_registered(last_outputs) -> None:
    """A running stack's VPC cannot change its block (EKS keeps a cluster in its VPC): refused before the new VPC is
    made, where `pulumi up` would fail partway."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = pinned()
    config[P + "network"] = {**(config.get(P + "network") or {}), "vpcCidr": "10.8.0.0/16"}
    problem = refused("dev", config=config, fresh=True)
    assert problem.startswith(f"{P}network.vpcCidr 10.0.0.0/16 -> 10.8.0.0/16: another VPC"), problem


def test_a_pinned_groups_launch_template_change_alone_fails_before_any_resource_is_registered(last_outputs) -> None:
    """dev's releases pinned (cluster.amiRelease), then a bigger CPU disk at the same release: EKS would take its
    newest release, and refuse every later update back to the pin. Refused before anything is registered."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(amiRelease="v20260610")
    config = pinned(amiRelease="v20260610")
    config[P + "nodeGroups"]["cpu"]["diskSizeGib"] += 50
    problem = refused("dev", config=config, fresh=True)
    assert problem.startswith(f"{P}cluster.amiRelease: pins nodeGroups.cpu to AMI release "), problem
    assert "remove it (the group then takes EKS's newest release and keeps it)" in problem, problem


def test_a_first_pin_older_than_the_release_the_group_runs_fails_before_any_resource_is_registered(
    last_outputs,
) -> None:
    """dev's CPU group had no pin, and EKS moved it past this version's newest release (the record says so): pinning
    that newest release would ask EKS to go back, which it refuses. Refused before anything is registered, against
    the release the record names; pinning that one goes on."""
    last_outputs[last_update.CONFIG_OUTPUT] = config = deployed()
    before = run_program("dev", config=json.loads(config), fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    newest = release_version(None, NOW)
    assert before["nodeGroups.cpu.releaseVersion"] == newest
    runs = f"{NOW}.99-20991231"  # a release this version does not know yet
    last_outputs[last_update.VERSIONS_OUTPUT] = {**before, "nodeGroups.cpu.releaseVersion": runs}
    config = pinned()
    config[P + "nodeGroups"]["cpu"]["amiRelease"] = NEWEST_AMI_RELEASE
    problem = refused("dev", config=config, fresh=True)
    assert problem.startswith(
        f"{P}nodeGroups.cpu.amiRelease: {newest} is older than the release nodeGroups.cpu runs, {runs}"
    ), problem
    config[P + "nodeGroups"]["cpu"]["amiRelease"] = runs
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations and program.warnings == [], program.warnings


def test_a_group_the_record_says_fell_behind_its_cluster_fails_before_any_resource_is_registered(last_outputs) -> None:
    """The last update recorded dev's CPU group on a release four minors below the next one (a Capacity Block group
    keeps its minor while its block is active): the move to the next minor would put its kubelet outside the skew.
    Refused before anything is registered, naming the record's key and the roll to make first."""
    last_outputs[last_update.CONFIG_OUTPUT] = config = deployed(kubernetesVersion=PREVIOUS)
    before = run_program("dev", config=json.loads(config), fresh=True).outputs[last_update.VERSIONS_OUTPUT]
    major, minor = (int(n) for n in NOW.split("."))
    behind = f"{major}.{minor - 4}.1-20260714"
    last_outputs[last_update.VERSIONS_OUTPUT] = {**before, "nodeGroups.cpu.releaseVersion": behind}
    problem = refused("dev", config=pinned(), fresh=True)
    assert problem.startswith(
        f"{P}nodeGroups.cpu: its nodes run kubelet {major}.{minor - 4} until they roll (AMI release {behind}, as the "
        "last update recorded it in deployedVersions' nodeGroups.cpu.releaseVersion)"
    ), problem
    assert f"roll it to {PREVIOUS} first" in problem, problem


def test_another_gpu_model_on_a_topology_aware_group_fails_before_any_resource_is_registered(last_outputs) -> None:
    """p4d's topology-aware gpu group moved to p5: its Kueue flavor's accelerator label would change, which Kueue
    refuses once the flavor has a Topology. Refused before the new group is made, where `pulumi up` would fail
    partway with both groups running."""
    config = stack_config("p4d") | {P + "preflight": {"enabled": False}}
    config[P + "cluster"] = {**(config.get(P + "cluster") or {}), "kubernetesVersion": NOW}
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    moved = copy.deepcopy(config)
    moved[P + "nodeGroups"]["gpu"]["instanceTypes"] = ["p5.48xlarge"]
    problem = refused("dev", config=moved, fresh=True)
    assert problem.startswith(f"{P}nodeGroups.gpu: its Kueue flavor gpu has a Topology"), problem
    assert "(k8s.amazonaws.com/accelerator nvidia-a100 -> nvidia-h100)" in problem, problem


def test_a_new_zone_fails_before_any_resource_is_registered(last_outputs) -> None:
    """The program reads the region's zones (aws.getAvailabilityZones) and resolves the last update's zones and this
    one's from them: a third zone is refused, as EKS keeps the zones a cluster was made in."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = pinned()
    config[P + "network"] = {**(config.get(P + "network") or {}), "availabilityZoneCount": 3}
    problem = refused("dev", config=config, fresh=True)
    assert problem.startswith(f"{P}network.availabilityZoneCount: the VPC's zones us-east-1a, us-east-1b -> "), problem


def test_zones_the_region_no_longer_chooses_fail_before_any_resource_is_registered(last_outputs) -> None:
    """The last update exported the zones its VPC was made in (vpcZones); the same settings now choose others (the
    region's available zones changed since, say): refused, naming the zones to list, where `pulumi up` would fail
    partway. Without that output (an earlier commit's update) the last update's zones are resolved from its
    settings, as before."""
    record = json.loads(deployed())
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(record)
    last_outputs[last_update.ZONES_OUTPUT] = ["us-east-1a", "us-east-1c"]
    problem = refused("dev", config=pinned(), fresh=True)
    assert problem.startswith(
        f"{P}network.availabilityZoneCount: the VPC's zones us-east-1a, us-east-1c -> us-east-1a, us-east-1b (the "
        "same settings choose other zones"
    ), problem
    listed = pinned()
    listed[P + "network"] = {**(listed.get(P + "network") or {}), "availabilityZones": ["us-east-1a", "us-east-1c"]}
    listed[P + "network"].pop("availabilityZoneCount", None)
    program = run_program("dev", config=listed, fresh=True)
    assert program.error is None and program.warnings == [], (program.error, program.warnings)
    subnets = [s.inputs["availabilityZone"] for s in program.of_type("aws:ec2/subnet:Subnet")]
    assert sorted(set(subnets)) == ["us-east-1a", "us-east-1c"], subnets
    del last_outputs[last_update.ZONES_OUTPUT]
    assert run_program("dev", config=pinned(), fresh=True).warnings == []


def test_an_unset_minor_nothing_can_check_is_said(last_outputs) -> None:
    """A stack an earlier version of this project updated (outputs, no record), its minor left to the default, and
    preflight off: nothing tells the update the minor the cluster runs, so it says it deploys the default unchecked,
    and how to pin the minor. Pinned, or on a new stack, nothing is said."""
    last_outputs.update({"clusterName": "dev", last_update.REGION_OUTPUT: "us-east-1"})
    program = run_program("dev", fresh=True)
    assert program.error is None and program.registrations, program.error
    (warning,) = program.warnings
    assert f"({last_update.PREFLIGHT_OFF}): {P}cluster.kubernetesVersion is not set" in warning, warning
    assert f"deploys the project's default, {NOW}, unchecked" in warning and '"Pin the minor"' in warning, warning
    assert run_program("dev", config=pinned(), fresh=True).warnings == []
    last_outputs.clear()
    assert run_program("dev", fresh=True).warnings == []


def test_a_skipped_minor_whose_cluster_could_not_be_read_says_why(last_outputs, monkeypatch) -> None:
    """Preflight on, but EKS could not be asked (the stack's profile is missing here, say): the refusal says why,
    and which call the read makes."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=SKIPPED)
    why = "CredentialsError: cannot use the stack's AWS credentials (aws:profile, ...): no profile x"
    monkeypatch.setattr(preflight_cluster, "running_cluster", lambda plan, session=None: (None, why))
    problem = refused("dev", config={**pinned(), P + "preflight": {"enabled": True}}, fresh=True)
    assert problem.endswith(
        f"and could not ({why}): it calls eks:DescribeCluster with the stack's credentials in its region: fix what "
        "stopped that call"
    ), problem


def test_a_skipped_minor_the_cluster_does_not_run_is_refused_without_the_preflight_hint(
    last_outputs, cluster_runs
) -> None:
    """Preflight on, and EKS says the cluster runs the record's minor: the skip is the stack file's, and the refusal
    names only the steps."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=SKIPPED)
    problem = refused("dev", config=cluster_runs(SKIPPED), fresh=True)
    assert problem.startswith(f"{P}cluster.kubernetesVersion: {SKIPPED} -> {NOW} skips 1 minor"), problem
    assert problem.endswith("one minor per `pulumi up`"), problem


def test_a_default_that_moved_never_upgrades_a_cluster_whose_minor_is_unset(last_outputs) -> None:
    """The last update recorded the minor it deployed from the project's default; a new version whose default is newer
    would upgrade the cluster unasked: the update fails before any resource is registered, naming both choices."""
    record = json.loads(deployed())
    record[P + "cluster"] = json.dumps({"kubernetesVersion": PREVIOUS})  # as an unpinned update records it
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(record)
    problem = refused("dev", fresh=True)
    assert problem.startswith(f"{P}cluster.kubernetesVersion is not set, and this project's default, {NOW}, is not")
    assert f"the minor the stack's last finished update deployed, {PREVIOUS}: a new version of the project" in problem
    assert problem.endswith(
        f"Set it to '{PREVIOUS}' to keep the cluster as it runs, or to '{NOW}' to upgrade it one minor"
    )


def test_a_last_configuration_this_version_cannot_load_is_named_and_the_update_goes_on(last_outputs) -> None:
    config = json.loads(deployed())
    config[P + "retiredKey"] = "1"
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    program = run_program("dev", fresh=True)
    assert program.error is None and program.registrations
    (warning,) = program.warnings
    assert "does not load" in warning and "retiredKey" in warning
    assert "python -m stacks plan --stack dev --from" in warning
    assert "not the node groups' kubelets and AMI releases, the Kueue flavors or the add-ons' steps" in warning


@pytest.mark.parametrize("minor, said", [(SKIPPED, f"{SKIPPED} -> {NOW} skips 1 minor"), (NEXT, f"{NOW} is older")])
def test_a_record_that_does_not_load_still_refuses_a_skip_or_a_downgrade(last_outputs, minor: str, said: str) -> None:
    """The minor's step is read from the record's raw minor: a skip or a downgrade is refused before any resource is
    registered, though the rest of the record does not load."""
    config = json.loads(deployed(kubernetesVersion=minor))
    config[P + "retiredKey"] = "1"
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    problem = refused("dev", config=pinned(), fresh=True)
    assert problem.startswith(f"{P}cluster.kubernetesVersion: {said}"), problem


def test_a_cluster_stack_turned_jobs_only_whose_record_does_not_load_is_not_refused_a_minor() -> None:
    """A jobs-only stack sets no minor (its cluster is another stack's): where its last record is a cluster stack's
    that does not load, no step from that record's minor is refused, as where it loads (same_cluster)."""
    record = json.loads(deployed(kubernetesVersion=SKIPPED))  # as Pulumi passes it: objects as JSON
    record = {k: v if isinstance(v, str) else json.dumps(v) for k, v in record.items()} | {P + "retiredKey": "1"}
    team = load_yaml((REPO / "examples" / "teams" / "Pulumi.vision.yaml").read_text())["config"]
    plan = build_plan(load_config(PROJECT, "vision", json.loads(json.dumps(team)), project_dir=REPO))
    warning, old = last_update.upgrade_summary(plan, record)
    assert old is None and warning is not None and "does not load" in warning, warning
    # the same record under the cluster stack's own file: the skip is refused
    with pytest.raises(ConfigError, match=f"{SKIPPED} -> {NOW} skips 1 minor"):
        last_update.upgrade_summary(build_plan(load_config(PROJECT, "dev", pinned(), project_dir=REPO)), record)


#: The dev stack in a VPC it did not make: it exports no vpcZones.
IN_EXISTING_VPC = {
    P + "existingVpc": {
        "vpcId": "vpc-0abc1234def567890",
        "privateSubnetIds": ["subnet-0a1b2c3d4e5f60718", "subnet-0b2c3d4e5f6071829"],
    },
}


@pytest.mark.parametrize("record", ["loads", "unloadable", "minor moved", "undecrypted, existing VPC"])
def test_a_new_region_is_refused_first_whether_or_not_the_record_loads(last_outputs, record: str) -> None:
    """The record keeps aws:region: a new one is refused before anything is registered, before the record is loaded
    (one this version cannot load still names its region) and before the minor a new default would move. Where the
    record cannot be read at all and no VPC zones were exported, the plain ``region`` output says it. Nothing is
    asked of AWS in the new region first (it may not be enabled in the account)."""
    config = json.loads(deployed() if record != "minor moved" else deployed(kubernetesVersion=PREVIOUS))
    if record == "unloadable":
        config[P + "retiredKey"] = "1"
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config)
    moved = {**stack_config("dev"), "aws:region": "us-west-2"}
    if record == "undecrypted, existing VPC":
        last_outputs[last_update.CONFIG_OUTPUT] = {}  # what readStackOutputs returns for a secret it cannot decrypt
        last_outputs[last_update.REGION_OUTPUT] = "us-east-1"
        moved = {k: v for k, v in moved.items() if k != P + "network"} | IN_EXISTING_VPC
    program = run_program("dev", config=moved, fresh=True, expect_error=True)
    assert isinstance(program.error, ConfigError) and program.registrations == []
    assert [t for t, _ in program.invokes if "getAvailabilityZones" in t] == []
    assert program.error.problems == [
        "aws:region us-east-1 -> us-west-2: a running stack's resources stay in the region they were made in (the "
        "cluster, its network, the shared file system and its data): keep aws:region us-east-1; to train in "
        "us-west-2, deploy another stack there with a clusterName of its own, or move this one: `pulumi destroy` "
        "with aws:region us-east-1, then `pulumi up` with us-west-2"
    ]


@pytest.mark.parametrize("record", ["unloadable", "undecrypted"])
def test_zones_that_moved_are_refused_where_the_record_cannot_be_used(last_outputs, record: str) -> None:
    """The zones are a plain output of their own: where the secret record cannot be used (it does not load with this
    version, or the engine could not decrypt it), a move of the VPC's zones is still refused; a record of another
    cluster (a new clusterName replaces the VPC too) is no reason."""
    config = json.loads(deployed())
    config[P + "retiredKey"] = "1"
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(config) if record == "unloadable" else {}
    last_outputs[last_update.ZONES_OUTPUT] = ["us-east-1a", "us-east-1c"]
    last_outputs["clusterName"] = "eks-training-dev"
    problem = refused("dev", config=pinned(), fresh=True)
    assert problem.startswith(
        f"{P}network.availabilityZoneCount: the VPC's zones us-east-1a, us-east-1c -> us-east-1a, us-east-1b (the "
        "zones the last update exported as vpcZones)"
    ), problem
    last_outputs["clusterName"] = "eks-training-dev-old"
    program = run_program("dev", config=pinned(), fresh=True)
    assert program.error is None and program.registrations
    (warning,) = program.warnings
    assert ("does not load" if record == "unloadable" else "cannot read") in warning, warning


def test_a_stack_whose_outputs_cannot_be_read_says_so_and_the_update_goes_on(monkeypatch) -> None:
    monkeypatch.setattr(last_update, "stack_name", lambda: "elsewhere/eks-training/dev")  # the engine refuses it
    program = run_program("dev", fresh=True)
    assert program.error is None and program.registrations
    (warning,) = program.warnings
    assert warning.startswith(f"cannot read {last_update.LAST_UPDATE} (invoke of"), warning
    assert "unknown stack 'dev'" in warning  # the DIY backend's legacy name was tried too


def test_a_record_the_engine_could_not_decrypt_is_named_and_the_update_goes_on(last_outputs) -> None:
    last_outputs[last_update.CONFIG_OUTPUT] = {}  # what readStackOutputs returns for a secret it cannot decrypt
    program = run_program("dev", fresh=True)
    assert program.error is None and program.registrations
    (warning,) = program.warnings
    assert warning.startswith(f"cannot read {last_update.LAST_UPDATE}") and "not decrypted" in warning, warning


def test_a_diy_backend_in_its_legacy_layout_is_read_by_the_stacks_bare_name(monkeypatch) -> None:
    """A DIY backend that keeps its stacks without a project names them by the stack alone."""
    assert ORGANIZATION == last_update.DIY_ORGANIZATION  # the mocks name the DIY backend's organization
    monkeypatch.setattr(last_update, "stack_name", lambda: "organization/unknown-project/dev")
    STACK_OUTPUTS["dev"] = {last_update.CONFIG_OUTPUT: deployed(kubernetesVersion=PREVIOUS)}
    try:
        program = run_program("dev", config=pinned(), fresh=True)
    finally:
        STACK_OUTPUTS.pop("dev", None)
    assert program.error is None
    (summary,) = program.warnings
    assert f"Kubernetes {PREVIOUS} -> {NOW}" in summary


def test_the_record_keeps_the_projects_settings_and_no_aws_credential_nor_other_secret() -> None:
    config = {
        f"{P}jobs": "{}",
        f"{P}apiToken": "project secret: recorded, encrypted",
        "aws:region": "us-east-1",
        "aws:profile": "training",
        "aws:secretKey": "SECRET",
        "aws:accessKey": "AKIA",
        "aws:token": "TOKEN",
        "aws:assumeRoles": "[secret role]",
        "kubernetes:context": "elsewhere",
    }
    previous = dict(pulumi.runtime.config.CONFIG.get())
    pulumi.runtime.set_all_config(config, ["aws:assumeRoles", f"{P}apiToken"])
    try:
        kept = last_update.recorded(config)
    finally:
        pulumi.runtime.set_all_config(previous, [])
    assert kept == {k: config[k] for k in (f"{P}jobs", f"{P}apiToken", "aws:region", "aws:profile")}


def test_a_warning_of_the_configuration_shows_once_though_the_last_one_is_loaded_too(last_outputs) -> None:
    """The last update's configuration (which keeps the stack's aws: settings but its keys) is loaded to compare; its
    warnings were shown at its own update, so this one shows each once."""
    web_identity = {
        P.replace(PROJECT, "aws") + "assumeRoleWithWebIdentity": {"roleArn": "arn:aws:iam::123456789012:role/ci"}
    }
    config = {**copy.deepcopy(stack_config("dev")), **web_identity}
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps({**json.loads(deployed()), **web_identity}, sort_keys=True)
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None
    assert [w.split(" ", 1)[0] for w in program.warnings] == ["aws:assumeRoleWithWebIdentity"], program.warnings


def test_a_recorded_minor_since_past_its_support_is_still_refused(last_outputs) -> None:
    """A minor past EKS standard support no longer loads without extendedSupport; the refusal reads the record's minor
    before loading it, so the update stops instead of warning and moving the cluster."""
    old = SUPPORTED_KUBERNETES_VERSIONS[0]
    with pytest.raises(ConfigError):  # the record alone does not load any more
        load_config(PROJECT, "dev", json.loads(deployed(kubernetesVersion=old)), project_dir=REPO)
    record = json.loads(deployed())
    record[P + "cluster"] = json.dumps({"kubernetesVersion": old})
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(record)
    problem = refused("dev", fresh=True)
    assert f"last finished update deployed, {old}" in problem


def test_a_record_without_a_minor_warns_that_the_running_minor_is_unknown(last_outputs) -> None:
    """A record an earlier commit made, of a stack whose file left the minor unset, holds no minor: the update says
    that it may move the cluster, and goes on."""
    record = json.loads(deployed())
    record[P + "cluster"] = json.dumps({})
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(record)
    program = run_program("dev", fresh=True)
    assert program.error is None and program.registrations
    (warning,) = program.warnings
    assert warning.startswith(f"{last_update.LAST_UPDATE} holds no Kubernetes minor, and the stack file sets none")
    assert f"Set {P}cluster.kubernetesVersion to the minor it runs" in warning
    # pinned, nothing is said
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(
        {**record, P + "cluster": json.dumps({"kubernetesVersion": NOW})}
    )
    assert run_program("dev", config=pinned(), fresh=True).warnings == []


@pytest.mark.parametrize("runs", [PREVIOUS, NOW])
def test_a_record_without_a_minor_stops_where_the_cluster_runs_another(last_outputs, cluster_runs, runs: str) -> None:
    """The same record with preflight on: the minor the cluster runs stands in for the record's. Another than the
    default stops the update, naming the key and both choices; the default itself goes on, with nothing to warn of."""
    record = json.loads(deployed())
    record[P + "cluster"] = json.dumps({})
    last_outputs[last_update.CONFIG_OUTPUT] = json.dumps(record)
    config = cluster_runs(runs)
    config[P + "cluster"] = {k: v for k, v in config[P + "cluster"].items() if k != "kubernetesVersion"}
    program = run_program("dev", config=config, fresh=True, expect_error=runs != NOW)
    if runs == NOW:
        assert program.error is None and program.registrations and program.warnings == []
        return
    assert isinstance(program.error, ConfigError) and program.registrations == []
    (problem,) = program.error.problems
    assert f"is not the minor the cluster runs, {PREVIOUS}: a new version of the project moved it" in problem, problem
    assert f"Set it to '{PREVIOUS}' to keep the cluster as it runs" in problem, problem


@pytest.fixture()
def cluster_runs(monkeypatch):
    """Preflight on, the account's checks passed, and the EKS cluster running the minor given (DescribeCluster, read
    by the program before the upgrade summary: ``stacks.preflight.cluster.running_cluster``)."""

    def runs(minor: str) -> dict[str, Any]:
        monkeypatch.setattr(preflight_cluster, "running_cluster", lambda plan, session=None: ((minor, "ACTIVE"), None))
        monkeypatch.setattr(preflight_cluster, "eks_defaults", lambda plan, session=None: ({}, None))
        monkeypatch.setattr(preflight, "check", lambda plan, zones, session=None, previous=None: [])
        return {**pinned(), P + "preflight": {"enabled": True}}

    return runs


def test_preflight_gets_the_recorded_plan_whose_replaced_group_runs_until_the_end(
    last_outputs, cluster_runs, monkeypatch
) -> None:
    """``pulumi up`` hands preflight the plan of the configuration the last update recorded: the vCPU quotas count the
    nodes of a group the update replaces, which run until its end (:func:`stacks.plan.checklist.quota_needs`). The
    summary says both groups run."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = cluster_runs(NOW)
    config[P + "nodeGroups"]["cpu"]["instanceTypes"] = ["c5.4xlarge"]
    seen: list[Any] = []
    monkeypatch.setattr(preflight, "check", lambda plan, zones, session=None, previous=None: seen.append(previous))
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations
    (previous,) = seen
    assert previous.groups["cpu"].instance_types == ["m5.xlarge"]
    (summary,) = program.warnings
    assert "nodeGroups.cpu is replaced (a new group, then the old one deleted)" in summary, summary
    assert "\n  note: nodeGroups.cpu: the new group's nodes start beside the old group's" in summary, summary


@pytest.mark.parametrize("recorded", [PREVIOUS, SKIPPED])
def test_a_control_plane_eks_moved_itself_is_checked_from_the_minor_it_runs_and_asks_for_a_refresh(
    last_outputs, cluster_runs, recorded: str
) -> None:
    """The record says a minor below the one the control plane runs (EKS upgraded it itself, or an earlier `pulumi up`
    moved it and then failed, which keeps the record; two below: it moved twice), and the stack file sets the one it
    runs: no skipped minor to refuse, the nodes still roll from the record's minor as the summary says, and the note
    names both causes: after EKS's own move Pulumi's state still holds the record's minor, so the update must
    refresh."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=recorded)
    config = cluster_runs(NOW)
    was, will = (addon_version_tuple(pinned_version("vpc-cni", m).version) for m in (recorded, NOW))  # type: ignore[union-attr]
    if will[1] - was[1] > 1:  # the add-ons stayed at the record's minor, and EKS moves the VPC CNI a minor at a time
        refused = run_program("dev", config=config, fresh=True, expect_error=True)
        assert "and EKS moves vpc-cni one minor at a time" in str(refused.error) and not refused.registrations
        step = next(
            v
            for v in (pinned_version("vpc-cni", m) for m in SUPPORTED_KUBERNETES_VERSIONS)
            if v and (addon_version_tuple(v.version) or ())[:2] == (was[0], was[1] + 1)
        )
        config[P + "cluster"]["addonVersions"] = {"vpc-cni": step.version}  # the step the message asks for
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    assert f"nodeGroups.cpu rolls: Kubernetes {recorded} -> {NOW}" in summary, summary
    assert f"Kubernetes {recorded} -> {NOW}: the control plane already runs {NOW}; then\n    vpc-cni" in summary
    assert summary.endswith(
        f"The control plane already runs {NOW}, past the {recorded} the last finished update recorded: an earlier "
        "`pulumi up` that failed moved it, or EKS did (it upgrades a cluster itself at the end of standard or extended "
        "support). Its nodes and add-ons may not have moved. Run this update as `pulumi up --refresh` unless it is "
        f"one: after EKS's own upgrade, Pulumi's state still holds {recorded} (without the refresh, `pulumi up` asks "
        "EKS for the move to the minor the cluster runs, which EKS refuses)"
    ), summary


def test_a_stack_file_left_at_the_record_behind_a_control_plane_that_moved_names_the_refresh(
    last_outputs, cluster_runs
) -> None:
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=PREVIOUS)
    config = cluster_runs(NOW)
    config[P + "cluster"] = {**config[P + "cluster"], "kubernetesVersion": PREVIOUS}
    problem = refused("dev", config=config, fresh=True)
    said = (
        f"{PREVIOUS} is older than the {NOW} the cluster runs: an earlier `pulumi up` that failed moved it, or EKS did"
    )
    assert said in problem, problem
    assert f"Set it to '{NOW}' and run `pulumi up --refresh`" in problem, problem


def test_a_control_plane_ahead_of_an_unset_minors_default_names_the_minor_it_runs(last_outputs, cluster_runs) -> None:
    """The stack file leaves the minor unset, the default is the record's, and the control plane moved one minor past
    it: the update stops naming the minor the cluster runs (`pulumi up` never moves it down)."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = cluster_runs(NEXT)
    config[P + "cluster"] = {k: v for k, v in config[P + "cluster"].items() if k != "kubernetesVersion"}
    problem = refused("dev", config=config, fresh=True)
    assert f"is not the minor the cluster runs, {NEXT}: `pulumi up` never moves a cluster down a minor" in problem, (
        problem
    )


@pytest.mark.parametrize(("runs", "said"), [(PREVIOUS, "a new version of the project moved it"), (NEXT, "down")])
def test_a_cluster_without_a_record_whose_minor_is_not_the_unset_default_stops_the_update(
    last_outputs, cluster_runs, runs: str, said: str
) -> None:
    """A stack no update of this version recorded (no deployedConfiguration), whose stack file leaves the minor to the
    default: where the cluster runs another minor, the update stops naming both choices, as with a record; where it
    runs the default, nothing is said."""
    config = cluster_runs(runs)
    config[P + "cluster"] = {k: v for k, v in config[P + "cluster"].items() if k != "kubernetesVersion"}
    problem = refused("dev", config=config, fresh=True)
    assert problem.startswith(
        f"eks-training:cluster.kubernetesVersion is not set, and this project's default, {NOW}, is not the minor the "
        f"cluster runs, {runs}: "
    ), problem
    assert said in problem and f"Set it to '{runs}' to keep the cluster as it runs" in problem, problem
    assert problem.endswith(
        "; if another stack made the cluster eks-training-dev, give this stack a eks-training:clusterName of its own "
        "instead"
    ), problem
    program = run_program("dev", config=cluster_runs(NOW) | {P + "cluster": config[P + "cluster"]}, fresh=True)
    assert program.error is None and program.warnings == [], program.warnings


def test_a_cluster_that_runs_the_recorded_minor_adds_nothing(last_outputs, cluster_runs) -> None:
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    program = run_program("dev", config=cluster_runs(NOW), fresh=True)
    assert program.error is None and program.warnings == []


def test_a_record_whose_minor_left_standard_support_since_still_shows_what_rolls(last_outputs, monkeypatch) -> None:
    """The record was made while its minor was in standard support; on a later day it still loads for the comparison
    (only the stack file is held to today's support window)."""
    end = KUBERNETES_VERSIONS[PREVIOUS].end_of_standard
    assert end < KUBERNETES_VERSIONS[NOW].end_of_standard
    monkeypatch.setattr(config_cluster, "today", lambda: end)
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=PREVIOUS)
    program = run_program("dev", config=pinned(), fresh=True)
    assert program.error is None
    (summary,) = program.warnings
    assert f"Kubernetes {PREVIOUS} -> {NOW}: the control plane first" in summary, summary


@pytest.mark.parametrize("stack", stack_names())
def test_each_jobs_exported_folder_is_the_one_the_plan_names(program_for, stack: str) -> None:
    """``pulumi up``'s summary compares the plan's output folders with those the last update exported
    (``jobs.<job>.outputDir``): for every job of every preset, of every kind, the two are written alike."""
    program = program_for(stack, False)
    plan = build_plan(load_config(PROJECT, stack, stack_config(stack)))
    exported = last_update.deployed_folders(program.outputs)
    assert exported is not None and set(exported) == set(plan.jobs), stack
    assert exported == {name: job.output_dir for name, job in plan.jobs.items()}


def test_a_default_eks_raised_since_the_last_update_is_named_before_anything_changes(
    last_outputs, cluster_runs, monkeypatch
) -> None:
    """The same stack file as the last update, and coredns left to EKS's default: the program reads what the cluster
    runs and EKS's default now (``stacks.preflight.cluster.eks_defaults``, DescribeAddon and DescribeAddonVersions)
    and, where EKS raised it, says the move before anything changes. Where EKS could not be asked, it says the move
    is not shown."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = cluster_runs(NOW)
    asked: list[str] = []

    def raised(plan: Any, session: Any = None) -> tuple[dict[str, tuple[str, str]], None]:
        asked.append(plan.config.cluster_name)
        return {"coredns": ("v1.11.4-eksbuild.2", "v1.11.4-eksbuild.14")}, None

    monkeypatch.setattr(preflight_cluster, "eks_defaults", raised)
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations and asked == ["eks-training-dev"]
    (summary,) = program.warnings
    assert "\n    coredns: v1.11.4-eksbuild.2 -> v1.11.4-eksbuild.14\n" in summary, summary
    assert "note: coredns: EKS raised its default for " in summary, summary

    # EKS not asked (an access denied): said, and the update goes on
    def denied(plan: Any, session: Any = None) -> tuple[dict[str, tuple[str, str]], str]:
        return {}, "AwsCallError: DescribeAddon failed: AccessDeniedException: no"

    monkeypatch.setattr(preflight_cluster, "eks_defaults", denied)
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations
    assert program.warnings == [
        "could not read the cluster's add-ons (AwsCallError: DescribeAddon failed: AccessDeniedException: no): a "
        "default EKS raised is not shown"
    ], program.warnings


@pytest.mark.parametrize("runs", [None, PREVIOUS, NOW])
def test_a_new_cluster_name_is_a_new_cluster_at_pulumi_up_and_names_one_that_has_the_name(
    last_outputs, cluster_runs, runs: str | None
) -> None:
    """The record made eks-training-dev at SKIPPED, and the stack file renames the cluster at NOW: a new cluster, no
    skipped minor. Preflight reads the cluster by the new name. Where one runs already (an earlier `pulumi up` of this
    stack that failed, or another stack's), the summary names it, and no note asks for a refresh of the old one."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed(kubernetesVersion=SKIPPED, extendedSupport=True)
    config = cluster_runs(runs) if runs else {**pinned(), P + "preflight": {"enabled": False}}
    config[P + "clusterName"] = "dev-two"
    config[P + "storage"] = {**config.get(P + "storage", {}), "deleteOldData": True}  # the old file system goes
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and program.registrations
    (summary,) = program.warnings
    minor = (
        f"Kubernetes {PREVIOUS} -> {NOW}: the control plane first" if runs == PREVIOUS else f"Kubernetes {NOW}: the new"
    )
    assert minor in summary, summary
    said = f"a cluster named dev-two already runs Kubernetes {runs}"
    assert (said in summary) == (runs is not None), summary
    assert "pulumi up --refresh" not in summary and "node groups: every group is made again" in summary, summary


def _node_group(program, group: str):
    (ng,) = [r for r in program.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith(f"-{group}-ng")]
    return ng


def test_new_sizes_of_an_autoscaled_group_send_the_desired_size_eks_holds(
    last_outputs, cluster_runs, monkeypatch
) -> None:
    """A group whose maxSize moves while the autoscaler owns its size: ``pulumi up`` reads the desired size EKS holds
    (``desired_sizes_now``) and sends it within the new sizes, where the provider would send the one Pulumi recorded
    (``ignoreChanges``) and EKS scale the group to it at once. Unchanged sizes keep the desired size ignored."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = cluster_runs(NOW)
    asked: list[tuple[str, ...]] = []

    def holds(plan, names, session=None):
        asked.append(tuple(names))
        return {n: 7 for n in names}, None

    monkeypatch.setattr(preflight_cluster, "desired_sizes_now", holds)
    unchanged = run_program("dev", config=copy.deepcopy(config), fresh=True)
    assert asked == [()] and "scalingConfig.desiredSize" in _node_group(unchanged, "cpu").ignore_changes
    config[P + "nodeGroups"]["cpu"]["maxSize"] = 4
    infos: list[str] = []
    monkeypatch.setattr(pulumi.log, "info", lambda message, *args, **kwargs: infos.append(message))
    program = run_program("dev", config=config, fresh=True)
    assert program.error is None and asked[-1] == ("cpu",)
    assert "nodeGroups.cpu: desiredSize 4 sent with minSize 0 and maxSize 4 (EKS holds 7, read now)" in infos, infos
    ng = _node_group(program, "cpu")
    assert ng.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 4, "maxSize": 4}  # 7 within 0-4
    assert "scalingConfig.desiredSize" not in ng.ignore_changes
    (summary,) = program.warnings
    assert "nodeGroups.cpu: maxSize 2 -> 4: `pulumi up` reads the desired size EKS holds" in summary, summary


def test_new_sizes_eks_does_not_give_the_desired_size_of_keep_it_ignored_and_warn(
    last_outputs, cluster_runs, monkeypatch
) -> None:
    """EKS not answering (or preflight off): the desired size stays ignored, and a warning says that the provider
    sends the recorded one, and to answer no and refresh."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = cluster_runs(NOW)
    config[P + "nodeGroups"]["cpu"]["maxSize"] = 4
    why = "CredentialsError: no profile x"
    monkeypatch.setattr(preflight_cluster, "desired_sizes_now", lambda plan, names, session=None: ({}, why))
    program = run_program("dev", config=config, fresh=True)
    assert "scalingConfig.desiredSize" in _node_group(program, "cpu").ignore_changes
    (warning,) = [w for w in program.warnings if not w.startswith("upgrade from")]
    assert warning == (
        f"nodeGroups.cpu: new sizes, and the desired size EKS holds was not read ({why}): the provider sends the one "
        "Pulumi recorded, and EKS scales the group to it at once, whatever its pods' PodDisruptionBudgets. Answer "
        "no, and run this update as `pulumi up --refresh`, which reads it first"
    )


def test_a_change_that_only_needs_a_note_is_said(last_outputs) -> None:
    """Nothing rolls, moves or starts again, but the update needs a note: the summary is printed for it. A desiredSize
    alone on an autoscaled group is left to the autoscaler; before, nothing was said."""
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    config = pinned()
    config[P + "nodeGroups"]["cpu"]["desiredSize"] += 1
    program = run_program("dev", config=config, fresh=True)
    (summary,) = program.warnings
    assert summary.startswith(f"upgrade from {last_update.LAST_UPDATE}:"), summary
    assert "note: nodeGroups.cpu: desiredSize 1 -> 2: left as it is, since the autoscaler owns" in summary, summary
    # nothing changed: nothing said
    last_outputs[last_update.CONFIG_OUTPUT] = deployed()
    assert run_program("dev", config=pinned(), fresh=True).warnings == []
