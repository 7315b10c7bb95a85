"""The Kueue flavor changes a running stack cannot take, and each update's record of what its flavors were applied with.

Once a ResourceFlavor has a Topology, Kueue refuses a change of its ``topologyName`` and ``nodeLabels``. Each update
records both for every flavor as the cluster holds it (:func:`spec_record`, in the output ``deployedVersions``); the
next compares its plan with that record (:func:`flavor_problems`), so a new version of this project that derives them
differently from the same configuration is caught too. Why, with Kueue's source: docs/explanation/admission.md.
"""

import json
from typing import Any, Mapping, Optional

from stacks.config.errors import key
from stacks.plan.model import Plan, same_cluster
from stacks.plan.queues import FlavorPlan
from stacks.plan.record import recorded_entry

#: How the record names what a group's flavor was applied with: ``<the group's config path>.kueueFlavor``.
FLAVOR_SUFFIX = ".kueueFlavor"

#: A flavor's fields Kueue keeps once it has a Topology: its Topology's name (``None``: none), its node labels.
Applied = tuple[Optional[str], Mapping[str, str]]


def applied(f: FlavorPlan) -> Applied:
    """What ``f`` is applied with, of the fields Kueue keeps once it has a Topology."""
    return (f.topology.name if f.topology is not None else None, dict(f.node_labels))


def _record(topology: Optional[str], labels: Mapping[str, str]) -> str:
    """What the record keeps of a flavor: JSON with sorted keys, the same text for the same flavor."""
    fields = {"nodeLabels": dict(labels), **({"topologyName": topology} if topology is not None else {})}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def flavor_record(f: FlavorPlan) -> str:
    """:func:`applied` as the record keeps it."""
    return _record(*applied(f))


def spec_record(spec: Any) -> Optional[str]:
    """The record of a ResourceFlavor's ``spec`` as the cluster holds it (the provider's output after the update);
    ``None`` for a spec of another form."""
    fields = _fields(spec)
    return _record(*fields) if fields is not None else None


def _fields(spec: Any) -> Optional[Applied]:
    """A flavor's Topology name and node labels from a ``spec`` (or a record of one); ``None`` for another form."""
    if not isinstance(spec, Mapping):
        return None
    labels, topology = spec.get("nodeLabels") or {}, spec.get("topologyName")
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        return None
    return (topology, dict(labels)) if topology is None or isinstance(topology, str) else None


def flavor_records(plan: Plan) -> dict[str, str]:
    """Each flavor's :func:`flavor_record`, as the record names it (:data:`FLAVOR_SUFFIX`); none without Kueue."""
    flavors = plan.admission.flavors if plan.admission is not None else ()
    return {f.path + FLAVOR_SUFFIX: flavor_record(f) for f in flavors}


def recorded_flavor(recorded: Optional[Mapping[str, object]], path: str) -> Optional[Applied]:
    """What the last update's record says the flavor of the group at config ``path`` was applied with; ``None`` where
    it holds none (an update by an earlier version of this project) or an entry of another form."""
    text = recorded_entry(recorded, path + FLAVOR_SUFFIX)
    try:
        return _fields(json.loads(text)) if text is not None else None
    except json.JSONDecodeError:
        return None


def _changes(was: Applied, now: Applied) -> list[str]:
    """The changes from ``was`` to ``now`` of a flavor, in words; none where Kueue takes the move (``was`` has no
    Topology)."""
    (was_topology, was_labels), (topology, labels) = was, now
    if was_topology is None:
        return []
    out = [
        f"{label} {was_labels.get(label, 'unset')} -> {labels.get(label, 'unset')}"
        for label in sorted({*was_labels, *labels})
        if was_labels.get(label) != labels.get(label)
    ]
    return out + ([f"Topology {was_topology} -> {topology or 'none'}"] if topology != was_topology else [])


def flavor_problems(old: Plan, new: Plan, recorded: Optional[Mapping[str, object]] = None) -> list[str]:
    """The changes of a running stack's topology-aware flavors that Kueue refuses, each naming its group and the way
    out. A flavor is compared with what the last update's record says it was applied with (``recorded``), else with
    ``old``'s plan of it. A renamed cluster replaces every flavor, and a jobs-only stack has none."""
    if new.admission is None or not same_cluster(old.config, new.config):
        return []
    planned = {f.name: applied(f) for f in old.admission.flavors} if old.admission is not None else {}
    problems = []
    for f in new.admission.flavors:
        was = recorded_flavor(recorded, f.path) or planned.get(f.name)
        changes = "; ".join(_changes(was, applied(f))) if was is not None else ""
        if not changes:
            continue
        what = (
            f"; this version of the project changes them from what the last update applied, as deployedVersions' "
            f"{f.path}{FLAVOR_SUFFIX} records it ({changes})"
            if planned.get(f.name) == applied(f)
            else f" ({changes})"
        )
        keep = "run it with the version of the project that made them" if what.startswith(";") else "keep them"
        problems.append(
            f"{key(f.path)}: its Kueue flavor {f.name} has a Topology, and Kueue then refuses a change of its node "
            f"labels or its Topology{what}: `pulumi up` would fail partway, after other changes (a replaced group's "
            f"new nodes too, billed beside the old ones); {keep}, or give the group a new name (and its jobs' "
            "nodeGroup), which makes a new group and a new flavor"
        )
    return problems
