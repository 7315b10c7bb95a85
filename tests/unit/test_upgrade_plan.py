"""Kubernetes minor upgrades, offline: the rules ``python -m stacks plan --from`` holds a change to (one minor per
``pulumi up``, never down, the kubelet skew), what a change rolls and which running jobs it stops, the extended-support
price past a minor's end of standard support, and ``--from`` reading a git revision of the stack file."""

import copy
import json
import re
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from datetime import date
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from components.catalog import SERVICE_PRICES
from components.catalog.amis import AMI_RELEASES, NEWEST_AMI_RELEASE
from components.catalog.charts import CLUSTER_AUTOSCALER
from components.catalog.platform import (
    DEFAULT_KUBERNETES_VERSION,
    KUBERNETES_VERSIONS,
    SUPPORTED_KUBERNETES_VERSIONS,
    billed_extended,
    minor_number,
)
from components.catalog.timings import CREATION
from stacks.config import ConfigError, load_config
from stacks.costs import control_plane_line, estimate
from stacks.last_update import REGION_OUTPUT, ZONES_OUTPUT, LastUpdate, new_region_problem
from stacks.plan import Plan, build_plan
from stacks.plan.checklist import quota_needs
from stacks.plan.flavor_change import flavor_record, flavor_records
from stacks.plan.group_changes import resized_groups
from stacks.plan.installs import EKS_DEFAULT, installed_versions
from stacks.plan.job_changes import NEW_DATA_RERUN
from stacks.plan.minors import minor_problems, moved_default_problem, unpinned_note, unset_minor
from stacks.plan.network_change import deployed_zone_problems
from stacks.plan.nodes import RELEASE_SUFFIX, AmiPlan
from stacks.plan.old_config import PLATFORM_SOURCE, newest_minor
from stacks.plan.report import main as plan_main
from stacks.plan.storage_change import deleted_data, fsx_updated_in_place
from stacks.plan.templates import digest, launch_template, template_digests
from stacks.plan.upgrade import AddonChange, compare
from stacks.plan.upgrade_text import render_upgrade, upgrade_report
from stacks.stackfile import REPO
from stacks.yaml_text import load_yaml
from stacks.zones import RegionZones, Zone
from tests.day import TEST_DAY

P = "eks-training:"
DAY = TEST_DAY


def preset(stack: str) -> dict[str, Any]:
    data = load_yaml((REPO / f"Pulumi.{stack}.yaml").read_text()) or {}
    return copy.deepcopy(dict(data["config"]))


def plan_of(stack: str, config: dict[str, Any]) -> Plan:
    return build_plan(load_config("eks-training", stack, config, project_dir=REPO))


def _refused(old: Plan, new: Plan, **kwargs: Any) -> str:
    """The one problem :func:`compare` refuses the move from ``old`` to ``new`` with."""
    with pytest.raises(ConfigError) as err:
        compare(old, new, **kwargs)
    (problem,) = err.value.problems
    return problem


def variant(stack: str, **cluster: Any) -> dict[str, Any]:
    cfg = preset(stack)
    cfg[P + "cluster"] = {**(cfg.get(P + "cluster") or {}), **cluster}
    return cfg


def test_one_minor_up_rolls_every_group_and_names_the_jobs_it_stops() -> None:
    old = plan_of("p5", variant("p5", kubernetesVersion="1.35"))
    new = plan_of("p5", variant("p5", kubernetesVersion="1.36"))
    u = compare(old, new)
    assert (u.old_minor, u.new_minor) == ("1.35", "1.36")
    groups = {g.path: g for g in u.groups}
    assert set(groups) == {"systemNodeGroup", "nodeGroups.gpu"}
    gpu = groups["nodeGroups.gpu"]
    assert gpu.action == "roll" and any("1.35 -> 1.36" in r for r in gpu.reasons)
    assert [(j.name, j.pods, j.keeps, j.strategy) for j in gpu.jobs] == [("train", 2, 1, "rolling")]
    # the EFA group's cluster placement group has no room for a new node first: its pod stops before the new node is up
    assert gpu.node_update.name == "MINIMAL" and gpu.no_surge and "placement group" in gpu.no_surge
    # and Kueue placed train by topology on it, so with no free node it stops the whole job (FailFast)
    assert (
        gpu.jobs[0].topology
        and "unless an updated node of the group is free, Kueue stops the whole job" in gpu.jobs[0].what
    )
    assert groups["systemNodeGroup"].node_update.name == "DEFAULT" and groups["systemNodeGroup"].no_surge is None
    assert all("before the node" not in j.what for j in groups["systemNodeGroup"].jobs)
    # the evaluation runs on the system group: its roll stops it, not the GPU group's; it moves train's etcd
    assert [j.name for j in groups["systemNodeGroup"].jobs if not j.rendezvous] == [
        j for j, p in old.jobs.items() if p.group.name == "system"
    ]
    assert [j.name for j in groups["systemNodeGroup"].jobs if j.rendezvous] == ["train"]
    assert "vpc-cni" in {a.name for a in u.addons}
    # control plane, add-ons, then the slowest group: its nodes one at a time, the system group's new nodes first;
    # the autoscaler owns the system group's size (2-3): the model takes the most it may run, its maxSize
    system = groups["systemNodeGroup"]
    assert (gpu.nodes, gpu.up_to, system.nodes, system.up_to) == (2, True, 3, True)
    assert gpu.minutes == 2 * 20.0 and system.minutes == 4.0 + 3 * 20.0
    assert u.minutes == 10.0 + 1.0 + 4.0 + 3 * 20.0
    assert "  systemNodeGroup rolls: Kubernetes 1.35 -> 1.36 " in (text := render_upgrade(upgrade_report(u)))
    assert "\n    up to 3 node(s), updateStrategy" in text and "\n    up to 2 node(s), updateStrategy" in text, text
    assert (
        "the control plane (10 min), then the add-ons (1 min), then the slowest group's roll at 20 min a node\n"
        "    counted: an autoscaled group at its maxSize, 4 min more"
    ) in text, text


def test_the_efs_csi_driver_moving_says_the_mounts_may_stall() -> None:
    """The EFS CSI driver's node pods carry the mounts' TLS tunnels (aws-efs-csi-driver#973): when it moves, a
    running job's file access may stall, and the summary says to take the update between jobs."""
    u = compare(
        plan_of("dev", variant("dev", kubernetesVersion="1.35")),
        plan_of("dev", variant("dev", kubernetesVersion="1.36")),
    )
    assert "aws-efs-csi-driver" in {a.name for a in u.addons}
    (note,) = [n for n in u.notes if n.startswith("aws-efs-csi-driver: its node pods restart")]
    assert "file access may stall" in note and "between jobs" in note
    fsx = compare(
        plan_of("p5", variant("p5", kubernetesVersion="1.35")), plan_of("p5", variant("p5", kubernetesVersion="1.36"))
    )
    assert "aws-efs-csi-driver" not in {a.name for a in fsx.addons}
    assert not [n for n in fsx.notes if "TLS tunnels" in n]


def test_the_expected_duration_counts_defaults_first_new_nodes_only_where_the_slowest_group_takes_them() -> None:
    """The summary's model of the duration, and its legend, agree: a roll of p5's EFA group alone (MINIMAL: no new
    node first) is its nodes' time, and the legend names no DEFAULT; a one-minor move's slowest group is the system
    group, on DEFAULT."""
    old = preset("p5")
    new = copy.deepcopy(old)
    new[P + "nodeGroups"]["gpu"]["diskSizeGib"] += 100
    alone = render_upgrade(upgrade_report(compare(plan_of("p5", old), plan_of("p5", new))))
    assert "  expected duration: up to about 40 min, a model" in alone and "DEFAULT's first new nodes" not in alone, (
        alone
    )
    minor = compare(
        plan_of("p5", variant("p5", kubernetesVersion="1.35")), plan_of("p5", variant("p5", kubernetesVersion="1.36"))
    )
    text = render_upgrade(upgrade_report(minor))
    counted = "\n    counted: an autoscaled group at its maxSize, 4 min more for DEFAULT's first new nodes\n"
    assert "about 75 min" in text and counted in text, text


def _moved(stack: str, only: str = "", **job_changes: Any) -> dict[str, Any]:
    """The groups of a preset's one-minor move, by key, its jobs (or job ``only``) changed as given (both sides; room
    for 3 nodes)."""
    configs = []
    for minor in ("1.35", "1.36"):
        cfg = variant(stack, kubernetesVersion=minor)
        for name, job in cfg[P + "jobs"].items():
            if name == only or not only:
                job.update(job_changes)
        for group in cfg[P + "nodeGroups"].values():
            group["maxSize"] = max(group["maxSize"], 3)
        configs.append(cfg)
    u = compare(*(plan_of(stack, c) for c in configs))
    return {g.path: g for g in u.groups}


def test_a_roll_says_what_each_kind_of_job_goes_through_and_when_its_retries_run_out() -> None:
    """An MPI job's run starts again at each stop, its launcher's on the system group too; a TensorFlow worker's
    stop fails its peers. Each uses the job's retries, and a roll that uses more than it tolerates is named."""
    groups = _moved("mpi-horovod")
    nccl = next(j for j in groups["nodeGroups.gpu"].jobs if j.name == "nccl")
    assert "each stop ends mpirun" in nccl.what and (nccl.failures, nccl.limit) == (2, 3)
    assert "more than" not in nccl.what
    launchers = [j for j in groups["systemNodeGroup"].jobs if j.launcher]
    assert [j.name for j in launchers] == ["nccl", "horovod"]
    assert "its launcher (mpirun) is stopped once" in launchers[0].what
    tight = _moved("mpi-horovod", maxRestarts=1)
    nccl = next(j for j in tight["nodeGroups.gpu"].jobs if j.name == "nccl")
    assert "the roll's 2 failure(s) are more than the 1 it tolerates, so the job fails" in nccl.what
    assert "eks-training:jobs.nccl.maxRestarts" in nccl.what
    # an evicted launcher is a failed pod: a job that tolerates none fails with it
    (launcher, _) = [j for j in _moved("mpi-horovod", maxRestarts=0)["systemNodeGroup"].jobs if j.launcher]
    assert "the roll's 1 failure(s) are more than the 0 it tolerates" in launcher.what
    (tf,) = _moved("tensorflow", nodes=3, maxRestarts=1)["nodeGroups.gpu"].jobs
    assert "its other workers fail with it" in tf.what and (tf.failures, tf.limit) == (6, 3)
    assert "so the job fails" in tf.what
    (tf,) = _moved("tensorflow")["nodeGroups.gpu"].jobs
    assert (tf.failures, tf.limit) == (2, 6) and "so the job fails" not in tf.what
    # a pytorch job's stop costs no retry; on etcd, the system group's roll moves its rendezvous, which restarts it
    # (tests/real/test_training_real.py::test_etcd_restart_mid_training: the outage stops the workers, exit 69)
    groups = _moved("p5", "train", rendezvousBackend="etcd-v2")
    (train,) = groups["nodeGroups.gpu"].jobs
    assert train.failures == 0 and "retries" not in train.what
    (moved,) = [j for j in groups["systemNodeGroup"].jobs if j.rendezvous]
    assert moved.name == "train" and "its rendezvous, etcd, moves to a new system node" in moved.what
    assert not [j for j in _moved("p5", "train", rendezvousBackend="c10d")["systemNodeGroup"].jobs if j.rendezvous]


def _system(stack: str, **settings: Any) -> Plan:
    cfg = preset(stack)
    cfg[P + "systemNodeGroup"] = {**cfg[P + "systemNodeGroup"], **settings}
    return plan_of(stack, cfg)


def test_a_replaced_or_whenidle_system_group_moves_etcd_and_the_mpi_launchers() -> None:
    """etcd and an MPI job's launcher have no PodDisruptionBudget: the system group's replacement (EKS drains the old
    nodes as it deletes them) and its roll under whenIdle move them as a rolling one does."""
    (system,) = [
        g
        for g in compare(
            plan_of("mpi-horovod", preset("mpi-horovod")), _system("mpi-horovod", instanceType="c5.4xlarge")
        ).groups
        if g.path == "systemNodeGroup"
    ]
    assert system.action == "replace"
    assert [j.name for j in system.jobs if j.launcher] == ["nccl", "horovod"]
    text = render_upgrade(
        upgrade_report(
            compare(plan_of("mpi-horovod", preset("mpi-horovod")), _system("mpi-horovod", instanceType="c5.4xlarge"))
        )
    )
    assert "job nccl: its launcher (mpirun) is stopped once" in text, text
    assert "stopped: all 1 pod(s)" not in text
    cfg = preset("p5")
    cfg[P + "jobs"]["train"]["rendezvousBackend"] = "etcd-v2"
    cfg[P + "systemNodeGroup"] = {**cfg[P + "systemNodeGroup"], "updateStrategy": "whenIdle"}
    rolled = copy.deepcopy(cfg)
    rolled[P + "systemNodeGroup"]["diskSizeGib"] = 80
    (system,) = [g for g in compare(plan_of("p5", cfg), plan_of("p5", rolled)).groups if g.path == "systemNodeGroup"]
    assert system.action == "roll" and system.strategy == "whenIdle"
    (moved,) = [j for j in system.jobs if j.rendezvous]
    assert moved.name == "train" and "its rendezvous, etcd, moves to a new system node" in moved.what


def test_a_deleted_group_says_a_stop_past_the_nodes_shutdown_is_cut_short() -> None:
    """EKS deletes a group's nodes through evictions, which the job's budget holds back, and terminates a node still
    draining after 5 minutes (its delete-managed-node-group page); a pod still there gets the kubelet's graceful
    shutdown, at most 120 s on EKS's AL2023 nodes from 1.34 and none before (amazon-eks-ami#2390): a longer grace
    period may be cut short."""
    old = preset("g6")
    old[P + "jobs"]["train"]["stopGracePeriodSeconds"] = 300
    new = copy.deepcopy(old)
    new[P + "nodeGroups"]["gpu"]["capacityType"] = "SPOT"
    text = render_upgrade(upgrade_report(compare(plan_of("g6", old), plan_of("g6", new))))
    assert (
        "then terminates a node still draining after 5 minutes, and a pod still on it gets at most 120 s to stop: a "
        "stop checkpoint past that is cut short (its stopGracePeriodSeconds is 300)" in text
    ), text
    old[P + "jobs"]["train"]["stopGracePeriodSeconds"] = 120
    new[P + "jobs"]["train"]["stopGracePeriodSeconds"] = 120
    assert "cut short" not in render_upgrade(upgrade_report(compare(plan_of("g6", old), plan_of("g6", new))))
    # before 1.34 EKS's AMIs leave the kubelet's graceful shutdown off: a pod still there is not waited for at all
    at_1_33 = {"kubernetesVersion": "1.33", "extendedSupport": True}
    below = {**old, P + "cluster": {**(old.get(P + "cluster") or {}), **at_1_33}}
    later = {**new, P + "cluster": {**(new.get(P + "cluster") or {}), **at_1_33}}
    text = render_upgrade(upgrade_report(compare(plan_of("g6", below), plan_of("g6", later))))
    assert (
        "and a pod still on it is not waited for (EKS's nodes wait for pods from Kubernetes 1.34): its stop "
        "checkpoint is cut short (its stopGracePeriodSeconds is 120)" in text
    ), text
    # the kubelet is the one the record says the group runs: a group behind its cluster's minor waits as its own does
    behind = {"nodeGroups.gpu.releaseVersion": "1.33.5-20260714"}
    text = render_upgrade(upgrade_report(compare(plan_of("g6", old), plan_of("g6", new), deployed_versions=behind)))
    assert "a pod still on it is not waited for (EKS's nodes wait for pods from Kubernetes 1.34)" in text, text
    # so does a group removed from the stack file with the job that ran on it
    two = copy.deepcopy(old)
    two[P + "nodeGroups"]["old"] = copy.deepcopy(two[P + "nodeGroups"]["gpu"])
    two[P + "jobs"]["again"] = {**copy.deepcopy(two[P + "jobs"]["train"]), "nodeGroup": "old"}
    gone = {"nodeGroups.old.releaseVersion": "1.33.5-20260714"}
    (deleted,) = [g for g in compare(plan_of("g6", two), plan_of("g6", old), deployed_versions=gone).groups]
    assert deleted.action == "delete" and [j.shutdown_grace_s for j in deleted.jobs] == [0], deleted
    (deleted,) = [g for g in compare(plan_of("g6", two), plan_of("g6", old)).groups]
    assert [j.shutdown_grace_s for j in deleted.jobs] == [120], deleted


def test_a_rolling_group_says_a_grace_period_past_the_eviction_limit_fails_its_update() -> None:
    """EKS gives a drained node's pods 15 minutes to leave it, and a pod still stopping is still on it (the
    managed-node-update-behavior page): a grace period past that may fail the group's roll, the job's key named."""
    old = preset("g6")
    old[P + "jobs"]["train"]["stopGracePeriodSeconds"] = 1200
    new = copy.deepcopy(old)
    new[P + "nodeGroups"]["gpu"]["diskSizeGib"] = old[P + "nodeGroups"]["gpu"].get("diskSizeGib", 100) + 50
    (gpu,) = [g for g in compare(plan_of("g6", old), plan_of("g6", new)).groups if g.path == "nodeGroups.gpu"]
    assert gpu.action == "roll" and gpu.strategy == "rolling", gpu
    (train,) = gpu.jobs
    assert (
        "; its stopGracePeriodSeconds (1200) is longer than the 15 minutes EKS gives a node's pods to leave it: a pod "
        "still stopping may fail the group's update (PodEvictionFailure) or have its stop cut short; lower "
        "eks-training:jobs.train.stopGracePeriodSeconds, or set the group's updateStrategy to whenIdle" in train.what
    ), train.what
    old[P + "jobs"]["train"]["stopGracePeriodSeconds"] = new[P + "jobs"]["train"]["stopGracePeriodSeconds"] = 900
    (gpu,) = [g for g in compare(plan_of("g6", old), plan_of("g6", new)).groups if g.path == "nodeGroups.gpu"]
    assert "PodEvictionFailure" not in gpu.jobs[0].what, gpu.jobs[0].what


def test_skipping_a_minor_is_refused_with_the_steps() -> None:
    old = plan_of("dev", variant("dev", kubernetesVersion="1.34"))
    new = plan_of("dev", variant("dev", kubernetesVersion="1.36"))
    with pytest.raises(ConfigError) as err:
        compare(old, new)
    (problem,) = err.value.problems
    assert problem.startswith("eks-training:cluster.kubernetesVersion: 1.34 -> 1.36 skips 1 minor")
    assert "set 1.35, run `pulumi up`" in problem and "1.34 -> 1.35 -> 1.36" in problem


@pytest.mark.parametrize(
    ("running", "choices"),
    [
        ("1.35", "'1.35' to keep the cluster as it runs, or to '1.36' to upgrade it one minor"),
        ("1.34", "'1.34' to keep the cluster as it runs, or to '1.35' to upgrade it one minor"),
    ],
)
def test_a_default_that_moved_under_an_unset_minor_is_refused_with_both_choices(running: str, choices: str) -> None:
    """An unset minor follows the project's default: a new version that raises it would upgrade the running cluster
    unasked, so the move is refused, naming the key, the minor to keep and the next one."""
    old = plan_of("dev", variant("dev", kubernetesVersion=running))
    (problem,) = minor_problems(old, plan_of("dev", preset("dev")))
    assert problem.startswith(
        f"eks-training:cluster.kubernetesVersion is not set, and this project's default, 1.36, is not the minor the "
        f"stack's last finished update deployed, {running}: a new version of the project moved it"
    )
    assert problem.endswith(f"Set it to {choices}")
    assert minor_problems(plan_of("dev", preset("dev")), plan_of("dev", preset("dev"))) == []


def test_the_minors_a_refusal_offers_name_extended_support_where_they_left_standard_support() -> None:
    """On the test day 1.32 and 1.33 are past standard support: a minor a refusal offers there is one the config
    refuses without ``extendedSupport: true``, so the offer names the key too; a minor still supported, or a stack
    with the key set, gets no such clause."""
    problem = moved_default_problem("1.33", "1.36")
    assert problem.endswith(
        "Set it to '1.33' to keep the cluster as it runs, or to '1.34' to upgrade it one minor; 1.33 left EKS standard "
        "support: set eks-training:cluster.extendedSupport: true with it"
    ), problem
    assert "standard support" not in moved_default_problem("1.35", "1.36")
    old = plan_of("dev", variant("dev", kubernetesVersion="1.32", extendedSupport=True))
    (skip,) = minor_problems(old, plan_of("dev", variant("dev", kubernetesVersion="1.34")))
    assert "(1.32 -> 1.33 -> 1.34), one minor per `pulumi up`; 1.33 left EKS standard support: set " in skip, skip
    with_key = plan_of("dev", variant("dev", kubernetesVersion="1.34", extendedSupport=True))
    (skip,) = minor_problems(old, with_key)
    assert "standard support" not in skip, skip
    with pytest.raises(ConfigError) as err:  # the step itself, without the key: the config's refusal names it first
        plan_of("dev", variant("dev", kubernetesVersion="1.33"))
    assert "set eks-training:cluster.extendedSupport: true to run it (a running cluster moves one minor" in str(
        err.value
    ), err.value


def test_a_default_older_than_the_deployed_minor_is_refused_without_a_downgrade() -> None:
    """An older checkout of the project (its default below the deployed minor): only keeping the minor is offered."""
    problem = moved_default_problem("1.36", "1.35")
    assert "`pulumi up` never moves a cluster down a minor. Set it to '1.36' to keep the cluster as it runs" in problem
    assert problem.endswith("as it runs")


def test_a_jobs_only_stack_has_no_minor_to_pin() -> None:
    """A jobs-only stack runs on another stack's cluster and may not set a minor: no note, no refusal, no minor read
    into its old configuration."""
    folder = REPO / "examples" / "teams"
    config = load_yaml((folder / "Pulumi.vision.yaml").read_text())["config"]
    plan = build_plan(load_config("eks-training", "vision", config, project_dir=REPO))
    assert unpinned_note(plan) is None and not unset_minor(plan)
    code, out, err = _plan_cli(
        "--stack", "vision", "--stack-file", str(folder / "Pulumi.vision.yaml"), "--from", "HEAD"
    )
    assert code == 0, err
    assert "kubernetesVersion" not in out
    # its cluster, minor and node groups are the cluster stack's: the summary says so, and shows none of them
    assert (
        "\n  cluster: another stack's (cluster.stackReference): its own summary shows its Kubernetes minor, add-ons "
        "and node groups\n"
    ) in out, out
    assert "  Kubernetes 1." not in out and "node groups: " not in out and "expected duration" not in out, out
    assert not re.search(r"^  (systemNodeGroup|nodeGroups\.)", out, re.M), out


def test_a_cluster_stacks_rolls_name_the_teams_whose_jobs_they_may_stop() -> None:
    """The teams' jobs-only stacks run jobs on the cluster stack's groups, which its summary cannot list: a roll names
    the teams, and a group without this stack file's jobs is said to have none of them, not none at all."""
    folder = REPO / "examples" / "teams"
    config = load_yaml((folder / "Pulumi.shared.yaml").read_text())["config"]
    old = build_plan(load_config("eks-training", "shared", variant_of(config, "1.35"), project_dir=REPO))
    new = build_plan(load_config("eks-training", "shared", variant_of(config, "1.36"), project_dir=REPO))
    u = compare(old, new)
    (note,) = [n for n in u.notes if n.startswith("the teams'")]
    assert note.startswith(f"the teams' jobs-only stacks ({', '.join(config[P + 'teams'])}) may run jobs on ")
    assert all(g.path in note for g in u.groups) and "kubectl get jobs,mpijobs -A" in note, note
    text = render_upgrade(upgrade_report(u))
    assert "    no job of this stack file on it" in text and "no running job" not in text, text
    assert not [n for n in compare(old, old).notes if n.startswith("the teams'")]  # nothing rolls: no note


def test_a_cluster_stacks_deleted_group_names_the_teams_whose_jobs_it_may_stop() -> None:
    """A group the cluster stack's file no longer has goes at the end of the update, with the teams' jobs on it: the
    note names it, though nothing else rolls."""
    folder = REPO / "examples" / "teams"
    config = load_yaml((folder / "Pulumi.shared.yaml").read_text())["config"]
    spare = {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1}
    with_spare = {**config, P + "nodeGroups": {**config[P + "nodeGroups"], "spare": spare}}
    old = build_plan(load_config("eks-training", "shared", with_spare, project_dir=REPO))
    new = build_plan(load_config("eks-training", "shared", config, project_dir=REPO))
    u = compare(old, new)
    assert [(g.path, g.action) for g in u.groups] == [("nodeGroups.spare", "delete")], u.groups
    (note,) = [n for n in u.notes if n.startswith("the teams'")]
    assert "may run jobs on nodeGroups.spare:" in note, note


def variant_of(config: dict[str, Any], minor: str) -> dict[str, Any]:
    """``config`` with its cluster's minor set to ``minor``."""
    return {**config, P + "cluster": {**(config.get(P + "cluster") or {}), "kubernetesVersion": minor}}


def test_an_addon_pin_held_across_a_minor_move_is_named() -> None:
    """A version kept in cluster.addonVersions moves no add-on, so the add-on list leaves it out: the summary names
    it, as it is the old minor's build, and preflight checks it for the new minor."""
    pin = {"addonVersions": {"kube-proxy": "v1.35.4-eksbuild.1"}}
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35", **pin))
    u = compare(old, plan_of("dev", variant("dev", kubernetesVersion="1.36", **pin)))
    assert "kube-proxy" not in {a.name for a in u.addons}
    assert [n for n in u.notes if "addonVersions" in n] == [
        "eks-training:cluster.addonVersions.kube-proxy: held at v1.35.4-eksbuild.1 across 1.35 -> 1.36; preflight "
        "checks that EKS offers it for 1.36"
    ]
    same = compare(old, plan_of("dev", variant("dev", kubernetesVersion="1.35", **pin)))
    assert not [n for n in same.notes if "addonVersions" in n]


