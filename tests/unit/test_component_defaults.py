"""Each default an argument's docstring states is the one its component applies. The docstrings must be plain text
(Pulumi's schema analyzer reads them from the source), so they repeat values that live in constants; this test ties
each ``Default X`` to the ``args.get(field, X)`` or ``args.get(field) or X`` that reads the field, and each "the
trainer's default" to the bundled trainer's flag."""

import ast
import importlib
import re
from pathlib import Path
from typing import Any

from tests.config_support import trainer_defaults
from tests.harness import REPO
from tests.python_source import parse

#: ``Default ``value``.`` or ``Default 3.`` / ``Default False.`` in a field's docstring.
STATED = re.compile(r"Default:? ``([^`]+)``|Default:? (-?\d+(?:\.\d+)?|True|False)\b")
#: Fields their own module does not read: (Args class, field) -> the modules that read it, with the same default.
READERS = {
    ("CommandJobArgs", "max_retries"): ("components.workloads.indexed",),
    ("TensorFlowJobArgs", "max_retries"): ("components.workloads.indexed",),
    ("JobSpec", "timeout_hours"): ("components.workloads.indexed_job", "components.workloads.mpi"),
    ("JobSpec", "wait_for_completion"): ("components.workloads.indexed_job",),
    ("JobSpec", "stop_grace_period_seconds"): ("components.workloads.spec",),
    # MpiJob's False is stated in the same docstring (its workers' sshd writes to the image)
    ("JobSpec", "read_only_root_filesystem"): ("components.workloads.indexed_job",),
}
#: Stated defaults no single value stands for: (Args class, field) -> why.
COMPUTED = {
    ("AllReduceHealthCheckArgs", "max_bytes"): "1 GiB on GPU, 64 MiB on CPU: chosen from the placement",
}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def stated_defaults() -> dict[tuple[str, str, str], str]:
    """(module, Args class, field) -> the default its docstring states, for every TypedDict of the components."""
    found = {}
    for path in sorted((REPO / "components").rglob("*.py")):
        for node in ast.walk(parse(path.read_text())):
            if not (isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "TypedDict" for b in node.bases)):
                continue
            for field, doc in zip(node.body, node.body[1:]):
                if (
                    isinstance(field, ast.AnnAssign)
                    and isinstance(field.target, ast.Name)
                    and isinstance(doc, ast.Expr)
                    and isinstance(doc.value, ast.Constant)
                    and isinstance(doc.value.value, str)
                    and (m := STATED.search(doc.value.value))
                ):
                    found[(_module(path), node.name, field.target.id)] = m.group(1) or m.group(2)
    return found


def _get_of(node: ast.AST) -> str | None:
    """The field a ``<name>.get("field")`` call reads."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def applied_defaults(module: str, field: str) -> list[Any]:
    """The defaults ``module`` reads ``field`` with: ``x.get(field, D)``, ``x.get(field) or D`` (``D`` a literal or a
    module constant); ``None`` for a bare ``x.get(field)`` (falsy)."""
    mod = importlib.import_module(module)
    tree = parse(Path(mod.__file__ or "").read_text())
    found: list[Any] = []
    or_reads = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _get_of(node.values[0]) == field:
            or_reads.add(id(node.values[0]))
            found.append(eval(ast.unparse(node.values[1]), vars(mod)))  # noqa: S307 - the module's own source
    for node in ast.walk(tree):
        if _get_of(node) == field and id(node) not in or_reads:
            assert isinstance(node, ast.Call)
            found.append(eval(ast.unparse(node.args[1]), vars(mod)) if len(node.args) > 1 else None)  # noqa: S307
    return found


def _same(stated: str, value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return stated == str(bool(value))
    if isinstance(value, (int, float)):
        return float(stated) == value
    if isinstance(value, (list, tuple)):
        return list(value) == ([stated] if not stated.startswith("[") else ast.literal_eval(stated))
    return stated == value


def test_every_stated_default_is_the_one_applied() -> None:
    wrong, unread, checked = [], [], 0
    for (module, cls, field), stated in stated_defaults().items():
        if (cls, field) in COMPUTED:
            continue
        readers = READERS.get((cls, field), (module,))
        values = [v for reader in readers for v in applied_defaults(reader, field)]
        if not values:
            unread.append(f"{module}.{cls}.{field}")
        for value in values:
            checked += 1
            if not _same(stated, value):
                wrong.append(f"{module}.{cls}.{field}: the docstring says {stated!r}, the component applies {value!r}")
    assert wrong == [], "make the docstring say the default the code applies:\n" + "\n".join(wrong)
    assert unread == [], "no read of these fields found: name the module that reads them in READERS:\n" + "\n".join(
        unread
    )
    assert checked >= 40, checked


def test_the_check_finds_a_stated_default_that_differs() -> None:
    assert not _same("3", 4) and not _same("training", "ml-training") and not _same("False", True)
    assert _same("3", 3) and _same("0.0.0.0/0", ["0.0.0.0/0"]) and _same('["0.0.0.0/0"]', ["0.0.0.0/0"])
    assert _same("False", None)


#: ``(``VARIABLE``; the trainer's default: N)`` in a docstring: the bundled trainer's own default for that variable.
TRAINER_STATED = re.compile(r"``([A-Z_]+)``; the trainer's default: (\d+(?:\.\d+)?)")


def test_each_trainer_default_a_docstring_states_is_the_trainers() -> None:
    defaults = trainer_defaults()
    stated = [
        (path.relative_to(REPO), variable, float(value))
        for path in sorted((REPO / "components").rglob("*.py"))
        for variable, value in TRAINER_STATED.findall(path.read_text())
    ]
    assert len(stated) >= 2, stated
    wrong = [f"{p}: {v} {n:g}, the trainer's is {defaults.get(v)}" for p, v, n in stated if defaults.get(v) != n]
    assert wrong == [], wrong
