"""``python -m stacks.rehearse --stack NAME``: rehearse a stack on a simulated cluster before paying for a real one.

:func:`rehearse` reads and validates the stack file as ``pulumi up`` would, evaluates the program under the mocks
(:mod:`stacks.mocked`), starts a box with one node per desired node, and runs the rehearsal
(:mod:`stacks.box.rehearse`). It prints the timeline, each job's outcome, a failed pod's last log lines
(:func:`failed_pod_logs`), and the ``waitCommand``/``logsCommand`` outputs rewritten for the box (:func:`job_commands`).

Exit status: 0 when every job completed, 1 when the rehearsal failed, 2 on a bad stack file or ``--exit-code``.
``--keep`` leaves the box up; otherwise its operators are stopped and it is deleted.

The user's page: docs/how-to/rehearse.md."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from components.catalog.platform import DEFAULT_KUBERNETES_VERSION
from components.workloads.job_objects import JOB_OBJECTS
from stacks.box.api import BoxError
from stacks.box.build import BoxBuildError
from stacks.box.cluster import Box, add_box_options, log
from stacks.box.nodes import initial_size, plan_nodes
from stacks.box.podlogs import PodLogs, last_lines
from stacks.box.rehearse import Rehearsal, RehearsalError, steps_of
from stacks.box.session import Session
from stacks.box.timeline import Recorder, report
from stacks.cli import add_stack_options, command, parser_for
from stacks.config import NAMESPACE
from stacks.mocked import Evaluation, evaluate_config, resolve, started_blocks
from stacks.plan import NodeGroupPlan, Plan
from stacks.stackfile import StackLoadError, plan_stack

#: Commands of the stack's outputs that work against the box (per job, ``outputs.jobs.<job>``).
JOB_COMMANDS = ("waitCommand", "logsCommand")


def box_command(command: str, kubectl: Path, kubeconfig: Path) -> str:
    """``command`` (a shell line of the stack's outputs) with every ``kubectl`` it runs (each word ``kubectl``: a
    command of its own, after ``then`` or ``else``, or in a command substitution) pointed at the box: the box's own
    kubectl with ``--kubeconfig``."""
    own = f"{shlex.quote(str(kubectl))} --kubeconfig {shlex.quote(str(kubeconfig))}"
    return re.sub(r"(?<![\w./'\"-])kubectl(?=\s)", own, command)


def job_commands(outputs: Mapping[str, Any], kubectl: Path, kubeconfig: Path) -> dict[str, dict[str, str]]:
    """job -> {output name: the command against the box} for every job the stack exports."""
    jobs = resolve(outputs.get("jobs")) or {}
    out: dict[str, dict[str, str]] = {}
    for job, values in sorted(jobs.items()):
        out[job] = {k: box_command(str(resolve(values[k])), kubectl, kubeconfig) for k in JOB_COMMANDS if k in values}
    return out


def version_note(config: Mapping[str, Any]) -> Optional[str]:
    """A note when the stack's Kubernetes version (``cluster.kubernetesVersion``) is not the box's control plane's:
    the box builds the default minor only, so what it accepts and runs is that minor's."""
    version = str((config.get(f"{NAMESPACE}:cluster") or {}).get("kubernetesVersion") or DEFAULT_KUBERNETES_VERSION)
    if version == DEFAULT_KUBERNETES_VERSION:
        return None
    return (
        f"note: the box's control plane is Kubernetes {DEFAULT_KUBERNETES_VERSION}, the stack's cluster runs {version} "
        f"({NAMESPACE}:cluster.kubernetesVersion): this rehearsal shows what {DEFAULT_KUBERNETES_VERSION} accepts and "
        "runs"
    )


