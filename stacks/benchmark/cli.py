"""The command line of ``python -m stacks benchmark`` (alias ``python -m stacks.benchmark``), and the real objects
behind the driver's interfaces: the Pulumi Automation API's stack (the local program in this repository) and the run's
folder in S3 (boto3)."""

import argparse
import datetime as dt
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence, TextIO

from stacks.benchmark import driver, layout
from stacks.cli import CommandError, add_stack_options, command, parser_for
from stacks.config.benchmark import RUN_ENV, RUN_RE
from stacks.costs import estimate, job_hourly, money
from stacks.kinds import KINDS
from stacks.plan import Plan
from stacks.stackfile import plan_stack, stack_file_for

DESCRIPTION = (
    "Run a stack's benchmark from one command: pulumi up (the experiments start side by side), follow each "
    "experiment's phase and elapsed time, wait for the collector that copies every experiment's configuration, "
    "manifests, logs and metrics to S3, write a summary (a table here; CSV, JSON and a PNG chart of throughput, time "
    "and cost in the run's S3 folder and locally), then pulumi destroy, also after a failed experiment, a timeout or "
    "Ctrl-C, unless --keep. Needs the Pulumi CLI and AWS credentials (like pulumi up); --dry-run needs neither."
)
EPILOG = (
    "exit status: 0 every experiment succeeded; 1 an experiment failed or timed out; 2 configuration error; "
    "3 pulumi up (or destroy) failed; 4 a tool the run needs is missing here (the Pulumi CLI, matplotlib), nothing "
    "created; 124 the driver's --timeout passed; 130 interrupted (Ctrl-C)."
)


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The command line's parser (every option documented). No ``--stack-file``: ``pulumi up`` reads
    ``Pulumi.<stack>.yaml`` from the project's folder, so the run's stack is named, not given as a file."""
    parser = parser_for("benchmark", prog, DESCRIPTION, EPILOG)
    add_stack_options(
        parser, stack_file=False, stack_help="the stack to run (its stack file has an eks-training:benchmark section)"
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the environment up after the run (default: pulumi destroy in any case; the "
        "stack's benchmark.keep.environment: true does the same)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (experiments, nodes, results location, cost per hour) and create nothing",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="MINUTES",
        help="stop following after this many minutes, then summarise nothing and tear down (default: "
        "the collector's timeout, i.e. the longest experiment's timeoutHours + 1 hour, plus 15 "
        "minutes)",
    )
    parser.add_argument(
        "--poll-seconds", type=float, default=30.0, help="how often the progress is read from S3 (default 30)"
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="local folder for the summary files (default benchmark-results/<run>/; they are always "
        "written to <results>/<run>/summary/ too)",
    )
    parser.add_argument(
        "--run",
        default=None,
        help="the run id, which names the results folder (default run-<UTC time>, a fresh folder per run)",
    )
    return parser


def parse_args(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> argparse.Namespace:
    """The command line."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.timeout is not None and args.timeout <= 0:
        parser.error("--timeout must be > 0 minutes")
    if args.poll_seconds <= 0:
        parser.error("--poll-seconds must be > 0")
    if args.run is not None and not RUN_RE.match(args.run):
        parser.error(
            f"--run {args.run!r}: 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        )
    return args


def new_run_id(now: Optional[dt.datetime] = None) -> str:
    """``run-YYYYMMDD-HHMMSS`` (UTC)."""
    return (now or dt.datetime.now(dt.UTC)).strftime("run-%Y%m%d-%H%M%S")


def load_plan(stack: str) -> Plan:
    """The stack's plan, from its stack file, offline (as ``pulumi up`` would validate it)."""
    return plan_stack(stack)[1]


def describe(plan: Plan, stack: str, keep: bool) -> str:
    """What a run of the stack would do (``--dry-run``)."""
    bench = plan.config.benchmark
    assert bench is not None
    cost = estimate(plan)
    where = (
        f"s3://{bench.bucket}/{bench.run_prefix}"
        if bench.bucket
        else f"s3://<a bucket the stack creates, kept on destroy>/{bench.run_prefix}"
    )
    lines = [
        f"benchmark of stack {stack}, run {bench.run}",
        f"  results: {where}",
        f"  cluster {plan.config.cluster_name} in "
        f"{'a new VPC' if plan.config.network is not None else 'an existing VPC'}; environment "
        f"{money(cost.running)} running, {money(cost.idle)} idle",
        "  experiments (side by side, none waits for another):",
    ]
    for job in plan.experiments:
        c = job.config
        program = KINDS[job.kind].program_text(c)
        hourly = job_hourly(job)
        lines.append(
            f"    {job.name}: {job.kind}, {job.nodes} x {job.group.profile.instance.name} (group {job.group.name}), "
            f"{KINDS[job.kind].processes_text(job.procs_per_node)} per node, image {job.image.name}, "
            + ("an unknown price (a type has no price)" if hourly is None else f"${hourly:.4f}/h of nodes")
        )
        lines.append(f"      {program} {' '.join(c.args)}".rstrip())
        lines.append(f"      output {job.output_dir}")
    demand: dict[str, int] = {}
    for job in plan.experiments:
        demand[job.group.name] = demand.get(job.group.name, 0) + job.nodes
    for group, nodes in demand.items():
        g = plan.group(group)
        if group != "system" and nodes > g.max_size:
            lines.append(
                f"  note: the experiments need {nodes} {group} nodes at once and the group's maxSize is "
                f"{g.max_size}: some wait for nodes the others free"
            )
    lines.append(
        f"  collector: waits up to {bench.collector_timeout_hours:g} h, keeps metrics, logs and "
        f"{', '.join(bench.keep.outputs) or 'no other files'}"
    )
    lines.append(
        "  afterwards: "
        + (
            "the environment is kept"
            if keep or bench.keep.environment
            else f"pulumi destroy --stack {stack} (the results bucket stays)"
        )
    )
    return "\n".join(lines) + "\n"


def missing_tools() -> list[str]:
    """What a real run needs on this machine and lacks, each with how to get it (checked before ``pulumi up``, so
    nothing is paid for a run whose summary could not be written)."""
    missing = []
    if shutil.which("pulumi") is None:
        missing.append("the Pulumi CLI (`pulumi` is not on PATH): install it, https://www.pulumi.com/docs/install/")
    if importlib.util.find_spec("matplotlib") is None:
        missing.append(
            "matplotlib, which draws the summary's chart: pip install -r requirements.txt (or pip install matplotlib)"
        )
    return missing


def automation_stack(stack: str, env: Mapping[str, str]) -> driver.StackLike:
    """The stack of the local program (the ``Pulumi.yaml`` beside the stack's file: your project, or this
    repository) through the Automation API, its commands run with ``env`` (the run id) added to the environment."""
    from pulumi import automation as auto

    work_dir = str(stack_file_for(stack).parent)
    opts = auto.LocalWorkspaceOptions(work_dir=work_dir, env_vars=dict(env))
    return auto.create_or_select_stack(stack_name=stack, work_dir=work_dir, opts=opts)


class S3Store:
    """The run's folder in S3, with the caller's AWS credentials."""

    def __init__(self, target: driver.Target, client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("s3", region_name=target.region)
        self.client = client
        self.target = target

    def get_json(self, rel: str) -> Optional[dict[str, Any]]:
        try:
            body = self.client.get_object(Bucket=self.target.bucket, Key=self.target.prefix + rel)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        value = json.loads(body)
        return value if isinstance(value, dict) else None

    def put(self, rel: str, data: bytes, content_type: str) -> str:
        key = self.target.prefix + rel
        self.client.put_object(Bucket=self.target.bucket, Key=key, Body=data, ContentType=content_type)
        return f"s3://{self.target.bucket}/{key}"


@command
def main(
    argv: Optional[Sequence[str]] = None,
    *,
    prog: Optional[str] = None,
    out: TextIO = sys.stdout,
    open_stack: Optional[Callable[[str, Mapping[str, str]], driver.StackLike]] = None,
    open_store: Callable[[driver.Target], driver.ResultsStore] = S3Store,
) -> int:
    """Run the command; ``open_stack`` and ``open_store`` replace the Automation API and S3 (tests)."""
    args = parse_args(argv, prog)
    run = args.run or new_run_id()
    os.environ[RUN_ENV] = run  # the program reads it: the plan here and the one pulumi up evaluates agree
    plan = load_plan(args.stack)  # a stack that cannot be planned ends the command: EXIT_CONFIG
    bench = plan.config.benchmark
    if bench is None:
        raise CommandError(
            f"stack {args.stack} has no eks-training:benchmark section; add one (see Pulumi.benchmark.yaml)",
            driver.EXIT_CONFIG,
        )
    out.write(describe(plan, args.stack, args.keep))
    if args.dry_run:
        out.write("dry run: nothing was created\n")
        return driver.EXIT_OK
    missing = missing_tools() if open_stack is None else []
    if missing:
        raise CommandError(
            "error: the run needs, on this machine:\n"
            + "".join(f"  - {m}\n" for m in missing)
            + "nothing was created (--dry-run needs neither)",
            driver.EXIT_MISSING_TOOL,
        )
    timeout_s = args.timeout * 60 if args.timeout is not None else bench.collector_timeout_hours * 3600 + 900
    opts = driver.Options(
        stack=args.stack,
        keep=args.keep,
        timeout_s=timeout_s,
        poll_s=args.poll_seconds,
        output_dir=args.output_dir or Path.cwd() / "benchmark-results" / run,
    )
    factory = open_stack or automation_stack
    outcome = driver.run(opts, plan, lambda: factory(args.stack, {RUN_ENV: run}), open_store, out)
    if outcome.written:
        out.write("written:\n" + "".join(f"  {w}\n" for w in outcome.written if w.endswith(layout.SUMMARY_FILES)))
    return outcome.code
