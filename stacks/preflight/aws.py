"""The few read-only AWS calls the checks make, through one boto3 session (so ``AWS_ENDPOINT_URL`` and
the standard credential settings apply), with per-run caches and uniform errors."""

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Optional

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from components.catalog import QUOTA_NAMES
from stacks.preflight.findings import AwsCallError, short_message
from stacks.zones import Zone


@dataclass(frozen=True)
class S3Object:
    """What ``HeadObject`` says of an object."""

    size: int
    storage_class: str
    restored: bool
    """A restored copy of an archived object is readable now."""


class AwsClient:
    """The few read-only AWS calls the checks make, with per-run caches and uniform errors."""

    def __init__(self, session: boto3.session.Session, region: str):
        self.region = region
        self.ec2 = session.client("ec2", region_name=region)
        self.quotas = session.client("service-quotas", region_name=region)
        self.eks = session.client("eks", region_name=region)
        self.sts = session.client("sts", region_name=region)
        self.s3 = session.client("s3", region_name=region)
        self.fsx = session.client("fsx", region_name=region)
        self._offered: dict[str, list[str]] = {}
        self._types: dict[str, dict[str, Any]] = {}
        self._subnets: dict[str, dict[str, Any]] = {}
        self._caller: Optional[str] = None
        self._clusters: dict[str, Optional[tuple[str, str]]] = {}

    def _call(self, client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = getattr(client, operation)(**kwargs)
            return result
        except ClientError as exc:
            err = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            raise AwsCallError(
                operation, str(err.get("Code", "Error")), short_message(str(err.get("Message", exc)), status)
            ) from exc
        except (BotoCoreError, ResponseParserError) as exc:  # unreachable endpoint, no credentials, bad response
            raise AwsCallError(operation, type(exc).__name__, short_message(str(exc), None)) from exc

    def _pages(self, client: Any, operation: str, token: str = "NextToken", **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Each page of a listing call, following its ``token`` (EC2 and FSx call it ``NextToken``, EKS
        ``nextToken``) until a page has none."""
        while True:
            page = self._call(client, operation, **kwargs)
            yield page
            if not page.get(token):
                return
            kwargs = {**kwargs, token: page[token]}

    def caller_arn(self) -> str:
        """The ARN of the identity the calls (and ``pulumi up``) run as (``sts:GetCallerIdentity``, asked once)."""
        if self._caller is None:
            self._caller = str(self._call(self.sts, "get_caller_identity")["Arn"])
        return self._caller

    def available_zones(self) -> list[Zone]:
        """The region's available zones that need no opt-in, with their zone IDs, sorted by name (as the
        program resolves them)."""
        resp = self._call(
            self.ec2,
            "describe_availability_zones",
            Filters=[
                {"Name": "state", "Values": ["available"]},
                {"Name": "opt-in-status", "Values": ["opt-in-not-required"]},
            ],
        )
        return sorted(
            Zone(str(z["ZoneName"]), str(z.get("ZoneId", "")))
            for z in resp.get("AvailabilityZones", [])
            if z.get("ZoneType", "availability-zone") == "availability-zone"
        )

    def offered_zones(self, instance_type: str) -> list[str]:
        """Zones of the region where ``instance_type`` is offered (one call per type, cached)."""
        if instance_type not in self._offered:
            pages = self._pages(
                self.ec2,
                "describe_instance_type_offerings",
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": [instance_type]}],
            )
            self._offered[instance_type] = sorted(
                {o["Location"] for p in pages for o in p.get("InstanceTypeOfferings", [])}
            )
        return self._offered[instance_type]

    def instance_type(self, instance_type: str) -> dict[str, Any]:
        """``DescribeInstanceTypes`` for one type (cached)."""
        if instance_type not in self._types:
            resp = self._call(self.ec2, "describe_instance_types", InstanceTypes=[instance_type])
            found = resp.get("InstanceTypes", [])
            if not found:
                raise AwsCallError("describe_instance_types", "NotFound", f"{instance_type} is not known to EC2 here")
            self._types[instance_type] = found[0]
        return self._types[instance_type]

    def vpc_dns(self, vpc_id: str) -> tuple[bool, bool]:
        """``DescribeVpcAttribute``: whether a VPC resolves DNS (``enableDnsSupport``) and gives its instances DNS
        hostnames (``enableDnsHostnames``)."""
        on = []
        for attribute, field in (
            ("enableDnsSupport", "EnableDnsSupport"),
            ("enableDnsHostnames", "EnableDnsHostnames"),
        ):
            resp = self._call(self.ec2, "describe_vpc_attribute", VpcId=vpc_id, Attribute=attribute)
            on.append(bool(resp.get(field, {}).get("Value")))
        return on[0], on[1]

    def vpc_name_servers(self, vpc_id: str) -> tuple[Optional[list[str]], str]:
        """``DescribeVpcs`` and ``DescribeDhcpOptions``: the ``domain-name-servers`` of the VPC's DHCP options set
        (``None``: the VPC has none, ``default``), and the VPC's primary IPv4 block."""
        vpcs = self._call(self.ec2, "describe_vpcs", VpcIds=[vpc_id]).get("Vpcs", [])
        if not vpcs:
            raise AwsCallError("describe_vpcs", "InvalidVpcID.NotFound", f"VPC {vpc_id} not found")
        options, block = vpcs[0].get("DhcpOptionsId"), str(vpcs[0].get("CidrBlock", ""))
        if not options or options == "default":
            return None, block
        sets = self._call(self.ec2, "describe_dhcp_options", DhcpOptionsIds=[options]).get("DhcpOptions", [])
        servers = [
            str(v["Value"])
            for s in sets
            for c in s.get("DhcpConfigurations", [])
            if c.get("Key") == "domain-name-servers"
            for v in c.get("Values", [])
        ]
        return servers, block

    def subnet(self, subnet_id: str) -> dict[str, Any]:
        """``DescribeSubnets`` for one subnet (cached)."""
        if subnet_id not in self._subnets:
            resp = self._call(self.ec2, "describe_subnets", SubnetIds=[subnet_id])
            found = resp.get("Subnets", [])
            if not found:
                raise AwsCallError("describe_subnets", "InvalidSubnetID.NotFound", f"subnet {subnet_id} not found")
            self._subnets[subnet_id] = found[0]
        return self._subnets[subnet_id]

    def quota(self, code: str, service: str = "ec2", documented: Optional[float] = None) -> tuple[float, str, str]:
        """(value, name, where from) of a quota: the applied value, else AWS's default, else ``documented`` (the
        catalog's value of the quota's public page) when Service Quotas has neither."""
        try:
            q = self._call(self.quotas, "get_service_quota", ServiceCode=service, QuotaCode=code)["Quota"]
            source = "applied"
        except AwsCallError as exc:
            if exc.code != "NoSuchResourceException":
                raise
            try:
                q = self._call(self.quotas, "get_aws_default_service_quota", ServiceCode=service, QuotaCode=code)
                q = q["Quota"]
            except AwsCallError as missing:
                if missing.code != "NoSuchResourceException" or documented is None:
                    raise
                return float(documented), QUOTA_NAMES.get(code, code), "the documented default"
            source = "AWS default"
        return float(q["Value"]), str(q.get("QuotaName") or QUOTA_NAMES.get(code, code)), source

    def bucket_region(self, bucket: str) -> str:
        """The Region of an S3 bucket (``GetBucketLocation``: no constraint means us-east-1, ``EU`` eu-west-1).

        Raises :class:`AwsCallError` (``NoSuchBucket``, ``AccessDenied``, ...) when it cannot be read."""
        resp = self._call(self.s3, "get_bucket_location", Bucket=bucket)
        location = resp.get("LocationConstraint")
        return {None: "us-east-1", "": "us-east-1", "EU": "eu-west-1"}.get(location, str(location))

    def s3_object(self, bucket: str, name: str) -> Optional["S3Object"]:
        """An S3 object's size and storage class (``HeadObject``), ``None`` when there is none."""
        try:
            head = self._call(self.s3, "head_object", Bucket=bucket, Key=name)
        except AwsCallError as exc:
            if exc.code in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        restore = str(head.get("Restore") or "")
        return S3Object(
            size=int(head["ContentLength"]),
            storage_class=str(head.get("StorageClass") or "STANDARD"),
            restored='ongoing-request="false"' in restore,
        )

    def first_object(self, bucket: str, prefix: str) -> Optional[str]:
        """The first object key under ``prefix`` other than ``prefix`` itself (a console folder's marker):
        ``ListObjectsV2``, one key; ``None`` when there is none."""
        contents = self._call(
            self.s3, "list_objects_v2", Bucket=bucket, Prefix=prefix, StartAfter=prefix, MaxKeys=1
        ).get("Contents")
        return str(contents[0]["Key"]) if contents else None

    def lustre_file_systems(self, file_system_ids: Optional[list[str]] = None) -> list[dict[str, Any]]:
        """``DescribeFileSystems``: the region's FSx for Lustre file systems (or these ids; an unknown id is
        an empty answer or a ``FileSystemNotFound`` error, both an empty list here)."""
        kwargs: dict[str, Any] = {"FileSystemIds": file_system_ids} if file_system_ids else {}
        try:
            pages = list(self._pages(self.fsx, "describe_file_systems", **kwargs))
        except AwsCallError as exc:
            if exc.code == "FileSystemNotFound":
                return []
            raise
        return [f for p in pages for f in p.get("FileSystems", []) if f.get("FileSystemType") == "LUSTRE"]

    def data_repository_associations(self, file_system_id: str) -> list[dict[str, Any]]:
        """``DescribeDataRepositoryAssociations`` of one file system."""
        pages = self._pages(
            self.fsx,
            "describe_data_repository_associations",
            Filters=[{"Name": "file-system-id", "Values": [file_system_id]}],
        )
        return [a for p in pages for a in p.get("Associations", [])]

    def cluster_version(self, name: str) -> Optional[tuple[str, str]]:
        """(Kubernetes minor, status) of the EKS cluster ``name`` (``DescribeCluster``), or ``None`` when there is none
        (EKS says so as ResourceNotFoundException, sometimes as a ClientException: terraform-provider-aws
        ``findClusterByName`` reads both). Asked once per run; an error is not kept."""
        if name not in self._clusters:
            try:
                resp = self._call(self.eks, "describe_cluster", name=name)
                found: Optional[tuple[str, str]] = (
                    str(resp["cluster"]["version"]),
                    str(resp["cluster"].get("status", "ACTIVE")),
                )
            except AwsCallError as exc:
                if not (
                    exc.code == "ResourceNotFoundException"
                    or (exc.code == "ClientException" and "No cluster found" in exc.message)
                ):
                    raise
                found = None
            self._clusters[name] = found
        return self._clusters[name]

    def node_group_versions(self, cluster: str) -> dict[str, str]:
        """The Kubernetes minor of each managed node group of the EKS cluster ``cluster``, by EKS's name
        (``ListNodegroups``, then ``DescribeNodegroup`` for each; a group EKS gives no version of is left out)."""
        pages = self._pages(self.eks, "list_nodegroups", token="nextToken", clusterName=cluster)
        names = [str(n) for p in pages for n in p.get("nodegroups", [])]
        versions = {}
        for n in names:
            group = self._call(self.eks, "describe_nodegroup", clusterName=cluster, nodegroupName=n).get(
                "nodegroup", {}
            )
            if group.get("version"):
                versions[n] = str(group["version"])
        return versions

    def node_group_desired_sizes(self, cluster: str, label: str) -> dict[str, int]:
        """The desired size EKS holds for each managed node group of the EKS cluster ``cluster``, by the value of its
        node label ``label`` (``ListNodegroups``, then ``DescribeNodegroup`` for each). Left out: a group without
        that label, one neither ACTIVE nor UPDATING (a failed create or delete), and a label two such groups carry."""
        pages = self._pages(self.eks, "list_nodegroups", token="nextToken", clusterName=cluster)
        found: dict[str, list[int]] = {}
        for n in [str(n) for p in pages for n in p.get("nodegroups", [])]:
            group = self._call(self.eks, "describe_nodegroup", clusterName=cluster, nodegroupName=n).get(
                "nodegroup", {}
            )
            role = (group.get("labels") or {}).get(label)
            desired = (group.get("scalingConfig") or {}).get("desiredSize")
            if role is not None and desired is not None and group.get("status", "ACTIVE") in ("ACTIVE", "UPDATING"):
                found.setdefault(str(role), []).append(int(desired))
        return {role: sizes[0] for role, sizes in found.items() if len(sizes) == 1}

    def installed_addon(self, cluster: str, addon: str) -> Optional[str]:
        """The version of ``addon`` the EKS cluster ``cluster`` runs (``DescribeAddon``), or ``None`` when it has none
        installed (ResourceNotFoundException)."""
        try:
            resp = self._call(self.eks, "describe_addon", clusterName=cluster, addonName=addon)
        except AwsCallError as exc:
            if exc.code != "ResourceNotFoundException":
                raise
            return None
        version = resp.get("addon", {}).get("addonVersion")
        return str(version) if version else None

    def addon_versions(self, addon: str, kubernetes_version: str) -> list[tuple[str, bool]]:
        """(version, is EKS's default) of every version of an EKS add-on offered for ``kubernetes_version``."""
        found: list[tuple[str, bool]] = []
        pages = self._pages(
            self.eks,
            "describe_addon_versions",
            token="nextToken",
            addonName=addon,
            kubernetesVersion=kubernetes_version,
        )
        for entry in (e for p in pages for e in p.get("addons", []) if e.get("addonName") == addon):
            for version in entry.get("addonVersions", []):
                compat = [
                    c for c in version.get("compatibilities", []) if c.get("clusterVersion") == kubernetes_version
                ]
                if compat:
                    found.append((str(version["addonVersion"]), any(bool(c.get("defaultVersion")) for c in compat)))
        return found

    def capacity_reservation(self, reservation_id: str) -> Optional[dict[str, Any]]:
        """The reservation, or ``None`` when EC2 says it does not exist."""
        try:
            resp = self._call(self.ec2, "describe_capacity_reservations", CapacityReservationIds=[reservation_id])
        except AwsCallError as exc:
            if exc.code.startswith("InvalidCapacityReservationId"):
                return None
            raise
        found = [r for r in resp.get("CapacityReservations", []) if r.get("CapacityReservationId") == reservation_id]
        return found[0] if found else None

    def spot_prices(self, instance_type: str, zones: list[str]) -> dict[str, float]:
        """The current Linux Spot price (USD per hour) of ``instance_type`` in each of ``zones`` where EC2 has one
        (``DescribeSpotPriceHistory`` from now: the price in effect in each zone)."""
        prices: dict[str, tuple[str, float]] = {}
        pages = self._pages(
            self.ec2,
            "describe_spot_price_history",
            InstanceTypes=[instance_type],
            ProductDescriptions=["Linux/UNIX"],
            StartTime=datetime.now(timezone.utc),
            Filters=[{"Name": "availability-zone", "Values": zones}],
        )
        for entry in (e for p in pages for e in p.get("SpotPriceHistory", [])):
            zone, stamp = str(entry.get("AvailabilityZone")), str(entry.get("Timestamp", ""))
            if zone in zones and (zone not in prices or stamp > prices[zone][0]):
                prices[zone] = (stamp, float(entry["SpotPrice"]))
        return {z: p for z, (_, p) in sorted(prices.items())}