def test_a_vpc_cni_move_of_more_than_one_minor_is_refused_with_the_step() -> None:
    """EKS moves the VPC CNI one minor at a time (source key ``vpc-cni-one-minor-step``): an override of the old minor's
    removed at the next minor would jump two, and EKS would refuse it after the control plane moved."""
    held = {"addonVersions": {"vpc-cni": "v1.20.4-eksbuild.2"}}
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35", **held))
    with pytest.raises(ConfigError) as err:
        compare(old, plan_of("dev", variant("dev", kubernetesVersion="1.36")))
    (problem,) = err.value.problems
    assert problem.startswith(
        "eks-training:cluster.addonVersions.vpc-cni: v1.20.4-eksbuild.2 -> v1.22.4-eksbuild.3 moves 2 minors"
    )
    assert "set it to a v1.21 release EKS offers for Kubernetes 1.36" in problem and "then remove it" in problem
    # one minor at a time passes: held, or the pins' own move with the cluster
    assert compare(old, plan_of("dev", variant("dev", kubernetesVersion="1.36", **held)))
    assert compare(
        plan_of("dev", variant("dev", kubernetesVersion="1.35")),
        plan_of("dev", variant("dev", kubernetesVersion="1.36")),
    )
    down = plan_of("dev", variant("dev", kubernetesVersion="1.36", addonVersions={"vpc-cni": "v1.20.4-eksbuild.2"}))
    with pytest.raises(ConfigError, match="set it to a v1.21 release .* then set the version you want"):
        compare(
            plan_of("dev", variant("dev", kubernetesVersion="1.35", addonVersions={"vpc-cni": "v1.22.4-eksbuild.3"})),
            down,
        )


ADDON = "eks-pod-identity-agent"


def test_a_pod_identity_agent_move_of_more_than_one_minor_is_refused_with_the_step() -> None:
    """EKS updates the Pod Identity Agent one minor at a time too (source key ``pod-identity-agent-one-minor-step``):
    a version held in addonVersions set two minors on is refused, naming the one between."""
    held = variant("dev", addonVersions={"eks-pod-identity-agent": "v1.3.4-eksbuild.1"})
    with pytest.raises(ConfigError) as err:
        compare(plan_of("dev", held), plan_of("dev", variant("dev", addonVersions={ADDON: "v1.5.0-eksbuild.1"})))
    (problem,) = err.value.problems
    assert problem.startswith(
        f"eks-training:cluster.addonVersions.{ADDON}: v1.3.4-eksbuild.1 -> v1.5.0-eksbuild.1 moves 2 minors, and EKS "
        f"moves {ADDON} one minor at a time: set it to a v1.4 release"
    ), problem
    assert compare(plan_of("dev", held), plan_of("dev", variant("dev", addonVersions={ADDON: "v1.4.0-eksbuild.1"})))


def test_an_addon_that_moves_to_eks_default_is_noted() -> None:
    """An add-on this project pins for the old minor but not the new one moves to EKS's default, which ``pulumi up``
    reads then and which may be older than the one it runs: a note says how to keep it (source key
    ``cloudwatch-observability-versions-eks-blueprints`` for the 1.35 pin)."""
    old = plan_of("p5", variant("p5", kubernetesVersion="1.35"))
    u = compare(old, plan_of("p5", variant("p5", kubernetesVersion="1.36")))
    name = "amazon-cloudwatch-observability"
    assert AddonChange(name, "v5.3.1-eksbuild.1", None) in u.addons
    assert (
        f"{name}: EKS's default for 1.36 is read at `pulumi up` and may be older than v5.3.1-eksbuild.1. To keep "
        f"v5.3.1-eksbuild.1 or newer, set eks-training:cluster.addonVersions.{name} to a version EKS offers for 1.36"
    ) in "\n".join(u.notes)
    assert not [n for n in u.notes if n.startswith("vpc-cni: EKS's default")]  # pinned at both minors


def test_a_default_eks_raised_since_the_install_moves_the_addon_and_says_how_to_keep_it() -> None:
    """coredns, left to EKS's default, runs v1.11.4-eksbuild.2 while EKS gives v1.11.4-eksbuild.14 for the minor now
    (what ``pulumi up`` reads before the summary: :func:`stacks.preflight.cluster.eks_defaults`): the same stack file
    moves it, and a note names the pin that keeps it. A default equal to what runs moves nothing; a pinned add-on
    is not EKS's to move; a minor move names the new minor's default as the version, with no raised-default note."""
    dev = plan_of("dev", preset("dev"))
    live = {"coredns": ("v1.11.4-eksbuild.2", "v1.11.4-eksbuild.14"), "kube-proxy": ("v1.36.0-eksbuild.1",) * 2}
    u = compare(dev, dev, eks_defaults=live)
    assert u.addons == (AddonChange("coredns", "v1.11.4-eksbuild.2", "v1.11.4-eksbuild.14"),)
    assert u.notes == (
        "coredns: EKS raised its default for 1.36 to v1.11.4-eksbuild.14 since v1.11.4-eksbuild.2 was installed, so "
        "this update moves it. To keep v1.11.4-eksbuild.2, set eks-training:cluster.addonVersions.coredns to it",
    )
    assert "    coredns: v1.11.4-eksbuild.2 -> v1.11.4-eksbuild.14" in render_upgrade(upgrade_report(u)).splitlines()
    assert compare(dev, dev).addons == ()  # without what the cluster runs (plan --from): nothing to say
    # the stack file's own pin removed: the add-on moves to EKS's default, and no note blames EKS
    held = plan_of("dev", {**preset("dev"), P + "cluster": {"addonVersions": {"coredns": "v1.11.4-eksbuild.2"}}})
    unpinned = compare(held, dev, eks_defaults=live)
    assert AddonChange("coredns", "v1.11.4-eksbuild.2", "v1.11.4-eksbuild.14") in unpinned.addons
    assert not [n for n in unpinned.notes if "EKS raised its default" in n], unpinned.notes
    # vpc-cni is pinned for the minor: EKS's default does not move it
    assert compare(dev, dev, eks_defaults={"vpc-cni": ("v1.0.0-eksbuild.1", "v1.1.0-eksbuild.1")}).addons == ()
    # one minor up: the default of the new minor, named, from the version the cluster runs
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35"))
    new = plan_of("dev", variant("dev", kubernetesVersion="1.36"))
    moved = compare(old, new, eks_defaults={"coredns": ("v1.11.3-eksbuild.1", "v1.11.4-eksbuild.14")})
    assert AddonChange("coredns", "v1.11.3-eksbuild.1", "v1.11.4-eksbuild.14") in moved.addons
    assert not [n for n in moved.notes if "EKS raised its default" in n]


def _recorded(plan: Plan, **versions: str) -> dict[str, str]:
    """The ``deployedVersions`` record of ``plan``'s update, with ``versions`` (by name) as an older version of the
    project installed them."""
    return {**installed_versions(plan), **versions}


def test_an_addon_moves_from_the_version_the_last_update_recorded() -> None:
    """A record of vpc-cni v1.20.4 at 1.35 (an older version of the project pinned it; this one pins v1.21.1): the
    next minor's line starts from the record, and its two-minor step is refused before the control plane moves. A
    record of EKS's default, or none (a stack last updated before the record), starts from the configuration."""
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35"))
    new = plan_of("dev", variant("dev", kubernetesVersion="1.36"))
    with pytest.raises(ConfigError) as err:
        compare(old, new, deployed_versions=_recorded(old, **{"vpc-cni": "v1.20.4-eksbuild.2"}))
    (problem,) = err.value.problems
    assert problem.startswith(
        "eks-training:cluster.addonVersions.vpc-cni: v1.20.4-eksbuild.2 -> v1.22.4-eksbuild.3 moves 2 minors"
    ), problem
    one = compare(old, new, deployed_versions=_recorded(old, **{"vpc-cni": "v1.21.0-eksbuild.1"}))
    assert AddonChange("vpc-cni", "v1.21.0-eksbuild.1", "v1.22.4-eksbuild.3") in one.addons
    for versions in (_recorded(old, **{"vpc-cni": EKS_DEFAULT}), {}, None):
        u = compare(old, new, deployed_versions=versions)
        assert AddonChange("vpc-cni", "v1.21.1-eksbuild.1", "v1.22.4-eksbuild.3") in u.addons, versions
    # the record already at the new version: nothing moves
    there = compare(old, new, deployed_versions=_recorded(old, **{"vpc-cni": "v1.22.4-eksbuild.3"}))
    assert "vpc-cni" not in {a.name for a in there.addons}


def test_a_vpc_cni_step_this_version_makes_at_the_same_minor_starts_from_the_record() -> None:
    """An unchanged stack file whose record names a VPC CNI two minors below this version's pin for its minor: EKS
    would refuse that step too, so it is refused with the step between."""
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35"))
    with pytest.raises(ConfigError, match=r"v1\.19\.6-eksbuild\.1 -> v1\.21\.1-eksbuild\.1 moves 2 minors.* v1\.20 "):
        compare(old, old, deployed_versions=_recorded(old, **{"vpc-cni": "v1.19.6-eksbuild.1"}))
    assert compare(old, old, deployed_versions=_recorded(old, **{"vpc-cni": "v1.20.4-eksbuild.2"})).addons == ()


def test_going_down_a_minor_is_refused() -> None:
    old = plan_of("dev", preset("dev"))
    new = plan_of("dev", variant("dev", kubernetesVersion="1.35"))
    (problem,) = minor_problems(old, new)
    assert problem.startswith("eks-training:cluster.kubernetesVersion: 1.35 is older than the running 1.36")
    assert "set it back to 1.36" in problem


@pytest.mark.parametrize(("kubelet", "allowed"), [("1.32", False), ("1.33", True), ("1.35", True)])
def test_a_group_outside_the_kubelet_skew_is_refused(kubelet: str, allowed: bool) -> None:
    """A group whose nodes run a kubelet more than three minors older than the new API server (a group kept on an
    old release) is refused; three minors is within the skew."""
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35"))
    cpu = old.groups["cpu"]
    old = replace(old, groups={"cpu": replace(cpu, ami=AmiPlan(release_version=f"{kubelet}.1-20260714", pinned=True))})
    new = plan_of("dev", variant("dev", kubernetesVersion="1.36"))
    problems = minor_problems(old, new)
    assert (problems == []) is allowed, problems
    if not allowed:
        assert problems[0].startswith("eks-training:nodeGroups.cpu: its nodes run kubelet 1.32")


@pytest.mark.parametrize(("kubelet", "refusal"), [("1.32", "skew"), ("1.33", "eks"), ("1.35", None)])
def test_the_kubelet_skew_reads_the_release_the_record_says_a_group_runs(kubelet: str, refusal: Any) -> None:
    """The plan thinks dev's CPU group runs 1.35, as its cluster; the last update recorded it on an older release (a
    Capacity Block group keeps its minor while its block is active). Its kubelet is that release's: 1.32 under a 1.36
    API server is outside the skew; 1.33 is within it, but EKS moves a control plane only while every managed node
    group runs its minor (UpdateClusterVersion). Both are refused, naming the record's key and the roll to make first;
    a group on the cluster's minor moves with it."""
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35"))
    new = plan_of("dev", variant("dev", kubernetesVersion="1.36"))
    release = f"{kubelet}.13-20260714"
    record = {**installed_versions(old), "nodeGroups.cpu.releaseVersion": release}
    problems = minor_problems(old, new, recorded=record)
    assert (problems == []) is (refusal is None), problems
    if refusal is None:
        assert minor_problems(old, old, recorded={**record, "nodeGroups.cpu.releaseVersion": "1.33.1-20260714"}) == []
        return
    (problem,) = problems
    runs = f"kubelet {kubelet} until they roll" if refusal == "skew" else f"Kubernetes {kubelet}"
    assert problem.startswith(
        f"{P}nodeGroups.cpu: its nodes run {runs} (AMI release {release}, as the last update recorded it in "
        "deployedVersions' nodeGroups.cpu.releaseVersion), "
        + ("outside the skew" if refusal == "skew" else "and EKS moves the control plane only while every managed")
    ), problem
    assert f"roll it to 1.35 first (keep {P}cluster.kubernetesVersion at '1.35' and run `pulumi up --refresh`" in (
        problem
    )
    with pytest.raises(ConfigError) as err:  # `pulumi up` passes its record through
        compare(old, new, deployed_versions=record)
    assert err.value.problems == [problem]


@pytest.mark.parametrize("record", [None, {}, {"nodeGroups.cpu.releaseVersion": "not-a-release"}])
def test_without_a_recorded_release_the_kubelet_skew_reads_the_plan(record: Any) -> None:
    """A stack last updated by an earlier version (no release in its record), or a release not of EKS's form: the
    group's kubelet is its planned release's, as before."""
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35"))
    new = plan_of("dev", variant("dev", kubernetesVersion="1.36"))
    assert minor_problems(old, new, recorded=record) == []
    cpu = old.groups["cpu"]
    behind = replace(old, groups={"cpu": replace(cpu, ami=AmiPlan(release_version="1.32.1-20260714", pinned=True))})
    (problem,) = minor_problems(behind, new, recorded=record)
    assert problem.startswith(f"{P}nodeGroups.cpu: its nodes run kubelet 1.32 until they roll, outside"), problem
    assert problem.endswith(f"move {P}nodeGroups.cpu.amiRelease and the cluster one minor at a time"), problem


def test_when_idle_keeps_every_pod_and_an_unpinned_release_rolls_nothing() -> None:
    cfg = preset("p5")
    cfg[P + "nodeGroups"]["gpu"]["updateStrategy"] = "whenIdle"
    same = compare(plan_of("p5", preset("p5")), plan_of("p5", cfg))
    assert same.groups == ()  # the strategy alone rolls no node, nor does the newest release moving on

    old = plan_of("p5", {**cfg, P + "cluster": {"amiRelease": "v20260610"}})
    new = plan_of("p5", {**cfg, P + "cluster": {"amiRelease": "v20260714"}})
    u = compare(old, new)
    gpu = next(g for g in u.groups if g.path == "nodeGroups.gpu")
    assert gpu.reasons == ("AMI release 1.36.1-20260610 -> 1.36.2-20260714",)
    (train,) = gpu.jobs
    assert train.strategy == "whenIdle" and train.keeps == train.pods == 2
    assert "fails the group's update after 15 minutes" in train.what
    # EKS marks the old nodes unschedulable before draining: a pod that starts again cannot use them
    assert "it first marks the old nodes unschedulable, so a pod that starts again meanwhile cannot use them" in (
        train.what
    )
    assert "`kubectl uncordon -l eks.amazonaws.com/nodegroup=<the group's EKS name>`" in train.what
    # no control plane, no add-on; the system group's new nodes first, then its 3 nodes at most (autoscaled, 2-3)
    assert u.minutes == 4.0 + 3 * 20.0


def test_a_first_pin_to_the_release_a_new_group_starts_on_is_noted_without_a_record() -> None:
    """`plan --from` cannot see the release an unpinned group's nodes run: pinning the newest this project knows
    may roll them, and the comparison says so, in each group's line and a note; with the last update's record of
    that release it knows."""
    old, new = plan_of("p5", preset("p5")), plan_of("p5", variant("p5", amiRelease=NEWEST_AMI_RELEASE))
    unseen = compare(old, new, from_file=True)
    assert {g.path: g.reasons for g in unseen.groups} == {
        g.path: (
            f"AMI release pinned to {g.ami.release_version}: its nodes roll unless they run it already (which release "
            "they run is not recorded here)",
        )
        for g in new.all_groups
    }
    assert all(g.maybe for g in unseen.groups)
    shown = render_upgrade(upgrade_report(unseen))
    assert "node groups: none rolls" not in shown and "  nodeGroups.gpu may roll: AMI release pinned to " in shown
    assert ", a group that may roll as rolling" in shown  # the duration counts it
    noted = [n for n in unseen.notes if "other than" in n]
    assert [n.split(":")[0] for n in noted] == [g.path for g in new.all_groups], noted
    assert "`pulumi preview` reads the release they run where the last update recorded it" in noted[0]
    # a first pin to another release: the same, whatever the release
    older = plan_of("p5", variant("p5", amiRelease=list(AMI_RELEASES)[-2]))
    guessed = compare(old, older, from_file=True)
    assert {g.path for g in guessed.groups} == {g.path for g in older.all_groups}
    assert all("AMI release pinned to " in g.reasons[0] for g in guessed.groups)
    assert len([n for n in guessed.notes if f"other than {old.all_groups[0].ami.release_version}" in n]) == len(
        older.all_groups
    )
    running = {f"{g.path}{RELEASE_SUFFIX}": g.ami.release_version for g in new.all_groups}
    assert not [n for n in compare(old, new, deployed_versions=running).notes if "other than" in n]  # pulumi up
    ran_older = {name: list(AMI_RELEASES)[-2] for name in running}  # the nodes run an older release: a sure roll
    sure = render_upgrade(upgrade_report(compare(old, new, deployed_versions=ran_older)))
    assert "  nodeGroups.gpu rolls: " in sure and "may roll" not in sure
    assert not [n for n in compare(new, new, from_file=True).notes if "other than" in n]  # it runs its pin


def test_launch_template_and_instance_type_changes() -> None:
    base = preset("dev")
    bigger = copy.deepcopy(base)
    bigger[P + "nodeGroups"]["cpu"]["diskSizeGib"] = 100
    u = compare(plan_of("dev", base), plan_of("dev", bigger))
    (cpu,) = u.groups
    newest = f"AMI release -> EKS's newest for {DEFAULT_KUBERNETES_VERSION}"
    assert cpu.action == "roll" and cpu.reasons == ("launch template: root volume size 50 -> 100", newest)
    assert [j.name for j in cpu.jobs] == ["train"]

    other = copy.deepcopy(base)
    other[P + "nodeGroups"]["cpu"]["instanceTypes"] = ["c5.4xlarge"]
    (cpu,) = compare(plan_of("dev", base), plan_of("dev", other)).groups
    assert cpu.action == "replace" and cpu.reasons == ("instance types m5.xlarge -> c5.4xlarge",)
    assert [(j.name, j.strategy) for j in cpu.jobs] == [("train", "delete")]


def test_new_instance_tags_roll_every_group() -> None:
    """The stack's tags are in every launch template's instance and volume tags: a change is a new template version
    for every group, the system group (and its etcd) included."""
    base = preset("p4d")
    tagged = {**copy.deepcopy(base), P + "tags": {"team": "research"}}
    u = compare(plan_of("p4d", base), plan_of("p4d", tagged))
    tags = (
        "launch template: instance tags none -> team=research",
        f"AMI release -> EKS's newest for {DEFAULT_KUBERNETES_VERSION}",
    )
    assert {g.path: g.reasons for g in u.groups} == {"systemNodeGroup": tags, "nodeGroups.gpu": tags}
    assert any(j.rendezvous for g in u.groups for j in g.jobs)  # etcd moves
    assert "node groups: none rolls" not in render_upgrade(upgrade_report(u))


def test_a_launch_template_digest_ignores_unset_settings() -> None:
    """A setting a version adds unset is not in the template: it changes no digest, so it rolls nothing."""
    plan = plan_of("p5", preset("p5"))
    data = launch_template(plan, plan.groups["gpu"])
    assert (
        digest({**data, "new_setting": None}) == digest(data) == template_digests(plan)["nodeGroups.gpu.launchTemplate"]
    )
    deeper = {**data, "metadata_options": {**data["metadata_options"], "new_option": None}}
    assert digest(deeper) == digest(data) != digest({**data, "user_data": "other"})


def test_a_launch_template_this_version_changes_rolls_its_group() -> None:
    """The last update recorded each group's launch template digest: a digest the recorded configuration no longer
    has under this version (its node setup changed, say) rolls the group; the same digest, or none, rolls nothing."""
    plan = plan_of("dev", preset("dev"))
    now = template_digests(plan)
    assert compare(plan, plan, deployed_versions=now).groups == ()
    assert compare(plan, plan, deployed_versions={}).groups == ()
    older = {**now, "nodeGroups.cpu.launchTemplate": "0123456789abcdef"}
    (cpu,) = compare(plan, plan, deployed_versions=older).groups
    assert (cpu.path, cpu.action) == ("nodeGroups.cpu", "roll")
    newest = f"AMI release -> EKS's newest for {DEFAULT_KUBERNETES_VERSION}"
    assert cpu.reasons == ("launch template: this version of the project changes it", newest)
    # a stack file change names itself, once: the record then says nothing more
    bigger = copy.deepcopy(preset("dev"))
    bigger[P + "nodeGroups"]["cpu"]["diskSizeGib"] = 100
    (cpu,) = compare(plan, plan_of("dev", bigger), deployed_versions=older).groups
    assert cpu.reasons == ("launch template: root volume size 50 -> 100", newest)


def test_a_launch_template_change_with_the_minor_takes_the_minors_release_once() -> None:
    """A minor move sends the new version with the template: the Kubernetes reason names the release, alone."""
    old = variant("dev", kubernetesVersion="1.35")
    new = variant("dev", kubernetesVersion="1.36")
    new[P + "nodeGroups"]["cpu"]["diskSizeGib"] = 100
    cpu = next(g for g in compare(plan_of("dev", old), plan_of("dev", new)).groups if g.path == "nodeGroups.cpu")
    assert cpu.reasons == (
        "Kubernetes 1.35 -> 1.36 (AMI release EKS's newest release for 1.36)",
        "launch template: root volume size 50 -> 100",
    )


def _pinned_p5(release: str = "v20260610", own: bool = False, disk: int = 500) -> dict[str, Any]:
    """p5 with its AMI release pinned, for every group (``cluster.amiRelease``) or for its GPU group only."""
    cfg = preset("p5")
    if own:
        cfg[P + "nodeGroups"]["gpu"]["amiRelease"] = release
    else:
        cfg[P + "cluster"] = {**(cfg.get(P + "cluster") or {}), "amiRelease": release}
    cfg[P + "nodeGroups"]["gpu"]["diskSizeGib"] = disk
    return cfg


@pytest.mark.parametrize("own", [False, True])
def test_a_pinned_group_whose_launch_template_changes_alone_is_refused(own: bool) -> None:
    """A pinned release the update keeps while the launch template changes: EKS would take its newest release, and
    refuse every later update back to the pin. Refused, naming the key that pins it and the two ways out."""
    with pytest.raises(ConfigError) as err:
        compare(plan_of("p5", _pinned_p5(own=own)), plan_of("p5", _pinned_p5(own=own, disk=600)))
    (problem,) = err.value.problems
    pin = f"{P}nodeGroups.gpu.amiRelease" if own else f"{P}cluster.amiRelease"
    assert problem.startswith(
        f"{pin}: pins nodeGroups.gpu to AMI release 1.36.1-20260610, and this update changes its launch template "
        "(root volume size 500 -> 600) but not its release"
    ), problem
    assert "refuse every later `pulumi up`, which asks it to go back to 1.36.1-20260610" in problem
    assert f"Set {pin} to a newer release in this same update, or remove it" in problem


def test_a_first_pin_with_a_launch_template_change_is_noted_not_refused() -> None:
    """A first pin beside a template change, the release its nodes run unknown (``plan --from``): the provider sends
    the pin with the template where the nodes run another release, so no refusal; a note says what happens where
    they run the pin already. With the record of that release, refused as before."""
    old, new = plan_of("p5", preset("p5")), plan_of("p5", _pinned_p5("v20260714", own=True, disk=600))
    u = compare(old, new, from_file=True)
    (gpu,) = [g for g in u.groups if g.path == "nodeGroups.gpu"]
    assert gpu.action == "roll" and "launch template: root volume size 500 -> 600" in gpu.reasons
    (note,) = [n for n in u.notes if "already, its launch template change" in n]
    assert note == (
        "nodeGroups.gpu: if its nodes run 1.36.2-20260714 already, its launch template change moves them to EKS's "
        f"newest release for 1.36, and the next `pulumi up` refuses the pin: then raise {P}nodeGroups.gpu.amiRelease"
    )
    assert not [n for n in compare(old, plan_of("p5", _pinned_p5("v20260714", own=True))).notes if "already, its" in n]
    with pytest.raises(ConfigError):
        compare(old, new, deployed_versions=_runs(old, gpu="1.36.2-20260714"))


def test_a_pinned_group_takes_a_launch_template_change_with_a_new_release_or_unpinned() -> None:
    """Raised in the same update, the release goes with the template; unpinned, the group takes EKS's newest."""
    old = plan_of("p5", _pinned_p5())
    raised = compare(old, plan_of("p5", _pinned_p5("v20260714", disk=600)))
    (gpu,) = [g for g in raised.groups if g.path == "nodeGroups.gpu"]
    assert gpu.reasons == (
        "AMI release 1.36.1-20260610 -> 1.36.2-20260714",
        "launch template: root volume size 500 -> 600",
    )
    unpinned = _pinned_p5(disk=600)
    del unpinned[P + "cluster"]["amiRelease"]
    (gpu,) = [g for g in compare(old, plan_of("p5", unpinned)).groups if g.path == "nodeGroups.gpu"]
    assert gpu.reasons == ("launch template: root volume size 500 -> 600", "AMI release -> EKS's newest for 1.36")


