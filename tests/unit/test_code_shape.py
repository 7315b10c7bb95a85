"""The code keeps the shape a newcomer can change (docs/contributing/index.md): short functions (constructors call
named steps), short module docstrings (the reasoning is on the explanation pages), the project's modules imported at
the top of a module, and config rules in small modules."""

import ast
import functools

import pytest

from tests.harness import REPO
from tests.python_source import parse

pytestmark = pytest.mark.unit

#: The product's code (the tests are not measured).
PACKAGES = ("components", "stacks", "training", "provider")
#: The project's own top-level import names.
OWN = {"components", "stacks", "training", "eks_training"}

#: The longest function, in lines: a longer one is split into named steps.
MAX_FUNCTION_LINES = 100
#: The longest module docstring, and the 90th percentile of their lengths, in lines.
MAX_DOCSTRING_LINES = 30
P90_DOCSTRING_LINES = 15
#: Imports of the project's own modules inside functions (each one hides an import order the top would show).
MAX_LOCAL_IMPORTS = 20
#: The longest module of config rules (stacks/config/rules/), in lines.
MAX_RULES_MODULE_LINES = 300


@functools.cache
def _sources() -> dict[str, ast.Module]:
    files = [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))] + [REPO / "__main__.py"]
    return {str(p.relative_to(REPO)): parse(p.read_text(), str(p)) for p in files}


def functions(trees: dict[str, ast.Module]) -> list[tuple[str, int, str, int]]:
    """(path, line, name, length in lines) of every function."""
    return [
        (path, node.lineno, node.name, node.end_lineno - node.lineno + 1)  # type: ignore[operator]
        for path, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def long_functions(found: list[tuple[str, int, str, int]], limit: int) -> list[str]:
    return [f"{path}:{line} {name}: {n} lines" for path, line, name, n in found if n > limit]


def docstring_lines(trees: dict[str, ast.Module]) -> dict[str, int]:
    return {
        path: doc.count("\n") + 1
        for path, tree in trees.items()
        if (doc := ast.get_docstring(tree, clean=False)) is not None
    }


def local_imports(trees: dict[str, ast.Module]) -> list[str]:
    """``path:line`` of every import of the project's own modules inside a function."""
    found = []
    for path, tree in trees.items():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                own = (
                    isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] in OWN)
                ) or (isinstance(node, ast.Import) and any(a.name.split(".")[0] in OWN for a in node.names))
                if own:
                    found.append(f"{path}:{node.lineno}")  # type: ignore[attr-defined]
    return sorted(set(found))


def test_the_measures_find_what_they_measure() -> None:
    source = "\n".join(
        [
            '"""One.',
            "",
            "Two.",
            'Three."""',
            "",
            "",
            "def f():",
            "    from stacks import plan",
            "    import training.launch",
        ]
        + ["    import os"]
        + ["    x = 1"] * 5
    )
    trees = {"m.py": parse(source, "m.py")}
    assert long_functions(functions(trees), 7) == ["m.py:7 f: 9 lines"] and long_functions(functions(trees), 9) == []
    assert docstring_lines(trees) == {"m.py": 4}
    assert local_imports(trees) == ["m.py:8", "m.py:9"]


def test_no_function_is_longer_than_the_limit() -> None:
    found = functions(_sources())
    assert len(found) > 1000, "the measure reads the tree's functions"
    assert long_functions(found, MAX_FUNCTION_LINES) == [], (
        f"split these into named steps of at most {MAX_FUNCTION_LINES} lines (as pulumi-eks's constructors do)"
    )


def test_module_docstrings_say_what_the_module_is_for() -> None:
    lengths = docstring_lines(_sources())
    long = {path: n for path, n in lengths.items() if n > MAX_DOCSTRING_LINES}
    assert not long, f"move the design reasoning to docs/explanation/ and keep what the module is for: {long}"
    ordered = sorted(lengths.values())
    p90 = ordered[int(0.9 * len(ordered))]
    longest = sorted(lengths.items(), key=lambda kv: -kv[1])[:10]
    assert p90 <= P90_DOCSTRING_LINES, f"90th percentile {p90} lines; the longest: {longest}"


def test_the_projects_modules_are_imported_at_the_top() -> None:
    found = local_imports(_sources())
    assert found, "the measure reads the tree's imports"
    assert len(found) <= MAX_LOCAL_IMPORTS, (
        f"{len(found)} imports of the project's modules inside functions (at most {MAX_LOCAL_IMPORTS}): import at "
        f"the top, or break the cycle the local import hides: {found}"
    )


def test_config_rules_are_small_modules() -> None:
    rules = sorted((REPO / "stacks" / "config" / "rules").rglob("*.py"))
    assert rules, "stacks/config/rules/ moved: update this test"
    long = {
        str(p.relative_to(REPO)): n for p in rules if (n := len(p.read_text().splitlines())) > MAX_RULES_MODULE_LINES
    }
    assert not long, f"split these rules modules by section (ARCHITECTURE.md): {long}"
