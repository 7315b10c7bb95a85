"""Preflight checks (stacks/preflight/) against real moto servers; boto3 is never patched.

What moto 5.2.5 gives and what is seeded (see tests/preflight_support.py):

* Stock ``moto_server`` process (fixture ``proc``): availability zones us-east-1a..f, subnets,
  ``DescribeInstanceTypes`` with EFA info (p5.48xlarge 32 interfaces, p4d.24xlarge 4,
  g6e.24xlarge 2, g5.xlarge / m5.2xlarge none) and ``DescribeInstanceTypeOfferings`` per zone
  (p5.48xlarge in a-f, p4d.24xlarge in a-d, p5en.48xlarge in a and c, p6-b200.48xlarge in c only,
  m5.large everywhere but e). It answers ``GetServiceQuota`` for ec2 codes with
  ``NoSuchResourceException`` and ``GetAWSDefaultServiceQuota`` / ``DescribeCapacityReservations``
  with HTTP 500 (not implemented): the preflight then reports "could not read/look up" failures.
* In-process ``ThreadedMotoServer`` (fixture ``seeded``): the same moto plus EC2 quotas and capacity
  reservations seeded into moto's backends, served by the two operations moto lacks.
"""

import dataclasses
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional

import boto3
import pulumi
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]  # on sys.path via tests/conftest.py

from components.catalog import INSTANCE_TYPES, Catalog  # noqa: E402
from components.scheduling import NODE_ROLE_LABEL  # noqa: E402
from stacks.config import ConfigError, load_config  # noqa: E402
from stacks.plan import Plan, build_plan  # noqa: E402
from stacks.plan.checklist import planned_checks  # noqa: E402
from stacks.plan.minors import VERSION_KEY  # noqa: E402
from stacks.preflight import (  # noqa: E402
    Finding,
    PreflightError,
    check,
    format_report,
    run_preflight,
)
from stacks.preflight.cluster import desired_sizes_now, eks_defaults  # noqa: E402
from stacks.zones import Zone, choose_zones  # noqa: E402
from tests import preflight_support as sup  # noqa: E402
from tests.harness import stack_names  # noqa: E402
from tests.wait import patient  # noqa: E402

#: moto's us-east-1 maps us-east-1a to use1-az6 and us-east-1c to use1-az2 (and us-east-1e to use1-az3,
#: a zone EKS refuses for control planes).
ZONE_NAMES = ["us-east-1a", "us-east-1c"]
ZONES = [Zone("us-east-1a", "use1-az6"), Zone("us-east-1c", "use1-az2")]
AB = [Zone("us-east-1a", "use1-az6"), Zone("us-east-1b", "use1-az1")]
P_OD, P_SPOT, STD_OD = "L-417A185B", "L-7212CCBC", "L-1216C47A"
CR_ODCR = "cr-0a1b2c3d4e5f60718"
GPU_KEY = "eks-training:nodeGroups.gpu"
VPC_CNI_KEY = "eks-training:cluster.addonVersions.vpc-cni"
NMA_KEY = "eks-training:cluster.addonVersions.eks-node-monitoring-agent"
CW_KEY = "eks-training:cluster.addonVersions.amazon-cloudwatch-observability"
MINORS = ("1.32", "1.33", "1.34", "1.35", "1.36")
#: Test data for DescribeAddonVersions, per add-on: version -> {Kubernetes minor: is EKS's default}. This project's pins
#: (components/catalog/addons.py) are offered for their minor; for the add-ons it does not pin, EKS's default for 1.33
#: lacks what the stacks rely on (the node monitoring agent before dcgmAgent.tolerations) and, for 1.36, the CloudWatch
#: add-on's default is one of the 5.x releases whose DCGM exporter does not list p6-b200.
ADDON_VERSIONS_OFFERED: dict[str, dict[str, dict[str, bool]]] = {
    "vpc-cni": {
        "v1.18.3-eksbuild.1": {"1.34": True, "1.36": False},
        "v1.19.0-eksbuild.1": {"1.34": False, "1.36": True},
        "v1.20.1-eksbuild.3": {"1.34": False, "1.36": False},
        "v1.20.4-eksbuild.2": {"1.32": True, "1.33": True, "1.34": False},
        "v1.21.1-eksbuild.1": {"1.35": True},
        "v1.22.4-eksbuild.3": {"1.36": False},
    },
    "eks-node-monitoring-agent": {
        "v1.2.0-eksbuild.1": {"1.33": True},
        "v1.4.3-eksbuild.2": {m: m not in ("1.33", "1.36") for m in MINORS},
        "v1.7.0-eksbuild.1": {"1.36": True},
    },
    "amazon-cloudwatch-observability": {
        "v4.10.1-eksbuild.1": {"1.32": True, "1.33": True, "1.34": True},
        "v5.3.1-eksbuild.1": {"1.35": True},
        "v5.2.3-eksbuild.1": {"1.36": True},
        "v6.4.0-eksbuild.1": {"1.36": False},
    },
    "aws-efs-csi-driver": {"v2.1.15-eksbuild.1": dict.fromkeys(MINORS, True)},
    "aws-fsx-csi-driver": {"v1.7.0-eksbuild.1": dict.fromkeys(MINORS, True)},
}


def seed_addons(server: sup.SeededMoto, skip: tuple[str, ...] = ()) -> None:
    """Seed the add-on versions of :data:`ADDON_VERSIONS_OFFERED` (but ``skip``)."""
    for addon, versions in ADDON_VERSIONS_OFFERED.items():
        if addon not in skip:
            server.seed_addon_versions(addon, versions)


