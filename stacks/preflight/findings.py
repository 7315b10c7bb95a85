"""What a preflight check reports, and the errors it raises."""

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, Sequence

from stacks.config import NAMESPACE, ConfigError

#: Appended to messages about checks that could not run.
SKIP_HINT = f"(to deploy without these checks, set {NAMESPACE}:preflight.enabled: false)"


@dataclass(frozen=True)
class Finding:
    """The outcome of one preflight check.

    ``key`` is the config key the check is about, e.g. ``eks-training:nodeGroups.gpu.instanceTypes[0]``;
    ``message`` says what was found and, for a failure, what to do.
    """

    ok: bool
    key: str
    message: str


class PreflightError(ConfigError):
    """Raised by :func:`check` when at least one preflight check failed; nothing was created."""

    def __init__(self, findings: Sequence[Finding]):
        self.findings = list(findings)
        failed = [f for f in self.findings if not f.ok]
        super().__init__([f"{f.key}: {f.message}" for f in failed])
        text = "\n".join(f"  - {f.key}: {f.message}" for f in failed)
        self.args = (
            f"preflight checks against the AWS account failed ({len(failed)} of {len(self.findings)}); "
            f"no resource was created:\n{text}",
        )

    def __str__(self) -> str:
        return str(self.args[0])


class AwsCallError(Exception):
    """An AWS API call failed (access denied, throttled, not implemented, unreachable, ...)."""

    def __init__(self, operation: str, code: str, message: str):
        self.operation = operation
        self.code = code
        self.message = message
        super().__init__(f"{operation} failed: {code}: {message}")


def join_names(items: Sequence[str]) -> str:
    """``a, b`` or ``(none)``."""
    return ", ".join(items) if items else "(none)"


def short_message(message: str, status: Optional[int]) -> str:
    """An error message fit for one report line (an HTML error page becomes its HTTP status)."""
    if "<html" in message.lower() or "<!doctype" in message.lower():
        return f"an HTML error page{f' (HTTP {status})' if status else ''} instead of an AWS response"
    message = " ".join(message.split())
    return message if len(message) <= 300 else message[:297] + "..."


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def format_time(value: Any) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM UTC``."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return str(value)


def format_report(findings: Sequence[Finding]) -> str:
    """One line per finding (``OK`` or ``FAIL``, key, message) and a summary line."""
    lines = [f"{'OK  ' if f.ok else 'FAIL'} {f.key}: {f.message}" for f in findings]
    failed = sum(1 for f in findings if not f.ok)
    if failed:
        lines.append(f"preflight: {failed} of {len(findings)} check(s) FAILED; fix them before `pulumi up`")
    else:
        lines.append(f"preflight: all {len(findings)} check(s) passed")
    return "\n".join(lines)


def unreadable_quota(k: str, label: str, code: str, name: str, what: str, exc: Exception) -> Finding:
    """The failed finding of a quota ``code`` (``name``) Service Quotas would not give: ``label`` says whose
    (``EKS``, ``FSx``...), ``what`` what it was needed for."""
    return Finding(
        False,
        k,
        f"could not read the {label} quota {code} ({name}) for {what} ({exc}); check it in the Service Quotas "
        f"console (the caller needs servicequotas:GetServiceQuota and servicequotas:GetAWSDefaultServiceQuota) "
        f"{SKIP_HINT}",
    )
