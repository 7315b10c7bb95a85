"""Python source read as a tree, safe beside other threads (the docs generators and the tests use it)."""

import ast
import gc
import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


@contextmanager
def collector_off() -> Iterator[None]:
    """The garbage collector off for the block, and back as it was. CPython 3.11 keeps one AST recursion counter per
    interpreter: a collection's finalizer that builds a tree too (a logged traceback parses its lines), or hands the
    GIL to a thread that does, makes the first build fail with ``SystemError: AST constructor recursion depth
    mismatch`` (https://github.com/python/cpython/issues/106905)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` with the collector off while it builds the tree."""
    with collector_off():
        return ast.parse(source, filename)


def class_source(cls: type) -> str:
    """``inspect.getsource(cls)`` with the collector off: on CPython 3.11 it finds a class by parsing its module."""
    with collector_off():
        return inspect.getsource(cls)


def component_analysis(package: str, classes: Sequence[type]) -> dict[str, Any]:
    """Pulumi's schema analyzer over ``classes`` with the collector off: it reads each field's docstring with
    ``inspect.getsource`` and drops any error, so a broken build there would leave the field without a description."""
    from pulumi.provider.experimental.analyzer import Analyzer

    with collector_off():
        return Analyzer(package).analyze(list(classes))  # type: ignore[return-value]
