"""What the installed package needs is declared and shipped, checked over the whole source:
every third-party module ``components`` and ``stacks`` import is a declared dependency (matplotlib, imported by the
benchmark's summary only after a paid run, was not), every image folder a preset names is shipped with the package,
and an image's context resolves from the user's project, else from the shipped folders.

The installed import names (setup.py): every module of ``components`` and ``stacks`` (and the program), rewritten as
the package installs it, imports and names only ``eks_training.*`` modules, which exist; a module that names one of
its modules by a name computed at run time is one the rewrite cannot see, so each such place is listed here with
where its names come from. The install itself: tests/real/test_installed_real.py."""

import ast
import glob
import importlib.util
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from stacks.bundle import SHIPPED, context_folder, shipped
from tests.harness import REPO, stack_names
from tests.python_source import parse

OWN = {"components", "stacks"}


def _imports() -> dict[str, set[str]]:
    """Top-level module -> the files of components/ and stacks/ that import it (anywhere in the file)."""
    found: dict[str, set[str]] = {}
    for path in [*(REPO / "components").rglob("*.py"), *(REPO / "stacks").rglob("*.py")]:
        tree = parse(path.read_text())
        optional = {
            id(n)
            for t in ast.walk(tree)
            if isinstance(t, ast.Try) and _catches_import_error(t)
            for b in t.body
            for n in ast.walk(b)
        }
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
    names = {n.id for h in t.handlers if h.type is not None for n in ast.walk(h.type) if isinstance(n, ast.Name)}
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
    pinned = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert _declared() <= pinned, _declared() - pinned


