"""The one command line: ``python -m stacks <command>`` (installed as the ``eks-training`` console script), and the
prologue every command shares: stack selection (``--stack``, ``--stack-file``), loading and planning the stack,
printing an error, the exit codes and a reader that closes the pipe early.

The commands (:data:`TOOLS`) are the offline tools: ``plan``, ``preflight``, ``local``, ``benchmark``, ``docs`` and
``box`` with ``rehearse``. ``python -m stacks.plan`` (and each other tool's ``python -m stacks.<name>``) is an alias of
``python -m stacks <name>``: both run the same ``main`` through :func:`run_tool`.

Layering (``tests/unit/test_cli.py`` walks every module's imports): the core (:data:`CORE`: the config, the plan
(with its timeline), costs, zones, the kinds of job, reading a stack file, the program's offline evaluation under the
mocks, this prologue) imports no tool and nothing of the Pulumi program (the evaluation runs ``__main__.py`` as
``pulumi up`` does, importing none of its modules); a tool imports the core, ``components`` and its own modules,
never another tool nor the program's composition modules (``stacks.workloads``, ``stacks.environment``, ...). What
two tools share belongs to the core.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional, ParamSpec, Sequence

if TYPE_CHECKING:
    from stacks.plan import Plan

# stacks.stackfile (the config models, Pulumi) is imported where a command reads a stack, so `--help` stays quick

#: Exit status: the command did what it was asked.
EXIT_OK = 0
#: Exit status: the command ran and what it checked or ran failed (a failed check, a failed job).
EXIT_FAILED = 1
#: Exit status: a usage or configuration error, found before anything ran (argparse exits 2 on a usage error too).
EXIT_USAGE = 2
#: Exit status of a command whose reader went away (``python -m stacks plan --stack dev | head``): 128 + SIGPIPE, as a
#: Unix tool killed by SIGPIPE reports it.
EXIT_BROKEN_PIPE = 141

#: The program's name when it runs as ``python -m stacks``.
PROG = "python -m stacks"
#: The console script the package declares (``[project.scripts]`` in pyproject.toml).
SCRIPT = "eks-training"

#: The core: modules (and packages) every tool may import. Everything in ``stacks`` that is neither the core nor a
#: tool is the Pulumi program (the composition of the components), which no tool imports.
CORE = (
    "stacks.config",
    "stacks.kinds",
    "stacks.plan",
    "stacks.costs",
    "stacks.mocked",
    "stacks.zones",
    "stacks.stackfile",
    "stacks.yaml_text",
    "stacks.ports",
    "stacks.bundle",
    "stacks.cli",
    "stacks.__main__",
)


@dataclass(frozen=True)
class Tool:
    """One command: its name, the module whose ``main(argv, prog=...)`` runs it, a one-line summary, and the modules
    that make up the tool (their names or package prefixes)."""

    name: str
    module: str
    summary: str
    modules: tuple[str, ...]

    def main(self) -> Callable[..., int]:
        """The command's ``main``, imported when it runs (so ``--help`` of one command imports only that one)."""
        func: Callable[..., int] = getattr(importlib.import_module(self.module), "main")
        return func


#: The cluster in a box: ``box`` and ``rehearse`` are one tool's two commands (rehearse runs the program under the
#: mocks, :mod:`stacks.mocked`, which the plan's model of the path to the first step evaluates too: the core).
BOX_MODULES = ("stacks.box", "stacks.rehearse")

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "plan",
            "stacks.plan.report",
            "validate a stack offline and print what it creates and costs",
            ("stacks.plan.report", "stacks.plan.__main__"),
        ),
        Tool(
            "preflight",
            "stacks.preflight.cli",
            "check the AWS account can run a stack, before pulumi up",
            ("stacks.preflight",),
        ),
        Tool("local", "stacks.local.cli", "run a stack's jobs on this machine, without AWS", ("stacks.local",)),
        Tool(
            "benchmark",
            "stacks.benchmark.cli",
            "run a stack's benchmark: up, follow, collect, summary, destroy",
            ("stacks.benchmark",),
        ),
        Tool(
            "docs", "stacks.docs", "regenerate (or --check) the documentation generated from the code", ("stacks.docs",)
        ),
        Tool("box", "stacks.box.cli", "the cluster in a box: build, up, down, bench", BOX_MODULES),
        Tool(
            "rehearse",
            "stacks.box.rehearse_cli",
            "run a stack on the cluster in a box and print what ran where, what waited and why",
            BOX_MODULES,
        ),
    )
}


