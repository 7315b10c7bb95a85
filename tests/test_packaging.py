"""What the installed package needs is declared and shipped (issue 19, finding 2), checked over the whole source:
every third-party module ``components`` and ``stacks`` import is a declared dependency (matplotlib, imported by the
benchmark's summary only after a paid run, was not), every image folder a preset names is shipped with the package,
and an image's context resolves from the user's project, else from the shipped folders.
The install itself: tests/test_installed_real.py."""

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from stacks.bundle import SHIPPED, context_folder, shipped
from tests.harness import REPO, stack_names

pytestmark = pytest.mark.unit

OWN = {"components", "stacks"}


def _imports() -> dict[str, set[str]]:
    """Top-level module -> the files of components/ and stacks/ that import it (anywhere in the file)."""
    found: dict[str, set[str]] = {}
    for path in [*(REPO / "components").rglob("*.py"), *(REPO / "stacks").rglob("*.py")]:
        tree = ast.parse(path.read_text())
        optional = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) and _catches_import_error(t)
                    for b in t.body for n in ast.walk(b)}
        for node in ast.walk(tree):
            if id(node) in optional:
                continue  # try: import x / except ImportError: an optional module, with a fallback
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return found


def _catches_import_error(t: ast.Try) -> bool:
    names = {n.id for h in t.handlers if h.type is not None
             for n in ast.walk(h.type) if isinstance(n, ast.Name)}
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def _declared() -> set[str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}


def test_every_third_party_import_is_a_declared_dependency() -> None:
    distributions = metadata.packages_distributions()
    declared = _declared()
    undeclared = {}
    for module, files in _imports().items():
        if module in OWN or module in sys.stdlib_module_names:
            continue
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not dists & declared:
            undeclared[module] = sorted(files)
    assert undeclared == {}, f"imported but not in pyproject.toml's dependencies: {undeclared}"
    assert "matplotlib" in declared  # the benchmark summary's chart


def test_the_declared_dependencies_are_pinned_in_requirements() -> None:
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in (REPO / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert _declared() <= pinned, _declared() - pinned


def test_every_image_folder_a_preset_names_is_shipped() -> None:
    named = {"training"}
    for stack in stack_names():
        config = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
        named |= {i["context"] for i in (config.get("eks-training:images") or {}).values() if "context" in i}
    assert named <= set(SHIPPED), named - set(SHIPPED)
    for folder in SHIPPED:
        assert (shipped(folder) / "Dockerfile").is_file(), folder
    setup = (REPO / "setup.py").read_text()
    assert '"stacks._shipped.training": "training"' in setup and '"stacks._shipped.images": "images"' in setup


def test_a_context_is_the_projects_folder_else_the_shipped_one(tmp_path: Path) -> None:
    assert context_folder("images/horovod", tmp_path) == shipped("images/horovod")  # the project has none
    own = tmp_path / "images" / "horovod"
    own.mkdir(parents=True)
    assert context_folder("images/horovod", tmp_path) == own  # the project's own wins
    (tmp_path / "training").mkdir()
    assert context_folder("training", tmp_path, default=True) == shipped("training")  # the default toolbox: shipped
    assert context_folder("mine", tmp_path) == tmp_path / "mine"  # nowhere: reported in the project
