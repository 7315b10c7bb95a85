"""A component's ``args`` checked against its TypedDict when the component is made.

Python does not check a TypedDict at run time: a key written wrong (``nat_gateway_per_zone`` for
``nat_gateway_per_az``) would be ignored, and its default used without a word, and a required key left out would
raise a bare ``KeyError`` deep inside, after some children were registered. :func:`checks_args` refuses both, each
with the key's path (and the nearest known name for one written wrong), before the component registers anything.
"""

import difflib
import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Callable, TypeVar

import pulumi
from typing_extensions import NotRequired, Required, is_typeddict

from components.catalog.platform import SUPPORTED_KUBERNETES_VERSIONS

_Init = TypeVar("_Init", bound=Callable[..., None])


def _unwrap(hint: Any) -> Any:
    """The type inside ``NotRequired[...]``, ``Required[...]`` and ``Optional[...]``."""
    while typing.get_origin(hint) in (NotRequired, Required):
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is typing.Union:
        kept = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(kept) == 1:
            return _unwrap(kept[0])
    return hint


def key_problems(spec: Any, value: Any, path: str) -> list[str]:
    """The keys of ``value`` (at ``path``) that the TypedDict ``spec`` has no field for, each with the nearest known
    name, the values :func:`value_problem` refuses, and the keys it requires that ``value`` lacks; nested TypedDicts
    and lists of them included."""
    if not is_typeddict(spec) or not isinstance(value, Mapping):
        return []
    # the raw annotations, not get_type_hints: pulumi's Input names Output in a string it cannot resolve here
    fields: dict[str, Any] = {k: spec.__annotations__.get(k) for k in spec.__required_keys__ | spec.__optional_keys__}
    found = []
    for k, v in value.items():
        if k not in fields:
            near = difflib.get_close_matches(str(k), list(fields), n=1)
            hint = f"did you mean {near[0]}?" if near else f"known keys: {', '.join(sorted(fields))}"
            found.append(f"{path}.{k}: not a key of {spec.__name__}; {hint}")
            continue
        found += value_problem(k, v, f"{path}.{k}")
        found += type_problem(fields[k], v, f"{path}.{k}")
        inner = _unwrap(fields[k])
        if is_typeddict(inner):
            found += key_problems(inner, v, f"{path}.{k}")
        elif typing.get_origin(inner) in (list, Sequence) and isinstance(v, (list, tuple)):
            (item,) = typing.get_args(inner) or (None,)
            for i, each in enumerate(v):
                found += key_problems(_unwrap(item), each, f"{path}.{k}[{i}]")
    return found + [
        f"{path}.{k}: missing; {spec.__name__} requires it (docs/reference/components.md lists each key)"
        for k in sorted(spec.__required_keys__ - set(value))
    ]


#: The plain types a field may name, each as a message calls it (``bool`` before ``int``: a bool is an int).
_PLAIN = {str: "a string", bool: "true or false", int: "a whole number", float: "a number"}
_PLURAL = {str: "strings", bool: "booleans", int: "whole numbers", float: "numbers"}


def _plain(hint: Any) -> bool:
    """Whether ``hint`` takes only plain values: a str, int, float or bool, or a list or mapping of them (not an
    ``Input``, which may be an Output)."""
    if hint in _PLAIN:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (list, Sequence):
        return len(args) == 1 and args[0] in _PLAIN
    if origin in (dict, Mapping):
        return len(args) == 2 and args[0] in _PLAIN and args[1] in _PLAIN
    return False


def _scalar_problem(hint: Any, value: Any, path: str) -> list[str]:
    if isinstance(value, pulumi.Output):
        return [
            f"{path}: an Output, where a plain value is needed (it is read when the program runs, before any resource "
            "exists: a name, a size, a switch); pass the value itself"
        ]
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return []
    if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return []
    return [f"{path}: {value!r} is not {_PLAIN[hint]}; pass {_PLAIN[hint]}"]


def type_problem(annotation: Any, value: Any, path: str) -> list[str]:
    """A value of a plain-typed field (:func:`_plain`) that is an Output, or not of the field's type (``"1.36"`` for
    a string, a string where a list of strings belongs); an Output where a list or mapping is needed (its items may be
    Outputs, the list not). ``None`` is left to the component (an optional field)."""
    hint = _unwrap(annotation)
    origin = typing.get_origin(hint)
    if isinstance(value, pulumi.Output) and origin in (list, Sequence, dict, Mapping):
        what = "list" if origin in (list, Sequence) else "mapping"
        return [
            f"{path}: an Output, where a {what} is needed (the component reads its items when the program runs); pass "
            f"a {what} whose items may be Outputs (one Output per item, such as TrainingVpc's private_subnet_id_list)"
        ]
    if value is None or not _plain(hint):
        return []
    if hint in _PLAIN:
        return _scalar_problem(hint, value, path)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (list, Sequence):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            kind = "an Output" if isinstance(value, pulumi.Output) else repr(value)
            return [f"{path}: {kind} is not a list; pass a list of {_PLURAL[args[0]]}"]
        return [p for i, v in enumerate(value) for p in _scalar_problem(args[0], v, f"{path}[{i}]")]
    if not isinstance(value, Mapping):
        kind = "an Output" if isinstance(value, pulumi.Output) else repr(value)
        return [f"{path}: {kind} is not a mapping; pass a dict"]
    return [p for k, v in value.items() for p in _scalar_problem(args[1], v, f"{path}[{k!r}]")]


def value_problem(key: str, value: Any, path: str) -> list[str]:
    """A value refused in any component's args, nested ones too: a ``kubernetes_version`` outside the catalog's minors
    (the add-ons', the autoscaler's and the node images' facts are kept per minor)."""
    if key == "kubernetes_version" and isinstance(value, str) and value not in SUPPORTED_KUBERNETES_VERSIONS:
        return [
            f"{path}: {value!r} is not supported; use one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} "
            "(docs/reference/versions.md)"
        ]
    return []


def checks_args(init: _Init) -> _Init:
    """Wrap a component's ``__init__(self, name, args, opts)``: an ``args`` key its TypedDict lacks, one it requires
    left out, or a value :func:`value_problem` refuses raises ``ValueError`` before the component registers. A
    TypedDict of your own that extends the component's is a plain dict at run time: drop your own keys before you
    pass it."""
    spec = init.__annotations__["args"]
    if isinstance(spec, str):  # a quoted annotation: the TypedDict of that name in the component's module
        spec = init.__globals__[spec]

    @functools.wraps(init)
    def checked(self: Any, name: str, args: Any, *rest: Any, **kwargs: Any) -> None:
        problems = key_problems(spec, args, f"{type(self).__name__}({name!r}).args")
        if problems:
            raise ValueError("; ".join(problems))
        init(self, name, args, *rest, **kwargs)

    return typing.cast(_Init, checked)
