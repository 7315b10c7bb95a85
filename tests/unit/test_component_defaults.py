"""Each default an argument's docstring states is the one its component applies. The docstrings must be plain text
(Pulumi's schema analyzer reads them from the source), so they repeat values that live in constants; this test ties
each ``Default X`` to the ``args.get(field, X)`` or ``args.get(field) or X`` that reads the field, and each "the
trainer's default" to the bundled trainer's flag."""

import ast
import importlib
import re
from pathlib import Path
from typing import Any, Optional

from tests.config_support import config_models, trainer_defaults
from tests.harness import REPO
from tests.python_source import parse

#: ``Default ``value``.`` or ``Default 3.`` / ``Default False.`` in a field's docstring, or ``(default 3)``: each form
#: a default is stated in is checked (the trainer's own defaults are checked below).
STATED = re.compile(r"(?<!trainer's )(?:[Dd]efault:? ``([^`]+)``|[Dd]efault:? (-?\d+(?:\.\d+)?|True|False)\b)")
#: Fields their own module does not read: (Args class, field) -> the modules that read it, with the same default.
READERS = {
    ("CommandJobArgs", "max_retries"): ("components.workloads.indexed",),
    ("TensorFlowJobArgs", "max_retries"): ("components.workloads.indexed",),
    ("JobSpec", "timeout_hours"): ("components.workloads.waits",),
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


def applied_defaults(module: str, field: str, *, locals_too: bool = True) -> list[Any]:
    """The defaults ``module`` reads ``field`` with: ``x.get(field, D)``, ``x.get(field) or D`` (``D`` a literal or a
    module constant); ``None`` for a bare ``x.get(field)`` (falsy). A ``D`` that names a local variable raises
    ``NameError``, or is left out without ``locals_too``."""
    mod = importlib.import_module(module)
    tree = parse(Path(mod.__file__ or "").read_text())
    found: list[Any] = []
    or_reads = set()

    def value(expr: ast.expr) -> list[Any]:
        try:
            return [eval(ast.unparse(expr), vars(mod))]  # noqa: S307 - the module's own source
        except NameError:
            if locals_too:
                raise
            return []

    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and _get_of(node.values[0]) == field:
            or_reads.add(id(node.values[0]))
            found += value(node.values[1])
    for node in ast.walk(tree):
        if _get_of(node) == field and id(node) not in or_reads:
            assert isinstance(node, ast.Call)
            found += value(node.args[1]) if len(node.args) > 1 else [None]
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


#: Which config models feed which component's arguments: (component module, its Args class) -> the models whose
#: fields the program passes it, and the fields named otherwise there (argument -> field).
FED_BY: dict[tuple[str, str], tuple[tuple[str, ...], dict[str, str]]] = {
    ("components.image.component", "TrainingImageArgs"): (("ImageBuildConfig", "ImageConfig"), {}),
    ("components.storage.efs", "EfsStorageArgs"): (("StorageConfig",), {}),
    ("components.storage.fsx", "FsxLustreStorageArgs"): (
        ("FsxConfig", "DataRepositoryConfig", "StorageConfig"),
        {"per_unit_storage_throughput": "throughput_per_tib", "data_file_system_path": "file_system_path"},
    ),
    ("components.cluster", "TrainingClusterArgs"): (("ClusterConfig",), {}),
    ("components.observability", "FleetObservabilityArgs"): (("ClusterConfig", "OperationsConfig"), {}),
    ("components.nodegroup", "TrainingNodeGroupArgs"): (("NodeGroupConfig",), {}),
    ("components.workloads.spec", "JobSpec"): (("JobConfig",), {}),
    ("components.workloads.indexed_job", "JobSpec"): (("JobConfig",), {}),
    ("components.workloads.mpi", "JobSpec"): (("JobConfig",), {}),
    ("components.workloads.pytorch", "PyTorchJobArgs"): (("JobConfig",), {}),
}


def _args_fields(module: str, cls: str) -> list[str]:
    """The fields of an Args TypedDict, with its bases' (:func:`typing.get_type_hints` order)."""
    return list(getattr(importlib.import_module(module), cls).__annotations__)


def shared_default_mismatches(
    fed_by: dict[tuple[str, str], tuple[tuple[str, ...], dict[str, str]]], compared: Optional[list[str]] = None
) -> list[str]:
    """Each component argument that a config field of the same meaning feeds, where the component's default (what it
    reads the field with) is not the field's: the program and a library user would get two defaults. A field whose
    default is ``None`` is derived elsewhere (an EFA default from the instance type): not compared. ``compared``
    collects what was."""
    from pydantic_core import PydanticUndefined

    models = config_models()
    wrong = []
    for (module, cls), (names, renamed) in fed_by.items():
        for arg in _args_fields(module, cls):
            applied = [v for v in applied_defaults(module, arg, locals_too=False) if v is not None]
            for name in names:
                field = models[name].model_fields.get(renamed.get(arg, arg))
                if field is None or field.default in (PydanticUndefined, None) or field.default_factory is not None:
                    continue
                if compared is not None and applied:
                    compared.append(f"{cls}.{arg}")
                wrong += [
                    f"{module}.{cls}.{arg} defaults to {v!r}, {name}.{renamed.get(arg, arg)} to {field.default!r}"
                    for v in applied
                    if v != field.default
                ]
    return wrong


def test_a_default_a_component_and_its_config_key_share_is_one_value() -> None:
    """A config key's default and the default of the component argument it feeds are one value (ARCHITECTURE.md:
    the component exports it as a constant the model imports): a user of the library and a user of the program get
    the same. Every argument of each fed component is compared with the same-named field of the models that feed it."""
    compared: list[str] = []
    assert shared_default_mismatches(FED_BY, compared) == []
    assert {"TrainingImageArgs.keep_images", "FsxLustreStorageArgs.per_unit_storage_throughput"} <= set(compared)
    assert len(compared) >= 15, compared


def test_the_shared_default_check_finds_a_mismatch() -> None:
    """Control: the EFS component's capacity default (1Ti) beside a model whose ``capacity`` has another default."""
    mismatched = {("components.storage.efs", "EfsStorageArgs"): (("NodeGroupConfig",), {"capacity": "capacity_type"})}
    assert shared_default_mismatches(mismatched) == [
        "components.storage.efs.EfsStorageArgs.capacity defaults to '1Ti', NodeGroupConfig.capacity_type to 'ON_DEMAND'"
    ]