class CommandError(Exception):
    """Ends a command: its message is printed on stderr as it is and :func:`command` returns its exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


P = ParamSpec("P")


def command(func: Callable[P, int]) -> Callable[P, int]:
    """A command's ``main``: a :class:`CommandError` or :class:`~stacks.stackfile.StackLoadError` (a stack file that
    cannot be read or a configuration that is invalid) it raises is printed on stderr and becomes its exit status
    (:data:`EXIT_USAGE` for the latter), so calling ``main`` returns what the process exits with."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> int:
        from stacks.stackfile import StackLoadError

        try:
            return func(*args, **kwargs)
        except CommandError as exc:
            print(str(exc), file=sys.stderr)
            return exc.code
        except StackLoadError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_USAGE

    return run


def parser_for(
    tool: str, prog: Optional[str], description: str, epilog: Optional[str] = None
) -> argparse.ArgumentParser:
    """A command's parser; ``prog`` is how it was invoked (``python -m stacks plan``, ``eks-training plan``), by default
    its alias ``python -m stacks.<tool>``."""
    return argparse.ArgumentParser(prog=prog or f"python -m stacks.{tool}", description=description, epilog=epilog)


def add_stack_options(
    parser: argparse.ArgumentParser, *, required: bool = True, stack_file: bool = True, stack_help: str = "stack name"
) -> None:
    """``--stack NAME`` and (unless ``stack_file`` is false) ``--stack-file PATH``, as every command names a stack."""
    parser.add_argument(
        "--stack",
        required=required,
        metavar="NAME",
        help=f"{stack_help} (reads Pulumi.<stack>.yaml from the current folder, else from this repository)",
    )
    if stack_file:
        parser.add_argument("--stack-file", type=Path, metavar="PATH", help="the stack file to read instead")


def load_stack(
    args: argparse.Namespace, *, region: Optional[str] = None, edit: Optional[Callable[[dict[str, Any]], None]] = None
) -> tuple[dict[str, Any], "Plan"]:
    """The configuration and plan of the stack the command line names (``--stack``, ``--stack-file``), offline, as
    ``pulumi up`` validates it (:func:`stacks.stackfile.plan_stack`); a :class:`~stacks.stackfile.StackLoadError`
    ends the command with :data:`EXIT_USAGE` (see :func:`command`)."""
    from stacks.stackfile import plan_stack

    return plan_stack(args.stack, getattr(args, "stack_file", None), region=region, edit=edit)


#: This project's own top-level packages: a module of theirs that is missing is a bug, not a missing install.
OWN_PACKAGES = ("components", "stacks", "eks_training", "training", "provider")


def missing_requirement(module: str) -> str:
    """What to do when this Python lacks a package the commands import: in a clone, the project's virtualenv was not
    used; installed, the library went in without its requirements."""
    if __name__ != "stacks.cli":  # the installed library (eks_training.stacks.cli)
        return (
            f"{SCRIPT}: this Python ({sys.executable}) has no module {module!r}: install the library into it with its "
            "requirements (`pip install` without `--no-deps`), or run the Python it was installed into"
        )
    return (
        f"{PROG}: this Python ({sys.executable}) has no module {module!r}: run the commands with the project's "
        "virtualenv (`source .venv/bin/activate`, or `.venv/bin/python -m stacks ...`), or install the requirements "
        "into this one (`pip install -r requirements-dev.txt`; the README's step 1)"
    )


