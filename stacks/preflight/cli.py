"""``python -m stacks preflight --stack NAME`` (alias ``python -m stacks.preflight``): the preflight report of a stack,
without ``pulumi up``."""

from typing import Optional, Sequence

from stacks.cli import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    add_stack_options,
    command,
    load_stack,
    parser_for,
)
from stacks.config import ConfigError
from stacks.preflight.checks import run_preflight, stack_client
from stacks.preflight.findings import AwsCallError, format_report
from stacks.zones import choose_zones


@command
def main(argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    """Print the report; exit status 0 when every check passed, 1 when one failed, 2 on a configuration
    error (found before any AWS call)."""
    parser = parser_for(
        "preflight",
        prog,
        "Check the AWS account can run a stack (offerings, vCPU quotas, capacity reservations, EFA, "
        "VPC CNI, FSx tier, bucket, Lustre quota; on a running cluster, the minors it and its node groups run and "
        "the add-on versions for the minor), and this machine's AWS CLI, before `pulumi up`. "
        "The configuration is validated first, offline. "
        "Exit 0: all passed, 1: a check failed, 2: configuration error.",
    )
    add_stack_options(parser)
    parser.add_argument("--region", help="AWS region (default: the stack's aws:region)")
    args = parser.parse_args(argv)

    config, plan = load_stack(args, region=args.region)

    region = plan.config.region
    aws = None
    zones = None
    if plan.config.network is not None and not plan.config.jobs_only:
        aws, who = stack_client(plan)  # the zones of a new VPC are the account's
        if aws is None:
            raise CommandError(f"error: {who.message}", EXIT_FAILED)
        try:
            zones = choose_zones(plan.config, aws.available_zones())
        except AwsCallError as exc:
            raise CommandError(f"error: cannot reach EC2 in {region}: {exc}", EXIT_FAILED) from exc
        except ConfigError as exc:
            raise CommandError(exc.offline, EXIT_USAGE) from exc
    findings = run_preflight(plan, zones, client=aws)
    print(f"preflight for stack {args.stack} in {region}:")
    print(format_report(findings))
    return EXIT_FAILED if any(not f.ok for f in findings) else EXIT_OK
