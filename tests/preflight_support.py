"""Helpers for tests/moto/test_preflight_moto.py: real moto servers and the AWS data moto lacks.

Two kinds of server, both real HTTP servers that boto3 reaches through ``AWS_ENDPOINT_URL``
(boto3 is never patched):

* :func:`start_moto_process` (:func:`tests.aws_support.start_moto_server`) runs
  ``moto_server -H 127.0.0.1 -p <free port>`` as a separate process:
  stock moto 5.2.5, for what moto implements itself (availability zones, subnets, instance types
  with EFA info, instance type offerings per zone).
* :class:`SeededMoto` runs moto in-process (``moto.server.ThreadedMotoServer`` on 127.0.0.1) with
  three operations moto 5.2.5 does not have, served from data seeded into moto's own backends
  (``moto.backends.get_backend``):

  - service-quotas ``GetServiceQuota`` for ``ec2`` codes (moto only knows ``vpc`` quotas and answers
    ``NoSuchResourceException`` for any other service) and ``GetAWSDefaultServiceQuota`` (absent:
    HTTP 500). ``RequestServiceQuotaIncrease`` is absent too, so quotas cannot be seeded through the
    API.
  - ec2 ``DescribeCapacityReservations`` (absent: HTTP 500; moto has no capacity reservations,
    Capacity Blocks included, and no API to create them).
  - eks ``DescribeAddonVersions`` (``GET /addons/supported-versions``; moto has no EKS add-ons): the
    route is added to moto's EKS URL map and answers from seeded add-on versions; ``DescribeAddon``
    (``GET /clusters/<name>/addons/<addonName>``) the same way, from add-ons seeded as installed on a cluster
    (``ResourceNotFoundException`` for another, as EKS answers).
  - service-quotas for the ``fsx`` service code (the Lustre storage quota) through the same two
    operations as the ``ec2`` codes.
  - fsx ``DescribeDataRepositoryAssociations`` (moto 5.2.5 has file systems but no data repository
    associations: ``NotImplementedError``), answering from associations seeded for a file system moto
    created, filtered by ``file-system-id`` as AWS does.

  The added handlers return moto ``ActionResult`` objects, so moto serializes them from botocore's
  service model exactly as it does its own responses; unknown ids raise the AWS error codes
  (``NoSuchResourceException``, ``InvalidCapacityReservationId.NotFound``).
"""

import json
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from stacks.ports import free_port
from tests import aws_support
from tests.aws_support import MOTO_SERVER, REGION, MotoProcess, aws_test_environment, wait_until_answers
from tests.wait import patient

__all__ = [  # MOTO_SERVER, REGION, MotoProcess and free_port are re-exported from tests.aws_support
    "ACCOUNT",
    "MOTO_SERVER",
    "REGION",
    "MotoProcess",
    "SeededMoto",
    "aws_environment",
    "free_port",
    "start_moto_process",
]

ACCOUNT = "123456789012"  # moto's default account for any dummy access key

_QUOTAS_APPLIED = "_preflight_applied_quotas"
_QUOTAS_DEFAULT = "_preflight_default_quotas"
_RESERVATIONS = "_preflight_capacity_reservations"
_ADDON_VERSIONS = "_preflight_addon_versions"
_INSTALLED_ADDONS = "_preflight_installed_addons"
_DRAS = "_preflight_data_repository_associations"
#: Service names Service Quotas reports for the service codes the preflight reads.
_SERVICE_NAMES = {
    "ec2": "Amazon Elastic Compute Cloud (Amazon EC2)",
    "eks": "Amazon Elastic Kubernetes Service (Amazon EKS)",
    "fsx": "Amazon FSx",
}


start_moto_process = aws_support.start_moto_server
"""Start a stock ``moto_server`` process and wait until it answers (see :mod:`tests.aws_support`)."""


def aws_environment(endpoint: str, workdir: Path) -> dict[str, Optional[str]]:
    """Environment for boto3: the moto endpoint, dummy credentials, us-east-1, no user AWS config,
    and a single attempt per call (moto answers unimplemented operations with HTTP 500, which boto3
    would otherwise retry with back-off)."""
    return aws_test_environment(endpoint, workdir, max_attempts=1)


# ------------------------------------------------------------------------------------------------
# Operations moto lacks, served from data seeded into moto's backends (in-process server only)
# ------------------------------------------------------------------------------------------------