def exit_if_not_installed(missing: ModuleNotFoundError) -> None:
    """End the command with one line saying what to run (:func:`missing_requirement`) when ``missing`` is a package
    this Python lacks; return when it is this project's own module or a part of a package this Python has."""
    top = (missing.name or "").partition(".")[0]
    if top and top not in OWN_PACKAGES and importlib.util.find_spec(top) is None:
        sys.stderr.write(missing_requirement(missing.name or str(missing)) + "\n")
        sys.exit(EXIT_USAGE)


#: Python's options that take no value and may come before ``m`` in one word (``python -Bm stacks.plan``).
_FLAGS_THEN_M = re.compile(r"^-[bBdEhiIOPqRsSuvx]*m(.*)$")


def import_alias(package: str) -> None:
    """``python -m stacks.<name>``: import the alias's package before Python's ``-m`` does, so a requirement this
    Python lacks is one line, as for ``python -m stacks``, not a traceback from the package's imports. ``package`` is
    the ``stacks`` package's name (``eks_training.stacks`` when installed); any other ``-m``, and an alias that is a
    plain module (its imports are its own, and ``-m`` warns of a module imported before it runs it), is left alone."""
    argv = sys.orig_argv
    found = next(((i, m) for i, a in enumerate(argv[1:], 1) if (m := _FLAGS_THEN_M.match(a))), None)
    if found is None:
        return
    at, match = found
    target = match.group(1) or (argv[at + 1] if at + 1 < len(argv) else "")
    name = target.removesuffix(".__main__")
    if not name.startswith(package + ".") or name.count(".") != package.count(".") + 1:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        return
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as missing:
        exit_if_not_installed(missing)
        raise


def run_command(main: Callable[[], int]) -> NoReturn:
    """Exit with ``main()``'s status; a reader that closed the pipe early (``| head``) ends the command quietly with
    :data:`EXIT_BROKEN_PIPE` instead of a ``BrokenPipeError`` traceback
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe). A module this Python lacks (the virtualenv
    not active) ends it with one line saying what to run instead of a traceback."""
    try:
        code = main()
        sys.stdout.flush()
    except ModuleNotFoundError as missing:
        exit_if_not_installed(missing)
        raise  # this project's own module, or a part of a package this Python has: a bug, not a missing install
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_BROKEN_PIPE)
    sys.exit(code)


def run_tool(name: str, argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    """Run the command ``name`` with ``argv`` (default: this process's arguments) as ``prog``."""
    return TOOLS[name].main()(list(sys.argv[1:] if argv is None else argv), prog=prog)


def alias(name: str) -> NoReturn:
    """``python -m stacks.<name>``: the command ``name``, as ``python -m stacks <name>`` runs it."""
    run_command(lambda: run_tool(name, prog=f"python -m stacks.{name}"))


def main(argv: Optional[Sequence[str]] = None, *, prog: str = PROG) -> int:
    """``python -m stacks <command> [options]``: run a command; ``--help`` lists them."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in TOOLS:
        return run_tool(args[0], args[1:], prog=f"{prog} {args[0]}")
    width = max(len(n) for n in TOOLS)
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Plan, check, run locally and benchmark the stacks of this project (Pulumi.<stack>.yaml). "
        f"`{prog} COMMAND --help` describes a command.",
        epilog="commands:\n"
        + "".join(f"  {n:<{width}}  {t.summary}\n" for n, t in TOOLS.items())
        + f"\nexit status: {EXIT_OK} done; {EXIT_FAILED} a check or a job failed; {EXIT_USAGE} usage or configuration "
        f"error; {EXIT_BROKEN_PIPE} the reader closed the pipe (some commands name more in their --help)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=list(TOOLS), metavar="COMMAND", help="one of: " + ", ".join(TOOLS))
    parser.parse_args(args)  # --help, or an unknown/missing command: argparse prints and exits (0 or 2)
    return EXIT_USAGE  # not reached: a known command was dispatched above


def script() -> NoReturn:
    """The ``eks-training`` console script."""
    run_command(lambda: main(prog=SCRIPT))
