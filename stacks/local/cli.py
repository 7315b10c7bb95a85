"""``python -m stacks local --stack NAME`` (alias ``python -m stacks.local``): run a stack's jobs on this machine,
without AWS (see :mod:`stacks.local`)."""

import argparse
import json
import shlex
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from components.workloads.pytorch import LAUNCHER_DONE_MARKER
from stacks.cli import EXIT_FAILED, EXIT_OK, CommandError, add_stack_options, command, load_stack, parser_for
from stacks.config import NAMESPACE
from stacks.local.report import LocalRunError
from stacks.local.runner import LocalRunner
from stacks.stackfile import REPO

if TYPE_CHECKING:
    from stacks.plan import Plan


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise CommandError(f"error: {flag} takes NAME=VALUE, got {value!r}")
        out[key] = rest
    return out


def _jobs_with_args(config: dict[str, Any], extra: Mapping[str, Sequence[str]], resume: Mapping[str, str]) -> None:
    """Edit the stack's configuration as the user's stack file would be edited: a job's ``--args`` appended to its
    ``args`` (so the plan gives the run its own id and folder, as ``pulumi up`` would for those args), and a resumed
    job's ``outputDir`` set to its latest run's folder (its run continues there, with the new arguments)."""
    jobs = config.get(f"{NAMESPACE}:jobs")
    if not isinstance(jobs, dict):
        return
    jobs = {k: dict(v) if isinstance(v, dict) else v for k, v in jobs.items()}
    for name, entry in jobs.items():
        if not isinstance(entry, dict):
            continue
        if name in resume:
            entry["outputDir"] = resume[name]
        elif name in extra:
            entry["args"] = [*(entry.get("args") or []), *extra[name]]
    config[f"{NAMESPACE}:jobs"] = jobs


@command
def main(argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    """Run the jobs; exit status 0 when every job completed, 1 when one failed, 2 on a configuration or usage error,
    130 when interrupted (Ctrl-C), 143 when stopped (SIGTERM)."""
    args = _parser(prog).parse_args(argv)

    work = (args.work or Path(".local") / args.stack).resolve()
    extra = {k: shlex.split(v) for k, v in _pairs(args.args, "--args").items()}
    try:
        runs = json.loads((work / "runs.json").read_text())
    except (OSError, ValueError):
        runs = {}
    resume = {
        j: str(runs[j]["outputDir"]) for j in args.resume if isinstance(runs.get(j), dict) and runs[j].get("outputDir")
    }
    config, plan = load_stack(args, edit=lambda c: _jobs_with_args(c, extra, resume))
    venvs = _check_names(args, plan, extra)
    missing = [j for j in args.resume if j not in resume]
    runner = LocalRunner(
        plan=plan,
        work=work,
        repo=REPO,
        datasets={k: Path(v) for k, v in _pairs(args.dataset, "--dataset").items()},
        # jobs of the stack file got theirs in the plan; resumed jobs and benchmark experiments get them at launch
        extra_args={k: v for k, v in extra.items() if k in resume or k not in (config.get(f"{NAMESPACE}:jobs") or {})},
        code={k: Path(v).resolve() for k, v in _pairs(args.code, "--code").items()},
        venvs=venvs,
        nodes=args.nodes,
        timeout_s=None if args.timeout_minutes is None else 60.0 * args.timeout_minutes,
        fresh=frozenset(args.fresh),
        progress=not args.quiet,
    )
    for job in missing:
        runner.say(f"--resume {job}: no earlier run of {job} in {work}; a new run")
    # a finished run its launcher skips (a pytorch job on the training image), not one started over with --fresh;
    # every job named is one of the plan's (_check_names)
    finished = [
        j
        for j in resume
        if j in extra and j not in args.fresh and runner.finished_before(plan.jobs[j], runner.shared / resume[j])
    ]
    for job in finished:
        runner.say(
            f"--resume {job}: its run in {runner.shared / resume[job]} finished ({LAUNCHER_DONE_MARKER}), so it runs "
            "nothing and --args do not reach it; to train on from its checkpoint, start a new run (--args alone) whose "
            "script reads that folder's checkpoint"
        )
    # SIGTERM (`timeout`, a CI runner's cancel, `kill`) stops the jobs as Ctrl-C does: without a handler Python dies
    # on it at once, skipping the runner's clean-up, and the job's processes, in their own sessions, run on orphaned
    # (a crash-looping torchrun restarted its workers for good).
    previous = _stop_on_sigterm()
    try:
        runner.run(args.job or None)
    except LocalRunError as exc:
        raise CommandError(f"error: {exc.report()}", EXIT_FAILED) from exc
    except KeyboardInterrupt:  # Ctrl-C: the runner stopped its jobs on the way out
        raise CommandError(f"interrupted: {STOPPED}", EXIT_INTERRUPTED) from None
    except _Terminated:  # SIGTERM: the same way out
        raise CommandError(f"stopped (SIGTERM): {STOPPED}", EXIT_TERMINATED) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


def _parser(prog: Optional[str]) -> argparse.ArgumentParser:
    """The command's arguments and help."""
    parser = parser_for(
        "local",
        prog,
        "Run a stack's jobs on this machine before paying for a cluster: the pods' commands and "
        "environments as the components build them, N local processes (CPU) standing in for the nodes, a local etcd "
        "for the PyTorch rendezvous, a local folder for the shared volume, the datasets staged from their source (or "
        "given), jobs in the order their `after` gives. It prints a line when a job starts and ends, the job's "
        "progress while it runs and the results at the end. The work folder keeps its state between runs: a run "
        "that finished is not run again and an interrupted one resumes; other --args make a run of their own. Exit "
        "0: all jobs completed, 1: a job failed (the reason and its fix on one line), 2: configuration or usage error, "
        "130: interrupted (Ctrl-C), 143: stopped (SIGTERM); the same command resumes.",
    )
    add_stack_options(parser)
    parser.add_argument(
        "--job",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this job (repeat for several; default: every job, in order)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        help="folder for the shared volume, logs and etcd, kept between runs (default .local/<stack>)",
    )
    parser.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="use a local folder for a dataset instead of staging it from its source (no network "
        "needed). For CIFAR-10 (the default dataset): a folder holding cifar-10-batches-py/ with "
        "data_batch_1 ... data_batch_5, test_batch and batches.meta (what cifar-10-python.tar.gz "
        "extracts to), or that folder itself; for another dataset, the files its source unpacks to",
    )
    parser.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="JOB=ARGS",
        help="arguments appended after a job's args (with argparse, a later flag wins), e.g. --args "
        "'train=--epochs 1': a run of its own (its own output folder), unless --resume JOB",
    )
    parser.add_argument(
        "--resume",
        action="append",
        default=[],
        metavar="JOB",
        help="continue the job's latest run here (its output folder and checkpoints) with this "
        "command's --args, instead of a run of their own",
    )
    parser.add_argument(
        "--fresh",
        action="append",
        default=[],
        metavar="JOB",
        help="start the job's run over: its existing output folder (a finished or failed run) is moved aside first",
    )
    parser.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="JOB=PATH",
        help="a local folder standing for a job's code download (/workspace in the pods): needed "
        "for code: s3://...; a job whose code is a folder of the project runs in that folder",
    )
    parser.add_argument(
        "--venv",
        action="append",
        default=[],
        metavar="IMAGE=DIR",
        help="a virtualenv standing for an image's Python (e.g. tensorflow=.venv-tf, one with the "
        "image's packages); default: the Python running this",
    )
    parser.add_argument("--nodes", type=int, help="processes per multi-node job (default: the job's node count)")
    parser.add_argument("--timeout-minutes", type=float, help="per job (default: the job's timeoutHours)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines from the jobs' logs")
    return parser


