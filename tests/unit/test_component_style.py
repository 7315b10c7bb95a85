"""The component library follows the project's component anatomy (ARCHITECTURE.md, "Recipes": a component)."""

import ast
import inspect
import re
import textwrap
import typing
from pathlib import Path

import pulumi

import components
from tests.harness import REPO
from tests.python_source import class_source, parse

COMPONENT_CLASSES = list(components.COMPONENTS)
#: Components with a type token that the library does not export: children of others, made only by them.
INTERNAL = {
    "JobDisruptionBudget": "a job's PodDisruptionBudget, a child of each job component",
}


def test_every_component_in_the_tree_is_exported_or_named_internal() -> None:
    tokens = set()
    for path in sorted((REPO / "components").rglob("*.py")):
        tokens |= set(re.findall(r'"eks-training:index:(\w+)"', path.read_text()))
    exported = {c.__name__ for c in COMPONENT_CLASSES}
    assert tokens - set(INTERNAL) == exported, (
        "export each component in components/__init__.py and its COMPONENTS (ARCHITECTURE.md, Recipes), or name it "
        f"in INTERNAL: {sorted(tokens - set(INTERNAL) ^ exported)}"
    )


def test_every_component_is_exported_with_its_args() -> None:
    exported = [
        obj for obj in vars(components).values() if inspect.isclass(obj) and issubclass(obj, pulumi.ComponentResource)
    ]
    assert sorted(c.__name__ for c in exported) == sorted(c.__name__ for c in COMPONENT_CLASSES)
    for cls in COMPONENT_CLASSES:
        args = getattr(components, f"{cls.__name__}Args")
        assert typing.is_typeddict(args), cls
        params = list(inspect.signature(cls.__init__).parameters)
        assert params == ["self", "name", "args", "opts"], (cls, params)
        assert cls.__doc__ and args.__doc__


def test_type_tokens_and_no_future_annotations() -> None:
    for path in sorted((REPO / "components").rglob("*.py")):
        text = path.read_text()
        assert "from __future__ import annotations" not in text, path
    for cls in COMPONENT_CLASSES:
        source = class_source(cls)
        assert f'"eks-training:index:{cls.__name__}"' in source, cls
        # the constructor's last statement registers the outputs (named steps may follow it as methods)
        init = next(
            n
            for n in parse(textwrap.dedent(source)).body[0].body
            if isinstance(n, ast.FunctionDef) and n.name == "__init__"
        )
        last = init.body[-1]
        assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Call), cls
        assert ast.unparse(last.value.func) == "self.register_outputs", cls


def test_outputs_are_typed_and_documented() -> None:
    for cls in COMPONENT_CLASSES:
        hints = {k: v for k, v in cls.__annotations__.items()}
        outputs = {k: v for k, v in hints.items() if "Output[" in str(v) or typing.get_origin(v) is pulumi.Output}
        assert outputs, cls
        source = class_source(cls)
        for attr in outputs:
            line = next(ln for ln in source.splitlines() if ln.strip().startswith(f"{attr}:"))
            following = source.splitlines()[source.splitlines().index(line) + 1].strip()
            assert following.startswith('"""'), f"{cls.__name__}.{attr} has no docstring"


def _registered(cls: type) -> set[str]:
    """The names ``cls.__init__`` hands ``self.register_outputs``: a dict's keys, the names a dict comprehension
    iterates (a tuple of the module), or the dict a method of the class returns."""
    init = next(n for n in _class_node(cls).body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    call = init.body[-1]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call) and call.value.args, cls
    value = call.value.args[0]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):  # self._outputs()
        method = next(
            n
            for base in cls.__mro__
            if base.__dict__.get(value.func.attr)
            for n in _class_node(base).body
            if isinstance(n, ast.FunctionDef) and n.name == value.func.attr
        )
        value = next(n.value for n in ast.walk(method) if isinstance(n, ast.Return) and n.value is not None)
    if isinstance(value, ast.DictComp):  # {output: getattr(self, output) for output in _OUTPUTS}
        names = value.generators[0].iter
        assert isinstance(names, ast.Name), cls
        return set(getattr(inspect.getmodule(cls), names.id))
    assert isinstance(value, ast.Dict), (cls, ast.unparse(value))
    return {k.value for k in value.keys if isinstance(k, ast.Constant)}


def _class_node(cls: type) -> ast.ClassDef:
    node = parse(textwrap.dedent(class_source(cls))).body[0]
    assert isinstance(node, ast.ClassDef), cls
    return node


def test_every_output_is_registered() -> None:
    """Each Output a component annotates is in the ``register_outputs`` call that ends its constructor, so the
    stack's state and ``pulumi stack output`` of a component carry it."""
    missing = []
    for cls in COMPONENT_CLASSES:
        outputs = {k for k, v in cls.__annotations__.items() if typing.get_origin(v) is pulumi.Output}
        where = Path(inspect.getsourcefile(cls) or "").relative_to(REPO)
        missing += [f"{where}: {cls.__name__}.{o}" for o in sorted(outputs - _registered(cls))]
    assert not missing, f"add each to the register_outputs call at the end of its constructor: {', '.join(missing)}"