def test_every_image_folder_a_preset_names_is_shipped() -> None:
    named = {"training"}
    for stack in stack_names():
        config = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
        named |= {i["context"] for i in (config.get("eks-training:images") or {}).values() if "context" in i}
    assert named <= set(SHIPPED), named - set(SHIPPED)
    for folder in SHIPPED:
        assert (shipped(folder) / "Dockerfile").is_file(), folder
    # setup.py ships every file of them, and of the box's modules, as setuptools globs its patterns (the wheel's
    # content: tests/real/test_installed_real.py)
    packaged = {p for pattern in SETUP.SHIPPED for p in glob.glob(pattern, root_dir=REPO, recursive=True)}
    files = {
        str(p.relative_to(REPO))
        for folder in (*SHIPPED, "box")
        for p in (REPO / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert files - packaged == set()


def test_a_context_is_the_projects_folder_else_the_shipped_one(tmp_path: Path) -> None:
    assert context_folder("images/horovod", tmp_path) == shipped("images/horovod")  # the project has none
    own = tmp_path / "images" / "horovod"
    own.mkdir(parents=True)
    assert context_folder("images/horovod", tmp_path) == own  # the project's own wins
    (tmp_path / "training").mkdir()
    assert context_folder("training", tmp_path, default=True) == shipped("training")  # the default toolbox: shipped
    assert context_folder("mine", tmp_path) == tmp_path / "mine"  # nowhere: reported in the project


def _setup() -> ModuleType:
    """setup.py as a module (it calls setup() only when setuptools runs it as __main__)."""
    spec = importlib.util.spec_from_file_location("eks_training_setup", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = _setup()
MODULES = SETUP.own_modules(REPO)
#: The installed package's module names: each own one under eks_training, and eks_training itself.
INSTALLED = {f"eks_training.{m}" for m in MODULES} | {"eks_training", "eks_training.__main__"}
#: Calls that import or run a module by its name.
BY_NAME = {"import_module", "__import__", "run_module", "find_spec", "spec_from_file_location"}
#: Each place that passes such a call a name computed at run time, and where the names come from (the rewrite
#: prefixes those literals): a new one must be reviewed and added here.
COMPUTED = {
    ("stacks/cli.py", "self.module"): "Tool.module, the literals of TOOLS",
    ("components/lazy.py", "f'{package}.{where[name]}'"): "a submodule of the package's own __name__, installed or not",
    # only asked whether it exists: a top-level package outside OWN_PACKAGES, named by a ModuleNotFoundError
    ("stacks/cli.py", "top"): "a requirement a ModuleNotFoundError names (not an own module): asked only if it exists",
    # import_alias: the module `python -m` runs, checked to be a submodule of the stacks package's own __name__
    ("stacks/cli.py", "name"): "python -m's module, a submodule of the package's own __name__, installed or not",
    ("stacks/docs/library.py", "module"): "the literals of HELPERS, which the rewrite prefixes",
}


def _program_sources() -> list[Path]:
    return [
        *sorted((REPO / "components").rglob("*.py")),
        *sorted((REPO / "stacks").rglob("*.py")),
        REPO / "__main__.py",
    ]


def test_the_rewrite_gives_each_own_name_its_installed_name() -> None:
    source = (
        '"""Run python -m stacks.plan; from components import X; values from stacks; import stacks."""\n'
        "from __future__ import annotations\n"
        "import os, stacks.box.build as bb, components\n"
        "import stacks.plan\n"
        "from stacks.cli import (\n    a,  # stacks.cli\n    b,\n)\n"
        "from \\\n  components.catalog import x\n"
        "if os: import stacks.zones\n"
        "X = ('stacks.plan.report', 'stacks', 'stacks.nope', f'python -m stacks.box down {x}', b'stacks.plan', 'é' "
        "'stacks.cli')\ndef f():\n    from stacks import bundle\n    from .local import y\n    import componentsx\n"
    )
    assert SETUP.rewrite(source, MODULES) == (
        '"""Run python -m eks_training.stacks.plan; from eks_training.components import X; values from stacks; import '
        'stacks."""\n'
        "from __future__ import annotations\n"
        "import os, eks_training.stacks.box.build as bb, eks_training.components; from eks_training import components\n"
        "import eks_training.stacks.plan; from eks_training import stacks\n"
        "from eks_training.stacks.cli import (\n    a,  # stacks.cli\n    b,\n)\n"
        "from \\\n  eks_training.components.catalog import x\n"
        "if os: import eks_training.stacks.zones; from eks_training import stacks\n"
        "X = ('eks_training.stacks.plan.report', 'stacks', 'stacks.nope', f'python -m eks_training.stacks.box down "
        "{x}', b'stacks.plan', 'é' 'eks_training.stacks.cli')\n"
        "def f():\n    from eks_training.stacks import bundle\n    from .local import y\n    import componentsx\n"
    )


@pytest.mark.parametrize("path", _program_sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_module_installed_names_only_installed_modules(path: Path) -> None:
    out = SETUP.rewrite(path.read_text(), MODULES, str(path))
    tree = parse(out)
    compile(tree, str(path), "exec")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "eks_training" else [f"eks_training.{a.name}" for a in node.names]
        else:
            names = []
        for name in names:
            assert name.split(".")[0] not in OWN, f"{path}:{node.lineno} imports {name}"
            if name.startswith("eks_training"):
                assert name in INSTALLED, f"{path}:{node.lineno} imports {name}, which the package does not install"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert node.value not in MODULES or "." not in node.value, f"{path}:{node.lineno}: {node.value!r}"
            assert not re.search(r"-m\s+(components|stacks)\b", node.value), f"{path}:{node.lineno}: {node.value!r}"
            if node.value.startswith("eks_training."):
                assert node.value in INSTALLED, f"{path}:{node.lineno}: {node.value!r} is no installed module"
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in BY_NAME and node.args and not isinstance(node.args[0], ast.Constant):
                where = (str(path.relative_to(REPO)), ast.unparse(node.args[0]))
                assert where in COMPUTED, f"{where}: a module named at run time; review it and add it to COMPUTED"


def test_the_computed_module_names_come_from_rewritten_literals() -> None:
    """The one computed name (COMPUTED): each tool's module, a literal the rewrite prefixes."""
    from stacks.cli import TOOLS

    assert {t.module for t in TOOLS.values()} <= MODULES
    cli = SETUP.rewrite((REPO / "stacks" / "cli.py").read_text(), MODULES)
    for tool in TOOLS.values():
        assert f'"eks_training.{tool.module}"' in cli


def test_the_helpers_modules_are_rewritten_literals() -> None:
    """The reference's helpers (COMPUTED): each module a literal of HELPERS that the rewrite prefixes, so the installed
    docs generator imports ``eks_training.<module>``."""
    from stacks.docs.library import HELPERS

    assert {module for module, _, _ in HELPERS} <= MODULES
    library = SETUP.rewrite((REPO / "stacks" / "docs" / "library.py").read_text(), MODULES)
    for module, _, _ in HELPERS:
        assert f'"eks_training.{module}"' in library, module
