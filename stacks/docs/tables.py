"""Tables generated from data: the instance catalog with its sources, the ``instanceFacts`` fields with their units,
the presets (what each builds and costs, read from its stack file through the plan and the cost model; its region
and zones), and the pinned versions of every chart, image, manifest and operator (the catalog and the images' build
files). A row added to the catalog, a new preset or a new pin appears after ``python -m stacks docs``."""

import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from components.catalog import (
    BASE_IMAGES,
    CHART_IMAGES,
    CLUSTER_AUTOSCALER,
    DEFAULT_KUBERNETES_VERSION,
    EKS_ADDONS,
    HELM_CHARTS,
    IMAGES,
    INSTANCE_TYPES,
    KUBERNETES_VERSIONS,
    MANIFESTS,
    PRICES_AS_OF,
    SOURCES,
    InstanceType,
)
from components.catalog.addons import (
    ADDON_FEATURES,
    DCGM_INSTANCE_TYPES,
    VersionRange,
    features_of,
    pinned_version,
    ranges_text,
)
from stacks.bundle import ROOT, SHIPPED
from stacks.config.instance_facts import FACT_FIELDS, InstanceFactsConfig
from stacks.costs import estimate, storage_summary
from stacks.docs.markdown import cell, code, number, table
from stacks.stackfile import REPO, read_stack_config, stacks_in

#: The column of the presets table the cost test reads (the last three: storage, running, idle).
PRESET_COLUMNS = [
    "Stack",
    "Workers",
    "GPUs running",
    "EFA",
    "Shared storage",
    "Est. $/hour running",
    "Est. $/hour idle",
]


def _source(key: str) -> str:
    return f"[{key}]({SOURCES[key].url})"


def instance_types_table(types: Mapping[str, InstanceType] = INSTANCE_TYPES) -> str:
    """The instance types the catalog knows, one row each, with the sources of their facts."""
    rows = []
    for name in sorted(types, key=lambda n: (types[n].family, types[n].vcpus, n)):
        t = types[name]
        gpus = f"{t.gpus} x {t.gpu_model}" if t.gpus else "0"
        gpu_mem = f"{t.gpu_memory_mib / 1024:.1f}" if t.gpu_memory_mib else "-"
        rows.append(
            [
                f"`{name}`",
                str(t.vcpus),
                f"{t.memory_mib / 1024:g}",
                gpus,
                gpu_mem,
                str(t.max_efa_interfaces),
                number(t.network_gbps),
                str(t.local_nvme_gb),
                number(t.price_per_hour),
                ", ".join(_source(k) for k in t.sources),
            ]
        )
    header = [
        "Type",
        "vCPUs",
        "Memory (GiB)",
        "GPUs",
        "GPU memory (GiB each)",
        "EFA interfaces",
        "Network (Gbit/s)",
        "Local NVMe (GB)",
        "On-Demand $/hour (us-east-1)",
        "Sources",
    ]
    return table(header, rows)


def instance_facts_table() -> str:
    """The fields of ``instanceFacts.<type>``: unit, where EC2 reports it, default."""
    rows = []
    for name, field in InstanceFactsConfig.model_fields.items():
        alias = field.alias or name
        unit, ec2 = FACT_FIELDS[alias]
        default = "required" if field.is_required() else ("none" if field.default is None else number(field.default))
        rows.append([f"`{alias}`", unit, ec2, default])
    return table(["Field", "Unit", "From `aws ec2 describe-instance-types`", "Default"], rows)


# --- the presets --------------------------------------------------------------------------------------------------


def preset_names() -> list[str]:
    """The presets: every ``Pulumi.<stack>.yaml`` of the repository."""
    return stacks_in(REPO)


def _preset(name: str) -> tuple[dict[str, Any], Any]:
    from stacks.stackfile import plan_stack

    return plan_stack(name, REPO / f"Pulumi.{name}.yaml")


def _workers(plan: Any) -> str:
    parts = []
    for g in plan.groups.values():
        sizes = str(g.max_size) if g.min_size == g.max_size else f"{g.min_size}-{g.max_size}"
        types = "/".join(g.instance_types)
        t = g.profile.instance
        what = f" ({t.gpus} x {t.gpu_model} each)" if t.gpus else " (CPU)"
        spot = ", Spot" if g.capacity_type == "SPOT" else ""
        parts.append(f"{sizes} x {types}{what}{spot}")
    return "; ".join(parts) or f"none (jobs on the {plan.system.max_size} system node(s))"


