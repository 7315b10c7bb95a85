"""The EKS control plane section (``cluster``)."""

import ipaddress
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import date
from typing import Callable, Iterator, Literal, Optional, get_args

from pydantic import Field, field_validator, model_validator

from components.catalog import (
    DEFAULT_KUBERNETES_VERSION,
    EKS_ADDONS,
    KUBERNETES_VERSIONS,
    LOG_RETENTION_DAYS,
    SERVICE_PRICES,
    SOURCES,
    SUPPORTED_KUBERNETES_VERSIONS,
    in_standard_support,
)
from components.catalog.addons import ADDON_VERSION_RE, addon_version_tuple, version_text
from components.catalog.network import ANYWHERE_IPV4, SERVICE_CIDR_BLOCKS, SERVICE_CIDR_PREFIXES
from components.catalog.platform import billed_extended
from components.conventions import DEFAULT_CLUSTER_LOG_RETENTION_DAYS
from stacks.config.base import ROLE_ARN_RE, AmiRelease, Model, cidr_problem, ipv4, reference
from stacks.config.errors import check

#: Control-plane log types EKS can send to CloudWatch (listed once).
LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
LOG_TYPES: tuple[str, ...] = get_args(LogType)
DEFAULT_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator")
#: The day support windows are judged on (a function, so tests can fix it).
today: Callable[[], date] = date.today


_WINDOWS_IGNORED: ContextVar[bool] = ContextVar("support_windows_ignored", default=False)


def past_standard_support(minor: str) -> bool:
    """Whether a known ``minor`` left EKS standard support by :data:`today` (never while support windows are
    ignored)."""
    return minor in KUBERNETES_VERSIONS and not _WINDOWS_IGNORED.get() and billed_extended(minor, today())


@contextmanager
def support_windows_ignored() -> Iterator[None]:
    """Load configurations without the standard-support rule: for the record of an update made while its minor was
    supported (:mod:`stacks.last_update`), which the calendar does not make wrong afterwards."""
    token = _WINDOWS_IGNORED.set(True)
    try:
        yield
    finally:
        _WINDOWS_IGNORED.reset(token)


