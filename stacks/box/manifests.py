"""What a stack puts on a cluster, as plain Kubernetes objects for the box.

:func:`registered_objects` gives every object the program registers with the Kubernetes provider, as the provider
sends it. :func:`release_manifest` reads a vendor release manifest the program applies from a URL from the pinned Go
module of the same version, as the box has no internet. :data:`MODULE_MANIFESTS` records where each comes from,
including the ProvisioningRequest CRD's module. Helm releases are not objects here (:mod:`stacks.box.charts`,
:mod:`stacks.box.devices`, :mod:`stacks.box.kueue`).

Why: docs/explanation/box.md, "Manifests from pinned modules"."""

from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping, Optional

from components.catalog import MANIFESTS
from components.conventions import PATCH_FIELD_MANAGER
from stacks.box.gomodules import ManifestError, module_dir, module_version
from stacks.box.kueue import crds, is_kueue_chart
from stacks.yaml_text import load_yaml_documents

#: Release manifests the box can read from a pinned module: catalog key -> (box module, Go module, path in it, the
#: module version compared with the catalog's release when it cannot be the same, else ``None``: the same version).
MODULE_MANIFESTS: Mapping[str, tuple[str, str, str, Optional[str]]] = {
    "mpi-operator": ("mpi-operator", "github.com/kubeflow/mpi-operator", "deploy/v2beta1/mpi-operator.yaml", None),
    "provisioning-request-crd": (
        "kueue",
        "k8s.io/autoscaler/cluster-autoscaler/apis",
        "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml",
        "v0.0.0-20240830133931-adfbe7e45277",
    ),
}


def release_manifest(url: str) -> list[dict[str, Any]]:
    """The objects of the release manifest at ``url`` (a URL of :data:`components.catalog.MANIFESTS`)."""
    for key, manifest in MANIFESTS.items():
        if manifest.url != url:
            continue
        if key not in MODULE_MANIFESTS:
            raise ManifestError(f"the box has no pinned module for the release manifest {key} ({url})")
        folder, module, path, compared = MODULE_MANIFESTS[key]
        pinned = module_version(folder, module)
        if pinned != (compared or manifest.version):
            raise ManifestError(
                f"components/catalog pins {key} {manifest.version} but box/{folder}/go.mod pins {module} "
                f"{pinned}"
                + (
                    f", not the version compared with it ({compared}): compare the two files again and update "
                    f"stacks/box/manifests.py"
                    if compared
                    else ": pin both at the same version"
                )
            )
        text = (module_dir(folder, module) / path).read_text()
        return load_yaml_documents(text)
    raise ManifestError(f"{url} is not a release manifest of components/catalog")


def registered_objects(registrations: Iterable[Any]) -> list[dict[str, Any]]:
    """The objects of a program's registrations (objects with ``type``, ``inputs``), in registration order (which
    respects dependencies: a resource is registered after the ones it depends on)."""
    out: list[dict[str, Any]] = []
    for r in registrations:
        if r.type.startswith("kubernetes:helm.sh/") and is_kueue_chart(r.inputs.get("chart", "")):
            out += crds()
            continue
        if not r.type.startswith("kubernetes:") or r.type.startswith("kubernetes:helm.sh/"):
            continue
        if r.type in ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml:ConfigFile"):
            out += release_manifest(r.inputs["file"])
            continue
        if r.type.startswith("kubernetes:yaml"):
            raise ManifestError(f"{r.type} {r.name}: the box does not know this kind of registration")
        out.append(registered_object(r))
    return out


def is_patch(resource_type: str) -> bool:
    """A pulumi-kubernetes Patch resource (``kubernetes:apps/v1:DeploymentPatch``): part of an object that exists."""
    return resource_type.startswith("kubernetes:") and resource_type.endswith("Patch")


def registered_object(r: Any) -> dict[str, Any]:
    """The object of one registration of a Kubernetes resource; a Patch resource's names the field manager it is
    applied under (:data:`~components.conventions.PATCH_FIELD_MANAGER`; the provider picks one of its own when the
    annotation is absent)."""
    doc = copy.deepcopy({k: v for k, v in r.inputs.items() if not k.startswith("__")})
    if is_patch(r.type):
        metadata = doc.setdefault("metadata", {})
        metadata["annotations"] = {
            PATCH_FIELD_MANAGER: f"pulumi-kubernetes-{r.name}",
            **(metadata.get("annotations") or {}),
        }
    return doc
