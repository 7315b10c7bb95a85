"""EFA from instance type to pod, capacity options and scale-from-zero, for every preset."""

import json
from typing import Any

import pytest

from components.catalog import EFA_ENV_BY_FAMILY, HELM_CHARTS, INSTANCE_TYPES, REFERENCE_ALLREDUCE
from components.catalog.efa import EFA_HUGEPAGES_2MI
from components.quantities import mebibytes_of
from components.scheduling import EFA_LABEL, GPU_TAINT, NODE_ROLE_LABEL
from stacks.costs import estimate
from tests.harness import PROJECT, Program, Registration, contains_unknown, run_program, stack_config, stack_names

STACKS = stack_names()
MODES = [False, True]


def groups(stack: str) -> dict[str, Any]:
    return dict(stack_config(stack).get(f"{PROJECT}:nodeGroups") or {})


def efa_groups(stack: str) -> dict[str, Any]:
    out = {}
    for name, g in groups(stack).items():
        facts = INSTANCE_TYPES[g["instanceTypes"][0]]
        if g.get("efa", facts.supports_efa):
            out[name] = g
    return out


EFA_STACKS = [s for s in STACKS if efa_groups(s)]


def test_presets_cover_the_hardware_profiles() -> None:
    assert {"workshop", "p3-2xlarge", "p3-16xlarge", "g5", "g6", "p4d", "p5", "p5en", "p6-b200"} <= set(STACKS)
    assert {"p4d", "p5", "p5en", "p6-b200"} <= set(EFA_STACKS)


def _ng(p: Program, group: str) -> Registration:
    return p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"][NODE_ROLE_LABEL] == group)


def _component(p: Program, group: str) -> Registration:
    return p.by_urn(_ng(p, group).parent)


def _child(p: Program, parent: Registration, t: str, suffix: str = "") -> Registration:
    found = [c for c in p.children(parent) if c.type == t and c.name.endswith(suffix)]
    assert len(found) == 1, (t, suffix, [c.name for c in found])
    return found[0]


