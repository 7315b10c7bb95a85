"""The configuration reference (``docs/reference/configuration.md``) and ``Pulumi.yaml``'s ``config:`` schema, read
from the config models (:mod:`stacks.config`: field names, types, ``Field`` constraints, defaults and the fields'
docstrings) and :data:`stacks.config.loader.SECTION_SUMMARIES`: a key added to a model appears in both after
``python -m stacks docs``."""

import json
import textwrap
import types
import typing
from typing import Any, Optional

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from stacks.config.base import ENTRY_NAME_MAX, ENTRY_NAME_RE, JOB_NAME_RE
from stacks.config.loader import DEFAULT_IMAGES, ENTRIES, SECTION_SUMMARIES, SECTIONS, default_cluster_name
from stacks.config.teams import TEAM_NAME_MAX
from stacks.config.tree import ENTRY, is_model, model_tables, nested, unwrap
from stacks.docs.markdown import REGENERATE, cell, number, page_header, text

#: Where the reference is, relative to the repository (Pulumi.yaml's descriptions link to it).
PAGE = "docs/reference/configuration.md"

#: What the loader and the rules check beyond each key's type and range, as the reference's last section says it (the
#: rules themselves are stacks/config/rules/'s and the models' validators).
CHECKED = [
    "Beyond each key's type and range, the checks include:",
    "",
    "- unknown keys, and a key under a namespace nothing reads, each with the key to write;",
    "- entries nothing reads, noted by `plan` and warned of by `pulumi up`: a dataset no job names, an image no job "
    "runs, facts of an instance type no group runs, an image's `mpiPrefix` no `mpi` job reads;",
    "- node groups: `minSize > maxSize`, a desired size outside `[min, max]`, unknown instance types, EFA on a type "
    "without it, an EFA group without a zone, a Spot group with a reservation, bad taint effects;",
    "- the network: fewer than 2 zones, invalid or overlapping CIDRs, incomplete `existingVpc` settings;",
    "- FSx: a capacity that is not a valid increment for its throughput tier, a tier FSx does not offer, a file "
    "system without a zone, jobs that mount it from pinned groups in different zones, a data repository path that "
    "is not `s3://bucket/prefix/`, a dataset prefix the file system does not import;",
    "- the health check: a threshold above what the nodes can reach (a node's network bandwidth x N/(N-1) x (n-1)/n "
    "across N nodes and n ranks, the GPUs' link on one node), or a message larger than a GPU's memory;",
    "- an image that does not support a job's GPU, instance facts in the wrong unit, and an integer above 2147483647 "
    "(AWS and Kubernetes take 32-bit integers; byte counts may be larger).",
    "",
    "A value with a unit names the unit it is in and the conversion meant (`3.5e+11 GB/s is above the 750 GB/s an "
    "all-reduce across 2 x p5.48xlarge can reach ...; did you write bytes/s? ... 3.5e+11 bytes/s is 350`).",
    "",
    "Messages name root causes only. A misspelt key is one problem (`instanceType: unknown key; did you mean "
    "instanceTypes`). A section that failed its own validation is not reported again by the rules that depend on "
    "it. A default the user did not set is not blamed.",
    "",
    "A stack file is read as Pulumi reads it (YAML 1.2): `yes`/`no`/`on`/`off` are strings, a key given twice is an "
    "error, and `nodes: \"2\"` (a string) is refused with the unquoted value to write.",
]