def test_a_pinned_group_whose_launch_template_this_version_changes_is_refused() -> None:
    """The record says this version of the project changes the pinned system group's template: refused the same way."""
    plan = plan_of("p5", _pinned_p5())
    older = {**template_digests(plan), "systemNodeGroup.launchTemplate": "0123456789abcdef"}
    problem = _refused(plan, plan, deployed_versions=older)
    assert problem.startswith(
        f"{P}cluster.amiRelease: pins systemNodeGroup to AMI release 1.36.1-20260610, and this update changes its "
        "launch template (this version of the project changes it) but not its release"
    ), problem


def test_a_roll_that_changes_the_strategy_runs_under_the_old_one() -> None:
    """g5 takes a capacity reservation: its launch template changes (a roll) and its strategy moves DEFAULT ->
    MINIMAL in the same ``pulumi up``; the provider rolls first, so the group, its jobs and the note say DEFAULT."""
    base = preset("g5")
    base[P + "nodeGroups"]["gpu"]["availabilityZone"] = "us-east-1a"
    reserved = copy.deepcopy(base)
    reserved[P + "nodeGroups"]["gpu"]["capacityReservationId"] = "cr-0123456789abcdef0"
    u = compare(plan_of("g5", base), plan_of("g5", reserved))
    (gpu,) = u.groups
    assert gpu.action == "roll" and gpu.node_update.name == "DEFAULT" and gpu.no_surge is None
    assert gpu.jobs and all(j.surge for j in gpu.jobs)
    (note,) = [n for n in u.notes if "update strategy" in n]
    assert "moves DEFAULT -> MINIMAL" in note and "this roll runs under DEFAULT" in note and "room" in note


def test_a_capacity_block_group_rolls_only_at_zero_nodes_and_stops_no_pod() -> None:
    """p5's EFA group rolls MINIMAL on demand (its placement group), stopping its job's pods one at a time. On a
    Capacity Block it rolls only at 0 nodes: an active block keeps the group's launch template and version
    (components.nodegroup.TrainingNodeGroup._ignored_changes), and a block not active has no nodes. So its roll names
    no job, counts no time, and its line says why."""

    def rolled(**gpu: Any) -> Any:
        base = preset("p5")
        # placed without topology: the stopped pod waits for its node (with it, Kueue stops the whole job)
        base[P + "nodeGroups"]["gpu"].update(gpu, topology=False)
        bigger = copy.deepcopy(base)
        bigger[P + "nodeGroups"]["gpu"]["diskSizeGib"] = 600
        u = compare(plan_of("p5", base), plan_of("p5", bigger))
        (group,) = u.groups
        assert group.action == "roll" and group.node_update.name == "MINIMAL", group
        return u

    (on_demand,) = rolled().groups[0].jobs
    assert "before the node that replaces its own is up" in on_demand.what
    assert "one past 20 minutes makes Kueue stop the whole job" in on_demand.what  # waitForPodsReady's recoveryTimeout
    u = rolled(capacityType="CAPACITY_BLOCK", capacityReservationId="cr-0123456789abcdef0")
    (block,) = u.groups
    assert block.jobs == () and block.nodes == 0 and block.minutes == 0, block
    assert block.reasons[-1].startswith("only at 0 nodes, its Capacity Block not active"), block.reasons
    text = render_upgrade(upgrade_report(u))
    assert "    no running pod stops: it rolls with no node" in text and "roll at 20 min a node" not in text, text


def _sizes_moved(stack: str, **sizes: int) -> list[str]:
    old = preset(stack)
    new = copy.deepcopy(old)
    new[P + "nodeGroups"][next(iter(new[P + "nodeGroups"]))].update(sizes)
    u = compare(plan_of(stack, old), plan_of(stack, new))
    return [n for n in u.notes if "desired size" in n or "desiredSize" in n]


def test_new_sizes_of_an_autoscaled_group_send_the_desired_size_eks_holds() -> None:
    """``ignoreChanges`` keeps the desired size Pulumi recorded, and the provider would send it with any new size: EKS
    would scale the group to it at once (source keys ``pulumi-ignore-changes``, ``eks-scaling-config``). So
    ``pulumi up`` reads the one EKS holds for such a group (``resized_groups``), and the note says what it sends, and
    what happens where it cannot read it."""
    (note,) = _sizes_moved("dev", maxSize=4)
    assert note.startswith(
        "nodeGroups.cpu: maxSize 2 -> 4: `pulumi up` reads the desired size EKS holds for the group and sends it with "
        "the new sizes, moved within 0-4. Without preflight, or where EKS does not answer"
    ), note
    assert note.endswith("then run this update as `pulumi up --refresh`, which reads it first") and "loses" not in note
    old = preset("dev")
    grown = copy.deepcopy(old)
    grown[P + "nodeGroups"]["cpu"]["maxSize"] = 4
    assert resized_groups(plan_of("dev", old), plan_of("dev", grown)) == ("cpu",)
    # desiredSize alone: ignored, nothing sent; the note says so and what sizes the group instead
    (ignored,) = _sizes_moved("dev", desiredSize=2)
    assert ignored.startswith("nodeGroups.cpu: desiredSize 1 -> 2: left as it is, since the autoscaler owns"), ignored
    desired_only = copy.deepcopy(old)
    desired_only[P + "nodeGroups"]["cpu"]["desiredSize"] = 2
    assert resized_groups(plan_of("dev", old), plan_of("dev", desired_only)) == ()
    # a lower maxSize: the desired size sent is within it, so the nodes beyond it go at once
    (lowered,) = _sizes_moved("dev", maxSize=1, desiredSize=1, minSize=0)
    assert "; a group running more than 1 node(s) loses the others at once" in lowered, lowered
    # a new cluster name: every group is made again, nothing to read
    renamed = copy.deepcopy(grown)
    renamed[P + "clusterName"] = "another"
    assert resized_groups(plan_of("dev", old), plan_of("dev", renamed)) == ()


def test_a_fixed_fleets_new_sizes_need_no_refresh() -> None:
    """workshop runs no autoscaler: its groups' desired size is the stack file's, sent as it is."""
    assert _sizes_moved("workshop", minSize=3, desiredSize=3, maxSize=3) == []


def test_a_new_update_strategy_applies_after_the_system_groups_update() -> None:
    """The jobs' PodDisruptionBudgets change through the cluster's Kubernetes provider, once the system group's update
    ended: a roll beside it that comes with a new updateStrategy runs under the old one, and the budget it keeps is the
    old one's; the summary says so. A worker group's roll alone takes the new budgets at once."""
    old = variant("p5", kubernetesVersion="1.35")
    new = variant("p5", kubernetesVersion="1.36")
    new[P + "nodeGroups"]["gpu"]["updateStrategy"] = "whenIdle"
    u = compare(plan_of("p5", old), plan_of("p5", new))
    gpu = next(g for g in u.groups if g.path == "nodeGroups.gpu")
    assert gpu.strategy == "rolling" and [(j.strategy, j.keeps) for j in gpu.jobs] == [("rolling", 1)]
    assert any(
        n.startswith(
            "nodeGroups.gpu: its updateStrategy moves rolling -> whenIdle in the same `pulumi up` as the system"
        )
        and n.endswith("set it in a `pulumi up` of its own first")
        for n in u.notes
    ), u.notes
    # the GPU group's disk alone: no system group update, the new budget (all pods) holds the roll at once
    alone = preset("p5")
    idle = copy.deepcopy(alone)
    idle[P + "nodeGroups"]["gpu"].update(updateStrategy="whenIdle", diskSizeGib=600)
    u = compare(plan_of("p5", alone), plan_of("p5", idle))
    ((gpu_alone,),) = [[g for g in u.groups if g.path == "nodeGroups.gpu"]]
    assert gpu_alone.strategy == "whenIdle" and [(j.strategy, j.keeps) for j in gpu_alone.jobs] == [("whenIdle", 2)]
    assert not [n for n in u.notes if "updateStrategy moves" in n] and "keeps all 2 pod(s)" in gpu_alone.jobs[0].what
    # the strategy alone, the pulumi up of its own the note asks for: no roll, and the summary says what changed
    only = copy.deepcopy(alone)
    only[P + "nodeGroups"]["gpu"]["updateStrategy"] = "whenIdle"
    u = compare(plan_of("p5", alone), plan_of("p5", only))
    assert not u.groups and u.notes == (
        "nodeGroups.gpu: updateStrategy rolling -> whenIdle: its jobs' PodDisruptionBudgets change, no roll; its next "
        "roll runs under whenIdle",
    ), u.notes


def test_a_fixed_group_the_autoscaler_takes_over_outside_its_old_size_is_two_updates() -> None:
    """A fixed group (2/2/2) given an autoscaled range that excludes its size: the newly ignored desired size is sent as
    recorded (2), which EKS refuses below minSize 3."""
    old = preset("dev")
    old[P + "nodeGroups"]["cpu"].update(minSize=2, desiredSize=2, maxSize=2)
    inside, outside = copy.deepcopy(old), copy.deepcopy(old)
    inside[P + "nodeGroups"]["cpu"].update(minSize=0, desiredSize=2, maxSize=4)
    outside[P + "nodeGroups"]["cpu"].update(minSize=3, desiredSize=3, maxSize=6)
    assert compare(plan_of("dev", old), plan_of("dev", inside)).notes == ()
    (note,) = compare(plan_of("dev", old), plan_of("dev", outside)).notes
    assert note.startswith("nodeGroups.cpu: the autoscaler takes over its size") and "outside the new 3-6" in note


def test_the_upgrading_guides_example_is_the_programs_output() -> None:
    """docs/how-to/kubernetes-version.md shows ``--from HEAD`` on p5 at 1.35 -> 1.36: every line it shows (``...``
    elides add-on lines) is a line the program prints for that change."""
    guide = (REPO / "docs/how-to/kubernetes-version.md").read_text()
    block = guide.split("python -m stacks plan --stack p5 --from HEAD\n```\n\n```text\n", 1)[1].split("```", 1)[0]
    printed = render_upgrade(
        upgrade_report(
            compare(
                plan_of("p5", variant("p5", kubernetesVersion="1.35")),
                plan_of("p5", variant("p5", kubernetesVersion="1.36")),
                "HEAD:Pulumi.p5.yaml",
            )
        )
    ).splitlines()
    assert _not_printed(block, printed, at_least=5) == [], "\n".join(printed)


def test_the_upgrade_pages_short_example_is_the_programs_output() -> None:
    """docs/how-to/upgrading.md shows the summary of dev's stack file given ``tags``, shortened: every line it shows is
    a line the program prints for that change, or, where it ends in ``, ...``, the start of one."""
    guide = (REPO / "docs/how-to/upgrading.md").read_text()
    block = guide.split("the dev stack's file gains `tags` (shortened):\n\n```text\n", 1)[1].split("```", 1)[0]
    tagged = preset("dev")
    tagged[P + "tags"] = {"team": "ml"}
    printed = render_upgrade(
        upgrade_report(compare(plan_of("dev", preset("dev")), plan_of("dev", tagged), "HEAD:Pulumi.dev.yaml"))
    ).splitlines()
    assert _not_printed(block, printed, at_least=3) == [], "\n".join(printed)


def _not_printed(block: str, printed: list[str], *, at_least: int) -> list[str]:
    """The lines of a page's example (``block``) the program did not print: a line ``...`` elides lines, one ending in
    ``, ...`` is the start of a printed line; the example shows more than ``at_least`` lines."""
    shown = [line for line in block.splitlines() if line.strip() != "..."]
    assert len(shown) > at_least, block

    def printed_as(line: str) -> bool:
        if line.endswith(", ..."):
            return any(p.startswith(line.removesuffix(" ...")) for p in printed)
        return line in printed

    return [line for line in shown if not printed_as(line)]


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_VERSIONS)
def test_extended_support_is_billed_from_the_end_of_standard_support(minor: str) -> None:
    v = KUBERNETES_VERSIONS[minor]
    before = control_plane_line(minor, date.fromordinal(v.end_of_standard.toordinal() - 1))
    on = control_plane_line(minor, v.end_of_standard)
    assert before.running == SERVICE_PRICES["eks-cluster"].usd and not billed_extended(minor, before_day(v))
    assert on.running == SERVICE_PRICES["eks-cluster-extended"].usd
    assert f"standard support until {v.end_of_standard.isoformat()}" in before.basis
    assert on.basis.startswith(f"extended support: {minor} left standard support on {v.end_of_standard}")


def before_day(v: Any) -> date:
    return date.fromordinal(v.end_of_standard.toordinal() - 1)


def test_the_estimate_prices_the_minor_on_the_plans_day() -> None:
    """Opting in to extended support costs nothing while the minor is in standard support; past its end the
    control plane costs the extended price, on the day the plan is made."""
    opted = plan_of("dev", variant("dev", kubernetesVersion="1.34", extendedSupport=True))
    standard = plan_of("dev", preset("dev"))
    assert estimate(opted).running == estimate(standard).running
    later = estimate(opted, date(2026, 12, 2))
    diff = SERVICE_PRICES["eks-cluster-extended"].usd - SERVICE_PRICES["eks-cluster"].usd
    assert round((later.running or 0) - (estimate(opted).running or 0), 3) == round(diff, 3)


def _plan_cli(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = plan_main(list(args))
    return code, out.getvalue(), err.getvalue()


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


def test_from_a_git_revision(tmp_path: Path) -> None:
    import yaml

    stack_file = tmp_path / "Pulumi.dev.yaml"
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())

    def write(minor: str) -> None:
        stack_file.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion=minor)}))

    _git(tmp_path, "init", "-q")
    write("1.34")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "1.34")
    write("1.35")
    _git(tmp_path, "commit", "-q", "-am", "1.35")
    write("1.36")

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert out.startswith("upgrade from HEAD:Pulumi.dev.yaml:\n  Kubernetes 1.35 -> 1.36: the control plane first")
    assert "nodeGroups.cpu rolls: Kubernetes 1.35 -> 1.36" in out and "job train:" in out

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD~1")
    assert code == 2 and out == ""
    assert "eks-training:cluster.kubernetesVersion: 1.34 -> 1.36 skips 1 minor" in err
    assert "no resource" not in err  # plan --from creates nothing; only pulumi up's refusal says so

    code, _, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "no-such-revision")
    assert code == 2 and "git has no Pulumi.dev.yaml at revision 'no-such-revision'" in err


def test_from_a_revision_of_another_version_of_the_project_says_what_it_cannot_see(tmp_path: Path, monkeypatch) -> None:
    """After a ``git pull``, ``--from ORIG_HEAD`` plans both stack files with the new version: a line first, and a
    note, say that the new version's own changes do not show there, and where they do. This project's files are
    compared at the revision and in the working folder (its folders under ``ROOT``); where git does not hold them (an
    installed library) nothing is said."""
    from stacks.plan import old_config

    stack_file = _committed_dev(tmp_path, "1.36")
    code_file = tmp_path / "components" / "setup.py"
    code_file.parent.mkdir()
    code_file.write_text("STEP = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "version 1")
    monkeypatch.setattr(old_config, "ROOT", tmp_path)
    assert not old_config.project_changed(tmp_path, "HEAD")
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0 and "the stack file's changes only" not in out and "new version" not in out, out + err
    assert "  node groups: none rolls\n" in out, out

    image_file = tmp_path / "training" / "train.py"  # an image's folder: read at the revision, so its change shows
    image_file.parent.mkdir()
    image_file.write_text("STEP = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "an image")
    image_file.write_text("STEP = 2\n")
    assert not old_config.project_changed(tmp_path, "HEAD")

    code_file.write_text("STEP = 2\n")  # as git pull leaves it: the new version in the working folder
    assert old_config.project_changed(tmp_path, "HEAD")
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert out.startswith(
        "upgrade from HEAD:Pulumi.dev.yaml:\n  the stack file's changes only, and its image and code folders': this "
        "project's other changes since then do not show (a note says where they do)\n"
    ), out
    assert "  note: HEAD:Pulumi.dev.yaml: this project's code differs between HEAD and the working folder" in out, out
    assert "`pulumi preview` compares with what the last update recorded" in out, out
    # what it cannot see is not said to be nothing
    assert "  node groups: none rolls for the stack file's changes\n" in out, out
    assert "  expected duration: no control plane, add-on or node group update for the stack file's changes\n" in out
    assert (
        '"projectChanged": true'
        in _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD", "--json")[1]
    )
    # the project's files outside the repository: an installed library, which git does not hold
    monkeypatch.setattr(old_config, "ROOT", REPO)
    assert not old_config.project_changed(tmp_path, "HEAD")


def test_from_a_file_says_it_reads_the_folders_as_they_are_now(tmp_path: Path) -> None:
    """``--from FILE`` has no revision to read the image and code folders at: a note says the comparison cannot see
    a change to them."""
    import yaml

    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion="1.36")}))
    code, out, err = _plan_cli("--stack", "dev", "--from", str(old))
    assert code == 0, err
    assert f"  note: {old} is a file: the image and code folders are read as they are now" in out, out


def test_a_pin_below_the_default_an_unpinned_file_is_read_with_is_compared_as_the_running_minor(tmp_path: Path) -> None:
    """An old file without a minor is read at this version's default; a new pin EKS could not move to from it (lower,
    or past one minor) is the minor the cluster most likely runs, kept after a project update raised the default, so
    the comparison takes it and says so, rather than refuse and tell the user to upgrade. A pin one minor up is still
    compared with the default: an upgrade."""
    import yaml

    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump({"config": preset("dev")}))
    (dmaj, dmin) = minor_number(DEFAULT_KUBERNETES_VERSION)
    below = f"{dmaj}.{dmin - 1}"
    assert below in SUPPORTED_KUBERNETES_VERSIONS
    new.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion=below)}))
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(new), "--from", str(old))
    assert code == 0, err
    assert f"  Kubernetes {below}: unchanged" in out and "node groups: none rolls" in out
    assert (
        f"this version's default, {DEFAULT_KUBERNETES_VERSION}, cannot be what runs under the {below} the stack file "
        f"pins: compared as if the cluster runs {below}"
    ) in out
    assert f"If it runs {DEFAULT_KUBERNETES_VERSION}, `pulumi up` refuses {below}" in out
    assert "read as this version's default" not in out

    # the same pin against an old file that sets the default: the cluster runs it, and the move down is refused
    old.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion=DEFAULT_KUBERNETES_VERSION)}))
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(new), "--from", str(old))
    assert code == 2 and f"{below} is older than the running {DEFAULT_KUBERNETES_VERSION}" in err

    # the default pinned: compared with the default, as before
    old.write_text(yaml.safe_dump({"config": preset("dev")}))
    new.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion=DEFAULT_KUBERNETES_VERSION)}))
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(new), "--from", str(old))
    assert code == 0, err
    assert f"read as this version's default, {DEFAULT_KUBERNETES_VERSION}; if the running cluster runs" in out


def _committed_dev(tmp_path: Path, minor: str) -> Path:
    """A git repository in ``tmp_path`` of one commit: ``Pulumi.yaml`` and a dev stack file pinned to ``minor``."""
    import yaml

    stack_file = tmp_path / "Pulumi.dev.yaml"
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    _git(tmp_path, "init", "-q")
    stack_file.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion=minor)}))
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", minor)
    return stack_file


def test_a_revision_that_is_head_is_said_to_be(tmp_path: Path) -> None:
    """``--from ORIG_HEAD`` after a second ``git pull`` that brings nothing (it moves ORIG_HEAD to HEAD) compares with
    the last commit, not the deployed version: the plan says so, rather than an all-clear alone."""
    stack_file = _committed_dev(tmp_path, "1.35")
    _git(tmp_path, "update-ref", "ORIG_HEAD", "HEAD")

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "ORIG_HEAD")
    assert code == 0, err
    assert "  note: ORIG_HEAD is HEAD (" in out and "git reflog" in out, out
    assert "a new run (" not in out, out
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0 and "is HEAD (" not in out, out

    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "pulled")
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "ORIG_HEAD")
    assert code == 0 and "is HEAD (" not in out, out


def test_from_a_minor_that_left_standard_support_since(tmp_path: Path) -> None:
    """The old configuration's minor left standard support after it was deployed (1.33 on the test day): ``--from``
    still compares with it, as that is the upgrade EKS's calendar asks for, and the new file is held to the window."""
    import yaml

    stack_file = _committed_dev(tmp_path, "1.33")
    stack_file.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion="1.34")}))

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert out.startswith("upgrade from HEAD:Pulumi.dev.yaml:\n  Kubernetes 1.33 -> 1.34: the control plane first")

    _git(tmp_path, "commit", "-q", "-am", "1.34")
    stack_file.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion="1.33")}))
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 2 and "1.33 left EKS standard support" in err, err


def test_the_catalog_reader_finds_the_default_minor() -> None:
    """``--from REV`` reads an unset minor as REV's default from the catalog's source: the reader finds today's."""
    import components.catalog.platform as platform

    assert Path(platform.__file__).as_posix().endswith(PLATFORM_SOURCE)
    assert newest_minor(Path(platform.__file__).read_text()) == DEFAULT_KUBERNETES_VERSION
    assert newest_minor('KubernetesVersion(\n    minor="1.9",\n)\nKubernetesVersion(minor="1.10")') == "1.10"
    assert newest_minor("no catalog here") is None
    # the catalog once wrote its default as a literal, below a newer minor it listed
    old_catalog = 'SUPPORTED = ("1.32", "1.33", "1.34")\nDEFAULT_KUBERNETES_VERSION = "1.33"\n'
    assert newest_minor(old_catalog + 'KubernetesVersion(minor="1.34")') == "1.33"


def test_from_a_revision_whose_default_was_older(tmp_path: Path) -> None:
    """A stack file that never set the minor, deployed at a revision whose default was older: ``--from`` reads that
    revision's default from its catalog, shows the upgrade the new default makes, and says why."""
    import yaml

    stack_file = tmp_path / "Pulumi.dev.yaml"
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    assert P + "cluster" not in preset("dev")
    stack_file.write_text(yaml.safe_dump({"config": preset("dev")}))
    catalog = tmp_path / PLATFORM_SOURCE
    catalog.parent.mkdir(parents=True)
    now = minor_number(DEFAULT_KUBERNETES_VERSION)
    before, two_before = (f"{now[0]}.{now[1] - n}" for n in (1, 2))
    _git(tmp_path, "init", "-q")
    catalog.write_text(f'KubernetesVersion(minor="{two_before}")\n')
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "two minors back")
    catalog.write_text(f'KubernetesVersion(minor="{two_before}")\nKubernetesVersion(\n    minor="{before}",\n)\n')
    _git(tmp_path, "commit", "-q", "-am", "one minor back")

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 2 and out == ""
    assert f"the minor HEAD:Pulumi.dev.yaml deploys, {before}: a new version of the project moved it" in err
    read = (
        f"note: HEAD:Pulumi.dev.yaml does not set eks-training:cluster.kubernetesVersion: {before}, the default at HEAD"
    )
    assert f"{read}, and the default now is {DEFAULT_KUBERNETES_VERSION}" in err

    # the user chooses the upgrade: the summary shows it
    stack_file.write_text(yaml.safe_dump({"config": variant("dev", kubernetesVersion=DEFAULT_KUBERNETES_VERSION)}))
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert f"Kubernetes {before} -> {DEFAULT_KUBERNETES_VERSION}: the control plane first" in out and read in out
    assert "is not set" not in out
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD~1")
    assert code == 2 and f"{two_before} -> {DEFAULT_KUBERNETES_VERSION} skips 1 minor" in err
    assert f"{two_before}, the default at HEAD~1" in err

    # another project's repository, the library installed: no catalog at the revision to read
    stack_file.write_text(yaml.safe_dump({"config": preset("dev")}))
    _git(tmp_path, "rm", "-q", PLATFORM_SOURCE)
    _git(tmp_path, "commit", "-q", "-am", "library installed")
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert f"Kubernetes {DEFAULT_KUBERNETES_VERSION}: unchanged" in out
    assert f"{PLATFORM_SOURCE} at HEAD cannot be read for the default then" in out
    assert "eks-training:cluster.kubernetesVersion is not set, so a new stack gets this project's default" in out


def test_a_pinned_stack_has_no_unpinned_note() -> None:
    assert unpinned_note(plan_of("dev", variant("dev", kubernetesVersion=DEFAULT_KUBERNETES_VERSION))) is None
    note = unpinned_note(plan_of("dev", preset("dev"))) or ""
    assert f"pin it (eks-training:cluster.kubernetesVersion: '{DEFAULT_KUBERNETES_VERSION}')" in note
    # what a raised default does: the update stops and asks (stacks.last_update), it never upgrades by itself
    assert "after a project update that raises the default, `pulumi up` stops until you choose the minor" in note


