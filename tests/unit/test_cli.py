"""The one command line (``python -m stacks <command>``, the ``eks-training`` console script) and its layering.

- Every command's ``--help`` through the one entry point, and the top level's listing of them.
- ``python -m stacks.<name>`` (the aliases the README uses), ``python -m stacks <name>`` and the console script run
  the very same ``main``: each is replaced by a recorder and each way of invoking it must reach the recorder.
- The prologue: an unreadable stack, an invalid configuration and a :class:`~stacks.cli.CommandError` end the command
  with the message on stderr and the exit status, whether ``main`` is called or run; a Python without the
  requirements ends it with one line naming the virtualenv.
- No tool imports another tool or the Pulumi program, and the core imports neither (a walk over every module's
  imports, functions' bodies included): what two tools share lives in the core (``stacks/cli.py`` describes the
  layers). The walk is shown to find a tool importing another in a small tree of its own.
"""

import ast
import runpy
import subprocess
import sys
import tomllib
import warnings
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pytest

from stacks import cli
from tests.harness import REPO
from tests.python_source import parse
from tests.wait import patient


def _help(argv: list[str]) -> str:
    out = StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 0, argv
    return out.getvalue()


@pytest.mark.parametrize("name", list(cli.TOOLS))
def test_every_command_helps_through_the_one_entry_point(name: str) -> None:
    text = _help([name, "--help"])
    assert text.startswith(f"usage: python -m stacks {name} "), text
    text = " ".join(text.split())  # argparse wraps the help to the terminal's width
    if name == "box":
        assert "{build,up,down,bench}" in text
        up = _help([name, "up", "--help"])
        assert up.startswith("usage: python -m stacks box up ") and "--stack NAME" in up and "--stack-file PATH" in up
        bench = _help([name, "bench", "--help"])
        assert bench.startswith("usage: python -m stacks box bench ") and "--stack NAME" in bench and "--nodes" in bench
    elif name != "docs":
        assert "--stack NAME" in text and "Pulumi.<stack>.yaml from the current folder" in text, text


def test_the_top_level_lists_every_command() -> None:
    text = _help(["--help"])
    for name, tool in cli.TOOLS.items():
        assert f"  {name} " in text and tool.summary in text, name
    err = StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as exited:
        cli.main(["nope"])
    assert exited.value.code == cli.EXIT_USAGE and "invalid choice: 'nope'" in err.getvalue()


def test_python_m_stacks_runs_as_a_user_runs_it() -> None:
    """The real entry point in a process of its own (``stacks/__main__.py``): the listing, quickly (no command is
    imported for it)."""
    done = subprocess.run(
        [sys.executable, "-m", "stacks", "--help"], cwd=REPO, capture_output=True, text=True, timeout=patient(120)
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m stacks [-h] COMMAND"), done.stderr
    assert all(f"  {name} " in done.stdout for name in cli.TOOLS)


def test_an_alias_that_is_a_module_runs_without_a_warning() -> None:
    """``python -m stacks.rehearse`` is a module, not a package: imported before ``-m`` runs it, Python would warn
    (``found in sys.modules``), and fail under ``-W error``. The package leaves it to ``-m``."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "stacks.rehearse", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=patient(120),
    )
    assert done.returncode == 0 and "RuntimeWarning" not in done.stderr, done.stderr
    assert done.stdout.startswith("usage: python -m stacks.rehearse"), done.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "stacks", "plan"],
        ["-m", "stacks.plan"],
        ["-mstacks.local"],
        ["-m", "stacks.preflight.__main__"],
        ["-Bm", "stacks.box"],
    ],
    ids=["command", "alias", "alias-joined", "alias-main", "alias-after-flags"],
)
def test_a_python_without_the_requirements_says_what_to_run_not_a_traceback(command: list[str]) -> None:
    """A newcomer's shell without the virtualenv active: ``-S`` leaves out every site-packages, as a bare Python has
    none of the requirements. One line names the module and the virtualenv; no traceback. An alias
    (``python -m stacks.plan``) says the same, though Python imports its package before the alias's code runs."""
    done = subprocess.run(
        [sys.executable, "-S", *command, "--stack", "dev"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=patient(120),
    )
    assert done.returncode == cli.EXIT_USAGE and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"python -m stacks: this Python ({sys.executable}) has no module '"), done.stderr
    assert "`source .venv/bin/activate`" in done.stderr and done.stdout == ""


def test_the_installed_librarys_message_names_its_install_not_a_clones_virtualenv(monkeypatch) -> None:
    monkeypatch.setattr(cli, "__name__", "eks_training.stacks.cli")  # as the installed package names it
    said = cli.missing_requirement("pulumi")
    assert said.startswith("eks-training: this Python") and "`pip install` without `--no-deps`" in said
    assert "activate" not in said and "requirements-dev.txt" not in said


@pytest.mark.parametrize("name", ["stacks.nope", "yaml.nope"])
def test_a_missing_module_of_the_project_or_of_a_package_it_has_is_a_bug_and_keeps_its_traceback(name: str) -> None:
    """Only a package this Python lacks altogether is an install to fix; a missing part of one it has is not."""

    def main() -> int:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    with pytest.raises(ModuleNotFoundError):
        cli.run_command(main)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Any]] = []

    def __call__(self, argv: Sequence[str], *, prog: Any = None) -> int:
        self.calls.append((list(argv), prog))
        return 7


def _exit_code(run: Callable[[], Any]) -> Any:
    with pytest.raises(SystemExit) as exited:
        run()
    return exited.value.code


