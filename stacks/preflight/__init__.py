"""Preflight checks against the AWS account, run before any resource is created.

The config loader (:mod:`stacks.config`) checks a stack's configuration on its own; these checks ask
the account whether it can actually run it:

1. **Offerings**: every instance type of every node group (the system group included) is offered in
   each of the group's zones (``ec2:DescribeInstanceTypeOfferings``); a failure names the zones of
   the region where the type *is* offered.
2. **vCPU quotas**: per quota class (P, G, Standard, ...) and market, the account's quota covers the
   sum over groups of ``maxSize x vCPUs`` (``service-quotas:GetServiceQuota``, falling back to
   ``GetAWSDefaultServiceQuota`` when the account has no applied value). SPOT groups count against
   the Spot code, ON_DEMAND groups (with or without an On-Demand Capacity Reservation) against the
   On-Demand code; CAPACITY_BLOCK groups are not counted (a Capacity Block is a prepaid reservation).
   The quota is a limit, not free capacity: instances already running in the account count too.
3. **Capacity reservations**: a group's ``capacityReservationId`` exists, is ``active`` (a
   ``scheduled`` Capacity Block passes as information, with its start and end: the environment is built
   before the block starts and the group takes its sizes at the start; a scheduled On-Demand Capacity
   Reservation fails with its start time), matches the group's instance type and zone, and has
   ``ReservationType`` ``capacity-block`` exactly when ``capacityType`` is CAPACITY_BLOCK
   (``ec2:DescribeCapacityReservations``).
4. **EFA**: for EFA-enabled groups, EC2 says the type supports EFA and its ``MaximumEfaInterfaces``
   equals the interface count of the plan's EFA profile (which sizes the launch template, the pods'
   requests and the autoscaler's tags).
5. **Add-on versions**: for every EKS add-on the stack relies on a version of (``stacks.config.addons``: the VPC
   CNI's NetworkPolicy and efa-only interfaces, the node monitoring agent's ``dcgmAgent.tolerations``, the CloudWatch
   add-on's Pod Identity and configuration, the instance types their DCGM DaemonSets run on, the CSI drivers' Pod
   Identity), the version the cluster will run is offered for its Kubernetes version and has it: a pinned version
   (``cluster.addonVersions``, else this project's pin, ``components/catalog/addons.py``) must be one EKS offers, and
   without a pin EKS's *default* version must have it (``eks:DescribeAddonVersions``); a failure names the newest
   version to pin.
6. **Admin roles**: no ``cluster.adminRoleArns`` entry is the identity running the deployment
   (``sts:GetCallerIdentity``; an assumed-role session counts as its role): EKS already makes the
   cluster creator admin, and a second access entry for it fails with ``ResourceInUseException``.
7.-10. **FSx for Lustre** (``storage.backend: fsx``, :mod:`~stacks.preflight.fsx`): the throughput tier is
   offered, a named data bucket exists in the stack's Region, the Lustre storage quota covers the existing
   file systems plus the new one, and an adopted file system exists where the plan puts it with no
   association already on the directories the stack links.

Information (never a failure): for SPOT groups, the current Spot price of each type in the group's zones
(``ec2:DescribeSpotPriceHistory``) and how far below On-Demand it is, next to the discount the cost estimate
uses (``spotDiscount``).

Every check yields a :class:`Finding` (ok or not) keyed by the config key it is about, with a
message that says what to do. :func:`check` raises :class:`PreflightError` when any fails.

All AWS calls go through clients made from one ``boto3`` session
(``session.client(service, region_name=region)``), so the standard ``AWS_ENDPOINT_URL`` and
credential settings apply. Read-only permissions needed: ``ec2:DescribeAvailabilityZones``,
``ec2:DescribeSubnets``, ``ec2:DescribeInstanceTypeOfferings``, ``ec2:DescribeInstanceTypes``,
``ec2:DescribeCapacityReservations``, ``ec2:DescribeSpotPriceHistory``, ``servicequotas:GetServiceQuota``,
``servicequotas:GetAWSDefaultServiceQuota``, ``eks:DescribeAddonVersions``; for FSx stacks also
``s3:GetBucketLocation``, ``fsx:DescribeFileSystems`` and ``fsx:DescribeDataRepositoryAssociations``
(and ``sts:GetCallerIdentity``, which needs no permission).

Standalone: ``python -m stacks.preflight --stack NAME [--region R] [--stack-file PATH]`` validates the
configuration offline, then prints the report; exit status 0 when everything passed, 1 when a check
failed, 2 on a configuration error.

Modules: :mod:`~stacks.preflight.aws` (the AWS calls), :mod:`~stacks.preflight.checks` (the checks,
reading the plan), :mod:`~stacks.preflight.fsx` (the FSx checks), :mod:`~stacks.preflight.findings` (results
and errors), :mod:`~stacks.preflight.cli`.
"""

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