def let_go(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with ``storage.deleteOldData``: the update may delete the file system the stack made."""
    return {**cfg, P + "storage": {**(cfg.get(P + "storage") or {}), "deleteOldData": True}}


def _storage(stack: str, **settings: Any) -> dict[str, Any]:
    cfg = preset(stack)
    cfg[P + "storage"] = {**(cfg.get(P + "storage") or {}), **settings}
    return cfg


@pytest.mark.parametrize(
    "stack, old, new, said",
    [
        (
            "dev",
            {},
            {P + "clusterName": "other"},
            "eks-training:clusterName eks-training-dev -> other: every resource of the stack is replaced under the "
            "new name (the cluster, its nodes and jobs, the VPC, the file system); the old file system is deleted "
            "with its data (storage.retainOnDelete was not applied)",
        ),
        (
            "p5",
            {},
            {P + "storage": {"backend": "efs", "namespace": "training-efs"}},
            "eks-training:storage.backend fsx -> efs: a new, empty file system; the old file system is deleted with "
            "its data, and the data bucket the stack made, with everything in it (the datasets and what was exported) "
            "(storage.retainOnDelete was not applied)",
        ),
        (
            "dev",
            {P + "storage": {"retainOnDelete": True}},
            {P + "storage": {"retainOnDelete": True, "fileSystemId": "fs-0123456789abcdef0"}},
            "eks-training:storage.fileSystemId unset -> fs-0123456789abcdef0: the jobs get another file system; "
            "storage.retainOnDelete keeps the old file system in AWS",
        ),
        (
            "dev",
            {},
            {P + "storage": {"fileSystemId": "fs-0123456789abcdef0"}},
            "eks-training:storage.fileSystemId unset -> fs-0123456789abcdef0: the jobs get another file system; the "
            "old file system is deleted with its data (storage.retainOnDelete was not applied)",
        ),
        (
            "dev",
            {P + "storage": {"fileSystemId": "fs-0123456789abcdef0"}},
            {P + "storage": {"fileSystemId": "fs-0123456789abcdef0"}, P + "clusterName": "other"},
            "eks-training:clusterName eks-training-dev -> other: every resource of the stack is replaced under the "
            "new name (the cluster, its nodes and jobs, the VPC)",
        ),
        (
            "dev",
            {},
            {P + "storage": {"pvcName": "results"}},
            "eks-training:storage.pvcName: the claim training/shared-data -> training/results; on EFS each claim has a "
            "folder of its own, so the jobs get that claim's folder, empty unless the claim was used before (the old "
            "folder stays)",
        ),
        (
            "dev",
            {},
            {P + "storage": {"namespace": "ml", "pvcName": "results"}},
            "eks-training:storage.namespace and eks-training:storage.pvcName: the claim training/shared-data -> "
            "ml/results; on EFS each claim has a folder of its own, so the jobs get that claim's folder, empty unless "
            "the claim was used before (the old folder stays)",
        ),
        (
            "p5",
            {},
            {P + "nodeGroups": {"gpu": {**preset("p5")[P + "nodeGroups"]["gpu"], "availabilityZone": "us-east-1b"}}},
            "eks-training:nodeGroups.gpu.availabilityZone us-east-1a -> us-east-1b: FSx keeps a file system in the "
            "subnet it was made in: a new, empty file system; the old file system is deleted with its data "
            "(storage.retainOnDelete was not applied)",
        ),
        (
            "p5",
            {P + "storage": {"backend": "fsx", "fsx": {"storageCapacityGib": 2400, "throughputPerTib": 500}}},
            {P + "storage": {"backend": "fsx", "fsx": {"storageCapacityGib": 1200, "throughputPerTib": 500}}},
            "eks-training:storage.fsx.storageCapacityGib 2400 -> 1200: FSx grows a file system but never shrinks it: "
            "a new, empty file system; the old file system is deleted with its data (storage.retainOnDelete was not "
            "applied)",
        ),
        (
            "p5",
            {P + "storage": {"backend": "fsx", "fsx": {"metadataMode": "USER_PROVISIONED", "metadataIops": 6000}}},
            {P + "storage": {"backend": "fsx", "fsx": {"metadataMode": "USER_PROVISIONED", "metadataIops": 3000}}},
            "eks-training:storage.fsx.metadataIops 6000 -> 3000: FSx raises a file system's metadata IOPS but never "
            "lowers them: a new, empty file system; the old file system is deleted with its data "
            "(storage.retainOnDelete was not applied)",
        ),
        (
            "p5",
            {P + "storage": {"backend": "fsx", "fsx": {"metadataMode": "AUTOMATIC", "storageCapacityGib": 2400}}},
            {
                P + "storage": {
                    "backend": "fsx",
                    "fsx": {"metadataMode": "USER_PROVISIONED", "metadataIops": 1500, "storageCapacityGib": 2400},
                }
            },
            "eks-training:storage.fsx.metadataMode AUTOMATIC -> USER_PROVISIONED at 1500 IOPS, below the 3000 "
            "AUTOMATIC gives 2400 GiB (set eks-training:storage.fsx.metadataIops to at least that to keep the file "
            "system): a new, empty file system; the old file system is deleted with its data "
            "(storage.retainOnDelete was not applied)",
        ),
        (
            "p5",
            {},
            {P + "clusterName": "other"},
            "eks-training:clusterName eks-training-p5 -> other: every resource of the stack is replaced under the "
            "new name (the cluster, its nodes and jobs, the VPC, the file system); the old file system is deleted "
            "with its data, and the data bucket the stack made, with everything in it (the datasets and what was "
            "exported) (storage.retainOnDelete was not applied)",
        ),
        (
            "p5",
            {
                P + "storage": {
                    "fsx": {**preset("p5")[P + "storage"]["fsx"], "dataRepository": {"s3Path": "s3://mine/"}}
                }
            },
            {P + "storage": {"backend": "efs", "namespace": "training-efs"}},
            "eks-training:storage.backend fsx -> efs: a new, empty file system; the old file system is deleted with "
            "its data (storage.retainOnDelete was not applied)",
        ),
    ],
    ids=[
        "cluster name",
        "backend",
        "file system id, kept",
        "file system id",
        "cluster name, an adopted file system",
        "claim name",
        "claim namespace and name",
        "fsx zone",
        "fsx smaller",
        "fsx fewer metadata iops",
        "fsx metadata to user-provisioned",
        "cluster name on fsx",
        "backend, an existing bucket",
    ],
)
def test_a_change_that_replaces_the_cluster_or_the_jobs_data_is_named(
    stack: str, old: dict[str, Any], new: dict[str, Any], said: str
) -> None:
    """What ``plan --from`` and ``pulumi up``'s summary say where the jobs would lose sight of their data."""
    before, after = preset(stack), preset(stack)
    for cfg, changes in ((before, old), (after, new)):
        for k, v in changes.items():
            cfg[k] = {**(cfg.get(k) or {}), **v} if isinstance(v, dict) else v
    if "efs" in json.dumps(new) and P + "storage" in after:  # an FSx preset moved to EFS drops its FSx settings
        after[P + "storage"].pop("fsx", None)
    # the refusal (deleted_data) and the data line decide alike: a line that deletes is refused without deleteOldData
    assert bool(deleted_data(plan_of(stack, before), plan_of(stack, after))) == (" is deleted with " in said)
    if " is deleted with " in said:  # refused without it (test_an_update_that_deletes_the_stacks_data_is_refused)
        after = let_go(after)
    u = compare(plan_of(stack, before), plan_of(stack, after))
    assert u.data == (said,)
    assert f"\n  data: {said}\n" in render_upgrade(upgrade_report(u))


def test_a_version_that_makes_the_fsx_file_system_again_is_refused() -> None:
    """Each update records the FSx file system's fixed settings. A version of the project with another deployment or
    storage type, or a lower Lustre version, makes it again, empty (pulumi-aws ``fsx.LustreFileSystem``): refused
    without deleteOldData, a data line with it. A higher Lustre version is upgraded in place: a note. Nothing where the
    record predates them or names the same."""
    from stacks.plan.storage_change import FSX_RECORD

    old = plan_of("p5", preset("p5"))
    recorded = installed_versions(old)
    assert recorded[FSX_RECORD] == "PERSISTENT_2 SSD, Lustre 2.15"
    assert FSX_RECORD not in installed_versions(plan_of("dev", preset("dev")))  # EFS
    for was in ("PERSISTENT_2 SSD, Lustre 2.16", "PERSISTENT_2 INTELLIGENT_TIERING, Lustre 2.15"):
        change = f"this version of the project makes the FSx file system {was} -> PERSISTENT_2 SSD, Lustre 2.15"
        moved = {**recorded, FSX_RECORD: was}
        assert _refused(old, plan_of("p5", preset("p5")), deployed_versions=moved).startswith(
            f"{change}: the update deletes the file system the stack made, with the jobs' folders."
        )
        u = compare(old, plan_of("p5", let_go(preset("p5"))), deployed_versions=moved)
        assert u.data == (
            f"{change}: a new, empty file system; the old file system is deleted with its data "
            "(storage.retainOnDelete was not applied)",
        )
        assert u.data_empty
    lower = {**recorded, FSX_RECORD: "PERSISTENT_2 SSD, Lustre 2.12"}
    u = compare(old, plan_of("p5", preset("p5")), deployed_versions=lower)
    assert u.data == () and not u.data_empty
    assert (
        "this version of the project upgrades the FSx file system PERSISTENT_2 SSD, Lustre 2.12 -> PERSISTENT_2 SSD, "
        "Lustre 2.15 in place: the file system stays, with its data, and may be slow or unavailable while FSx updates "
        "it; take it between jobs"
    ) in u.notes, u.notes
    for same in (recorded, {k: v for k, v in recorded.items() if k != FSX_RECORD}):
        u = compare(old, plan_of("p5", preset("p5")), deployed_versions=same)
        assert u.data == () and not [n for n in u.notes if "FSx file system" in n], u.notes


def test_the_first_topology_aware_group_says_kueue_and_the_autoscaler_start_again() -> None:
    """A group placed by topology turns on Kueue's topology feature gate, and one that scales from zero the
    ProvisioningRequest check and the autoscaler's flag: their Deployments start again (components/admission.py,
    components/autoscaler.py). Running jobs keep running; a Job created meanwhile may be refused. Removing the group
    turns them off, with the same notes."""
    old = preset("g5")
    new = copy.deepcopy(old)
    big = {"instanceTypes": ["g6e.48xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 2}
    new[P + "nodeGroups"]["big"] = {**big, "availabilityZone": "us-east-1a"}
    u = compare(plan_of("g5", old), plan_of("g5", new))
    kueue = [n for n in u.notes if n.startswith("Kueue starts again")]
    assert kueue == [
        "Kueue starts again with topology-aware scheduling on (the first group placed by topology) and the "
        "ProvisioningRequest check on (a topology-aware group the autoscaler scales from zero). Running jobs keep "
        "running. Its new pod starts beside the old one, which admits jobs until then; admission then pauses for some "
        "seconds while the new pod takes over. The system nodes need room for the second pod, or `pulumi up` waits "
        "for it until Kueue's release times out"
    ], u.notes
    assert (
        "the cluster autoscaler starts again with ProvisioningRequests on: a scale-up waits for its new pod" in u.notes
    )
    back = compare(plan_of("g5", new), plan_of("g5", old)).notes
    assert [n for n in back if "topology-aware scheduling off" in n and "ProvisioningRequest check off" in n], back
    # a fixed size: topology without the check, so the autoscaler keeps its flags
    fixed = copy.deepcopy(old)
    fixed[P + "nodeGroups"]["big"] = {**big, "minSize": 2, "desiredSize": 2, "availabilityZone": "us-east-1a"}
    notes = compare(plan_of("g5", old), plan_of("g5", fixed)).notes
    assert [n for n in notes if n.startswith("Kueue starts again with topology-aware scheduling on (the first")], notes
    assert not [n for n in notes if "ProvisioningRequest" in n], notes
    # the autoscaler turned on with such a group: installed, not started again
    off = copy.deepcopy(new)
    off[P + "autoscaler"] = {"enabled": False}
    notes = compare(plan_of("g5", off), plan_of("g5", new)).notes
    assert not [n for n in notes if n.startswith("the cluster autoscaler starts again")], notes
    # nothing changes Kueue's settings: no note
    assert not [n for n in compare(plan_of("g5", old), plan_of("g5", old)).notes if "starts again" in n]


def test_an_update_that_deletes_the_stacks_data_is_refused() -> None:
    """A change that deletes the file system the stack made (or its FSx data bucket) with the jobs' data is refused,
    naming the change and both ways on: keep it with retainOnDelete, applied first, or let it go for one update with
    deleteOldData, which a later update says to remove. A preview's warning alone would not stop `pulumi up --yes`."""
    renamed = {**preset("dev"), P + "clusterName": "other"}
    assert _refused(plan_of("dev", preset("dev")), plan_of("dev", renamed)) == (
        "eks-training:clusterName eks-training-dev -> other: the update deletes the file system the stack made, with "
        "the jobs' folders. To keep it in AWS, first run an update of its own that sets "
        "eks-training:storage.retainOnDelete: true, then make this change; to let it go, copy what you need (each "
        "job's copyCommand), then set eks-training:storage.deleteOldData: true for this update, and remove it after"
    )
    smaller = _storage("p5", fsx={**preset("p5")[P + "storage"]["fsx"], "storageCapacityGib": 1200})
    bigger = _storage("p5", fsx={**preset("p5")[P + "storage"]["fsx"], "storageCapacityGib": 2400})
    assert _refused(plan_of("p5", bigger), plan_of("p5", smaller)) == (
        "eks-training:storage.fsx.storageCapacityGib 2400 -> 1200: FSx grows a file system but never shrinks it: the "
        "update deletes the file system the stack made, with the jobs' folders. Set it back; with FSx, "
        "eks-training:storage.retainOnDelete needs existingVpc, so nothing keeps it in AWS; to let it go, copy "
        "what you need (each job's copyCommand), then set eks-training:storage.deleteOldData: true for this update, "
        "and remove it after"
    )
    # retainOnDelete as the last update applied it keeps the file system in AWS: nothing to refuse
    kept = {**preset("dev"), P + "storage": {"retainOnDelete": True}}
    assert compare(plan_of("dev", kept), plan_of("dev", {**kept, P + "clusterName": "other"})).data
    # set in the same update, it is not applied yet to the file system that goes
    assert "the update deletes the file system" in _refused(
        plan_of("dev", preset("dev")), plan_of("dev", {**kept, P + "clusterName": "other"})
    )
    # deleteOldData lets it go, and says so on the data line; left set, the next update says to remove it
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", let_go(renamed)))
    assert u.data and "the old file system is deleted with its data" in u.data[0], u.data
    assert not [n for n in u.notes if "deleteOldData" in n], u.notes
    left = compare(plan_of("dev", let_go(renamed)), plan_of("dev", let_go(renamed)))
    assert [n for n in left.notes if "deleteOldData" in n] == [
        "eks-training:storage.deleteOldData is set, and this update deletes no data: remove it, or a later change that "
        "deletes the file system goes ahead without a refusal"
    ], left.notes
    assert not [
        n for n in compare(plan_of("dev", preset("dev")), plan_of("dev", preset("dev"))).notes if "deleteOldData" in n
    ]


@pytest.mark.parametrize("stack, backend", [("dev", "fsx"), ("p5", "efs")])
def test_another_backend_in_the_same_namespace_is_refused(stack: str, backend: str) -> None:
    """The other backend's component makes the namespace and the shared claim again under resources of its own, and
    Pulumi deletes the old ones only at the end: Kubernetes refuses the new ones, early in the update.
    A new namespace in the same change (above), or a new cluster name, is no such collision."""
    new = preset(stack)
    new[P + "storage"] = {k: v for k, v in (new.get(P + "storage") or {}).items() if k != "fsx"}
    new[P + "storage"]["backend"] = backend
    new[P + "storage"]["deleteOldData"] = (
        True  # the old file system goes (test_an_update_that_deletes_the_stacks_data_is_refused)
    )
    if backend == "fsx":  # FSx sits in one zone: the one of the groups that mount it
        for g in new[P + "nodeGroups"].values():
            g["availabilityZone"] = "us-east-1a"
    problem = _refused(plan_of(stack, preset(stack)), plan_of(stack, new))
    old_backend = "efs" if backend == "fsx" else "fsx"
    assert problem == (
        f"eks-training:storage.backend {old_backend} -> {backend} in the namespace training: the {backend} storage "
        "makes that namespace and its claim again while the old ones still exist, which Kubernetes refuses, so "
        "`pulumi up` would fail early, with the new file system half made. Once the jobs have finished, give "
        "eks-training:storage.namespace a new name in the same change (the jobs move there), or make a new stack"
    )
    renamed = let_go({**new, P + "clusterName": "other"})
    assert compare(plan_of(stack, preset(stack)), plan_of(stack, renamed)).data


def test_a_new_cluster_name_says_every_group_is_made_again_and_the_time_is_a_new_stacks() -> None:
    """A new clusterName makes every resource again: the summary says so of the groups and the time, rather than
    'none rolls' and 'no update'."""
    renamed = let_go({**preset("dev"), P + "clusterName": "other"})
    text = render_upgrade(upgrade_report(compare(plan_of("dev", preset("dev")), plan_of("dev", renamed))))
    assert "  node groups: every group is made again with the new cluster, then the old ones deleted\n" in text, text
    assert "  expected duration: a new stack's: `python -m stacks plan --stack NAME` models its path" in text, text
    assert "none rolls" not in text and "no control plane, add-on or node group update" not in text, text


def test_a_new_cluster_name_starts_the_new_cluster_at_any_minor() -> None:
    """A new clusterName makes a new cluster (no EKS update): two minors up, or one down, is no skip or downgrade. Its
    add-ons are installed, none moves, and no group rolls. Under the old name, the same minors are refused."""
    old = plan_of("dev", variant("dev", kubernetesVersion="1.34", extendedSupport=True))
    for minor, refused in (("1.36", "skips 1 minor(s)"), ("1.33", "is older than the running 1.34")):
        cfg = variant("dev", kubernetesVersion=minor, extendedSupport=True)
        assert refused in _refused(old, plan_of("dev", cfg))
        u = compare(old, plan_of("dev", let_go({**cfg, P + "clusterName": "other"})))
        assert (u.old_minor, u.new_minor, u.running, u.cluster_replaced) == (minor, minor, None, True)
        assert u.groups == () and not [n for n in u.notes if "roll" in n], u.notes
        assert {a.change for a in u.addons} == {"installed"}, u.addons
        text = render_upgrade(upgrade_report(u))
        assert f"  Kubernetes {minor}: the new cluster's\n" in text, text
        assert "cluster-autoscaler" not in text and " -> " not in text.split("  data:")[0], text


def test_a_new_cluster_names_old_groups_run_beside_the_new_ones_until_the_end() -> None:
    """Pulumi makes the renamed stack's every resource first and deletes the old ones last: every old group's nodes
    run beside the new groups', in the summary's notes and in preflight's vCPU count. A stack that was jobs-only
    deletes no group: its groups were another stack's."""
    old = plan_of("p5", preset("p5"))
    renamed = plan_of("p5", let_go({**preset("p5"), P + "clusterName": "other"}))
    beside = [n for n in compare(old, renamed).notes if "the new group's nodes start beside the old group's" in n]
    assert [n.split(":")[0] for n in beside] == ["systemNodeGroup", "nodeGroups.gpu"], beside
    parts = quota_needs(renamed, old)[("P", "On-Demand")]
    assert [p.vcpus for p in parts] == [384, 384] and [p.outgoing for p in parts] == [False, True], parts
    assert not [p for ps in quota_needs(plan_of("p5", preset("p5")), old).values() for p in ps if p.outgoing]


def test_a_new_cluster_name_whose_cluster_runs_already_goes_on_with_it_one_minor_at_most() -> None:
    """A cluster of the new name that runs already (preflight read it by that name) is this stack's, from an earlier
    `pulumi up` that failed after making it, or another stack's: the summary says both; a minor that cluster cannot
    reach in one step is refused."""
    old = plan_of("dev", variant("dev", kubernetesVersion="1.35"))

    def renamed(minor: str) -> Plan:
        return plan_of("dev", let_go({**variant("dev", kubernetesVersion=minor), P + "clusterName": "other"}))

    said = "eks-training:clusterName eks-training-dev -> other: a cluster named other already runs Kubernetes"
    u = compare(old, renamed("1.36"), running="1.35")
    (note,) = [n for n in u.notes if n.startswith(said)]
    assert note.endswith("If another stack made it, EKS refuses to make a second cluster of that name: choose "
                         "another clusterName"), note  # fmt: skip
    assert (u.old_minor, u.new_minor) == ("1.35", "1.36")
    assert not [n for n in compare(old, renamed("1.36")).notes if n.startswith(said)]
    assert _refused(old, renamed("1.35"), running="1.36").startswith(
        f"{said} 1.36, and eks-training:cluster.kubernetesVersion 1.35 is neither that minor nor the next."
    )


def test_a_new_s3_path_names_the_bucket_the_stack_made_which_goes() -> None:
    """An FSx file system linked to a bucket of the user's instead of the one the stack made: the file system keeps
    its files (no data line), but the stack's bucket is deleted with everything in it; a note says so."""
    new = preset("p5")
    new[P + "storage"] = {**new[P + "storage"], "fsx": {**new[P + "storage"]["fsx"], "dataRepository": {}}}
    new[P + "storage"]["fsx"]["dataRepository"] = {"s3Path": "s3://mine/datasets/"}
    assert _refused(plan_of("p5", preset("p5")), plan_of("p5", new)) == (
        "eks-training:storage.fsx.dataRepository.s3Path unset -> s3://mine/datasets/: the update deletes the data "
        "bucket the stack made, with the datasets and what was exported. With FSx, "
        "eks-training:storage.retainOnDelete needs existingVpc, so nothing keeps it in AWS; to let it go, copy what "
        "you need (aws s3 sync from the bucket), then set eks-training:storage.deleteOldData: true for this update, "
        "and remove it after"
    )
    new = let_go(new)
    u = compare(plan_of("p5", preset("p5")), plan_of("p5", new))
    assert u.data == ()
    (note,) = [n for n in u.notes if "dataRepository.s3Path" in n]
    assert note.startswith(
        "eks-training:storage.fsx.dataRepository.s3Path unset -> s3://mine/datasets/: the file system links to that "
        "bucket instead of the one the stack made, and it is deleted with everything in it"
    ), note
    assert not [n for n in compare(plan_of("p5", new), plan_of("p5", new)).notes if "dataRepository.s3Path" in n]


def test_a_larger_fsx_file_system_keeps_the_data() -> None:
    """FSx grows a file system in place (UpdateFileSystem): a larger capacity is no data change."""
    fsx = {**preset("p5")[P + "storage"]["fsx"], "storageCapacityGib": 2400}
    u = compare(plan_of("p5", preset("p5")), plan_of("p5", _storage("p5", fsx=fsx)))
    assert u.data == ()
    # what the jobs see while it grows, and the claim that keeps its first size (the program ignores its size after)
    (note,) = [n for n in u.notes if "storageCapacityGib" in n]
    assert note.startswith("eks-training:storage.fsx.storageCapacityGib 1200 -> 2400: FSx grows the file "), note
    assert "unavailable for a few minutes" in note and "The claim keeps its first size" in note
    assert "another increase within 6 hours" in note
    assert not [n for n in compare(plan_of("p5", preset("p5")), plan_of("p5", preset("p5"))).notes if "FSx grows" in n]


def test_user_provisioned_metadata_back_to_automatic_says_to_switch_it_outside_pulumi() -> None:
    """The provider sends the IOPS in its state with AUTOMATIC, which FSx takes without IOPS (terraform-provider-aws
    expandLustreMetadataUpdateConfiguration; FSx's UpdateFileSystemLustreMetadataConfiguration), and FSx refuses the
    switch while the IOPS exceed AUTOMATIC's (its switch-provisioning-mode page): no data change, a note with the
    command that makes the switch."""
    fsx = preset("p5")[P + "storage"]["fsx"]
    assert fsx["storageCapacityGib"] == 1200  # AUTOMATIC gives it 1500 IOPS
    provisioned = _storage("p5", fsx={**fsx, "metadataMode": "USER_PROVISIONED", "metadataIops": 1500})
    u = compare(plan_of("p5", provisioned), plan_of("p5", _storage("p5", fsx={**fsx, "metadataMode": "AUTOMATIC"})))
    assert u.data == ()
    (note,) = [n for n in u.notes if "metadataMode" in n]
    assert note.startswith("eks-training:storage.fsx.metadataMode USER_PROVISIONED -> AUTOMATIC: the provider "), note
    assert "sends the 1500 IOPS with the new mode" in note and "`pulumi up` would fail" in note
    assert note.endswith("'MetadataConfiguration={Mode=AUTOMATIC}'`, then `pulumi refresh`"), note
    back = compare(plan_of("p5", provisioned), plan_of("p5", provisioned))
    assert not [n for n in back.notes if "metadataMode" in n]


def test_user_provisioned_metadata_back_to_automatic_from_more_iops_is_refused() -> None:
    """FSx never lowers metadata IOPS, so it refuses AUTOMATIC while the file system has more than AUTOMATIC gives
    its capacity (FSx's switch-provisioning-mode page): refused before anything changes, not a note."""
    fsx = preset("p5")[P + "storage"]["fsx"]
    provisioned = _storage("p5", fsx={**fsx, "metadataMode": "USER_PROVISIONED", "metadataIops": 12000})
    problem = _refused(
        plan_of("p5", provisioned), plan_of("p5", _storage("p5", fsx={**fsx, "metadataMode": "AUTOMATIC"}))
    )
    assert problem == (
        "eks-training:storage.fsx.metadataMode USER_PROVISIONED -> AUTOMATIC: the file system has 12000 metadata "
        "IOPS, more than the 1500 AUTOMATIC gives 1200 GiB, and FSx never lowers them, so it refuses the switch: keep "
        "metadataMode USER_PROVISIONED, or grow eks-training:storage.fsx.storageCapacityGib first, to where AUTOMATIC "
        "gives 12000 IOPS, and switch in a later update"
    )


@pytest.mark.parametrize(
    "old_gib, new_gib, iops, needed",
    [(1200, 2400, 1500, 3000), (2400, 4800, 3000, 6000), (1200, 12000, 6000, 12000)],
)
def test_a_larger_user_provisioned_fsx_with_too_few_metadata_iops_is_refused(
    old_gib: int, new_gib: int, iops: int, needed: int
) -> None:
    """FSx grows a USER_PROVISIONED file system only with at least the metadata IOPS AUTOMATIC gives the new capacity
    (terraform-provider-aws#44432: 1200 -> 2400 GiB needs 3000): `pulumi up` would fail at the file system after the
    rest had changed. With those IOPS, or in AUTOMATIC mode, it grows in place."""
    fsx = {**preset("p5")[P + "storage"]["fsx"], "metadataMode": "USER_PROVISIONED", "metadataIops": iops}
    old = plan_of("p5", _storage("p5", fsx={**fsx, "storageCapacityGib": old_gib}))
    problem = _refused(old, plan_of("p5", _storage("p5", fsx={**fsx, "storageCapacityGib": new_gib})))
    assert problem == (
        f"eks-training:storage.fsx.metadataIops {iops} with eks-training:storage.fsx.storageCapacityGib {old_gib} -> "
        f"{new_gib}: FSx grows a USER_PROVISIONED file system only with at least the metadata IOPS AUTOMATIC gives "
        f"the new capacity, {needed}: set eks-training:storage.fsx.metadataIops to {needed} or more (the provider "
        "raises them first)"
    )
    enough = compare(
        old, plan_of("p5", _storage("p5", fsx={**fsx, "storageCapacityGib": new_gib, "metadataIops": needed}))
    )
    assert enough.data == () and [n for n in enough.notes if "FSx grows the file system in place" in n]
    automatic = {**fsx, "metadataMode": "AUTOMATIC"}
    automatic.pop("metadataIops")
    grown = compare(
        plan_of("p5", _storage("p5", fsx={**automatic, "storageCapacityGib": old_gib})),
        plan_of("p5", _storage("p5", fsx={**automatic, "storageCapacityGib": new_gib})),
    )
    assert grown.data == ()


def test_automatic_metadata_to_user_provisioned_at_its_iops_stays_in_place() -> None:
    """AUTOMATIC -> USER_PROVISIONED at no fewer IOPS than AUTOMATIC gave the capacity: FSx switches in place (the
    provider replaces the file system only for fewer IOPS than its state holds)."""
    fsx = preset("p5")[P + "storage"]["fsx"]
    assert fsx["storageCapacityGib"] == 1200 and fsx.get("metadataMode", "AUTOMATIC") == "AUTOMATIC"
    for iops in (1500, 12000):
        new = plan_of("p5", _storage("p5", fsx={**fsx, "metadataMode": "USER_PROVISIONED", "metadataIops": iops}))
        u = compare(plan_of("p5", preset("p5")), new)
        assert u.data == (), (iops, u.data)
        assert fsx_updated_in_place(plan_of("p5", preset("p5")), new)


def test_a_new_fsx_throughput_tier_says_the_file_system_may_pause() -> None:
    """FSx switches the file servers for a new throughput tier (FSx's managing-throughput-capacity page): the data
    stays, and the summary says the file system may be unavailable meanwhile."""
    fsx = preset("p5")[P + "storage"]["fsx"]
    faster = _storage("p5", fsx={**fsx, "throughputPerTib": 1000})
    u = compare(plan_of("p5", preset("p5")), plan_of("p5", faster))
    assert u.data == ()
    (note,) = [n for n in u.notes if "throughputPerTib" in n]
    assert note.startswith(f"eks-training:storage.fsx.throughputPerTib {fsx['throughputPerTib']} -> 1000: FSx "), note
    assert "up to an hour" in note and "between jobs" in note
    assert not [n for n in compare(plan_of("p5", faster), plan_of("p5", faster)).notes if "throughputPerTib" in n]


def test_a_new_efs_capacity_of_claims_that_stay_is_refused() -> None:
    """Kubernetes grows a bound claim only when its StorageClass allows expansion, which the EFS one does not, and
    never shrinks one (the PersistentVolumeClaimResize admission plugin; the claim's update validation): a new
    ``storage.capacity`` would fail ``pulumi up`` at the shared claim and the teams' claims. The same quantity written
    otherwise, or with claims made anew (another storageClassName), is no change of theirs."""
    old = plan_of("dev", preset("dev"))
    assert _refused(old, plan_of("dev", _storage("dev", capacity="2Ti"))) == (
        "eks-training:storage.capacity: 1Ti -> 2Ti: Kubernetes cannot resize the claims training/shared-data (a bound "
        "claim grows only when its StorageClass allows expansion, and the EFS one does not; it never shrinks), so "
        "`pulumi up` would fail there: set it back to 1Ti. EFS is elastic: the capacity is nominal and limits nothing"
    )
    assert "1Ti -> 500Gi" in _refused(old, plan_of("dev", _storage("dev", capacity="500Gi")))
    compare(old, plan_of("dev", _storage("dev", capacity="1024Gi")))  # the same quantity
    compare(old, plan_of("dev", _storage("dev", capacity="2Ti", storageClassName="efs-training")))  # new claims
    shared = load_yaml((REPO / "examples" / "teams" / "Pulumi.shared.yaml").read_text())["config"]
    grown = {**shared, P + "storage": {**(shared.get(P + "storage") or {}), "capacity": "2Ti"}}
    refused = _refused(plan_of("shared", shared), plan_of("shared", grown))
    assert "cannot resize the claims team-nlp/shared-data, training/shared-data, vision/shared-data (" in refused


def test_renaming_an_fsx_claim_keeps_the_data() -> None:
    """FSx's claim binds the whole file system (a static volume): a new claim name sees the same files."""
    u = compare(plan_of("p5", preset("p5")), plan_of("p5", _storage("p5", pvcName="results")))
    assert u.data == ()


def test_a_jobs_only_stacks_cluster_name_replaces_nothing_of_its_own() -> None:
    """A jobs-only stack (examples/teams/Pulumi.vision.yaml) registers only its jobs on another stack's cluster."""
    data = load_yaml((REPO / "examples" / "teams" / "Pulumi.vision.yaml").read_text()) or {}
    config = dict(data["config"])
    renamed = {**config, P + "clusterName": "vision-two"}
    u = compare(plan_of("vision", config), plan_of("vision", renamed))
    assert u.data == ()


def _vision() -> dict[str, Any]:
    """The jobs-only example stack's configuration (examples/teams/Pulumi.vision.yaml)."""
    data = load_yaml((REPO / "examples" / "teams" / "Pulumi.vision.yaml").read_text()) or {}
    return json.loads(json.dumps(data["config"]))


def test_a_jobs_only_stacks_group_copy_gets_one_note_and_no_group_line() -> None:
    """A jobs-only stack registers no node group: its nodeGroups copy the cluster stack's to place its jobs. A change
    there names no roll and no size command (which would act on the cluster stack's group): one note says to change
    the cluster stack first."""
    old = _vision()
    for change in ({"maxSize": 3}, {"instanceTypes": ["g6.xlarge"]}):
        new = _vision()
        new[P + "nodeGroups"]["gpu"] = {**new[P + "nodeGroups"]["gpu"], **change}
        u = compare(plan_of("vision", old), plan_of("vision", new))
        assert u.groups == (), change
        assert u.notes == (
            "eks-training:nodeGroups.gpu: a jobs-only stack's groups are a copy of the cluster stack's, which places "
            "its jobs; this stack changes no node group, and `pulumi up` stops where the copy differs from that "
            "stack's groups. Change the cluster stack first (its own summary says what its groups do), then copy its "
            "nodeGroups here",
        ), change
        assert "aws eks update-nodegroup-config" not in render_upgrade(upgrade_report(u))
    assert compare(plan_of("vision", old), plan_of("vision", old)).notes == ()
    # what does not place the jobs (team_of compares instance types, maxSize, labels, taints, topology) gets no note
    for change in ({"minSize": 1}, {"diskSizeGib": 300}):
        new = _vision()
        new[P + "nodeGroups"]["gpu"] = {**new[P + "nodeGroups"]["gpu"], **change}
        assert compare(plan_of("vision", old), plan_of("vision", new)).notes == (), change


@pytest.mark.parametrize(
    "cluster, said",
    [
        (
            {"team": "nlp"},
            "eks-training:cluster.team vision -> nlp: the jobs move to team nlp's namespace and claim (a folder of its "
            "own on the shared file system), and are deleted from team vision's",
        ),
        (
            {"stackReference": "organization/eks-training/other"},
            "eks-training:cluster.stackReference organization/eks-training/shared -> organization/eks-training/other: "
            "the jobs move to that stack's cluster and its shared data, and are deleted from the old cluster",
        ),
    ],
)
def test_a_jobs_only_stack_moved_to_another_team_or_cluster_says_the_jobs_move(
    cluster: dict[str, str], said: str
) -> None:
    """A jobs-only stack's jobs run in its team's namespace and claim on the referenced cluster: another team or
    cluster stack makes them again there, where their folders are only if they ran there before."""
    new = _vision()
    new[P + "cluster"] = {**new[P + "cluster"], **cluster}
    u = compare(plan_of("vision", _vision()), plan_of("vision", new))
    assert u.data == (said,) and not u.data_empty
    text = render_upgrade(upgrade_report(u))
    assert f"\n  data: {said}\n" in text, text
    assert (
        "\n  jobs: each job starts again on the shared data the data: line names: from its first step where its "
        in text
    )


def test_a_job_newly_awaited_or_checked_gets_a_note() -> None:
    """`pulumi up` waits for a running job whose waitForCompletion turns on (and stops if it failed), and a health
    check added to a running job needs the nodes it holds, at a higher priority: each gets a note; an unchanged job
    none."""
    old = preset("dev")
    new = preset("dev")
    new[P + "jobs"]["train"] = {**new[P + "jobs"]["train"], "waitForCompletion": True}
    (note,) = [n for n in compare(plan_of("dev", old), plan_of("dev", new)).notes if n.startswith("job train:")]
    assert note.startswith("job train: waitForCompletion false -> true: this `pulumi up` waits for the running job"), (
        note
    )
    checked = preset("tensorflow")
    checked[P + "jobs"]["train"] = {**checked[P + "jobs"]["train"], "healthCheck": {}}
    notes = compare(plan_of("tensorflow", preset("tensorflow")), plan_of("tensorflow", checked)).notes
    (note,) = [n for n in notes if n.startswith("job train:")]
    assert note.startswith("job train: healthCheck added: its check is queued now, on the job's group; where"), note
    assert not [n for n in compare(plan_of("dev", old), plan_of("dev", old)).notes if n.startswith("job ")]


@pytest.mark.parametrize(
    "cluster, said",
    [
        (
            {"endpointPublicAccess": False, "privateAccessCidrs": ["10.0.200.0/24"]},
            "eks-training:cluster.endpointPublicAccess true -> false: EKS updates",
        ),
        (
            {"publicAccessCidrs": ["203.0.113.0/24"]},
            "eks-training:cluster.publicAccessCidrs ['0.0.0.0/0'] -> ['203.0.113.0/24']: EKS updates",
        ),
    ],
)
def test_a_narrower_public_endpoint_says_where_the_api_stays_reachable(cluster: dict[str, Any], said: str) -> None:
    """EKS updates the endpoint's access in place; from then on a machine outside the VPC (or the new CIDRs) loses the
    API, the rest of this `pulumi up` included. Opening the endpoint needs no note."""
    narrower = variant("dev", **cluster)
    (note,) = [n for n in compare(plan_of("dev", preset("dev")), plan_of("dev", narrower)).notes if "EKS updates" in n]
    assert note.startswith(said), note
    assert ("or the new CIDRs" in note) == ("publicAccessCidrs" in cluster), note
    private = ", ".join(cluster.get("privateAccessCidrs", [])) or "none"
    assert f"only from the networks eks-training:cluster.privateAccessCidrs ({private}) lets in on port 443" in note
    private_only = variant("dev", endpointPublicAccess=False, privateAccessCidrs=["10.0.200.0/24"])
    opened = compare(plan_of("dev", private_only), plan_of("dev", preset("dev")))
    assert not [n for n in opened.notes if "EKS updates" in n]
    # wider, more or reordered CIDRs lose no address
    narrow = variant("dev", publicAccessCidrs=["203.0.113.0/24", "198.51.100.0/24"])
    for wider in (["0.0.0.0/0"], ["198.51.100.0/24", "203.0.113.0/24"], ["203.0.113.0/24", "198.51.100.0/23"]):
        u = compare(plan_of("dev", narrow), plan_of("dev", variant("dev", publicAccessCidrs=wider)))
        assert not [n for n in u.notes if "EKS updates" in n], wider


def test_a_stack_that_becomes_jobs_only_or_makes_its_own_cluster_says_what_it_deletes_or_makes() -> None:
    """A cluster stack's file turned into a jobs-only one deletes the cluster, VPC, file system and Kueue it made; a
    jobs-only stack turned into a cluster stack makes them, with a new, empty file system: each is a data: line. The
    teams' stacks are told to be destroyed first, there and where the cluster is made again under a new name."""
    shared = load_yaml((REPO / "examples" / "teams" / "Pulumi.shared.yaml").read_text())["config"]
    # its file system goes too: refused, as a jobs-only file takes no storage.deleteOldData, unless kept
    assert _refused(plan_of("vision", shared), plan_of("vision", _vision())).endswith(
        "to let it go, copy what you need (each job's copyCommand), then `pulumi destroy` this stack before it becomes "
        "jobs-only"
    )
    kept = {**shared, P + "storage": {**shared.get(P + "storage", {}), "retainOnDelete": True}}
    (line,) = compare(plan_of("vision", kept), plan_of("vision", _vision())).data
    assert line.startswith(
        "eks-training:cluster.stackReference unset -> organization/eks-training/shared: the stack becomes a jobs-only "
        "stack and deletes what it made (the cluster, its nodes, the VPC, the file system, Kueue)"
    ), line
    assert line.endswith(
        "; the teams' jobs-only stacks (vision, nlp) lose their cluster: run `pulumi destroy` on them first (a destroy "
        "cannot reach a cluster that is gone)"
    ), line
    two = let_go({**shared, P + "clusterName": "shared-two"})
    (renamed,) = compare(plan_of("shared", shared), plan_of("shared", two)).data
    assert renamed.endswith(
        "; the teams' jobs-only stacks (vision, nlp) lose their cluster: run `pulumi destroy` on them first, and "
        "`pulumi up` on them after (a destroy cannot reach a cluster that is gone)"
    ), renamed
    u = compare(plan_of("vision", _vision()), plan_of("vision", shared))
    assert u.data == (
        "eks-training:cluster.stackReference organization/eks-training/shared -> unset: the stack makes a cluster of "
        "its own, with a new, empty file system; its jobs move there, and are deleted from the old cluster",
    )
    # a whole new cluster: timed as a new stack, and its jobs start from their first step
    assert u.cluster_replaced and u.data_empty
    # the jobs-only stack made no storage: its default settings are no storage to refuse a change of
    fsx = json.loads(json.dumps(shared))
    fsx[P + "storage"] = {"backend": "fsx"}
    fsx.pop(P + "teams")  # teams need EFS
    for g in fsx[P + "nodeGroups"].values():
        g["availabilityZone"] = "us-east-1a"
    efs = {**shared, P + "storage": {"performanceMode": "maxIO", "throughputMode": "bursting", "capacity": "2Ti"}}
    for cfg in (fsx, efs):
        moved = compare(plan_of("vision", _vision()), plan_of("vision", cfg))
        assert moved.data and not [n for n in moved.notes if "storage." in n], moved.notes
    text = render_upgrade(upgrade_report(u))
    assert (
        "  expected duration: a new stack's" in text
        and "node groups: every group is made with the new cluster\n" in text
    ), text


def test_an_image_built_under_another_key_replaces_the_job_in_its_folder() -> None:
    """Each built image has an ECR repository of its own (stacks/workloads.py), so a job moved to another image key
    of the same folder pulls another reference: its Job is replaced in the same run. A prebuilt reference under
    another key is the same image."""
    new = preset("dev")
    new[P + "images"] = {"mine": {"context": "training"}}
    new[P + "jobs"]["train"] = {**new[P + "jobs"]["train"], "image": "mine"}
    (run,) = [r for r in compare(plan_of("dev", preset("dev")), plan_of("dev", new)).runs if r.name == "train"]
    assert (run.action, run.reasons) == ("same folder", ("its image's repository, images.training -> images.mine",))
    assert run.old_dir == run.new_dir
    ref = "public.ecr.aws/docker/library/python:3.11-slim@sha256:" + "0" * 64
    one, other = preset("dev"), preset("dev")
    one[P + "images"] = {"a": {"prebuilt": ref}}
    other[P + "images"] = {"b": {"prebuilt": ref}}
    for cfg, name in ((one, "a"), (other, "b")):
        cfg[P + "jobs"] = {"run": {"kind": "command", "nodeGroup": "cpu", "image": name, "command": ["true"]}}
    assert compare(plan_of("dev", one), plan_of("dev", other)).runs == ()


def test_a_dataset_staged_anew_is_named_among_what_the_duration_does_not_count() -> None:
    """`pulumi up` waits for a staging Job: a dataset added, or given another folder, is staged in this update."""
    moved = preset("dev")
    moved[P + "datasets"] = {"cifar10": {"path": "datasets/cifar-copy"}}
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", moved))
    assert "the staging of cifar10 (up to each one's timeoutMinutes)" in u.untimed, u.untimed
    assert not [s for s in compare(plan_of("dev", moved), plan_of("dev", moved)).untimed if "staging" in s]
    # a staging Job skips a folder that holds its source already: a new deadline stages nothing again
    longer = preset("dev")
    longer[P + "datasets"] = {"cifar10": {"timeoutMinutes": 90}}
    assert not [s for s in compare(plan_of("dev", preset("dev")), plan_of("dev", longer)).untimed if "stag" in s]
    # other shared data (another EFS claim): the datasets are staged again there
    claim = preset("dev")
    claim[P + "storage"] = {**(claim.get(P + "storage") or {}), "pvcName": "other-data"}
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", claim))
    assert "the datasets staged again where the other shared data lacks them" in u.untimed, u.untimed


def test_a_job_whose_groups_own_quota_falls_below_its_nodes_is_told_it_may_be_preempted() -> None:
    """Teams take their share of a group out of the stack's own quota: a running job that needs more than is left
    runs on quota borrowed from the teams that lend (named: one with mayLend false lends nothing), which a team takes
    back by preempting it (reclaimWithinCohort: Any)."""
    before = preset("g5")
    before[P + "nodeGroups"]["gpu"]["maxSize"] = 4
    before[P + "jobs"]["train"].update(nodes=3, maxNodes=3)
    teams = copy.deepcopy(before)
    teams[P + "teams"] = {"a": {"quotaPercent": 25}, "b": {"quotaPercent": 25, "mayLend": False}}
    (note,) = [n for n in compare(plan_of("g5", before), plan_of("g5", teams)).notes if "own quota" in n]
    assert note == (
        "job train: the stack's own quota on nodeGroups.gpu goes from 4 to 2 node(s) (the teams' share), below the 3 "
        "it uses: it then runs on quota borrowed from the teams that lend (a), and Kueue stops it when one of their "
        "jobs needs that quota back"
    )
    assert not [n for n in compare(plan_of("g5", teams), plan_of("g5", teams)).notes if "own quota" in n]
    back = compare(plan_of("g5", teams), plan_of("g5", before))
    assert not [n for n in back.notes if "own quota" in n]
    # neither team lends: the job could never be admitted, which the configuration's rules refuse first
    teams[P + "teams"]["a"]["mayLend"] = False
    with pytest.raises(ConfigError, match="Kueue would never admit it"):
        plan_of("g5", teams)


def test_an_add_on_installed_or_removed_is_listed_and_timed() -> None:
    """Metrics turned on installs Amazon CloudWatch Observability, turned off removes it: the add-ons lines say so,
    and the expected duration counts the add-ons' step (it said no add-on update)."""
    on = preset("dev")
    on[P + "operations"] = {**(on.get(P + "operations") or {}), "metrics": True}
    text = render_upgrade(upgrade_report(compare(plan_of("dev", preset("dev")), plan_of("dev", on))))
    assert "\n  add-ons:\n    amazon-cloudwatch-observability: installed, " in text, text
    assert "\n    the add-ons (" in text and "no control plane, add-on or node group update" not in text, text
    text = render_upgrade(upgrade_report(compare(plan_of("dev", on), plan_of("dev", preset("dev")))))
    assert "\n    amazon-cloudwatch-observability: removed (EKS deletes it and its pods)\n" in text, text
    report = upgrade_report(compare(plan_of("dev", on), plan_of("dev", preset("dev"))))
    assert [a for a in report["addons"] if a["name"] == "amazon-cloudwatch-observability"][0]["change"] == "removed"
    # the Container Insights log groups go with it (components/observability.py makes them with the add-on)
    (note,) = [n for n in report["notes"] if n.startswith("amazon-cloudwatch-observability removed:")]
    assert "log groups (application, dataplane, host, performance)" in note and "the jobs' logs in them" in note


def _network(stack: str, **network: Any) -> dict[str, Any]:
    cfg = preset(stack)
    cfg[P + "network"] = {**(cfg.get(P + "network") or {}), **network}
    return cfg


_DEV_EXISTING = {"vpcId": "vpc-0abc1234def567890", "privateSubnetIds": ["subnet-0abc1234", "subnet-0def5678"]}


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            {},
            {"vpcCidr": "10.1.0.0/16"},
            "eks-training:network.vpcCidr 10.0.0.0/16 -> 10.1.0.0/16: another VPC, and EKS keeps a cluster in the VPC "
            "it was made in",
        ),
        (
            {},
            {"privateSubnetCidrs": ["10.0.0.0/19", "10.0.64.0/18"]},
            "eks-training:network.privateSubnetCidrs[0] 10.0.0.0/18 -> 10.0.0.0/19: EC2 replaces a subnet whose block "
            "changes",
        ),
        (
            {"availabilityZones": ["us-east-1a", "us-east-1b"]},
            {
                "availabilityZones": ["us-east-1a", "us-east-1b"],
                "publicSubnetCidrs": ["10.0.192.0/22", "10.0.200.0/22"],
            },
            "eks-training:network.publicSubnetCidrs[1] 10.0.196.0/22 -> 10.0.200.0/22: EC2 replaces a subnet",
        ),
    ],
    ids=["vpc cidr", "a private subnet (the default layout before)", "a public subnet in a listed zone"],
)
def test_a_running_stacks_vpc_or_subnet_block_is_refused_with_the_ways_to_move(
    old: dict[str, Any], new: dict[str, Any], said: str
) -> None:
    """Each would fail `pulumi up` partway (EKS keeps a cluster in its VPC; a replaced subnet's mount target, NAT
    gateway or overlapping block), after the new VPC or subnets were made: refused before anything is registered."""
    with pytest.raises(ConfigError) as err:
        compare(plan_of("dev", _network("dev", **old)), plan_of("dev", _network("dev", **new)))
    assert len(err.value.problems) == 1, err.value.problems
    assert said in err.value.problems[0]
    assert "deploy it under a new clusterName, or run `pulumi destroy` first" in err.value.problems[0]


