"""The EKS control plane section (``cluster``)."""

from typing import Literal, Optional, get_args

from pydantic import Field, field_validator, model_validator

from components.catalog import DEFAULT_KUBERNETES_VERSION, EKS_ADDONS, SUPPORTED_KUBERNETES_VERSIONS
from stacks.config.base import ROLE_ARN_RE, Model, cidr_problem, ipv4
from stacks.config.errors import check

#: Control-plane log types EKS can send to CloudWatch (listed once).
LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
LOG_TYPES: tuple[str, ...] = get_args(LogType)
DEFAULT_LOG_TYPES: tuple[LogType, ...] = ("api", "audit", "authenticator")


class ClusterConfig(Model):
    """The EKS control plane (key ``cluster``)."""

    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    endpoint_public_access: bool = True
    public_access_cidrs: list[str] = Field(default_factory=lambda: ["0.0.0.0/0"])
    admin_role_arns: list[str] = Field(default_factory=list)
    log_types: list[LogType] = Field(default_factory=lambda: list(DEFAULT_LOG_TYPES))
    service_cidr: Optional[str] = None
    create_oidc_provider: bool = False
    addon_versions: dict[str, str] = Field(default_factory=dict)

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        if v not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"{v!r} is not supported; use one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}")
        return v

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        check([(f"[{i}]", why) for i, c in enumerate(v) if (why := cidr_problem(c))])
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
        if not 12 <= net.prefixlen <= 24:
            raise ValueError(f"EKS accepts /12../24, got /{net.prefixlen}")
        return v

    @model_validator(mode="after")
    def _endpoint(self) -> "ClusterConfig":
        if self.endpoint_public_access and not self.public_access_cidrs:
            check(
                [
                    (
                        "publicAccessCidrs",
                        "empty while endpointPublicAccess is true; list the CIDRs allowed to reach the API server, "
                        "or set endpointPublicAccess: false",
                    )
                ]
            )
        return self
