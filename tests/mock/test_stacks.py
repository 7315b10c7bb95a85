"""The real program, evaluated under mocks for every Pulumi.<stack>.yaml, in update and preview mode."""

import json
from typing import Any

import pytest

from components.catalog import AMI_TYPES, DEFAULT_KUBERNETES_VERSION, HELM_CHARTS, INSTANCE_TYPES
from components.catalog.operations import NODE_MONITORING_ADDON, OBSERVABILITY_ADDON
from components.cluster import NODE_ADDONS
from components.scheduling import GPU_LABEL, GPU_TAINT, NODE_ROLE_LABEL
from tests.harness import (
    ACCOUNT,
    PROJECT,
    UNKNOWN,
    Program,
    contains_unknown,
    resolve,
    run_program,
    stack_config,
    stack_names,
)

STACKS = stack_names()
MODES = [False, True]
OURS = "eks-training:index:"


def test_every_shipped_stack_is_covered() -> None:
    assert {"dev", "workshop", "g5"} <= set(STACKS), STACKS


def _cfg(stack: str, key: str) -> Any:
    return stack_config(stack).get(f"{PROJECT}:{key}")


def _worker_groups(stack: str) -> dict[str, Any]:
    return dict(_cfg(stack, "nodeGroups") or {})


def _backend(stack: str) -> str:
    return (_cfg(stack, "storage") or {}).get("backend", "efs")


STORAGE_COMPONENT = {"efs": "EfsStorage", "fsx": "FsxLustreStorage"}
STORAGE_ADDON = {"efs": "aws-efs-csi-driver", "fsx": "aws-fsx-csi-driver"}


def _known(value: Any) -> bool:
    return value is not None and value != UNKNOWN


