"""The library's packages import their names on first use (components/lazy.py): ``import components`` loads no cloud
SDK, and the offline tools' config loads neither pulumi-eks nor pulumi-aws's services. Every name a lazy package lists
resolves."""

import ast
import importlib
import subprocess
import sys

import pytest

from tests.harness import REPO
from tests.python_source import parse
from tests.wait import patient

LAZY = ("components", "components.image", "components.storage", "components.workloads")


def _loaded(module: str) -> set[str]:
    """The modules a fresh interpreter ran after ``import module`` (not the SDKs' lazy ones, not yet run)."""
    ran = "(k for k, v in sys.modules.items() if type(v).__name__ != '_LazyModule')"
    code = f"import sys, {module}; print(' '.join({ran}))"
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=patient(120))
    assert run.returncode == 0, run.stderr
    out = run
    return set(out.stdout.split())


def test_importing_the_library_loads_no_cloud_sdk() -> None:
    loaded = _loaded("components")
    assert not {m for m in loaded if m.split(".")[0] in ("pulumi", "pulumi_aws", "pulumi_eks", "pulumi_kubernetes")}


def test_the_config_loads_no_eks_and_only_the_aws_services_a_jobs_identity_needs() -> None:
    """What ``python -m stacks plan`` reads the stack file with: pulumi-aws's services are the slowest part of the
    SDKs to import; the config reaches only the job module's Pod Identity (eks, iam), none of the others."""
    services = {m.split(".")[1] for m in _loaded("stacks.config") if m.startswith("pulumi_aws.") and m.count(".") >= 2}
    assert services <= {"eks", "iam"}, services
    assert "pulumi_eks" not in _loaded("stacks.config")


def typing_imports(package: str) -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` imports of ``package``'s ``__init__.py`` give it, with its module."""
    tree = parse((REPO / package.replace(".", "/") / "__init__.py").read_text())
    return {
        a.asname or a.name: stmt.module
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        if isinstance(stmt, ast.ImportFrom) and stmt.module
        for a in stmt.names
    }


@pytest.mark.parametrize("package", LAZY)
def test_every_name_a_lazy_package_lists_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = typing_imports(package)
    assert names and set(names) <= set(module.__all__), set(names) - set(module.__all__)
    # a submodule of the same name would take the name's place once imported (the import system binds it)
    folder = REPO / package.replace(".", "/")
    submodules = {p.stem for p in folder.glob("*.py")} | {p.parent.name for p in folder.glob("*/__init__.py")}
    assert not set(names) & submodules
    for name, source in names.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name), name
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        getattr(module, "Nothing")


def test_the_components_list_is_every_component() -> None:
    import components

    assert [c.__name__ for c in components.COMPONENTS] == list(components._COMPONENT_NAMES)
