"""Documentation generated from the code, so it cannot go stale.

* The README's tables: the supported instance types (the catalog), the presets' regions and zones (the stack files)
  and the ``instanceFacts`` fields with their units (the config model).
* The configuration reference, ``docs/configuration.md``: every ``eks-training:`` key with its type, default, allowed
  values and description, read from the config models (:mod:`stacks.config`: field names, types, ``Field``
  constraints, defaults and the fields' docstrings) and :data:`stacks.config.loader.SECTION_SUMMARIES`.
* ``Pulumi.yaml``'s ``config:`` schema: one entry per top-level key, from the same models.

``tests/unit/test_docs.py`` keeps all three equal to the code; ``python -m stacks docs`` (alias ``python -m
stacks.docs``) rewrites them, ``--check`` only reports, ``--reference`` prints the configuration reference (an installed
package has no README or Pulumi.yaml to rewrite: there only ``--reference`` runs; the reference ships with it).
"""

import json
import re
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from components.catalog import INSTANCE_TYPES, SOURCES, InstanceType
from stacks.bundle import PREFIX, REFERENCE
from stacks.cli import EXIT_FAILED, EXIT_OK, CommandError, alias, command, parser_for
from stacks.config.base import ENTRY_NAME_MAX, ENTRY_NAME_RE, JOB_NAME_RE
from stacks.config.instance_facts import FACT_FIELDS, InstanceFactsConfig
from stacks.config.loader import DEFAULT_IMAGES, ENTRIES, SECTION_SUMMARIES, SECTIONS, default_cluster_name
from stacks.config.teams import TEAM_NAME_MAX
from stacks.stackfile import REPO, read_stack_config

README = REPO / "README.md"
#: The Pulumi project file, whose ``config:`` block is generated.
PROJECT_FILE = REPO / "Pulumi.yaml"
#: The command that regenerates every generated file.
REGENERATE = "python -m stacks.docs"
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) .*?-->\n)(?P<body>.*?)(<!-- end: (?P=name) -->)", re.S)


