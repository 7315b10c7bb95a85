"""The component library's reference (``docs/reference/components.md``): every component of
:data:`components.COMPONENTS` with its arguments and outputs, read by Pulumi's own schema analyzer from the
components' ``...Args`` TypedDicts, their annotations and their docstrings: the schema other Pulumi languages see
(``provider/``). A component added to ``COMPONENTS``, or a field added to its args, appears after
``python -m stacks docs``."""

from typing import Any, Optional

import components
from stacks.docs.markdown import cell, code, from_docstring, page_header, table, text
from stacks.docs.source import component_analysis


def _analysis() -> dict[str, Any]:
    return component_analysis(components.PACKAGE_NAME, components.COMPONENTS)


def _type(prop: Any) -> str:
    """A property's type as the schema has it: ``string``, ``list of string``, ``map of string``, or a link to a
    type of this page."""
    if prop is None:
        return "any"
    if prop.ref:
        name = prop.ref.rsplit(":", 1)[-1]
        return f"[{name}](#{name.lower()})" if prop.ref.startswith("#/types/") else code(name)
    kind = prop.type.value if prop.type is not None else "any"
    if kind == "array":
        return f"list of {_type(prop.items)}"
    if kind == "object" and prop.additional_properties is not None:
        return f"map of {_type(prop.additional_properties)}"
    return kind


def _description(prop: Any) -> str:
    extra = " Plain value (not an Output)." if getattr(prop, "plain", None) else ""
    return cell(from_docstring(prop.description or "") + extra)


def _inputs(properties: dict[str, Any], mapping: dict[str, str]) -> str:
    rows = [
        [code(mapping[k]), code(k), _type(p), "no" if p.optional else "yes", _description(p)]
        for k, p in properties.items()
    ]
    return table(["Python", "Other languages", "Type", "Required", "Description"], rows)


def _outputs(properties: dict[str, Any], mapping: dict[str, str]) -> str:
    rows = [[code(mapping[k]), code(k), _type(p), _description(p)] for k, p in properties.items()]
    return table(["Python attribute", "Other languages", "Type", "Description"], rows)


def _args_name(component: type) -> Optional[str]:
    import inspect

    args = inspect.get_annotations(component.__init__).get("args")  # type: ignore[misc]
    return getattr(args, "__name__", None)


def components_reference() -> str:
    """``docs/reference/components.md``: each exported component, its arguments and outputs, and the types they
    use."""
    result = _analysis()
    defs, types = result["component_definitions"], result["type_definitions"]
    names = [c.__name__ for c in components.COMPONENTS]
    out = [
        *page_header("Components", "components/ (their Args TypedDicts, annotations and docstrings)"),
        "",
        text(
            f"The library exports {len(names)} components. Each takes `(name, args, opts)`, where `args` is a typed "
            f"dict, and registers as `{components.PACKAGE_NAME}:index:<Name>` with its children parented to it. "
            "Installed, they import from `eks_training.components`; in a checkout, from `components`. Other Pulumi "
            "languages use them through `provider/` with the names of the second column."
        ),
        "",
        ", ".join(f"[{n}](#{n.lower()})" for n in names),
    ]
    for component in components.COMPONENTS:
        d = defs[component.__name__]
        out += ["", f"## {d.name}", "", text(from_docstring(d.description or ""))]
        out += ["", f"Type token: `{components.PACKAGE_NAME}:index:{d.name}`. Arguments: `{_args_name(component)}`."]
        out += ["", f"### {d.name} inputs", "", _inputs(d.inputs, d.inputs_mapping)]
        out += ["", f"### {d.name} outputs", "", _outputs(d.outputs, d.outputs_mapping)]
    out += ["", "## Types", "", "The object types the components' inputs and outputs use."]
    for name in sorted(types):
        t = types[name]
        out += ["", f"### {name}", "", text(from_docstring(t.description or "")) or f"`{name}`."]
        if t.properties:
            out += ["", _inputs(t.properties, t.properties_mapping)]
    return "\n".join(out) + "\n"
