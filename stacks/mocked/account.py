"""The mocked AWS account: :class:`TrainingMocks`' answers to the program's resources and invokes, and their tables."""

import contextlib
import hashlib
import json
from typing import Any, Callable, Iterable, Iterator, Optional

from pulumi.runtime import mocks as pmocks

from components.catalog.amis import release_version
from components.catalog.platform import DEFAULT_KUBERNETES_VERSION
from components.workloads.job_objects import JOB_OBJECTS

ACCOUNT = "123456789012"
#: The outputs of the stacks a program may reference (``pulumi.StackReference``), by fully qualified name: a test
#: puts there what the referenced stack's program exported.
STACK_OUTPUTS: dict[str, dict[str, Any]] = {}
REGION = "us-east-1"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"]
#: Zone IDs the mocked account maps ``ZONES`` to (names map to different IDs in every account; these are moto's,
#: so both tiers agree): us-east-1e is use1-az3, a zone EKS refuses for control-plane subnets.
ZONE_IDS = ["use1-az6", "use1-az1", "use1-az2", "use1-az4", "use1-az3", "use1-az5"]
#: Partition of a region, as ``aws.getPartition`` reports it.
PARTITION_PREFIXES = {"cn-": "aws-cn", "us-gov-": "aws-us-gov"}


def partition_of(region: str) -> str:
    """The partition a region belongs to (``aws``, ``aws-cn``, ``aws-us-gov``)."""
    return next((p for prefix, p in PARTITION_PREFIXES.items() if region.startswith(prefix)), "aws")


def zones_of(region: str) -> tuple[list[str], list[str]]:
    """Zone names and IDs of the mocked account in ``region``."""
    if region == REGION:
        return list(ZONES), list(ZONE_IDS)
    first, *middle, number = region.split("-")
    code = first + "".join(part[0] for part in middle) + number  # cn-north-1 -> cnn1
    return [f"{region}{c}" for c in "abc"], [f"{code}-az{i}" for i in (1, 2, 3)]


#: The status the provider returns for a job object, by the object's name (a test puts a failed MPIJob's here: the
#: wait's end, or a refresh); any other awaited job object returns its kind's succeeded condition.
JOB_STATUS: dict[str, dict[str, Any]] = {}
#: Capacity Blocks of the mocked account by reservation id, as ``aws.ec2.getCapacityBlockReservation`` returns them
#: (tests add their own); any other id is :data:`SCHEDULED_BLOCK`'s.
CAPACITY_BLOCKS: dict[str, dict[str, Any]] = {}
SCHEDULED_BLOCK: dict[str, Any] = {
    "state": "scheduled",
    "startDate": "2030-01-02T11:30:00Z",
    "endDate": "2030-01-09T11:30:00Z",
    "instanceType": "p5.48xlarge",
    "instanceCount": 2,
    "availabilityZone": "us-east-1a",
    "reservationType": "capacity-block",
}


@contextlib.contextmanager
def started_blocks(reservations: Iterable[str]) -> Iterator[None]:
    """Within it, each of ``reservations`` is an active Capacity Block (of fixed dates, so the same stack registers the
    same objects): a rehearsal runs the jobs of its groups, which the account's scheduled block would hold back until
    it starts."""
    dates = {"state": "active", "startDate": "2026-01-01T00:00:00Z", "endDate": "2100-01-01T00:00:00Z"}
    before = dict(CAPACITY_BLOCKS)
    CAPACITY_BLOCKS.update({r: {**CAPACITY_BLOCKS.get(r, SCHEDULED_BLOCK), **dates} for r in reservations})
    try:
        yield
    finally:
        CAPACITY_BLOCKS.clear()
        CAPACITY_BLOCKS.update(before)


def _hex(seed: str, n: int = 17) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


