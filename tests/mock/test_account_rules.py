"""Rules a real AWS account, the real providers and the real charts enforce, which Pulumi's mocks do not: each
written once and asserted over every resource of every shipped stack and of its variant with the longest names,
in the aws-cn partition and with a private-only API endpoint (tests/variants.py).

Each rule names its public source. Together with tests/mock/test_names.py (name limits) they stand for what only a
real `pulumi up` would otherwise show.
"""

import json
import re
from typing import Any

import pytest

from components.catalog import (
    AUTOSCALER_GPU_LABEL,
    CLUSTER_AUTOSCALER,
    EKS_UNSUPPORTED_ZONE_IDS,
    INSTANCE_TYPES,
    SERVICE_PRICES,
    SUPPORTED_KUBERNETES_VERSIONS,
    VPC_CNI_NETWORK_POLICY_CONFIG,
    accelerator_label_value,
    in_standard_support,
)
from components.cluster import DNS_ADDON, POD_IDENTITY_AGENT_ADDON, control_plane_log_group_name
from stacks.config import load_config
from stacks.config.cluster import today
from stacks.costs import CostEstimate, estimate
from stacks.plan import build_plan
from tests.harness import (
    PROJECT,
    REGION,
    ZONE_IDS,
    ZONES,
    Program,
    TrainingMocks,
    partition_of,
    run_program,
    stack_config,
    stack_names,
    strings_in,
)
from tests.variants import PRIVATE_ACCESS_CIDRS, STRESS_REGION, P, stress_config, stress_program

STACKS = stack_names()
VARIANTS = ["shipped", "stress"]
#: Registrations that run pods (Pulumi waits for their pods, or they make pods of their own).
POD_RUNNING_TYPES = frozenset(
    {
        "kubernetes:batch/v1:Job",
        "kubernetes:apps/v1:Deployment",
        "kubernetes:apps/v1:DaemonSet",
        "kubernetes:apps/v1:StatefulSet",
        "kubernetes:kubeflow.org/v2beta1:MPIJob",
        "kubernetes:helm.sh/v3:Release",
    }
)
#: Components whose pods resolve no name: they need not wait for CoreDNS (see test_pods_that_resolve_names_...).
NO_DNS_COMPONENTS = frozenset({"Admission", "MpiOperator", "DevicePlugin", "FsxLustreStorage", "ImagePrePull"})
ARN_RE = re.compile(r"arn:([a-z0-9-]*):")


def program(program_for: Any, stack: str, variant: str) -> Program:
    return program_for(stack, False) if variant == "shipped" else stress_program(stack)


def _config(stack: str, variant: str) -> dict[str, Any]:
    """The config the program evaluated."""
    return stack_config(stack) if variant == "shipped" else stress_config(stack)