def test_moving_between_a_new_vpc_and_an_existing_one_is_refused() -> None:
    new_vpc, existing = preset("dev"), preset("dev")
    existing.pop(P + "network")
    existing[P + "existingVpc"] = _DEV_EXISTING
    moved = {**existing, P + "existingVpc": {**_DEV_EXISTING, "vpcId": "vpc-0fed1234def567890"}}
    for old, new, said in (
        (new_vpc, existing, "eks-training:existingVpc a new VPC 10.0.0.0/16 -> vpc-0abc1234def567890: another VPC"),
        (existing, moved, "eks-training:existingVpc.vpcId vpc-0abc1234def567890 -> vpc-0fed1234def567890: another"),
    ):
        with pytest.raises(ConfigError) as err:
            compare(plan_of("dev", old), plan_of("dev", new))
        assert said in err.value.problems[0], err.value.problems


#: A region's zones as the program reads them (us-east-1's use1-az3 takes no control plane).
ZONES = [
    Zone(f"us-east-1{x}", i)
    for x, i in zip("abcdef", ["use1-az6", "use1-az1", "use1-az2", "use1-az4", "use1-az3", "use1-az5"])
]


REGION = RegionZones(tuple(ZONES))


#: The refusal of a move from us-east-1 to us-west-2.
MOVED_REGION = (
    "aws:region us-east-1 -> us-west-2: a running stack's resources stay in the region they were made in (the cluster, "
    "its network, the shared file system and its data): keep aws:region us-east-1; to train in us-west-2, deploy "
    "another stack there with a clusterName of its own, or move this one: `pulumi destroy` with aws:region us-east-1, "
    "then `pulumi up` with us-west-2"
)


def test_moving_a_running_stack_to_another_region_is_refused_offline_and_at_deploy() -> None:
    """pulumi-aws 7 keeps each resource in the region its state records and sends new ones to the new region: a new
    aws:region is refused before anything else is compared, whatever VPC the stack has, under a new clusterName too
    (what the new name does not replace would stay behind) and for a jobs-only stack; where only the zones its VPC
    was made in are known, they name its region."""
    existing = preset("dev")
    existing.pop(P + "network")
    existing[P + "existingVpc"] = _DEV_EXISTING
    renamed = {**preset("dev"), P + "clusterName": "dev-west"}
    for old, new in ((preset("dev"), preset("dev")), (existing, existing), (preset("dev"), renamed)):
        moved = {**new, "aws:region": "us-west-2"}
        for region in (None, REGION):  # offline (`plan --from`) and with the region's zones (`pulumi up`)
            with pytest.raises(ConfigError) as err:
                compare(plan_of("dev", old), plan_of("dev", moved), region=region, deployed_zones=["us-east-1a"])
            assert err.value.problems == [MOVED_REGION]
    vision = dict((load_yaml((REPO / "examples" / "teams" / "Pulumi.vision.yaml").read_text()) or {})["config"])
    with pytest.raises(ConfigError) as err:  # a jobs-only stack's code bucket would stay behind
        compare(plan_of("vision", vision), plan_of("vision", {**vision, "aws:region": "us-west-2"}))
    assert err.value.problems == [MOVED_REGION]
    # where the last configuration is unknown, the zones the VPC was made in name their region
    moved_plan = plan_of("dev", {**preset("dev"), "aws:region": "us-west-2"})
    for made_in in (["us-east-1a", "us-east-1b"], ["us-east-1-bos-1a", "us-east-1b"]):
        assert new_region_problem(moved_plan, LastUpdate({ZONES_OUTPUT: made_in})) == MOVED_REGION
    assert new_region_problem(plan_of("dev", preset("dev")), LastUpdate({ZONES_OUTPUT: ["us-east-1a"]})) is None
    assert new_region_problem(moved_plan, LastUpdate({REGION_OUTPUT: "us-east-1"})) == MOVED_REGION
    assert new_region_problem(moved_plan, LastUpdate()) is None  # nothing exported: a first update


