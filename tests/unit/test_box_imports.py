"""The project's modules import one another without a cycle, function-local and ``TYPE_CHECKING`` imports included:
the box's (``stacks/box/``, one run's steps in :mod:`stacks.box.session`) and every other module of ``components`` and
``stacks`` (the kinds read a job through protocols of their own, the plan's data sits below its derivations)."""

from __future__ import annotations

from pathlib import Path

from tests.harness import REPO
from tests.python_source import parse
from tests.unit.test_cli import _imports, _module_name


def import_graph(root: Path, *packages: str) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` (under ``root``) it imports, anywhere in its code."""
    files = {
        _module_name(root, p): p
        for package in packages
        for p in sorted((root / package.replace(".", "/")).rglob("*.py"))
    }
    known = set(files)
    return {
        module: {
            m
            for m in _imports(parse(path.read_text(), str(path)), module, path.name == "__init__.py", known)
            if m in known and m != module
        }
        for module, path in files.items()
    }


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (its modules in order, the first repeated last), or ``[]``."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return path[path.index(module) :] + [module]
        if module in done:
            return []
        for imported in sorted(graph[module]):
            found = visit(imported, [*path, module])
            if found:
                return found
        done.add(module)
        return []

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return []


def test_the_box_has_no_import_cycle() -> None:
    graph = import_graph(REPO, "stacks.box")
    assert {"stacks.box.session", "stacks.box.rehearse_cli", "stacks.box.bench", "stacks.box.cli"} <= set(graph)
    assert cycle(graph) == []


def test_the_project_has_no_import_cycle() -> None:
    graph = import_graph(REPO, "components", "stacks")
    assert {"stacks.kinds.base", "stacks.config.jobs", "stacks.plan", "stacks.plan.admission"} <= set(graph)
    assert cycle(graph) == []


def test_the_cycle_walk_finds_a_function_local_cycle(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import x\n",
        "pkg/b.py": "x = 1\n\ndef f():\n    from pkg.c import y\n",
        "pkg/c.py": "from pkg import a\ny = 2\n",
        "pkg/d.py": "from pkg.a import x\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert cycle(import_graph(tmp_path, "pkg")) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
