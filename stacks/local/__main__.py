"""``python -m stacks.local --stack NAME``: run a stack's jobs on this machine, without AWS (see :mod:`stacks.local`)."""

import argparse
import shlex
import sys
from pathlib import Path
from typing import Optional, Sequence

from stacks.local.runner import LocalRunError, LocalRunner
from stacks.stackfile import REPO, StackLoadError, plan_stack, run_command


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: {flag} takes NAME=VALUE, got {value!r}")
        out[key] = rest
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the jobs; exit status 0 when every job completed, 1 when one failed, 2 on a configuration or usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m stacks.local",
        description="Run a stack's jobs on this machine before paying for a cluster: the pods' commands and "
        "environments as the components build them, N local processes (CPU) standing in for the nodes, a local etcd "
        "for the PyTorch rendezvous, a local folder for the shared volume, the datasets staged from their source (or "
        "given), jobs in the order their `after` gives. Exit 0: all jobs completed, 1: a job failed, 2: "
        "configuration or usage error.",
    )
    parser.add_argument("--stack", required=True, help="stack name (reads Pulumi.<stack>.yaml)")
    parser.add_argument("--stack-file", type=Path, help="stack file to read (default: Pulumi.<stack>.yaml in the repo)")
    parser.add_argument("--job", action="append", default=[], metavar="NAME",
                        help="run only this job (repeat for several; default: every job, in order)")
    parser.add_argument("--work", type=Path, help="folder for the shared volume, logs and etcd (default .local/<stack>)")
    parser.add_argument("--dataset", action="append", default=[], metavar="NAME=PATH",
                        help="use a local folder for a dataset instead of staging it from its source")
    parser.add_argument("--args", action="append", default=[], metavar="JOB=ARGS",
                        help="arguments appended to a job's (a later flag wins), e.g. --args 'train=--epochs 1'")
    parser.add_argument("--code", action="append", default=[], metavar="JOB=PATH",
                        help="a local folder standing for a job's code download (code: s3://...)")
    parser.add_argument("--venv", action="append", default=[], metavar="IMAGE=DIR",
                        help="a virtualenv standing for an image's Python (e.g. tensorflow=.venv-tf, one with the "
                        "image's packages); default: the Python running this")
    parser.add_argument("--nodes", type=int, help="processes per multi-node job (default: the job's node count)")
    parser.add_argument("--timeout-minutes", type=float, help="per job (default: the job's timeoutHours)")
    args = parser.parse_args(argv)

    try:
        config, plan = plan_stack(args.stack, args.stack_file)
    except StackLoadError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    venvs = {k: Path(v).resolve() for k, v in _pairs(args.venv, "--venv").items()}
    unknown = sorted(set(venvs) - set(plan.images))
    if unknown:
        print(f"error: --venv {', '.join(unknown)}: no such image in this stack; its images: {', '.join(plan.images)}",
              file=sys.stderr)
        return 2
    if args.nodes is not None and args.nodes < 1:
        print("error: --nodes must be >= 1", file=sys.stderr)
        return 2
    runner = LocalRunner(
        plan=plan,
        work=(args.work or Path(".local") / args.stack).resolve(),
        repo=REPO,
        datasets={k: Path(v) for k, v in _pairs(args.dataset, "--dataset").items()},
        extra_args={k: shlex.split(v) for k, v in _pairs(args.args, "--args").items()},
        code={k: Path(v).resolve() for k, v in _pairs(args.code, "--code").items()},
        venvs=venvs,
        nodes=args.nodes,
        timeout_s=None if args.timeout_minutes is None else 60.0 * args.timeout_minutes,
    )
    try:
        outputs = runner.run(args.job or None)
    except LocalRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for job, folder in outputs.items():
        print(f"[local] {job}: done, output in {folder}")
    return 0


if __name__ == "__main__":
    run_command(main)
