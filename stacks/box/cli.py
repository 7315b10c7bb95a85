"""``python -m stacks box build|up|down|bench`` (alias ``python -m stacks.box``): the cluster in a box on this machine.

- ``build``: build (or reuse) the pinned binaries (:mod:`stacks.box.build`) and print where they are.
- ``up [--stack NAME]``: a fresh box (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the kwok
  controller as local processes), with, for ``--stack``, one simulated node per desired node of each of the stack's
  node groups (:mod:`stacks.box.nodes`); prints the kubeconfig path (use it with ``kubectl --kubeconfig``).
- ``down``: stop the box (and the operators a rehearsal kept running with it, ``python -m stacks.rehearse --keep``)
  and remove its state.
- ``bench --stack NAME [--nodes 1024]``: the stack's training group at that many nodes and its health check on every
  one of them, on a fresh box; prints how long the nodes took to be Ready and the pods to be scheduled and running, and
  the control plane's memory (:mod:`stacks.box.bench`).
"""

from __future__ import annotations

import time
from typing import Optional, Sequence

from stacks.box import build as box_build
from stacks.box.api import BoxError
from stacks.box.bench import BenchError
from stacks.box.bench import bench as run_bench
from stacks.box.cluster import Box, add_box_options, log
from stacks.box.nodes import plan_nodes
from stacks.box.operators import stop_recorded
from stacks.box.session import create_nodes
from stacks.cli import EXIT_FAILED, EXIT_OK, CommandError, add_stack_options, command, load_stack, parser_for


@command
def main(argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    """Build the binaries, or bring a box up or down; exit status 0, 1 when the box or its build failed, 2 on a usage or
    configuration error."""
    parser = parser_for("box", prog, "A real Kubernetes control plane with simulated nodes on this machine.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build or reuse the pinned binaries, print their paths")
    up = sub.add_parser("up", help="bring a fresh box up and print its kubeconfig path")
    add_stack_options(up, required=False, stack_help="make the nodes of this stack's node groups")
    down = sub.add_parser("down", help="stop the box and delete its state")
    bench = sub.add_parser(
        "bench",
        help="time the stack's training group at --nodes nodes with its health check on "
        "every node, and measure the control plane's memory",
    )
    add_stack_options(bench, stack_help="the stack whose training group and health check to scale")
    bench.add_argument("--nodes", type=int, default=1024, help="nodes of the training group (default 1024)")
    bench.add_argument(
        "--job", help="the job whose group and health check to scale (default: the first job with a health check)"
    )
    bench.add_argument(
        "--run-ms",
        type=int,
        default=30000,
        help="how long each health-check pod runs, in milliseconds (default 30000: all run at once)",
    )
    bench.add_argument("--timeout", type=float, default=900.0, help="seconds the run has (default 900)")
    for p in (up, down, bench):
        add_box_options(p, name_default="eks-training", name_help="the box's name (default eks-training)")
    args = parser.parse_args(argv)
    if args.command == "build":
        return box_build.main([])
    if args.command == "bench":
        if args.nodes < 1 or args.run_ms <= 0 or args.timeout <= 0:
            parser.error("--nodes, --run-ms and --timeout must be positive")
        name = args.name if args.name != "eks-training" else f"bench-{args.stack}"
        try:
            figures = run_bench(
                args.stack,
                args.nodes,
                stack_file=args.stack_file,
                job=args.job,
                workdir=args.workdir,
                name=name,
                run_ms=args.run_ms,
                timeout_s=args.timeout,
                log=log,
            )
        except (BenchError, BoxError, box_build.BoxBuildError) as exc:
            raise CommandError(f"error: {exc}", EXIT_FAILED) from exc
        print(figures.text())
        return EXIT_OK
    try:
        binaries = box_build.build(["etcd", "kwok", "kubernetes"], log=log)
        box = Box(name=args.name, workdir=args.workdir, binaries=binaries)
        if args.command == "down":
            for name in stop_recorded(box):  # the operators a kept rehearsal left running (python -m stacks.rehearse)
                log(f"stopped {name}")
            box.down()
            log(f"box {args.name} is down")
            return 0
        nodes = []
        if args.stack:
            config, plan = load_stack(args)
            nodes = plan_nodes(plan, plan.config.region)
        start = time.monotonic()
        kubeconfig = box.up()
        create_nodes(box, nodes)
        log(
            f"box {args.name} is up in {time.monotonic() - start:.1f} s with {len(nodes)} nodes; "
            f"kubectl --kubeconfig {kubeconfig} get nodes"
        )
    except (BoxError, box_build.BoxBuildError) as exc:
        raise CommandError(f"error: {exc}", EXIT_FAILED) from exc
    print(kubeconfig)
    return EXIT_OK