def test_jobs_on_new_shared_data_start_from_their_first_step() -> None:
    """A change that gives the jobs a new file system (a data: line) leaves nothing to resume from: the jobs' lines say
    they start from their first step, not that they resume; where the other shared data may hold their folders (an
    adopted file system, another EFS claim), the summary says so."""
    old = preset("p5")
    moved = copy.deepcopy(old)
    moved[P + "nodeGroups"]["gpu"]["availabilityZone"] = "us-east-1b"  # FSx stays in its subnet: a new file system
    u = compare(plan_of("p5", old), plan_of("p5", let_go(moved)))
    assert u.data and u.data_empty and u.runs and all(r.rerun in ("", NEW_DATA_RERUN) for r in u.runs), u.runs
    text = render_upgrade(upgrade_report(u))
    assert "latest checkpoint" not in text, text
    assert "in /data/runs/train-" in text and f": {NEW_DATA_RERUN}" in text, text
    assert "  jobs: every job starts from its first step" in text, text

    # the stack's own EFS file system, kept, adopted again: its folders are there
    kept = {**preset("dev"), P + "storage": {"retainOnDelete": True}}
    adopted = {**preset("dev"), P + "storage": {"retainOnDelete": True, "fileSystemId": "fs-0123456789abcdef0"}}
    u = compare(plan_of("dev", kept), plan_of("dev", adopted))
    assert u.data and not u.data_empty, u
    text = render_upgrade(upgrade_report(u))
    assert "from its first step where its folder is not there" in text and "every job starts from" not in text, text


def test_the_expected_duration_names_what_it_does_not_count() -> None:
    """A new file system, an FSx update in place and an image build take time the model does not add: the duration
    says so, each with the catalog's time (components/catalog/timings.py)."""
    p5 = preset("p5")
    faster = copy.deepcopy(p5)
    faster[P + "storage"]["fsx"]["throughputPerTib"] = 1000
    u = compare(plan_of("p5", p5), plan_of("p5", faster))
    assert u.untimed == ("the FSx file system's update (`pulumi up` waits up to 90 min)",), u.untimed
    text = render_upgrade(upgrade_report(u))
    assert "  expected duration: no control plane, add-on or node group update\n    not counted: the FSx" in text, text

    moved = copy.deepcopy(p5)
    moved[P + "nodeGroups"]["gpu"]["availabilityZone"] = "us-east-1b"
    u = compare(plan_of("p5", p5), plan_of("p5", let_go(moved)))
    assert u.untimed == ("a new FSx file system (about 8 min) and the datasets staged on it again",), u.untimed

    old, new = plan_of("dev", preset("dev")), plan_of("dev", preset("dev"))
    image = new.images["training"]
    assert image.context is not None
    rebuilt = replace(new, images={**new.images, "training": replace(image, version=image.version + "x")})
    u = compare(old, rebuilt)
    assert u.untimed == ("the build of training (about 6 min each, side by side)",), u.untimed
    assert compare(old, new).untimed == ()


def test_a_renamed_job_is_told_how_to_keep_its_run() -> None:
    """A job removed and another added with the same definition (a rename) starts a new run in a folder of the new
    name: the added job's line names the outputDir that goes on with the old run; a job of another definition gets no
    such line."""
    old = preset("g6")
    new = copy.deepcopy(old)
    new[P + "jobs"] = {("train2" if n == "train" else n): j for n, j in new[P + "jobs"].items()}
    new[P + "jobs"]["evaluate"] = {
        **new[P + "jobs"]["evaluate"],
        "after": ["train2"],
        "args": [a.replace("TRAIN_OUTPUT_DIR", "TRAIN2_OUTPUT_DIR") for a in new[P + "jobs"]["evaluate"]["args"]],
    }
    u = compare(plan_of("g6", old), plan_of("g6", new))
    (added,) = [r for r in u.runs if r.action == "added"]
    assert added.renamed_from == "train" and added.old_dir is not None, added
    text = render_upgrade(upgrade_report(u))
    kept = added.old_dir.removeprefix("/data/")
    assert f"if it is train under a new name, set its outputDir: {kept} to go on with train's run there" in text, text
    other = copy.deepcopy(new)
    other[P + "jobs"]["train2"]["args"] = [*other[P + "jobs"]["train2"]["args"], "--epochs", "2"]
    (added,) = [r for r in compare(plan_of("g6", old), plan_of("g6", other)).runs if r.action == "added"]
    assert added.renamed_from == "", added
    # two removed jobs of its definition: which one it renames is not known, and nothing is said
    twice = copy.deepcopy(old)
    twice[P + "jobs"]["train-copy"] = copy.deepcopy(twice[P + "jobs"]["train"])
    u = compare(plan_of("g6", twice), plan_of("g6", new))
    assert [r.renamed_from for r in u.runs if r.action == "added"] == [""], u.runs
    render_upgrade(upgrade_report(u))


def _pinned(zone: str) -> dict[str, Any]:
    cfg = preset("dev")
    cfg[P + "nodeGroups"] = {"cpu": {**cfg[P + "nodeGroups"]["cpu"], "availabilityZone": zone}}
    return cfg


@pytest.mark.parametrize(
    ("new", "said"),
    [
        (_network("dev", availabilityZoneCount=3), "availabilityZoneCount: the VPC's zones us-east-1a, us-east-1b -> "),
        (
            _pinned("us-east-1c"),
            "nodeGroups.cpu.availabilityZone: the VPC's zones us-east-1a, us-east-1b -> us-east-1a, us-east-1c",
        ),
        (
            _network("dev", availabilityZones=["us-east-1b", "us-east-1a"]),
            "availabilityZones: the VPC's zones us-east-1a, us-east-1b -> us-east-1b, us-east-1a",
        ),
    ],
    ids=["a third zone", "a group pinned outside the zones", "the listed zones in another order"],
)
def test_a_change_of_the_vpcs_zones_is_refused_where_the_regions_zones_are_known(
    new: dict[str, Any], said: str
) -> None:
    """EKS keeps the zones a cluster was made in (its later subnets must be in them), and the mount targets follow the
    zones' order: `pulumi up`, which reads the region's zones, refuses; an offline plan refuses another number of
    zones, and says it cannot tell where the region's zones decide."""
    base = plan_of("dev", preset("dev"))
    with pytest.raises(ConfigError) as err:
        compare(base, plan_of("dev", new), region=REGION)
    (problem,) = err.value.problems
    assert said in problem and "EKS keeps the zones a cluster was made in" in problem, problem
    assert "to keep them, set eks-training:network.availabilityZones to [us-east-1a, us-east-1b]" in problem, problem
    if plan_of("dev", new).config.network.zone_count != base.config.network.zone_count:
        problem = _refused(base, plan_of("dev", new))
        assert "the VPC's zones change (availabilityZoneCount 2 -> availabilityZoneCount 3)" in problem, problem
        return
    u = compare(base, plan_of("dev", new))
    assert any("the zones are chosen differently" in n and "`pulumi up` refuses it" in n for n in u.notes), u.notes


@pytest.mark.parametrize(
    "old, new",
    [
        (
            {"availabilityZoneCount": 2},
            {"availabilityZoneCount": 3, "availabilityZones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
        ),
        ({"availabilityZones": ["us-east-1a", "us-east-1b"]}, {"availabilityZones": ["us-east-1a", "us-east-1c"]}),
        ({"availabilityZones": ["use1-az1", "use1-az2"]}, {"availabilityZones": ["use1-az1", "use1-az4"]}),
    ],
    ids=["a count and a longer list", "two lists of names", "two lists of IDs"],
)
def test_a_change_of_zones_certain_offline_is_refused_offline(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Another number of zones, or two lists of one form (names, or IDs) that differ, give the VPC other zones in any
    region: an offline plan refuses them as `pulumi up` would, naming the keys and the zones to keep."""
    problem = _refused(plan_of("dev", _network("dev", **old)), plan_of("dev", _network("dev", **new)))
    assert "the VPC's zones change" in problem and "EKS keeps the zones a cluster was made in" in problem, problem
    assert problem.startswith("eks-training:network.availabilityZones"), problem


def test_a_count_with_a_pinned_zone_is_not_a_known_number_of_zones_offline() -> None:
    """A count with a zone pinned resolves to the pinned zones plus enough others (and two EKS accepts), possibly
    more than the count: listing the zones the VPC has, as the refusals advise, or raising the count to them, is
    not refused offline; with the region's zones, the same lists compare equal."""
    pinned = _pinned("us-east-1e")  # use1-az3 in the test region: EKS refuses it for the control plane
    old = plan_of("dev", pinned)
    zones = REGION.of(old.config)
    assert len(zones) == 3, zones
    listed = copy.deepcopy(pinned)
    listed[P + "network"] = {**listed[P + "network"], "availabilityZones": zones, "availabilityZoneCount": 3}
    counted = copy.deepcopy(pinned)
    counted[P + "network"] = {**counted[P + "network"], "availabilityZoneCount": 3}
    for new in (listed, counted):
        compare(old, plan_of("dev", new), region=REGION)
        u = compare(old, plan_of("dev", new))
        assert any("the zones are chosen differently" in n for n in u.notes), u.notes


def test_the_same_zones_in_another_order_say_what_moves() -> None:
    old = plan_of("dev", _network("dev", availabilityZones=["us-east-1a", "us-east-1b"]))
    problem = _refused(old, plan_of("dev", _network("dev", availabilityZones=["us-east-1b", "us-east-1a"])))
    assert "the same zones in another order" in problem and "EFS mount target" in problem, problem


def test_names_against_ids_are_not_decided_offline() -> None:
    """A list of zone names against a list of zone IDs may be the same zones: only the region's zones tell."""
    old = plan_of("dev", _network("dev", availabilityZones=["us-east-1a", "us-east-1b"]))
    u = compare(old, plan_of("dev", _network("dev", availabilityZones=["use1-az1", "use1-az2"])))
    assert any("the zones are chosen differently" in n for n in u.notes), u.notes


def test_what_keeps_the_vpc_and_its_subnets_is_no_network_change() -> None:
    """A group pinned to a zone the VPC has, the same zones listed, the NAT mode: the same zones and blocks. A new
    clusterName replaces every resource, network included (named on the data line)."""
    base = plan_of("dev", preset("dev"))
    for cfg in (
        _pinned("us-east-1a"),
        _network("dev", availabilityZones=["us-east-1a", "us-east-1b"]),
        _network("dev", natGateways="perAz"),
    ):
        u = compare(base, plan_of("dev", cfg), region=REGION)
        assert u.data == () and not any("zones" in n for n in u.notes), u
    renamed = let_go({**_network("dev", vpcCidr="10.1.0.0/16"), P + "clusterName": "dev-two"})
    u = compare(base, plan_of("dev", renamed))
    assert u.data and u.data[0].startswith("eks-training:clusterName"), u.data


def test_a_subnet_block_is_refused_whether_or_not_the_zones_are_known() -> None:
    """Offline with the zones chosen differently, or with a last configuration the region can no longer place, the
    subnets compare by place: a new block there is refused either way."""
    base = plan_of("dev", preset("dev"))
    moved = plan_of(
        "dev",
        _network(
            "dev", availabilityZones=["us-east-1a", "us-east-1b"], privateSubnetCidrs=["10.0.0.0/19", "10.0.64.0/18"]
        ),
    )

    class Unplaceable(RegionZones):
        def of(self, cfg: Any) -> list[str]:
            if cfg.network.availability_zone_count == 2:
                raise ConfigError(["the region cannot place it"])
            return super().of(cfg)

    for region in (None, Unplaceable(tuple(ZONES))):
        with pytest.raises(ConfigError) as err:
            compare(base, moved, region=region)
        (problem,) = err.value.problems
        assert problem.startswith("eks-training:network.privateSubnetCidrs[0] 10.0.0.0/18 -> 10.0.0.0/19"), problem


def test_the_zones_the_last_update_recorded_are_the_ones_compared() -> None:
    """The record holds the zones the VPC was made in: where the region's zones have changed since (a zone no longer
    available, another that EKS now refuses), the same settings choose other zones, and the update is refused naming
    the zones to list; listing them passes, and without a record the zones are resolved from the old settings."""
    base = plan_of("dev", preset("dev"))
    made_in = ["us-east-1a", "us-east-1c"]  # us-east-1b was chosen before it left the region's available zones
    with pytest.raises(ConfigError) as err:
        compare(base, base, region=REGION, deployed_zones=made_in)
    (problem,) = err.value.problems
    assert problem.startswith(
        "eks-training:network.availabilityZoneCount: the VPC's zones us-east-1a, us-east-1c -> us-east-1a, "
        "us-east-1b (the same settings choose other zones: the region's available zones, or this version's rules, "
        "changed)"
    ), problem
    assert "set eks-training:network.availabilityZones to [us-east-1a, us-east-1c]" in problem, problem
    listed = plan_of("dev", _network("dev", availabilityZones=made_in))
    assert compare(base, listed, region=REGION, deployed_zones=made_in).data == ()
    assert compare(base, base, region=REGION, deployed_zones=None).data == ()
    # offline (no region's zones), a record's zones are not compared: the plan cannot resolve this update's
    assert compare(base, base, deployed_zones=made_in).data == ()


def test_a_zone_of_the_vpc_the_region_no_longer_lists_is_named_with_the_wait_not_the_list() -> None:
    """A zone the VPC has subnets in that the region does not list as available now (impaired, constrained) cannot be
    listed in network.availabilityZones until it is: the refusal says to wait, whether the settings count or list; a
    stack that lists the VPC's zones (by name or by ID) is told only to wait."""
    made_in = ["us-east-1a", "us-east-1b"]
    region = RegionZones(tuple(z for z in ZONES if z.name != "us-east-1b"))
    listed = plan_of("dev", _network("dev", availabilityZones=made_in))
    counted = plan_of("dev", preset("dev"))
    by_id = plan_of("dev", _network("dev", availabilityZones=["use1-az6", "use1-az1"]))  # us-east-1a, us-east-1b
    elsewhere = plan_of("dev", _network("dev", availabilityZones=["use1-az6", "use1-az2"]))  # us-east-1c for 1b
    for old, new, said, keep in (
        (counted, counted, "availabilityZoneCount", "wait until AWS reports us-east-1b available again, then set"),
        (listed, listed, "availabilityZones", "wait until AWS reports us-east-1b available again; "),
        (by_id, by_id, "availabilityZones", "wait until AWS reports us-east-1b available again; "),
        (by_id, elsewhere, "availabilityZones", "wait until AWS reports us-east-1b available again, then set"),
    ):
        with pytest.raises(ConfigError) as err:
            compare(old, new, region=region, deployed_zones=made_in)
        (problem,) = err.value.problems
        assert problem.startswith(f"eks-training:network.{said}: the VPC's zones us-east-1a, us-east-1b -> "), problem
        assert "(us-east-1b: the VPC has subnets there, and the region does not list it as available now" in problem
        assert f"to keep them, {keep}" in problem, problem
    # the zones alone, where the last configuration is unknown
    (problem,) = deployed_zone_problems(counted, region, made_in)
    assert problem.startswith("eks-training:network.availabilityZoneCount: the VPC's zones us-east-1a, us-east-1b"), (
        problem
    )
    assert deployed_zone_problems(counted, REGION, made_in) == []


def test_a_changed_definition_is_a_new_run_and_the_jobs_after_it_follow() -> None:
    """A job whose run recipe changes starts a new run in a new folder, naming what changed; a job after it follows
    (its input folder moved); a job the new file drops or adds is named; a size change is no new run."""
    old_cfg = preset("dev")
    new_cfg = copy.deepcopy(old_cfg)
    train = new_cfg[P + "jobs"]["train"]
    train["args"] = [a if a != "32" else "48" for a in train["args"]]
    old, new = plan_of("dev", old_cfg), plan_of("dev", new_cfg)
    u = compare(old, new)
    assert [(r.name, r.action, r.reasons) for r in u.runs] == [
        ("train", "new run", ("args",)),
        ("evaluate", "new run", ("a new run of train",)),
    ]
    assert all(r.old_dir == old.jobs[r.name].output_dir and r.new_dir == new.jobs[r.name].output_dir for r in u.runs)
    text = render_upgrade(upgrade_report(u))
    assert (
        f"  job train: a new run (args) in {new.jobs['train'].output_dir}: its Job is replaced and its pods stop; "
        f"{old.jobs['train'].output_dir} stays on the shared volume\n"
        "    it starts from its first step, unless an earlier run of this definition left that folder (a job set "
        "back): then an unfinished run resumes from its latest checkpoint; "
    ) in text
    assert "expected duration: no control plane, add-on or node group update" in text
    folder = old.jobs["train"].output_dir.removeprefix("/data/")
    assert text.count(f"; if that run is unfinished, set its outputDir: {folder} to resume it there instead") == 1
    assert "FAILED file is removed" in upgrade_report(u)["jobs"][0]["keep"]
    # evaluate: a command job (no resume, no skip of a finished run), moved only because train's run did: no hint
    assert "keep" not in upgrade_report(u)["jobs"][1] and text.count("to resume it there instead") == 1, text
    # the hint holds: the old folder as the job's outputDir keeps it in its run
    back = copy.deepcopy(new_cfg)
    back[P + "jobs"]["train"]["outputDir"] = old.jobs["train"].output_dir.removeprefix("/data/")
    assert [(r.name, r.action) for r in compare(old, plan_of("dev", back)).runs if r.name == "train"] == [
        ("train", "same folder")
    ]

    resized = copy.deepcopy(old_cfg)
    resized[P + "jobs"]["train"]["maxNodes"] = 2
    unchanged = render_upgrade(upgrade_report(compare(old, plan_of("dev", resized))))
    assert "  jobs: none restarts or starts a new run" in unchanged and "job train" not in unchanged

    moved = copy.deepcopy(old_cfg)
    moved[P + "jobs"]["check"] = moved[P + "jobs"].pop("evaluate")
    runs = compare(old, plan_of("dev", moved)).runs
    assert [(r.name, r.action) for r in runs] == [("check", "added"), ("evaluate", "removed")]
    assert runs[1].old_dir == old.jobs["evaluate"].output_dir and runs[1].new_dir is None


def test_a_minor_move_names_only_the_addons_the_stack_installs() -> None:
    """dev installs EFS's CSI driver and no Container Insights: a minor move names neither FSx's driver nor the
    observability add-on, which the preview would not update."""
    u = compare(
        plan_of("dev", variant("dev", kubernetesVersion="1.35")),
        plan_of("dev", variant("dev", kubernetesVersion="1.36")),
    )
    names = {a.name for a in u.addons}
    assert "vpc-cni" in names and "aws-efs-csi-driver" in names
    assert not names & {"aws-fsx-csi-driver", "amazon-cloudwatch-observability"}


def test_a_minor_move_names_the_autoscaler_release_the_deployed_versions_record_names() -> None:
    """The cluster autoscaler follows the minor: the summary names each minor's chart and image as the catalog pins
    them, in the words of the ``deployedVersions`` record (one helper writes both)."""
    u = compare(
        plan_of("dev", variant("dev", kubernetesVersion="1.35")),
        plan_of("dev", variant("dev", kubernetesVersion="1.36")),
    )
    (change,) = [a for a in u.addons if a.name == "cluster-autoscaler"]
    for minor, said in (("1.35", change.old), ("1.36", change.new)):
        release = CLUSTER_AUTOSCALER[minor]
        tag, _, digest = release.image.ref.partition("@")
        assert said == f"chart {release.chart.version}, image {tag.rsplit(':', 1)[1]}@{digest[:19]}", said
    assert change.old != change.new


def _gpu(stack: str, **group: Any) -> dict[str, Any]:
    """``stack``'s configuration with its ``gpu`` group's settings changed."""
    cfg = preset(stack)
    cfg[P + "nodeGroups"]["gpu"] = {**cfg[P + "nodeGroups"]["gpu"], **group}
    return cfg


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"instanceTypes": ["p5.48xlarge"]}, "k8s.amazonaws.com/accelerator nvidia-a100 -> nvidia-h100"),
        ({"labels": {"team": "vision"}}, "team unset -> vision"),
        ({"efa": False}, "eks-training/efa true -> unset"),
        ({"topology": False}, "Topology ec2-network-3-layers -> none"),
    ],
)
def test_a_topology_aware_flavors_labels_or_topology_are_refused_with_the_way_out(
    change: dict[str, Any], said: str
) -> None:
    """Kueue refuses to change a ResourceFlavor's nodeLabels or topologyName once it has a Topology (v0.19.1's CRD
    rules): p4d's gpu group is topology-aware, and another GPU model, a label, EFA or turning topology off would fail
    ``pulumi up`` partway, so the comparison refuses them before anything changes."""
    with pytest.raises(ConfigError) as err:
        compare(plan_of("p4d", preset("p4d")), plan_of("p4d", _gpu("p4d", **change)))
    (problem,) = err.value.problems
    assert problem.startswith(f"{P}nodeGroups.gpu: its Kueue flavor gpu has a Topology, and Kueue then refuses"), (
        problem
    )
    assert f"({said})" in problem, problem
    assert problem.endswith(
        "give the group a new name (and its jobs' nodeGroup), which makes a new group and a new flavor"
    )


def test_what_kueue_lets_a_flavor_change_is_no_flavor_problem() -> None:
    """A taint (Kueue's nodeTaints may change), a new GPU model on a group without a Topology, a Topology added to a
    flavor without one, and a new group name (a new flavor) all compare."""
    base = preset("p4d")
    tainted = _gpu("p4d", taints=[{"key": "dedicated", "value": "vision", "effect": "NoSchedule"}])
    assert [g.action for g in compare(plan_of("p4d", base), plan_of("p4d", tainted)).groups] == ["update"]
    flat = _gpu("p4d", topology=False)
    (gpu,) = compare(
        plan_of("p4d", flat), plan_of("p4d", {**flat, **_gpu("p4d", topology=False, instanceTypes=["p5.48xlarge"])})
    ).groups
    assert gpu.action == "replace"
    compare(plan_of("p4d", flat), plan_of("p4d", _gpu("p4d", instanceTypes=["p5.48xlarge"])))
    renamed = preset("p4d")
    renamed[P + "nodeGroups"]["h100"] = {**renamed[P + "nodeGroups"].pop("gpu"), "instanceTypes": ["p5.48xlarge"]}
    renamed[P + "jobs"] = {
        n: {**j, "nodeGroup": "h100"} if j.get("nodeGroup") == "gpu" else j for n, j in renamed[P + "jobs"].items()
    }
    actions = {g.path: g.action for g in compare(plan_of("p4d", base), plan_of("p4d", renamed)).groups}
    assert actions == {"nodeGroups.h100": "add", "nodeGroups.gpu": "delete"}, actions


def test_a_job_that_moves_off_a_group_that_goes_is_named_on_it() -> None:
    """A group renamed (the old one goes, a new one is created) with its job moved onto the new one: the old group's
    line names the job, whose pods there stop when its object is replaced, not "no job ... on it"."""
    renamed = preset("dev")
    renamed[P + "nodeGroups"]["cpu2"] = renamed[P + "nodeGroups"].pop("cpu")
    renamed[P + "jobs"] = {
        n: {**j, "nodeGroup": "cpu2"} if j.get("nodeGroup") == "cpu" else j for n, j in renamed[P + "jobs"].items()
    }
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", renamed))
    (gone,) = [g for g in u.groups if g.action == "delete"]
    assert gone.jobs and all(j.moves_to == "nodeGroups.cpu2" and j.replaced == "Job" for j in gone.jobs), gone.jobs
    text = render_upgrade(upgrade_report(u))
    old_line = text.split("  nodeGroups.cpu goes: ")[1].split("\n  ")[0]
    assert "no job of this stack file on it" not in old_line, text
    assert (
        "    job train: its Job is replaced earlier in this update (below), with its pods on nodeGroups.cpu2: its "
        "pods here stop then"
    ) in text, text


def test_a_shorter_deadline_in_place_is_noted() -> None:
    """``timeoutHours`` is the Job's activeDeadlineSeconds, which Kubernetes counts from the Job's start: shortened
    in place (no restart for a ``pytorch`` job), it ends a run that has gone on longer. Said in a note; a longer one
    is not, nor one of a job that starts again anyway."""
    short = preset("dev")
    short[P + "jobs"]["train"]["timeoutHours"] = 2
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", short))
    assert not u.runs
    assert (
        "job train: timeoutHours 24 -> 2, in place: a run that has gone on longer than 2 h ends when `pulumi up` "
        "updates its Job" in u.notes
    )
    assert not [n for n in compare(plan_of("dev", short), plan_of("dev", preset("dev"))).notes if "timeoutHours" in n]
    moved = copy.deepcopy(short)
    moved[P + "jobs"]["train"]["args"] = [*moved[P + "jobs"]["train"]["args"], "--lr", "0.05"]
    assert not [n for n in compare(plan_of("dev", preset("dev")), plan_of("dev", moved)).notes if "timeoutHours" in n]