# ------------------------------------------------------------------------------------------------
# fixtures and helpers
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sup.MotoProcess]:
    server = sup.start_moto_process(tmp_path_factory.mktemp("moto"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def moto_inprocess() -> Iterator[sup.SeededMoto]:
    server = sup.SeededMoto()
    try:
        yield server
    finally:
        server.stop()


def _use(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in sup.aws_environment(endpoint, tmp_path).items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    # the deploying machine has the AWS CLI (the README's prerequisites), whatever this one has
    stub = tmp_path / "aws-cli"
    stub.mkdir(exist_ok=True)
    (stub / "aws").write_text("#!/bin/sh\necho aws-cli/2.15.0 Python/3.11.6 Linux/6.1 exe/x86_64\n")
    (stub / "aws").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub}:{os.environ.get('PATH', '')}")


@pytest.fixture
def proc(moto_process: sup.MotoProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> sup.MotoProcess:
    """boto3 pointed at the stock moto_server process."""
    _use(moto_process.endpoint, tmp_path, monkeypatch)
    return moto_process


@pytest.fixture
def seeded(moto_inprocess: sup.SeededMoto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> sup.SeededMoto:
    """boto3 pointed at the in-process moto, reset for each test, with the add-on versions of
    ``ADDON_VERSIONS_OFFERED``."""
    moto_inprocess.reset()
    seed_addons(moto_inprocess)
    _use(moto_inprocess.endpoint, tmp_path, monkeypatch)
    return moto_inprocess


def session() -> boto3.session.Session:
    return boto3.session.Session(region_name=sup.REGION)


def stack(node_groups: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A stack's ``config:`` mapping: a new VPC in ``ZONES`` unless ``extra`` says otherwise."""
    cfg: dict[str, Any] = {"aws:region": sup.REGION, "eks-training:nodeGroups": node_groups}
    if "existingVpc" not in extra:
        cfg["eks-training:network"] = {"availabilityZones": ZONE_NAMES}
    for k, v in extra.items():
        cfg[f"eks-training:{k}"] = v
    return cfg


def load(config: dict[str, Any]) -> Plan:
    return build_plan(load_config("eks-training", "preflight-test", config))


def replan(plan: Plan, **changes: Any) -> Plan:
    """The plan of the same configuration with some parsed sections replaced."""
    return build_plan(dataclasses.replace(plan.config, **changes))


def group(types: list[str], max_size: int = 2, **extra: Any) -> dict[str, Any]:
    return {"instanceTypes": types, "minSize": 0, "desiredSize": 0, "maxSize": max_size, **extra}


def by_key(findings: list[Finding], key: str) -> list[Finding]:
    return [f for f in findings if f.key == key]


def one(findings: list[Finding], key: str) -> Finding:
    found = by_key(findings, key)
    assert len(found) == 1, f"expected one finding for {key}, got:\n{format_report(findings)}"
    return found[0]


def about(findings: list[Finding], key: str, contains: str) -> Finding:
    """The one finding for ``key`` whose message contains ``contains`` (checks can share a key)."""
    found = [f for f in findings if f.key == key and contains in f.message]
    assert len(found) == 1, f"expected one {contains!r} finding for {key}, got:\n{format_report(findings)}"
    return found[0]


def failures(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if not f.ok]


def p5_with_reservation(**extra: Any) -> dict[str, Any]:
    return group(["p5.48xlarge"], 2, availabilityZone="us-east-1a", capacityReservationId=CR_ODCR, **extra)


# ------------------------------------------------------------------------------------------------
# all good
# ------------------------------------------------------------------------------------------------


def test_all_good_p5_group_with_odcr_and_enough_quota(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(P_OD, 384, name="Running On-Demand P instances")
    # Standard only has AWS's default value (no applied value): the GetAWSDefaultServiceQuota fallback.
    seeded.seed_quota(
        STD_OD, 640, applied=False, name="Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
    )
    seeded.seed_capacity_reservation(CR_ODCR, "p5.48xlarge", "us-east-1a", count=2)
    cfg = load(stack({"gpu": p5_with_reservation()}))

    findings = check(cfg, ZONES, session())

    assert failures(findings) == []
    assert "p5.48xlarge is offered in us-east-1a" in about(findings, f"{GPU_KEY}.instanceTypes[0]", "offered").message
    assert "offered in us-east-1a, us-east-1c" in one(findings, "eks-training:systemNodeGroup.instanceType").message
    assert "supports EFA with 32 interface(s)" in about(findings, f"{GPU_KEY}.instanceTypes[0]", "EFA").message
    assert (
        "active On-Demand Capacity Reservation for 2 x p5.48xlarge in us-east-1a"
        in one(findings, f"{GPU_KEY}.capacityReservationId").message
    )
    p_quota = one(findings, f"{GPU_KEY}.maxSize").message
    assert P_OD in p_quota and "is 384 (applied)" in p_quota and "needs up to 384" in p_quota
    std = one(findings, "eks-training:systemNodeGroup.maxSize").message
    assert STD_OD in std and "640 (AWS default)" in std and "needs up to 6 " in std  # 3 x m5.large (2 vCPUs)
    cni = one(findings, VPC_CNI_KEY).message
    assert "vpc-cni v1.22.4-eksbuild.3 (this project's pin for Kubernetes 1.36" in cni
    assert "is offered for Kubernetes 1.36 and has NetworkPolicy enforcement; efa-only network interfaces" in cni
    cw = one(findings, CW_KEY).message
    assert "EKS's default amazon-cloudwatch-observability for Kubernetes 1.36, v5.2.3-eksbuild.1, which has" in cw
    assert "on p5.48xlarge" in cw


def test_all_good_has_one_finding_per_check(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(P_OD, 1000)
    seeded.seed_quota(STD_OD, 1000)
    seeded.seed_capacity_reservation(CR_ODCR, "p5.48xlarge", "us-east-1a")
    findings = run_preflight(load(stack({"gpu": p5_with_reservation()})), ZONES, session())
    kinds = {
        "offering": [f for f in findings if "offered" in f.message and ".addonVersions." not in f.key],
        "efa": [f for f in findings if "EFA" in f.message],
        "reservation": [f for f in findings if f.key.endswith("capacityReservationId")],
        "quota": [f for f in findings if "vCPU quota" in f.message],
        "add-on": [f for f in findings if f.key.startswith("eks-training:cluster.addonVersions.")],
        "aws-cli": by_key(findings, "PATH"),
        "credentials": by_key(findings, "aws:profile"),
        "cluster": by_key(findings, VERSION_KEY),
        "node-group-quota": [f for f in findings if "EKS quota" in f.message],
    }
    assert {k: len(v) for k, v in kinds.items()} == {
        "offering": 2,
        "efa": 1,
        "reservation": 1,
        "quota": 2,
        # vpc-cni, the node monitoring agent, the CloudWatch add-on (metrics on with a GPU group), the EFS CSI driver
        "add-on": 4,
        "aws-cli": 1,
        "credentials": 1,
        "cluster": 1,
        "node-group-quota": 2,
    }
    assert len(findings) == 15
    # moto's account, as STS answers for the session's keys
    assert by_key(findings, "aws:profile")[0].message == ("the checks ask AWS as arn:aws:sts::123456789012:user/moto")
    assert all(f.ok for f in findings), format_report(findings)


def _running(minor: str) -> None:
    """An EKS cluster named as the preflight test stack names its own, running ``minor``."""
    session().client("eks").create_cluster(
        name=load(stack({"cpu": group(["m5.large"])})).config.cluster_name,
        version=minor,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-0123456789abcdef0"]},
    )


@pytest.mark.parametrize(
    ("running", "wanted", "ok", "says"),
    [
        (None, "1.36", True, "yet: `pulumi up` creates it at 1.36"),
        ("1.36", "1.36", True, "runs 1.36, as the stack sets"),
        ("1.35", "1.36", True, "runs 1.35 (ACTIVE): `pulumi up` moves it to 1.36"),
        (
            "1.36",
            "1.35",
            False,
            "never moves a cluster down: set eks-training:cluster.kubernetesVersion to '1.36' and run "
            "`pulumi up --refresh`",
        ),
        ("1.34", "1.36", False, "one minor at a time: set eks-training:cluster.kubernetesVersion to '1.35'"),
    ],
)
def test_the_running_cluster_is_at_the_stacks_minor_or_the_one_before(
    seeded: sup.SeededMoto, running: str | None, wanted: str, ok: bool, says: str
) -> None:
    """EKS upgrades a cluster itself at the end of standard support (or someone upgrades it outside Pulumi): the
    stack's minor must still be one EKS can move the running cluster to (DescribeCluster)."""
    if running is not None:
        _running(running)
    config = stack({"cpu": group(["m5.large"])}, cluster={"kubernetesVersion": wanted})
    findings = run_preflight(load(config), ZONES, session())
    f = one(findings, VERSION_KEY)
    assert (f.ok, says in f.message) == (ok, True), f.message


def test_the_addons_the_cluster_runs_beside_eks_default_now(seeded: sup.SeededMoto) -> None:
    """``pulumi up`` reads, before its summary, the version of each add-on the stack leaves to EKS's default that the
    cluster runs (DescribeAddon) and EKS's default for the minor now (DescribeAddonVersions): coredns installed at an
    older build than EKS now gives, kube-proxy at the default; vpc-cni is this project's pin (not asked); an add-on
    the cluster lacks is left out. Against stock moto_server (no add-on operations) it says why it could not ask."""
    seeded.reset()
    plan = load(stack({"cpu": group(["m5.large"])}, cluster={"kubernetesVersion": "1.36"}))
    name = plan.config.cluster_name
    seeded.seed_addon_versions(
        "coredns", {"v1.11.4-eksbuild.14": {"1.36": True}, "v1.11.4-eksbuild.2": {"1.36": False}}
    )
    seeded.seed_addon_versions("kube-proxy", {"v1.36.1-eksbuild.2": {"1.36": True}})
    seeded.seed_addon_versions("metrics-server", {"v0.8.0-eksbuild.1": {"1.36": True}})
    seeded.seed_installed_addon(name, "coredns", "v1.11.4-eksbuild.2")
    seeded.seed_installed_addon(name, "kube-proxy", "v1.36.1-eksbuild.2")
    # this project pins vpc-cni for 1.36: EKS's default does not move it, though it differs from what runs
    seeded.seed_addon_versions("vpc-cni", {"v1.23.0-eksbuild.1": {"1.36": True}})
    seeded.seed_installed_addon(name, "vpc-cni", "v1.22.4-eksbuild.3")
    found, why = eks_defaults(plan, session())
    assert why is None
    assert found == {
        "coredns": ("v1.11.4-eksbuild.2", "v1.11.4-eksbuild.14"),
        "kube-proxy": ("v1.36.1-eksbuild.2", "v1.36.1-eksbuild.2"),
    }
    assert "vpc-cni" in plan.addons and "metrics-server" in plan.addons  # pinned; not on the cluster


def test_the_addons_unreadable_say_why(proc: sup.MotoProcess) -> None:
    plan = load(stack({"cpu": group(["m5.large"])}))
    found, why = eks_defaults(plan, session())
    assert found == {} and why is not None and "describe_addon failed" in why, why


@pytest.mark.parametrize(("lagging", "ok"), [(False, True), (True, False)])
def test_a_move_up_waits_for_every_node_group_on_the_clusters_minor(
    seeded: sup.SeededMoto, lagging: bool, ok: bool
) -> None:
    """EKS refuses UpdateClusterVersion while a managed node group runs another minor than the cluster (a Capacity
    Block group kept its version while its block was active, a roll failed): preflight lists the cluster's groups
    (ListNodegroups, DescribeNodegroup) before a move up and names each that lags, with the roll to make first."""
    _running("1.35")
    eks = session().client("eks")
    name = load(stack({"cpu": group(["m5.large"])})).config.cluster_name
    for nodegroup, minor in [("system-1a2b", "1.35"), ("gpu-3c4d", "1.34" if lagging else "1.35")]:
        eks.create_nodegroup(
            clusterName=name,
            nodegroupName=nodegroup,
            version=minor,
            nodeRole="arn:aws:iam::123456789012:role/node",
            subnets=["subnet-0123456789abcdef0"],
        )
    config = stack({"cpu": group(["m5.large"])}, cluster={"kubernetesVersion": "1.36"})
    findings = by_key(run_preflight(load(config), ZONES, session()), VERSION_KEY)
    assert [f.ok for f in findings] == [True, *([False] if lagging else [])], format_report(findings)
    assert findings[0].message.endswith("runs 1.35 (ACTIVE): `pulumi up` moves it to 1.36")
    if lagging:
        assert findings[1].message == (
            f"the node group gpu-3c4d of {name} runs Kubernetes 1.34, and EKS moves the control plane up a minor only "
            "while every managed node group runs the cluster's, 1.35: roll it to 1.35 first (keep "
            "eks-training:cluster.kubernetesVersion at '1.35' and run `pulumi up --refresh`; a Capacity Block group "
            "rolls once no block is active), then move to 1.36"
        )


def test_a_machine_without_the_aws_cli_fails_naming_path_and_where_to_get_it(
    proc: sup.MotoProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cluster's kubeconfig runs ``aws eks get-token``: without the CLI, ``pulumi up`` would fail at its first
    Kubernetes object, once the cluster and its nodes exist; preflight fails first."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-aws"))
    f = one(
        run_preflight(
            load(stack({"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 2}})),
            ZONES,
            session(),
        ),
        "PATH",
    )
    assert not f.ok
    assert "no `aws` command: the cluster's kubeconfig runs `aws eks get-token`" in f.message
    assert "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html" in f.message


def test_the_deploying_identity_in_admin_role_arns_fails(proc: sup.MotoProcess) -> None:
    """EKS makes the creator admin; an access entry for the same role (even written with its path, while the
    session ARN has none) would fail with ResourceInUseException, so preflight names the entry."""
    iam = session().client("iam")
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }
    )
    deployer = iam.create_role(RoleName="platform-deployer", Path="/ci/", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    other = iam.create_role(RoleName="ml-admins", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    creds = session().client("sts").assume_role(RoleArn=deployer, RoleSessionName="pulumi-up")["Credentials"]
    as_deployer = boto3.session.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=sup.REGION,
    )
    assert ":assumed-role/platform-deployer/pulumi-up" in as_deployer.client("sts").get_caller_identity()["Arn"]
    cfg = load(stack({"cpu": group(["m5.xlarge"])}, cluster={"adminRoleArns": [other, deployer]}))
    findings = run_preflight(cfg, ZONES, as_deployer)
    ok = one(findings, "eks-training:cluster.adminRoleArns[0]")
    assert ok.ok and "gets a cluster-admin access entry" in ok.message
    bad = one(findings, "eks-training:cluster.adminRoleArns[1]")
    assert not bad.ok
    assert f"{deployer} is the identity running this deployment" in bad.message
    assert "ResourceInUseException: remove it from adminRoleArns" in bad.message
    # run as someone else, both entries are fine
    assert all(f.ok for f in by_key(run_preflight(cfg, ZONES, session()), "eks-training:cluster.adminRoleArns[1]"))


# ------------------------------------------------------------------------------------------------
# 1. offerings
# ------------------------------------------------------------------------------------------------


def test_type_not_offered_in_a_zone_names_the_offered_zones(proc: sup.MotoProcess) -> None:
    cfg = load(
        stack(
            {
                "gpu": group(["p5en.48xlarge"], efa=False),  # offered in us-east-1a and us-east-1c only
                "b200": group(["p6-b200.48xlarge"], availabilityZone="us-east-1a"),  # us-east-1c only
            },
            network={"availabilityZones": ["us-east-1a", "us-east-1b"]},
        )
    )
    findings = run_preflight(cfg, AB, session())

    gpu = about(findings, f"{GPU_KEY}.instanceTypes[0]", "offered")
    assert not gpu.ok
    assert "p5en.48xlarge is not offered in us-east-1b" in gpu.message
    assert "pick one of us-east-1a, us-east-1c" in gpu.message
    assert "nodeGroups.gpu.availabilityZone" in gpu.message
    b200 = about(findings, "eks-training:nodeGroups.b200.instanceTypes[0]", "offered")
    assert not b200.ok
    assert "not offered in us-east-1a" in b200.message and "pick one of us-east-1c" in b200.message
    assert one(findings, "eks-training:systemNodeGroup.instanceType").ok  # m5.large is offered in a and b


def test_type_offered_nowhere_and_group_zone_outside_the_vpc(proc: sup.MotoProcess) -> None:
    # availabilityZoneCount (no zone list): the loader cannot know the zones, the preflight does.
    cfg = load(
        stack({"gpu": group(["p5e.48xlarge"], availabilityZone="us-east-1d")}, network={"availabilityZoneCount": 2})
    )
    findings = run_preflight(cfg, ZONES, session())
    offering = about(findings, f"{GPU_KEY}.instanceTypes[0]", "offered")
    assert not offering.ok and "not offered in any zone of us-east-1" in offering.message
    zone = one(findings, f"{GPU_KEY}.availabilityZone")
    assert (
        not zone.ok
        and "us-east-1d is not one of the VPC's zones (us-east-1a (use1-az6), us-east-1c (use1-az2))" in zone.message
    )


def test_new_vpc_zones_resolved_like_the_program(proc: sup.MotoProcess) -> None:
    cfg = load(stack({"cpu": group(["m5.xlarge"])}, network={"availabilityZoneCount": 3}))
    findings = run_preflight(cfg, None, session())
    assert (
        "uses zones us-east-1a (use1-az6), us-east-1b (use1-az1), us-east-1c (use1-az2)"
        in one(findings, "eks-training:network").message
    )
    assert (
        "offered in us-east-1a, us-east-1b, us-east-1c"
        in one(findings, "eks-training:nodeGroups.cpu.instanceTypes[0]").message
    )
    with pytest.raises(ConfigError, match="availabilityZoneCount"):
        choose_zones(
            dataclasses.replace(
                cfg.config, network=cfg.config.network.model_copy(update={"availability_zone_count": 7})
            ),
            ZONES,
        )  # type: ignore[union-attr]


def test_zones_eks_refuses_are_skipped_by_id(proc: sup.MotoProcess) -> None:
    """moto's us-east-1e is use1-az3: a new VPC over every zone leaves it out; an existing VPC whose private
    subnets leave one zone EKS accepts fails, naming the key."""
    cfg = load(stack({"cpu": group(["m5.xlarge"])}, network={"availabilityZoneCount": 5, **FIVE_ZONE_LAYOUT}))
    findings = run_preflight(cfg, None, session())
    message = one(findings, "eks-training:network").message
    assert "us-east-1e" not in message and "us-east-1f (use1-az5)" in message
    with pytest.raises(ConfigError, match=r"6 asked|asked for 6"):
        choose_zones(
            load(stack({"cpu": group(["m5.xlarge"])}, network={"availabilityZoneCount": 6, **SIX_ZONE_LAYOUT})).config,
            sup_zones(),
        )

    ec2 = session().client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.0.0/20", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    e = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.16.0/20", AvailabilityZone="us-east-1e")["Subnet"]["SubnetId"]
    bad = load(stack({"cpu": group(["m5.xlarge"])}, existingVpc={"vpcId": vpc, "privateSubnetIds": [a, e]}))
    fail = one(run_preflight(bad, None, session()), "eks-training:existingVpc.privateSubnetIds")
    assert not fail.ok
    assert "EKS needs control-plane subnets in 2 zones it supports, the VPC has us-east-1a (use1-az6)" in fail.message
    assert "us-east-1e (use1-az3) refused by EKS" in fail.message


FIVE_ZONE_LAYOUT = {
    "privateSubnetCidrs": [f"10.0.{16 * i}.0/20" for i in range(5)],
    "publicSubnetCidrs": [f"10.0.{128 + 8 * i}.0/21" for i in range(5)],
}
SIX_ZONE_LAYOUT = {
    "privateSubnetCidrs": [f"10.0.{16 * i}.0/20" for i in range(6)],
    "publicSubnetCidrs": [f"10.0.{128 + 8 * i}.0/21" for i in range(6)],
}


def sup_zones() -> list[Zone]:
    """The region's zones as preflight lists them (from moto)."""
    from stacks.preflight import available_zones

    return available_zones(session(), sup.REGION)


def test_existing_vpc_zones_come_from_its_subnets(proc: sup.MotoProcess) -> None:
    ec2 = session().client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnets = {
        z: ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=z)["Subnet"]["SubnetId"]
        for z, cidr in (("us-east-1a", "10.20.0.0/20"), ("us-east-1c", "10.20.16.0/20"))
    }
    cfg = load(
        stack(
            {"b200": group(["p6-b200.48xlarge"], subnetId=subnets["us-east-1c"]), "cpu": group(["m5.xlarge"])},
            existingVpc={"vpcId": vpc, "privateSubnetIds": [subnets["us-east-1a"], subnets["us-east-1c"]]},
        )
    )
    findings = run_preflight(cfg, None, session())
    assert "is in us-east-1a" in one(findings, "eks-training:existingVpc.privateSubnetIds[0]").message
    # The group's zone is its subnet's zone, where p6-b200 is offered; the other group spans a and c.
    b200 = about(findings, "eks-training:nodeGroups.b200.instanceTypes[0]", "offered")
    assert b200.ok and "offered in us-east-1c" in b200.message
    assert "offered in us-east-1a, us-east-1c" in one(findings, "eks-training:nodeGroups.cpu.instanceTypes[0]").message

    bad = load(
        stack(
            {"cpu": group(["m5.xlarge"])},
            existingVpc={"vpcId": vpc, "privateSubnetIds": [subnets["us-east-1a"], "subnet-0123456789abcdef0"]},
        )
    )
    missing = one(run_preflight(bad, None, session()), "eks-training:existingVpc.privateSubnetIds[1]")
    assert not missing.ok and "InvalidSubnetID.NotFound" in missing.message


def test_an_existing_vpc_without_dns_hostnames_fails_naming_the_command(proc: sup.MotoProcess) -> None:
    """EKS's network requirements: the VPC resolves DNS and gives instances DNS hostnames, or nodes cannot register.
    EC2 makes a VPC with hostnames off (moto too): preflight fails, naming the command; turned on, it passes."""
    ec2 = session().client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=z)["Subnet"]["SubnetId"]
        for z, cidr in (("us-east-1a", "10.40.0.0/20"), ("us-east-1b", "10.40.16.0/20"))
    ]
    cfg = load(stack({"cpu": group(["m5.xlarge"])}, existingVpc={"vpcId": vpc, "privateSubnetIds": subnets}))
    off = one(run_preflight(cfg, None, session()), "eks-training:existingVpc.vpcId")
    assert not off.ok and off.message == (
        f"{vpc} has enableDnsHostnames off: EKS's nodes cannot register with the cluster without DNS resolution and "
        f"DNS hostnames in its VPC; turn them on: aws ec2 modify-vpc-attribute --vpc-id {vpc} --enable-dns-hostnames"
    ), off.message
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    on = about(run_preflight(cfg, None, session()), "eks-training:existingVpc.vpcId", "DNS hostnames")
    assert on.ok and on.message == f"{vpc} has DNS resolution and DNS hostnames on", on.message
    # a VPC EC2 does not know: one failed finding that says what could not be read, and how to go on without it
    missing = "vpc-0123456789abcdef0"
    cfg = load(stack({"cpu": group(["m5.xlarge"])}, existingVpc={"vpcId": missing, "privateSubnetIds": subnets}))
    unread = about(run_preflight(cfg, None, session()), "eks-training:existingVpc.vpcId", "could not read")
    assert not unread.ok and unread.message.startswith(f"could not read the DNS attributes of {missing} ("), unread
    assert unread.message.endswith("(to deploy without these checks, set eks-training:preflight.enabled: false)")


def test_an_existing_vpc_whose_dhcp_options_lack_amazon_dns_fails_naming_the_fix(proc: sup.MotoProcess) -> None:
    """EKS's cluster endpoint page: the private endpoint's name resolves only if the VPC's DHCP options set includes
    AmazonProvidedDNS, or the Amazon DNS server by one of its addresses (the VPC's base plus two, 169.254.169.253).
    A set of the VPC's own servers fails with a private-only endpoint, naming the commands; with a public endpoint
    open to any address, the nodes resolve and reach that one: a pass that says so."""
    ec2 = session().client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.41.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=z)["Subnet"]["SubnetId"]
        for z, cidr in (("us-east-1a", "10.41.0.0/20"), ("us-east-1b", "10.41.16.0/20"))
    ]
    private = {"endpointPublicAccess": False, "privateAccessCidrs": ["10.41.0.0/16"]}
    existing = {"vpcId": vpc, "privateSubnetIds": subnets}

    def dhcp(cluster: dict[str, Any]) -> Finding:
        cfg = load(stack({"cpu": group(["m5.xlarge"])}, existingVpc=existing, cluster=cluster))
        return about(run_preflight(cfg, None, session()), "eks-training:existingVpc.vpcId", "DHCP options")

    def associate(*servers: str) -> None:
        config = [{"Key": "domain-name-servers", "Values": list(servers)}]
        options = ec2.create_dhcp_options(DhcpConfigurations=config)["DhcpOptions"]["DhcpOptionsId"]
        ec2.associate_dhcp_options(DhcpOptionsId=options, VpcId=vpc)

    associate("AmazonProvidedDNS")  # as EC2 makes a VPC: with the region's default set (moto gives it none)
    assert dhcp(private).ok
    ec2.associate_dhcp_options(DhcpOptionsId="default", VpcId=vpc)  # "default": no DHCP options at all
    none = dhcp(private)
    assert not none.ok and none.message.startswith(f"{vpc} has no DHCP options set, not AmazonProvidedDNS"), none

    associate("10.41.0.10", "10.41.0.11")
    own = dhcp(private)
    assert not own.ok and own.message.startswith(
        f"{vpc}'s DHCP options set lists 10.41.0.10, 10.41.0.11, not AmazonProvidedDNS: nodes could not resolve"
    ), own.message
    assert f"aws ec2 associate-dhcp-options --vpc-id {vpc} --dhcp-options-id <its id>" in own.message, own.message
    public = dhcp({})  # the defaults: a public endpoint open to 0.0.0.0/0
    assert public.ok and public.message.endswith(
        "not AmazonProvidedDNS: nodes resolve the cluster's public endpoint, not its private one, and reach it "
        "through the VPC's NAT"
    ), public.message
    assert not dhcp({"publicAccessCidrs": ["203.0.113.0/24"]}).ok  # the NAT's addresses are not among them
    for amazon in ("AmazonProvidedDNS", "10.41.0.2", "169.254.169.253"):
        associate("10.41.0.10", amazon)
        beside = dhcp(private)
        assert beside.ok and beside.message == f"{vpc}'s DHCP options use the Amazon-provided DNS server", amazon


# ------------------------------------------------------------------------------------------------
# 2. vCPU quotas
# ------------------------------------------------------------------------------------------------


def test_quota_too_low_names_the_code_and_the_vcpus_needed(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(P_OD, 192, name="Running On-Demand P instances")
    seeded.seed_quota(STD_OD, 32)
    cfg = load(stack({"gpu": group(["p5.48xlarge"], 2, availabilityZone="us-east-1a")}))
    findings = run_preflight(cfg, ZONES, session())

    [fail] = failures(findings)
    assert fail.key == f"{GPU_KEY}.maxSize"
    assert "L-417A185B (Running On-Demand P instances) is 192" in fail.message
    assert "request an increase to at least 384 vCPUs" in fail.message
    assert (
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B " in fail.message
    )
    assert "--desired-value 384 --region us-east-1" in fail.message


def test_a_replaced_groups_old_nodes_count_until_the_end_of_the_update(seeded: sup.SeededMoto) -> None:
    """p4d -> p5 at ``pulumi up``: Pulumi creates the new group first and deletes the old one at the end, so the P
    quota covers 2 x 96 + 2 x 192 vCPUs at once. Without the last update's plan (``python -m stacks preflight``), the
    new group's 384 only."""
    seeded.seed_quota(P_OD, 384, name="Running On-Demand P instances")
    seeded.seed_quota(STD_OD, 32)
    old = load(stack({"gpu": group(["p4d.24xlarge"], 2, availabilityZone="us-east-1a", desiredSize=2)}))
    new = load(stack({"gpu": group(["p5.48xlarge"], 2, availabilityZone="us-east-1a", desiredSize=2)}))
    assert one(run_preflight(new, ZONES, session()), f"{GPU_KEY}.maxSize").ok

    [fail] = failures(run_preflight(new, ZONES, session(), previous=old))
    assert fail.key == f"{GPU_KEY}.maxSize"
    assert (
        "L-417A185B (Running On-Demand P instances) is 384 (applied) but the stack needs up to 576 vCPUs "
        "(nodeGroups.gpu: maxSize 2 x p5.48xlarge (192 vCPUs) = 384 + nodeGroups.gpu as the last update left it "
        "(replaced; it runs until the end of this `pulumi up`): 2 x p4d.24xlarge (96 vCPUs) = 192 (its maxSize: "
    ) in fail.message, fail.message
    assert "--desired-value 576 --region us-east-1" in fail.message
    assert (
        "a replaced or removed group's nodes run until the end of the update: to never run both, remove the old group "
        "in one `pulumi up` and add the new one in the next)"
    ) in fail.message


def test_spot_counts_against_the_spot_code_and_capacity_blocks_not_at_all(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(P_OD, 96)
    seeded.seed_quota(P_SPOT, 500, name="All P Spot Instance Requests")
    seeded.seed_quota(STD_OD, 32)
    seeded.seed_capacity_reservation("cr-0b1b2c3d4e5f60718", "p5.48xlarge", "us-east-1a", count=4, capacity_block=True)
    cfg = load(
        stack(
            {
                "od": group(["p4d.24xlarge"], 1, availabilityZone="us-east-1a"),  # 96 On-Demand P vCPUs
                # 3 x 192 (the largest type) Spot vCPUs
                "spot": group(["p5.48xlarge", "p4d.24xlarge"], 3, capacityType="SPOT", efa=False),
                "block": group(
                    ["p5.48xlarge"],
                    4,
                    capacityType="CAPACITY_BLOCK",
                    availabilityZone="us-east-1a",
                    capacityReservationId="cr-0b1b2c3d4e5f60718",
                ),
            }
        )
    )
    findings = run_preflight(cfg, ZONES, session())

    spot = one(findings, "eks-training:nodeGroups.spot.maxSize")
    assert not spot.ok
    assert "P Spot vCPU quota L-7212CCBC (All P Spot Instance Requests) is 500" in spot.message
    assert "at least 576 vCPUs" in spot.message and "--quota-code L-7212CCBC" in spot.message
    od = one(findings, "eks-training:nodeGroups.od.maxSize")
    assert od.ok and "L-417A185B" in od.message and "needs up to 96 " in od.message  # the block is not counted
    assert not by_key(findings, "eks-training:nodeGroups.block.maxSize")
    assert one(findings, "eks-training:nodeGroups.block.capacityReservationId").ok
    assert [f.key for f in failures(findings)] == ["eks-training:nodeGroups.spot.maxSize"]


def test_unreadable_quota_and_reservation_are_failures_that_say_what_to_do(proc: sup.MotoProcess) -> None:
    # Stock moto: GetServiceQuota -> NoSuchResourceException, GetAWSDefaultServiceQuota and
    # DescribeCapacityReservations -> an HTML page with HTTP 500 (not implemented).
    cfg = load(stack({"gpu": p5_with_reservation()}))
    findings = run_preflight(cfg, ZONES, session())
    quota = one(findings, f"{GPU_KEY}.maxSize")
    assert not quota.ok
    assert "could not read the P On-Demand vCPU quota L-417A185B (Running On-Demand P instances)" in quota.message
    assert "preflight.enabled: false" in quota.message and "<html" not in quota.message
    eks_quotas = [f for f in by_key(findings, "eks-training:nodeGroups") if not f.ok]
    assert [f.message.split(" (")[0] for f in eks_quotas] == [
        "could not read the EKS quota L-BD136A63",
        "could not read the EKS quota L-6D54EA21",
    ]
    assert all(
        "check it in the Service Quotas console" in f.message and "servicequotas:GetAWSDefaultServiceQuota" in f.message
        for f in [quota, *eks_quotas]
    )
    reservation = one(findings, f"{GPU_KEY}.capacityReservationId")
    assert not reservation.ok and f"could not look up {CR_ODCR}" in reservation.message


def test_seeded_data_is_forgotten_on_reset(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(P_OD, 1)
    seeded.seed_capacity_reservation(CR_ODCR, "p5.48xlarge", "us-east-1a")
    sq, ec2 = session().client("service-quotas"), session().client("ec2")
    assert sq.get_service_quota(ServiceCode="ec2", QuotaCode=P_OD)["Quota"]["Value"] == 1.0
    assert ec2.describe_capacity_reservations()["CapacityReservations"][0]["ReservationType"] == "default"
    eks = session().client("eks")
    assert (
        eks.describe_addon_versions(addonName="vpc-cni", kubernetesVersion="1.36")["addons"][0]["addonName"]
        == "vpc-cni"
    )
    seeded.reset()
    assert eks.describe_addon_versions(addonName="vpc-cni", kubernetesVersion="1.36")["addons"] == []
    with pytest.raises(sq.exceptions.NoSuchResourceException):
        sq.get_service_quota(ServiceCode="ec2", QuotaCode=P_OD)
    assert ec2.describe_capacity_reservations()["CapacityReservations"] == []
    with pytest.raises(ec2.exceptions.ClientError, match="InvalidCapacityReservationId.NotFound"):
        ec2.describe_capacity_reservations(CapacityReservationIds=[CR_ODCR])


# ------------------------------------------------------------------------------------------------
# 3. capacity reservations
# ------------------------------------------------------------------------------------------------


def test_reservation_failures(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(P_OD, 10_000)
    seeded.seed_quota(STD_OD, 1000)
    seeded.seed_capacity_reservation("cr-00000000000000001", "p5.48xlarge", "us-east-1c")  # other zone
    seeded.seed_capacity_reservation("cr-00000000000000002", "p4d.24xlarge", "us-east-1a")  # other type
    start = datetime(2030, 1, 2, 3, 4, tzinfo=timezone.utc)
    # a future-dated On-Demand Capacity Reservation: instances targeting it cannot launch before it starts
    seeded.seed_capacity_reservation(
        "cr-00000000000000003", "p5.48xlarge", "us-east-1a", state="scheduled", start=start
    )
    seeded.seed_capacity_reservation("cr-00000000000000004", "p5.48xlarge", "us-east-1a")  # an ODCR, not a block
    p5 = ["p5.48xlarge"]
    cfg = load(
        stack(
            {
                "zone": group(p5, availabilityZone="us-east-1a", capacityReservationId="cr-00000000000000001"),
                "type": group(p5, availabilityZone="us-east-1a", capacityReservationId="cr-00000000000000002"),
                "missing": group(p5, availabilityZone="us-east-1a", capacityReservationId="cr-0ffffffffffffffff"),
                "scheduled": group(p5, availabilityZone="us-east-1a", capacityReservationId="cr-00000000000000003"),
                "notblock": group(
                    p5,
                    availabilityZone="us-east-1a",
                    capacityType="CAPACITY_BLOCK",
                    capacityReservationId="cr-00000000000000004",
                ),
            }
        )
    )
    findings = run_preflight(cfg, ZONES, session())

    def res(name: str) -> str:
        f = one(findings, f"eks-training:nodeGroups.{name}.capacityReservationId")
        assert not f.ok, f.message
        return f.message

    assert "is in us-east-1c but the group runs in us-east-1a; set nodeGroups.zone.availabilityZone: us-east-1c" in res(
        "zone"
    )
    assert "reserves p4d.24xlarge but the group runs p5.48xlarge; set instanceTypes: [p4d.24xlarge]" in res("type")
    assert "cr-0ffffffffffffffff does not exist in us-east-1" in res("missing")
    assert "scheduled and starts at 2030-01-02 03:04 UTC" in res("scheduled")
    assert "not a Capacity Block" in res("notblock") and "ReservationType default" in res("notblock")
    assert {f.key for f in failures(findings)} == {
        f"eks-training:nodeGroups.{n}.capacityReservationId"
        for n in ("zone", "type", "missing", "scheduled", "notblock")
    }


def test_a_scheduled_capacity_block_is_information_with_its_start(seeded: sup.SeededMoto) -> None:
    """`pulumi up` builds the environment before the block starts: a scheduled block passes, saying when it starts
    and ends and what the group does then; a scheduled block that does not match the group still fails."""
    seeded.seed_quota(STD_OD, 1000)
    start = datetime(2030, 1, 2, 11, 30, tzinfo=timezone.utc)
    seeded.seed_capacity_reservation(
        "cr-0000000000000000b",
        "p5.48xlarge",
        "us-east-1a",
        count=2,
        state="scheduled",
        capacity_block=True,
        start=start,
        end=datetime(2030, 1, 9, 11, 30, tzinfo=timezone.utc),
    )
    block = {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0000000000000000b"}
    cfg = load(stack({"gpu": group(["p5.48xlarge"], 2, availabilityZone="us-east-1a", **block)}))
    findings = check(cfg, ZONES, session())  # raises PreflightError on any failure
    info = one(findings, f"{GPU_KEY}.capacityReservationId")
    assert info.ok
    assert info.message.startswith(
        "cr-0000000000000000b: scheduled Capacity Block for 2 x p5.48xlarge in us-east-1a: it starts 2030-01-02 11:30 "
        "UTC and ends 2030-01-09 11:30 UTC. `pulumi up` builds the environment now; the group has no nodes until the "
        "start"
    )
    assert "EKS scales it to 0 40 minutes before the end" in info.message
    # the same block for a group in another zone: still a failure, naming the zone
    other = load(stack({"gpu": group(["p5.48xlarge"], 2, availabilityZone="us-east-1c", **block)}))
    bad = one(run_preflight(other, ZONES, session()), f"{GPU_KEY}.capacityReservationId")
    assert not bad.ok and "it is in us-east-1a but the group runs in us-east-1c" in bad.message


def test_capacity_block_larger_than_the_group_needs_and_odcr_given_as_block(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(STD_OD, 1000)
    seeded.seed_capacity_reservation("cr-00000000000000007", "p5.48xlarge", "us-east-1a", count=1, capacity_block=True)
    cfg = load(
        stack(
            {
                "gpu": group(
                    ["p5.48xlarge"], 2, availabilityZone="us-east-1a", capacityReservationId="cr-00000000000000007"
                )
            }
        )
    )
    msg = one(run_preflight(cfg, ZONES, session()), f"{GPU_KEY}.capacityReservationId").message
    assert "it is a Capacity Block; set capacityType: CAPACITY_BLOCK" in msg
    cb = load(
        stack(
            {
                "gpu": group(
                    ["p5.48xlarge"],
                    2,
                    availabilityZone="us-east-1a",
                    capacityType="CAPACITY_BLOCK",
                    capacityReservationId="cr-00000000000000007",
                )
            }
        )
    )
    msg = one(run_preflight(cb, ZONES, session()), f"{GPU_KEY}.capacityReservationId").message
    assert "the block holds 1 instance(s) but maxSize is 2" in msg


# ------------------------------------------------------------------------------------------------
# 4. EFA
# ------------------------------------------------------------------------------------------------


def test_spot_group_of_an_efa_type_is_checked_across_the_zones_without_efa(seeded: sup.SeededMoto) -> None:
    """A SPOT group defaults to efa: false: preflight checks its type in every zone of the VPC, asks nothing about
    EFA, and counts it against the Spot quota; the same type on demand (pinned) gets the EFA check."""
    seeded.seed_quota(P_SPOT, 1000, name="All P Spot Instance Requests")
    seeded.seed_quota(P_OD, 1000)
    seeded.seed_quota(STD_OD, 1000)
    cfg = load(
        stack(
            {
                "spot": group(["p5.48xlarge"], 2, capacityType="SPOT"),
                "od": group(["p5.48xlarge"], 2, availabilityZone="us-east-1a"),
            }
        )
    )
    findings = run_preflight(cfg, ZONES, session())
    assert failures(findings) == [], format_report(findings)
    assert about(findings, "eks-training:nodeGroups.spot.instanceTypes[0]", "offered").message == (
        "p5.48xlarge is offered in us-east-1a, us-east-1c"
    )
    assert not [f for f in by_key(findings, "eks-training:nodeGroups.spot.instanceTypes[0]") if "EFA" in f.message]
    assert "L-7212CCBC" in one(findings, "eks-training:nodeGroups.spot.maxSize").message
    assert (
        "supports EFA with 32 interface(s)"
        in about(findings, "eks-training:nodeGroups.od.instanceTypes[0]", "EFA").message
    )


def test_spot_groups_get_the_current_spot_price_as_information(proc: sup.MotoProcess) -> None:
    """moto answers DescribeSpotPriceHistory with $0.00001 in every zone that offers the type: the finding shows the
    price per zone of the group, how far below On-Demand it is and the discount the estimate uses; it never fails."""
    cfg = load(
        stack({"spot": group(["g5.xlarge"], 2, capacityType="SPOT", spotDiscount=0.6), "od": group(["m5.xlarge"], 2)})
    )
    findings = run_preflight(cfg, ZONES, session())
    info = about(findings, "eks-training:nodeGroups.spot.instanceTypes[0]", "Spot price")
    assert info.ok
    assert info.message == (
        "(information) current Spot price of g5.xlarge: $1e-05/h in us-east-1a, $1e-05/h in us-east-1c, 100% below its "
        "On-Demand $1.006/h; the cost estimate uses 60% off (nodeGroups.spot.spotDiscount): set it to 0.90 to estimate "
        "with the highest of these prices"
    )
    assert not [f for f in findings if "Spot price" in f.message and "nodeGroups.od" in f.key]


def test_efa_checked_against_describe_instance_types(proc: sup.MotoProcess) -> None:
    facts = {
        # m5.2xlarge has no EFA per EC2 (moto: EfaSupported false); g6e.24xlarge has 2 interfaces.
        "m5.2xlarge": {"vcpus": 8, "memoryMib": 32768, "maxEfaInterfaces": 1, "source": "a wrong note"},
        "g6e.24xlarge": {
            "vcpus": 96,
            "memoryMib": 786432,
            "gpus": 4,
            "gpuModel": "NVIDIA L40S",
            "maxEfaInterfaces": 4,
            "networkCards": 4,
            "source": "a wrong note",
        },
        "m5.4xlarge": {"vcpus": 16, "memoryMib": 65536, "maxEfaInterfaces": 1, "source": "a wrong note"},
    }
    cfg = load(
        stack(
            {
                "cpu": group(["m5.2xlarge"], 1, availabilityZone="us-east-1a"),
                "l40s": group(["g6e.24xlarge"], 1, availabilityZone="us-east-1a"),
                "explicit": group(["m5.4xlarge"], 1, availabilityZone="us-east-1a", efa=True),
                "p4d": group(["p4d.24xlarge"], 1, availabilityZone="us-east-1a"),
            },
            instanceFacts=facts,
        )
    )
    findings = run_preflight(cfg, ZONES, session())

    def efa(key: str) -> Finding:
        return about(findings, key, "EFA")

    cpu = efa("eks-training:nodeGroups.cpu.instanceTypes[0]")
    assert not cpu.ok and "EC2 says it does not support EFA" in cpu.message
    assert "fix eks-training:instanceFacts.m5.2xlarge.maxEfaInterfaces" in cpu.message
    l40s = efa("eks-training:nodeGroups.l40s.instanceTypes[0]")
    assert not l40s.ok and "MaximumEfaInterfaces 2, the plan uses 4" in l40s.message
    # efa: true on a type EC2 says has no EFA (the stack's facts claim one)
    explicit = one(findings, "eks-training:nodeGroups.explicit.efa")
    assert not explicit.ok and "EC2 says m5.4xlarge does not support EFA; set efa: false" in explicit.message
    assert efa("eks-training:nodeGroups.p4d.instanceTypes[0]").ok


def test_efa_count_mismatch_with_the_catalog_says_fix_the_catalog(proc: sup.MotoProcess) -> None:
    cfg = load(stack({"gpu": group(["p5.48xlarge"], 1, availabilityZone="us-east-1a")}))
    wrong = dataclasses.replace(INSTANCE_TYPES["p5.48xlarge"], max_efa_interfaces=16, network_cards=16)
    cfg = replan(cfg, catalog=Catalog({**INSTANCE_TYPES, "p5.48xlarge": wrong}))
    [f] = [f for f in run_preflight(cfg, ZONES, session()) if "EFA" in f.message]
    assert f.key == f"{GPU_KEY}.instanceTypes[0]" and not f.ok
    assert "MaximumEfaInterfaces 32, the plan uses 16" in f.message and "components/catalog/instances.py" in f.message


# ------------------------------------------------------------------------------------------------
# 5. add-on versions
# ------------------------------------------------------------------------------------------------


def _addon_findings(cluster: dict[str, Any], groups: dict[str, Any] | None = None, **extra: Any) -> list[Finding]:
    groups = groups or {"gpu": group(["p5.48xlarge"], 1, availabilityZone="us-east-1a")}
    findings = run_preflight(load(stack(groups, cluster=cluster, **extra)), ZONES, session())
    return [f for f in findings if ".addonVersions." in f.key or "add-on" in f.message or "version for" in f.message]


def test_eks_default_without_a_setting_the_stack_passes_names_the_version_to_pin(seeded: sup.SeededMoto) -> None:
    """The node monitoring agent is not pinned here: EKS's default for 1.33 (in this test data) predates
    dcgmAgent.tolerations, which EKS would refuse mid-deployment; preflight refuses it first."""
    f = one(_addon_findings({"kubernetesVersion": "1.33", "extendedSupport": True}), NMA_KEY)
    assert not f.ok
    assert (
        "without a pin the cluster gets EKS's default eks-node-monitoring-agent for Kubernetes 1.33, "
        "v1.2.0-eksbuild.1, which lacks dcgmAgent.tolerations" in f.message
    )
    assert "(v1.3.0 or later), needed by the node monitoring agent's configuration" in f.message
    assert f"pin {NMA_KEY} to v1.4.3-eksbuild.2 (the newest EKS offers for Kubernetes 1.33" in f.message


def test_eks_default_cloudwatch_without_p6_b200_gpu_metrics_is_refused(seeded: sup.SeededMoto) -> None:
    """The issue's finding: a CloudWatch add-on whose DCGM exporter does not list p6-b200 publishes no GPU metric
    there, and the idle-GPU alarm never fires; EKS's default (here a 5.x release before 5.3.0) is refused, naming the
    version that has it."""
    groups = {"gpu": group(["p6-b200.48xlarge"], 1, availabilityZone="us-east-1a")}
    f = one(_addon_findings({}, groups), CW_KEY)
    assert not f.ok
    assert "EKS's default amazon-cloudwatch-observability for Kubernetes 1.36, v5.2.3-eksbuild.1, which lacks" in (
        f.message
    )
    assert (
        "on p6-b200.48xlarge (v4.8.0 up to (not including) v5.0.0, or v5.3.0 or later), needed by nodeGroups.gpu"
        in (f.message)
    )
    assert f"pin {CW_KEY} to v6.4.0-eksbuild.1" in f.message
    # the same group with a pin that has it, or on 1.35 where this project pins v5.3.1
    ok = one(
        _addon_findings({"addonVersions": {"amazon-cloudwatch-observability": "v6.4.0-eksbuild.1"}}, groups), CW_KEY
    )
    assert ok.ok and "v6.4.0-eksbuild.1 (the stack's eks-training:cluster.addonVersions." in ok.message
    pinned = one(_addon_findings({"kubernetesVersion": "1.35"}, groups), CW_KEY)
    assert pinned.ok and "v5.3.1-eksbuild.1 (this project's pin for Kubernetes 1.35" in pinned.message


def test_eks_default_that_has_everything_passes(seeded: sup.SeededMoto) -> None:
    f = one(_addon_findings({}), NMA_KEY)
    assert f.ok and "EKS's default eks-node-monitoring-agent for Kubernetes 1.36, v1.7.0-eksbuild.1, which has" in (
        f.message
    )


def test_a_pinned_version_must_be_offered_for_the_kubernetes_version(seeded: sup.SeededMoto) -> None:
    ok = one(
        _addon_findings({"kubernetesVersion": "1.34", "addonVersions": {"vpc-cni": "v1.19.0-eksbuild.1"}}), VPC_CNI_KEY
    )
    assert ok.ok and "v1.19.0-eksbuild.1 (the stack's" in ok.message and "is offered for Kubernetes 1.34" in ok.message
    bad = one(
        _addon_findings({"kubernetesVersion": "1.34", "addonVersions": {"vpc-cni": "v1.19.9-eksbuild.9"}}), VPC_CNI_KEY
    )
    assert not bad.ok
    assert "v1.19.9-eksbuild.9 (the stack's eks-training:cluster.addonVersions.vpc-cni) is not offered by EKS for " in (
        bad.message
    )
    # the newest offered for 1.34 that has efa-only interfaces (eksbuild.3 sorts after eksbuild.1)
    assert f"pin {VPC_CNI_KEY} to v1.20.4-eksbuild.2 (the newest EKS offers for Kubernetes 1.34" in bad.message


def test_this_projects_pin_must_be_offered_too(seeded: sup.SeededMoto) -> None:
    """A pin of components/catalog/addons.py that the region does not offer is named, with the version to pin
    instead (what only the account can say)."""
    seeded.reset()
    seed_addons(seeded, skip=("vpc-cni",))
    seeded.seed_addon_versions("vpc-cni", {"v1.23.1-eksbuild.1": {"1.36": True}})
    f = one(_addon_findings({}), VPC_CNI_KEY)
    assert not f.ok
    assert "vpc-cni v1.22.4-eksbuild.3 (this project's pin for Kubernetes 1.36" in f.message
    assert f"is not offered by EKS for Kubernetes 1.36; pin {VPC_CNI_KEY} to v1.23.1-eksbuild.1" in f.message


def test_the_vpc_cni_check_names_efa_only_only_for_groups_that_have_them(seeded: sup.SeededMoto) -> None:
    # g5.48xlarge: EFA on one network card (no efa-only interface); p5 with EFA off; CPU groups.
    groups = {
        "g5": group(["g5.48xlarge"], 1, availabilityZone="us-east-1a"),
        "p5": group(["p5.48xlarge"], 1, efa=False),
        "cpu": group(["c5.4xlarge"], 2),
    }
    assert INSTANCE_TYPES["g5.48xlarge"].network_cards == 1 and INSTANCE_TYPES["g5.48xlarge"].max_efa_interfaces == 1
    f = one(_addon_findings({"kubernetesVersion": "1.34"}, groups), VPC_CNI_KEY)
    assert f.ok and "NetworkPolicy enforcement" in f.message and "efa-only" not in f.message


def test_a_pin_of_an_addon_the_stack_needs_nothing_of_must_be_offered_too(seeded: sup.SeededMoto) -> None:
    """A ``kube-proxy`` held with cluster.addonVersions across a minor move stays at the old minor's build: preflight
    asks EKS whether it offers that version for the stack's minor (DescribeAddonVersions) and names the newest one."""
    seeded.seed_addon_versions(
        "kube-proxy", {"v1.36.1-eksbuild.2": {"1.36": True}, "v1.35.4-eksbuild.1": {"1.35": True}}
    )
    key_ = "eks-training:cluster.addonVersions.kube-proxy"
    held = one(_addon_findings({"addonVersions": {"kube-proxy": "v1.35.4-eksbuild.1"}}), key_)
    assert not held.ok
    assert held.message == (
        "kube-proxy v1.35.4-eksbuild.1 (cluster.addonVersions) is not offered by EKS for Kubernetes 1.36; pin "
        "v1.36.1-eksbuild.2 (the newest EKS offers for it), or remove the pin for EKS's default"
    )
    moved = one(_addon_findings({"addonVersions": {"kube-proxy": "v1.36.1-eksbuild.2"}}), key_)
    assert (
        moved.ok
        and moved.message == "kube-proxy v1.36.1-eksbuild.2 (cluster.addonVersions) is offered for Kubernetes 1.36"
    )


def test_addon_versions_unreadable(proc: sup.MotoProcess) -> None:
    # stock moto_server has no DescribeAddonVersions: a failure that says what is needed
    f = one(_addon_findings({}), VPC_CNI_KEY)
    assert not f.ok
    assert "could not read the vpc-cni versions EKS offers for Kubernetes 1.36" in f.message
    assert "preflight.enabled: false" in f.message


def test_no_version_offered_for_the_kubernetes_version(seeded: sup.SeededMoto) -> None:
    seeded.reset()
    seed_addons(seeded, skip=("vpc-cni",))
    findings = run_preflight(
        load(
            stack(
                {"gpu": group(["p4d.24xlarge"], 1, availabilityZone="us-east-1a")},
                cluster={"kubernetesVersion": "1.35"},
            )
        ),
        ZONES,
        session(),
    )
    f = about(findings, VERSION_KEY, "EKS offers no vpc-cni version")
    assert not f.ok and "EKS offers no vpc-cni version for Kubernetes 1.35 in us-east-1" in f.message


# ------------------------------------------------------------------------------------------------
# 8-11. FSx for Lustre
# ------------------------------------------------------------------------------------------------

FSX_QUOTA = "L-8F1B9C74"
CAPACITY_KEY = "eks-training:storage.fsx.storageCapacityGib"
S3_PATH_KEY = "eks-training:storage.fsx.dataRepository.s3Path"
TIER_KEY = "eks-training:storage.fsx.throughputPerTib"


def fsx_stack(fsx: dict[str, Any] | None = None, **storage: Any) -> dict[str, Any]:
    """A p5 group in us-east-1a whose job trains from FSx."""
    return stack(
        {"gpu": group(["p5.48xlarge"], 2, availabilityZone="us-east-1a")},
        jobs={"train": {"kind": "pytorch", "script": "/app/train.py", "nodeGroup": "gpu", "nodes": 2}},
        storage={"backend": "fsx", "fsx": fsx or {}, **storage},
    )


def lustre(capacity: int, subnet: str = "subnet-0123456789abcdef0", deployment: str = "PERSISTENT_2") -> str:
    """Create an FSx for Lustre file system in moto; its id."""
    fsx = session().client("fsx")
    created = fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=capacity,
        StorageType="SSD",
        SubnetIds=[subnet],
        LustreConfiguration={"DeploymentType": deployment, "PerUnitStorageThroughput": 250},
    )
    return str(created["FileSystem"]["FileSystemId"])


def test_fsx_all_good_counts_existing_file_systems_against_the_quota(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(FSX_QUOTA, 9600, service="fsx", name="Lustre Persistent_2 storage capacity")
    lustre(2400)
    lustre(1200, deployment="SCRATCH_2")  # another quota: not counted
    session().client("s3").create_bucket(Bucket="team-datasets")
    findings = run_preflight(
        load(fsx_stack({"dataRepository": {"s3Path": "s3://team-datasets/imagenet/"}})), ZONES, session()
    )

    tier = one(findings, TIER_KEY)
    assert (
        tier.ok
        and "250 MB/s/TiB is a PERSISTENT_2 SSD tier (125, 250, 500, 1000; checked against the catalog" in tier.message
    )
    bucket = one(findings, S3_PATH_KEY)
    assert bucket.ok and "bucket team-datasets exists in us-east-1" in bucket.message
    quota = one(findings, CAPACITY_KEY)
    assert quota.ok, quota.message
    assert "FSx quota L-8F1B9C74 (Lustre Persistent_2 storage capacity) is 9600 GiB (applied)" in quota.message
    assert "1200 GiB for this stack + 2400 GiB of 1 existing PERSISTENT_2 file system(s) = 3600 GiB" in quota.message


def test_fsx_quota_too_low_names_the_increase(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(FSX_QUOTA, 3000, service="fsx")
    lustre(2400)
    [fail] = [f for f in run_preflight(load(fsx_stack()), ZONES, session()) if f.key == CAPACITY_KEY]
    assert not fail.ok
    assert "is 3000 GiB (applied) but 1200 GiB for this stack + 2400 GiB" in fail.message
    assert "--service-code fsx --quota-code L-8F1B9C74 --desired-value 3600 --region us-east-1" in fail.message


def test_fsx_quota_falls_back_to_the_default(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(FSX_QUOTA, 4800, service="fsx", applied=False)
    default = one(run_preflight(load(fsx_stack()), ZONES, session()), CAPACITY_KEY)
    assert default.ok and "is 4800 GiB (AWS default)" in default.message
    seeded.reset()
    seed_addons(seeded)
    documented = one(run_preflight(load(fsx_stack({"storageCapacityGib": 2400})), ZONES, session()), CAPACITY_KEY)
    assert (
        documented.ok
        and "is 100800 GiB (the documented default); 2400 GiB for this stack + 0 GiB" in documented.message
    )


def test_fsx_bucket_missing_elsewhere_or_created(proc: sup.MotoProcess) -> None:
    s3 = boto3.session.Session(region_name="eu-west-1").client("s3")
    s3.create_bucket(Bucket="eu-datasets", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    missing = one(
        run_preflight(load(fsx_stack({"dataRepository": {"s3Path": "s3://no-such-bucket/x/"}})), ZONES, session()),
        S3_PATH_KEY,
    )
    assert not missing.ok and "bucket no-such-bucket does not exist; create it in us-east-1" in missing.message
    elsewhere = one(
        run_preflight(load(fsx_stack({"dataRepository": {"s3Path": "s3://eu-datasets/x/"}})), ZONES, session()),
        S3_PATH_KEY,
    )
    assert not elsewhere.ok and "bucket eu-datasets is in eu-west-1, the stack in us-east-1" in elsewhere.message
    findings = run_preflight(load(fsx_stack()), ZONES, session())
    created = one(findings, "eks-training:storage.fsx.dataRepository")
    assert created.ok and "the stack creates the data bucket in us-east-1 (datasets under datasets/)" in created.message
    assert not by_key(findings, S3_PATH_KEY)
    # stock moto has no fsx quotas and no GetAWSDefaultServiceQuota: a failure that says what is needed
    quota = one(findings, CAPACITY_KEY)
    assert (
        not quota.ok
        and "could not read the FSx quota L-8F1B9C74" in quota.message
        and "preflight.enabled: false" in quota.message
    )


def test_fsx_tier_check_can_fail(proc: sup.MotoProcess) -> None:
    """Control: a tier outside the catalog (here forced past the loader) is a failure naming the key."""
    from stacks.config import FsxConfig

    plan = load(fsx_stack())
    bad = FsxConfig.model_construct(**{**dict(plan.storage.fsx or FsxConfig()), "throughput_per_tib": 200})
    plan = dataclasses.replace(plan, storage=dataclasses.replace(plan.storage, fsx=bad))
    tier = one(run_preflight(plan, ZONES, session()), TIER_KEY)
    assert not tier.ok and "200 MB/s/TiB is not a PERSISTENT_2 SSD throughput tier" in tier.message


def _adopting(subnets: list[str], file_system_id: str, **fsx: Any) -> dict[str, Any]:
    return stack(
        {"gpu": group(["p5.48xlarge"], 2, subnetId=subnets[1])},
        existingVpc={"vpcId": "vpc-0abc1234def567890", "privateSubnetIds": subnets},
        jobs={"train": {"kind": "pytorch", "script": "/app/train.py", "nodeGroup": "gpu", "nodes": 2}},
        storage={
            "backend": "fsx",
            "fileSystemId": file_system_id,
            "retainOnDelete": True,
            "fsx": {
                "securityGroupId": "sg-0123456789abcdef0",
                "dataRepository": {"s3Path": "s3://kept-data/datasets/", "exportPath": "/runs"},
                **fsx,
            },
        },
    )


def _adopting_in_a_vpc() -> tuple[dict[str, Any], list[str], str]:
    """:func:`_adopting` in a VPC of two subnets moto holds, the file system in the second, its bucket there: (the
    stack's config, the subnets, the file system's id)."""
    ec2 = session().client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=z)["Subnet"]["SubnetId"]
        for z, cidr in (("us-east-1a", "10.30.0.0/20"), ("us-east-1c", "10.30.16.0/20"))
    ]
    session().client("s3").create_bucket(Bucket="kept-data")
    kept = lustre(1200, subnet=subnets[1])
    config = _adopting(subnets, kept)
    config["eks-training:existingVpc"]["vpcId"] = vpc
    return config, subnets, kept


def test_adopted_file_system_and_its_associations(seeded: sup.SeededMoto) -> None:
    config, subnets, kept = _adopting_in_a_vpc()
    vpc = config["eks-training:existingVpc"]["vpcId"]
    findings = run_preflight(load(config), None, session())
    adopted = one(findings, "eks-training:storage.fileSystemId")
    assert adopted.ok and f"{kept} is an available PERSISTENT_2 file system in {subnets[1]}" in adopted.message
    assert (
        "has 0 association(s), none on /datasets, /runs"
        in one(findings, "eks-training:storage.fsx.dataRepository").message
    )
    assert not by_key(findings, CAPACITY_KEY), "an adopted file system adds no storage to the quota"

    old = seeded.seed_data_repository_association(kept, "/runs", "s3://kept-data/runs/")
    seeded.seed_data_repository_association(kept, "/scratch", "s3://kept-data/scratch/")
    clash = one(run_preflight(load(config), None, session()), "eks-training:storage.fsx.dataRepository.fileSystemPath")
    assert not clash.ok and f"already links {old['AssociationId']} (/runs -> s3://kept-data/runs/)" in clash.message
    assert f"--association-id {old['AssociationId']} --no-delete-data-in-file-system" in clash.message

    elsewhere = lustre(1200, subnet=subnets[0])
    config_b = _adopting(subnets, elsewhere)
    config_b["eks-training:existingVpc"]["vpcId"] = vpc
    wrong = one(run_preflight(load(config_b), None, session()), "eks-training:storage.fileSystemId")
    assert (
        not wrong.ok and f"it is in {subnets[0]} but the stack places the file system in {subnets[1]}" in wrong.message
    )
    config_c = _adopting(subnets, "fs-0ffffffffffffffff")
    config_c["eks-training:existingVpc"]["vpcId"] = vpc
    gone = one(run_preflight(load(config_c), None, session()), "eks-training:storage.fileSystemId")
    assert not gone.ok and "fs-0ffffffffffffffff is not an FSx for Lustre file system in us-east-1" in gone.message


def test_efs_stacks_have_no_fsx_findings(proc: sup.MotoProcess) -> None:
    findings = run_preflight(load(stack({"cpu": group(["m5.xlarge"])})), ZONES, session())
    assert not [f for f in findings if "storage" in f.key]


# ------------------------------------------------------------------------------------------------
# report, exception, region
# ------------------------------------------------------------------------------------------------


def test_report_and_exception_name_the_config_key(proc: sup.MotoProcess) -> None:
    cfg = load(
        stack(
            {"gpu": group(["p5en.48xlarge"], 1, efa=False)}, network={"availabilityZones": ["us-east-1a", "us-east-1b"]}
        )
    )
    with pytest.raises(PreflightError) as info:
        check(cfg, AB, session())
    exc = info.value
    assert isinstance(exc, ConfigError) and isinstance(exc, pulumi.RunError)
    assert f"{GPU_KEY}.instanceTypes[0]: p5en.48xlarge is not offered in us-east-1b" in str(exc)
    assert any(p.startswith(f"{GPU_KEY}.instanceTypes[0]:") for p in exc.problems)
    report = format_report(exc.findings)
    lines = report.splitlines()
    assert f"FAIL {GPU_KEY}.instanceTypes[0]: p5en.48xlarge is not offered in us-east-1b" in report
    assert any(line.startswith("OK   eks-training:systemNodeGroup.instanceType:") for line in lines)
    failed = len(failures(exc.findings))
    assert lines[-1] == f"preflight: {failed} of {len(exc.findings)} check(s) FAILED; fix them before `pulumi up`"
    assert format_report([Finding(True, "k", "m")]).splitlines() == ["OK   k: m", "preflight: all 1 check(s) passed"]


def test_no_region_stops_before_preflight(proc: sup.MotoProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack without ``aws:region`` is refused when its configuration loads, as ``pulumi up`` refuses it (the
    environment's AWS_REGION does not stand in: the program reads the stack's), so preflight never runs without one."""
    config = stack({"cpu": group(["m5.xlarge"])})
    del config["aws:region"]
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with pytest.raises(ConfigError, match=r"aws:region: not set; run `pulumi config set aws:region us-east-1`"):
        load(config)


# ------------------------------------------------------------------------------------------------
# the standalone command
# ------------------------------------------------------------------------------------------------


def run_cli(tmp_path: Path, config: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    stack_file = tmp_path / "Pulumi.cli.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    return subprocess.run(
        [sys.executable, "-m", "stacks.preflight", "--stack", "cli", "--stack-file", str(stack_file), *args],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=patient(60),
    )


def test_cli_prints_the_report_and_exits_1_on_failure(proc: sup.MotoProcess, tmp_path: Path) -> None:
    config = stack({"gpu": group(["p5en.48xlarge"], 1, efa=False)}, network={"availabilityZoneCount": 2})
    result = run_cli(tmp_path, config)
    assert result.returncode == 1, result.stderr
    # Zones resolved like the program: the first 2 available zones, sorted (us-east-1a, us-east-1b).
    assert "(the group's zones: us-east-1a, us-east-1b)" in result.stdout
    assert f"FAIL {GPU_KEY}.instanceTypes[0]: p5en.48xlarge is not offered in us-east-1b" in result.stdout
    assert "check(s) FAILED" in result.stdout.splitlines()[-1]


def test_cli_exits_0_when_everything_passes(seeded: sup.SeededMoto, tmp_path: Path) -> None:
    seeded.seed_quota(P_OD, 384)
    seeded.seed_quota(STD_OD, 64)
    seeded.seed_capacity_reservation(CR_ODCR, "p5.48xlarge", "us-east-1a")
    config = stack({"gpu": p5_with_reservation()})
    config["aws:region"] = "eu-west-1"  # --region wins over the stack's aws:region
    result = run_cli(tmp_path, config, "--region", sup.REGION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == "preflight for stack cli in us-east-1:"
    assert result.stdout.splitlines()[-1].startswith("preflight: all ")


def test_cli_exits_2_on_a_config_error(proc: sup.MotoProcess, tmp_path: Path) -> None:
    bad = stack({"gpu": {"instanceTypes": ["p5.48xlarge"], "minSize": 3, "desiredSize": 3, "maxSize": 1}})
    result = run_cli(tmp_path, bad)
    assert result.returncode == 2
    assert "eks-training:nodeGroups.gpu.minSize: 3 > eks-training:nodeGroups.gpu.maxSize (1)" in result.stderr
    zones = run_cli(
        tmp_path, stack({"cpu": group(["m5.xlarge"])}, network={"availabilityZones": ["us-east-1a", "us-east-1z"]})
    )
    assert zones.returncode == 2 and "us-east-1z" in zones.stderr


# ------------------------------------------------------------------------------------------------
# the real program with preflight on
# ------------------------------------------------------------------------------------------------


def _p5_stack_with_zones() -> dict[str, Any]:
    from tests.harness import stack_config

    cfg = stack_config("p5")
    cfg["eks-training:network"] = {"availabilityZones": ["us-east-1a", "us-east-1c"]}
    cfg["eks-training:preflight"] = {"enabled": True}
    return cfg


def test_program_stops_before_registering_anything_when_preflight_fails(seeded: sup.SeededMoto) -> None:
    """`pulumi up` itself runs the checks: with the P quota below 2 x 192 vCPUs nothing is created."""
    from stacks.preflight import PreflightError
    from tests.harness import run_program

    seeded.seed_quota(P_OD, 96, name="Running On-Demand P instances")
    seeded.seed_quota(STD_OD, 1000)
    p = run_program("p5", config=_p5_stack_with_zones(), expect_error=True)
    assert isinstance(p.error, PreflightError), p.error
    assert P_OD in str(p.error) and "384" in str(p.error)
    assert p.registrations == []


def test_program_registers_the_environment_when_preflight_passes(seeded: sup.SeededMoto) -> None:
    from tests.harness import run_program

    seeded.seed_quota(P_OD, 384, name="Running On-Demand P instances")
    seeded.seed_quota(STD_OD, 1000)
    p = run_program("p5", config=_p5_stack_with_zones())
    assert p.error is None
    assert p.of_type("aws:eks/nodeGroup:NodeGroup")


def _dataset_finding(config: dict[str, Any], name: str = "data") -> Finding:
    return one(run_preflight(load(config), ZONES, session()), f"eks-training:datasets.{name}.source")


def _efs(source: str, **extra: Any) -> dict[str, Any]:
    """A stack whose one job reads the dataset ``data`` from ``source``."""
    job = {"kind": "command", "command": ["true"], "nodeGroup": "cpu", "dataset": "data"}
    return stack({"cpu": group(["m5.xlarge"])}, datasets={"data": {"source": source, **extra}}, jobs={"read": job})


def test_a_staged_datasets_object_exists_at_its_size(seeded: sup.SeededMoto) -> None:
    """The tarball a staging Job downloads: there (its size), missing, a folder instead, of another size, archived."""
    s3 = session().client("s3")
    s3.create_bucket(Bucket="team-data")
    s3.put_object(Bucket="team-data", Key="cifar.tar.gz", Body=b"x" * 10)
    s3.put_object(Bucket="team-data", Key="images/a.jpg", Body=b"a")
    s3.put_object(Bucket="team-data", Key="cold.tar.gz", Body=b"x", StorageClass="DEEP_ARCHIVE")

    # what the plan says preflight will check (offline) names the same key
    assert (
        "eks-training:datasets.data.source",
        "s3://team-data/cifar.tar.gz is one object (the tarball staging downloads), 11 bytes",
    ) in planned_checks(load(_efs("s3://team-data/cifar.tar.gz", expectedBytes=11)))
    there = _dataset_finding(_efs("s3://team-data/cifar.tar.gz"))
    assert there.ok and there.message == "s3://team-data/cifar.tar.gz exists (10 bytes)"
    missing = _dataset_finding(_efs("s3://team-data/cifar.tgz"))
    assert not missing.ok
    assert missing.message == "no object s3://team-data/cifar.tgz; upload the dataset's tarball there first"
    folder = _dataset_finding(_efs("s3://team-data/images"))
    assert not folder.ok and folder.message == (
        "s3://team-data/images is a folder of objects, and staging downloads one tarball; pack it into one tarball "
        "(tar czf) and upload that"
    )
    sized = _dataset_finding(_efs("s3://team-data/cifar.tar.gz", expectedBytes=11))
    assert not sized.ok and "is 10 bytes and expectedBytes says 11: the staging Job would refuse it" in sized.message
    cold = _dataset_finding(_efs("s3://team-data/cold.tar.gz"))
    assert not cold.ok and cold.message.startswith("s3://team-data/cold.tar.gz is archived (DEEP_ARCHIVE)")
    unreadable = _dataset_finding(_efs("s3://no-such-bucket/cifar.tar.gz"))
    assert not unreadable.ok and unreadable.message.startswith("could not read s3://no-such-bucket/cifar.tar.gz (")
    # a dataset no job reads is not staged, so not checked
    unused = load(stack({"cpu": group(["m5.xlarge"])}, datasets={"data": {"source": "s3://team-data/none.tgz"}}))
    assert not by_key(run_preflight(unused, ZONES, session()), "eks-training:datasets.data.source")
    assert "eks-training:datasets.data.source" not in dict(planned_checks(unused))  # nor does the plan promise it


def test_a_missing_tarball_is_a_warning_once_the_cluster_exists(seeded: sup.SeededMoto) -> None:
    """Staged when the stack was made: deleting the tarball afterwards does not stop the next pulumi up."""
    session().client("s3").create_bucket(Bucket="team-data")
    _running("1.36")
    found = _dataset_finding(_efs("s3://team-data/cifar.tgz"))
    assert found.ok and found.message.startswith("no object s3://team-data/cifar.tgz; upload")
    assert "(the cluster exists, so this is only a warning" in found.message


def test_an_imported_datasets_prefix_holds_objects(seeded: sup.SeededMoto) -> None:
    """An FSx stack: a prefix the file system imports must hold objects (a console folder's marker is not one); one
    written without its slash is named."""
    s3 = session().client("s3")
    s3.create_bucket(Bucket="team-datasets")
    s3.put_object(Bucket="team-datasets", Key="sets/imagenet/train/0.jpg", Body=b"a")
    s3.put_object(Bucket="team-datasets", Key="sets/coco/", Body=b"")
    seeded.seed_quota(FSX_QUOTA, 9600, service="fsx")

    def fsx(source: str) -> dict[str, Any]:
        config = fsx_stack({"dataRepository": {"s3Path": "s3://team-datasets/sets/"}})
        config["eks-training:datasets"] = {"data": {"source": source}}
        config["eks-training:jobs"]["train"]["dataset"] = "data"
        return config

    assert _dataset_finding(fsx("s3://team-datasets/sets/imagenet/")).ok
    empty = _dataset_finding(fsx("s3://team-datasets/sets/coco/"))
    assert not empty.ok and empty.message.startswith("no object under s3://team-datasets/sets/coco/: the file system")
    slash = _dataset_finding(fsx("s3://team-datasets/sets/imagenet"))
    assert not slash.ok and slash.message.endswith(
        "end it with / to have the file system import the folder (s3://team-datasets/sets/imagenet/)"
    )


# ------------------------------------------------------------------------------------------------
# 13. EKS's managed node group quotas
# ------------------------------------------------------------------------------------------------


def test_a_group_larger_than_the_nodes_per_group_quota_fails_with_the_increase(seeded: sup.SeededMoto) -> None:
    """Without an applied value, AWS's documented default (450) counts; each group over it fails at its maxSize."""
    seeded.seed_quota(STD_OD, 10_000)
    findings = run_preflight(load(stack({"cpu": group(["m5.large"], 500)})), ZONES, session())
    [fail] = failures(findings)
    assert fail.key == "eks-training:nodeGroups.cpu.maxSize"
    assert "500 nodes, but EKS quota L-BD136A63 (Nodes per managed node group) is 450 (the documented default)" in (
        fail.message
    )
    assert "--service-code eks --quota-code L-BD136A63 --desired-value 500 --region us-east-1" in fail.message
    groups = [f for f in by_key(findings, "eks-training:nodeGroups") if "L-6D54EA21" in f.message]
    assert [f.ok for f in groups] == [True] and "the stack has 2 groups" in groups[0].message


def test_an_applied_quota_counts_and_the_groups_per_cluster_quota_too(seeded: sup.SeededMoto) -> None:
    seeded.seed_quota(STD_OD, 10_000)
    seeded.seed_quota("L-BD136A63", 1000, name="Nodes per managed node group", service="eks")
    seeded.seed_quota("L-6D54EA21", 2, name="Managed node groups per cluster", service="eks")
    cfg = load(stack({"cpu": group(["m5.large"], 500), "more": group(["m5.large"], 2)}))
    findings = run_preflight(cfg, ZONES, session())
    nodes = [f for f in findings if "L-BD136A63" in f.message]
    assert [f.ok for f in nodes] == [True]
    assert "is 1000 (applied); the largest group, cpu, has maxSize 500" in nodes[0].message
    [fail] = failures(findings)
    assert fail.key == "eks-training:nodeGroups"
    assert "the stack has 3 managed node groups (the system group and 2 in nodeGroups), but EKS quota L-6D54EA21" in (
        fail.message
    )
    assert "--quota-code L-6D54EA21 --desired-value 3" in fail.message


@pytest.mark.parametrize("preset", stack_names())
def test_the_plan_lists_every_key_preflight_checks(seeded: sup.SeededMoto, preset: str) -> None:
    """``python -m stacks plan`` prints what preflight will check (:func:`planned_checks`), offline: every key a run of
    preflight reports on a preset is among them, so the plan promises no check that is not run, and leaves none out."""
    from tests.harness import stack_config

    cfg = stack_config(preset)
    cfg.setdefault("aws:region", sup.REGION)  # moto's region, where a preset leaves it to the default
    plan = load(cfg)
    reported = {f.key for f in run_preflight(plan, None, session())}  # the zones resolved as `pulumi up` does
    planned = {k for k, _ in planned_checks(plan)}
    assert reported == planned, (sorted(reported - planned), sorted(planned - reported))


def test_the_plan_lists_every_key_preflight_checks_on_an_existing_vpc_and_an_adopted_file_system(
    seeded: sup.SeededMoto,
) -> None:
    """The same on the stacks no preset is: an existing VPC's subnets, a group's subnet, an adopted FSx file system
    (no quota taken, its associations read). The control plane's zones are reported only when EKS refuses one."""
    config, _, _ = _adopting_in_a_vpc()
    plan = load(config)
    reported = {f.key for f in run_preflight(plan, None, session())}
    planned = {k for k, _ in planned_checks(plan)}
    assert reported <= planned, sorted(reported - planned)
    assert planned - reported == {"eks-training:existingVpc.privateSubnetIds"}, sorted(planned - reported)
    assert "eks-training:storage.fsx.storageCapacityGib" not in planned  # an adopted file system takes no quota


def _sized_groups(groups: list[tuple[str, Optional[str], int]]) -> Plan:
    """A running cluster with managed node groups (EKS name, ``eks-training/role`` label or none, desired size), and
    the plan of a stack with one ``cpu`` group on it."""
    _running("1.36")
    eks = session().client("eks")
    plan = load(stack({"cpu": group(["m5.large"])}))
    for nodegroup, role, desired in groups:
        eks.create_nodegroup(
            clusterName=plan.config.cluster_name,
            nodegroupName=nodegroup,
            nodeRole="arn:aws:iam::123456789012:role/node",
            subnets=["subnet-0123456789abcdef0"],
            scalingConfig={"minSize": 0, "maxSize": 10, "desiredSize": desired},
            labels={NODE_ROLE_LABEL: role} if role else {},
        )
    return plan


def test_the_desired_size_eks_holds_is_read_by_each_groups_role_label(seeded: sup.SeededMoto) -> None:
    """``pulumi up`` reads the desired size EKS holds for a group whose sizes move under the autoscaler
    (ListNodegroups, DescribeNodegroup), by the ``eks-training/role`` label EKS gives its nodes: its EKS name carries a
    generated suffix. A group the names leave out, and one without the label, are not asked for."""
    plan = _sized_groups([("cpu-1a2b", "cpu", 3), ("system-3c4d", "system", 2), ("other-5e6f", None, 9)])
    assert desired_sizes_now(plan, ["cpu"], session()) == ({"cpu": 3}, None)
    assert desired_sizes_now(plan, ["cpu", "system", "gone"], session()) == ({"cpu": 3, "system": 2}, None)
    assert desired_sizes_now(plan, [], session()) == ({}, None)


def test_the_desired_size_unreadable_says_why(proc: sup.MotoProcess) -> None:
    plan = load(stack({"cpu": group(["m5.large"])}))
    found, why = desired_sizes_now(plan, ["cpu"], session())
    assert found == {} and why is not None and "list_nodegroups" in why, why


def test_a_role_label_two_groups_carry_gives_no_desired_size(seeded: sup.SeededMoto) -> None:
    """A group left over beside its replacement (a delete that failed) carries the same role label: neither size is
    the group's for sure, so none is sent, and ``pulumi up`` warns to refresh instead."""
    plan = _sized_groups([("cpu-1a2b", "cpu", 3), ("cpu-9z8y", "cpu", 5)])
    assert desired_sizes_now(plan, ["cpu"], session()) == ({}, None)
