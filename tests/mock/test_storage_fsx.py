"""FSx for Lustre as the shared file system, under mocks, for every stack whose ``storage.backend`` is fsx
(the p4d/p5/p5en/p6-b200 presets), plus variants of the p5 stack (EFA file system, a named bucket, a kept
and an adopted file system, an existing VPC).

What is checked is what the program registers: the file system's arguments against the rules of the API
and the provider (capacity increments per tier, throughput values, one subnet given as one string, paths),
the subnet equal to the GPU group's, the Lustre security group's ports, the data repository associations'
paths and policies, the CSI add-on with its own role and policy, the static volume wired from the file
system's outputs, the claim mounted by every job, and the dependencies that order ``pulumi destroy``.
"""

import json
import re
from typing import Any

import pytest

from components.catalog import (
    FSX_CSI_CONTROLLER_SA,
    FSX_DRA_EVENTS,
    FSX_METADATA_IOPS,
    FSX_THROUGHPUT_TIERS,
    fsx_capacity_problem,
)
from components.catalog.timings import FSX_IMPORT_ASSOCIATION_WAIT, FSX_UPDATE_WAIT
from components.iam import fsx_csi_static_controller_policy
from components.scheduling import NODE_ROLE_LABEL
from stacks.box.awaits import go_duration_s
from stacks.config import ConfigError
from tests.harness import (
    ACCOUNT,
    PROJECT,
    Program,
    Registration,
    contains_unknown,
    resolve,
    run_program,
    stack_config,
    stack_names,
)

FSX_STACKS = [s for s in stack_names() if (stack_config(s).get(f"{PROJECT}:storage") or {}).get("backend") == "fsx"]
MODES = [False, True]
FS = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
JOB = "kubernetes:batch/v1:Job"
#: terraform-provider-aws's default wait for a data repository association (internal/service/fsx), in minutes.
PROVIDER_DRA_WAIT_MINUTES = 10
#: What the provider (terraform-provider-aws internal/service/fsx) accepts, independently of the catalog.
PROVIDER_THROUGHPUT = {12, 40, 50, 100, 125, 200, 250, 500, 1000}
PROVIDER_S3_PATH = re.compile(r"^s3://.{1,897}$")
PROVIDER_FS_PATH = re.compile(r"^/.{0,4095}$")


def test_the_large_gpu_presets_use_fsx_and_the_others_efs() -> None:
    assert FSX_STACKS == ["p4d", "p5", "p5en", "p6-b200"]
    for stack in set(stack_names()) - set(FSX_STACKS):
        assert (stack_config(stack).get(f"{PROJECT}:storage") or {}).get("backend", "efs") == "efs", stack


def _fsx_cfg(stack: str) -> dict[str, Any]:
    return dict(stack_config(stack)[f"{PROJECT}:storage"]["fsx"])


def _gpu_group(stack: str) -> str:
    """The worker group the stack's jobs run on (the one whose zone the file system follows)."""
    jobs = stack_config(stack)[f"{PROJECT}:jobs"].values()
    (group,) = {j["nodeGroup"] for j in jobs if j.get("nodeGroup", "system") != "system"}
    return str(group)


def _sg(p: Program) -> Registration:
    return p.one("aws:ec2/securityGroup:SecurityGroup", lambda r: r.name.endswith("-lustre-sg"))


def _rules(p: Program, kind: str, group_urn: str) -> list[Registration]:
    return [r for r in p.of_type(kind) if group_urn in r.deps_of("securityGroupId")]


def _ports(rules: list[Registration]) -> set[tuple[str, Any, Any]]:
    return {(r.inputs["ipProtocol"], r.inputs.get("fromPort"), r.inputs.get("toPort")) for r in rules}


LUSTRE = {("tcp", 988, 988), ("tcp", 1018, 1023)}