@pytest.mark.parametrize("preview", MODES)
@pytest.mark.parametrize("stack", EFA_STACKS)
class TestEfaChain:
    def test_launch_template_has_an_interface_per_network_card(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        for gname, g in efa_groups(stack).items():
            facts = INSTANCE_TYPES[g["instanceTypes"][0]]
            comp = _component(p, gname)
            lt = _child(p, comp, "aws:ec2/launchTemplate:LaunchTemplate")
            sg = _child(p, comp, "aws:ec2/securityGroup:SecurityGroup", "-efa-sg")
            nis = lt.inputs["networkInterfaces"]
            assert len(nis) == facts.network_cards == facts.max_efa_interfaces
            assert [ni["networkCardIndex"] for ni in nis] == list(range(facts.network_cards))
            assert nis[0]["deviceIndex"] == 0 and nis[0]["interfaceType"] == "efa"
            for ni in nis[1:]:
                assert ni["deviceIndex"] == 1 and ni["interfaceType"] == "efa-only"
            for ni in nis:
                assert "associatePublicIpAddress" not in ni
            assert sg.urn in lt.deps_of("networkInterfaces"), "every interface carries the EFA security group"
            assert p.one("eks:index:Cluster").urn in lt.deps_of("networkInterfaces"), "and the cluster security group"
            assert lt.inputs["metadataOptions"]["httpTokens"] == "required"

    def test_placement_group_and_single_zone(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        for gname, g in efa_groups(stack).items():
            comp = _component(p, gname)
            lt = _child(p, comp, "aws:ec2/launchTemplate:LaunchTemplate")
            if g.get("capacityReservationId"):
                assert "placement" not in lt.inputs
                continue
            pg = _child(p, comp, "aws:ec2/placementGroup:PlacementGroup")
            assert pg.inputs["strategy"] == "cluster"
            assert lt.deps_of("placement") == [pg.urn]
            (subnet,) = _ng(p, gname).deps_of("subnetIds")
            assert p.by_urn(subnet).inputs["availabilityZone"] == g["availabilityZone"]

    def test_security_group_allows_all_traffic_in_and_out_to_itself(
        self, program_for, stack: str, preview: bool
    ) -> None:
        p: Program = program_for(stack, preview)
        for gname in efa_groups(stack):
            comp = _component(p, gname)
            sg = _child(p, comp, "aws:ec2/securityGroup:SecurityGroup", "-efa-sg")
            ingress = _child(p, comp, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
            egress = _child(p, comp, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
            for rule in (ingress, egress):
                assert rule.inputs["ipProtocol"] == "-1"
                assert rule.deps_of("securityGroupId") == [sg.urn]
                assert rule.deps_of("referencedSecurityGroupId") == [sg.urn], "self-referencing"
                assert "cidrIpv4" not in rule.inputs

    def test_efa_device_plugin_selects_efa_nodes(self, program_for, stack: str, preview: bool) -> None:
        """Its tolerations: tests/mock/test_device_plugins.py."""
        p: Program = program_for(stack, preview)
        rel = p.one("kubernetes:helm.sh/v3:Release", lambda r: r.inputs["chart"] == "aws-efa-k8s-device-plugin")
        chart = HELM_CHARTS["aws-efa-k8s-device-plugin"]
        assert rel.inputs["version"] == chart.version and rel.inputs["repositoryOpts"]["repo"] == chart.repo
        values = rel.inputs["values"]
        assert values["nodeSelector"] == {EFA_LABEL[0]: EFA_LABEL[1]}
        for gname in efa_groups(stack):
            ng = _ng(p, gname)
            assert ng.inputs["labels"][EFA_LABEL[0]] == EFA_LABEL[1]

    def test_pods_request_exactly_the_node_group_catalog_row(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        training = stack_config(stack)[f"{PROJECT}:jobs"]["train"]
        g = groups(stack)[training["nodeGroup"]]
        facts = INSTANCE_TYPES[g["instanceTypes"][0]]
        jobs = [j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith(("-train-job", "-allreduce-job"))]
        assert len(jobs) == 2
        for job in jobs:
            pod = job.inputs["spec"]["template"]["spec"]
            (c,) = pod["containers"]
            for side in ("requests", "limits"):
                res = c["resources"][side]
                assert res["vpc.amazonaws.com/efa"] == str(facts.max_efa_interfaces)
                assert res["nvidia.com/gpu"] == str(facts.gpus)
                assert mebibytes_of(res["hugepages-2Mi"]) == mebibytes_of(EFA_HUGEPAGES_2MI) == 5120
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["FI_PROVIDER"] == "efa"
            for k, v in EFA_ENV_BY_FAMILY.get(facts.family, {}).items():
                assert env[k] == v
            assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
            assert pod["nodeSelector"]["topology.kubernetes.io/zone"] == g["availabilityZone"]
            assert pod["nodeSelector"][EFA_LABEL[0]] == EFA_LABEL[1]
            vols = {v["name"]: v for v in pod["volumes"]}
            assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
            assert {"key": GPU_TAINT["key"], "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod[
                "tolerations"
            ]


@pytest.mark.parametrize("stack", STACKS)
def test_every_worker_group_can_scale_from_zero(program_for, stack: str) -> None:
    p = program_for(stack, False)
    rel = p.one("kubernetes:helm.sh/v3:Release", lambda r: r.inputs["chart"] == "cluster-autoscaler")
    cluster_name = p.one("eks:index:Cluster").inputs["name"]
    assert rel.inputs["values"]["autoDiscovery"]["clusterName"] == cluster_name
    assert rel.inputs["values"]["nodeSelector"] == {NODE_ROLE_LABEL: "system"}
    for gname, g in groups(stack).items():
        facts = INSTANCE_TYPES[g["instanceTypes"][0]]
        comp = _component(p, gname)
        tags = {
            t.inputs["tag"]["key"]: t.inputs["tag"]["value"]
            for t in p.children(comp)
            if t.type == "aws:autoscaling/tag:Tag"
        }
        prefix = "k8s.io/cluster-autoscaler/node-template/"
        assert tags[prefix + f"label/{NODE_ROLE_LABEL}"] == gname
        if facts.gpus:
            assert tags[prefix + "resources/nvidia.com/gpu"] == str(facts.gpus)
            assert tags[prefix + "taint/nvidia.com/gpu"] == "true:NoSchedule"
        if g.get("efa", facts.supports_efa):
            assert tags[prefix + "resources/vpc.amazonaws.com/efa"] == str(facts.max_efa_interfaces)
        ng = _ng(p, gname)
        asg_tag = next(t for t in p.children(comp) if t.type == "aws:autoscaling/tag:Tag")
        assert ng.urn in asg_tag.deps_of("autoscalingGroupName"), "tags go on the node group's own ASG"
    # the autoscaler's role can only scale this cluster's groups
    policy = json.loads(
        p.one("aws:iam/rolePolicy:RolePolicy", lambda r: r.name.endswith("-autoscaler-policy")).inputs["policy"]
    )
    scale = next(s for s in policy["Statement"] if s["Sid"] == "ScaleOwnGroups")
    assert scale["Condition"] == {
        "StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
    }


def test_dev_stack_idles_under_a_quarter_dollar_an_hour() -> None:
    from stacks.config import load_config
    from stacks.plan import build_plan

    cfg = load_config(PROJECT, "dev", stack_config("dev"))
    assert all(g.min_size == 0 for g in cfg.node_groups.values())
    assert cfg.autoscaler.enabled
    cost = estimate(build_plan(cfg))
    assert cost.idle is not None and cost.idle <= 0.25, cost


def _with_group(stack: str, **changes: Any) -> dict[str, Any]:
    cfg = stack_config(stack)
    cfg[f"{PROJECT}:nodeGroups"]["gpu"].update(changes)
    return cfg


def test_capacity_block_launch_template() -> None:
    p = run_program(
        "p5", config=_with_group("p5", capacityType="CAPACITY_BLOCK", capacityReservationId="cr-0123456789abcdef0")
    )
    ng = _ng(p, "gpu")
    assert ng.inputs["capacityType"] == "CAPACITY_BLOCK"
    lt = _child(p, _component(p, "gpu"), "aws:ec2/launchTemplate:LaunchTemplate")
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "placement" not in lt.inputs, "the reservation places the instances"
    assert not [c for c in p.children(_component(p, "gpu")) if c.type == "aws:ec2/placementGroup:PlacementGroup"]
    # EKS rejects a Capacity Block group whose launch template has no InstanceType (capacity-blocks-mng guide);
    # the group then names none itself
    assert lt.inputs["instanceType"] == "p5.48xlarge" and "instanceTypes" not in ng.inputs
    assert "launchTemplate" not in ng.ignore_changes, "a scheduled block's group is at 0: updates apply"


def test_on_demand_capacity_reservation() -> None:
    p = run_program("p4d", config=_with_group("p4d", capacityReservationId="cr-0fedcba9876543210"))
    ng = _ng(p, "gpu")
    assert ng.inputs["capacityType"] == "ON_DEMAND"
    lt = _child(p, _component(p, "gpu"), "aws:ec2/launchTemplate:LaunchTemplate")
    assert (
        lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"]
        == "cr-0fedcba9876543210"
    )
    assert "instanceMarketOptions" not in lt.inputs


def test_spot_group_with_several_types() -> None:
    cfg = stack_config("g6")
    cfg[f"{PROJECT}:nodeGroups"]["gpu"].update(
        capacityType="SPOT", instanceTypes=["g6.xlarge", "g5.xlarge", "g4dn.xlarge"]
    )
    p = run_program("g6", config=cfg)
    ng = _ng(p, "gpu")
    assert ng.inputs["capacityType"] == "SPOT" and len(ng.inputs["instanceTypes"]) == 3


def test_efa_can_be_switched_off_on_an_efa_type() -> None:
    p = run_program("p4d", config=_with_group("p4d", efa=False))
    lt = _child(p, _component(p, "gpu"), "aws:ec2/launchTemplate:LaunchTemplate")
    assert "networkInterfaces" not in lt.inputs
    assert not [
        r for r in p.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "aws-efa-k8s-device-plugin"
    ]
    train = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-train-job"))
    (c,) = train.inputs["spec"]["template"]["spec"]["containers"]
    assert "vpc.amazonaws.com/efa" not in c["resources"]["requests"]


def test_health_check_gates_training_with_the_catalog_threshold() -> None:
    p = run_program("p5")
    check = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-allreduce-job"))
    train = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-train-job"))
    assert check.urn in train.dependencies, "training is created only after the health check completed"
    assert "pulumi.com/skipAwait" not in (check.inputs["metadata"].get("annotations") or {}), "Pulumi waits for it"
    (c,) = check.inputs["spec"]["template"]["spec"]["containers"]
    cmd = c["command"]
    assert "/app/allreduce_bench.py" in cmd
    reference = REFERENCE_ALLREDUCE["p5.48xlarge"]
    expected = round(0.8 * reference.busbw_gbytes_per_s, 2)
    assert cmd[cmd.index("--min-busbw-gbps") + 1] == str(expected)
    # measured at the message size the reference was published for
    assert cmd[cmd.index("--max-bytes") + 1] == str(reference.message_bytes)
    assert "--nnodes=2:2" in cmd and "--nproc-per-node=8" in cmd and "--max-restarts=0" in cmd
    assert cmd[cmd.index("--expect-world-size") + 1] == "16"
    # a report-only check (no threshold) on the workshop stack, exercised here with gloo
    w = run_program("workshop")
    wc = next(j for j in w.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-allreduce-job"))
    (c,) = wc.inputs["spec"]["template"]["spec"]["containers"]
    assert "--min-busbw-gbps" not in c["command"]


def test_preview_keeps_efa_counts_known() -> None:
    """Interface counts come from the catalog, so they are known even in preview."""
    p = run_program("p5", preview=True)
    lt = _child(p, _component(p, "gpu"), "aws:ec2/launchTemplate:LaunchTemplate")
    assert len(lt.inputs["networkInterfaces"]) == 32
    assert contains_unknown(lt.inputs["networkInterfaces"][0]["securityGroups"])


def test_autoscaler_owns_desired_sizes_and_may_not_evict_training() -> None:
    p = run_program("workshop")
    owned = set()
    for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
        # the autoscaler owns the desired size of a group it may scale (minSize < maxSize); a fixed size is the stack
        # file's, sent as it is (an unpinned AMI release is kept too: tests/mock/test_node_updates.py)
        sizes = ng.inputs["scalingConfig"]
        scaled = sizes["minSize"] < sizes["maxSize"]
        owned.add(scaled)
        assert sorted(ng.ignore_changes) == ["releaseVersion", *(["scalingConfig.desiredSize"] if scaled else [])], (
            ng.name
        )
    assert owned == {True, False}  # workshop: the system group scales, its 2 training nodes are fixed
    no_evict = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    for r in p.of_type("kubernetes:batch/v1:Job") + p.of_type("kubernetes:apps/v1:Deployment"):
        if r.name.endswith(("-train-job", "-allreduce-job", "-etcd-deployment")):
            assert r.inputs["spec"]["template"]["metadata"]["annotations"] == no_evict, r.name
    off = stack_config("workshop")
    off[f"{PROJECT}:autoscaler"] = {"enabled": False}
    p2 = run_program("workshop", config=off)
    assert not [r for r in p2.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "cluster-autoscaler"]
    assert all(ng.ignore_changes == ["releaseVersion"] for ng in p2.of_type("aws:eks/nodeGroup:NodeGroup"))
    assert not p2.of_type("aws:autoscaling/tag:Tag")


def test_autoscaler_tags_keep_their_identity_when_labels_change() -> None:
    before = {t.urn: t.inputs["tag"]["key"] for t in run_program("g6").of_type("aws:autoscaling/tag:Tag")}
    cfg = _with_group("g6", labels={"team": "vision"})
    after = {t.urn: t.inputs["tag"]["key"] for t in run_program("g6", config=cfg).of_type("aws:autoscaling/tag:Tag")}
    assert len(after) == len(before) + 1
    for urn, key in before.items():
        assert after[urn] == key, "an existing tag resource keeps its key (no replacement shuffle)"


def test_health_check_runs_once_and_is_left_alone_by_updates() -> None:
    p = run_program("p5")
    check = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-allreduce-job"))
    assert set(check.ignore_changes) == {"spec", "metadata"}
    train = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-train-job"))
    assert train.ignore_changes == [
        "spec.suspend"
    ]  # Kueue owns it once the job is created (tests/mock/test_admission.py)


def test_multi_type_spot_pods_fit_the_smallest_type() -> None:
    cfg = stack_config("g6")
    cfg[f"{PROJECT}:nodeGroups"]["gpu"].update(capacityType="SPOT", instanceTypes=["g6.xlarge", "g4dn.xlarge"])
    p = run_program("g6", config=cfg)
    train = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-train-job"))
    (c,) = train.inputs["spec"]["template"]["spec"]["containers"]
    mem_mib = mebibytes_of(c["resources"]["requests"]["memory"])
    for t in ("g6.xlarge", "g4dn.xlarge"):
        facts = INSTANCE_TYPES[t]
        assert mem_mib <= (facts.allocatable_memory_mib or facts.memory_mib), t


def test_efs_claim_and_driver_go_before_the_system_nodes() -> None:
    p = run_program("dev")
    addon = p.one("aws:eks/addon:Addon", lambda r: r.inputs["addonName"] == "aws-efs-csi-driver")
    system_ng = _ng(p, "system")
    assert system_ng.urn in addon.deps_of("clusterName")
    pvc = p.one("kubernetes:core/v1:PersistentVolumeClaim")
    assert p.depends_transitively(pvc, system_ng.urn)


def test_volume_owner_is_the_image_user() -> None:
    from tests.harness import REPO

    p = run_program("dev")
    params = p.one("kubernetes:storage.k8s.io/v1:StorageClass").inputs["parameters"]
    assert "gidRangeStart" not in params, "a per-volume GID would lock a re-adopted file system's data away"
    from components.conventions import TRAINING_IMAGE_UID

    uid = str(TRAINING_IMAGE_UID)
    assert params["uid"] == params["gid"] == uid
    assert f"USER {uid}:{uid}" in (REPO / "training" / "Dockerfile").read_text(), "the catalog states the image's user"
    train = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-train-job"))
    assert train.inputs["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == TRAINING_IMAGE_UID


def test_efa_health_check_refuses_to_measure_tcp() -> None:
    """On EFA groups the check requires the node's EFA devices and the OFI plugin, which the image
    installs (EFA installer, pinned)."""
    from tests.harness import REPO

    p = run_program("p4d")
    check = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-allreduce-job"))
    (c,) = check.inputs["spec"]["template"]["spec"]["containers"]
    assert c["command"][c["command"].index("--require-efa") + 1] == str(
        INSTANCE_TYPES["p4d.24xlarge"].max_efa_interfaces
    )
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in c["env"]
    dockerfile = (REPO / "training" / "Dockerfile").read_text()
    assert "efa_installer.sh" in dockerfile and "--skip-kmod" in dockerfile
    assert "ARG EFA_INSTALLER_VERSION=1.47.0" in dockerfile and "/opt/amazon/ofi-nccl/lib" in dockerfile
    cpu = run_program("workshop")
    wc = next(j for j in cpu.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-allreduce-job"))
    (c,) = wc.inputs["spec"]["template"]["spec"]["containers"]
    assert "--require-efa" not in c["command"]


def _custom_efa_stack(cards: int, efa: int) -> dict[str, Any]:
    cfg = stack_config("p5")
    cfg[f"{PROJECT}:instanceFacts"] = {
        "x8.48xlarge": {
            "vcpus": 192,
            "memoryMib": 2097152,
            "gpus": 8,
            "gpuModel": "NVIDIA H100",  # a catalogued GPU: the image build for it is known
            "maxEfaInterfaces": efa,
            "networkCards": cards,
            "networkGbps": 800,
            "pricePerHour": 10.0,
            "source": "aws ec2 describe-instance-types",
        }
    }
    cfg[f"{PROJECT}:nodeGroups"]["gpu"]["instanceTypes"] = ["x8.48xlarge"]
    cfg[f"{PROJECT}:jobs"]["train"]["healthCheck"] = {"enforce": True, "minBusBandwidthGBps": 100}
    return cfg


def test_inconsistent_efa_facts_are_a_config_error() -> None:
    """maxEfaInterfaces 2 with 1 network card would give the launch template 1 interface and the pods a request
    for 2 (never schedulable): refused."""
    from stacks.config import ConfigError

    p = run_program("p5", config=_custom_efa_stack(cards=1, efa=2), expect_error=True)
    assert isinstance(p.error, ConfigError) and p.registrations == []
    assert (
        "eks-training:instanceFacts.x8.48xlarge.maxEfaInterfaces: 2 != "
        "eks-training:instanceFacts.x8.48xlarge.networkCards (1)" in str(p.error)
    )


def test_one_efa_count_for_launch_template_pods_autoscaler_and_health_check() -> None:
    p = run_program("p5", config=_custom_efa_stack(cards=2, efa=2))
    lt = _child(p, _component(p, "gpu"), "aws:ec2/launchTemplate:LaunchTemplate")
    counts = {"launch template": len(lt.inputs["networkInterfaces"])}
    train = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-train-job"))
    (c,) = train.inputs["spec"]["template"]["spec"]["containers"]
    counts["pod request"] = int(c["resources"]["requests"]["vpc.amazonaws.com/efa"])
    tag = next(
        t for t in p.of_type("aws:autoscaling/tag:Tag") if t.inputs["tag"]["key"].endswith("/vpc.amazonaws.com/efa")
    )
    counts["autoscaler tag"] = int(tag.inputs["tag"]["value"])
    check = next(j for j in p.of_type("kubernetes:batch/v1:Job") if j.name.endswith("-allreduce-job"))
    (hc,) = check.inputs["spec"]["template"]["spec"]["containers"]
    counts["health check"] = int(hc["command"][hc["command"].index("--require-efa") + 1])
    assert set(counts.values()) == {2}, counts


def _dev_with_gpu(**group: Any) -> dict[str, Any]:
    cfg = stack_config("dev")
    cfg[f"{PROJECT}:nodeGroups"] = {
        **cfg[f"{PROJECT}:nodeGroups"],
        "gpu": {"instanceTypes": ["p5.48xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 2, **group},
    }
    return cfg


def _efa_parts(p: Program, group: str) -> dict[str, Any]:
    comp = _component(p, group)
    lt = _child(p, comp, "aws:ec2/launchTemplate:LaunchTemplate")
    return {
        "interfaces": len(lt.inputs.get("networkInterfaces") or []),
        "placement groups": len([c for c in p.children(comp) if c.type == "aws:ec2/placementGroup:PlacementGroup"]),
        "efa security groups": len([c for c in p.children(comp) if c.name.endswith("-efa-sg")]),
        "subnets": len(_ng(p, group).inputs["subnetIds"]),
        "efa label": EFA_LABEL[0] in _ng(p, group).inputs["labels"],
        "efa plugin": any(
            r.inputs["chart"] == "aws-efa-k8s-device-plugin" for r in p.of_type("kubernetes:helm.sh/v3:Release")
        ),
    }


def test_spot_group_of_efa_types_spreads_over_the_zones_without_efa() -> None:
    """EFA is off by default for SPOT groups: no interfaces, placement group or EFA security group, and the group
    spans every private subnet (the dev stack's 2 zones), where spot capacity is found."""
    p = run_program("dev", config=_dev_with_gpu(instanceTypes=["p5.48xlarge", "p5en.48xlarge"], capacityType="SPOT"))
    assert _ng(p, "gpu").inputs["capacityType"] == "SPOT"
    assert _efa_parts(p, "gpu") == {
        "interfaces": 0,
        "placement groups": 0,
        "efa security groups": 0,
        "subnets": 2,
        "efa label": False,
        "efa plugin": False,
    }


def test_spot_group_gets_efa_when_asked_with_a_zone() -> None:
    p = run_program("dev", config=_dev_with_gpu(capacityType="SPOT", efa=True, availabilityZone="us-east-1a"))
    assert _efa_parts(p, "gpu") == {
        "interfaces": 32,
        "placement groups": 1,
        "efa security groups": 1,
        "subnets": 1,
        "efa label": True,
        "efa plugin": True,
    }


def test_on_demand_group_of_the_same_type_defaults_to_efa() -> None:
    """The control: the same type on demand (pinned, as EFA needs) is EFA-enabled without asking."""
    p = run_program("dev", config=_dev_with_gpu(availabilityZone="us-east-1a"))
    assert _efa_parts(p, "gpu")["interfaces"] == 32


CB = "cr-0123456789abcdef0"


def _block_group(p: Program) -> tuple[Registration, list[Registration]]:
    schedules = [c for c in p.children(_component(p, "gpu")) if c.type == "aws:autoscaling/schedule:Schedule"]
    return _ng(p, "gpu"), schedules


@pytest.mark.parametrize("preview", MODES)
def test_capacity_block_scheduled_group_has_no_nodes_until_the_block_starts(preview: bool) -> None:
    """The mocked account's block is scheduled (tests.harness.SCHEDULED_BLOCK): the group is created with no nodes,
    and its Auto Scaling group gets an action at the block's start that sets the configured sizes."""
    p = run_program(
        "p5", preview=preview, config=_with_group("p5", capacityType="CAPACITY_BLOCK", capacityReservationId=CB)
    )
    assert ("aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation", {"id": CB}) in [
        (t, {k: v for k, v in a.items() if k == "id"}) for t, a in p.invokes
    ]
    ng, [start] = _block_group(p)
    assert ng.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 2}
    assert {"scalingConfig.desiredSize", "scalingConfig.minSize"} <= set(ng.ignore_changes)
    assert start.inputs["scheduledActionName"] == "eks-training-capacity-block-start"
    assert (start.inputs["minSize"], start.inputs["desiredCapacity"], start.inputs["maxSize"]) == (0, 2, 2)
    assert ng.urn in start.deps_of("autoscalingGroupName")
    if preview:
        assert contains_unknown(start.inputs["startTime"]), "the group's Auto Scaling group does not exist yet"
    else:
        assert start.inputs["startTime"] == "2030-01-02T11:30:00Z"
        assert start.inputs["autoscalingGroupName"] == ng.outputs["resources"][0]["autoscalingGroups"][0]["name"]


def test_capacity_block_already_active_takes_the_configured_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import harness

    monkeypatch.setitem(
        harness.CAPACITY_BLOCKS, CB, {**harness.SCHEDULED_BLOCK, "state": "active", "startDate": "2026-01-01T11:30:00Z"}
    )
    p = run_program("p5", config=_with_group("p5", capacityType="CAPACITY_BLOCK", capacityReservationId=CB, minSize=1))
    ng, schedules = _block_group(p)
    assert ng.inputs["scalingConfig"] == {"minSize": 1, "desiredSize": 2, "maxSize": 2} and schedules == []
    assert {"scalingConfig.desiredSize", "scalingConfig.minSize"} <= set(ng.ignore_changes)
    # an update would roll the group with nodes the block does not have: the group keeps its launch template while
    # the block is active (EKS: upgrade Capacity Block groups at desired size 0)
    assert "launchTemplate" in ng.ignore_changes


def test_a_rehearsal_runs_the_jobs_of_a_block_as_if_it_had_started() -> None:
    """The account's block is scheduled, so the program holds back the jobs on its group until it starts: the
    rehearsal (python -m stacks rehearse) evaluates within ``started_blocks``, where the block is active, so the box
    runs those jobs; the block's record is the account's again after it."""
    from stacks.mocked import CAPACITY_BLOCKS, started_blocks

    config = _with_group("p5", capacityType="CAPACITY_BLOCK", capacityReservationId=CB)

    def jobs(p) -> set[str]:
        return {r.name for r in p.registrations if r.type == "kubernetes:batch/v1:Job"}

    held = run_program("p5", config=config)
    with started_blocks([CB]):
        started = run_program("p5", config=config)
    assert CB not in CAPACITY_BLOCKS
    on_block = {f"eks-training-p5-{j}-job" for j in ("train", "train-allreduce", "evaluate")}
    assert not on_block & jobs(held) and jobs(started) == jobs(held) | on_block, (jobs(held), jobs(started))
    ng, schedules = _block_group(started)
    assert ng.inputs["scalingConfig"]["desiredSize"] == 2 and schedules == []


def test_capacity_block_expired_leaves_the_group_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import harness

    monkeypatch.setitem(harness.CAPACITY_BLOCKS, CB, {**harness.SCHEDULED_BLOCK, "state": "expired"})
    p = run_program("p5", config=_with_group("p5", capacityType="CAPACITY_BLOCK", capacityReservationId=CB))
    ng, schedules = _block_group(p)
    assert ng.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 2} and schedules == []


def test_other_groups_read_no_block_and_keep_their_sizes() -> None:
    p = run_program("p5", config=_with_group("p5", capacityReservationId="cr-0fedcba9876543210"))  # an ODCR
    ng, schedules = _block_group(p)
    assert ng.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 2, "maxSize": 2} and schedules == []
    assert not [t for t, _ in p.invokes if "CapacityBlock" in t]


def test_jobs_on_a_scheduled_block_are_left_for_the_first_pulumi_up_after_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before the block starts the group has no nodes: the training on it (and its health check, which Pulumi would wait
    for) and the evaluation after it are not created; the environment, the images and the dataset staging are. Once
    the block is active the same stack creates them."""
    from tests import harness

    cfg = _with_group("p5", capacityType="CAPACITY_BLOCK", capacityReservationId=CB)
    p = run_program("p5", config=cfg)
    names = {j.inputs["metadata"]["name"] for j in p.of_type("kubernetes:batch/v1:Job")}
    assert "train" not in names and "train-allreduce" not in names and "evaluate" not in names
    assert any(n.endswith("stage-cifar10") for n in names), names
    assert _ng(p, "gpu") and p.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert harness.resolve(p.outputs["jobs"]) == {}
    monkeypatch.setitem(harness.CAPACITY_BLOCKS, CB, {**harness.SCHEDULED_BLOCK, "state": "active"})
    active = run_program("p5", config=cfg)
    names = {j.inputs["metadata"]["name"] for j in active.of_type("kubernetes:batch/v1:Job")}
    assert {"train", "train-allreduce", "evaluate"} <= names
    assert set(harness.resolve(active.outputs["jobs"])) == {"train", "evaluate"}


def test_a_benchmark_on_a_scheduled_block_leaves_its_collector_for_the_experiments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The collector reads every experiment's Job: while the experiments wait for their block it waits too, with a
    warning, and the program does not fail; once the block is active it is created with them."""
    from tests import harness

    cfg = _with_group(
        "benchmark", capacityType="CAPACITY_BLOCK", capacityReservationId=CB, availabilityZone="us-east-1a"
    )
    held = run_program("benchmark", config=cfg)
    assert held.error is None and "benchmark" not in harness.resolve(held.outputs), held.error
    assert any(w.startswith("the benchmark's collector waits for every experiment") for w in held.warnings)
    monkeypatch.setitem(harness.CAPACITY_BLOCKS, CB, {**harness.SCHEDULED_BLOCK, "state": "active"})
    active = run_program("benchmark", config=cfg)
    assert "benchmark" in harness.resolve(active.outputs), sorted(harness.resolve(active.outputs))


def test_the_rehearsal_reads_the_warning_that_jobs_wait_for_the_block() -> None:
    """The evaluation ``python -m stacks rehearse`` runs (stacks.mocked) keeps the program's warnings, which its report
    prints: the jobs on a block that has not started are named there, not left out without a word."""
    from stacks.mocked import evaluate_config

    cfg = _with_group("p5", capacityType="CAPACITY_BLOCK", capacityReservationId=CB)
    evaluation = evaluate_config("p5", None, cfg)
    assert evaluation.error is None, evaluation.error
    [warning] = [w for w in evaluation.warnings if "Capacity Block has not started" in w]
    assert warning.startswith("jobs train, evaluate run on nodeGroups.gpu (or after jobs that do)"), warning