@pytest.mark.parametrize("name", list(cli.TOOLS))
def test_the_aliases_the_entry_point_and_the_script_run_the_same_main(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = cli.TOOLS[name]
    module = sys.modules.get(tool.module) or __import__(tool.module, fromlist=["main"])
    assert tool.main() is module.main
    recorder = Recorder()
    monkeypatch.setattr(module, "main", recorder)
    monkeypatch.setattr(sys, "argv", ["x", "--flag", "v"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: stacks.docs is imported already (it is patched)
        assert _exit_code(lambda: runpy.run_module(f"stacks.{name}", run_name="__main__", alter_sys=True)) == 7
    monkeypatch.setattr(sys, "argv", ["x", name, "--flag", "v"])
    assert _exit_code(lambda: runpy.run_module("stacks", run_name="__main__", alter_sys=True)) == 7
    assert _exit_code(cli.script) == 7
    assert recorder.calls == [
        (["--flag", "v"], f"python -m stacks.{name}"),
        (["--flag", "v"], f"python -m stacks {name}"),
        (["--flag", "v"], f"eks-training {name}"),
    ]


def test_the_console_script_is_declared() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    # the installed module name (setup.py installs stacks as eks_training.stacks): here, the checkout's stacks.cli
    assert scripts == {cli.SCRIPT: "eks_training.stacks.cli:script"}
    module, _, attr = scripts[cli.SCRIPT].removeprefix("eks_training.").partition(":")
    assert getattr(__import__(module, fromlist=[attr]), attr) is cli.script


def _quiet(main: Callable[..., int], *args: Any) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(*args)
    return code, out.getvalue(), err.getvalue()


def test_the_prologue_prints_the_error_and_returns_its_status(tmp_path: Path) -> None:
    code, out, err = _quiet(cli.main, ["plan", "--stack", "no-such-stack"])
    assert (code, out) == (cli.EXIT_USAGE, "") and err.startswith("error: no stack 'no-such-stack': "), err
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  eks-training:nodeGroups: 3\n")
    code, out, err = _quiet(
        cli.main, ["local", "--stack", "bad", "--stack-file", str(bad), "--work", str(tmp_path / "w")]
    )
    assert (code, out) == (cli.EXIT_USAGE, "") and "invalid stack configuration" in err, err
    assert not (tmp_path / "w").exists()

    @cli.command
    def failing(argv: Sequence[str]) -> int:
        raise cli.CommandError(f"error: {argv[0]}", cli.EXIT_FAILED)

    assert _quiet(failing, ["it failed"]) == (cli.EXIT_FAILED, "", "error: it failed\n")


# --- layering --------------------------------------------------------------------------------------------------------


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` (and packages) a module's code imports, anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            out.add(source)
            out.update(f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in known)
    return out


def _within(module: str, prefixes: Sequence[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def layering_violations(root: Path, package: str, tools: Mapping[str, Sequence[str]], core: Sequence[str]) -> list[str]:
    """Every import of ``package``'s modules (under ``root``) that breaks the layers: a tool importing another tool or
    the program, the core importing a tool or the program."""
    files = {_module_name(root, p): p for p in sorted((root / package).rglob("*.py"))}
    known = set(files)

    def layer(module: str) -> str:
        for name, prefixes in tools.items():
            if _within(module, prefixes):
                return f"tool {name}"
        return "core" if _within(module, core) else "program"

    found = []
    for module, path in files.items():
        mine = layer(module)
        if mine == "program":
            continue
        tree = parse(path.read_text(), str(path))
        for imported in sorted(_imports(tree, module, path.name == "__init__.py", known)):
            if not _within(imported, [package]) or imported == package:
                continue
            theirs = layer(imported)
            if theirs != "core" and theirs != mine:
                found.append(f"{module} ({mine}) imports {imported} ({theirs})")
    return found


def test_no_tool_imports_another_tool_nor_the_program_and_the_core_imports_neither() -> None:
    tools = {name: tool.modules for name, tool in cli.TOOLS.items()}
    modules = {_module_name(REPO, p) for p in (REPO / "stacks").rglob("*.py")}
    for name, tool in cli.TOOLS.items():  # the layers name modules that exist: the walk cannot pass vacuously
        assert tool.module in modules and _within(tool.module, tool.modules), name
        assert all(any(_within(m, [p]) for m in modules) for p in tool.modules), name
    assert all(any(_within(m, [p]) for m in modules) for p in cli.CORE)
    assert {"stacks.workloads", "stacks.environment", "stacks.outputs"} <= {
        m for m in modules if not _within(m, cli.CORE) and not any(_within(m, t.modules) for t in cli.TOOLS.values())
    }
    assert layering_violations(REPO, "stacks", tools, cli.CORE) == []


def test_the_layering_walk_finds_what_breaks_the_layers(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/core.py": "import os\n",
        "pkg/program.py": "from pkg.alpha import run\n",  # the program may use a tool (as __main__.py runs preflight)
        "pkg/alpha/__init__.py": "from .cli import run\n",
        "pkg/alpha/cli.py": "from pkg import core\n\ndef run():\n    from pkg.beta import helper\n",
        "pkg/beta/__init__.py": "from ..program import x\nhelper = 1\n",
        "pkg/core2.py": "import pkg.alpha.cli\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = layering_violations(
        tmp_path, "pkg", {"alpha": ["pkg.alpha"], "beta": ["pkg.beta"]}, ["pkg.core", "pkg.core2"]
    )
    assert found == [
        "pkg.alpha.cli (tool alpha) imports pkg.beta (tool beta)",
        "pkg.beta (tool beta) imports pkg.program (program)",
        "pkg.core2 (core) imports pkg.alpha.cli (tool alpha)",
    ]