def _cluster_cfg(stack: str, variant: str) -> dict[str, Any]:
    return dict(_config(stack, variant).get(P + "cluster") or {})


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("stack", STACKS)
class TestEveryStack:
    def test_arns_use_the_stacks_partition(self, program_for: Any, stack: str, variant: str) -> None:
        """ARNs written into policies and access entries carry the partition of the stack's region; a literal
        ``arn:aws:`` is invalid in aws-cn and aws-us-gov (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html)."""
        p = program(program_for, stack, variant)
        expected = partition_of(STRESS_REGION if variant == "stress" else REGION)
        wrong = []
        seen = 0
        for r in p.registrations:
            for text in strings_in(r.inputs):
                for m in ARN_RE.finditer(text):
                    seen += 1
                    if m.group(1) != expected:
                        wrong.append(f"{r.type} {r.name}: {text[:160]}")
        assert seen, "no ARN in any input: the rule checked nothing"
        assert not wrong, "\n".join(wrong)

    def test_public_access_cidrs_only_with_a_public_endpoint(self, program_for: Any, stack: str, variant: str) -> None:
        """pulumi-eks: "publicAccessCidrs can only be set when endpointPublicAccess is true"."""
        p = program(program_for, stack, variant)
        c = p.one("eks:index:Cluster").inputs
        if c["endpointPublicAccess"]:
            assert c.get("publicAccessCidrs"), "a public endpoint needs its allowed CIDRs"
        else:
            assert c.get("publicAccessCidrs") is None
        assert c["endpointPrivateAccess"] is True
        assert c["endpointPublicAccess"] is _cluster_cfg(stack, variant).get("endpointPublicAccess", True)
        if variant == "stress":
            assert c["endpointPublicAccess"] is False

    def test_the_private_endpoint_admits_the_configured_networks_on_443(
        self, program_for: Any, stack: str, variant: str
    ) -> None:
        """EKS: the cluster security group must allow ingress on port 443 from a bastion or a connected network for it
        to reach a private endpoint (https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html). One
        rule per cluster.privateAccessCidrs entry, in the security group EKS made for the cluster."""
        p = program(program_for, stack, variant)
        cluster = p.one("eks:index:Cluster")
        rules = [
            r
            for r in p.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
            if r.inputs.get("fromPort") == 443
        ]
        assert sorted(r.inputs["cidrIpv4"] for r in rules) == sorted(
            _cluster_cfg(stack, variant).get("privateAccessCidrs", [])
        )
        for r in rules:
            assert (r.inputs["ipProtocol"], r.inputs["toPort"]) == ("tcp", 443)
            assert r.deps_of("securityGroupId") == [cluster.urn]
            assert r.inputs["securityGroupId"] == cluster.outputs["clusterSecurityGroupId"], r.inputs
        if variant == "stress":
            assert len(rules) == len(PRIVATE_ACCESS_CIDRS)

    def test_upgrade_policy_is_standard_unless_extended_support_is_chosen(
        self, program_for: Any, stack: str, variant: str
    ) -> None:
        """pulumi-eks defaults upgradePolicy to EXTENDED ($0.60 instead of $0.10 per cluster-hour after standard
        support ends); the program sends STANDARD unless cluster.extendedSupport, and the version is in standard
        support today unless extended support was chosen."""
        p = program(program_for, stack, variant)
        cluster_cfg = _cluster_cfg(stack, variant)
        c = p.one("eks:index:Cluster").inputs
        extended = bool(cluster_cfg.get("extendedSupport", False))
        assert c["upgradePolicy"] == {"supportType": "EXTENDED" if extended else "STANDARD"}
        assert extended or in_standard_support(c["version"], today())

    def test_control_plane_logs_go_to_a_log_group_the_stack_owns(
        self, program_for: Any, stack: str, variant: str
    ) -> None:
        """EKS writes to /aws/eks/<cluster>/cluster and creates it, without retention, when it does not exist
        (https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html): the stack creates it first."""
        p = program(program_for, stack, variant)
        cluster = p.one("eks:index:Cluster")
        group = p.one("aws:cloudwatch/logGroup:LogGroup", lambda r: r.inputs.get("name", "").startswith("/aws/eks/"))
        assert group.inputs["name"] == control_plane_log_group_name(cluster.inputs["name"])
        assert group.inputs["retentionInDays"] == _cluster_cfg(stack, variant).get("logRetentionDays", 30)
        assert group.urn in cluster.dependencies, "the log group must exist before EKS starts logging"
        assert cluster.inputs["enabledClusterLogTypes"]

    def test_vpc_cni_enforces_network_policies(self, program_for: Any, stack: str, variant: str) -> None:
        """NetworkPolicies do nothing unless the VPC CNI add-on enables enforcement
        (https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html)."""
        p = program(program_for, stack, variant)
        cni = p.one("aws:eks/addon:Addon", lambda r: r.inputs["addonName"] == "vpc-cni")
        assert json.loads(cni.inputs["configurationValues"]) == dict(VPC_CNI_NETWORK_POLICY_CONFIG)

    def test_kubernetes_objects_wait_for_system_nodes_and_the_pod_identity_agent(
        self, program_for: Any, stack: str, variant: str
    ) -> None:
        """Every Kubernetes object is created through the cluster's provider, whose kubeconfig resolves once the system
        nodes (where the controllers of Helm releases run: an atomic release created before any node times out) and
        the Pod Identity agent (credentials for the pods that call AWS, source key ``eks-pod-identity-agent``)
        exist; on destroy the objects go before both."""
        p = program(program_for, stack, variant)
        agent = p.one("aws:eks/addon:Addon", lambda r: r.inputs["addonName"] == POD_IDENTITY_AGENT_ADDON)
        system = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: "-system" in r.name)
        objects = [
            r
            for r in p.registrations
            if r.type.startswith("kubernetes:") and r.custom and not r.type.startswith("pulumi:providers")
        ]
        assert objects
        early = [r.name for r in objects if not (p.waits_for(r, agent.urn) and p.waits_for(r, system.urn))]
        assert not early, f"created before the system nodes or the Pod Identity agent: {early}"

    def test_pods_that_resolve_names_wait_for_coredns(self, program_for: Any, stack: str, variant: str) -> None:
        """A pod resolves every name (a Service, etcd, S3, a dataset's URL) through CoreDNS, which runs only once the
        system nodes are up (source key ``eks-networking-add-ons``): every object that runs pods waits for the
        CoreDNS add-on, except the controllers that need no name (Kueue and the MPI Operator reach the API server by
        the kubernetes Service's address and are called by it; device plugins talk to the kubelet over a local
        socket; the FSx volume's ownership Job only changes its mount; a pre-pull's pods run a no-op). Those do not wait
        for it, so the queues can be made while CoreDNS starts."""
        p = program(program_for, stack, variant)
        coredns = p.one("aws:eks/addon:Addon", lambda r: r.inputs["addonName"] == DNS_ADDON)
        with_pods = [r for r in p.registrations if r.type in POD_RUNNING_TYPES]
        assert with_pods
        exempt, late = [], []
        for r in with_pods:
            owners = {a.type.rsplit(":", 1)[-1] for a in p.ancestors(r)}
            if owners & NO_DNS_COMPONENTS:
                exempt.append(r.name)
            elif not p.waits_for(r, coredns.urn):
                late.append(r.name)
        assert not late, f"pods that resolve names created before CoreDNS: {late}"
        assert exempt, "Kueue's release is among the exempt objects: the exemption is not vacuous"

    def test_gpu_nodes_carry_the_autoscalers_gpu_label_and_template_tag(
        self, program_for: Any, stack: str, variant: str
    ) -> None:
        """cluster-autoscaler's AWS provider treats nodes labelled k8s.amazonaws.com/accelerator as GPU nodes
        (it waits for their GPUs instead of judging them unready); at zero it reads the label from the ASG tag."""
        p = program(program_for, stack, variant)
        gpu_groups = 0
        for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
            facts = INSTANCE_TYPES[ng.inputs["instanceTypes"][0]]
            labels = ng.inputs.get("labels") or {}
            if not facts.is_gpu:
                assert AUTOSCALER_GPU_LABEL not in labels, ng.name
                continue
            gpu_groups += 1
            assert labels.get(AUTOSCALER_GPU_LABEL) == accelerator_label_value(facts.gpu_model), ng.name
            component = p.by_urn(ng.parent)
            tags = {
                t.inputs["tag"]["key"]: t.inputs["tag"]["value"]
                for t in p.descendants(component)
                if t.type == "aws:autoscaling/tag:Tag"
            }
            if tags:  # autoscaled groups: the node template at zero carries the label too
                assert (
                    tags[f"k8s.io/cluster-autoscaler/node-template/label/{AUTOSCALER_GPU_LABEL}"]
                    == labels[AUTOSCALER_GPU_LABEL]
                )
        gpu_in_config = any(
            INSTANCE_TYPES[g["instanceTypes"][0]].is_gpu
            for g in (_config(stack, variant).get(P + "nodeGroups") or {}).values()
        )
        assert (gpu_groups > 0) == gpu_in_config

    def test_control_plane_subnets_avoid_zones_eks_refuses(self, program_for: Any, stack: str, variant: str) -> None:
        """EKS refuses control-plane subnets in some zone IDs (https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html)."""
        p = program(program_for, stack, variant)
        cluster = p.one("eks:index:Cluster")
        subnets = {r.outputs.get("id") or r.id: r for r in p.of_type("aws:ec2/subnet:Subnet")}
        if not subnets:
            return  # an existing VPC: filtered by zone ID through aws.ec2.getSubnet (see the variant test below)
        zone_ids = dict(zip(ZONES, ZONE_IDS)) if variant == "shipped" else {}
        for sid in cluster.inputs["privateSubnetIds"]:
            az = subnets[sid].inputs["availabilityZone"]
            assert zone_ids.get(az) not in EKS_UNSUPPORTED_ZONE_IDS, f"{az} is {zone_ids.get(az)}"