class TrainingMocks(pmocks.Mocks):
    """Realistic ids and outputs for the resources and invokes the program uses."""

    def __init__(
        self,
        preview: bool,
        region: str = REGION,
        stack_name: str = "",
        replaced: Optional[Callable[[str, str], bool]] = None,
    ) -> None:
        self.preview = preview
        self.replaced = replaced
        """In a preview: the resources (by type and name) the update replaces, whose id and computed outputs are
        unknown; every other resource answers as the stack already has it. ``None``: a new stack's preview."""
        self.stack_name = stack_name
        """This stack's fully qualified name: its outputs are :data:`STACK_OUTPUTS`' entry, else none (no update
        yet)."""
        self.invokes: list[tuple[str, dict[str, Any]]] = []
        self.region = region
        self.partition = partition_of(region)
        self.zones, self.zone_ids = zones_of(region)

    def subnet_zone(self, subnet_id: str) -> tuple[str, str]:
        """The zone (name, ID) an existing subnet of the mocked account is in."""
        i = int(_hex(subnet_id, 4), 16) % len(self.zones)
        return self.zones[i], self.zone_ids[i]

    def call(self, args: pmocks.MockCallArgs) -> tuple[dict, Optional[list[tuple[str, str]]]]:
        self.invokes.append((args.token, dict(args.args)))
        tok = args.token
        # the engine's built-in (stacks.last_update.READ_STACK_OUTPUTS; the core does not import the program's modules)
        if tok == "pulumi:pulumi:readStackOutputs":
            ref = str(args.args.get("name"))
            if ref not in STACK_OUTPUTS and ref != self.stack_name:  # the engine errs: the SDK raises either way
                return {}, [("name", f"unknown stack {ref!r}")]
            return {"name": ref, "outputs": STACK_OUTPUTS.get(ref, {}), "secretOutputNames": []}, []
        if tok == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"names": self.zones, "zoneIds": self.zone_ids, "id": self.region}, []
        if tok == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            rid = str(args.args.get("id"))
            return {"id": rid, "capacityBlockId": rid, **CAPACITY_BLOCKS.get(rid, SCHEDULED_BLOCK)}, []
        if tok == "aws:ec2/getSubnet:getSubnet":
            sid = str(args.args.get("id"))
            name, zone_id = self.subnet_zone(sid)
            return {"id": sid, "availabilityZone": name, "availabilityZoneId": zone_id}, []
        if tok == "aws:index/getPartition:getPartition":
            suffix = "amazonaws.com.cn" if self.partition == "aws-cn" else "amazonaws.com"
            return {
                "partition": self.partition,
                "dnsSuffix": suffix,
                "reverseDnsPrefix": ".".join(reversed(suffix.split("."))),
                "id": self.partition,
            }, []
        if tok == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": ACCOUNT,
                "arn": f"arn:{self.partition}:iam::{ACCOUNT}:user/deployer",
                "userId": "AIDAEXAMPLE",
                "id": ACCOUNT,
            }, []
        if tok == "aws:index/getRegion:getRegion":
            return {
                "name": self.region,
                "region": self.region,
                "id": self.region,
                "endpoint": f"ec2.{self.region}.amazonaws.com",
            }, []
        if tok == "aws:eks/getAddonVersion:getAddonVersion":
            return {
                "addonName": args.args["addonName"],
                "kubernetesVersion": args.args["kubernetesVersion"],
                "version": f"v1.0.0-eksbuild.{len(args.args['addonName'])}",
                "id": args.args["addonName"],
            }, []
        raise Exception(f"unmocked invoke {tok}({args.args})")

    def new_resource(self, args: pmocks.MockResourceArgs) -> tuple[Optional[str], dict]:
        inputs = dict(args.inputs)
        if self.preview and (self.replaced is None or self.replaced(args.typ, args.name)):
            # Like `pulumi preview` of a new stack (or of a replaced resource): no id, no computed outputs.
            return "", inputs
        t, name = args.typ, args.name
        if t == "pulumi:pulumi:StackReference":
            return _stack_reference(inputs)
        rid = args.resource_id or _new_id(t, name)  # resource_id: an existing resource read by Resource.get
        out = dict(inputs)
        rid = self._answer(t, name, rid, inputs, out)
        if "arn" not in out and t.startswith("aws:"):
            out["arn"] = f"arn:{self.partition}:{t.split(':')[1].split('/')[0]}:{self.region}:{ACCOUNT}:{rid}"
        if t == "aws:ec2/subnet:Subnet":
            out.setdefault("availabilityZone", inputs.get("availabilityZone"))
        return rid, out

    def _answer(self, t: str, name: str, rid: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        """The id of a resource of type ``t`` and its outputs (added to ``out``): the first rule that matches."""
        if t == "aws:iam/role:Role":
            return self._iam_role(name, inputs, out)
        if t == "aws:kms/key:Key":
            return self._kms_key(name, out)
        if t == "aws:ec2/launchTemplate:LaunchTemplate":
            return self._launch_template(rid, out)
        if t == "aws:eks/nodeGroup:NodeGroup":
            return self._node_group(name, inputs, out)
        if t == "aws:fsx/lustreFileSystem:LustreFileSystem":
            return self._lustre_file_system(rid, inputs, out)
        if t == "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation":
            return self._data_repository_association(rid, inputs, out)
        if t == "aws:eks/addon:Addon":
            return self._eks_addon(inputs, out)
        if t == "eks:index:Cluster":
            return self._eks_cluster(name, inputs, out)
        if t.startswith("kubernetes:") and "metadata" in inputs:
            return _kubernetes_object(name, inputs, out)
        if t == "kubernetes:helm.sh/v3:Release":
            return _helm_release(inputs, out)
        if t == "aws:ec2/placementGroup:PlacementGroup":
            return _placement_group(name, out)
        if t == "aws:ecr/repository:Repository":
            return self._ecr_repository(name, inputs, out)
        if t == "aws:s3/bucket:Bucket":
            return self._s3_bucket(name, inputs, out)
        if t in ("aws:codebuild/project:Project", "aws:cloudwatch/logGroup:LogGroup"):
            return _named_resource(name, inputs, out)
        if t.startswith("pulumi-python:dynamic/") and "image_tag" in inputs:
            return self._image_build(inputs, out)
        return rid

    def _iam_role(self, name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        rid = inputs.get("name") or name
        out["arn"] = f"arn:{self.partition}:iam::{ACCOUNT}:role/{rid}"
        out["name"] = rid
        return rid

    def _kms_key(self, name: str, out: dict[str, Any]) -> str:
        rid = f"{_hex(name, 8)}-{_hex(name + '1', 4)}-{_hex(name + '2', 4)}"
        out.update(keyId=rid, arn=f"arn:{self.partition}:kms:{self.region}:{ACCOUNT}:key/{rid}")
        return rid

    def _launch_template(self, rid: str, out: dict[str, Any]) -> str:
        out.update(
            latestVersion=1,
            defaultVersion=1,
            arn=f"arn:{self.partition}:ec2:{self.region}:{ACCOUNT}:launch-template/{rid}",
        )
        return rid

    def _node_group(self, name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        """What EKS reports for an ACTIVE managed node group: its name, ARN and Auto Scaling group, and the Kubernetes
        version and AMI release it runs (those asked for, else this project's default minor and the newest release the
        catalog knows for it)."""
        ng = (inputs.get("nodeGroupNamePrefix") or name) + "20261121000000000000000001"
        minor = str(inputs.get("version") or DEFAULT_KUBERNETES_VERSION)
        out.update(
            version=minor,
            releaseVersion=inputs.get("releaseVersion") or release_version(None, minor) or "",
            nodeGroupName=ng,
            arn=f"arn:{self.partition}:eks:{self.region}:{ACCOUNT}:nodegroup/{inputs.get('clusterName')}/{ng}/x",
            status="ACTIVE",
            resources=[{"autoscalingGroups": [{"name": f"eks-{ng}-{_hex(ng, 8)}"}], "remoteAccessSecurityGroupId": ""}],
        )
        return f"{inputs.get('clusterName')}:{ng}"

    def _lustre_file_system(self, rid: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        """What FSx reports for an AVAILABLE file system (DescribeFileSystems)."""
        out.update(
            arn=f"arn:{self.partition}:fsx:{self.region}:{ACCOUNT}:file-system/{rid}",
            dnsName=f"{rid}.fsx.{self.region}.amazonaws.com",
            mountName=_hex(rid + "mount", 8),
            networkInterfaceIds=[f"eni-{_hex(rid + 'eni' + str(i))}" for i in range(2)],
            ownerId=ACCOUNT,
            fileSystemTypeVersion=inputs.get("fileSystemTypeVersion", "2.15"),
        )
        return rid

    def _data_repository_association(self, rid: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        out.update(
            associationId=rid,
            arn=f"arn:{self.partition}:fsx:{self.region}:{ACCOUNT}:association/{inputs.get('fileSystemId')}/{rid}",
        )
        return rid

    def _eks_addon(self, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        rid = f"{inputs.get('clusterName')}:{inputs.get('addonName')}"
        out["arn"] = f"arn:{self.partition}:eks:{self.region}:{ACCOUNT}:addon/{rid}"
        return rid

    def _eks_cluster(self, name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        """The kubeconfig, security groups and OIDC provider pulumi-eks's Cluster returns; its id is empty."""
        cname = inputs.get("name", name)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": cname,
                    "cluster": {"server": f"https://{_hex(cname, 32).upper()}.gr7.{self.region}.eks.amazonaws.com"},
                }
            ],
            "users": [
                {
                    "name": "aws",
                    "user": {"exec": {"command": "aws", "args": ["eks", "get-token", "--cluster-name", cname]}},
                }
            ],
        }
        out.update(
            kubeconfig=kubeconfig,
            kubeconfigJson=json.dumps(kubeconfig),
            clusterSecurityGroupId=f"sg-{_hex('cluster' + cname)}",
            nodeSecurityGroupId=f"sg-{_hex('cluster' + cname)}",
            oidcProviderArn=(
                f"arn:{self.partition}:iam::{ACCOUNT}:oidc-provider/"
                f"oidc.eks.{self.region}.amazonaws.com/id/{_hex(cname, 32).upper()}"
            ),
            oidcIssuer=f"https://oidc.eks.{self.region}.amazonaws.com/id/{_hex(cname, 32).upper()}",
        )
        return ""

    def _ecr_repository(self, name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        repo = inputs.get("name") or f"{name}-{_hex(name, 7)}"
        out.update(
            name=repo,
            repositoryUrl=f"{ACCOUNT}.dkr.ecr.{self.region}.amazonaws.com/{repo}",
            arn=f"arn:{self.partition}:ecr:{self.region}:{ACCOUNT}:repository/{repo}",
            registryId=ACCOUNT,
        )
        return repo

    def _s3_bucket(self, name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        rid = inputs.get("bucket") or f"{name}-{_hex(name, 7)}"
        out.update(bucket=rid, arn=f"arn:{self.partition}:s3:::{rid}")
        return rid

    def _image_build(self, inputs: dict[str, Any], out: dict[str, Any]) -> str:
        """What ImageBuild's create returns after a real build and push."""
        digest = "sha256:" + hashlib.sha256(str(inputs["image_tag"]).encode()).hexdigest()
        repo_url = inputs.get("repository_url", f"{ACCOUNT}.dkr.ecr.{self.region}.amazonaws.com/unknown")
        out.update(
            image_digest=digest,
            image_uri=f"{repo_url}@{digest}",
            build_id=f"build:{inputs['image_tag']}",
            log_link=f"https://console.aws.amazon.com/cloudwatch/home?region={self.region}#logsV2:log-groups",
        )
        return str(inputs["image_tag"])


#: The id prefix of a new resource, by type (AWS's own: ``vpc-``, ``subnet-``...).
ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
    "aws:efs/fileSystem:FileSystem": "fs",
    "aws:efs/mountTarget:MountTarget": "fsmt",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "fs",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "dra",
}


def _new_id(t: str, name: str) -> str:
    """The id a new resource of type ``t`` gets (before its type's own rule)."""
    if t in ID_PREFIXES:
        return f"{ID_PREFIXES[t]}-{_hex(t + name)}"
    return f"{name}-{_hex(t + name, 8)}"


def _stack_reference(inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A referenced stack's outputs, from :data:`STACK_OUTPUTS`."""
    ref = str(inputs.get("name"))
    if ref not in STACK_OUTPUTS:
        raise Exception(f"no stack {ref} (put its outputs in STACK_OUTPUTS)")
    return ref, {"name": ref, "outputs": STACK_OUTPUTS[ref], "secretOutputNames": []}


def _kubernetes_object(name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
    """Its metadata with a uid; an awaited job object's status (:data:`JOB_STATUS`, else succeeded)."""
    md = dict(inputs.get("metadata") or {})
    md.setdefault("uid", _hex(name, 32))
    out["metadata"] = md
    job = JOB_OBJECTS.get(str(inputs.get("kind")))
    if job is not None and str(md.get("name")) in JOB_STATUS:
        out["status"] = JOB_STATUS[str(md.get("name"))]
    elif job is not None and "pulumi.com/waitFor" in (md.get("annotations") or {}):
        # the provider returns the object it awaited: succeeded
        out["status"] = {"conditions": [{"type": job.succeeded, "status": "True"}]}
    return f"{md.get('namespace', '')}/{md.get('name', name)}".lstrip("/")


def _helm_release(inputs: dict[str, Any], out: dict[str, Any]) -> str:
    out["status"] = {
        "status": "deployed",
        "version": 1,
        "namespace": inputs.get("namespace"),
        "name": inputs.get("name"),
    }
    return f"{inputs.get('namespace')}/{inputs.get('name')}"


def _placement_group(name: str, out: dict[str, Any]) -> str:
    rid = f"{name}-{_hex(name, 7)}"
    out.update(name=rid, placementGroupId=f"pg-{_hex(name)}")
    return rid


def _named_resource(name: str, inputs: dict[str, Any], out: dict[str, Any]) -> str:
    """A CodeBuild project or a log group: its id is its name."""
    rid = inputs.get("name") or f"{name}-{_hex(name, 7)}"
    out["name"] = rid
    return rid