def presets_table(stacks: Optional[Sequence[str]] = None) -> str:
    """Each preset's worker groups, GPUs and EFA at its desired size, shared storage and estimated cost per hour
    running (desired sizes) and idle (minimum sizes), from its plan and :mod:`stacks.costs`."""
    rows = []
    for name in stacks or preset_names():
        _, plan = _preset(name)
        cost = estimate(plan)
        gpus = sum(g.desired_size * g.profile.instance.gpus for g in plan.groups.values())
        efa = sorted({g.efa.interfaces for g in plan.groups.values() if g.efa is not None})
        rows.append(
            [
                f"`{name}`",
                _workers(plan),
                str(gpus),
                f"{', '.join(map(str, efa))} per node" if efa else "no",
                storage_summary(plan),
                "-" if cost.running is None else f"${cost.running:.3f}",
                "-" if cost.idle is None else f"${cost.idle:.3f}",
            ]
        )
    return table(PRESET_COLUMNS, rows) + f"\n\nAt us-east-1 list prices of {PRICES_AS_OF}."


def dev_cost() -> str:
    """What the ``dev`` preset costs per hour, in a sentence (the quick start's)."""
    _, plan = _preset("dev")
    cost = estimate(plan)
    assert cost.running is not None and cost.idle is not None, "dev's instance types are priced"
    return f"The `dev` stack costs about ${cost.running:.3f} an hour while a job runs and ${cost.idle:.3f} when idle."


def presets_regions_table(stacks: Optional[Sequence[str]] = None) -> str:
    """Each preset's region, zones and pinned zones, read from its stack file."""
    rows = []
    for name in stacks or preset_names():
        _, config = read_stack_config(name, REPO / f"Pulumi.{name}.yaml")
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
        rows.append([f"`{name}`", str(config.get("aws:region", "-")), zones, " ".join(pinned) or "no"])
    return table(["Stack", "Region (`aws:region`)", "VPC zones", "Pinned to a zone"], rows)


def preset_summaries(stacks: Optional[Sequence[str]] = None) -> str:
    """Each preset with what its stack file says it is (the file's opening comment)."""
    rows = []
    for name in stacks or preset_names():
        lines = (REPO / f"Pulumi.{name}.yaml").read_text().splitlines()
        comment = " ".join(line.lstrip("# ").strip() for line in lines if line.startswith("#"))
        rows.append([f"`{name}`", cell(comment.split("config:")[0])])
    return table(["Stack", "What it is (its stack file's opening comment)"], rows)


# --- pinned versions ----------------------------------------------------------------------------------------------


def _image_row(key: str, ref: str, source: str) -> list[str]:
    name, _, digest = ref.partition("@")
    return [key, code(name), code(digest) if digest else "by tag", _source(source)]


def kubernetes_versions_table() -> str:
    """The Kubernetes minors the config accepts, with EKS's support window."""
    rows = [
        [
            f"`{v.minor}`" + (" (default)" if v.minor == DEFAULT_KUBERNETES_VERSION else ""),
            str(v.released),
            str(v.end_of_standard),
            str(v.end_of_extended),
        ]
        for v in KUBERNETES_VERSIONS.values()
    ]
    return table(["Minor", "Released on EKS", "End of standard support", "End of extended support"], rows)


def charts_table() -> str:
    """Every Helm chart the stacks install, its version and source (cluster-autoscaler's per Kubernetes minor)."""
    rows = [[key, code(c.repo), code(c.chart), code(c.version), _source(c.source)] for key, c in HELM_CHARTS.items()]
    rows += [
        [f"cluster-autoscaler (Kubernetes {minor})", code(r.chart.repo), code(r.chart.chart), code(r.chart.version),
         _source(r.chart.source)]
        for minor, r in CLUSTER_AUTOSCALER.items()
    ]  # fmt: skip
    return table(["What", "Repository", "Chart", "Version", "Source"], rows)