def type_text(annotation: Any) -> str:
    """A field's type as a stack file writes it (``string``, ``list of string``, ``object``...)."""
    annotation = unwrap(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "string" if all(isinstance(a, str) for a in args) else "literal"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"map of {type_text(args[0])} to {type_text(args[1])}"
    if is_model(annotation):
        return "object"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation is Any:
        return "any"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _value(value: Any) -> str:
    return f"`{json.dumps(value)}`"


def default_text(field: FieldInfo) -> str:
    """A field's default, read from the model: ``required``, ``none`` (not set: the description says what follows),
    or the value."""
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    if value is None:
        unset = _extra(field).get("unset")
        return "none" if unset is None else f"none ({_value(unset)} applies)"
    if isinstance(value, BaseModel):
        return "see below" if value.model_dump() else "none"
    if value in ([], {}):
        return "empty"
    return _value(value)


def _extra(field: FieldInfo) -> dict[str, Any]:
    """What :func:`stacks.config.base.reference` gave the field."""
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def allowed_text(field: FieldInfo) -> str:
    """The values a field accepts beyond its type: a Literal's values, the range or length its ``Field`` sets, or the
    values or range its validator accepts (:func:`stacks.config.base.reference`)."""
    annotation = unwrap(field.annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return ", ".join(_value(a) for a in typing.get_args(annotation))
    extra = _extra(field)
    if "allowed" in extra:
        return ", ".join(_value(a) for a in typing.cast(list[Any], extra["allowed"]))
    bounds = []
    if "between" in extra:
        lo, hi = typing.cast(list[float], extra["between"])
        bounds += [f">= {number(lo)}", f"<= {number(hi)}"]
    for m in field.metadata:  # pydantic's constraints (annotated_types Ge, Gt, Le, Lt, MinLen, MaxLen)
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(m, attr, None) is not None:
                bounds.append(f"{sign} {number(getattr(m, attr))}")
        if getattr(m, "min_length", None) is not None:
            bounds.append(
                f"at least {m.min_length} item(s)"
                if typing.get_origin(annotation) in (list, dict)
                else f"at least {m.min_length} character(s)"
            )
        if getattr(m, "max_length", None) is not None:
            bounds.append(f"at most {m.max_length}")
    return ", ".join(bounds)


def _entry_names(section: str) -> str:
    """What the names of a map section's entries may be (the loader's rules: stacks/config/base.py, teams.py)."""
    if section == "instanceFacts":
        return "Entry names: EC2 instance type names."
    if section == "teams":
        return (
            f"Entry names: 1-{TEAM_NAME_MAX} lowercase letters, digits and '-', starting and ending with a letter or "
            "digit (a team's name names its queues, and its namespace unless namespace is set)."
        )
    start = "a letter" if ENTRY_NAME_RE[section] is JOB_NAME_RE else "a letter or digit"
    return (
        f"Entry names: 1-{ENTRY_NAME_MAX[section]} lowercase letters, digits and '-', starting with {start} and "
        "ending with a letter or digit."
    )


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def section_entry(section: str) -> tuple[str, str, Optional[type[BaseModel]]]:
    """A top-level key's type, default and model (its own, or its entries' for a map)."""
    kind = SECTIONS[section]
    if section == "clusterName":
        return "string", f"`{default_cluster_name('<project>', '<stack>')}`", None
    if kind is dict:
        if section == "images":
            default = ", ".join(f"`{n}` (context `{i.context}`)" for n, i in DEFAULT_IMAGES.items())
            return "map of name to object", f"{default}; a stack's own entry of that name replaces it", ENTRIES[section]
        if section == "tags":
            return "map of string to string", "empty", None
        return "map of name to object", "empty", ENTRIES[section]
    return "object", "see the keys", kind


def config_index(page: str = "") -> str:
    """The top-level keys, one row each, linking to their part of the reference (``page``; "" within it)."""
    rows = ["| Key | Type | Default | What it is |", "|---|---|---|---|"]
    for section in SECTIONS:
        type_, default, _ = section_entry(section)
        rows.append(
            f"| [`{section}`]({page}#{section.lower()}) | {type_} | {default} | {cell(SECTION_SUMMARIES[section])} |"
        )
    return "\n".join(rows)


def configuration_reference() -> str:
    """``docs/reference/configuration.md``: every key of every section, from the models."""
    out = [
        *page_header("Configuration reference", "the config models (stacks/config/)"),
        "",
        "Every key below is set in a stack file (`Pulumi.<stack>.yaml`) as `eks-training:<key>`, e.g. `pulumi config "
        "set --path 'eks-training:nodeGroups.gpu.maxSize' 4`. Keys are camelCase. A default of *none* means the key "
        "is unset; its description says what applies then.",
        "",
        "The whole configuration is checked before anything is created. Every problem is reported at once, each "
        "naming its key and the fix ([what is checked](#what-is-checked)).",
        "",
        config_index(""),
    ]
    for section in SECTIONS:
        type_, default, model = section_entry(section)
        out += ["", f"## {section}", "", text(SECTION_SUMMARIES[section]), "", f"Type: {type_}. Default: {default}."]
        if model is None:
            continue
        path = section + (f".{ENTRY}" if SECTIONS[section] is dict else "")
        if SECTIONS[section] is dict:
            out += ["", text(_entry_names(section))]
        for table_path, m in model_tables(path, model):
            heading = [] if table_path == section else ["", f"### `{table_path}`", "", text(_doc(m))]
            out += [*heading, "", "| Key | Type | Default | Allowed | Description |", "|---|---|---|---|---|"]
            for name, field in m.model_fields.items():
                alias = field.alias or name
                out.append(
                    f"| `{alias}` | {type_text(field.annotation)} | {default_text(field)} | "
                    f"{cell(allowed_text(field))} | {cell(field.description or '')} |"
                )
    out += ["", "## What is checked", "", *CHECKED]
    return "\n".join(out) + "\n"


def _summary_of_keys(model: type[BaseModel]) -> str:
    parts = []
    for name, field in model.model_fields.items():
        default = default_text(field).replace("`", "")
        shown = "" if default in ("none", "empty", "see below") else f", {default}"
        held = nested(field.annotation)
        inner = f": {_summary_of_keys(held[0])}" if held else ""
        parts.append(f"{field.alias or name} ({type_text(field.annotation)}{shown}{inner})")
    return "; ".join(parts)


def project_config() -> str:
    """``Pulumi.yaml``'s ``config:`` block: each top-level key, its type for a string, and a description naming its
    keys with their types and defaults and pointing to the reference."""
    out = [
        "config:",
        f"  # Generated by `{REGENERATE}` from the config models (stacks/config/); tests/unit/test_docs.py fails when "
        "it is",
        "  # stale. Every key lives in the `eks-training:` namespace and is validated before anything is created; the",
        f"  # reference with each key's type, default, allowed values and description: {PAGE}.",
    ]
    for section in SECTIONS:
        type_, default, model = section_entry(section)
        text = SECTION_SUMMARIES[section]
        if model is None or SECTIONS[section] is dict:
            text += f" {type_[0].upper()}{type_[1:]}, default {default.replace('`', '')}."
        if model is not None:
            text += f" {'Each entry' if SECTIONS[section] is dict else 'Keys'}: {_summary_of_keys(model)}."
        text += f" Reference: {PAGE}#{section.lower()}"
        out.append(f"  {section}:")
        if type_ == "string":
            out.append("    type: string")
        out.append("    description: >-")
        out += textwrap.wrap(
            text,
            width=120,
            initial_indent="      ",
            subsequent_indent="      ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(out) + "\n"


def with_project_config(text: str) -> str:
    """``Pulumi.yaml``'s text with its ``config:`` block (the last one) generated again."""
    head, sep, _ = text.partition("\nconfig:\n")
    if not sep:
        raise ValueError("Pulumi.yaml has no top-level config: block")
    return head + "\n" + project_config()
