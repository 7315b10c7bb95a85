"""The stack file's keys as a tree: the models nested in a section, the path of each key, and where a key
written at the top level belongs (``eks-training:kubernetesVersion`` is ``eks-training:cluster.kubernetesVersion``)."""

import types
import typing
from typing import Any, Iterator, Mapping, Optional

from pydantic import BaseModel

#: How a path names an entry of a map (``nodeGroups.<name>.instanceTypes``).
ENTRY = "<name>"


def is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def unwrap(annotation: Any) -> Any:
    """``annotation`` without ``Optional`` and without ``Annotated``'s validators (``Number`` is a number)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return unwrap(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return unwrap(args[0])
    return annotation


def nested(annotation: Any) -> Optional[tuple[type[BaseModel], str]]:
    """The model a field holds and how a path spells its instances (``""``, ``[]`` for a list, ``.<name>`` for a
    map), or ``None``."""
    annotation = unwrap(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if is_model(annotation):
        return annotation, ""
    if origin is list and is_model(args[0]):
        return args[0], "[]"
    if origin is dict and is_model(args[1]):
        return args[1], f".{ENTRY}"
    return None


def model_tables(path: str, model: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
    """``(path, model)`` of ``model`` and of every model nested in it, depth first."""
    yield path, model
    for name, field in model.model_fields.items():
        inner = nested(field.annotation)
        if inner is not None:
            yield from model_tables(f"{path}.{field.alias or name}{inner[1]}", inner[0])


def section_keys(sections: Mapping[str, Any], entries: Mapping[str, type[BaseModel]]) -> tuple[tuple[str, str], ...]:
    """Every key inside a section, as its name and its path: the keys of the sections that are objects
    (``cluster.kubernetesVersion``) and of the map sections' entries (``nodeGroups.<name>.instanceTypes``)."""
    roots = [(s, kind) for s, kind in sections.items() if is_model(kind)]
    roots += [(f"{s}.{ENTRY}", entry) for s, entry in entries.items()]
    return tuple(
        (field.alias or name, f"{path}.{field.alias or name}")
        for root, model in roots
        for path, m in model_tables(root, model)
        for name, field in m.model_fields.items()
    )


def homes(name: str, keys: tuple[tuple[str, str], ...]) -> list[str]:
    """The paths of ``keys`` whose key is ``name``: spelt as written, else in another case; at most three."""
    found = [(n, p) for n, p in keys if n.lower() == name.lower()]
    return sorted({p for n, p in found if n == name} or {p for _, p in found})[:3]