@pytest.mark.parametrize("preview", MODES)
@pytest.mark.parametrize("stack", FSX_STACKS)
class TestFsxStack:
    def test_file_system_arguments_follow_the_api_rules(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        fs = p.one(FS)
        want = _fsx_cfg(stack)
        i = fs.inputs
        assert (i["deploymentType"], i["storageType"], i["fileSystemTypeVersion"]) == ("PERSISTENT_2", "SSD", "2.15")
        assert i["dataCompressionType"] == "LZ4"
        assert i["storageCapacity"] == want["storageCapacityGib"]
        assert i["perUnitStorageThroughput"] == want["throughputPerTib"]
        assert (
            i["perUnitStorageThroughput"] in PROVIDER_THROUGHPUT
            and i["perUnitStorageThroughput"] in FSX_THROUGHPUT_TIERS
        )
        assert i["storageCapacity"] >= 1200, "the provider's minimum"
        assert fsx_capacity_problem(i["storageCapacity"], i["perUnitStorageThroughput"], bool(i["efaEnabled"])) is None
        assert i["metadataConfiguration"] == {"mode": "AUTOMATIC"}
        assert i["efaEnabled"] is False
        for unsupported in ("importPath", "exportPath", "autoImportPolicy", "importedFileChunkSize"):
            assert unsupported not in i, f"{unsupported} is not supported on PERSISTENT_2 (use an association)"
        key = p.one("aws:kms/key:Key")
        assert fs.deps_of("kmsKeyId") == [key.urn], "encrypted with the stack's KMS key"
        if not preview:
            assert isinstance(i["subnetIds"], str), "pulumi-aws 7 takes the one subnet as a string"
            assert i["kmsKeyId"] == key.outputs["arn"]
            assert fs.outputs["dnsName"] == f"{fs.id}.fsx.us-east-1.amazonaws.com"

    def test_one_subnet_equal_to_the_gpu_groups(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        fs = p.one(FS)
        group = _gpu_group(stack)
        ng = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"][NODE_ROLE_LABEL] == group)
        (subnet,) = fs.deps_of("subnetIds")
        assert ng.deps_of("subnetIds") == [subnet]
        zone = stack_config(stack)[f"{PROJECT}:nodeGroups"][group]["availabilityZone"]
        assert p.by_urn(subnet).inputs["availabilityZone"] == zone
        assert p.by_urn(subnet).inputs["tags"]["eks-training/tier"] == "private"
        if not preview:
            assert [fs.inputs["subnetIds"]] == ng.inputs["subnetIds"]

    def test_security_group_allows_lustre_from_itself_and_the_nodes(
        self, program_for, stack: str, preview: bool
    ) -> None:
        p: Program = program_for(stack, preview)
        fs, sg = p.one(FS), _sg(p)
        assert fs.deps_of("securityGroupIds") == [sg.urn]
        assert "ingress" not in sg.inputs and "egress" not in sg.inputs, "rules are separate resources"
        nodes_sg = p.one("eks:index:Cluster").urn  # the cluster security group every node carries
        ingress, egress = _rules(p, INGRESS, sg.urn), _rules(p, EGRESS, sg.urn)
        for rules in (ingress, egress):
            from_self = [r for r in rules if r.deps_of("referencedSecurityGroupId") == [sg.urn]]
            from_nodes = [r for r in rules if r.deps_of("referencedSecurityGroupId") == [nodes_sg]]
            assert _ports(from_self) == LUSTRE and _ports(from_nodes) == LUSTRE
            assert len(rules) == 4 and not any("cidrIpv4" in r.inputs for r in rules)
        on_nodes = [
            r
            for r in p.of_type(INGRESS)
            if r.deps_of("referencedSecurityGroupId") == [sg.urn] and sg.urn not in r.deps_of("securityGroupId")
        ]
        assert _ports(on_nodes) == LUSTRE and all(r.deps_of("securityGroupId") == [nodes_sg] for r in on_nodes)
        assert not [r for r in ingress + egress if r.inputs["ipProtocol"] == "-1"], "all-traffic rules only for EFA"
        # FSx checks, when it creates the file system, that its group admits Lustre from itself ("Creating an FSx for
        # Lustre file system fails", source key fsx-efa-security-group): those rules come first. The rules with the
        # cluster's node group, which no creation check reads, are not waited for (the cluster takes ten minutes to
        # make that group: the file system is built meanwhile), but every pod mounts through the volume, which waits
        # for all of them.
        volume = p.one("kubernetes:core/v1:PersistentVolume")
        for rule in ingress + egress + on_nodes:
            assert rule.urn in volume.dependencies, "every rule exists before a pod can mount the file system"
            with_nodes = nodes_sg in rule.deps_of("referencedSecurityGroupId") + rule.deps_of("securityGroupId")
            assert (rule.urn in fs.dependencies) == (not with_nodes), rule.name
        assert not p.depends_transitively(fs, nodes_sg), "the file system does not wait for the EKS cluster"

    def test_data_repository_associations(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        fs = p.one(FS)
        bucket = p.one("aws:s3/bucket:Bucket", lambda r: r.name.endswith("-fsx-data"))
        datasets = p.one(DRA, lambda r: r.name.endswith("-datasets"))
        export = p.one(DRA, lambda r: r.name.endswith("-export"))
        assert datasets.inputs["fileSystemPath"] == "/datasets" and export.inputs["fileSystemPath"] == "/runs"
        assert datasets.inputs["s3"] == {"autoImportPolicy": {"events": list(FSX_DRA_EVENTS)}}
        assert export.inputs["s3"] == {"autoExportPolicy": {"events": list(FSX_DRA_EVENTS)}}
        assert datasets.inputs["batchImportMetaDataOnCreate"] is True, "objects already in S3 appear at once"
        # CREATING until the bucket's listing is imported: the provider's default wait would end first
        assert go_duration_s(datasets.custom_timeouts["create"]) == FSX_IMPORT_ASSOCIATION_WAIT.minutes * 60
        assert FSX_IMPORT_ASSOCIATION_WAIT.minutes > PROVIDER_DRA_WAIT_MINUTES
        assert "create" not in export.custom_timeouts, "an export association imports nothing"
        # a new throughput tier can keep the file system unavailable for up to an hour: more than the provider's wait
        assert go_duration_s(fs.custom_timeouts["update"]) == FSX_UPDATE_WAIT.minutes * 60 > 3600
        for dra in (datasets, export):
            assert dra.deps_of("fileSystemId") == [fs.urn]
            assert dra.deps_of("dataRepositoryPath") == [bucket.urn]
            assert dra.inputs["deleteDataInFilesystem"] is False
            assert PROVIDER_FS_PATH.match(dra.inputs["fileSystemPath"])
        if not preview:
            name = bucket.outputs["bucket"]
            assert datasets.inputs["dataRepositoryPath"] == f"s3://{name}/datasets/"
            assert export.inputs["dataRepositoryPath"] == f"s3://{name}/runs/"
            for dra in (datasets, export):
                assert PROVIDER_S3_PATH.match(dra.inputs["dataRepositoryPath"]) and dra.inputs["fileSystemId"] == fs.id
            assert resolve(p.outputs["fsxDataRepositoryPath"]) == f"s3://{name}/datasets/"
        else:
            assert contains_unknown(datasets.inputs["dataRepositoryPath"]), "an auto-named bucket is unknown in preview"

    def test_created_bucket_is_private_encrypted_and_versioned(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        bucket = p.one("aws:s3/bucket:Bucket", lambda r: r.name.endswith("-fsx-data"))
        assert "bucket" not in bucket.inputs, "auto-named: no placeholder name"

        def on_bucket(t: str) -> Registration:
            return p.one(t, lambda r: bucket.urn in r.deps_of("bucket"))

        assert on_bucket("aws:s3/bucketVersioning:BucketVersioning").inputs["versioningConfiguration"] == {
            "status": "Enabled"
        }
        sse = on_bucket("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
        assert sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
        pab = on_bucket("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
        assert all(
            pab[k] is True
            for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
        )
        if not preview:
            policy = json.loads(on_bucket("aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
            assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}

    def test_csi_add_on_has_its_own_least_privilege_role(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        addon = p.one("aws:eks/addon:Addon", lambda r: r.inputs["addonName"] == "aws-fsx-csi-driver")
        role = p.one("aws:iam/role:Role", lambda r: r.name.endswith("-fsx-csi-role"))
        (assoc,) = addon.inputs["podIdentityAssociations"]
        assert assoc["serviceAccount"] == FSX_CSI_CONTROLLER_SA
        assert role.urn in addon.deps_of("podIdentityAssociations")
        (policy,) = [r for r in p.of_type("aws:iam/rolePolicy:RolePolicy") if role.urn in r.deps_of("role")]
        assert json.loads(policy.inputs["policy"]) == json.loads(fsx_csi_static_controller_policy())
        assert policy.urn in addon.dependencies, "the policy is attached before the add-on starts the controller"
        statements = json.loads(policy.inputs["policy"])["Statement"]
        assert {a for s in statements for a in s["Action"]} == {"fsx:DescribeFileSystems"}
        attached = [
            a for a in p.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if role.urn in a.deps_of("role")
        ]
        assert attached == [], "no managed policy (AmazonFSxFullAccess) on the controller"
        system = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"][NODE_ROLE_LABEL] == "system")
        assert system.urn in addon.deps_of("clusterName"), "the controller's nodes exist before the add-on"
        if not preview:
            assert addon.inputs["addonVersion"].startswith("v")
            (stmt,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
            cond = stmt["Condition"]["StringEquals"]
            assert stmt["Principal"] == {"Service": "pods.eks.amazonaws.com"}
            assert cond["aws:RequestTag/kubernetes-namespace"] == "kube-system"
            assert cond["aws:RequestTag/kubernetes-service-account"] == [FSX_CSI_CONTROLLER_SA]
            assert cond["aws:SourceAccount"] == ACCOUNT

    def test_static_volume_is_wired_from_the_file_system(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        fs, pv, pvc = p.one(FS), p.one(PV), p.one(PVC)
        spec = pv.inputs["spec"]
        assert spec["csi"]["driver"] == "fsx.csi.aws.com"
        assert spec["mountOptions"] == ["flock"]
        assert spec["accessModes"] == ["ReadWriteMany"] and spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["storageClassName"] == "" and pvc.inputs["spec"]["storageClassName"] == ""
        assert spec["capacity"]["storage"] == f"{_fsx_cfg(stack)['storageCapacityGib']}Gi"
        assert spec["claimRef"] == {"namespace": "training", "name": "shared-data"}
        assert fs.urn in pv.deps_of("spec")
        assert pvc.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
        assert pvc.deps_of("spec") == [pv.urn]
        if preview:
            assert contains_unknown(spec["csi"]["volumeHandle"]) and contains_unknown(spec["csi"]["volumeAttributes"])
            return
        assert spec["csi"]["volumeHandle"] == fs.id
        assert spec["csi"]["volumeAttributes"] == {
            "dnsname": fs.outputs["dnsName"],
            "mountname": fs.outputs["mountName"],
        }
        assert pvc.inputs["spec"]["volumeName"] == pv.inputs["metadata"]["name"]

    def test_every_job_mounts_the_claim_after_the_data_is_linked(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        pvc, datasets = p.one(PVC), p.one(DRA, lambda r: r.name.endswith("-datasets"))
        jobs = p.of_type(JOB)
        assert len(jobs) == 5  # volume permissions, staging, health check, training, evaluation
        for job in jobs:
            pod = job.inputs["spec"]["template"]["spec"]
            claims = [v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
            assert len(claims) == 1, job.name
            assert p.depends_transitively(job, pvc.urn) and p.depends_transitively(job, datasets.urn), job.name
            if not preview:
                assert claims[0]["claimName"] == "shared-data"
        workloads = [j for j in jobs if not j.name.endswith("-volume-init")]
        init = p.one(JOB, lambda r: r.name.endswith("-volume-init"))
        for job in workloads:
            assert init.urn in job.deps_of("spec"), (
                f"{job.name} waits for the directories to belong to the training user"
            )

    def test_volume_permissions_job_is_root_with_two_capabilities(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        init = p.one(JOB, lambda r: r.name.endswith("-volume-init"))
        pod = init.inputs["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert pod["securityContext"]["runAsUser"] == 0 and pod["nodeSelector"] == {NODE_ROLE_LABEL: "system"}
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
        assert (
            c["securityContext"]["allowPrivilegeEscalation"] is False
            and c["securityContext"]["readOnlyRootFilesystem"] is True
        )
        script = c["command"][-1]
        for d in ("/fsx", "/fsx/datasets", "/fsx/runs"):
            assert f"chown 1000:1000 {d};" in script
        for dra in p.of_type(DRA):
            assert dra.urn in init.dependencies

    def test_destroy_order(self, program_for, stack: str, preview: bool) -> None:
        """Claim and volume go before the add-on and the file system; the file system before its subnet."""
        p: Program = program_for(stack, preview)
        fs, pv, pvc = p.one(FS), p.one(PV), p.one(PVC)
        addon = p.one("aws:eks/addon:Addon", lambda r: r.inputs["addonName"] == "aws-fsx-csi-driver")
        for r in (pv, pvc):
            assert addon.urn in r.dependencies and fs.urn in r.dependencies, r.name
        assert p.depends_transitively(fs, p.one(FS).deps_of("subnetIds")[0])
        for dra in p.of_type(DRA):
            assert fs.urn in dra.deps_of("fileSystemId")
        for job in p.of_type(JOB):
            assert p.depends_transitively(job, pvc.urn)
        assert _sg(p).urn in fs.deps_of("securityGroupIds")

    def test_nothing_is_kept_by_default(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        assert not p.one(FS).retain_on_delete and not _sg(p).retain_on_delete
        bucket = p.one("aws:s3/bucket:Bucket", lambda r: r.name.endswith("-fsx-data"))
        assert not bucket.retain_on_delete and bucket.inputs["forceDestroy"] is True


# ------------------------------------------------------------------------------------------------
# variants of the p5 stack
# ------------------------------------------------------------------------------------------------


def _p5(fsx: dict[str, Any] | None = None, **storage: Any) -> dict[str, Any]:
    cfg = stack_config("p5")
    cfg[f"{PROJECT}:storage"] = {"backend": "fsx", "fsx": {**_fsx_cfg("p5"), **(fsx or {})}, **storage}
    return cfg


def test_efa_file_system_is_refused_until_the_nodes_run_lnet_over_efa() -> None:
    """The nodes never configure LNet over EFA (components/catalog/fsx.py FSX_EFA_CLIENT_HOST, from the EKS guide),
    so an EFA-enabled file system would be billed as one and mounted over TCP: refused, with the reason."""
    p = run_program(
        "p5", config=_p5({"efa": True, "storageCapacityGib": 9600, "throughputPerTib": 500}), expect_error=True
    )
    assert p.registrations == [] and p.error is not None
    assert (
        "eks-training:storage.fsx.efa: an EFA-enabled file system is reached over EFA only from nodes that run LNet "
        "over EFA" in str(p.error)
    )
    assert "https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-tuning-efa.html" in str(p.error)


def test_efa_file_system_reaches_the_efa_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The component's EFA wiring, for when node groups run LNet over EFA (a program that bootstraps its nodes)."""
    import stacks.config.storage as storage_config
    from components.catalog.fsx import FSX_EFA_CLIENT_HOST

    monkeypatch.setattr(storage_config, "NODE_BOOTSTRAP_PROVIDES", frozenset({FSX_EFA_CLIENT_HOST.feature}))
    p = run_program("p5", config=_p5({"efa": True, "storageCapacityGib": 9600, "throughputPerTib": 500}))
    fs, sg = p.one(FS), _sg(p)
    assert fs.inputs["efaEnabled"] is True and fs.inputs["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    efa_sg = p.one("aws:ec2/securityGroup:SecurityGroup", lambda r: r.name.endswith("-gpu-efa-sg"))
    every = {("-1", None, None)}
    for kind in (INGRESS, EGRESS):
        rules = _rules(p, kind, sg.urn)
        assert _ports([r for r in rules if r.deps_of("referencedSecurityGroupId") == [sg.urn]]) == LUSTRE | every
        assert _ports([r for r in rules if r.deps_of("referencedSecurityGroupId") == [efa_sg.urn]]) == every
        on_clients = [r for r in _rules(p, kind, efa_sg.urn) if r.deps_of("referencedSecurityGroupId") == [sg.urn]]
        assert _ports(on_clients) == every, "the EFA clients' group lets the file servers in and out"
        # an EFA file system's creation checks all traffic within its group and with the clients' groups
        # (source key fsx-efa-security-group): those rules exist before it
        for rule in [*(r for r in rules if r.inputs["ipProtocol"] == "-1"), *on_clients]:
            assert rule.urn in fs.dependencies, rule.name
    assert fs.inputs["storageCapacity"] % 9600 == 0


def test_user_provisioned_metadata() -> None:
    p = run_program("p5", config=_p5({"metadataMode": "USER_PROVISIONED", "metadataIops": 6000}))
    assert p.one(FS).inputs["metadataConfiguration"] == {"mode": "USER_PROVISIONED", "iops": 6000}
    assert 6000 in FSX_METADATA_IOPS


def test_named_bucket_is_linked_not_created() -> None:
    path = "s3://team-datasets-us-east-1/imagenet/v2/"
    p = run_program(
        "p5", config=_p5({"dataRepository": {"s3Path": path, "fileSystemPath": "/imagenet", "exportPath": "/runs"}})
    )
    assert not [b for b in p.of_type("aws:s3/bucket:Bucket") if "-fsx-" in b.name]
    datasets = p.one(DRA, lambda r: r.name.endswith("-datasets"))
    assert (datasets.inputs["dataRepositoryPath"], datasets.inputs["fileSystemPath"]) == (path, "/imagenet")
    assert (
        p.one(DRA, lambda r: r.name.endswith("-export")).inputs["dataRepositoryPath"]
        == "s3://team-datasets-us-east-1/runs/"
    )
    assert resolve(p.outputs["datasetRoot"]) == "/data/imagenet"


def test_a_bucket_linked_at_its_root() -> None:
    """AWS's DataRepositoryPath takes s3://bucket/ (its prefix is optional): the whole bucket appears at the file
    system path, and a dataset under any prefix of it is read there."""
    p = run_program("p5", config=_p5({"dataRepository": {"s3Path": "s3://team-datasets-us-east-1/"}}))
    datasets = p.one(DRA, lambda r: r.name.endswith("-datasets"))
    assert datasets.inputs["dataRepositoryPath"] == "s3://team-datasets-us-east-1/"
    assert not [r for r in p.of_type(DRA) if r.name.endswith("-export")]


def test_dataset_in_the_linked_prefix_is_imported_not_staged() -> None:
    """A dataset whose source is an S3 prefix under the linked path has no staging Job: the job reads it where
    the data repository puts it, once the associations exist and the directories are the training user's; the
    https dataset (CIFAR-10) of the other job is still staged, onto the file system."""
    cfg = _p5({"dataRepository": {"s3Path": "s3://team-datasets-us-east-1/datasets/", "exportPath": "/runs"}})
    cfg[f"{PROJECT}:datasets"] = {
        "cifar10": {},
        "imagenet": {"source": "s3://team-datasets-us-east-1/datasets/imagenet/train/"},
    }
    cfg[f"{PROJECT}:jobs"]["train"]["dataset"] = "imagenet"
    p = run_program("p5", config=cfg)
    stages = [j for j in p.of_type(JOB) if "-stage-" in j.name]
    assert [j.name for j in stages] == ["eks-training-p5-stage-cifar10-job"], "only the https dataset is staged"
    train = p.one(JOB, lambda r: r.name.endswith("-train-job"))
    env = {e["name"]: e.get("value") for e in train.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["DATA_DIR"] == "/data/datasets/imagenet/train"
    init = p.one(JOB, lambda r: r.name.endswith("-volume-init"))
    for dra in p.of_type(DRA):
        assert p.depends_transitively(train, dra.urn), "the job is created once the S3 data is linked"
    assert p.depends_transitively(train, init.urn)
    assert not any(p.depends_transitively(train, s.urn) for s in stages), "no staging to wait for"
    evaluate = p.one(JOB, lambda r: r.name.endswith("-evaluate-job"))
    assert stages[0].urn in evaluate.dependencies, "the staged dataset's job still waits for its staging"


def _existing_vpc_p5(**storage: Any) -> dict[str, Any]:
    subnets = ["subnet-0aaa1111bbbb22223", "subnet-0ccc3333dddd44445", "subnet-0eee5555ffff66667"]
    cfg = _p5(**storage)
    del cfg[f"{PROJECT}:network"]
    cfg[f"{PROJECT}:existingVpc"] = {"vpcId": "vpc-0abc1234def567890", "privateSubnetIds": subnets}
    groups = cfg[f"{PROJECT}:nodeGroups"]
    groups["gpu"] = {k: v for k, v in groups["gpu"].items() if k != "availabilityZone"} | {"subnetId": subnets[2]}
    return cfg


def test_kept_file_system_keeps_its_security_group_and_bucket() -> None:
    p = run_program("p5", config=_existing_vpc_p5(retainOnDelete=True))
    fs, sg = p.one(FS), _sg(p)
    assert fs.inputs["subnetIds"] == "subnet-0eee5555ffff66667", "the GPU group's subnet"
    assert fs.retain_on_delete is True and sg.retain_on_delete is True
    bucket = p.one("aws:s3/bucket:Bucket", lambda r: r.name.endswith("-fsx-data"))
    assert bucket.retain_on_delete is True and bucket.inputs["forceDestroy"] is False
    for r in p.registrations:
        if bucket.urn in r.deps_of("bucket"):
            assert r.retain_on_delete is True, f"{r.type} of a kept bucket is kept (no public access, TLS only)"
    for r in (*p.of_type(DRA), *p.of_type(INGRESS), *p.of_type(EGRESS), p.one(PV), p.one(PVC)):
        assert not r.retain_on_delete, f"{r.name}: only the file system, its group and the bucket are kept"


def test_kept_file_system_is_adopted_by_id() -> None:
    cfg = _existing_vpc_p5(
        fileSystemId="fs-0123456789abcdef0",
        fsx={"securityGroupId": "sg-0123456789abcdef0", "dataRepository": {"s3Path": "s3://kept-bucket/datasets/"}},
    )
    p = run_program("p5", config=cfg)
    assert not p.of_type(FS) and not [s for s in p.of_type("aws:ec2/securityGroup:SecurityGroup") if "lustre" in s.name]
    assert (FS, "eks-training-p5-fsx-fs", "fs-0123456789abcdef0") in p.reads
    spec = p.one(PV).inputs["spec"]["csi"]
    assert spec["volumeHandle"] == "fs-0123456789abcdef0"
    assert spec["volumeAttributes"]["dnsname"] == "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    rules = [r for r in p.of_type(INGRESS) + p.of_type(EGRESS) if r.inputs["securityGroupId"] == "sg-0123456789abcdef0"]
    assert _ports(rules) == LUSTRE and len(rules) == 8, "the kept group gets the rules for this cluster's nodes"
    assert p.one(DRA, lambda r: r.name.endswith("-datasets")).inputs["fileSystemId"] == "fs-0123456789abcdef0"


def test_a_preset_switched_back_to_efs_registers_no_fsx() -> None:
    """Control: a preset's storage set back to EFS registers EFS and no FSx resource."""
    cfg = stack_config("p5")
    del cfg[f"{PROJECT}:storage"]
    p = run_program("p5", config=cfg)
    assert p.of_type("aws:efs/fileSystem:FileSystem") and not p.of_type(FS) and not p.of_type(DRA) and not p.of_type(PV)
    assert resolve(p.outputs["storageBackend"]) == "efs"


def test_fsx_errors_stop_the_preset_before_anything_is_registered() -> None:
    p = run_program("p5", config=_p5({"storageCapacityGib": 3000}), expect_error=True)
    assert isinstance(p.error, ConfigError) and "storage.fsx.storageCapacityGib: 3000 GiB" in str(p.error)
    assert p.registrations == []


def test_fsx_stack_writes_only_its_partitions_arns() -> None:
    """The FSx preset in AWS GovCloud: no IAM document, bucket policy or other input names the commercial
    partition (ARNs come from aws.getPartition or from the resources themselves)."""
    cfg = stack_config("p5")
    cfg["aws:region"] = "us-gov-west-1"
    cfg[f"{PROJECT}:nodeGroups"]["gpu"]["availabilityZone"] = "us-gov-west-1a"
    p = run_program("p5", config=cfg)
    fs = p.one(FS)
    assert fs.outputs["arn"].startswith("arn:aws-us-gov:fsx:us-gov-west-1:")
    policy = p.one("aws:s3/bucketPolicy:BucketPolicy", lambda r: r.name.endswith("-fsx-data-tls-only"))
    assert "arn:aws-us-gov:s3:::" in policy.inputs["policy"]
    written = json.dumps([r.inputs for r in p.registrations], default=str)
    assert "arn:aws-us-gov:iam::aws:policy/" in written, "control: the stack does write partitioned ARNs"
    assert "arn:aws:" not in written, re.findall(r'"[^"]*arn:aws:[^"]*"', written)[:5]


def test_efa_capacity_steps_apply_once_nodes_run_lnet_over_efa(monkeypatch: pytest.MonkeyPatch) -> None:
    """The EFA capacity rule (a multiple of the tier's step), for when node groups run LNet over EFA."""
    import stacks.config.storage as storage_config
    from components.catalog.fsx import FSX_EFA_CLIENT_HOST

    monkeypatch.setattr(storage_config, "NODE_BOOTSTRAP_PROVIDES", frozenset({FSX_EFA_CLIENT_HOST.feature}))
    p = run_program(
        "p5", config=_p5({"efa": True, "storageCapacityGib": 2400, "throughputPerTib": 1000}), expect_error=True
    )
    assert p.registrations == []
    text = str(p.error)
    assert (
        "eks-training:storage.fsx.storageCapacityGib: 2400 GiB is not a valid EFA-enabled capacity at 1000 MB/s/TiB"
        in text
    )
    assert "multiples of 4800 GiB" in text and "(with eks-training:storage.fsx.efa: true)" in text