def _get_service_quota(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def get_service_quota(self: Any) -> Any:
        from moto.core.responses import ActionResult

        params = json.loads(self.body)
        quota = getattr(self.backend, _QUOTAS_APPLIED, {}).get((params.get("ServiceCode"), params.get("QuotaCode")))
        if quota is not None:
            return ActionResult({"Quota": quota})
        return original(self)  # moto's own: vpc quotas, else NoSuchResourceException

    return get_service_quota


def _get_aws_default_service_quota(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.servicequotas.exceptions import NoSuchResource

    params = json.loads(self.body)
    quota = getattr(self.backend, _QUOTAS_DEFAULT, {}).get((params.get("ServiceCode"), params.get("QuotaCode")))
    if quota is None:
        raise NoSuchResource()
    return ActionResult({"Quota": quota})


def _describe_capacity_reservations(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    store: dict[str, dict[str, Any]] = getattr(self.ec2_backend, _RESERVATIONS, {})
    ids = self._get_param("CapacityReservationIds") or []
    for rid in ids:
        if rid not in store:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist"
            )
    found = [store[rid] for rid in ids] if ids else list(store.values())
    return ActionResult({"CapacityReservations": found})


def _describe_addon_versions(self: Any) -> Any:
    from moto.core.responses import ActionResult

    store: dict[str, list[dict[str, Any]]] = getattr(self.eks_backend, _ADDON_VERSIONS, {})
    name = self._get_param("addonName")
    k8s = self._get_param("kubernetesVersion")
    addons = []
    for addon, versions in sorted(store.items()):
        if name and addon != name:
            continue
        matching = [v for v in versions if not k8s or any(c["clusterVersion"] == k8s for c in v["compatibilities"])]
        if matching:
            addons.append(
                {
                    "addonName": addon,
                    "type": "networking",
                    "addonVersions": matching,
                    "publisher": "eks",
                    "owner": "aws",
                }
            )
    return ActionResult({"addons": addons})


def _describe_addon(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.eks.exceptions import ResourceNotFoundException

    cluster, addon = self._get_param("name"), self._get_param("addonName")
    store: dict[tuple[str, str], str] = getattr(self.eks_backend, _INSTALLED_ADDONS, {})
    if (cluster, addon) not in store:
        raise ResourceNotFoundException(
            clusterName=cluster,
            nodegroupName=None,
            fargateProfileName=None,
            addonName=addon,
            message=f"No addon: {addon} found in cluster: {cluster}",
        )
    version = store[cluster, addon]
    return ActionResult(
        {"addon": {"addonName": addon, "clusterName": cluster, "status": "ACTIVE", "addonVersion": version}}
    )


def _describe_data_repository_associations(self: Any) -> str:
    params = json.loads(self.body or "{}")
    store: list[dict[str, Any]] = getattr(self.fsx_backend, _DRAS, [])
    wanted: dict[str, list[str]] = {f["Name"]: f["Values"] for f in params.get("Filters", [])}
    found = [
        a
        for a in store
        if all(
            a.get({"file-system-id": "FileSystemId", "data-repository-type": "DataRepositoryType"}.get(n, n)) in v
            for n, v in wanted.items()
        )
    ]
    ids = params.get("AssociationIds")
    if ids:
        found = [a for a in found if a["AssociationId"] in ids]
    return json.dumps({"Associations": found})


class SeededMoto:
    """moto in-process (``ThreadedMotoServer`` on 127.0.0.1) plus quota and capacity-reservation data."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._mp = pytest.MonkeyPatch()
        from moto.ec2.responses import EC2Response
        from moto.servicequotas.responses import ServiceQuotasResponse

        self._mp.setattr(EC2Response, "describe_capacity_reservations", _describe_capacity_reservations, raising=False)
        from moto.eks import urls as eks_urls
        from moto.eks.responses import EKSResponse

        self._mp.setattr(EKSResponse, "describe_addon_versions", _describe_addon_versions, raising=False)
        self._mp.setitem(eks_urls.url_paths, "{0}/addons/supported-versions$", eks_urls.response.dispatch)
        self._mp.setattr(EKSResponse, "describe_addon", _describe_addon, raising=False)
        self._mp.setitem(
            eks_urls.url_paths, "{0}/clusters/(?P<name>[^/]+)/addons/(?P<addonName>[^/]+)$", eks_urls.response.dispatch
        )
        self._mp.setattr(
            ServiceQuotasResponse, "get_service_quota", _get_service_quota(ServiceQuotasResponse.get_service_quota)
        )
        self._mp.setattr(
            ServiceQuotasResponse, "get_aws_default_service_quota", _get_aws_default_service_quota, raising=False
        )
        from moto.fsx.responses import FSxResponse

        self._mp.setattr(
            FSxResponse, "describe_data_repository_associations", _describe_data_repository_associations, raising=False
        )
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._server.start()
        wait_until_answers(self.endpoint, lambda: True, lambda: "in-process ThreadedMotoServer")

    def stop(self) -> None:
        """Stop the server and remove the added operations."""
        self._server.stop()
        self._mp.undo()

    def reset(self) -> None:
        """Forget everything (moto's own state and the seeded data) through moto's reset endpoint."""
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(req, timeout=patient(10)):
            pass

    @staticmethod
    def _backend(service: str) -> Any:
        from moto.backends import get_backend

        return get_backend(service)[ACCOUNT][REGION]  # type: ignore[call-overload]

    def seed_quota(
        self, code: str, value: float, *, applied: bool = True, name: Optional[str] = None, service: str = "ec2"
    ) -> None:
        """A quota of ``service`` (``ec2``, ``eks`` or ``fsx``): ``applied`` = the account's applied value
        (GetServiceQuota), else only AWS's default (GetServiceQuota then answers NoSuchResourceException,
        as for a never-raised quota)."""
        backend = self._backend("service-quotas")
        attr = _QUOTAS_APPLIED if applied else _QUOTAS_DEFAULT
        store = backend.__dict__.setdefault(attr, {})
        store[(service, code)] = {
            "ServiceCode": service,
            "ServiceName": _SERVICE_NAMES[service],
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:{service}/{code}",
            "QuotaCode": code,
            "QuotaName": name or f"quota {code}",
            "Value": float(value),
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }

    def seed_capacity_reservation(
        self,
        reservation_id: str,
        instance_type: str,
        zone: str,
        *,
        count: int = 2,
        state: str = "active",
        capacity_block: bool = False,
        start: Optional[datetime] = None,
        end: Optional[datetime] = None,
    ) -> dict[str, Any]:
        """A capacity reservation as DescribeCapacityReservations returns it (ODCR, or a Capacity
        Block with ``capacity_block=True``)."""
        now = datetime.now(timezone.utc).replace(microsecond=0)
        start = start or now - timedelta(hours=1)
        end = end or start + timedelta(days=1)
        record: dict[str, Any] = {
            "CapacityReservationId": reservation_id,
            "OwnerId": ACCOUNT,
            "CapacityReservationArn": f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/{reservation_id}",
            "InstanceType": instance_type,
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": zone,
            "Tenancy": "default",
            "TotalInstanceCount": count,
            "AvailableInstanceCount": count,
            "EbsOptimized": True,
            "EphemeralStorage": False,
            "State": state,
            "StartDate": start,
            "EndDate": end,
            "EndDateType": "limited",
            "InstanceMatchCriteria": "targeted",
            "CreateDate": start,
            "ReservationType": "capacity-block" if capacity_block else "default",
        }
        backend = self._backend("ec2")
        backend.__dict__.setdefault(_RESERVATIONS, {})[reservation_id] = record
        return record

    def seed_addon_versions(self, addon: str, versions: dict[str, dict[str, bool]]) -> None:
        """Versions of an EKS add-on: ``{"v1.19.0-eksbuild.1": {"1.34": True, "1.35": False}}`` means that
        version is offered for Kubernetes 1.34 (as its default) and 1.35."""
        backend = self._backend("eks")
        backend.__dict__.setdefault(_ADDON_VERSIONS, {})[addon] = [
            {
                "addonVersion": version,
                "architecture": ["amd64", "arm64"],
                "compatibilities": [
                    {"clusterVersion": k8s, "platformVersions": ["*"], "defaultVersion": default}
                    for k8s, default in clusters.items()
                ],
                "requiresConfiguration": False,
            }
            for version, clusters in versions.items()
        ]

    def seed_installed_addon(self, cluster: str, addon: str, version: str) -> None:
        """An EKS add-on ``cluster`` runs at ``version`` (what ``DescribeAddon`` answers)."""
        self._backend("eks").__dict__.setdefault(_INSTALLED_ADDONS, {})[cluster, addon] = version

    def seed_data_repository_association(
        self, file_system_id: str, file_system_path: str, data_repository_path: str, *, lifecycle: str = "AVAILABLE"
    ) -> dict[str, Any]:
        """A data repository association of a file system moto created, as DescribeDataRepositoryAssociations
        returns it."""
        backend = self._backend("fsx")
        if file_system_id not in backend.file_systems:
            raise KeyError(f"moto has no file system {file_system_id}; create it first")
        store = backend.__dict__.setdefault(_DRAS, [])
        association_id = f"dra-{len(store):017x}"
        record = {
            "AssociationId": association_id,
            "ResourceARN": f"arn:aws:fsx:{REGION}:{ACCOUNT}:association/{file_system_id}/{association_id}",
            "FileSystemId": file_system_id,
            "Lifecycle": lifecycle,
            "FileSystemPath": file_system_path,
            "DataRepositoryPath": data_repository_path,
            "BatchImportMetaDataOnCreate": True,
            "ImportedFileChunkSize": 1024,
            "S3": {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}},
        }
        store.append(record)
        return record
