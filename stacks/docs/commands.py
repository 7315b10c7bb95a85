"""The command-line reference (``docs/reference/commands.md``), read from the commands' own argument parsers.

Each command of :data:`stacks.cli.TOOLS` builds its parser inside its ``main``; the reference runs that ``main`` with
``argparse.ArgumentParser.parse_args`` replaced by a catch that hands back the parser before anything runs, so every
command, subcommand and option, with its help, default and choices, is the code's own. A command added to
``TOOLS`` or an option added to a parser appears after ``python -m stacks docs``."""

import argparse
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NoReturn, Optional

from stacks import cli
from stacks.docs.markdown import cell, code, page_header, table, text


class _Parsed(BaseException):
    """Carries the parser of a command out of its ``main`` (a BaseException: no command's error handling takes it)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


@contextmanager
def _catching() -> Iterator[None]:
    """While inside, a parser's ``parse_args`` raises :class:`_Parsed`; a default under the home folder or a box
    cache set by the environment reads as on any machine (``~``)."""
    original = argparse.ArgumentParser.parse_args
    cache = os.environ.pop("EKS_TRAINING_BOX_CACHE", None)

    def catch(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        raise _Parsed(self)

    argparse.ArgumentParser.parse_args = catch  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
        if cache is not None:
            os.environ["EKS_TRAINING_BOX_CACHE"] = cache


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of the command ``name``, as ``python -m stacks <name>`` builds it."""
    with _catching():
        try:
            cli.TOOLS[name].main()([], prog=f"{cli.PROG} {name}")
        except _Parsed as parsed:
            return parsed.parser
    raise RuntimeError(f"{name}: its main returned without parsing its arguments")


def _home(value: str) -> str:
    return value.replace(str(Path.home()), "~")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return _home(parser._get_formatter()._expand_help(action))


def _default(action: argparse.Action) -> str:
    if action.required or isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "required" if action.required else ""
    if action.default in (None, argparse.SUPPRESS, [], False):
        return ""
    return code(_home(str(action.default)))


def _option(action: argparse.Action) -> str:
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    names = ", ".join(action.option_strings) or str(metavar)
    if action.option_strings and action.nargs != 0:
        names += f" {metavar}"
        if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
            names += " ..."
    return code(names)


def _options_table(parser: argparse.ArgumentParser) -> Optional[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        choices = ", ".join(code(str(c)) for c in action.choices) if action.choices else ""
        rows.append([_option(action), cell(_help(parser, action)), _default(action), choices])
    return table(["Option", "What it does", "Default", "Choices"], rows) if rows else None


def _usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(_home(parser.format_usage()).removeprefix("usage:").split())


def _section(parser: argparse.ArgumentParser, level: str, title: str, summary: str) -> list[str]:
    out = ["", f"{level} {title}", ""]
    if summary:
        out += [text(summary[0].upper() + summary[1:]) + ("" if summary.endswith(".") else "."), ""]
    out += ["```text", _usage(parser), "```"]
    if parser.description:
        out += ["", text(_home(parser.description))]
    options = _options_table(parser)
    if options:
        out += ["", options]
    if parser.epilog:
        out += ["", "```text", _home(parser.epilog.strip()), "```"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for sub, subparser in action.choices.items():
                out += _section(subparser, level + "#", f"{title} {sub}", helps.get(sub, ""))
    return out


def commands_reference() -> str:
    """``docs/reference/commands.md``: every command of ``python -m stacks`` with its options."""
    width = max(len(n) for n in cli.TOOLS)
    out = [
        *page_header("Command line", "the commands' argument parsers (stacks/cli.py TOOLS)"),
        "",
        text(
            f"The offline tools are one command line, `{cli.PROG} COMMAND` (installed with the package as the console "
            f"script `{cli.SCRIPT} COMMAND`). `python -m stacks.COMMAND` is the same command under another name. "
            f"`{cli.PROG} COMMAND --help` prints what this page shows for one command."
        ),
        "",
        "```text",
        *(f"{n:<{width}}  {t.summary}" for n, t in cli.TOOLS.items()),
        "```",
        "",
        "## Exit status",
        "",
        table(
            ["Status", "Meaning"],
            [
                [str(cli.EXIT_OK), "the command did what it was asked"],
                [str(cli.EXIT_FAILED), "a check or a job failed"],
                [str(cli.EXIT_USAGE), "a usage or configuration error, one line per problem, before anything runs"],
                [str(cli.EXIT_BROKEN_PIPE), "the reader closed the pipe early (`... | head`)"],
            ],
        ),
        "",
        "Some commands name further statuses in their own description below.",
    ]
    for name, tool in cli.TOOLS.items():
        out += _section(command_parser(name), "##", name, tool.summary)
    return "\n".join(out) + "\n"