def test_a_zone_eks_refuses_keeps_its_nodes_but_not_the_control_plane() -> None:
    """A group pinned to us-east-1e (use1-az3 in the mocked account) gets its subnet there; the cluster's
    control-plane subnets leave it out and cover two other zones."""
    cfg = dict(stack_config("dev"))
    cfg[P + "network"] = {"availabilityZoneCount": 2, "natGateways": "single"}
    groups = dict(cfg[P + "nodeGroups"])
    groups["cpu"] = {**groups["cpu"], "availabilityZone": "use1-az3"}
    cfg[P + "nodeGroups"] = groups
    p = run_program("dev", config=cfg)
    assert p.error is None, p.error
    subnets = {
        r.id: r.inputs["availabilityZone"]
        for r in p.of_type("aws:ec2/subnet:Subnet")
        if r.inputs.get("mapPublicIpOnLaunch") is False
    }
    assert "us-east-1e" in subnets.values()
    control = [subnets[s] for s in p.one("eks:index:Cluster").inputs["privateSubnetIds"]]
    assert "us-east-1e" not in control and len(control) == 2
    cpu = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: "-cpu" in r.name)
    assert [subnets[s] for s in cpu.inputs["subnetIds"]] == ["us-east-1e"]


def test_existing_vpc_subnets_in_refused_zones_stay_out_of_the_control_plane() -> None:
    cfg = dict(stack_config("dev"))
    cfg.pop(P + "network")
    mocks = TrainingMocks(False)
    candidates = [f"subnet-{i:02x}{'a' * 15}" for i in range(256)]
    refused = [c for c in candidates if mocks.subnet_zone(c)[1] in EKS_UNSUPPORTED_ZONE_IDS]
    accepted = [c for c in candidates if mocks.subnet_zone(c)[1] not in EKS_UNSUPPORTED_ZONE_IDS]
    private = [accepted[0], refused[0], accepted[1]]
    cfg[P + "existingVpc"] = {"vpcId": "vpc-0123456789abcdef0", "privateSubnetIds": private, "publicSubnetIds": []}
    p = run_program("dev", config=cfg)
    assert p.error is None, p.error
    looked_up = {a["id"] for t, a in p.invokes if t == "aws:ec2/getSubnet:getSubnet"}
    assert looked_up == set(private)
    assert p.one("eks:index:Cluster").inputs["privateSubnetIds"] == [accepted[0], accepted[1]]


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_every_kubernetes_version_gets_its_own_autoscaler(version: str) -> None:
    """The cluster-autoscaler release follows the cluster's minor: chart and image of that row of the catalog."""
    cfg = dict(stack_config("dev"))
    cfg[P + "cluster"] = {"kubernetesVersion": version, "extendedSupport": not in_standard_support(version, today())}
    p = run_program("dev", config=cfg)
    assert p.error is None, p.error
    release = p.one("kubernetes:helm.sh/v3:Release", lambda r: r.inputs.get("chart") == "cluster-autoscaler")
    row = CLUSTER_AUTOSCALER[version]
    assert release.inputs["version"] == row.chart.version
    image = release.inputs["values"]["image"]
    assert f"{image['repository']}:{image['tag']}" == row.image.ref
    # extended support is priced when chosen
    extended = cfg[P + "cluster"]["extendedSupport"]
    assert p.one("eks:index:Cluster").inputs["upgradePolicy"]["supportType"] == ("EXTENDED" if extended else "STANDARD")


def _estimate(stack: str, **sections: Any) -> CostEstimate:
    cfg = {**stack_config(stack), **{P + k: v for k, v in sections.items()}}
    return estimate(build_plan(load_config(PROJECT, stack, cfg)))


def test_extended_support_is_priced() -> None:
    standard = _estimate("dev")
    extended = _estimate("dev", cluster={"kubernetesVersion": "1.33", "extendedSupport": True})
    assert standard.running is not None and extended.running is not None
    diff = SERVICE_PRICES["eks-cluster-extended"].usd - SERVICE_PRICES["eks-cluster"].usd
    assert round(extended.running - standard.running, 3) == round(diff, 3)
