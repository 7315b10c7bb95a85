"""README tables generated from the code: the supported instance types (the catalog), the presets' regions and zones
(the stack files) and the ``instanceFacts`` fields with their units (the config model). ``tests/test_docs.py`` keeps
the README equal to them; ``python -m stacks.docs`` rewrites the README's generated blocks."""

import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from components.catalog import INSTANCE_TYPES, SOURCES, InstanceType
from stacks.config.instance_facts import FACT_FIELDS, InstanceFactsConfig
from stacks.stackfile import REPO, read_stack_config

README = REPO / "README.md"
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
    names = stacks or sorted(p.name[len("Pulumi."):-len(".yaml")] for p in REPO.glob("Pulumi.*.yaml"))
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
}


def readme_blocks(text: str) -> dict[str, str]:
    """The generated blocks of a README text, by name (their body without the markers)."""
    return {m.group("name"): m.group("body").rstrip("\n") for m in _BLOCK.finditer(text)}


def regenerate(text: str) -> str:
    """``text`` with every generated block rendered again."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{GENERATED[m.group('name')]()}\n{m.group(4)}", text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Rewrite the README's generated blocks (exit 0), or with ``--check`` report whether they are current."""
    args = list(sys.argv[1:] if argv is None else argv)
    text = README.read_text()
    fresh = regenerate(text)
    if "--check" in args:
        print("README.md is current" if fresh == text else "README.md's generated tables are stale: run python -m stacks.docs")
        return 0 if fresh == text else 1
    Path(README).write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
