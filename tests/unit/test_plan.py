"""The pure functions behind the plan, called directly: EFA profiles, pod sizes, scheduling, zones,
config rules and the plan itself (no Pulumi engine)."""

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from components.catalog import (
    AMI_TYPES,
    AUTOSCALER_GPU_LABEL,
    EFA_ENV_COMMON,
    EFA_HUGEPAGES_2MI,
    INSTANCE_TYPES,
    Catalog,
)
from components.naming import fit_name, k8s_name
from components.nodeplan import (
    AUTOSCALER_TEMPLATE_PREFIX,
    NODE_SHARE,
    InconsistentFacts,
    autoscaler_template_tags,
    efa_profile,
    interface_specs,
    node_profile,
    pod_size,
    sizing_type,
)
from components.scheduling import EFA_LABEL, GPU_LABEL, GPU_TAINT, NODE_ROLE_LABEL, node_scheduling, tolerations_for
from stacks.config import ConfigError, load_config
from stacks.config.derive import claim_readers, fsx_location
from stacks.plan import ZONE_LABEL, build_plan, dataset_plan
from stacks.plan.report import render, report
from stacks.stackfile import plan_stack
from stacks.zones import Zone, choose_zones, control_plane_zones
from tests.harness import REPO

P5 = INSTANCE_TYPES["p5.48xlarge"]
G6 = INSTANCE_TYPES["g6.xlarge"]
M5 = INSTANCE_TYPES["m5.xlarge"]


def config(**sections: Any) -> Any:
    """Load a configuration made of ``sections`` (camelCase top-level keys)."""
    cfg = {"aws:region": "us-east-1", **{f"eks-training:{k}": v for k, v in sections.items()}}
    return load_config("eks-training", "unit", cfg)


def problems(**sections: Any) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        config(**sections)
    return exc.value.problems


# ------------------------------------------------------------------------------------ EFA profile
def test_efa_profile_of_every_catalogued_efa_type_is_consistent() -> None:
    for facts in INSTANCE_TYPES.values():
        if not facts.supports_efa:
            continue
        profile = efa_profile(facts)
        assert profile.interfaces == facts.max_efa_interfaces == facts.network_cards
        assert profile.efa_only_interfaces == profile.interfaces - 1
        assert profile.hugepages_2mi == EFA_HUGEPAGES_2MI
        assert profile.env.items() >= EFA_ENV_COMMON.items()
        assert (profile.min_vpc_cni is not None) == (profile.interfaces > 1)


