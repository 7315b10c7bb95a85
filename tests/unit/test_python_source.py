"""The tests read the tree's code through one parser (tests/python_source.py), which no other thread's tree can
break (CPython 3.11's AST recursion counter; a test failed so under a busy run)."""

import gc
from pathlib import Path

from tests.python_source import parse

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_parses_python_but_through_the_guarded_parser() -> None:
    call = "ast" + ".parse("
    found = [
        str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py") if p.name != "python_source.py" and call in p.read_text()
    ]
    assert found == []


def test_the_parser_keeps_the_collectors_state() -> None:
    assert gc.isenabled()
    assert [type(n).__name__ for n in parse("import os\nx = 1\n").body] == ["Import", "Assign"]
    assert gc.isenabled()
    gc.disable()
    try:
        parse("x = 1")
        assert not gc.isenabled()
    finally:
        gc.enable()