def _check_names(args: argparse.Namespace, plan: "Plan", extra: Mapping[str, Any]) -> dict[str, Path]:
    """Refuse a flag that names no job, dataset or image of the stack, or a count below 1; returns ``--venv``'s
    folders."""
    for flag, names in (
        ("--args", extra),
        ("--resume", args.resume),
        ("--fresh", args.fresh),
        ("--code", dict(_pairs(args.code, "--code"))),
    ):
        unknown = sorted(set(names) - set(plan.jobs))
        if unknown:
            raise CommandError(
                f"error: {flag} {', '.join(unknown)}: no such job in this stack; its jobs: "
                f"{', '.join(plan.jobs) or 'none'}"
            )
    unknown = sorted(set(_pairs(args.dataset, "--dataset")) - set(plan.datasets))
    if unknown:
        raise CommandError(
            f"error: --dataset {', '.join(unknown)}: no job of this stack reads such a dataset; its datasets: "
            f"{', '.join(plan.datasets) or 'none'}"
        )
    venvs = {k: Path(v).resolve() for k, v in _pairs(args.venv, "--venv").items()}
    unknown = sorted(set(venvs) - set(plan.images))
    if unknown:
        raise CommandError(
            f"error: --venv {', '.join(unknown)}: no such image in this stack; its images: {', '.join(plan.images)}"
        )
    if args.nodes is not None and args.nodes < 1:
        raise CommandError("error: --nodes must be >= 1")
    return venvs


#: A command ended by Ctrl-C (SIGINT), as a shell reports it.
EXIT_INTERRUPTED = 128 + signal.SIGINT
#: A command ended by SIGTERM.
EXIT_TERMINATED = 128 + signal.SIGTERM
#: What a stopped run's last line says, whichever signal stopped it.
STOPPED = "the jobs were stopped; run the same command again to resume from their last checkpoints"


class _Terminated(SystemExit):
    """SIGTERM, raised in the main thread (exit status 143)."""


def _stop_on_sigterm() -> Any:
    """Have SIGTERM raise :class:`SystemExit` (143, as a process ended by it) in the main thread, so the runner's
    ``finally`` blocks stop every pod; returns the handler it replaced (``None`` outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, _frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop: a second SIGTERM must not cut the clean-up short
        raise _Terminated(128 + signum)

    return signal.signal(signal.SIGTERM, stop)