def test_the_running_cost_counts_the_nodes_the_jobs_ask_where_the_autoscaler_grows_the_group() -> None:
    """A group created at desiredSize 1 whose job asks 2 nodes runs 2 while the job runs (the autoscaler grows it to
    what one step's jobs ask, up to maxSize); without the autoscaler the group keeps desiredSize, which the jobs fit."""
    from stacks.costs import estimate

    group = {"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 3}}
    job = {"kind": "command", "command": ["true"], "nodes": 2}

    def cpu_line(**sections: Any) -> Any:
        cfg = config(nodeGroups=group, jobs={"a": job, "b": {**job, "after": ["a"]}}, **sections)
        return next(c for c in estimate(build_plan(cfg)).lines if c.what.startswith("nodeGroups.cpu:"))

    grown = cpu_line()
    assert grown.what.startswith("nodeGroups.cpu: 2 running / 0 idle x m5.xlarge"), grown.what
    one_node = next(
        c for c in estimate(build_plan(config(nodeGroups=group))).lines if c.what.startswith("nodeGroups.cpu:")
    )
    assert grown.running == pytest.approx(2 * one_node.running)  # the jobs of one step, not of both steps: 2, not 4
    fixed = {"cpu": {**group["cpu"], "desiredSize": 2}}
    kept = next(
        c
        for c in estimate(build_plan(config(nodeGroups=fixed, jobs={"a": job}, autoscaler={"enabled": False}))).lines
        if c.what.startswith("nodeGroups.cpu:")
    )
    assert kept.what.startswith("nodeGroups.cpu: 2 running"), kept.what


def test_inconsistent_efa_facts_are_refused() -> None:
    bad = dataclasses.replace(P5, name="x.large", max_efa_interfaces=2, network_cards=1)
    with pytest.raises(InconsistentFacts, match=r"maxEfaInterfaces \(2\) must equal networkCards \(1\)"):
        efa_profile(bad)


def test_interfaces_card_0_efa_then_efa_only() -> None:
    specs = interface_specs(4)
    assert [(s["network_card_index"], s["device_index"], s["interface_type"]) for s in specs] == [
        (0, 0, "efa"),
        (1, 1, "efa-only"),
        (2, 1, "efa-only"),
        (3, 1, "efa-only"),
    ]


# -------------------------------------------------------------------------------------- pod sizes
@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_pod_fits_the_node(name: str) -> None:
    facts = INSTANCE_TYPES[name]
    size = pod_size(facts, efa_profile(facts) if facts.supports_efa else None)
    allocatable_cpu = facts.allocatable_cpu_m or facts.vcpus * 1000
    allocatable_mem = facts.allocatable_memory_mib or facts.memory_mib
    assert 0 < size.cpu_millis <= NODE_SHARE * allocatable_cpu
    assert 0 < size.memory_mib <= NODE_SHARE * allocatable_mem
    assert size.gpus == facts.gpus and size.procs_per_node == max(1, facts.gpus)
    assert size.shm_mib <= size.memory_mib // 4
    assert size.threads_per_proc * size.procs_per_node <= max(1, size.cpu_millis // 1000) or size.threads_per_proc == 1
    assert size.efa_devices == (facts.max_efa_interfaces if facts.supports_efa else 0)


def test_sizing_type_is_the_smallest() -> None:
    assert sizing_type([INSTANCE_TYPES["g5.48xlarge"], INSTANCE_TYPES["g6.48xlarge"]]).name in (
        "g5.48xlarge",
        "g6.48xlarge",
    )
    assert sizing_type([M5, INSTANCE_TYPES["m5.large"]]).name == "m5.large"


# ------------------------------------------------------------------------------------- scheduling
def test_node_scheduling_labels_and_taints() -> None:
    labels, taints = node_scheduling(
        "gpu",
        8,
        True,
        {"team": "ml"},
        [{"key": "dedicated", "value": "x", "effect": "NoExecute"}],
        accelerator="nvidia-h100",
    )
    assert labels == {
        NODE_ROLE_LABEL: "gpu",
        "team": "ml",
        GPU_LABEL[0]: GPU_LABEL[1],
        AUTOSCALER_GPU_LABEL: "nvidia-h100",
        EFA_LABEL[0]: EFA_LABEL[1],
    }
    assert taints == [dict(GPU_TAINT), {"key": "dedicated", "value": "x", "effect": "NoExecute"}]
    assert tolerations_for(taints)[0] == {
        "key": GPU_TAINT["key"],
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    }
    cpu_labels, cpu_taints = node_scheduling("cpu", 0, False)
    assert cpu_labels == {NODE_ROLE_LABEL: "cpu"} and cpu_taints == []
    with pytest.raises(ValueError, match="effect"):
        node_scheduling("cpu", 0, False, taints=[{"key": "a", "effect": "NoScheduling"}])


def test_node_profile_derives_everything_from_one_row() -> None:
    p = node_profile("gpu", [P5], efa=True)
    assert p.ami_type == AMI_TYPES["nvidia"] and p.gpus == 8 and p.efa_interfaces == 32
    # what TrainingNodeGroup tags its Auto Scaling group with, from the profile's values
    tags = autoscaler_template_tags(p.labels, p.taints, p.gpus, p.efa_interfaces)
    assert tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/resources/nvidia.com/gpu"] == "8"
    assert tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/resources/hugepages-2Mi"] == EFA_HUGEPAGES_2MI
    assert tags[f"{AUTOSCALER_TEMPLATE_PREFIX}/taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert p.network_env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    cpu = node_profile("cpu", [M5], efa=False)
    assert cpu.ami_type == AMI_TYPES["cpu"] and cpu.efa is None and cpu.network_env == {}
    assert not any("resources" in k for k in autoscaler_template_tags(cpu.labels, cpu.taints, cpu.gpus, 0))
    g6 = node_profile("gpu", [G6], efa=False)
    assert g6.network_env == {"NCCL_SHM_USE_CUDA_MEMCPY": "1"}


# ------------------------------------------------------------------------------------------ names
def test_names_fit_and_stay_distinct() -> None:
    long = "x" * 80
    assert len(fit_name(long, 63)) == 63 and fit_name(long, 63) == fit_name(long, 63)
    assert fit_name(long + "a", 63) != fit_name(long + "b", 63)
    assert fit_name("short", 63) == "short"
    assert k8s_name("My-Job-", "workers") == "my-job-workers"


# ------------------------------------------------------------------------------------------- plan
def test_plan_of_an_efa_stack() -> None:
    cfg = config(
        nodeGroups={
            "gpu": {
                "instanceTypes": ["p5.48xlarge"],
                "minSize": 0,
                "desiredSize": 2,
                "maxSize": 2,
                "availabilityZone": "us-east-1a",
            }
        },
        jobs={"train": {"kind": "pytorch", "script": "/app/train.py", "nodes": 2, "healthCheck": {"enforce": True}}},
    )
    plan = build_plan(cfg)
    g = plan.groups["gpu"]
    job = plan.jobs["train"]
    assert plan.efa and plan.gpu and plan.autoscale and job.group is g
    assert (job.nodes, job.min_nodes, job.max_nodes, job.procs_per_node) == (2, 1, 2, 8)
    placement = job.placement
    assert placement["efa_devices"] == g.efa.interfaces == 32  # type: ignore[union-attr]
    assert placement["node_selector"][ZONE_LABEL] == "us-east-1a"
    assert placement["node_selector"][NODE_ROLE_LABEL] == "gpu"
    assert placement["hugepages_2mi"] == EFA_HUGEPAGES_2MI
    assert plan.system.profile.efa is None and plan.system.name == "system"
    assert job.health_check is not None and job.health_check.message_bytes == 2 << 30
    assert job.health_check.threshold_gbytes_per_s == round(0.8 * 437.79, 2)
    assert job.output_dir == f"/data/runs/{job.run_id}" and job.run_id.startswith("train-")


def test_plan_without_workers() -> None:
    plan = build_plan(config())
    assert not plan.groups and not plan.autoscale and not plan.gpu and not plan.jobs


# ------------------------------------------------------------------------------------------ zones
def test_zones_keep_pinned_groups_and_fill_up() -> None:
    cfg = config(
        network={"availabilityZoneCount": 2},
        nodeGroups={
            "gpu": {
                "instanceTypes": ["p4d.24xlarge"],
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 1,
                "availabilityZone": "us-east-1d",
            }
        },
    )
    a, b, d = Zone("us-east-1a", "use1-az4"), Zone("us-east-1b", "use1-az6"), Zone("us-east-1d", "use1-az1")
    assert choose_zones(cfg, [a, b, d]) == [a, d]
    with pytest.raises(ConfigError, match="us-east-1d is not an available zone"):
        choose_zones(cfg, [a, b])
    # the same physical zone pinned by its ID
    by_id = config(
        network={"availabilityZoneCount": 2},
        nodeGroups={
            "gpu": {
                "instanceTypes": ["p4d.24xlarge"],
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 1,
                "availabilityZone": "use1-az1",
            }
        },
    )
    assert choose_zones(by_id, [a, b, d]) == [a, d]


def test_zones_eks_refuses_are_never_chosen_for_the_control_plane() -> None:
    """use1-az3 is skipped when zones are chosen; pinned there, the group keeps its zone and two zones EKS
    accepts are added for the control plane."""
    a, b, c, d = (
        Zone("us-east-1a", "use1-az4"),
        Zone("us-east-1b", "use1-az6"),
        Zone("us-east-1c", "use1-az3"),
        Zone("us-east-1d", "use1-az1"),
    )
    three = config(network={"availabilityZoneCount": 3})
    assert choose_zones(three, [a, b, c, d]) == [a, b, d]
    assert not c.control_plane and all(z.control_plane for z in (a, b, d))
    pinned = config(
        network={"availabilityZoneCount": 2},
        nodeGroups={
            "gpu": {
                "instanceTypes": ["p4d.24xlarge"],
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 1,
                "availabilityZone": "us-east-1c",
            }
        },
    )
    chosen = choose_zones(pinned, [a, b, c, d])
    assert chosen == [a, b, c] and control_plane_zones(chosen) == [a, b]
    with pytest.raises(ConfigError, match="zones EKS supports"):
        choose_zones(config(network={"availabilityZoneCount": 2}), [a, c])


# ------------------------------------------------------------------------------------ config rules
def test_inconsistent_user_facts_name_the_instance_facts_key() -> None:
    found = problems(
        instanceFacts={
            "x9.large": {"vcpus": 8, "memoryMib": 32768, "maxEfaInterfaces": 2, "networkCards": 1, "source": "EC2 API"}
        },
        nodeGroups={
            "x": {
                "instanceTypes": ["x9.large"],
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 1,
                "availabilityZone": "us-east-1a",
            }
        },
    )
    assert any(
        p.startswith(
            "eks-training:instanceFacts.x9.large.maxEfaInterfaces: 2 != "
            "eks-training:instanceFacts.x9.large.networkCards (1)"
        )
        for p in found
    ), found


def test_a_failed_group_is_not_reported_again_as_missing() -> None:
    found = problems(
        nodeGroups={"h100": {"instanceType": "p5.48xlarge", "minSize": 0, "desiredSize": 0, "maxSize": 1}},
        jobs={"train": {"kind": "pytorch", "script": "/opt/t.py", "nodeGroup": "h100"}},
    )
    assert all("eks-training:jobs." not in p for p in found), found
    assert any("nodeGroups.h100.instanceType: unknown key" in p for p in found)


def test_unset_max_workers_is_not_blamed() -> None:
    found = problems(
        nodeGroups={"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 2}},
        jobs={"train": {"kind": "pytorch", "script": "/opt/t.py", "nodes": 4}},
    )
    assert found == [
        "eks-training:jobs.train.nodes: 4 > eks-training:nodeGroups.cpu.maxSize (2): one pod runs per node; "
        "raise maxSize or lower nodes"
    ], found


def test_jobs_are_ordered_after_what_they_wait_for() -> None:
    from stacks.plan import job_order

    cfg = config(
        nodeGroups={"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 2}},
        jobs={
            "c": {"kind": "command", "command": ["x"], "after": ["b"]},
            "b": {"kind": "command", "command": ["x"], "after": ["a"]},
            "a": {"kind": "command", "command": ["x"]},
        },
    )
    assert job_order(cfg.jobs) == ["a", "b", "c"] and list(build_plan(cfg).jobs) == ["a", "b", "c"]


def test_run_id_ignores_the_size_but_not_the_recipe() -> None:
    group = {"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 4}}

    def run_id(**job: Any) -> str:
        cfg = config(nodeGroups=group, jobs={"t": {"kind": "pytorch", "script": "/opt/s.py", **job}})
        return build_plan(cfg).jobs["t"].run_id

    assert run_id(nodes=1) == run_id(nodes=3, maxNodes=4)
    assert run_id(nodes=1) != run_id(nodes=1, args=["--epochs", "2"])


def test_the_upgrade_summary_has_words_for_every_entry_of_a_run_recipe() -> None:
    """Every entry of a run recipe (each job of every preset) has the words the upgrade summary names it by
    (:data:`stacks.plan.RECIPE_WORDS`), and every word names an entry: a new entry changed would otherwise be reported
    as "its image, code or this project's version"."""
    from stacks.plan import RECIPE_WORDS
    from tests.harness import stack_names

    keys = {key for stack in stack_names() for job in plan_stack(stack)[1].jobs.values() for key in job.run_recipe}
    assert "after" in keys  # the input jobs' folders, named by job
    assert keys - {"after"} == set(RECIPE_WORDS)


def test_a_new_run_of_a_job_is_a_new_run_of_the_jobs_after_it() -> None:
    """A job that waits for another reads that job's output folder: a new run there (new args, a new outputDir) is a
    new run of the waiting job, in a folder of its own, instead of its finished run found again or overwritten."""
    group = {"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 4}}

    def plans(**train: Any) -> dict[str, Any]:
        jobs = {
            "train": {"kind": "pytorch", "script": "/opt/s.py", **train},
            "tune": {"kind": "pytorch", "script": "/opt/t.py", "after": ["train"]},
            "report": {"kind": "command", "command": ["x"], "after": ["tune"]},
            "other": {"kind": "command", "command": ["y"]},
        }
        return {n: (j.run_id, j.output_dir) for n, j in build_plan(config(nodeGroups=group, jobs=jobs)).jobs.items()}

    base, longer, moved = plans(), plans(args=["--epochs", "2"]), plans(outputDir="runs/kept")
    assert plans() == base and plans(nodes=2) == base, "the same recipe, the same runs (a size is not a new run)"
    for changed in (longer, moved):
        assert all(changed[n] != base[n] for n in ("tune", "report")), changed
        assert changed["other"] == base["other"]


def test_system_group_jobs_request_a_quarter_of_a_node() -> None:
    cfg = config(jobs={"ev": {"kind": "command", "command": ["x"], "nodeGroup": "system"}})
    placement = build_plan(cfg).jobs["ev"].placement
    facts = INSTANCE_TYPES["m5.large"]
    assert placement["gpus"] == 0 and placement["cpu_millis"] <= 0.25 * facts.vcpus * 1000
    assert placement["memory_mib"] <= 0.25 * facts.memory_mib


def test_catalog_lookups_use_user_facts() -> None:
    cfg = config(
        instanceFacts={"x9.large": {"vcpus": 8, "memoryMib": 32768, "source": "EC2 API"}},
        nodeGroups={"x": {"instanceTypes": ["x9.large"], "minSize": 0, "desiredSize": 0, "maxSize": 1}},
    )
    assert isinstance(cfg.catalog, Catalog) and cfg.instance("x9.large").user_supplied
    assert build_plan(cfg).groups["x"].profile.instance.name == "x9.large"


# --------------------------------------------------------------------------------- admin principals
def test_roles_and_their_sessions_compare_by_account_and_name() -> None:
    from stacks.preflight.checks import principal_of

    role = principal_of("arn:aws:iam::123456789012:role/ci/platform-deployer")
    assert role == ("aws", "123456789012", "platform-deployer")
    assert principal_of("arn:aws:sts::123456789012:assumed-role/platform-deployer/pulumi-up") == role
    assert principal_of("arn:aws-cn:sts::123456789012:assumed-role/platform-deployer/s") != role
    assert principal_of("arn:aws:sts::210987654321:assumed-role/platform-deployer/s") != role
    assert principal_of("arn:aws:iam::123456789012:user/alice") is None


# ------------------------------------------------------------------------------------ storage plan
def _grp(types: list[str], **extra: Any) -> dict[str, Any]:
    return {"instanceTypes": types, "minSize": 0, "desiredSize": 0, "maxSize": 2, **extra}


def test_efs_is_the_default_storage() -> None:
    plan = build_plan(config(nodeGroups={"cpu": _grp(["m5.xlarge"])}))
    assert plan.storage.backend == "efs" and not plan.storage.is_fsx
    assert plan.storage.zone is None and plan.storage.fsx is None


TRAIN = {"kind": "pytorch", "script": "/app/train.py"}


def test_fsx_follows_the_zone_of_the_jobs_groups_and_its_efa_clients() -> None:
    plan = build_plan(
        config(
            nodeGroups={
                "gpu": _grp(["p5.48xlarge"], availabilityZone="us-east-1c"),
                "other": _grp(["p4d.24xlarge"], availabilityZone="us-east-1c", efa=False),
                "cpu": _grp(["m5.xlarge"]),
                "spare": _grp(["p4d.24xlarge"], availabilityZone="us-east-1a"),
            },
            jobs={
                "train": {**TRAIN, "nodeGroup": "gpu", "nodes": 2},
                "prep": {"kind": "command", "command": ["true"], "nodeGroup": "cpu"},
                "report": {"kind": "command", "command": ["true"], "nodeGroup": "system"},
            },
            storage={"backend": "fsx"},
        )
    )
    s = plan.storage
    assert s.is_fsx and s.zone == "us-east-1c" and s.subnet_id is None
    assert s.zone_key == "eks-training:nodeGroups.gpu.availabilityZone"
    assert s.client_groups == ("gpu", "other") and s.efa_client_groups == ("gpu",)
    assert s.fsx is not None and (s.fsx.storage_capacity_gib, s.fsx.throughput_per_tib) == (1200, 250)


def test_fsx_zone_is_that_of_every_pinned_group_whose_jobs_mount_it() -> None:
    groups = {
        "a": _grp(["p4d.24xlarge"], availabilityZone="us-east-1a"),
        "b": _grp(["p4d.24xlarge"], availabilityZone="us-east-1b"),
    }
    jobs = {"train": {**TRAIN, "nodeGroup": "a"}, "tune": {**TRAIN, "nodeGroup": "b"}}
    found = problems(nodeGroups=groups, jobs=jobs, storage={"backend": "fsx"})
    assert found == [
        "eks-training:nodeGroups.b.availabilityZone: us-east-1b differs from "
        "eks-training:nodeGroups.a.availabilityZone (us-east-1a), and the jobs of both groups mount the FSx for Lustre "
        "file system (a: job train; b: job tune), which lives in one zone; pin b to us-east-1a, run those jobs on one "
        "group, or use eks-training:storage.backend: efs (a mount target in every zone)"
    ], found
    # the same groups with jobs on one of them: the file system follows it (the idle group does not decide)
    plan = build_plan(
        config(nodeGroups=groups, jobs={"train": {**TRAIN, "nodeGroup": "b"}}, storage={"backend": "fsx"})
    )
    assert plan.storage.zone == "us-east-1b" and plan.storage.client_groups == ("b",)
    # an explicit zone may only repeat it
    wrong = problems(
        nodeGroups=groups,
        jobs={"train": {**TRAIN, "nodeGroup": "b"}},
        storage={"backend": "fsx", "fsx": {"availabilityZone": "us-east-1a"}},
    )
    assert len(wrong) == 1 and wrong[0].startswith(
        "eks-training:storage.fsx.availabilityZone: us-east-1a is not where the jobs that mount the file system run "
        "(eks-training:nodeGroups.b.availabilityZone is us-east-1b: job train)"
    ), wrong


def test_datasets_in_the_linked_s3_prefix_are_imported_not_staged() -> None:
    plan = build_plan(
        config(
            nodeGroups={"gpu": _grp(["p5.48xlarge"], availabilityZone="us-east-1c")},
            datasets={"cifar10": {}, "imagenet": {"source": "s3://team-data/datasets/imagenet/"}},
            jobs={
                "train": {**TRAIN, "nodeGroup": "gpu", "dataset": "imagenet"},
                "eval": {**TRAIN, "nodeGroup": "gpu", "dataset": "cifar10"},
            },
            storage={
                "backend": "fsx",
                "fsx": {"dataRepository": {"s3Path": "s3://team-data/datasets/", "fileSystemPath": "/in"}},
            },
        )
    )
    imagenet, cifar = plan.datasets["imagenet"], plan.datasets["cifar10"]
    assert imagenet.imported and imagenet.path == "in/imagenet" and imagenet.data_dir == "/data/in/imagenet"
    assert not cifar.imported and cifar.data_dir == "/data/datasets/cifar10", "an https dataset is still staged"
    assert plan.jobs["train"].data_dir == "/data/in/imagenet"


def test_fsx_zone_from_the_key_or_the_only_pinned_group() -> None:
    explicit = build_plan(
        config(
            nodeGroups={"cpu": _grp(["m5.xlarge"])},
            storage={"backend": "fsx", "fsx": {"availabilityZone": "us-east-1b"}},
        )
    )
    assert explicit.storage.zone == "us-east-1b" and explicit.storage.client_groups == ()
    assert explicit.storage.zone_key == "eks-training:storage.fsx.availabilityZone"
    only = build_plan(
        config(
            nodeGroups={"gpu": _grp(["p4d.24xlarge"], availabilityZone="us-east-1d"), "cpu": _grp(["m5.xlarge"])},
            storage={"backend": "fsx"},
        )
    )
    assert only.storage.zone == "us-east-1d" and only.storage.efa_client_groups == ("gpu",)


def test_an_efa_file_system_without_efa_clients_names_the_catalogs_efa_families() -> None:
    """The loader refuses ``storage.fsx.efa`` today (storage.py: no node group configures the EFA client); once it
    does not, the zone rule names the families with EFA, read from the catalog, not a list of a few."""
    cfg = config(nodeGroups={"cpu": _grp(["m5.xlarge"], availabilityZone="us-east-1a")}, storage={"backend": "fsx"})
    fsx = cfg.storage.fsx_settings.model_copy(update={"efa": True})
    _, found = fsx_location(fsx, cfg.node_groups, claim_readers(cfg.jobs), False, cfg.catalog)
    families = sorted({t.family for t in INSTANCE_TYPES.values() if t.supports_efa})
    assert len(found) == 1 and found[0].startswith("eks-training:storage.fsx.efa: "), found
    assert found[0].endswith(f"pin an EFA group ({', '.join(families)}) there"), found
    assert {"p5", "g6e"} <= set(families)


def test_fsx_zone_joins_the_vpc_zones() -> None:
    cfg = config(
        network={"availabilityZoneCount": 2},
        nodeGroups={"cpu": _grp(["m5.xlarge"])},
        storage={"backend": "fsx", "fsx": {"availabilityZone": "us-east-1d"}},
    )
    a, b, c, d = (
        Zone("us-east-1a", "use1-az6"),
        Zone("us-east-1b", "use1-az1"),
        Zone("us-east-1c", "use1-az2"),
        Zone("us-east-1d", "use1-az4"),
    )
    assert choose_zones(cfg, [a, b, c, d]) == [a, d]
    with pytest.raises(ConfigError, match="storage.fsx.availabilityZone: us-east-1d is not an available zone"):
        choose_zones(cfg, [a, b])


def test_fsx_in_an_existing_vpc_uses_a_subnet() -> None:
    subnets = ["subnet-0aaa1111bbbb22223", "subnet-0ccc3333dddd44445"]
    vpc = {"vpcId": "vpc-0abc1234def567890", "privateSubnetIds": subnets}
    plan = build_plan(
        config(
            existingVpc=vpc,
            nodeGroups={"gpu": _grp(["p5.48xlarge"], subnetId=subnets[1])},
            jobs={"train": {**TRAIN, "nodeGroup": "gpu"}},
            storage={"backend": "fsx", "retainOnDelete": True},
        )
    )
    assert plan.storage.subnet_id == subnets[1] and plan.storage.zone is None
    wrong = problems(
        existingVpc=vpc,
        nodeGroups={"cpu": _grp(["m5.xlarge"])},
        storage={"backend": "fsx", "fsx": {"availabilityZone": "us-east-1a"}},
    )
    assert any("storage.fsx.availabilityZone: with existingVpc place the file system with subnetId" in p for p in wrong)
    outside = problems(
        existingVpc=vpc,
        nodeGroups={"cpu": _grp(["m5.xlarge"])},
        storage={"backend": "fsx", "fsx": {"subnetId": "subnet-0eee5555ffff66667"}},
    )
    assert any("subnet-0eee5555ffff66667 is not one of eks-training:existingVpc.privateSubnetIds" in p for p in outside)


def test_data_repository_paths() -> None:
    from stacks.config import DataRepositoryConfig

    created = DataRepositoryConfig.model_validate({"exportPath": "/runs"})
    assert (created.bucket, created.import_prefix, created.export_s3_prefix) == (None, "datasets/", "runs/")
    named = DataRepositoryConfig.model_validate(
        {"s3Path": "s3://my-data.example/imagenet/v1/", "exportPath": "/out/ckpt", "exportPrefix": "ckpt/"}
    )
    assert (named.bucket, named.import_prefix, named.export_s3_prefix) == ("my-data.example", "imagenet/v1/", "ckpt/")
    overlap = problems(
        nodeGroups={"cpu": _grp(["m5.xlarge"])},
        storage={
            "backend": "fsx",
            "fsx": {
                "availabilityZone": "us-east-1a",
                "dataRepository": {"exportPath": "/runs", "exportPrefix": "datasets/x/"},
            },
        },
    )
    assert any(
        "storage.fsx.dataRepository.exportPrefix: datasets/x/ overlaps the import prefix datasets/" in p
        for p in overlap
    )


# ------------------------------------------------------------------------------------------------ costs
def test_fsx_capacity_is_priced_in_running_and_idle_and_efs_is_not() -> None:
    from components.catalog import FSX_LUSTRE_PRICES, HOURS_PER_MONTH
    from stacks.costs import estimate, storage_summary

    groups = {"gpu": _grp(["p4d.24xlarge"], availabilityZone="us-east-1a")}
    efs = estimate(build_plan(config(nodeGroups=groups)))
    fsx_plan = build_plan(
        config(
            nodeGroups=groups, storage={"backend": "fsx", "fsx": {"storageCapacityGib": 4800, "throughputPerTib": 1000}}
        )
    )
    fsx = estimate(fsx_plan)
    hourly = 4800 * FSX_LUSTRE_PRICES[1000].usd / HOURS_PER_MONTH
    assert efs.storage == 0.0 and fsx.storage == round(hourly, 3)
    assert efs.running is not None and efs.idle is not None and fsx.running is not None and fsx.idle is not None
    assert fsx.running - efs.running == pytest.approx(hourly, abs=0.002)
    assert fsx.idle - efs.idle == pytest.approx(hourly, abs=0.002), "billed while it exists, jobs or not"
    assert storage_summary(fsx_plan) == f"FSx 4800 GiB at 1000 MB/s/TiB, ${hourly:.3f}/h"


def test_spot_groups_default_to_no_efa_and_spread_over_zones() -> None:
    cfg = config(
        nodeGroups={
            "spot": {
                "instanceTypes": ["p5.48xlarge"],
                "capacityType": "SPOT",
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 2,
            },
            "asked": {
                "instanceTypes": ["p5.48xlarge"],
                "capacityType": "SPOT",
                "efa": True,
                "availabilityZone": "us-east-1a",
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 2,
            },
            "ondemand": {
                "instanceTypes": ["p5.48xlarge"],
                "availabilityZone": "us-east-1a",
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 2,
            },
        }
    )
    plan = build_plan(cfg)
    assert plan.groups["spot"].efa is None and not plan.groups["spot"].single_zone
    assert plan.groups["spot"].placement()["efa_devices"] == 0
    assert plan.groups["asked"].efa is not None and plan.groups["asked"].efa.interfaces == 32
    assert plan.groups["ondemand"].efa is not None


def test_spot_is_priced_as_spot_and_labelled() -> None:
    from components.catalog import DEFAULT_SPOT_DISCOUNT, HOURS_PER_MONTH, SERVICE_PRICES
    from components.nodeplan import DEFAULT_DISK_SIZE_GIB
    from stacks.costs import estimate

    disk = DEFAULT_DISK_SIZE_GIB * SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH
    base = {"instanceTypes": ["g6.xlarge"], "minSize": 0, "desiredSize": 2, "maxSize": 2}

    def gpu_line(group: dict[str, Any]) -> Any:
        cost = estimate(build_plan(config(nodeGroups={"gpu": group})))
        return next(c for c in cost.lines if c.what.startswith("nodeGroups.gpu:"))

    on_demand = gpu_line(base)
    assert on_demand.running == pytest.approx(2 * (G6.price_per_hour + disk)) and on_demand.basis == "On-Demand"
    assumed = gpu_line({**base, "capacityType": "SPOT"})
    assert DEFAULT_SPOT_DISCOUNT.fraction == 0.5
    assert assumed.running == pytest.approx(2 * (G6.price_per_hour * 0.5 + disk))
    assert assumed.basis.startswith(
        "Spot, estimated at 50% off On-Demand (an assumption, set nodeGroups.gpu.spotDiscount"
    )
    configured = gpu_line({**base, "capacityType": "SPOT", "spotDiscount": 0.7})
    assert configured.running == pytest.approx(2 * (G6.price_per_hour * 0.3 + disk))
    assert configured.basis == "Spot, estimated at 70% off On-Demand (nodeGroups.gpu.spotDiscount)"


def test_capacity_block_instances_are_prepaid() -> None:
    from components.catalog import HOURS_PER_MONTH, SERVICE_PRICES
    from stacks.costs import estimate

    cfg = config(
        nodeGroups={
            "gpu": {
                "instanceTypes": ["p5.48xlarge"],
                "capacityType": "CAPACITY_BLOCK",
                "capacityReservationId": "cr-0123456789abcdef0",
                "availabilityZone": "us-east-1a",
                "minSize": 0,
                "desiredSize": 2,
                "maxSize": 2,
                "diskSizeGib": 500,
            }
        }
    )
    line = next(c for c in estimate(build_plan(cfg)).lines if c.what.startswith("nodeGroups.gpu:"))
    assert line.running == pytest.approx(2 * 500 * SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH)
    assert "paid up front with the block" in line.basis
    # the idle-GPU alarm guards the root volumes only, and the plan says why
    from stacks.plan.report import render, report

    text = render(report(build_plan(cfg), "us-east-1"))
    (alarm,) = [line for line in text.splitlines() if "idle-GPU alarm on gpu" in line]
    volumes = 2 * 500 * SERVICE_PRICES["ebs-gp3"].usd / HOURS_PER_MONTH
    assert alarm.endswith(
        f"guards ${volumes:.3f}/h (2 node(s) at most; the Capacity Block's instances are paid up front, so only their "
        "root volumes)"
    ), alarm


@pytest.mark.parametrize(
    "group,fragment",
    [
        ({"spotDiscount": 0.6}, "eks-training:nodeGroups.gpu.spotDiscount: only for capacityType SPOT"),
        ({"capacityType": "SPOT", "spotDiscount": 60}, "did you write a percentage? 60% is 0.6"),
        ({"capacityType": "SPOT", "spotDiscount": 0.95}, "Spot is at most 90% off"),
    ],
)
def test_bad_spot_discounts(group: dict[str, Any], fragment: str) -> None:
    found = problems(
        nodeGroups={"gpu": {"instanceTypes": ["g6.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1, **group}}
    )
    assert len(found) == 1 and fragment in found[0], found


def test_capacity_block_start_action_time() -> None:
    """Auto Scaling takes YYYY-MM-DDThh:mm:ssZ and refuses times in the past: a block that has just started gets
    its action a few minutes from now."""
    from datetime import datetime, timezone

    from components.nodegroup import schedule_time

    now = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
    assert schedule_time("2030-01-02T11:30:00Z", now) == "2030-01-02T11:30:00Z"
    assert schedule_time("2030-01-02T12:30:00+01:00", now) == "2030-01-02T11:30:00Z"
    assert schedule_time("2026-11-22T10:01:00Z", now) == "2026-11-22T10:05:00Z"


def test_jobs_waiting_for_a_group_include_the_jobs_after_them() -> None:
    from stacks.plan import jobs_waiting_for

    cfg = config(
        nodeGroups={
            "gpu": {"instanceTypes": ["g6.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1},
            "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1},
        },
        jobs={
            "prep": {"kind": "command", "command": ["true"], "nodeGroup": "cpu"},
            "train": {"kind": "pytorch", "script": "/opt/t.py", "nodeGroup": "gpu", "after": ["prep"]},
            "evaluate": {"kind": "command", "command": ["true"], "nodeGroup": "system", "after": ["train"]},
            "report": {"kind": "command", "command": ["true"], "nodeGroup": "cpu", "after": ["prep"]},
        },
    )
    plan = build_plan(cfg)
    assert jobs_waiting_for(plan, {"gpu"}) == ["train", "evaluate"]
    assert jobs_waiting_for(plan, {"cpu"}) == ["prep", "train", "evaluate", "report"]
    assert jobs_waiting_for(plan, set()) == []


def test_gpu_jobs_get_their_gpus_peak_for_the_model_flops_utilization() -> None:
    """The bundled trainer's MFU divides by the device's peak dense FP16 FLOP/s (it trains in float16 autocast):
    every GPU group whose types share one GPU model with a published peak passes it as PEAK_FLOPS_PER_DEVICE (the
    variable train.py reads), from the GPU catalog; a CPU group, a GPU without a published peak (A10G) and a group
    mixing GPU models get none."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training"))
    import train_flags  # noqa: E402
    import train_outputs  # noqa: E402

    from components.catalog import INSTANCE_TYPES
    from components.catalog.gpus import GPU_MODELS

    variable = train_flags.ENV_DEFAULTS["peak_flops_per_device"]
    for model in {t.gpu_model for t in INSTANCE_TYPES.values() if t.is_gpu}:
        g = GPU_MODELS[model or ""]
        assert (g.peak_fp16_tflops is None) == (model == "NVIDIA A10G"), model
        assert (g.peak_source is None) == (g.peak_fp16_tflops is None), model
    cases = {
        "p5.48xlarge": 989.5e12,
        "p4d.24xlarge": 312e12,
        "p3.2xlarge": 125e12,
        "g6.xlarge": 121e12,
        "p6-b200.48xlarge": 2250e12,
        "g5.xlarge": None,
        "c5.4xlarge": None,
    }
    for instance_type, peak in cases.items():
        cfg = config(
            nodeGroups={
                "w": {"instanceTypes": [instance_type], "minSize": 0, "desiredSize": 1, "maxSize": 1, "efa": False}
            },
            jobs={"train": {"kind": "pytorch", "script": "/app/train.py"}},
        )
        env = build_plan(cfg).jobs["train"].placement.get("env") or {}
        if peak is None:
            assert variable not in env, instance_type
        else:
            assert float(env[variable]) == peak, instance_type
            found = train_outputs.flops_metrics(
                [{"images": 10, "train_time_s": 1.0, "world_size": 1, "world_sizes": [1], "batch_size": 10}],
                1e12,
                float(env[variable]),
            )
            assert found["mfu"] == pytest.approx(10 * 1e12 / peak, abs=1e-4) and found["mfu_note"] is None
    mixed = config(
        nodeGroups={
            "w": {
                "instanceTypes": ["p4d.24xlarge", "p5.48xlarge"],
                "minSize": 0,
                "desiredSize": 1,
                "maxSize": 1,
                "efa": False,
                "capacityType": "SPOT",
            }
        },
        jobs={"train": {"kind": "pytorch", "script": "/app/train.py"}},
    )
    assert variable not in (build_plan(mixed).jobs["train"].placement.get("env") or {})


def test_a_dataset_without_a_path_is_staged_into_a_folder_of_its_own_name() -> None:
    def mine(cfg: dict[str, Any]) -> None:
        cfg["eks-training:datasets"]["mine"] = {"source": "s3://my-bucket/mine.tar.gz"}

    _config, plan = plan_stack("dev", edit=mine)
    assert dataset_plan(plan.config, "mine").path == "datasets/mine"
    assert plan.datasets["cifar10"].path == "datasets/cifar10"


def test_the_plan_says_when_a_groups_max_size_cannot_hold_a_steps_jobs_at_once() -> None:
    """Kueue admits a step's jobs in turn when together they need more of a group than its maxSize: the plan says
    so, and says nothing where the group holds them (a control) or where they run on two groups."""

    def text(max_size: int, second_group: str = "cpu") -> str:
        cfg = config(
            nodeGroups={
                g: {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": max_size}
                for g in ("cpu", "more")
            },
            jobs={
                "a": {"kind": "command", "command": ["x"], "nodeGroup": "cpu", "nodes": 2},
                "b": {"kind": "command", "command": ["x"], "nodeGroup": second_group, "nodes": 2},
                "c": {"kind": "command", "command": ["x"], "nodeGroup": "cpu", "nodes": 2, "after": ["a", "b"]},
            },
        )
        return render(report(build_plan(cfg), "us-east-1"))

    crowded = text(3)
    assert (
        "  step 1 asks group cpu for 4 nodes at once, more than its maxSize 3: Kueue admits a, b one at a time, in the "
        "order they reach its queue" in crowded
    )
    assert "step 2 asks" not in crowded  # one job alone: a job larger than its group is refused by the config rules
    assert "asks group" not in text(4)
    assert "asks group" not in text(3, second_group="more")
    # the system group's pods take a share of a node each: two jobs of 2 pods fit on its 3 nodes at most
    two = {"kind": "command", "command": ["x"], "nodes": 2, "nodeGroup": "system"}
    system = build_plan(config(jobs={"a": two, "b": two}))
    assert system.system.max_size == 3 and {j.group.name for j in system.jobs.values()} == {"system"}
    assert "asks group" not in render(report(system, "us-east-1"))


def test_the_plan_says_which_folder_each_image_is_built_from(tmp_path: Path) -> None:
    """An image of the project's own folder, one whose folder the project lacks (the shipped one of that name is
    built), and a prebuilt one, each named as such; one no job runs is not listed as built, only noted."""
    shutil.copytree(REPO / "training", tmp_path / "my-training", ignore=shutil.ignore_patterns("__pycache__"))
    job = {"kind": "command", "nodeGroup": "cpu", "command": ["true"]}
    cfg = {
        "aws:region": "us-east-1",
        "eks-training:nodeGroups": {
            "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1}
        },
        "eks-training:images": {
            "training": {"context": "my-training"},
            "nccl-tests": {"context": "images/nccl-tests"},
            "other": {"prebuilt": "public.ecr.aws/docker/library/python:3.12"},
            "unused": {"prebuilt": "public.ecr.aws/docker/library/python@sha256:" + "c" * 64},
        },
        "eks-training:jobs": {"a": {**job, "image": "nccl-tests"}, "b": {**job, "image": "other", "after": ["a"]}},
    }
    text = render(report(build_plan(load_config("eks-training", "unit", cfg, project_dir=tmp_path)), "us-east-1"))
    assert "  unused:" not in text and "eks-training:images.unused: no job runs it" in text, text
    assert f"  training: built from {tmp_path / 'my-training'} (the project's own)" in text
    assert f"  nccl-tests: built from {REPO / 'images' / 'nccl-tests'} (shipped with this project)" in text
    assert (
        "  other: prebuilt public.ecr.aws/docker/library/python:3.12\n    warning: eks-training:images.other.prebuilt"
        in text
    )
    assert "Pin it by digest, public.ecr.aws/docker/library/python@sha256:<digest>" in text
