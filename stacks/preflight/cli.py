"""``python -m stacks.preflight --stack NAME``: the preflight report of a stack, without ``pulumi up``."""

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

import boto3

from stacks.config import ConfigError
from stacks.preflight.checks import available_zones, run_preflight, stack_region
from stacks.preflight.findings import AwsCallError, format_report
from stacks.stackfile import StackLoadError, plan_stack
from stacks.zones import choose_zones


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the report; exit status 0 when every check passed, 1 when one failed, 2 on a configuration
    error (found before any AWS call)."""
    parser = argparse.ArgumentParser(
        prog="python -m stacks.preflight",
        description="Check the AWS account can run a stack (offerings, vCPU quotas, capacity reservations, EFA, "
        "VPC CNI, FSx tier, bucket, Lustre quota) before `pulumi up`. The configuration is validated first, offline. Exit 0: all passed, 1: a check "
        "failed, 2: configuration error.",
    )
    parser.add_argument("--stack", required=True, help="stack name (reads Pulumi.<stack>.yaml)")
    parser.add_argument("--region", help="AWS region (default: the stack's aws:region, else the AWS profile's)")
    parser.add_argument("--stack-file", type=Path, help="stack file to read (default: Pulumi.<stack>.yaml in the repo)")
    args = parser.parse_args(argv)

    try:
        config, plan = plan_stack(args.stack, args.stack_file, region=args.region)
    except StackLoadError as exc:
        print(str(exc), file=sys.stderr)
        return 2

    region_setting = config.get("aws:region")
    session = boto3.session.Session(region_name=region_setting if isinstance(region_setting, str) else None)
    region = stack_region(session)
    if region is None:
        print("error: no AWS region: set aws:region in the stack file, pass --region, or set AWS_REGION", file=sys.stderr)
        return 2
    zones = None
    if plan.config.network is not None:
        try:
            zones = choose_zones(plan.config, available_zones(session, region))
        except AwsCallError as exc:
            print(f"error: cannot reach EC2 in {region}: {exc}", file=sys.stderr)
            return 1
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            return 2
    findings = run_preflight(plan, zones, session)
    print(f"preflight for stack {args.stack} in {region}:")
    print(format_report(findings))
    return 1 if any(not f.ok for f in findings) else 0
