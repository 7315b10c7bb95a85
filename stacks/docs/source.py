"""Python source read as a tree, safe beside other threads (the docs generators and the tests use it)."""

import ast
import gc
import inspect


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` with the collector off while it builds the tree. CPython 3.11 keeps one AST recursion counter
    per interpreter: a collection's finalizer can hand the GIL to another thread that builds a tree meanwhile, and the
    first build then fails with ``SystemError: AST constructor recursion depth mismatch``
    (https://github.com/python/cpython/issues/106905)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if enabled:
            gc.enable()


def class_source(cls: type) -> str:
    """``inspect.getsource(cls)`` under the same guard: on CPython 3.11 it finds a class by parsing its module."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return inspect.getsource(cls)
    finally:
        if enabled:
            gc.enable()