def images_table() -> str:
    """Every container image the catalog pins, by digest: the controllers the charts run, the workloads' images and
    the bases the repository's Dockerfiles build on."""
    rows = [_image_row(f"{k} (chart)", i.ref, i.source) for k, i in CHART_IMAGES.items()]
    rows += [
        _image_row(f"cluster-autoscaler (Kubernetes {minor})", r.image.ref, r.image.source)
        for minor, r in CLUSTER_AUTOSCALER.items()
    ]
    rows += [_image_row(k, i.ref, i.source) for k, i in IMAGES.items()]
    rows += [_image_row(f"{k} (base of a Dockerfile)", b.ref, b.source) for k, b in BASE_IMAGES.items()]
    return table(["What", "Image", "Digest", "Source"], rows)


def manifests_table() -> str:
    """The release manifests applied at deploy time (operators and CRDs without an official chart)."""
    rows = [[key, code(m.version), f"<{m.url}>", _source(m.source)] for key, m in MANIFESTS.items()]
    return table(["What", "Version", "Manifest", "Source"], rows)


def addons_table() -> str:
    """The EKS managed add-ons: the version the program installs per Kubernetes minor (this project's pin, with its
    source, else EKS's default, which preflight checks), unless ``cluster.addonVersions`` sets one."""
    rows = []
    for addon in EKS_ADDONS:
        pins = [(minor, pinned_version(addon, minor)) for minor in KUBERNETES_VERSIONS]
        default = [minor for minor, pin in pins if pin is None]
        rows += [
            [code(addon), code(minor), code(pin.version), ", ".join(_source(s) for s in pin.sources)]
            for minor, pin in pins
            if pin is not None
        ]
        if default:
            minors = "every minor" if len(default) == len(pins) else ", ".join(code(m) for m in default)
            checked = bool(features_of(addon)) or addon in DCGM_INSTANCE_TYPES
            rows.append([code(addon), minors, "EKS's default" + (" (preflight checks it)" if checked else ""), ""])
    return table(["Add-on", "Kubernetes", "Version", "Source"], rows)


def addon_features_table() -> str:
    """What the program relies on that only some versions of an add-on have: the config rule and preflight refuse a
    version without it."""
    rows = [
        [code(f.addon), cell(f.what), ranges_text(f.ranges), ", ".join(_source(s) for s in f.sources)]
        for f in ADDON_FEATURES.values()
    ]
    for c in DCGM_INSTANCE_TYPES.values():
        groups: dict[tuple[VersionRange, ...], list[str]] = {}
        for instance_type, ranges in c.instance_types.items():
            groups.setdefault(ranges, []).append(instance_type)
        for ranges, types in groups.items():
            what = cell(f"{c.daemonset} on {', '.join(types)}")
            rows.append([code(c.addon), what, ranges_text(ranges), ", ".join(_source(s) for s in c.sources)])
    return table(["Add-on", "What the stack relies on", "Versions that have it", "Source"], rows)


_ARG = re.compile(r"^ARG (?P<name>\w*VERSION\w*)=(?P<value>\S+)", re.M)
_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9_.\[\]-]+)\s*(?P<spec>[=<>!~].*)$")


def _build_folders() -> list[Path]:
    return [ROOT / f for f in SHIPPED]


def image_build_table() -> str:
    """What the images this repository builds install, pinned: each Dockerfile's ``ARG ..._VERSION`` and each
    ``requirements.txt`` of a build folder."""
    rows = []
    for folder in _build_folders():
        where = folder.relative_to(ROOT).as_posix()
        dockerfile = folder / "Dockerfile"
        if dockerfile.is_file():
            for m in _ARG.finditer(dockerfile.read_text()):
                rows.append([f"`{where}`", code(m.group("name")), code(m.group("value")), "Dockerfile `ARG`"])
        requirements = folder / "requirements.txt"
        if requirements.is_file():
            for line in requirements.read_text().splitlines():
                req = _REQUIREMENT.match(line.split("#")[0].strip())
                if req:
                    rows.append([f"`{where}`", code(req.group("name")), code(req.group("spec")), "`requirements.txt`"])
    return table(["Image folder", "Package", "Version", "Pinned in"], rows)


def restart_keys_table() -> str:
    """Each job kind's keys whose change starts its running pods again (:attr:`stacks.kinds.JobKind.pod_keys`)."""
    from stacks.kinds import KINDS

    rows = [[code(name), ", ".join(code(k) for k in sorted(kind.pod_keys))] for name, kind in sorted(KINDS.items())]
    return table(["Kind", "Keys whose change starts its pods again"], rows)
