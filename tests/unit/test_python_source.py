"""Python source is read as a tree through one guarded module (``stacks/docs/source.py``), which no other thread's
tree can break (CPython 3.11's AST recursion counter; tests failed so under busy runs)."""

import gc
from collections.abc import Callable

import pytest

from tests.harness import REPO
from tests.python_source import class_source, parse

#: Calls that build an AST in CPython 3.11: ``inspect`` finds a class's source by parsing its module.
TREE_BUILDERS = ("ast" + ".parse(", "inspect" + ".getsource(", "getsource" + "lines(", "find" + "source(")
#: Read by ``pip``'s build in a process of its own, with no other thread.
OWN_PROCESS = {"setup.py"}
GUARD = "stacks/docs/source.py"


def test_nothing_builds_a_tree_but_through_the_guarded_module() -> None:
    found = [
        (str(p.relative_to(REPO)), call)
        for top in ("tests", "stacks", "components", "training")
        for p in (REPO / top).rglob("*.py")
        for call in TREE_BUILDERS
        if str(p.relative_to(REPO)) != GUARD and call in p.read_text()
    ]
    found += [(f, c) for f in ("__main__.py",) for c in TREE_BUILDERS if c in (REPO / f).read_text()]
    assert found == [], "read Python source through stacks.docs.source.parse or class_source"
    assert {p.name for p in REPO.glob("*.py")} - {"__main__.py"} == OWN_PROCESS


@pytest.mark.parametrize("read", [lambda: parse("import os\nx = 1\n"), lambda: class_source(pytest.MonkeyPatch)])
def test_the_guard_keeps_the_collectors_state(read: Callable[[], object]) -> None:
    assert gc.isenabled()
    assert read()
    assert gc.isenabled()
    gc.disable()
    try:
        read()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_parser_builds_the_tree() -> None:
    assert [type(n).__name__ for n in parse("import os\nx = 1\n").body] == ["Import", "Assign"]
    assert "class MonkeyPatch" in class_source(pytest.MonkeyPatch)
