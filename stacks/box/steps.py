"""A stack's registrations as the rehearsal's steps: each one's objects, what it waits for and for how long.

:func:`steps_of` reads them off the program's registrations; :class:`stacks.box.rehearse.Rehearsal` applies them."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from components.admission import PROVISIONING_CONTROLLER
from stacks.box.awaits import await_timeout_s
from stacks.box.cluster import Box
from stacks.box.devices import stand_ins
from stacks.box.kueue import crds as kueue_crds
from stacks.box.kueue import is_kueue_chart, kueue_release_configuration, kueue_release_feature_gates
from stacks.box.manifests import registered_object, release_manifest


@dataclass
class Step:
    """One registration: its objects, the steps it waits for, and whether ``pulumi up`` awaits it."""

    urn: str
    name: str
    docs: list[dict[str, Any]]
    deps: set[str] = field(default_factory=set)
    kueue: Optional[dict[str, Any]] = None
    """The Kueue release's Configuration (its step's docs are Kueue's CRDs; the box starts Kueue once they exist)."""
    kueue_gates: dict[str, bool] = field(default_factory=dict)
    """The Kueue release's feature gates (its chart values' ``controllerManager.featureGates``)."""
    kueue_module: str = "kueue"
    """The box module of the Kueue release whose CRDs the docs are and whose manager starts (``kueue-previous``: the
    release pinned before the stacks' own, :func:`steps_of`)."""
    timeout_s: float = 600.0
    """How long ``pulumi up`` waits for the registration to be ready (:func:`stacks.box.awaits.await_timeout_s`)."""
    gate: Optional[Callable[[Box], bool]] = None
    """A condition on the box the step also waits for before it is applied (a test's order; ``None``: none)."""


class RehearsalError(Exception):
    """The stack did not run through: the message names what waited and why."""


def steps_of(registrations: Sequence[Any], kueue_module: str = "kueue") -> list[Step]:
    """The Kubernetes steps of a program's registrations (``type``, ``name``, ``urn``, ``parent``, ``custom``,
    ``dependencies``, ``inputs``), dependencies on components expanded to the steps under them; the Kueue release as
    the box module ``kueue_module`` pins it."""
    children: dict[str, list[str]] = {}
    for r in registrations:
        children.setdefault(r.parent, []).append(r.urn)

    def under(urn: str) -> set[str]:
        out = {urn}
        for c in children.get(urn, []):
            out |= under(c)
        return out

    steps: list[Step] = []
    k8s = set()
    for r in registrations:
        if not r.type.startswith("kubernetes:"):
            continue
        kueue, gates = None, {}
        if r.type.startswith("kubernetes:helm.sh/") and is_kueue_chart(r.inputs.get("chart", "")):
            docs, kueue = kueue_crds(kueue_module), kueue_release_configuration(r.inputs.get("values") or {})
            gates = kueue_release_feature_gates(r.inputs.get("values") or {})
        elif r.type.startswith("kubernetes:helm.sh/"):
            docs = stand_ins([copy.deepcopy(r.inputs)])
        elif r.type.startswith("kubernetes:yaml"):
            docs = release_manifest(r.inputs["file"])
        else:
            docs = [registered_object(r)]
        timeout_s = await_timeout_s(getattr(r, "custom_timeouts", None) or {}, r.inputs)
        if r.type.startswith("kubernetes:helm.sh/") and r.inputs.get("timeout"):
            timeout_s = float(r.inputs["timeout"])  # a Release's own wait, in seconds
        deps = {u for d in r.dependencies for u in under(d)}
        steps.append(Step(r.urn, r.name, docs, deps, kueue, gates, kueue_module, timeout_s))
        k8s.add(r.urn)
    for s in steps:
        s.deps &= k8s
        s.deps.discard(s.urn)
    return steps


def provisioning_checks(steps: Sequence[Step]) -> list[str]:
    """The stack's admission checks that ask the cluster autoscaler for ProvisioningRequests."""
    return [
        d["metadata"]["name"]
        for s in steps
        for d in s.docs
        if d["kind"] == "AdmissionCheck" and (d.get("spec") or {}).get("controllerName") == PROVISIONING_CONTROLLER
    ]
