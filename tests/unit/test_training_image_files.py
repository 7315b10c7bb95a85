"""The training image carries every module its scripts import (training/Dockerfile and .dockerignore).

The build context is training/ filtered by its .dockerignore (a whitelist), and the Dockerfile copies
the scripts by name: a new module must be added to both, or the scripts fail to import in the pods.
"""

from __future__ import annotations

import ast
from pathlib import Path

from components.image.context import collect_build_context
from components.image.dockerfile import Dockerfile
from stacks.config.rules.images import training_imports
from tests.python_source import parse

TRAINING = Path(__file__).resolve().parents[2] / "training"


def copied_files() -> list[str]:
    """The scripts the Dockerfile copies into /app (:meth:`~components.image.dockerfile.Dockerfile.copies`)."""
    scripts = [s for c in Dockerfile.read(TRAINING / "Dockerfile").copies() if c.dest == "/app" for s in c.sources]
    assert scripts, "training/Dockerfile copies no script into /app"
    return scripts


def test_every_local_import_of_a_copied_script_is_copied_and_in_the_build_context() -> None:
    copied = copied_files()
    in_context = {entry.path for entry in collect_build_context(str(TRAINING))}
    assert "run_lease.py" in copied
    for script in copied:
        assert script in in_context, f"{script} is copied by the Dockerfile but excluded by .dockerignore"
        for module in training_imports(script):  # what the config rule asks of a copy too
            assert module in copied, f"{script} imports {module}, which the Dockerfile does not copy"


def named_files(path: Path) -> set[str]:
    """Files in training/ that ``path`` names in a string (a script it runs by path, not by import)."""
    tree = parse(path.read_text())
    names = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return {name for name in names if name.endswith(".py") and "/" not in name and (TRAINING / name).is_file()}


def test_every_script_a_copied_script_runs_by_path_is_copied() -> None:
    """launch.py runs run_script.py by its path beside it: an import check alone would not see it missing."""
    copied = copied_files()
    assert "run_script.py" in named_files(TRAINING / "launch.py")
    for script in copied:
        for name in named_files(TRAINING / script):
            assert name in copied, f"{script} names {name}, which the Dockerfile does not copy"


def _imported(script: str) -> set[str]:
    """The modules of training/ ``script`` imports, read from its syntax tree."""
    tree = parse((TRAINING / script).read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return {f"{name}.py" for name in names if (TRAINING / f"{name}.py").is_file()}


def test_the_config_rule_reads_every_scripts_imports_as_the_syntax_tree_does() -> None:
    """The rule on one's own copy of training/ (``training_imports``) reads import lines; the tree is the truth."""
    for path in sorted(TRAINING.glob("*.py")):
        closure, todo = set(), [path.name]
        while todo:
            for module in _imported(todo.pop()) - closure - {path.name}:
                closure.add(module)
                todo.append(module)
        assert set(training_imports(path.name)) == closure, path.name
    assert training_imports("run_script.py") == ("process_end.py",)
