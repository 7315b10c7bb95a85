"""A test's bound on how long a run may take (a process, a subprocess, a thread, a box wait, the test's own wait)
stretches with the machine's load through :func:`tests.wait.patient`: on a busy 2-core machine a fixed number fails a
correct run. This scans every module under tests/ for a bound given as a fixed number."""

import ast

import pytest

from tests.harness import REPO
from tests.python_source import parse

pytestmark = pytest.mark.unit

#: The keywords and parameters that name a bound.
BOUND_NAMES = {"timeout", "timeout_s"}

#: Calls whose fixed timeout is not a run's bound, each with why.
ALLOWED = {
    # One request of a polling loop (the loop's own wait_for is the bound, and it is patient).
    "urlopen": "a request inside a polling loop",
    # One connection attempt of a polling loop (the loop's deadline is the bound, and it is patient).
    "create_connection": "a connection attempt inside a polling loop",
    # stacks.box.rehearse.Step: its timeout is data the timeline messages under test are built from, not a wait.
    "Step": "the rehearsal's step, product data under test",
}

#: Standard library calls that take a bound by position: the name and the argument's index (``self`` not counted).
POSITIONAL = {"wait": 0, "join": 0, "communicate": 1}

#: Clocks a deadline is counted from (``time.monotonic() + 30`` is a bound too).
CLOCKS = {"monotonic", "time"}


def _number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def _fixed(node: ast.AST, constants: frozenset[str] = frozenset()) -> bool:
    """A number written in the source, a module's numeric constant (``RUN_TIMEOUT = 150.0``), or arithmetic of numbers
    only or with such a constant in it, none stretched by ``patient``."""
    leaves = [n for n in ast.walk(node) if not isinstance(n, (ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop))]
    if any(isinstance(n, ast.Call) for n in leaves):
        return False
    named = [n for n in leaves if isinstance(n, ast.Name) and n.id in constants]
    return bool(named) or (bool(leaves) and all(_number(n) for n in leaves))


def _constants(trees: dict[str, ast.Module]) -> frozenset[str]:
    """The upper-case names these modules bind to a number at their top (``RUN_TIMEOUT = 150.0``)."""
    return frozenset(
        target.id
        for tree in trees.values()
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _number(node.value)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id.isupper()
    )


def _name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _positions(trees: dict[str, ast.Module]) -> dict[str, set[int]]:
    """Each function name defined in these modules with the positions of its bound parameters (``self`` and ``cls``
    not counted), with the standard library's."""
    found: dict[str, set[int]] = {name: {i} for name, i in POSITIONAL.items()}
    for tree in trees.values():
        for fn in _functions(tree):
            names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            if names[:1] in (["self"], ["cls"]):
                names = names[1:]
            for i, name in enumerate(names):
                if name in BOUND_NAMES:
                    found.setdefault(fn.name, set()).add(i)
    return found


def _defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.arg, ast.expr]]:
    positional = fn.args.posonlyargs + fn.args.args
    pairs = list(zip(positional[len(positional) - len(fn.args.defaults) :], fn.args.defaults))
    return pairs + [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None]


def _deadline(node: ast.BinOp) -> bool:
    """``<clock>() + <number>``, either way round."""
    if not isinstance(node.op, ast.Add):
        return False
    for clock, offset in ((node.left, node.right), (node.right, node.left)):
        if isinstance(clock, ast.Call) and _name(clock) in CLOCKS and not clock.args and _fixed(offset):
            return True
    return False


def fixed_bounds(sources: dict[str, str]) -> list[str]:
    """``file:line: what`` for every bound given as a fixed number in these modules (path to source): a call's
    ``timeout``/``timeout_s`` keyword or its bound argument by position, the default of a ``timeout``/``timeout_s``
    parameter, a deadline of a clock plus a number. Calls named in :data:`ALLOWED` are not bounds."""
    trees = {path: parse(source) for path, source in sources.items()}
    positions = _positions(trees)
    constants = _constants(trees)
    found: list[str] = []
    for path, tree in trees.items():
        for fn in _functions(tree):
            for arg, default in _defaults(fn):
                if arg.arg in BOUND_NAMES and _fixed(default, constants):
                    found.append(f"{path}:{default.lineno}: {fn.name}'s default {arg.arg}={ast.unparse(default)}")
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and _deadline(node):
                found.append(f"{path}:{node.lineno}: deadline {ast.unparse(node)}")
            if not isinstance(node, ast.Call) or _name(node) in ALLOWED:
                continue
            given = [k.value for k in node.keywords if k.arg in BOUND_NAMES]
            given += [node.args[i] for i in positions.get(_name(node) or "", ()) if i < len(node.args)]
            if any(_fixed(value, constants) for value in given):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}")
    return sorted(found)


def _tests() -> dict[str, str]:
    return {str(p.relative_to(REPO)): p.read_text() for p in sorted((REPO / "tests").rglob("*.py"))}


def test_every_bound_in_the_tests_stretches_with_the_load() -> None:
    found = fixed_bounds(_tests())
    assert found == [], "a fixed bound fails a correct run on a busy machine; wrap it in tests.wait.patient(...):\n" + (
        "\n".join(found)
    )


def test_every_allowed_call_is_still_met_with_a_fixed_timeout() -> None:
    """The allow-list names only calls the tests make with a fixed timeout (a stale entry would hide a new bound)."""
    met: set[str] = set()
    for source in _tests().values():
        for node in ast.walk(parse(source)):
            if isinstance(node, ast.Call) and any(k.arg in BOUND_NAMES and _fixed(k.value) for k in node.keywords):
                met.add(_name(node) or "")
    assert set(ALLOWED) <= met, set(ALLOWED) - met


SAMPLE = """\
def helper(x, timeout=30):
    pass
def method(self, x, timeout: float | None = None):
    pass
proc.wait(timeout=10)
proc.wait(timeout=patient(10))
helper(1, 5)
helper(1, patient(5))
obj.method(1, 2.5 * 2)
t.join(3)
proc.communicate(None, 4)
RUN_TIMEOUT = 150.0
deadline = time.monotonic() + 20
deadline = time.monotonic() + patient(20)
urllib.request.urlopen(url, timeout=1)
box.wait_for(ready, timeout_s=60)
box.wait_for(ready, timeout_s=patient(60))
Step("urn", "name", [], timeout_s=10.0)
time.sleep(5)
proc.wait(timeout=RUN_TIMEOUT + 4 * stall)
proc.wait(timeout=patient(RUN_TIMEOUT))
proc.wait(timeout=bound * 2)
"""


def test_the_scan_finds_a_fixed_bound_and_accepts_a_patient_one() -> None:
    found = fixed_bounds({"tests/sample.py": SAMPLE})
    lines = sorted(int(f.split(":")[1]) for f in found)
    assert lines == [1, 5, 7, 9, 10, 11, 13, 16, 20], found
    assert "tests/sample.py:1: helper's default timeout=30" in found
    assert not fixed_bounds({"tests/fine.py": "proc.wait(timeout=patient(60))\nwait_for(ready, patient(60))\n"})
