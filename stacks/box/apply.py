"""Apply a stack's Kubernetes objects to a box in dependency order, as ``pulumi up`` would, and collect refusals.

The Kubernetes provider applies each object with server-side apply (the provider's default since v4,
https://www.pulumi.com/registry/packages/kubernetes/how-to-guides/managing-resources-with-server-side-apply/) once the
objects it depends on exist. Here: Namespaces, then CustomResourceDefinitions (waited for until Established: the
apiserver refuses a custom resource of a CRD that is not), then every other object in the stack's order, with strict
field validation (an unknown or duplicated field is an error, not silently dropped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from components.conventions import PATCH_FIELD_MANAGER
from stacks.box.cluster import Box, establish_crds
from stacks.box.efs import provision
from stacks.box.progress import Progress
from stacks.box.steps import RehearsalError, Step
from stacks.yaml_text import dump_yaml_documents

#: Kinds applied before everything else, in this order.
FIRST = ("Namespace", "CustomResourceDefinition")
#: The field manager the box applies a stack's objects under (the Kubernetes provider's part).
FIELD_MANAGER = "eks-training-box"
#: The annotation that forces a Patch resource's apply over another field manager's fields (pulumi-kubernetes
#: ``patchForce``; else a conflict fails it).
PATCH_FORCE = "pulumi.com/patchForce"


def applies(docs: Iterable[Mapping[str, Any]]) -> list[tuple[list[str], list[Mapping[str, Any]]]]:
    """``docs`` in the server-side applies the provider makes, each with its kubectl flags: the objects under the
    box's field manager, then each Patch resource's (a :data:`~components.conventions.PATCH_FIELD_MANAGER`
    annotation) under its own, failing on a conflict unless :data:`PATCH_FORCE` is ``"true"``."""
    groups: dict[tuple[str, bool], list[Mapping[str, Any]]] = {}
    for doc in docs:
        annotations = (doc.get("metadata") or {}).get("annotations") or {}
        manager = annotations.get(PATCH_FIELD_MANAGER)
        key = (manager, annotations.get(PATCH_FORCE) == "true") if manager else (FIELD_MANAGER, True)
        groups.setdefault(key, []).append(doc)
    order = sorted(groups, key=lambda k: k[0] != FIELD_MANAGER)
    return [
        (
            ["--server-side", *(["--force-conflicts"] if force else []), f"--field-manager={manager}"],
            groups[(manager, force)],
        )
        for manager, force in order
    ]


@dataclass(frozen=True)
class Refusal:
    """One object the box refused, with the apiserver's message."""

    kind: str
    name: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: {self.message}"


def ordered(docs: Iterable[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """``docs`` in phases: each kind of :data:`FIRST`, then the rest in their given (the stack's) order."""
    docs = list(docs)
    phases = [[d for d in docs if d["kind"] == kind] for kind in FIRST]
    phases.append([d for d in docs if d["kind"] not in FIRST])
    return [p for p in phases if p]


def _describe(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _refusals(phase: Sequence[Mapping[str, Any]], stderr: str) -> list[Refusal]:
    """kubectl prints one error per refused object; match each to its object by kind and name."""
    out = []
    lines = [line for line in stderr.splitlines() if line.strip()]
    for doc in phase:
        name = (doc.get("metadata") or {}).get("name", "")
        pattern = re.compile(rf'\b{re.escape(doc["kind"])}\b.*"{re.escape(name)}"', re.IGNORECASE)
        hits = [line for line in lines if pattern.search(line)]
        if hits:
            out.append(Refusal(doc["kind"], _describe(doc), " / ".join(hits)))
    if stderr.strip() and not out:
        out.append(Refusal("?", "?", stderr.strip()))
    return out


def apply_stack(box: Box, docs: Iterable[Mapping[str, Any]]) -> list[Refusal]:
    """Apply ``docs`` phase by phase; the objects refused (empty when all were accepted)."""
    refused: list[Refusal] = []
    for phase in ordered(docs):
        ok = True
        for flags, group in applies(phase):
            proc = box.kubectl("apply", *flags, "--validate=strict", "-f", "-", input=_dump(group), check=False)
            if proc.returncode != 0:
                refused += _refusals(group, proc.stderr)
                ok = False
        crds = [d["metadata"]["name"] for d in phase if d["kind"] == "CustomResourceDefinition"]
        if crds and ok:
            establish_crds(box, crds)
    return refused


def _dump(docs: Sequence[Mapping[str, Any]]) -> str:
    return dump_yaml_documents(dict(d) for d in docs)


def apply_steps(
    box: Box,
    steps: Sequence[Step],
    progress: Progress,
    annotate: Callable[[dict[str, Any]], None],
    note: Callable[[str], None],
    refusals: list[Refusal],
) -> None:
    """Apply ``steps`` (each one's dependencies ready, so ``pulumi up`` would apply them side by side) in one
    server-side apply: kubectl applies each object and reports every refusal (added to ``refusals``); each step applied
    starts its clock in ``progress``."""
    docs: list[dict[str, Any]] = []
    created: list[dict[str, Any]] = []
    for step in steps:
        # A Helm release the box does not stand in for (cluster-autoscaler: stacks/box/provisioner.py plays its
        # ProvisioningRequests).
        if not step.docs:
            progress.mark_applied(step)
        for doc in step.docs:
            annotate(doc)
            # Kueue's release: Helm's install creates a release's objects (no server-side apply), and creating
            # Kueue's 1.8 MB of CRDs costs the apiserver a fraction of applying them server-side.
            (created if step.kueue is not None else docs).append(doc)
    if not docs and not created:
        return
    proc = None
    # As Helm's install does with a chart's CRDs: one that exists already is left as it is.
    created = [
        d for d in created if not (d["kind"] == "CustomResourceDefinition" and box.exists("crd", d["metadata"]["name"]))
    ]
    if created:
        proc = box.kubectl(
            "create",
            "--validate=strict",
            "-f",
            "-",
            input=dump_yaml_documents(created),
            check=False,
        )
    # the stack's objects, then each Patch under its own field manager, as the provider applies them
    for flags, group in applies(docs):
        if proc is not None and proc.returncode != 0:
            break
        proc = box.kubectl(
            "apply", *flags, "--validate=strict", "-f", "-", input=dump_yaml_documents(group), check=False
        )
    docs += created
    if proc is not None and proc.returncode != 0:
        refused = _refusals(docs, proc.stderr)
        refusals += refused
        names = [
            s.name
            for s in steps
            if any(r.name.rpartition("/")[2] == d["metadata"]["name"] for r in refused for d in s.docs)
        ] or [s.name for s in steps]
        raise RehearsalError(f"{', '.join(names)} was refused: " + "; ".join(str(r) for r in refusals))
    for step in steps:
        if not step.docs:
            continue
        progress.mark_applied(step)
        note(f"applied {step.name} ({', '.join(d['kind'] + ' ' + d['metadata']['name'] for d in step.docs)})")
        for doc in step.docs:
            if doc["kind"] == "PersistentVolumeClaim":
                provision(box, doc, note)
