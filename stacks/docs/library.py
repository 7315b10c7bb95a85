"""The component library's reference (``docs/reference/components.md``): every component of
:data:`components.COMPONENTS` with its arguments and outputs, read by Pulumi's own schema analyzer from the
components' ``...Args`` TypedDicts, their annotations and their docstrings: the schema other Pulumi languages see
(``provider/``). A component added to ``COMPONENTS``, or a field added to its args, appears after
``python -m stacks docs``."""

import sys
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
    extra = ""
    if getattr(prop, "plain", None):
        items = getattr(prop, "items", None)
        # a plain list whose items are inputs: its length is known when the component is made, its items need not be
        extra = (
            " A plain list (not an Output); its items may be Outputs."
            if items is not None and not getattr(items, "plain", None)
            else " Plain value (not an Output)."
        )
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


def _by_name(name: str) -> type:
    return next(c for c in components.COMPONENTS if c.__name__ == name)


def _args_name(component: type) -> Optional[str]:
    import inspect

    args = inspect.get_annotations(component.__init__).get("args")  # type: ignore[misc]
    return getattr(args, "__name__", None)


#: The components by what they make, in the order a program composes them: the reference's table and sections.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Network and cluster",
        ("TrainingVpc", "TrainingCluster", "TrainingNodeGroup", "DevicePlugin", "ClusterAutoscaler"),
    ),
    ("Storage and data", ("EfsStorage", "FsxLustreStorage", "DatasetStaging")),
    ("Images and code", ("TrainingImage", "JobCode", "ImagePrePull")),
    (
        "Jobs",
        (
            "PyTorchJob",
            "EtcdRendezvous",
            "MpiOperator",
            "MpiJob",
            "TensorFlowJob",
            "CommandJob",
            "AllReduceHealthCheck",
            "Admission",
        ),
    ),
    ("Operations", ("TensorBoard", "TrainingNetworkPolicies", "BenchmarkCollector", "FleetObservability")),
)


#: What a program of your own calls beside the components (the components guide's example imports them): module in a
#: checkout, name, and for a value (not a function or class) what it is.
HELPERS: tuple[tuple[str, str, str], ...] = (
    ("components.catalog", "INSTANCE_TYPES", "Every instance type the project knows, by name: its `InstanceType`."),
    ("components.nodeplan", "node_profile", ""),
    ("components.workloads.spec", "worker_placement", ""),
    ("components.scheduling", "system_node_selector", ""),
    ("components.storage.csi", "nodes_and_agent", ""),
    ("stacks.bundle", "shipped", ""),
    ("stacks.mocked", "TrainingMocks", ""),
)


def _helpers() -> list[str]:
    """The reference's helpers section: each of :data:`HELPERS` with its import, its signature and its docstring."""
    import importlib
    import inspect

    out = ["", "## Helpers", "", text("What a program calls beside the components, each with its import.")]
    for module, name, what in HELPERS:
        value = getattr(importlib.import_module(module), name)
        # installed, the literals above carry the package's name before components or stacks
        where = module if module.split(".")[0] in ("components", "stacks") else module.partition(".")[2]
        out += ["", f"### {name}", "", f"Import: `from eks_training.{where} import {name}`."]
        if callable(value) and not what:
            sig = inspect.signature(value)
            bare = sig.replace(
                parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
                return_annotation=inspect.Signature.empty,
            )
            out += ["", f"`{name}{bare}`", "", text(from_docstring(inspect.getdoc(value) or ""))]
        else:
            out += ["", text(what)]
    return out


def _grouped(names: list[str]) -> list[tuple[str, list[str]]]:
    """:data:`GROUPS` checked against the exported components: each in exactly one group."""
    listed = [n for _, group in GROUPS for n in group]
    missing, unknown = set(names) - set(listed), set(listed) - set(names)
    if missing or unknown or len(listed) != len(set(listed)):
        raise ValueError(
            f"stacks/docs/library.py GROUPS: put each exported component in one group (not grouped: "
            f"{sorted(missing)}; not exported: {sorted(unknown)})"
        )
    return [(title, list(group)) for title, group in GROUPS]


def _paragraphs(description: str) -> str:
    """A docstring as Markdown paragraphs: each of its blank-line separated paragraphs joined on one line."""
    return "\n\n".join(text(from_docstring(p)) for p in description.split("\n\n") if p.strip())


def _summary(description: str) -> str:
    """A docstring's first sentence."""
    first = from_docstring(description).split("\n\n")[0]
    return cell(first.split(". ")[0].rstrip(".") + ".")


def _type_modules() -> dict[str, str]:
    """Each class of the components' modules already imported (the modules of their args, and what those import) by
    name, and where it imports from, installed (``eks_training.components.scheduling``)."""
    package = components.__name__  # "components" in a checkout, "eks_training.components" installed
    found: dict[str, str] = {}
    for name, module in sorted(sys.modules.items()):
        if name == package or name.startswith(package + "."):
            for attr, value in vars(module).items():
                if isinstance(value, type) and value.__module__ == name:
                    found.setdefault(attr, "eks_training.components" + name[len(package) :])
    return found


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
            "languages use them through `provider/`, with the names of the tables' \"Other languages\" column."
        ),
        "",
        table(
            ["Group", "Component", "What it makes"],
            [
                [title if i == 0 else "", f"[{n}](#{n.lower()})", _summary(defs[n].description or "")]
                for title, group in _grouped(names)
                for i, n in enumerate(group)
            ],
        ),
    ]
    for title, group in _grouped(names):
        out += ["", f"## {title}"]
        for name in group:
            d = defs[name]
            out += ["", f"### {d.name}", "", _paragraphs(d.description or "")]
            out += [
                "",
                f"Type token: `{components.PACKAGE_NAME}:index:{d.name}`. Arguments: `{_args_name(_by_name(name))}`.",
            ]
            out += ["", f"#### {d.name} inputs", "", _inputs(d.inputs, d.inputs_mapping)]
            out += ["", f"#### {d.name} outputs", "", _outputs(d.outputs, d.outputs_mapping)]
    out += _helpers()
    out += ["", "## Types", "", "The object types the components' inputs and outputs use, each with its import."]
    modules = _type_modules()
    for name in sorted(types):
        t = types[name]
        out += ["", f"### {name}", "", _paragraphs(t.description or "") or f"`{name}`."]
        if name in modules:
            out += ["", f"Import: `from {modules[name]} import {name}`."]
        if t.properties:
            out += ["", _inputs(t.properties, t.properties_mapping)]
    return "\n".join(out) + "\n"