@command
def main(argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.run_ms <= 0 or args.timeout <= 0:
        parser.error("--run-ms and --timeout must be positive")
    exit_codes = _exit_codes(parser, args.exit_code)
    try:
        config, plan = plan_stack(args.stack, args.stack_file)
    except StackLoadError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if (refusal := _jobs_only_refusal(args.stack, plan)) is not None:
        print(refusal, file=sys.stderr)
        return 2
    evaluation = _evaluate(args.stack, args.stack_file, config, plan)
    if evaluation is None:
        return 1
    return rehearse(
        args.stack,
        config,
        plan,
        evaluation,
        name=args.name or f"rehearse-{args.stack}",
        workdir=args.workdir,
        timeout_s=args.timeout,
        run_ms=args.run_ms,
        keep=args.keep,
        log=log,
        exit_codes=exit_codes,
    )


def _parser(prog: Optional[str]) -> argparse.ArgumentParser:
    """The command's options: the stack's, the run's and the box's."""
    parser = parser_for(
        "rehearse",
        prog,
        "Run a stack's Kubernetes objects and jobs on a real control plane with simulated nodes "
        "(the cluster in a box), and print what ran where, what waited and why, and each job's outcome.",
    )
    add_stack_options(parser, stack_help="the stack to rehearse")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds the jobs have to complete (default 300)")
    parser.add_argument(
        "--run-ms",
        type=int,
        default=1000,
        help="how long each job's pods run before they exit 0, in milliseconds (default 1000)",
    )
    parser.add_argument(
        "--exit-code",
        action="append",
        default=[],
        metavar="JOB=CODE[:CONTAINER]",
        help="make the pods of the job named JOB (its Kubernetes name) exit with CODE, in CONTAINER "
        "only (default: every container), to rehearse a failure and the pod failure policy's "
        "answer to it; repeatable",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the box and its operators up (bring it down with python -m stacks.box down --name NAME)",
    )
    add_box_options(parser, name_default=None, name_help="the box's name (default rehearse-<stack>)")
    return parser


def _exit_codes(parser: argparse.ArgumentParser, items: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Each ``--exit-code JOB=CODE[:CONTAINER]`` by job; a malformed one ends the command with usage (status 2)."""
    exit_codes: dict[str, tuple[int, str]] = {}
    for item in items:
        parsed = _exit_code(item)
        if parsed is None:
            parser.error(f"--exit-code {item}: expected JOB=CODE[:CONTAINER] with CODE 1-255, e.g. train=2:worker")
        exit_codes[parsed[0]] = parsed[1]
    return exit_codes


def _jobs_only_refusal(stack: str, plan: Plan) -> Optional[str]:
    """Why a jobs-only stack (``cluster.stackReference``) cannot be rehearsed, and what to run instead; else None."""
    if (cluster_stack := plan.config.cluster.stack_reference) is None:
        return None
    return (
        f"error: stack {stack} is jobs-only (cluster.stackReference: {cluster_stack}): its jobs run on the "
        "queues of another stack's cluster, which the box does not have; rehearse that stack (its queues and its "
        f"own jobs) with python -m stacks rehearse --stack {cluster_stack.rsplit('/', 1)[-1]}, and check this one "
        "with python -m stacks plan"
    )


def _evaluate(stack: str, stack_file: Optional[Path], config: Mapping[str, Any], plan: Plan) -> Optional[Evaluation]:
    """The program evaluated under the offline mocks, as if the stack's Capacity Blocks had started; None (said in
    one line, as ``pulumi up`` would) when the program itself fails."""
    blocks = sorted(
        {r for g in plan.all_groups if g.capacity_type == "CAPACITY_BLOCK" and (r := g.capacity_reservation_id)}
    )
    if blocks:
        log(
            f"rehearsing as if Capacity Block {', '.join(blocks)} had started: on AWS, the jobs on its groups are made "
            "by the first `pulumi up` after it starts"
        )
    try:
        with started_blocks(blocks):
            return evaluate_config(stack, stack_file, config)
    except Exception as exc:  # noqa: BLE001 - the program itself failed: say so in one line, as pulumi up would
        print(
            f"error: the program failed for stack {stack} under the offline mocks: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return None


def rehearse(
    stack: str,
    config: Mapping[str, Any],
    plan: Plan,
    evaluation: Evaluation,
    *,
    name: str,
    workdir: Path,
    timeout_s: float,
    run_ms: int,
    keep: bool,
    log: Callable[[str], None],
    exit_codes: Optional[Mapping[str, tuple[int, str]]] = None,
) -> int:
    """Start a box with the plan's nodes, rehearse on it and report; returns the exit status."""
    steps = steps_of(evaluation.registrations)
    if not steps:
        print(f"stack {stack} registers no Kubernetes object: nothing to rehearse", file=sys.stderr)
        return 1
    jobs = {d["metadata"]["name"] for s in steps for d in s.docs if d["kind"] in JOB_OBJECTS}
    unknown = sorted(set(exit_codes or {}) - jobs)
    if unknown:
        print(
            f"error: --exit-code names no job of stack {stack}: {', '.join(unknown)} (its jobs: "
            f"{', '.join(sorted(jobs))})",
            file=sys.stderr,
        )
        return 2
    try:
        session = Session.build(name, workdir, keep=keep, log=log)
    except BoxBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    box = session.box
    nodes = plan_nodes(plan, plan.config.region)
    status, failure = 0, ""
    with session:
        try:
            start = time.monotonic()
            session.up()
            session.nodes(nodes)
            log(f"box {name} is up in {time.monotonic() - start:.1f} s with {len(nodes)} nodes; rehearsing {stack}")
            rehearsal = session.rehearse(plan, steps, default_run_ms=run_ms, exit_codes=exit_codes)
            recorder = Recorder(box, rehearsal.start)
            logs = PodLogs(box)
            try:
                error = session.run(timeout_s, recorder, logs)
                if error is not None:
                    raise BoxError(f"registering the device plugins' devices failed: {error}")
            except RehearsalError as exc:
                status, failure = 1, str(exc)
            _print_outcome(stack, config, plan, evaluation, box, rehearsal, recorder, logs, failure, len(nodes))
            if keep:
                _print_kept_box(box, evaluation, name, workdir)
            else:
                print(
                    "\nThe box is brought down (--keep leaves it up, with each job's waitCommand and logsCommand "
                    "pointed at it)."
                )
        except BoxError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


def _exit_code(item: str) -> Optional[tuple[str, tuple[int, str]]]:
    """``JOB=CODE[:CONTAINER]`` as ``(JOB, (CODE, CONTAINER))``, or ``None`` when it is not one (CODE 1-255)."""
    match = re.fullmatch(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?)=(\d{1,3})(?::([a-z0-9]([-a-z0-9]*[a-z0-9])?))?", item)
    if not match or not 0 < int(match.group(3)) < 256:
        return None
    return match.group(1), (int(match.group(3)), match.group(4) or "")


def _print_outcome(
    stack: str,
    config: Mapping[str, Any],
    plan: Plan,
    evaluation: Evaluation,
    box: Box,
    rehearsal: Rehearsal,
    recorder: Recorder,
    logs: PodLogs,
    failure: str,
    node_count: int,
) -> None:
    """The report: the box's nodes, notes and warnings, the timeline, then the failure with its pod's log or that
    every job completed."""
    print(
        f"Rehearsal of stack {stack} on {node_count} simulated nodes "
        f"({', '.join(_size(plan, g) for g in plan.all_groups)})\n"
    )
    note = version_note(config)
    if note:
        print(note + "\n")
    for warning in evaluation.warnings:  # what pulumi up prints under Diagnostics (jobs it leaves for later)
        print(f"warning: {warning}\n")
    print(report(rehearsal, recorder))
    print()
    if recorder.error is not None:
        print(f"note: the timeline may miss events after this error reading the box: {recorder.error}")
    if logs.error is not None:
        print(f"note: the box stopped writing the containers' logs after this error: {logs.error}")
    if failure:
        print(f"FAILED: {failure.split(chr(10) + 'timeline:')[0]}")
        for text in failed_pod_logs(box, rehearsal, recorder):
            print(text)
    else:
        print(
            f"Every job completed ({len(rehearsal.jobs)})."
            if rehearsal.jobs
            else "The stack has no jobs: every object it applies is ready."
        )


def _print_kept_box(box: Box, evaluation: Evaluation, name: str, workdir: Path) -> None:
    """How to reach the box left up, and each job's commands pointed at it."""
    kubectl, kubeconfig = box.binaries["kubectl"], box.kubeconfig
    print(
        f"\nThe box is up: {shlex.quote(str(kubectl))} --kubeconfig {shlex.quote(str(kubeconfig))} "
        f"get pods -A\nBring it down: python -m stacks.box down --name {name} --workdir "
        f"{shlex.quote(str(workdir))}"
    )
    for job, commands in job_commands(evaluation.outputs, kubectl, kubeconfig).items():
        for key, text in commands.items():
            print(f"  {job} {key}: {text}")


def _size(plan: Plan, group: NodeGroupPlan) -> str:
    """A group's nodes in the box, and why when its jobs scaled it past its desired size."""
    n = initial_size(plan, group)
    scaled = f", scaled from its desiredSize {group.desired_size} for its jobs" if n > group.desired_size else ""
    return f"{group.name}: {n}{scaled}"


def failed_pod_logs(box: Any, rehearsal: Any, recorder: Any, lines: int = 10) -> list[str]:
    """For each failed job, the last ``lines`` of the log of its last failed pod (of the container that failed), as
    ``kubectl logs --tail`` prints them from the box (:mod:`stacks.box.podlogs`)."""
    out = []
    for job, rec in sorted(rehearsal.jobs.items()):
        if rec.get("outcome") != "Failed":
            continue
        failed = [p for p in recorder.pods.values() if p.job == job and p.outcome.startswith("Failed")]
        if not failed:
            out.append(f"job {job} failed; no failed pod of it was seen")
            continue
        pod = max(failed, key=lambda p: (p.finished or 0.0, p.name))
        match = re.search(r"exit \d+ in ([^)\s]+)", pod.outcome)
        container = match.group(1) if match else None
        text = last_lines(box, pod.namespace, pod.name, container, lines)
        out.append(
            f"Last lines of the log of pod {pod.ref} ({pod.owner}{', container ' + container if container else ''}"
            f", kubectl logs --tail={lines}):\n" + "\n".join(f"  {line}" for line in text.splitlines())
        )
    return out