class ClusterConfig(Model):
    """The EKS control plane (key ``cluster``)."""

    kubernetes_version: str = Field(
        default=DEFAULT_KUBERNETES_VERSION, json_schema_extra=reference(allowed=SUPPORTED_KUBERNETES_VERSIONS)
    )
    """The Kubernetes version; one past EKS standard support needs extendedSupport."""
    extended_support: bool = False
    """false: upgradePolicy STANDARD, EKS upgrades the cluster at the end of standard support; true keeps the version
    and EKS bills its extended-support price per cluster-hour (components/catalog/ lists both prices)."""
    endpoint_public_access: bool = True
    """Whether the API server has a public endpoint (the private one is always on); with false, `pulumi up` must run
    from a network privateAccessCidrs lets in: inside the VPC, or over a VPN."""
    public_access_cidrs: list[str] = Field(default_factory=lambda: [ANYWHERE_IPV4])
    """The CIDRs allowed to reach the public endpoint; only with endpointPublicAccess: true."""
    private_access_cidrs: list[str] = Field(default_factory=list)
    """The networks allowed to reach the private endpoint on port 443, such as a bastion's subnet or a VPN's range:
    a rule each in the cluster security group, which the nodes carry too. Without them only the nodes reach it."""
    log_retention_days: int = Field(
        default=DEFAULT_CLUSTER_LOG_RETENTION_DAYS, json_schema_extra=reference(allowed=LOG_RETENTION_DAYS)
    )
    """CloudWatch retention, in days, of the control-plane log group and, with operations.metrics, of the
    container-log groups (application, dataplane, host, performance)."""
    admin_role_arns: list[str] = Field(default_factory=list)
    """IAM role ARNs given cluster-admin access entries (the identity running `pulumi up` is admin as the cluster's
    creator)."""
    log_types: list[LogType] = Field(default_factory=lambda: list(DEFAULT_LOG_TYPES))
    """The control-plane logs sent to CloudWatch."""
    service_cidr: Optional[str] = None
    """The Kubernetes service range: a /12 to /24 inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, outside the VPC;
    default EKS's choice. EKS cannot change it: a later ``pulumi up`` refuses another value."""
    create_oidc_provider: bool = False
    """Create the cluster's IAM OIDC provider (IRSA); the drivers use EKS Pod Identity without it."""
    addon_versions: dict[str, str] = Field(default_factory=dict, json_schema_extra=reference(allowed=EKS_ADDONS))
    """EKS add-on name -> the version to run (allowed: the add-on names); default this project's pin for
    kubernetesVersion where it has one (components/catalog/addons.py), else EKS's default, which preflight checks. A
    version without a setting the stack passes the add-on is refused."""
    ami_release: AmiRelease = None
    """The EKS AMI release every node group runs unless it sets its own: a tag of components/catalog/amis.py
    (v20260714) or a release version of kubernetesVersion (1.36.2-20260714); setting or changing it rolls the nodes
    (one setting, shown in the plan). Unset: a new group starts on the newest release this project knows and keeps
    the release it has when the project moves on; a Kubernetes minor upgrade, or a change of the group's launch
    template, takes EKS's newest release for the minor. Set, a launch template change must raise it too."""
    stack_reference: Optional[str] = None
    """A jobs-only stack: the cluster stack (``org/project/stack``) whose team's queue this stack's jobs go to."""
    team: Optional[str] = None
    """A jobs-only stack: the team (a key of the referenced stack's ``teams``)."""

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _version_written(cls, v: object) -> object:
        """A minor written unquoted is a number, with its trailing zero gone (1.30 reads as 1.3): the message names
        the supported minor it was, or the supported minors."""
        if isinstance(v, float):
            meant = [m for m in (f"{v}", f"{v:.2f}") if m in SUPPORTED_KUBERNETES_VERSIONS]
            known = ", ".join(f"'{m}'" for m in SUPPORTED_KUBERNETES_VERSIONS)
            quoted = f"'{meant[0]}'" if meant else f"one of {known}"
            raise ValueError(
                f"{v} is a number, not a string (YAML reads 1.30 as the number 1.3); write the minor quoted: {quoted}"
            )
        return v

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v not in SUPPORTED_KUBERNETES_VERSIONS:
            day = today()
            standard = [m for m in SUPPORTED_KUBERNETES_VERSIONS if in_standard_support(m, day)]
            extended = [m for m in SUPPORTED_KUBERNETES_VERSIONS if m not in standard]
            past = f" (or {', '.join(extended)}, past standard support, with extendedSupport: true)"
            raise ValueError(f"{v!r} is not supported; use one of {', '.join(standard)}" + (past if extended else ""))
        return v

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, v: int) -> int:
        if v not in LOG_RETENTION_DAYS:
            raise ValueError(f"{v} is not a CloudWatch retention; use one of {', '.join(map(str, LOG_RETENTION_DAYS))}")
        return v

    @field_validator("public_access_cidrs", "private_access_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        check([(f"[{i}]", why) for i, c in enumerate(v) if (why := cidr_problem(c))])
        check([(f"[{i}]", f"{c} is listed twice; remove one") for i, c in enumerate(v) if c in v[:i]])
        return v

    @field_validator("admin_role_arns")
    @classmethod
    def _arns(cls, v: list[str]) -> list[str]:
        check(
            [
                (f"[{i}]", f"{arn!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/NAME)")
                for i, arn in enumerate(v)
                if not ROLE_ARN_RE.match(arn)
            ]
        )
        return v

    @field_validator("addon_versions")
    @classmethod
    def _addons(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(EKS_ADDONS))
        if unknown:
            raise ValueError(f"unknown add-on(s) {', '.join(unknown)}; pin only {', '.join(EKS_ADDONS)}")
        blank = sorted(name for name, version in v.items() if not version.strip())
        if blank:
            raise ValueError(
                f"no version for {', '.join(blank)}; give one EKS offers (aws eks describe-addon-versions "
                f"--addon-name {blank[0]}), or remove it (then this project's pin or EKS's default runs)"
            )
        check(
            [
                (
                    name,
                    f"{version!r} is not an EKS add-on version, which EKS spells vMAJOR.MINOR.PATCH-eksbuild.N "
                    f"(e.g. {version_text(core) if core else 'v1.11.1'}-eksbuild.1); give one EKS offers (aws eks "
                    f"describe-addon-versions --addon-name {name})",
                )
                for name, version in v.items()
                if not ADDON_VERSION_RE.match(version)
                for core in [addon_version_tuple(version.strip())]
            ]
        )
        return v

    @field_validator("service_cidr")
    @classmethod
    def _service_cidr(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        why = cidr_problem(v)
        if why:
            raise ValueError(why)
        net = ipv4(v)
        assert net is not None
        low, high = SERVICE_CIDR_PREFIXES
        if not low <= net.prefixlen <= high:
            raise ValueError(f"EKS accepts /{low}../{high}, got /{net.prefixlen}")
        if not any(net.subnet_of(ipaddress.IPv4Network(b)) for b in SERVICE_CIDR_BLOCKS):
            raise ValueError(
                f"{v} is not within {', '.join(SERVICE_CIDR_BLOCKS[:-1])} or {SERVICE_CIDR_BLOCKS[-1]}, where EKS "
                f"takes a service range ({SOURCES['eks-kubernetes-network-config'].url}); use a block inside one, "
                "such as 172.20.0.0/16"
            )
        return v

    @property
    def public_cidrs(self) -> Optional[list[str]]:
        """The CIDRs sent to EKS: only with a public endpoint (pulumi-eks refuses them otherwise)."""
        return list(self.public_access_cidrs) if self.endpoint_public_access else None

    @property
    def support_type(self) -> str:
        """``upgradePolicy.supportType``: STANDARD unless the stack opts in to extended support."""
        return "EXTENDED" if self.extended_support else "STANDARD"

    @model_validator(mode="after")
    def _endpoint(self) -> "ClusterConfig":
        problems = []
        if self.endpoint_public_access and not self.public_access_cidrs:
            problems.append(
                (
                    "publicAccessCidrs",
                    "empty while endpointPublicAccess is true; list the CIDRs allowed to reach the API server, "
                    "or set endpointPublicAccess: false",
                )
            )
        if not self.endpoint_public_access and not self.private_access_cidrs:
            problems.append(
                (
                    "privateAccessCidrs",
                    "empty while endpointPublicAccess is false: nothing but the cluster's nodes could reach the API "
                    "server, `pulumi up` and kubectl included; list the networks they run from (a bastion's subnet, "
                    "a VPN's range), or set endpointPublicAccess: true",
                )
            )
        if not self.endpoint_public_access and "public_access_cidrs" in self.model_fields_set:
            problems.append(
                (
                    "publicAccessCidrs",
                    "only applies to a public endpoint (EKS refuses it with endpointPublicAccess: false); "
                    "remove it, or set endpointPublicAccess: true",
                )
            )
        if past_standard_support(self.kubernetes_version) and not self.extended_support:
            v = KUBERNETES_VERSIONS[self.kubernetes_version]
            problems.append(
                (
                    "kubernetesVersion",
                    f"{v.minor} left EKS standard support on {v.end_of_standard.isoformat()}: EKS would "
                    f"bill extended support (${SERVICE_PRICES['eks-cluster-extended'].usd:.2f} instead of "
                    f"${SERVICE_PRICES['eks-cluster'].usd:.2f} per cluster-hour until "
                    f"{v.end_of_extended.isoformat()}); set @{{extendedSupport}}: true to run it (a running cluster "
                    "moves one minor per `pulumi up`, so a step through a minor past standard support needs it "
                    "too), or choose one of "
                    f"{', '.join(m for m in SUPPORTED_KUBERNETES_VERSIONS if in_standard_support(m, today()))} for a "
                    "new cluster (if EKS already upgraded the cluster, set the minor it runs and run `pulumi up "
                    "--refresh`)",
                )
            )
        check(problems)
        return self
