"""What a real cluster does with an object `pulumi up` changes: Pulumi replaces it, or the apiserver takes the change
in place, or refuses it and `pulumi up` fails there. Encoded from their owners' sources, for the kinds the stacks
register, so a test can hold every day-two change to them.

- Pulumi replaces an object when its provider says so (pulumi-kubernetes ``forceNewProperties``,
  https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/provider/diff.go) or a path its
  ``replaceOnChanges`` names changes; paths its ``ignoreChanges`` names are never sent.
- The apiserver refuses an update of an immutable field (kubernetes pkg/apis/batch/validation ``ValidateJobSpecUpdate``,
  pkg/apis/storage/validation ``ValidateStorageClassUpdate``, pkg/apis/core/validation
  ``ValidatePersistentVolumeClaimUpdate`` and ``ValidatePersistentVolumeUpdate``), and a new size of a claim whose
  StorageClass does not allow expansion (plugin/pkg/admission/storage/persistentvolume/resize).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from stacks.mocked import Registration

K8S = "kubernetes:"
#: pulumi-kubernetes's forceNew paths per type, beyond every object's metadata.name and metadata.namespace.
PULUMI_FORCE_NEW: dict[str, tuple[str, ...]] = {
    "kubernetes:batch/v1:Job": ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
    "kubernetes:storage.k8s.io/v1:StorageClass": ("parameters", "provisioner"),
    "kubernetes:core/v1:PersistentVolumeClaim": (
        "spec.accessModes",
        "spec.selector",
        "spec.storageClassName",
        "spec.volumeName",
    ),
    "kubernetes:core/v1:PersistentVolume": ("spec.csi", "spec.nfs", "spec.hostPath", "spec.local"),
    "kubernetes:core/v1:Service": ("spec.clusterIP", "spec.type"),
    "kubernetes:apps/v1:Deployment": ("spec.selector",),
    "kubernetes:apps/v1:DaemonSet": ("spec.selector",),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("roleRef",),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("roleRef",),
}
#: The paths the apiserver refuses to change in place, per type. A claim's size is among them: no StorageClass the
#: stacks make allows expansion (:func:`refused_updates` checks that), and a bound claim never shrinks.
APISERVER_IMMUTABLE: dict[str, tuple[str, ...]] = {
    "kubernetes:batch/v1:Job": (
        "spec.completionMode",
        "spec.podFailurePolicy",
        "spec.backoffLimitPerIndex",
        "spec.selector",
        "spec.template",
    ),
    "kubernetes:storage.k8s.io/v1:StorageClass": ("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"),
    "kubernetes:core/v1:PersistentVolumeClaim": ("spec.resources", "spec.volumeMode"),
    "kubernetes:core/v1:PersistentVolume": ("spec.volumeMode", "spec.csi"),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("roleRef",),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("roleRef",),
}
ALWAYS_NEW = ("metadata.name", "metadata.namespace")


def at(doc: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a mapping, or ``None``."""
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def differs(before: Registration, after: Registration, path: str) -> bool:
    """Whether ``path`` differs, or a path under it that ``after``'s ignoreChanges does not name."""
    if any(path == i or path.startswith(i + ".") for i in after.ignore_changes):
        return False
    a, b = copy.deepcopy(at(before.inputs, path)), copy.deepcopy(at(after.inputs, path))
    for i in (i for i in after.ignore_changes if i.startswith(path + ".")):  # compare without the ignored paths
        for doc in (a, b):
            parent, _, leaf = i[len(path) + 1 :].rpartition(".")
            holder = at(doc, parent) if parent else doc
            if isinstance(holder, dict):
                holder.pop(leaf, None)
    return bool(a != b)


def replaced_by(before: Registration, after: Registration) -> list[str]:
    """The paths for which Pulumi replaces the object (empty: changed in place, or not at all)."""
    paths = (*ALWAYS_NEW, *PULUMI_FORCE_NEW.get(after.type, ()), *after.replace_on_changes)
    return [p for p in paths if differs(before, after, p)]


def refused_updates(before: list[Registration], after: list[Registration]) -> list[str]:
    """Each in-place update of a Kubernetes object between two evaluations that the apiserver refuses, as
    ``<type> <name>: <path>``. Objects are paired by URN; one Pulumi replaces is created anew, which is no update."""
    classes = [r for r in after if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"]
    assert not any(r.inputs.get("allowVolumeExpansion") for r in classes), "a class allows expansion: amend the rule"
    old = {r.urn: r for r in before if r.type.startswith(K8S)}
    out = []
    for new in (r for r in after if r.urn in old):
        was: Optional[Registration] = old[new.urn]
        assert was is not None
        if replaced_by(was, new):
            continue
        out += [f"{new.type} {new.name}: {p}" for p in APISERVER_IMMUTABLE.get(new.type, ()) if differs(was, new, p)]
    return out