def test_a_new_max_size_names_the_elastic_jobs_that_take_it() -> None:
    """An elastic ``pytorch`` job without ``maxNodes`` takes its group's ``maxSize``: a new one replaces its Job, and
    the summary says where the key the user never set comes from."""
    grown = preset("dev")
    grown[P + "nodeGroups"]["cpu"]["maxSize"] += 1
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", grown))
    assert [(r.name, r.action, r.reasons) for r in u.runs] == [("train", "restarts", ("maxNodes",))]
    text = render_upgrade(upgrade_report(u))
    assert "  job train: maxNodes (its group's maxSize, where the job leaves it unset) changed: its Job is" in text
    was = plan_of("dev", preset("dev")).jobs["train"].max_nodes
    assert text.count(f"; set its maxNodes: {was} to keep it running") == 1, text
    # the hint holds: the old maxNodes with the new maxSize restarts nothing
    kept = copy.deepcopy(grown)
    kept[P + "jobs"]["train"]["maxNodes"] = was
    assert compare(plan_of("dev", preset("dev")), plan_of("dev", kept)).runs == ()
    # a group that shrinks: its old maxNodes would exceed the new maxSize, which the config refuses, so no hint
    shrunk = preset("dev")
    shrunk[P + "nodeGroups"]["cpu"]["maxSize"] = 1
    shrinks = render_upgrade(upgrade_report(compare(plan_of("dev", preset("dev")), plan_of("dev", shrunk))))
    assert "job train: maxNodes" in shrinks and "to keep it running" not in shrinks, shrinks
    # a maxNodes the job sets itself is no hint: the user changed it
    own_old, own_new = preset("dev"), preset("dev")
    own_old[P + "jobs"]["train"]["maxNodes"], own_new[P + "jobs"]["train"]["maxNodes"] = 1, 2
    own = render_upgrade(upgrade_report(compare(plan_of("dev", own_old), plan_of("dev", own_new))))
    assert "to keep it running" not in own, own


def test_a_groups_new_labels_update_it_in_place_and_its_jobs_wait_for_them() -> None:
    """New labels or taints are the node group's own settings (UpdateNodegroupConfig, no roll): the group is said to
    be updated in place, not timed, and its job, whose pods select the labels, is replaced."""
    labelled = preset("dev")
    labelled[P + "nodeGroups"]["cpu"]["labels"] = {"team": "vision"}
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", labelled))
    assert [(g.path, g.action, g.reasons) for g in u.groups] == [("nodeGroups.cpu", "update", ("labels",))]
    assert [(r.name, r.action, r.reasons) for r in u.runs] == [("train", "restarts", ("nodeGroup",))]
    text = render_upgrade(upgrade_report(u))
    assert "  nodeGroups.cpu is updated in place, no roll: labels\n    up to 2 node(s)\n" in text, text
    assert "  expected duration: no roll (labels and taints change on the running nodes)" in text, text


def test_a_job_replaced_with_its_group_is_said_to_go_first() -> None:
    """A group replaced under its name (a new zone) keeps its role label: the job, replaced early in the update for
    its new zone selector, may start on the old group's nodes and stop again when they go. Both are said."""
    zoned = preset("dev")
    zoned[P + "nodeGroups"]["cpu"]["availabilityZone"] = "us-east-1a"
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", zoned))
    (group,) = u.groups
    assert group.action == "replace" and [(j.name, j.replaced) for j in group.jobs] == [("train", "Job")]
    text = render_upgrade(upgrade_report(u))
    assert "    job train: its Job is replaced earlier in this update (below)\n      new pods that start on" in text
    assert "  job train: nodeGroup (or that group's labels, taints or zone) changed: its Job is replaced" in text


def test_a_group_the_stack_file_gains_is_created_and_counted_in_the_duration() -> None:
    """A new group is created in the update: the summary says so, and its creation is in the expected duration."""
    grown = preset("dev")
    grown[P + "nodeGroups"]["big"] = {**grown[P + "nodeGroups"]["cpu"]}
    grown[P + "jobs"] = {n: {"nodeGroup": "cpu", **j} for n, j in grown[P + "jobs"].items()}
    u = compare(plan_of("dev", preset("dev")), plan_of("dev", grown))
    assert [(g.path, g.action) for g in u.groups] == [("nodeGroups.big", "add")]
    assert u.minutes == CREATION["aws:eks/nodeGroup:NodeGroup"].minutes > 0
    text = render_upgrade(upgrade_report(u))
    assert "  nodeGroups.big is created: a new group\n    1 node(s)\n" in text, text
    assert "node groups: none rolls" not in text and "no control plane, add-on or node group update" not in text


def _flavor_entry(topology: Any = "ec2-network-3-layers", **labels: Any) -> str:
    """A record's entry of p4d's gpu flavor, as a version of the project may have written it: its labels changed as
    given (``None``: removed), its Topology ``topology``."""
    plan = plan_of("p4d", preset("p4d"))
    fields = json.loads(flavor_records(plan)["nodeGroups.gpu.kueueFlavor"])
    fields["nodeLabels"] = {k: v for k, v in {**fields["nodeLabels"], **labels}.items() if v is not None}
    fields.pop("topologyName")
    return json.dumps({**fields, **({"topologyName": topology} if topology else {})})


def test_each_flavor_is_recorded_as_applied_in_one_text() -> None:
    """The record holds each flavor's Topology and node labels as sorted JSON: the same flavor gives the same text
    whatever its labels' order, and a flavor without a Topology records none."""
    plan = plan_of("p4d", preset("p4d"))
    records = flavor_records(plan)
    assert set(records) == {"systemNodeGroup.kueueFlavor", "nodeGroups.gpu.kueueFlavor"}
    assert records == flavor_records(plan_of("p4d", preset("p4d")))
    gpu = plan.admission.flavor("gpu")
    assert json.loads(records["nodeGroups.gpu.kueueFlavor"]) == {
        "nodeLabels": dict(gpu.node_labels),
        "topologyName": "ec2-network-3-layers",
    }
    backwards = replace(gpu, node_labels=dict(reversed(list(gpu.node_labels.items()))))
    assert list(backwards.node_labels) != list(gpu.node_labels)
    assert flavor_record(backwards) == records["nodeGroups.gpu.kueueFlavor"]
    assert "topologyName" not in json.loads(records["systemNodeGroup.kueueFlavor"])
    assert records.items() <= installed_versions(plan).items()


def test_a_flavor_this_version_labels_otherwise_than_the_record_is_refused() -> None:
    """The same stack file, but the last update applied p4d's gpu flavor with other labels than this version derives
    from it (a future version's labels, say): Kueue would refuse the change. Refused against the record, naming its
    key and the ways out; a record equal to the plan, or the plan's order of labels, changes nothing."""
    plan = plan_of("p4d", preset("p4d"))
    record = {**installed_versions(plan), "nodeGroups.gpu.kueueFlavor": _flavor_entry(**{"eks-training/efa": None})}
    problem = _refused(plan, plan, deployed_versions=record)
    assert problem.startswith(
        f"{P}nodeGroups.gpu: its Kueue flavor gpu has a Topology, and Kueue then refuses a change of its node labels "
        "or its Topology; this version of the project changes them from what the last update applied, as "
        "deployedVersions' nodeGroups.gpu.kueueFlavor records it (eks-training/efa unset -> true)"
    ), problem
    assert problem.endswith(
        "run it with the version of the project that made them, or give the group a new name (and its jobs' "
        "nodeGroup), which makes a new group and a new flavor"
    ), problem
    assert compare(plan, plan, deployed_versions=installed_versions(plan)).groups == ()
    # a stack file change against the record names the record's side of it, and says to keep the labels
    with pytest.raises(ConfigError) as err:
        compare(plan, plan_of("p4d", _gpu("p4d", labels={"team": "vision"})), deployed_versions=record)
    (problem,) = err.value.problems
    assert "its Topology (eks-training/efa unset -> true; team unset -> vision): `pulumi up`" in problem, problem
    assert "; keep them, or give the group a new name" in problem, problem


def test_a_flavor_the_record_says_had_no_topology_may_change() -> None:
    """This version plans p4d's gpu flavor with a Topology, but the last update applied it without one (an earlier
    default, say): Kueue takes a change of its labels and a first Topology, so nothing is refused; the plan alone
    would have refused it."""
    plan = plan_of("p4d", preset("p4d"))
    record = {**installed_versions(plan), "nodeGroups.gpu.kueueFlavor": _flavor_entry(topology=None)}
    labelled = plan_of("p4d", _gpu("p4d", labels={"team": "vision"}))
    compare(plan, labelled, deployed_versions=record)
    with pytest.raises(ConfigError):
        compare(plan, labelled, deployed_versions={k: v for k, v in record.items() if "kueueFlavor" not in k})


@pytest.mark.parametrize(
    "entry", [None, "", "not json", '{"nodeLabels": ["a"]}', '{"nodeLabels": {}, "topologyName": 3}']
)
def test_without_a_readable_flavor_record_the_plan_stands_in(entry: Any) -> None:
    """A stack last updated by an earlier version (no flavor in its record), or an entry of another form: the
    flavor is compared with the old plan's, as before."""
    base = plan_of("p4d", preset("p4d"))
    record = {k: v for k, v in installed_versions(base).items() if "kueueFlavor" not in k}
    if entry is not None:
        record["nodeGroups.gpu.kueueFlavor"] = entry
    assert compare(base, base, deployed_versions=record).groups == ()
    with pytest.raises(ConfigError, match=r"its Topology \(team unset -> vision\): .*; keep them, or give"):
        compare(base, plan_of("p4d", _gpu("p4d", labels={"team": "vision"})), deployed_versions=record)