def _number(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def instance_types_table(types: Mapping[str, InstanceType] = INSTANCE_TYPES) -> str:
    """The instance types the catalog knows, one row each, with the sources of their facts."""
    rows = [
        "| Type | vCPUs | Memory (GiB) | GPUs | GPU memory (GiB each) | EFA interfaces | Network (Gbit/s) | "
        "Local NVMe (GB) | On-Demand $/hour (us-east-1) | Sources |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(types, key=lambda n: (types[n].family, types[n].vcpus, n)):
        t = types[name]
        gpus = f"{t.gpus} x {t.gpu_model}" if t.gpus else "0"
        gpu_mem = f"{t.gpu_memory_mib / 1024:.1f}" if t.gpu_memory_mib else "-"
        sources = ", ".join(f"[{k}]({SOURCES[k].url})" for k in t.sources)
        rows.append(
            f"| `{name}` | {t.vcpus} | {t.memory_mib / 1024:g} | {gpus} | {gpu_mem} | {t.max_efa_interfaces} | "
            f"{_number(t.network_gbps)} | {t.local_nvme_gb} | {_number(t.price_per_hour)} | {sources} |"
        )
    return "\n".join(rows)


def presets_table(stacks: Optional[Sequence[str]] = None) -> str:
    """Each preset's region, zones and pinned zones, read from its stack file."""
    names = stacks or sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in REPO.glob("Pulumi.*.yaml"))
    rows = ["| Stack | Region (`aws:region`) | VPC zones | Pinned to a zone |", "|---|---|---|---|"]
    for name in names:
        _, config = read_stack_config(name)
        network: dict[str, Any] = config.get("eks-training:network") or {}
        if "eks-training:existingVpc" in config:
            zones = "the existing VPC's subnets"
        elif network.get("availabilityZones"):
            zones = ", ".join(network["availabilityZones"])
        else:
            zones = f"{network.get('availabilityZoneCount', 3)}, chosen by zone ID"
        pinned = [
            f"`nodeGroups.{g}.availabilityZone: {v['availabilityZone']}`"
            for g, v in (config.get("eks-training:nodeGroups") or {}).items()
            if isinstance(v, dict) and v.get("availabilityZone")
        ]
        storage = config.get("eks-training:storage") or {}
        if pinned and storage.get("backend") == "fsx":
            pinned.append("(the FSx file system follows it)")
        rows.append(f"| `{name}` | {config.get('aws:region', '-')} | {zones} | {' '.join(pinned) or 'no'} |")
    return "\n".join(rows)


def instance_facts_table() -> str:
    """The fields of ``instanceFacts.<type>``: unit, where EC2 reports it, default."""
    rows = ["| Field | Unit | From `aws ec2 describe-instance-types` | Default |", "|---|---|---|---|"]
    for name, field in InstanceFactsConfig.model_fields.items():
        alias = field.alias or name
        unit, ec2 = FACT_FIELDS[alias]
        default = "required" if field.is_required() else ("none" if field.default is None else _number(field.default))
        rows.append(f"| `{alias}` | {unit} | {ec2} | {default} |")
    return "\n".join(rows)


#: The README's generated blocks, by name.
GENERATED: Mapping[str, Callable[[], str]] = {
    "instance-types": instance_types_table,
    "presets": presets_table,
    "instance-facts": instance_facts_table,
    "config-keys": lambda: config_index(),
}


def readme_blocks(text: str) -> dict[str, str]:
    """The generated blocks of a README text, by name (their body without the markers)."""
    return {m.group("name"): m.group("body").rstrip("\n") for m in _BLOCK.finditer(text)}


def regenerate(text: str) -> str:
    """``text`` with every generated block rendered again."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{GENERATED[m.group('name')]()}\n{m.group(4)}", text)


# --- the configuration reference --------------------------------------------------------------------------------


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _inner(annotation: Any) -> Any:
    """``annotation`` without ``Optional`` and without ``Annotated``'s validators (``Number`` is a number)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _inner(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _inner(args[0])
    return annotation


def type_text(annotation: Any) -> str:
    """A field's type as a stack file writes it (``string``, ``list of string``, ``object``...)."""
    annotation = _inner(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "string" if all(isinstance(a, str) for a in args) else "literal"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(a) for a in args if a is not type(None))
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"map of {type_text(args[0])} to {type_text(args[1])}"
    if _is_model(annotation):
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
    annotation = _inner(field.annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return ", ".join(_value(a) for a in typing.get_args(annotation))
    extra = _extra(field)
    if "allowed" in extra:
        return ", ".join(_value(a) for a in typing.cast(list[Any], extra["allowed"]))
    bounds = []
    if "between" in extra:
        lo, hi = typing.cast(list[float], extra["between"])
        bounds += [f">= {_number(lo)}", f"<= {_number(hi)}"]
    for m in field.metadata:  # pydantic's constraints (annotated_types Ge, Gt, Le, Lt, MinLen, MaxLen)
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(m, attr, None) is not None:
                bounds.append(f"{sign} {_number(getattr(m, attr))}")
        if getattr(m, "min_length", None) is not None:
            bounds.append(
                f"at least {m.min_length} item(s)"
                if typing.get_origin(annotation) in (list, dict)
                else f"at least {m.min_length} character(s)"
            )
        if getattr(m, "max_length", None) is not None:
            bounds.append(f"at most {m.max_length}")
    return ", ".join(bounds)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _nested(annotation: Any) -> Optional[tuple[type[BaseModel], str]]:
    """The model a field holds and how a path spells its instances (``""``, ``[]`` for a list, ``.<name>`` for a
    map), or ``None``."""
    annotation = _inner(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if _is_model(annotation):
        return annotation, ""
    if origin is list and _is_model(args[0]):
        return args[0], "[]"
    if origin is dict and _is_model(args[1]):
        return args[1], ".<name>"
    return None


def model_tables(path: str, model: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
    """``(path, model)`` of ``model`` and of every model nested in it, depth first."""
    yield path, model
    for name, field in model.model_fields.items():
        nested = _nested(field.annotation)
        if nested is not None:
            yield from model_tables(f"{path}.{field.alias or name}{nested[1]}", nested[0])


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


def config_index(page: str = "docs/configuration.md") -> str:
    """The top-level keys, one row each, linking to their part of the reference (``page``; "" within it)."""
    rows = ["| Key | Type | Default | What it is |", "|---|---|---|---|"]
    for section in SECTIONS:
        type_, default, _ = section_entry(section)
        rows.append(
            f"| [`{section}`]({page}#{section.lower()}) | {type_} | {default} | {_cell(SECTION_SUMMARIES[section])} |"
        )
    return "\n".join(rows)


def configuration_reference() -> str:
    """``docs/configuration.md``: every key of every section, from the models."""
    out = [
        "# Configuration reference",
        "",
        f"<!-- generated by {REGENERATE} from the config models (stacks/config/); tests/unit/test_docs.py fails when "
        "it is stale: edit the models' docstrings and Field constraints, not this file -->",
        "",
        "Every key below is set in a stack file (`Pulumi.<stack>.yaml`) as `eks-training:<key>`, e.g. `pulumi config "
        "set --path 'eks-training:nodeGroups.gpu.maxSize' 4`. The whole configuration is validated before anything is "
        "created: unknown keys, wrong types, values out of range and rules across keys are reported together, each "
        "naming its key and the fix; a key under a namespace nothing reads is refused with the key to write. Keys "
        "are camelCase. A default of *none* means the key is unset; its description says what applies then.",
        "",
        config_index(""),
    ]
    for section in SECTIONS:
        type_, default, model = section_entry(section)
        out += ["", f"## {section}", "", SECTION_SUMMARIES[section], "", f"Type: {type_}. Default: {default}."]
        if model is None:
            continue
        path = section + (".<name>" if SECTIONS[section] is dict else "")
        if SECTIONS[section] is dict:
            out += ["", _entry_names(section)]
        for table_path, m in model_tables(path, model):
            heading = [] if table_path == section else ["", f"### `{table_path}`", "", _doc(m)]
            out += [*heading, "", "| Key | Type | Default | Allowed | Description |", "|---|---|---|---|---|"]
            for name, field in m.model_fields.items():
                alias = field.alias or name
                out.append(
                    f"| `{alias}` | {type_text(field.annotation)} | {default_text(field)} | "
                    f"{_cell(allowed_text(field))} | {_cell(field.description or '')} |"
                )
    return "\n".join(out) + "\n"


def _summary_of_keys(model: type[BaseModel]) -> str:
    parts = []
    for name, field in model.model_fields.items():
        default = default_text(field).replace("`", "")
        shown = "" if default in ("none", "empty", "see below") else f", {default}"
        nested = _nested(field.annotation)
        inner = f": {_summary_of_keys(nested[0])}" if nested else ""
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
        "  # reference with each key's type, default, allowed values and description is docs/configuration.md.",
    ]
    for section in SECTIONS:
        type_, default, model = section_entry(section)
        text = SECTION_SUMMARIES[section]
        if model is None or SECTIONS[section] is dict:
            text += f" {type_[0].upper()}{type_[1:]}, default {default.replace('`', '')}."
        if model is not None:
            text += f" {'Each entry' if SECTIONS[section] is dict else 'Keys'}: {_summary_of_keys(model)}."
        text += f" Reference: docs/configuration.md#{section.lower()}"
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


#: Each generated file: its path and its text rendered from its current text.
FILES: Mapping[str, tuple[Path, Callable[[str], str]]] = {
    "README.md": (README, regenerate),
    "docs/configuration.md": (REFERENCE, lambda _: configuration_reference()),
    "Pulumi.yaml": (PROJECT_FILE, with_project_config),
}


def stale_files() -> list[str]:
    """The generated files that differ from what the code renders."""
    stale = []
    for name, (path, render) in FILES.items():
        current = path.read_text() if path.is_file() else ""
        if render(current) != current:
            stale.append(name)
    return stale


@command
def main(argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    """Rewrite the generated files (exit 0), or with ``--check`` report whether they are current (exit 1 if not)."""
    parser = parser_for(
        "docs",
        prog,
        "Rewrite the documentation generated from the code: "
        + ", ".join(FILES)
        + ". Exit 0; with --check, 1 when a file is stale.",
    )
    parser.add_argument("--check", action="store_true", help="only report whether the files are current")
    parser.add_argument(
        "--reference",
        action="store_true",
        help=f"print the configuration reference (every key; the file {REFERENCE}) and change nothing",
    )
    args = parser.parse_args(argv)
    if args.reference:
        print(configuration_reference(), end="")
        return EXIT_OK
    if PREFIX:
        raise CommandError(
            f"{parser.prog} rewrites the generated files of a checkout of the repository; this is an "
            f"installed package, whose configuration reference is {REFERENCE} (print it with "
            f"{parser.prog} --reference)"
        )
    if args.check:
        stale = stale_files()
        print(f"stale: {', '.join(stale)}; run {REGENERATE}" if stale else "the generated documentation is current")
        return EXIT_FAILED if stale else EXIT_OK
    for path, render in FILES.values():
        current = path.read_text() if path.is_file() else ""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(current))
    return EXIT_OK


if __name__ == "__main__":
    alias("docs")
