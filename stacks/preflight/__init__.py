"""Preflight checks against the AWS account, run before any resource is created.

The config loader (:mod:`stacks.config`) checks a stack's configuration on its own; these checks ask the account
whether it can run it: instance type offerings, vCPU quotas, capacity reservations, EFA, add-on versions, admin roles
and, for FSx, the throughput tier, the bucket, the Lustre quota and an adopted file system; Spot prices are
information. Each check yields a :class:`Finding` keyed by its config key, with what to do; :func:`check` raises
:class:`PreflightError` when any fails. All AWS calls are read-only, through one ``boto3`` session.

Modules: :mod:`~stacks.preflight.aws` (the AWS calls), :mod:`~stacks.preflight.checks` (the checks, reading the
plan), :mod:`~stacks.preflight.addons` and :mod:`~stacks.preflight.fsx` (the add-on and FSx checks),
:mod:`~stacks.preflight.findings` (results and errors), :mod:`~stacks.preflight.cli` (``python -m stacks
preflight``). Each check, and the permissions it needs: docs/explanation/preflight.md."""

from stacks.preflight.aws import AwsClient
from stacks.preflight.checks import available_zones, check, run_preflight
from stacks.preflight.cli import main
from stacks.preflight.findings import AwsCallError, Finding, PreflightError, format_report

__all__ = [
    "AwsCallError",
    "AwsClient",
    "Finding",
    "PreflightError",
    "available_zones",
    "check",
    "format_report",
    "main",
    "run_preflight",
]
