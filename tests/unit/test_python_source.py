"""Python source is read as a tree through one guarded module (``stacks/docs/source.py``), whose builds neither
another thread's tree nor a collection's finalizer can break (CPython 3.11's AST recursion counter; tests failed so
under busy runs, and once in CI)."""

import ast
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import components
from tests.harness import REPO
from tests.python_source import class_source, component_analysis, parse

#: Calls that build an AST in CPython 3.11: ``inspect`` finds a class's source by parsing its module; Pulumi's
#: schema analyzer reads each field's docstring so, and drops the error (the field then has no description).
TREE_BUILDERS = (
    "ast" + ".parse(",
    "inspect" + ".getsource(",
    "getsource" + "lines(",
    "find" + "source(",
    "Analyzer" + "(",
)
#: Read by ``pip``'s build, and by the packaging tests in theirs: it cannot import the guard, so it has its own
#: (``setup.py`` ``_parse``).
OWN_PROCESS = {"setup.py"}
GUARD = "stacks/docs/source.py"
#: This module: its control builds trees unguarded on purpose.
CONTROL = "tests/unit/test_python_source.py"


def test_nothing_builds_a_tree_but_through_the_guarded_module() -> None:
    found = [
        (str(p.relative_to(REPO)), call)
        for top in ("tests", "stacks", "components", "training")
        for p in (REPO / top).rglob("*.py")
        for call in TREE_BUILDERS
        if str(p.relative_to(REPO)) not in (GUARD, CONTROL) and call in p.read_text()
    ]
    found += [(f, c) for f in ("__main__.py",) for c in TREE_BUILDERS if c in (REPO / f).read_text()]
    assert found == [], "read Python source through stacks.docs.source.parse or class_source"
    assert {p.name for p in REPO.glob("*.py")} - {"__main__.py"} == OWN_PROCESS
    setup = (REPO / "setup.py").read_text()
    body = setup[setup.index("def _parse(") :].split("\ndef ", 1)[0]
    assert setup.count(TREE_BUILDERS[0]) == 1 and TREE_BUILDERS[0] in body and "gc.disable()" in body, (
        "setup.py builds trees only through its _parse, with the collector off"
    )


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


@contextmanager
def collections_that_build_trees() -> Iterator[None]:
    """Every collection builds a tree first, as a finalizer that logs a traceback does (3.11's traceback parses the
    failing line), and one runs every 100 allocations. The tree is built 200 calls deeper than the collection: the
    interrupted build's counter then cannot come back to its start by chance (at the depth of the collection it did
    about one time in four)."""

    def build_deeper(calls: int) -> object:
        return build_deeper(calls - 1) if calls else ast.parse("x = [1, (2, {3: 4})]")

    def build(phase: str, info: object) -> None:
        if phase == "start":
            build_deeper(200)

    threshold = gc.get_threshold()
    gc.callbacks.append(build)
    gc.set_threshold(100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(build)


def test_a_collection_that_builds_a_tree_breaks_no_guarded_read() -> None:
    """What failed the component schema's test once (a field without its description): a finalizer's traceback
    parsed during the analyzer's read of the class. Control: the same read unguarded fails."""
    source = (REPO / "components" / "nodegroup.py").read_text()
    with collections_that_build_trees():
        with pytest.raises(SystemError, match="recursion depth mismatch"):
            ast.parse(source)
        assert parse(source).body
        assert "class TrainingNodeGroupArgs" in class_source(components.TrainingNodeGroupArgs)
        analysis = component_analysis(components.PACKAGE_NAME, components.COMPONENTS)
    fields = [p for d in analysis["component_definitions"].values() for p in d.inputs.values()]
    assert fields and all(p.description for p in fields)
