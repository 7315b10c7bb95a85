"""Python source parsed for the tests that read the tree's code (imports, layering, kinds' branches)."""

import ast
import gc


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` with the collector off while it builds the tree. CPython 3.11 keeps one AST recursion counter
    per interpreter: a collection's finalizer can hand the GIL to another thread that builds a tree meanwhile, and the
    first build then fails with ``SystemError: AST constructor recursion depth mismatch``
    (https://github.com/python/cpython/issues/106905; seen in tests/unit/test_cli.py under a busy xdist run)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if enabled:
            gc.enable()
