"""The launcher's command line: its own options before ``--``, the command after it, checked against each other."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

ETCD_DEFAULT_PORT = 2379
BACKENDS = ("etcd-v2", "c10d")
#: How long the command has to end by itself once the run gave up (DIR/FAILED appeared), as it does when every rank
#: exits (a program's last words after it wrote FAILED, torchrun's workers started again finding FAILED), before the
#: launcher stops it (``launch_supervisor.Supervisor.run``).
GAVE_UP_GRACE_S = 30.0


class UsageError(Exception):
    """Bad command line (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """ArgumentParser that raises :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


@dataclass(frozen=True)
class LaunchArgs:
    """Validated command line."""

    output_dir: Path
    rdzv_backend: str
    rdzv_endpoint: str | None
    rdzv_id: str
    etcd_host: str | None
    etcd_port: int | None
    etcd_wait_seconds: float
    etcd_read_timeout: float
    command: list[str]
    gave_up_grace_seconds: float = GAVE_UP_GRACE_S


def build_parser() -> argparse.ArgumentParser:
    """The launcher's own options (everything before ``--``)."""
    parser = _Parser(
        prog="launch.py",
        usage="%(prog)s --output-dir DIR --rdzv-backend {etcd-v2,c10d} --rdzv-endpoint HOST[:PORT] "
        "--rdzv-id ID [options] -- torchrun ...",
        description="Skip a finished run, reset a closed etcd-v2 rendezvous, then run the command after -- as its "
        "child.",
    )
    parser.add_argument(
        "--output-dir", required=True, type=Path, help="the run's shared output folder; DIR/DONE marks a finished run"
    )
    parser.add_argument(
        "--rdzv-backend", required=True, choices=BACKENDS, help="the torchrun rendezvous backend of the command"
    )
    parser.add_argument(
        "--rdzv-endpoint", default=None, help="etcd HOST[:PORT] (port 2379 if omitted); required for etcd-v2"
    )
    parser.add_argument("--rdzv-id", required=True, help="the torchrun --rdzv-id of the run")
    parser.add_argument(
        "--etcd-wait-seconds",
        type=float,
        default=120.0,
        help="keep retrying an unreachable etcd this long (default 120)",
    )
    parser.add_argument(
        "--etcd-read-timeout", type=float, default=10.0, help="timeout of one etcd request in seconds (default 10)"
    )
    parser.add_argument(
        "--gave-up-grace-seconds",
        type=float,
        default=GAVE_UP_GRACE_S,
        help=f"once DIR/FAILED appears, the command's time to end by itself before it is stopped (default "
        f"{GAVE_UP_GRACE_S:g})",
    )
    return parser


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``host[:port]`` (or ``[v6]:port``) -> (host, port); port 2379 when omitted, like torch."""
    text = endpoint.strip()
    if not text:
        raise UsageError("--rdzv-endpoint is empty")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise UsageError(f"bad --rdzv-endpoint {endpoint!r}")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host:
        raise UsageError(f"bad --rdzv-endpoint {endpoint!r}: no host")
    if not port_text:
        return host, ETCD_DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"bad --rdzv-endpoint {endpoint!r}: port must be 1..65535")
    return host, int(port_text)


def option_values(command: Sequence[str], names: Sequence[str]) -> list[str]:
    """Values of ``--name VALUE`` / ``--name=VALUE`` for any of ``names`` in ``command``."""
    values = []
    for i, token in enumerate(command):
        for name in names:
            if token == name and i + 1 < len(command):
                values.append(command[i + 1])
            elif token.startswith(name + "="):
                values.append(token[len(name) + 1 :])
    return values


def torchrun_part(command: Sequence[str]) -> list[str]:
    """The command up to (excluding) the first ``*.py`` token: torchrun's own arguments."""
    for i, token in enumerate(command):
        if token.endswith(".py") and i > 0:
            return list(command[:i])
    return list(command)


def check_consistency(args: LaunchArgs) -> None:
    """Refuse a command whose rendezvous flags or --output-dir contradict the launcher's."""
    launcher = torchrun_part(args.command)
    for value in option_values(launcher, ("--rdzv-id", "--rdzv_id")):
        if value != args.rdzv_id:
            raise UsageError(f"the command uses --rdzv-id={value} but the launcher got --rdzv-id={args.rdzv_id}")
    for value in option_values(launcher, ("--rdzv-backend", "--rdzv_backend")):
        if value != args.rdzv_backend:
            raise UsageError(
                f"the command uses --rdzv-backend={value} but the launcher got --rdzv-backend={args.rdzv_backend}"
            )
    if args.rdzv_backend == "etcd-v2":
        for value in option_values(launcher, ("--rdzv-endpoint", "--rdzv_endpoint")):
            if parse_endpoint(value) != (args.etcd_host, args.etcd_port):
                raise UsageError(
                    f"the command uses --rdzv-endpoint={value} but the launcher got "
                    f"--rdzv-endpoint={args.rdzv_endpoint}"
                )
    script_args = args.command[len(launcher) :]
    for value in option_values(script_args, ("--output-dir",)):
        if Path(value).resolve() != args.output_dir.resolve():
            raise UsageError(
                f"the training command writes to --output-dir={value} but the launcher checks {args.output_dir}"
            )


def parse_args(argv: Sequence[str]) -> LaunchArgs:
    """Split ``argv`` at the first ``--`` and validate both halves; raise :class:`UsageError`."""
    argv = list(argv)
    if "--" not in argv:
        raise UsageError("missing '--' before the command to run (e.g. -- torchrun ... /app/train.py ...)")
    cut = argv.index("--")
    own, command = argv[:cut], argv[cut + 1 :]
    ns = build_parser().parse_args(own)
    if not command:
        raise UsageError("no command after '--'")
    if not ns.rdzv_id.strip():
        raise UsageError("--rdzv-id is empty")
    if "/" in ns.rdzv_id:
        raise UsageError("--rdzv-id must not contain '/' (it is an etcd key name)")
    if ns.etcd_wait_seconds < 0 or ns.etcd_read_timeout <= 0 or ns.gave_up_grace_seconds < 0:
        raise UsageError("--etcd-wait-seconds and --gave-up-grace-seconds must be >= 0 and --etcd-read-timeout > 0")
    host: str | None = None
    port: int | None = None
    if ns.rdzv_backend == "etcd-v2":
        if not ns.rdzv_endpoint:
            raise UsageError("--rdzv-endpoint is required with --rdzv-backend etcd-v2")
        host, port = parse_endpoint(ns.rdzv_endpoint)
    args = LaunchArgs(
        output_dir=ns.output_dir,
        rdzv_backend=ns.rdzv_backend,
        rdzv_endpoint=ns.rdzv_endpoint,
        rdzv_id=ns.rdzv_id,
        etcd_host=host,
        etcd_port=port,
        etcd_wait_seconds=ns.etcd_wait_seconds,
        etcd_read_timeout=ns.etcd_read_timeout,
        command=command,
        gave_up_grace_seconds=ns.gave_up_grace_seconds,
    )
    check_consistency(args)
    return args
