"""A component's ``args`` checked against its TypedDict when the component is made.

Python does not check a TypedDict at run time: a key written wrong (``nat_gateway_per_zone`` for
``nat_gateway_per_az``) would be ignored, and its default used without a word. :func:`checks_args` refuses it,
with the key's path and the nearest known name, before the component registers anything.
"""

import difflib
import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Callable, TypeVar

from typing_extensions import NotRequired, Required, is_typeddict

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


def unknown_keys(spec: Any, value: Any, path: str) -> list[str]:
    """The keys of ``value`` (at ``path``) that the TypedDict ``spec`` has no field for, nested TypedDicts and lists
    of them included, each with the nearest known name."""
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
        inner = _unwrap(fields[k])
        if is_typeddict(inner):
            found += unknown_keys(inner, v, f"{path}.{k}")
        elif typing.get_origin(inner) in (list, Sequence) and isinstance(v, (list, tuple)):
            (item,) = typing.get_args(inner) or (None,)
            for i, each in enumerate(v):
                found += unknown_keys(_unwrap(item), each, f"{path}.{k}[{i}]")
    return found


def checks_args(init: _Init) -> _Init:
    """Wrap a component's ``__init__(self, name, args, opts)``: an ``args`` key its TypedDict lacks raises
    ``ValueError`` before the component registers. A TypedDict of your own that extends the component's is a plain
    dict at run time: drop your own keys before you pass it."""
    spec = init.__annotations__["args"]
    if isinstance(spec, str):  # a quoted annotation: the TypedDict of that name in the component's module
        spec = init.__globals__[spec]

    @functools.wraps(init)
    def checked(self: Any, name: str, args: Any, *rest: Any, **kwargs: Any) -> None:
        problems = unknown_keys(spec, args, f"{type(self).__name__}({name!r}).args")
        if problems:
            raise ValueError("; ".join(problems))
        init(self, name, args, *rest, **kwargs)

    return typing.cast(_Init, checked)