@pytest.mark.parametrize("preview", MODES)
@pytest.mark.parametrize("stack", STACKS)
class TestStack:
    def test_backbone_components(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        for t in ("TrainingVpc", "TrainingCluster", STORAGE_COMPONENT[_backend(stack)]):
            assert len(p.of_type(OURS + t)) == 1, t
        other = {"efs": "fsx", "fsx": "efs"}[_backend(stack)]
        assert not p.of_type(OURS + STORAGE_COMPONENT[other]), "one shared file system per stack"
        # the system group plus one per configured worker group
        assert len(p.of_type(OURS + "TrainingNodeGroup")) == 1 + len(_worker_groups(stack))
        assert len(p.of_type("eks:index:Cluster")) == 1
        assert p.one("eks:index:Cluster").remote, "pulumi-eks Cluster is a remote component"

    def test_every_child_is_parented_and_named_after_its_component(
        self, program_for, stack: str, preview: bool
    ) -> None:
        p: Program = program_for(stack, preview)
        for r in p.registrations:
            if r.type.startswith("pulumi:providers:"):
                continue
            if r.type.startswith(OURS) and not r.parent.split("::")[2].startswith(OURS.rstrip(":").split(":")[0]):
                continue  # a top-level component of the stack
            parent = p.by_urn(r.parent)
            assert parent.type.startswith(OURS), f"{r.type} {r.name} has non-component parent {parent.type}"
            assert r.name.startswith(parent.name + "-"), f"{r.name} not named after parent {parent.name}"

    def test_subnets_per_zone_with_eks_tags(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        net = _cfg(stack, "network") or {}
        zones = net.get("availabilityZoneCount", 3)
        subnets = p.of_type("aws:ec2/subnet:Subnet")
        assert len(subnets) == 2 * zones
        cluster = p.one("eks:index:Cluster").inputs["name"]
        by_zone: dict[str, list[str]] = {}
        for s in subnets:
            tags = s.inputs["tags"]
            tier = tags["eks-training/tier"]
            by_zone.setdefault(s.inputs["availabilityZone"], []).append(tier)
            assert tags[f"kubernetes.io/cluster/{cluster}"] == "shared"
            assert s.inputs["mapPublicIpOnLaunch"] is False
            if tier == "public":
                assert tags["kubernetes.io/role/elb"] == "1"
            else:
                assert tags["kubernetes.io/role/internal-elb"] == "1"
        assert len(by_zone) == zones
        assert all(sorted(v) == ["private", "public"] for v in by_zone.values())
        assert len(p.of_type("aws:ec2/natGateway:NatGateway")) == (zones if net.get("natGateways") == "perAz" else 1)

    def test_nodes_only_in_private_subnets(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        subnets = p.of_type("aws:ec2/subnet:Subnet")
        private = {s.urn for s in subnets if s.inputs["tags"]["eks-training/tier"] == "private"}
        public = {s.urn for s in subnets if s.inputs["tags"]["eks-training/tier"] == "public"}
        groups = _worker_groups(stack)
        for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
            deps = set(ng.deps_of("subnetIds"))
            assert deps and deps <= private, ng.name
            assert not deps & public
            zone = (groups.get(ng.inputs["labels"][NODE_ROLE_LABEL]) or {}).get("availabilityZone")
            if zone:
                # pinned groups (EFA, reservations) use exactly the private subnet of their zone
                (only,) = deps
                assert p.by_urn(only).inputs["availabilityZone"] == zone
            else:
                assert deps == private
            if not preview:
                ids = {s.id for s in subnets if s.urn in deps}
                assert set(ng.inputs["subnetIds"]) == ids
            else:
                assert contains_unknown(ng.inputs["subnetIds"]), "preview must not know subnet ids"
        cluster = p.one("eks:index:Cluster")
        assert cluster.inputs["nodeAssociatePublicIpAddress"] is False
        assert set(cluster.deps_of("privateSubnetIds")) == private

    def test_node_groups_follow_config_and_catalog(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        groups = _worker_groups(stack)
        for gname, g in groups.items():
            ng = p.one(
                "aws:eks/nodeGroup:NodeGroup", lambda r, gname=gname: r.inputs["labels"][NODE_ROLE_LABEL] == gname
            )
            facts = INSTANCE_TYPES[g["instanceTypes"][0]]
            assert ng.inputs["instanceTypes"] == g["instanceTypes"]
            assert ng.inputs["scalingConfig"] == {
                "minSize": g["minSize"],
                "desiredSize": g["desiredSize"],
                "maxSize": g["maxSize"],
            }
            assert ng.inputs["capacityType"] == g.get("capacityType", "ON_DEMAND")
            gpu_taint = {"key": GPU_TAINT["key"], "value": GPU_TAINT["value"], "effect": "NO_SCHEDULE"}
            if facts.gpus:
                assert ng.inputs["amiType"] == AMI_TYPES["nvidia"]
                assert gpu_taint in ng.inputs["taints"]
                assert ng.inputs["labels"][GPU_LABEL[0]] == GPU_LABEL[1]
            else:
                assert ng.inputs["amiType"] == AMI_TYPES["cpu"]
                assert gpu_taint not in (ng.inputs.get("taints") or [])
                assert GPU_LABEL[0] not in ng.inputs["labels"]
        system = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"][NODE_ROLE_LABEL] == "system")
        assert system.inputs["capacityType"] == "ON_DEMAND"
        assert system.inputs["amiType"] == AMI_TYPES["cpu"]
        assert not system.inputs.get("taints")

    def test_imdsv2_and_encrypted_disks_on_every_node(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        lts = p.of_type("aws:ec2/launchTemplate:LaunchTemplate")
        assert len(lts) == len(p.of_type("aws:eks/nodeGroup:NodeGroup"))
        for lt in lts:
            assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
            assert lt.inputs["metadataOptions"]["httpEndpoint"] == "enabled"
            ebs = lt.inputs["blockDeviceMappings"][0]["ebs"]
            assert ebs["encrypted"] == "true" and ebs["volumeType"] == "gp3"
            assert "keyName" not in lt.inputs, "no SSH key pairs on nodes"
            assert "networkInterfaces" not in lt.inputs or all(
                not ni.get("associatePublicIpAddress") for ni in lt.inputs["networkInterfaces"]
            )
        for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
            assert "remoteAccess" not in ng.inputs
            lt = p.by_urn(ng.deps_of("launchTemplate")[0])
            assert lt.type == "aws:ec2/launchTemplate:LaunchTemplate"

    def test_gpu_stacks_install_the_pinned_device_plugin(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        gpu_groups = [g for g, v in _worker_groups(stack).items() if INSTANCE_TYPES[v["instanceTypes"][0]].gpus]
        releases = p.of_type("kubernetes:helm.sh/v3:Release")
        plugin = [r for r in releases if r.inputs["chart"] == "nvidia-device-plugin"]
        if not gpu_groups:
            assert not plugin, "no device plugin on CPU-only stacks"
            return
        (rel,) = plugin
        chart = HELM_CHARTS["nvidia-device-plugin"]
        assert rel.inputs["version"] == chart.version
        assert rel.inputs["repositoryOpts"]["repo"] == chart.repo
        # which nodes it runs on, whatever their taints: tests/mock/test_device_plugins.py
        # The release talks to the cluster through the stack's Kubernetes provider.
        assert rel.provider.split("::")[0].startswith("urn:pulumi:") and "pulumi:providers:kubernetes" in rel.provider

    def test_efs_mount_target_per_private_subnet_and_nfs_only_from_nodes(
        self, program_for, stack: str, preview: bool
    ) -> None:
        p: Program = program_for(stack, preview)
        if _backend(stack) == "fsx":
            assert not p.of_type("aws:efs/fileSystem:FileSystem") and not p.of_type("aws:efs/mountTarget:MountTarget")
            return  # FSx: tests/mock/test_storage_fsx.py
        private = {
            s.urn for s in p.of_type("aws:ec2/subnet:Subnet") if s.inputs["tags"]["eks-training/tier"] == "private"
        }
        mts = p.of_type("aws:efs/mountTarget:MountTarget")
        assert len(mts) == len(private)
        seen = set()
        fs = p.one("aws:efs/fileSystem:FileSystem")
        assert fs.inputs["encrypted"] is True
        for mt in mts:
            (subnet,) = mt.deps_of("subnetId")
            assert subnet in private
            seen.add(subnet)
            assert mt.deps_of("fileSystemId") == [fs.urn]
        assert seen == private
        sg = p.one("aws:ec2/securityGroup:SecurityGroup", lambda r: "nfs" in r.name)
        assert "ingress" not in sg.inputs, "rules are separate resources, not inline"
        rules = [
            r
            for r in p.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
            if sg.urn in r.deps_of("securityGroupId")
        ]
        assert len(rules) == 1
        (rule,) = rules
        assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("tcp", 2049, 2049)
        assert "cidrIpv4" not in rule.inputs
        assert rule.deps_of("referencedSecurityGroupId") == [p.one("eks:index:Cluster").urn]
        for mt in mts:
            assert mt.deps_of("securityGroups") == [sg.urn]

    def test_efs_csi_driver_has_its_own_scoped_role(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        if _backend(stack) == "fsx":
            assert not [a for a in p.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-efs-csi-driver"]
            return  # the FSx CSI driver's role: tests/mock/test_storage_fsx.py
        addon = p.one("aws:eks/addon:Addon", lambda r: r.inputs["addonName"] == "aws-efs-csi-driver")
        role = p.one("aws:iam/role:Role", lambda r: r.name.endswith("-csi-role"))
        (assoc,) = addon.inputs["podIdentityAssociations"]
        assert assoc["serviceAccount"] == "efs-csi-controller-sa"
        assert role.urn in addon.deps_of("podIdentityAssociations")
        attached = [
            a for a in p.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if role.urn in a.deps_of("role")
        ]
        assert [a.inputs["policyArn"] for a in attached] == [
            "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
        ]
        node_role = p.one("aws:iam/role:Role", lambda r: r.name.endswith("-node-role"))
        node_policies = [
            a.inputs["policyArn"]
            for a in p.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            if node_role.urn in a.deps_of("role")
        ]
        assert not any("EFS" in arn for arn in node_policies), "the node role must not carry EFS permissions"
        if preview:
            return  # the trust policy needs the caller's account id; checked in update mode
        trust = json.loads(role.inputs["assumeRolePolicy"])
        (stmt,) = trust["Statement"]
        assert stmt["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        cond = stmt["Condition"]["StringEquals"]
        assert cond["aws:RequestTag/kubernetes-namespace"] == "kube-system"
        assert cond["aws:RequestTag/kubernetes-service-account"] == ["efs-csi-controller-sa"]
        assert cond["aws:RequestTag/eks-cluster-name"] == p.one("eks:index:Cluster").inputs["name"]
        assert cond["aws:SourceAccount"] == ACCOUNT

    def test_storage_class_and_rwx_claim(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        if _backend(stack) == "fsx":
            assert not p.of_type("kubernetes:storage.k8s.io/v1:StorageClass"), "FSx uses a static volume"
            return  # the static volume and its claim: tests/mock/test_storage_fsx.py
        sc = p.one("kubernetes:storage.k8s.io/v1:StorageClass")
        pvc = p.one("kubernetes:core/v1:PersistentVolumeClaim")
        ns = p.one("kubernetes:core/v1:Namespace")
        storage = _cfg(stack, "storage") or {}
        assert sc.inputs["provisioner"] == "efs.csi.aws.com"
        assert sc.deps_of("parameters") == [p.one("aws:efs/fileSystem:FileSystem").urn]
        assert pvc.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
        assert pvc.deps_of("metadata") == [ns.urn]
        assert pvc.deps_of("spec") == [sc.urn]
        assert ns.inputs["metadata"]["name"] == storage.get("namespace", "training")
        # Kubernetes objects wait for the cluster (dependency on the component) and use its provider.
        for r in (sc, pvc, ns):
            assert "pulumi:providers:kubernetes" in r.provider
            assert p.depends_transitively(r, p.one("eks:index:Cluster").urn)
        if not preview:
            assert pvc.inputs["metadata"]["namespace"] == ns.inputs["metadata"]["name"]

    def test_cluster_control_plane_settings(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        c = p.one("eks:index:Cluster").inputs
        cluster_cfg = _cfg(stack, "cluster") or {}
        assert c["authenticationMode"] == "API"
        assert c["endpointPrivateAccess"] is True
        assert c["skipDefaultNodeGroup"] is True
        assert c["bootstrapSelfManagedAddons"] is False
        assert c["version"] == cluster_cfg.get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION)
        assert set(c["enabledClusterLogTypes"]) >= {"api", "audit", "authenticator"}
        key = p.one("aws:kms/key:Key")
        assert key.inputs["enableKeyRotation"] is True
        assert p.one("eks:index:Cluster").deps_of("encryptionConfigKeyArn") == [key.urn]
        addons = {a.inputs["addonName"]: a for a in p.of_type("aws:eks/addon:Addon")}
        # GPU stacks collect GPU and EFA metrics by default (operations.metrics)
        gpu = any(ng.inputs.get("amiType") == AMI_TYPES["nvidia"] for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"))
        metrics = {OBSERVABILITY_ADDON} if (_cfg(stack, "operations") or {}).get("metrics", gpu) else set()
        assert set(addons) == {
            "vpc-cni",
            "kube-proxy",
            "coredns",
            "eks-pod-identity-agent",
            "metrics-server",
            NODE_MONITORING_ADDON,
            STORAGE_ADDON[_backend(stack)],
            *metrics,
        }
        system_ng = p.one(OURS + "TrainingNodeGroup", lambda r: r.name.endswith("-system"))
        system_eks_ng = next(c for c in p.children(system_ng) if c.type == "aws:eks/nodeGroup:NodeGroup")
        for late in ("coredns", "metrics-server", NODE_MONITORING_ADDON, STORAGE_ADDON[_backend(stack)], *metrics):
            # An add-on whose Deployment has no node stays DEGRADED (source key eksctl-addon-degraded-without-nodes).
            assert p.waits_for(addons[late], system_eks_ng.urn), f"{late} must wait for the system nodes"
            if addons[late].inputs.get("podIdentityAssociations"):
                # its controller takes a Pod Identity role: the agent serves it (source key eks-pod-identity-agent)
                assert p.waits_for(addons[late], addons["eks-pod-identity-agent"].urn), late
        for early in NODE_ADDONS:
            # no node becomes Ready without the CNI and kube-proxy (source keys eks-networking-add-ons,
            # tf-eks-addons-before-compute)
            for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
                assert addons[early].urn in ng.deps_of("clusterName"), f"{ng.name} must wait for {early}"
        if not preview:
            assert addons["coredns"].inputs["addonVersion"].startswith("v")

    def test_outputs(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        for key in (
            "clusterName",
            "kubeconfig",
            "vpcId",
            "privateSubnetIds",
            "publicSubnetIds",
            "nodeGroupNames",
            "pvcName",
            "pvcNamespace",
            "updateKubeconfigCommand",
            "storageBackend",
            "fileSystemId",
            "datasetRoot",
        ):
            assert key in p.outputs, key
        assert resolve(p.outputs["storageBackend"]) == _backend(stack)
        assert ("efsFileSystemId" in p.outputs) == (_backend(stack) == "efs")
        assert "kubeconfig" in p.secret_outputs and "clusterName" not in p.secret_outputs
        if preview:
            return
        name = p.one("eks:index:Cluster").inputs["name"]
        assert resolve(p.outputs["clusterName"]) == name
        assert (
            resolve(p.outputs["updateKubeconfigCommand"])
            == f"aws eks update-kubeconfig --region us-east-1 --name {name} --alias {name}"
        )
        storage = _cfg(stack, "storage") or {}
        assert resolve(p.outputs["pvcName"]) == storage.get("pvcName", "shared-data")
        fs_type = {"efs": "aws:efs/fileSystem:FileSystem", "fsx": "aws:fsx/lustreFileSystem:LustreFileSystem"}[
            _backend(stack)
        ]
        assert resolve(p.outputs["fileSystemId"]) == p.one(fs_type).id
        assert len(resolve(p.outputs["nodeGroupNames"])) == 1 + len(_worker_groups(stack))
        private = [
            s.id for s in p.of_type("aws:ec2/subnet:Subnet") if s.inputs["tags"]["eks-training/tier"] == "private"
        ]
        assert sorted(resolve(p.outputs["privateSubnetIds"])) == sorted(private)


def _plain(o: Any) -> str:
    """Assets compare by their path, anything else by its string form."""
    return f"{type(o).__name__}:{getattr(o, 'path', o)}"


@pytest.mark.parametrize("stack", STACKS)
def test_program_is_deterministic(program_for, stack: str) -> None:
    a = program_for(stack, False)
    b = run_program(stack, fresh=True)

    def fingerprint(p: Program) -> list[tuple[str, str, str, str]]:
        return [
            (r.type, r.name, r.parent, json.dumps(r.inputs, sort_keys=True, default=_plain)) for r in p.registrations
        ]

    assert sorted(fingerprint(a)) == sorted(fingerprint(b))


def _with(stack: str, **changes: Any) -> dict[str, Any]:
    cfg = stack_config(stack)
    for k, v in changes.items():
        cfg[f"{PROJECT}:{k}"] = v
    return cfg


def test_retained_storage_keeps_only_the_file_system() -> None:
    p = run_program("dev", config=_with("dev", storage={"retainOnDelete": True}))
    assert p.one("aws:efs/fileSystem:FileSystem").retain_on_delete is True
    for mt in p.of_type("aws:efs/mountTarget:MountTarget"):
        assert not mt.retain_on_delete, "mount targets must go so the VPC can be deleted"
    default = run_program("dev")
    assert not default.one("aws:efs/fileSystem:FileSystem").retain_on_delete


def test_kept_file_system_is_adopted_by_id() -> None:
    p = run_program("dev", config=_with("dev", storage={"fileSystemId": "fs-0123456789abcdef0"}))
    assert not p.of_type("aws:efs/fileSystem:FileSystem")
    for mt in p.of_type("aws:efs/mountTarget:MountTarget"):
        assert mt.inputs["fileSystemId"] == "fs-0123456789abcdef0"
    assert (
        p.one("kubernetes:storage.k8s.io/v1:StorageClass").inputs["parameters"]["fileSystemId"]
        == "fs-0123456789abcdef0"
    )


def test_existing_vpc_creates_no_network() -> None:
    cfg = _with(
        "dev",
        existingVpc={
            "vpcId": "vpc-0abc1234def567890",
            "privateSubnetIds": ["subnet-0aaa1111bbbb22223", "subnet-0ccc3333dddd44445", "subnet-0eee5555ffff66667"],
            "publicSubnetIds": ["subnet-0111222233334444a"],
        },
    )
    del cfg[f"{PROJECT}:network"]
    p = run_program("dev", config=cfg)
    assert not p.of_type(OURS + "TrainingVpc")
    assert not p.of_type("aws:ec2/subnet:Subnet") and not p.of_type("aws:ec2/vpc:Vpc")
    assert not [t for t, _ in p.invokes if t == "aws:index/getAvailabilityZones:getAvailabilityZones"]
    for ng in p.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert ng.inputs["subnetIds"] == [
            "subnet-0aaa1111bbbb22223",
            "subnet-0ccc3333dddd44445",
            "subnet-0eee5555ffff66667",
        ]
    assert sorted(mt.inputs["subnetId"] for mt in p.of_type("aws:efs/mountTarget:MountTarget")) == sorted(
        ["subnet-0aaa1111bbbb22223", "subnet-0ccc3333dddd44445", "subnet-0eee5555ffff66667"]
    )
    assert p.one("eks:index:Cluster").inputs["vpcId"] == "vpc-0abc1234def567890"
    # no zones of its own to keep: the VPC is not the stack's
    assert "vpcZones" not in p.outputs


def test_admin_roles_get_access_entries_and_nat_per_zone() -> None:
    arn = "arn:aws:iam::123456789012:role/PlatformAdmins"
    p = run_program(
        "workshop",
        config=_with(
            "workshop",
            cluster={"adminRoleArns": [arn], "publicAccessCidrs": ["203.0.113.0/24"]},
            network={"natGateways": "perAz"},
        ),
    )
    c = p.one("eks:index:Cluster").inputs
    (entry,) = c["accessEntries"].values()
    assert entry["principalArn"] == arn
    (policy,) = entry["accessPolicies"].values()
    assert policy["policyArn"].endswith("AmazonEKSClusterAdminPolicy") and policy["accessScope"] == {"type": "cluster"}
    assert c["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert len(p.of_type("aws:ec2/natGateway:NatGateway")) == 3
    rts = [r for r in p.of_type("aws:ec2/routeTable:RouteTable") if "private" in r.name]
    nat_deps = {tuple(r.deps_of("routes")) for r in rts}
    assert len(nat_deps) == 3, "each private route table uses its own zone's NAT gateway"


def test_gpu_group_from_user_supplied_facts() -> None:
    facts = {
        "vcpus": 8,
        "memoryMib": 32768,
        "gpus": 1,
        "gpuModel": "NVIDIA L4",
        "gpuMemoryMib": 22888,
        "source": "EC2 DescribeInstanceTypes, 2026-11",
    }
    cfg = _with(
        "dev",
        instanceFacts={"g6.2xlarge": facts},
        nodeGroups={
            **_worker_groups("dev"),
            "gpu": {"instanceTypes": ["g6.2xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1},
        },
    )
    p = run_program("dev", config=cfg)
    ng = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"][NODE_ROLE_LABEL] == "gpu")
    assert ng.inputs["amiType"] == AMI_TYPES["nvidia"]
    assert [
        r.inputs["chart"]
        for r in p.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == "nvidia-device-plugin"
    ]


def test_kubeconfig_is_secret_output_type() -> None:
    p = run_program("dev")
    assert "kubeconfig" in p.secret_outputs and p.outputs["kubeconfig"]