def _renamed_to_h100(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with its ``gpu`` group renamed ``h100`` (its jobs following it), on p5.48xlarge."""
    out = copy.deepcopy(cfg)
    out[P + "nodeGroups"]["h100"] = {**out[P + "nodeGroups"].pop("gpu"), "instanceTypes": ["p5.48xlarge"]}
    out[P + "jobs"] = {
        n: {**j, "nodeGroup": "h100"} if j.get("nodeGroup") == "gpu" else j for n, j in out[P + "jobs"].items()
    }
    return out


def test_a_replaced_group_counts_its_old_nodes_in_the_quota_both_groups_need() -> None:
    """Pulumi creates the new group first and deletes the old one at the end of the update: p4d's 2 nodes (192 vCPUs)
    run beside p5's (384) in the P quota, L-417A185B. The kept system group counts once."""
    old = plan_of("p4d", _gpu("p4d", topology=False))
    new = plan_of("p4d", _gpu("p4d", topology=False, instanceTypes=["p5.48xlarge"]))
    assert [p.vcpus for p in quota_needs(new)[("P", "On-Demand")]] == [384]
    needs = quota_needs(new, old)
    parts = needs[("P", "On-Demand")]
    assert [(p.vcpus, p.outgoing) for p in parts] == [(384, False), (192, True)]
    assert {p.key for p in parts} == {P + "nodeGroups.gpu.maxSize"}  # a key the stack file has
    assert parts[1].how == (
        "nodeGroups.gpu as the last update left it (replaced; it runs until the end of this `pulumi up`): 2 x "
        "p4d.24xlarge (96 vCPUs) = 192 (its maxSize: the cluster autoscaler owns its size and may have grown it that "
        "far)"
    )
    assert needs[("Standard", "On-Demand")] == quota_needs(new)[("Standard", "On-Demand")]


def _one_node_without_autoscaler(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` (p4d's) with no cluster autoscaler and its gpu group kept at 1 node, so its training job on 1 node."""
    cfg[P + "autoscaler"] = {"enabled": False}
    cfg[P + "nodeGroups"]["gpu"]["desiredSize"] = 1
    cfg[P + "jobs"]["train"]["nodes"] = 1
    return cfg


def test_without_the_autoscaler_the_old_group_counts_its_desired_size() -> None:
    """Pulumi keeps a group at its desiredSize unless the cluster autoscaler owns it: 1 p4d node, not maxSize's 2."""
    off = {P + "autoscaler": {"enabled": False}}
    old = plan_of("p4d", _one_node_without_autoscaler(_gpu("p4d", topology=False)))
    new = plan_of("p4d", {**_gpu("p4d", topology=False, instanceTypes=["p5.48xlarge"]), **off})
    (_, outgoing) = quota_needs(new, old)[("P", "On-Demand")]
    assert outgoing.vcpus == 96 and outgoing.how.endswith("= 96 (its desiredSize, which Pulumi keeps it at)")


def test_a_removed_group_counts_too_and_another_quotas_nodes_do_not() -> None:
    """A renamed group is a new group and a removed one, deleted at the end of the update too: both count. Moved to
    another quota (G), the old P nodes already run within theirs: nothing more is counted there."""
    old = plan_of("p4d", _gpu("p4d", topology=False))
    new = plan_of("p4d", _renamed_to_h100(_gpu("p4d", topology=False)))
    parts = quota_needs(new, old)[("P", "On-Demand")]
    assert [(p.vcpus, p.outgoing) for p in parts] == [(384, False), (192, True)]
    assert parts[1].how.startswith("nodeGroups.gpu as the last update left it (removed;")
    assert parts[1].key == P + "nodeGroups.h100.maxSize"  # gpu is no key of the stack file now
    g6e = plan_of("p4d", _gpu("p4d", topology=False, instanceTypes=["g6e.48xlarge"]))
    assert ("P", "On-Demand") not in quota_needs(g6e, old)
    assert not any(p.outgoing for parts in quota_needs(g6e, old).values() for p in parts)


def test_the_summary_says_the_old_group_runs_beside_the_new_one_until_the_end() -> None:
    """A replaced group's nodes, and a removed group's where the update creates another, run until the end of
    ``pulumi up``; a group removed while nothing is created says nothing more than that it goes."""
    old = plan_of("p4d", _gpu("p4d", topology=False))
    u = compare(old, plan_of("p4d", _gpu("p4d", topology=False, instanceTypes=["p5.48xlarge"])))
    one = plan_of("p4d", _gpu("p4d", topology=False, desiredSize=1))
    (group,) = compare(one, plan_of("p4d", _gpu("p4d", topology=False, instanceTypes=["p5.48xlarge"]))).groups
    assert (group.action, group.nodes) == ("replace", 2)  # as the note counts: the autoscaler may have grown it
    assert (
        "  note: nodeGroups.gpu: the new group's nodes start beside the old group's 2 node(s) (its maxSize: the "
        "cluster autoscaler owns its size and may have grown it that far). Both groups run until the end of this "
        "`pulumi up`, when Pulumi deletes the old one. Your vCPU quota and your budget need room for both (preflight "
        "counts them at `pulumi up`)"
    ) in render_upgrade(upgrade_report(u)).splitlines()
    off = {P + "autoscaler": {"enabled": False}}
    (note,) = compare(
        plan_of("p4d", _one_node_without_autoscaler(_gpu("p4d", topology=False))),
        plan_of("p4d", {**_gpu("p4d", topology=False, instanceTypes=["p5.48xlarge"]), **off}),
    ).notes
    assert note.startswith(
        "nodeGroups.gpu: the new group's nodes start beside the old group's 1 node(s) (its desiredSize, which Pulumi "
        "keeps it at)"
    )
    (note,) = compare(old, plan_of("p4d", _renamed_to_h100(_gpu("p4d", topology=False)))).notes
    assert note.startswith(
        "nodeGroups.gpu: the group's 2 node(s) (its maxSize: the cluster autoscaler owns its size and may have grown "
        "it that far) run until the end of this `pulumi up`, when Pulumi deletes it, beside the nodes of the groups "
        "the update creates"
    )
    spare = _gpu("p4d", topology=False)
    spare[P + "nodeGroups"]["spare"] = {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1}
    u = compare(plan_of("p4d", spare), old)
    assert [g.action for g in u.groups] == ["delete"] and u.notes == ()


def _repo_with_code(tmp_path: Path, *, link: bool = False) -> Path:
    """A git repository of one commit holding ``Pulumi.yaml`` and a dev stack file whose evaluate job has ``code:
    ./src`` (``src/helper.py``; with ``link``, also a link out of the folder); returns the stack file."""
    import yaml

    stack_file = tmp_path / "Pulumi.dev.yaml"
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    cfg = preset("dev")
    cfg[P + "jobs"]["evaluate"]["code"] = "./src"
    stack_file.write_text(yaml.safe_dump({"config": cfg}))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "helper.py").write_text("X = 1\n")
    if link:
        (tmp_path / "src" / "host").symlink_to("/etc/hostname")
    (tmp_path / ".gitignore").write_text(".cache/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return stack_file


def _unseen(out: str) -> set[str]:
    """The jobs the summary says it cannot see a folder of (read as it is now)."""
    return set(re.findall(r"^  job (\S+): an image or code folder it runs was read as it is now", out, re.M))


def test_from_a_revision_reads_the_code_folders_as_they_were(tmp_path: Path) -> None:
    """``--from REV`` hashes a job's code folder as REV committed it: a change since is a new run of that job (and of
    the jobs after it), and an unchanged folder is none. The shipped image's folder is outside this repository (as
    for the installed library): the jobs on it are said to be unseen, not said to keep their run."""
    stack_file = _repo_with_code(tmp_path)

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert "a new run (" not in out and _unseen(out) == {"train", "evaluate"}, out
    assert "  jobs: none restarts or starts a new run" not in out

    (tmp_path / "src" / "helper.py").write_text("X = 2\n")
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert "  job evaluate: a new run (code) in " in out and "job train: a new run (" not in out
    assert _unseen(out) == {"train"}, out


def test_a_job_whose_helpers_run_the_shipped_image_is_unseen_where_that_image_is_read_as_it_is_now(
    tmp_path: Path,
) -> None:
    """A job on a prebuilt image of its own still runs the shipped image in its helper containers (its code's
    download, its wait for train): ``--from`` cannot see that image at the revision, so it names the job as unseen."""
    import yaml

    stack_file = _repo_with_code(tmp_path)
    cfg = yaml.safe_load(stack_file.read_text())["config"]
    evaluator = "123456789012.dkr.ecr.us-east-1.amazonaws.com/evaluator@sha256:" + "2" * 64
    cfg[P + "images"] = {"evaluator": {"prebuilt": evaluator}}
    cfg[P + "jobs"]["evaluate"]["image"] = "evaluator"
    stack_file.write_text(yaml.safe_dump({"config": cfg}))
    _git(tmp_path, "commit", "-q", "-am", "evaluator")

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert _unseen(out) == {"train", "evaluate"}, out
    assert "  job evaluate: an image or code folder it runs was read as it is now (a note says which): a change " in out


def test_a_folder_git_cannot_give_back_safely_is_read_as_it_is_now(tmp_path: Path) -> None:
    """A code folder holding a link out of itself (``/etc/hostname``) is not unpacked from the revision (tarfile's
    data filter refuses it): ``--from`` reads the folder as it is now instead of failing."""
    stack_file = _repo_with_code(tmp_path, link=True)
    (tmp_path / "src" / "helper.py").write_text("X = 2\n")

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert "a new run (" not in out and _unseen(out) == {"train", "evaluate"}, out
    assert "note: HEAD:Pulumi.dev.yaml: job evaluate's folder src is read as it is now" in out, out


def test_from_a_revision_plans_in_its_own_files(tmp_path: Path) -> None:
    """``--from REV`` loads the old stack file among REV's files: a code folder renamed since still loads (and,
    unchanged, is no new run); a file git does not track (a cache) counts on both sides, so it is no new run either."""
    import yaml

    stack_file = _repo_with_code(tmp_path)
    (tmp_path / "src" / ".cache").mkdir()
    (tmp_path / "src" / ".cache" / "state").write_text("untracked\n")

    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert "a new run (" not in out
    # the shipped image's folder is not in this repository (as for the installed library): a note says so
    assert "note: HEAD:Pulumi.dev.yaml: image training's folder " in out and "is outside the repository" in out

    shutil.rmtree(tmp_path / "src" / ".cache")  # what git does not track goes with the folder, not with the revision
    _git(tmp_path, "mv", "src", "code")
    cfg = yaml.safe_load(stack_file.read_text())["config"]
    cfg[P + "jobs"]["evaluate"]["code"] = "./code"
    stack_file.write_text(yaml.safe_dump({"config": cfg}))
    code, out, err = _plan_cli("--stack", "dev", "--stack-file", str(stack_file), "--from", "HEAD")
    assert code == 0, err
    assert "a new run (" not in out


def test_a_job_that_keeps_its_folder_is_named_when_its_run_changes() -> None:
    """A job with an ``outputDir`` of its own keeps its folder through a new definition, but its Job is replaced and
    starts again there: the summary says so, and what the run finds in the folder."""
    old_cfg = preset("dev")
    old_cfg[P + "jobs"]["evaluate"]["outputDir"] = "runs/evaluation"
    new_cfg = copy.deepcopy(old_cfg)
    new_cfg[P + "jobs"]["evaluate"]["args"] = [*new_cfg[P + "jobs"]["evaluate"]["args"], "--batch-size", "64"]
    u = compare(plan_of("dev", old_cfg), plan_of("dev", new_cfg))
    assert [(r.name, r.action, r.reasons, r.old_dir) for r in u.runs] == [
        ("evaluate", "same folder", ("args",), "/data/runs/evaluation")
    ]
    text = render_upgrade(upgrade_report(u))
    assert "  job evaluate: its Job is replaced (args) and starts again in its outputDir /data/runs/evaluation" in text


def test_an_output_dir_set_to_the_running_folder_replaces_only_a_pytorch_jobs_pods() -> None:
    """Setting ``outputDir`` to the folder a job runs in changes only its run id: a ``pytorch`` job's pods carry it
    (their label, torchrun's rendezvous id), so its Job is replaced; another kind's object stays as it is."""
    old_plan = plan_of("dev", preset("dev"))
    new_cfg = preset("dev")
    for name in ("train", "evaluate"):
        new_cfg[P + "jobs"][name]["outputDir"] = old_plan.jobs[name].output_dir.removeprefix("/data/")
    new_plan = plan_of("dev", new_cfg)
    assert {n: (old_plan.jobs[n].kind, new_plan.jobs[n].output_dir) for n in ("train", "evaluate")} == {
        n: (k, old_plan.jobs[n].output_dir) for n, k in (("train", "pytorch"), ("evaluate", "command"))
    }
    u = compare(old_plan, new_plan)
    assert [(r.name, r.action, r.reasons) for r in u.runs] == [("train", "same folder", ("outputDir",))]


def test_new_shared_data_says_every_job_starts_again() -> None:
    """A change that gives the jobs another claim starts every job again on it, from its first step where its folder
    is not there (a claim used before holds it): the jobs line says so beside the data line."""
    text = render_upgrade(
        upgrade_report(compare(plan_of("dev", preset("dev")), plan_of("dev", _storage("dev", pvcName="results"))))
    )
    assert "\n  data: " in text
    assert (
        "  jobs: each job starts again on the shared data the data: line names: from its first step where its folder "
        "is not there"
    ) in text
    assert "jobs: none restarts or starts a new run" not in text


def test_a_benchmark_experiment_whose_run_moves_says_the_benchmarks_run() -> None:
    """Changing one experiment moves the benchmark's run, so every experiment's folder: each says the benchmark's
    run, not an outputDir the user never set; the changed one says what changed too."""
    old_cfg = preset("benchmark")
    new_cfg = copy.deepcopy(old_cfg)
    new_cfg[P + "benchmark"]["experiments"]["resnet50-1-worker"]["args"][3] = "32"
    runs = {r.name: r for r in compare(plan_of("benchmark", old_cfg), plan_of("benchmark", new_cfg)).runs}
    assert runs and all("outputDir" not in r.reasons for r in runs.values())
    assert runs["resnet50-1-worker"].reasons[0] == "args"
    assert all("the benchmark's run" in r.reasons for r in runs.values())


def test_a_group_that_goes_keeps_the_modelled_duration_line() -> None:
    """A removed group takes its deletion's drain (EKS's limit), a node group update: the duration line is the
    model's, not the line for an update of jobs only."""
    old_cfg = preset("dev")
    old_cfg[P + "nodeGroups"]["extra"] = {**old_cfg[P + "nodeGroups"]["cpu"]}
    text = render_upgrade(upgrade_report(compare(plan_of("dev", old_cfg), plan_of("dev", preset("dev")))))
    assert "  nodeGroups.extra goes: removed from the stack file" in text
    assert "  expected duration: up to about 5 min, a model" in text
    assert "\n    the old group's deletion at the end (its nodes drain, up to 5 min)\n" in text, text


@pytest.mark.parametrize("own", [False, True])
def test_a_pin_moved_to_an_older_release_is_refused(own: bool) -> None:
    """EKS cannot roll a node group back to an earlier AMI release (source key eks-update-nodegroup-release): a pin
    moved back is refused, naming the key and the release the group runs; a pin moved forward rolls the group."""
    with pytest.raises(ConfigError) as err:
        compare(plan_of("p5", _pinned_p5("v20260714", own=own)), plan_of("p5", _pinned_p5("v20260610", own=own)))
    assert len(err.value.problems) == (1 if own else 2)  # cluster.amiRelease pins the system group too
    problem = next(p for p in err.value.problems if "release nodeGroups.gpu runs" in p)
    pin = f"{P}nodeGroups.gpu.amiRelease" if own else f"{P}cluster.amiRelease"
    assert problem == (
        f"{pin}: 1.36.1-20260610 is older than the release nodeGroups.gpu runs, 1.36.2-20260714; EKS cannot roll a "
        "node group back to an earlier AMI release. Keep 1.36.2-20260714 or set a newer one"
    )
    forward = compare(plan_of("p5", _pinned_p5("v20260610", own=own)), plan_of("p5", _pinned_p5("v20260714", own=own)))
    gpu = next(g for g in forward.groups if g.path == "nodeGroups.gpu")
    assert gpu.reasons == ("AMI release 1.36.1-20260610 -> 1.36.2-20260714",)


def _runs(plan: Plan, **releases: str) -> dict[str, str]:
    """``plan``'s ``deployedVersions`` record, with the AMI release each named group (``gpu``, ``system``) ran as EKS
    reported it."""
    paths = {"gpu": "nodeGroups.gpu", "system": "systemNodeGroup"}
    return {**installed_versions(plan), **{f"{paths[g]}.releaseVersion": r for g, r in releases.items()}}


def test_a_first_pin_is_compared_with_the_release_the_record_says_the_group_runs() -> None:
    """p5's GPU group had no pin, and EKS moved it past this version's newest release (a launch template roll):
    pinning that newest release asks EKS to go back, refused against the recorded release; pinning the release it
    runs rolls nothing; a newer one rolls from the release it runs."""
    old = plan_of("p5", preset("p5"))
    record = _runs(old, gpu="1.36.3-20260801")
    with pytest.raises(ConfigError) as err:
        compare(old, plan_of("p5", _pinned_p5("v20260714", own=True, disk=500)), deployed_versions=record)
    (problem,) = err.value.problems
    assert problem == (
        f"{P}nodeGroups.gpu.amiRelease: 1.36.2-20260714 is older than the release nodeGroups.gpu runs, "
        "1.36.3-20260801; EKS cannot roll a node group back to an earlier AMI release. Keep 1.36.3-20260801 or set a "
        "newer one"
    )
    same = compare(old, plan_of("p5", _pinned_p5("1.36.3-20260801", own=True, disk=500)), deployed_versions=record)
    assert same.groups == ()
    newer = compare(old, plan_of("p5", _pinned_p5("1.36.4-20260901", own=True, disk=500)), deployed_versions=record)
    (gpu,) = newer.groups
    assert gpu.reasons == ("AMI release 1.36.3-20260801 -> 1.36.4-20260901",)
    # without the record, the release the group runs is not known: no refusal, and a roll that may happen
    (unknown,) = compare(old, plan_of("p5", _pinned_p5("v20260714", own=True, disk=500))).groups
    assert (unknown.path, unknown.reasons) == (
        "nodeGroups.gpu",
        (
            "AMI release pinned to 1.36.2-20260714: its nodes roll unless they run it already (which release they run "
            "is not recorded here)",
        ),
    )


def test_a_first_pin_with_a_template_change_is_refused_only_where_the_group_runs_that_release() -> None:
    """A first pin at this version's newest release, with a bigger disk: the provider sends the pin where the group
    runs another release (an older one: the template rolls with it), and not where it runs that one (EKS would take
    its newest, away from the pin: refused)."""
    old = plan_of("p5", preset("p5"))
    new = plan_of("p5", _pinned_p5("v20260714", own=True, disk=600))
    (gpu,) = [
        g
        for g in compare(old, new, deployed_versions=_runs(old, gpu="1.36.1-20260610")).groups
        if g.path == "nodeGroups.gpu"
    ]
    assert gpu.reasons == (
        "AMI release 1.36.1-20260610 -> 1.36.2-20260714",
        "launch template: root volume size 500 -> 600",
    )
    with pytest.raises(ConfigError) as err:
        compare(old, new, deployed_versions=_runs(old, gpu="1.36.2-20260714"))
    (problem,) = err.value.problems
    assert problem.startswith(
        f"{P}nodeGroups.gpu.amiRelease: pins nodeGroups.gpu to AMI release 1.36.2-20260714, and this update changes "
        "its launch template (root volume size 500 -> 600) but not its release"
    ), problem


def test_a_kept_pin_is_compared_with_the_release_the_record_says_the_group_runs() -> None:
    """A pinned group whose record names another release than its pin (its Capacity Block kept it, say): an unchanged
    pin is sent, a roll from the release it runs."""
    plan = plan_of("p5", _pinned_p5("v20260714", own=True))
    (gpu,) = compare(plan, plan, deployed_versions=_runs(plan, gpu="1.36.1-20260610")).groups
    assert gpu.reasons == ("AMI release 1.36.1-20260610 -> 1.36.2-20260714",)
    with pytest.raises(ConfigError, match="1.36.2-20260714 is older than the release nodeGroups.gpu runs, 1.36.3-"):
        compare(plan, plan, deployed_versions=_runs(plan, gpu="1.36.3-20260801"))


def _block(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` (p5's) with its GPU group on a Capacity Block."""
    cfg[P + "nodeGroups"]["gpu"].update(capacityType="CAPACITY_BLOCK", capacityReservationId="cr-0123456789abcdef0")
    return cfg


def test_a_group_replaced_onto_a_capacity_block_runs_nodes_only_while_the_block_is_active() -> None:
    """A block has no nodes before it starts: the old group's nodes do not share the quota with the new group's then,
    and the note says when the new group runs any."""
    u = compare(plan_of("p5", preset("p5")), plan_of("p5", _block(preset("p5"))))
    (note,) = [n for n in u.notes if n.startswith("nodeGroups.gpu: the new group")]
    assert "runs nodes only while its Capacity Block is active, none before it starts" in note, note
    assert "beside" not in note and "quota" not in note, note


def test_a_capacity_block_groups_roll_waits_for_0_nodes_whatever_rolls_it() -> None:
    """While its block is active a Capacity Block group ignores a new version, AMI release and launch template: a
    roll for any of them says it waits for the next ``pulumi up`` at 0 nodes; a minor move adds that EKS holds the
    cluster's next move until then. An On-Demand group's roll has no such note."""
    waits = (
        "nodeGroups.gpu: while its Capacity Block is active the group keeps its version, AMI release and launch "
        "template, and rolls at the next `pulumi up` at 0 nodes"
    )
    bigger = _block(preset("p5"))
    bigger[P + "nodeGroups"]["gpu"]["diskSizeGib"] = 600
    template = compare(plan_of("p5", _block(preset("p5"))), plan_of("p5", bigger))
    assert [g.path for g in template.groups] == ["nodeGroups.gpu"] and template.notes == (waits,), template.notes
    release = compare(
        plan_of("p5", _block(_pinned_p5(own=True))), plan_of("p5", _block(_pinned_p5("v20260714", own=True)))
    )
    assert waits in release.notes, release.notes
    minor = compare(
        plan_of("p5", _block(variant("p5", kubernetesVersion="1.35"))),
        plan_of("p5", _block(variant("p5", kubernetesVersion="1.36"))),
    )
    assert f"{waits}; EKS updates the cluster past 1.36 only once every group runs 1.36" in minor.notes, minor.notes
    on_demand = preset("p5")
    on_demand[P + "nodeGroups"]["gpu"]["diskSizeGib"] = 600
    assert not any("Capacity Block" in n for n in compare(plan_of("p5", preset("p5")), plan_of("p5", on_demand)).notes)


def test_a_group_put_on_a_capacity_block_says_its_running_jobs_are_deleted_until_the_block_starts() -> None:
    """A `pulumi up` before the block starts leaves out the jobs on the group and after them
    (stacks.workloads._deferred_jobs), so Pulumi deletes the Jobs it made: the summary names them. A new block's id
    says it too; a group that stays on the same block does not."""
    says = (
        "nodeGroups.gpu: Capacity Block cr-0123456789abcdef0 has no nodes until it starts. A `pulumi up` before then "
        "does not create the jobs on it (or after them) and deletes their Jobs (train, evaluate)"
    )
    onto = compare(plan_of("p5", preset("p5")), plan_of("p5", _block(preset("p5"))))
    assert any(n.startswith(says) for n in onto.notes), onto.notes
    text = render_upgrade(upgrade_report(onto)).splitlines()
    assert (
        "  jobs: train, evaluate: deleted while their Capacity Block has not started (a note says why), created again "
        "after its start, in the runs they had"
    ) in text and "  jobs: none restarts or starts a new run" not in text, text
    other = _block(preset("p5"))
    other[P + "nodeGroups"]["gpu"]["capacityReservationId"] = "cr-0fedcba9876543210"
    new_block = compare(plan_of("p5", other), plan_of("p5", _block(preset("p5"))))
    assert any(n.startswith(says) for n in new_block.notes), new_block.notes
    bigger = _block(preset("p5"))
    bigger[P + "nodeGroups"]["gpu"]["diskSizeGib"] = 600
    same = compare(plan_of("p5", _block(preset("p5"))), plan_of("p5", bigger))
    assert not any("has no nodes until it starts" in n for n in same.notes), same.notes


def test_a_pinned_capacity_block_groups_template_change_is_refused_for_when_it_applies() -> None:
    """An active block holds the template change until the group is at 0 nodes, and it then goes without the release
    all the same: refused, saying when EKS would move the group."""
    with pytest.raises(ConfigError) as err:
        compare(plan_of("p5", _block(_pinned_p5(own=True))), plan_of("p5", _block(_pinned_p5(own=True, disk=600))))
    (problem,) = err.value.problems
    assert (
        "EKS would then move its nodes to its newest release for 1.36 (on its Capacity Block, once the group is at 0 "
        "nodes: while the block is active it keeps the change for later), and refuse every later `pulumi up`"
    ) in problem, problem


def test_a_job_lines_clauses_go_one_a_line_but_not_inside_parentheses_or_backquotes() -> None:
    from stacks.plan.upgrade_text import _clauses

    text = "keeps 2 (a; b) pods; it first marks `a; b` nodes; run `pulumi up --refresh`"
    assert _clauses(text) == ["keeps 2 (a; b) pods", "it first marks `a; b` nodes", "run `pulumi up --refresh`"]
    assert _clauses("one clause") == ["one clause"]


def test_a_roll_under_default_says_the_extra_nodes_it_launches_first() -> None:
    """EKS's DEFAULT update first raises a group's size by up to two nodes per zone (source key
    ``eks-managed-node-update``), which the vCPU quota must have room for: dev's two zones give 4 more nodes per group,
    a group pinned to one zone 2; in an existing VPC the zones of its subnets are not known offline. p5's GPU group
    rolls under MINIMAL: no extra node, no line."""
    minor = {v: variant("dev", kubernetesVersion=v) for v in ("1.35", "1.36")}
    text = render_upgrade(upgrade_report(compare(plan_of("dev", minor["1.35"]), plan_of("dev", minor["1.36"]))))
    assert (
        "\n    up to 2 node(s), updateStrategy rolling, EKS strategy DEFAULT (new nodes first)\n"
        "    it first launches up to 4 more node(s) (4 x m5.xlarge, 16 vCPUs): the EC2 vCPU quota needs room for them\n"
    ) in text, text
    assert "it first launches up to 4 more node(s) (4 x m5.large, 8 vCPUs)" in text
    for v in minor.values():
        v[P + "nodeGroups"]["cpu"]["availabilityZone"] = "us-east-1a"
        v[P + "network"] = {**v[P + "network"], "availabilityZones": ["us-east-1a", "us-east-1b"]}
    pinned = render_upgrade(upgrade_report(compare(plan_of("dev", minor["1.35"]), plan_of("dev", minor["1.36"]))))
    assert "it first launches up to 2 more node(s) (2 x m5.xlarge, 8 vCPUs)" in pinned, pinned
    for v in minor.values():
        v.pop(P + "network")
        v[P + "nodeGroups"]["cpu"].pop("availabilityZone")
        v[P + "existingVpc"] = _DEV_EXISTING
    existing = render_upgrade(upgrade_report(compare(plan_of("dev", minor["1.35"]), plan_of("dev", minor["1.36"]))))
    assert "it first launches up to 2 more node(s) per zone of its subnets (m5.xlarge, 4 vCPUs each)" in existing
    p5 = compare(
        plan_of("p5", variant("p5", kubernetesVersion="1.35")), plan_of("p5", variant("p5", kubernetesVersion="1.36"))
    )
    assert {g.path: g.surge is None for g in p5.groups} == {"systemNodeGroup": False, "nodeGroups.gpu": True}


def test_the_json_names_a_rolls_extra_nodes_in_camel_case_as_its_other_keys() -> None:
    u = compare(
        plan_of("dev", variant("dev", kubernetesVersion="1.35")),
        plan_of("dev", variant("dev", kubernetesVersion="1.36")),
    )
    groups = {g["key"]: g for g in upgrade_report(u)["nodeGroups"]}
    assert groups["nodeGroups.cpu"]["surge"] == {"perZone": 2, "zones": 2, "instanceType": "m5.xlarge", "vcpus": 4}


def _cluster(stack: str, **settings: Any) -> dict[str, Any]:
    cfg = preset(stack)
    cfg[P + "cluster"] = {**(cfg.get(P + "cluster") or {}), **settings}
    return cfg


def test_a_moved_service_range_is_refused_and_a_first_one_is_noted() -> None:
    """EKS cannot change a cluster's service range: the provider would replace the cluster (terraform-provider-aws
    ``aws_eks_cluster``, ``service_ipv4_cidr`` forces a new one). One set value to another is refused; a first value
    is noted, since EKS chose one at creation that it may equal; removing the setting keeps the cluster's."""
    a, b = (
        plan_of("dev", _cluster("dev", serviceCidr="172.20.0.0/16")),
        plan_of("dev", _cluster("dev", serviceCidr="10.200.0.0/16")),
    )
    assert _refused(a, b) == (
        "eks-training:cluster.serviceCidr: 172.20.0.0/16 -> 10.200.0.0/16 would replace the EKS cluster, with its "
        "nodes, jobs and every Kubernetes object (EKS cannot change a cluster's service range): set it back to "
        "172.20.0.0/16, or make a new stack"
    )
    unset = plan_of("dev", preset("dev"))
    (note,) = [n for n in compare(unset, b).notes if "serviceCidr" in n]
    assert note.startswith("eks-training:cluster.serviceCidr unset -> 10.200.0.0/16: EKS chose the cluster's "), note
    assert not [n for n in compare(a, unset).notes if "serviceCidr" in n]
    assert not [n for n in compare(a, a).notes if "serviceCidr" in n]


def test_a_new_efs_performance_mode_is_refused() -> None:
    """terraform-provider-aws ``aws_efs_file_system``: ``performance_mode`` forces a new file system, which would take
    the data with it; also beside a change of the claim."""
    old = plan_of("dev", _storage("dev", throughputMode="bursting"))
    new = plan_of("dev", _storage("dev", throughputMode="bursting", performanceMode="maxIO", pvcName="results"))
    assert _refused(old, new) == (
        "eks-training:storage.performanceMode: generalPurpose -> maxIO would replace the EFS file system this stack "
        "made, and its data with it (EFS cannot change a file system's performance mode): set it back to "
        "generalPurpose, or make a new stack"
    )
    assert compare(old, old).data == ()


def test_a_new_storage_class_name_is_noted_with_the_wait_for_the_jobs_pods() -> None:
    old = plan_of("dev", preset("dev"))
    (note,) = [
        n
        for n in compare(old, plan_of("dev", _storage("dev", storageClassName="efs-training"))).notes
        if "storageClassName" in n
    ]
    assert note.startswith("eks-training:storage.storageClassName efs-shared -> efs-training: the StorageClass and "), (
        note
    )
    assert "waits for the running jobs' pods, the teams' too (10 minutes at most" in note
    assert not [n for n in compare(old, old).notes if "storageClassName" in n]


def test_a_removed_team_is_noted_with_what_goes_with_its_namespace() -> None:
    config = load_yaml((REPO / "examples" / "teams" / "Pulumi.shared.yaml").read_text())["config"]
    gone = "nlp"  # team-nlp; vision takes the whole fleet
    kept = {"vision": {**config[P + "teams"]["vision"], "quotaPercent": 100}}
    old = build_plan(load_config("eks-training", "shared", config, project_dir=REPO))
    new = build_plan(load_config("eks-training", "shared", {**config, P + "teams": kept}, project_dir=REPO))
    (note,) = [n for n in compare(old, new).notes if n.startswith(f"team {gone} removed")]
    assert "then its namespace team-nlp with everything in it" in note and "Destroy that stack first" in note, note
    assert not [n for n in compare(old, old).notes if " removed: its namespace" in n]


def test_a_fixed_group_made_smaller_names_the_jobs_whose_pods_may_stop() -> None:
    """EKS terminates the nodes above a lower desired size at once, PodDisruptionBudgets or not (source key
    ``eks-scaling-config``): dev without the autoscaler, its 2-node group made 1, names its job, as a roll would; so
    does its system group made smaller (etcd may run there); a larger size names nothing."""
    off = {P + "autoscaler": {"enabled": False}}
    old = {**preset("dev"), **off}
    old[P + "nodeGroups"]["cpu"].update(desiredSize=2)
    smaller = copy.deepcopy(old)
    smaller[P + "nodeGroups"]["cpu"].update(desiredSize=1)
    u = compare(plan_of("dev", old), plan_of("dev", smaller))
    (change,) = u.groups
    assert (change.action, change.nodes, change.reasons, change.up_to) == (
        "shrink",
        2,
        ("desiredSize 2 -> 1: EKS terminates 1 of its 2 nodes, whatever the budgets",),
        False,
    )
    (train,) = change.jobs
    assert (train.name, train.keeps) == ("train", 0) and "none kept by its PodDisruptionBudget" in train.what
    text = render_upgrade(upgrade_report(u))
    assert (
        "nodeGroups.cpu gets smaller, no roll: desiredSize 2 -> 1: EKS terminates 1 of its 2 nodes, whatever" in text
    ), text
    assert "    job train: its pods on the nodes EKS terminates stop" in text, text
    assert "  expected duration: no roll: EKS terminates the nodes a smaller group no longer needs" in text, text
    # the system group: etcd, the job's rendezvous, may run on the node that goes
    system = copy.deepcopy(old)
    system[P + "systemNodeGroup"].update(minSize=1, desiredSize=1, maxSize=1)
    old[P + "systemNodeGroup"].update(minSize=1, desiredSize=2, maxSize=2)
    (change,) = compare(plan_of("dev", old), plan_of("dev", system)).groups
    assert change.action == "shrink" and [(j.name, j.rendezvous) for j in change.jobs] == [
        ("train", True),  # train runs on cpu, its etcd here
        ("evaluate", False),  # evaluate runs on the system group itself
    ]
    assert change.jobs[0].what.startswith("if it runs on a node EKS terminates, its rendezvous, etcd, moves")
    larger = copy.deepcopy(old)
    larger[P + "nodeGroups"]["cpu"].update(desiredSize=3, maxSize=3)
    assert compare(plan_of("dev", old), plan_of("dev", larger)).groups == ()


def test_a_group_the_autoscaler_gives_up_below_its_old_max_size_may_shrink() -> None:
    """dev's autoscaled group (0-2) given a fixed size of 1: the autoscaler may have run 2 nodes, and EKS terminates
    the one above the new desired size at once."""
    old = preset("dev")
    fixed = copy.deepcopy(old)
    fixed[P + "nodeGroups"]["cpu"].update(minSize=1, desiredSize=1, maxSize=1)
    (change,) = compare(plan_of("dev", old), plan_of("dev", fixed)).groups
    assert change.action == "shrink" and change.up_to and change.jobs
    assert change.reasons[0].startswith("the autoscaler no longer sets its size, and desiredSize is 1: if it runs")
    # Pulumi's state holds the desired size the group had at its last update or refresh, not the autoscaler's
    assert "Run this update as `pulumi up --refresh`" in change.reasons[0]
    kept = copy.deepcopy(old)
    kept[P + "nodeGroups"]["cpu"].update(minSize=2, desiredSize=2, maxSize=2)
    assert compare(plan_of("dev", old), plan_of("dev", kept)).groups == ()


def test_a_system_group_that_moves_its_pods_names_kueue_s_webhooks() -> None:
    """Kueue runs one controller pod on the system nodes with no disruption budget (the chart's defaults), and its
    Job webhooks fail closed: a roll or a replacement of the system group names the window in which a Job created
    or changed is refused. A worker group's roll does not."""
    replaced = compare(plan_of("mpi-horovod", preset("mpi-horovod")), _system("mpi-horovod", instanceType="c5.4xlarge"))
    (note,) = [n for n in replaced.notes if "Kueue's one controller pod" in n]
    assert note.startswith("systemNodeGroup replace: ") and "kubectl -n kueue-system get deploy" in note
    cfg = preset("p5")
    rolled = copy.deepcopy(cfg)
    rolled[P + "systemNodeGroup"]["diskSizeGib"] = 80
    (roll,) = [n for n in compare(plan_of("p5", cfg), plan_of("p5", rolled)).notes if "systemNodeGroup roll" in n]
    assert "if this update also changes one, `pulumi up` may fail on it" in roll, roll
    # a change that itself replaces jobs: the note names them rather than saying "if"
    c5 = compare(plan_of("dev", preset("dev")), _system("dev", instanceType="m5.xlarge"))
    (note,) = [n for n in c5.notes if "Kueue's one controller pod" in n]
    named = [r.name for r in c5.runs if r.action != "removed"]
    assert named and f"this update creates or replaces job(s) {', '.join(named)}, so `pulumi up` may fail" in note
    workers = copy.deepcopy(cfg)
    workers[P + "nodeGroups"]["gpu"]["diskSizeGib"] = 900
    moved = compare(plan_of("p5", cfg), plan_of("p5", workers))
    assert [g.action for g in moved.groups if g.path == "nodeGroups.gpu"] == ["roll"]
    assert not [n for n in moved.notes if "Kueue's one controller pod" in n]


def _shared() -> dict[str, Any]:
    """The cluster stack of the teams example (examples/teams/Pulumi.shared.yaml)."""
    data = load_yaml((REPO / "examples" / "teams" / "Pulumi.shared.yaml").read_text()) or {}
    return json.loads(json.dumps(data["config"]))


def _at_minor(config: dict[str, Any], minor: str) -> dict[str, Any]:
    return {**config, P + "cluster": {**(config.get(P + "cluster") or {}), "kubernetesVersion": minor}}


def test_a_stack_file_turned_from_one_kind_into_the_other_moves_no_minor() -> None:
    """A cluster stack at an older minor turned jobs-only deletes that cluster; a jobs-only stack turned into a cluster
    stack pinned below the default makes a new one: neither is a move of a minor (no skip, no downgrade refused), and
    the summary says neither "already runs" nor "unchanged" of a cluster that goes or comes."""
    # two minors below the default: a move to it would skip one
    older = SUPPORTED_KUBERNETES_VERSIONS[SUPPORTED_KUBERNETES_VERSIONS.index(DEFAULT_KUBERNETES_VERSION) - 2]
    below = SUPPORTED_KUBERNETES_VERSIONS[SUPPORTED_KUBERNETES_VERSIONS.index(DEFAULT_KUBERNETES_VERSION) - 1]
    kept = _at_minor(_shared(), older)
    kept[P + "storage"] = {**kept.get(P + "storage", {}), "retainOnDelete": True}  # else refused: it deletes the data
    to_jobs_only = compare(plan_of("vision", kept), plan_of("vision", _vision()))
    assert to_jobs_only.old_minor == to_jobs_only.new_minor == older
    text = render_upgrade(upgrade_report(to_jobs_only))
    assert "the stack becomes a jobs-only stack" in text and "\n  Kubernetes " not in text, text
    to_cluster = compare(plan_of("vision", _vision()), plan_of("vision", _at_minor(_shared(), below)))
    assert to_cluster.old_minor == to_cluster.new_minor == below and to_cluster.cluster_replaced
    text = render_upgrade(upgrade_report(to_cluster))
    assert f"\n  Kubernetes {below}: the new cluster's\n" in text, text
    assert "\n  node groups: every group is made with the new cluster\n" in text, text


def test_a_jobs_only_stacks_pinned_group_copy_is_not_refused_as_a_group_of_its_own() -> None:
    """A jobs-only stack's nodeGroups copy the cluster stack's pins too; a change the copy may make (diskSizeGib is
    not among what the deployment compares) rolls no group of this stack: the pinned-release rule, which would refuse
    a roll of a pinned group, does not apply."""
    old = _vision()
    old[P + "nodeGroups"]["gpu"] = {**old[P + "nodeGroups"]["gpu"], "amiRelease": list(AMI_RELEASES)[-2]}
    new = copy.deepcopy(old)
    new[P + "nodeGroups"]["gpu"]["diskSizeGib"] = 300
    u = compare(plan_of("vision", old), plan_of("vision", new))
    assert u.groups == () and u.notes == ()


def test_a_renamed_cluster_is_told_from_the_record_whether_it_set_the_name_or_left_the_default() -> None:
    """The record holds clusterName only where the stack file set it; otherwise the stack's default name stands."""
    from stacks.last_update import renamed_cluster

    named = plan_of("dev", {**preset("dev"), P + "clusterName": "vision"})
    assert not renamed_cluster(named, {P + "clusterName": "vision"})
    assert renamed_cluster(named, {P + "clusterName": "other"})
    assert renamed_cluster(named, {})  # the record left it to the default, eks-training-dev
    assert not renamed_cluster(plan_of("dev", preset("dev")), {})


def test_new_sizes_beside_a_roll_are_said_to_go_after_it() -> None:
    """The provider updates a group's version first and waits for the roll, then sends its sizes: with the desired
    size ``pulumi up`` read at its start, which the autoscaler may have moved meanwhile. The note says to resize in an
    update of its own; sizes alone, or a roll alone, say nothing of it."""
    old = preset("dev")
    both = copy.deepcopy(old)
    both[P + "nodeGroups"]["cpu"].update(maxSize=4, diskSizeGib=80)
    u = compare(plan_of("dev", old), plan_of("dev", both))
    assert any(g.path == "nodeGroups.cpu" for g in u.groups)
    (note,) = [n for n in u.notes if "are sent after its roll" in n]
    assert note.startswith("nodeGroups.cpu: its new sizes are sent after its roll") and note.endswith("of their own")
    for alone in ({"maxSize": 4}, {"diskSizeGib": 80}):
        one = copy.deepcopy(old)
        one[P + "nodeGroups"]["cpu"].update(alone)
        assert not [n for n in compare(plan_of("dev", old), plan_of("dev", one)).notes if "after its roll" in n]
