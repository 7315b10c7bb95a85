"""The Helm charts the stacks install, rendered in the box by the real ``helm template`` from the charts' sources.

:func:`render` renders a ``kubernetes.helm.v3.Release`` the program registers as Helm installs it: the chart's own
source at the catalog's pinned version, with the release's values and namespace. So what a chart does with a value is
the chart's doing. Sources come from the Go module proxy through a pinned box module (:data:`CHART_SOURCES`), never
into the repository; :func:`chart_dir` checks the version, that the folder is complete, and that Helm upgrades the
chart's CRDs. The device plugins' charts cannot be had here (:data:`NOT_AT_HAND`), so :mod:`stacks.box.devices` stands
in for them. The cluster tier compares the render with the plan (``tests/cluster/test_box_admission.py``).

Why: docs/explanation/box.md ("Charts rendered by Helm", "Nodes from the plan")."""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import yaml

from components.catalog import HELM_CHARTS, SOURCES
from stacks.box import build as box_build
from stacks.box.gomodules import module_dir
from stacks.yaml_text import load_yaml_documents


class ChartError(Exception):
    """A chart's source is missing, not the pinned version or incomplete, or ``helm template`` refused the release."""


@dataclass(frozen=True)
class ChartSource:
    """Where a catalog chart's source is: a Go module a box module pins, and the chart's folder in it."""

    box_module: str
    """The folder of ``box/`` whose ``go.mod`` requires :attr:`module` (the pin, checksummed by its ``go.sum``)."""
    module: str
    folder: str
    url: str
    """The chart's source at its release, as its project publishes it."""


#: Catalog chart key -> its source.
CHART_SOURCES: Mapping[str, ChartSource] = {
    # The chart is built from charts/kueue of the release tag (the Makefile stamps version and appVersion with the tag).
    "kueue": ChartSource(
        "kueue",
        "sigs.k8s.io/kueue",
        "charts/kueue",
        "https://github.com/kubernetes-sigs/kueue/tree/v0.19.1/charts/kueue",
    ),
}

#: Catalog charts the box renders without their source (stand-ins, :mod:`stacks.box.devices`), and where the source is.
NOT_AT_HAND: Mapping[str, str] = {
    "nvidia-device-plugin": "https://github.com/NVIDIA/k8s-device-plugin/tree/v0.20.0/deployments/helm/nvidia-device-plugin",
    "aws-efa-k8s-device-plugin": "https://github.com/aws/eks-charts/tree/bfe91c4b9257c80f754ad4b3d6a9a3c239b2b8ec/stable/aws-efa-k8s-device-plugin",
}


def chart_key(chart: str) -> Optional[str]:
    """The catalog key of a Release's ``chart`` input (a chart name, or an OCI chart's full reference)."""
    for key, c in HELM_CHARTS.items():
        if chart in (c.chart, f"{c.repo}/{c.chart}"):
            return key
    return None


def chart_dir(key: str) -> Path:
    """The source folder of the catalog chart ``key`` at the catalog's version, checked (see the module docstring).
    A day-two rule too: a chart bump must upgrade the chart's CRDs on a running cluster (:func:`crds_helm_keeps`)."""
    source = CHART_SOURCES.get(key)
    if source is None:
        raise ChartError(
            f"the box has no source for the chart {key}"
            + (f" ({NOT_AT_HAND[key]} is not served to it)" if key in NOT_AT_HAND else "")
        )
    folder = module_dir(source.box_module, source.module) / source.folder
    chart_yaml = folder / "Chart.yaml"
    if not chart_yaml.is_file():
        raise ChartError(f"{source.module} (box/{source.box_module}/go.mod) has no {source.folder}/Chart.yaml")
    meta = yaml.safe_load(chart_yaml.read_text())
    pinned = HELM_CHARTS[key].version
    if str(meta.get("version", "")).lstrip("v") != pinned.lstrip("v"):
        raise ChartError(
            f"components/catalog pins the chart {key} at {pinned}, but {source.folder}/Chart.yaml of "
            f"{source.module} {box_build.MODULES[source.box_module].version()} (box/{source.box_module}/"
            f"go.mod) is version {meta.get('version')}: pin both at the same release"
        )
    missing = incomplete(folder, meta)
    if missing:
        raise ChartError(f"the chart {key} in {folder} is incomplete: {'; '.join(missing)}")
    kept = crds_helm_keeps(folder)
    if kept:
        raise ChartError(
            f"the chart {key} {pinned} has CustomResourceDefinitions in {', '.join(kept)}: Helm installs a chart's "
            f"crds/ once and never upgrades them ({SOURCES['helm-crds'].url}), so a later pin's CRDs would not reach "
            "a running cluster. Install them as objects of their own, ahead of the release "
            "(components/helm.py), before pinning this version"
        )
    return folder


def incomplete(folder: Path, meta: Mapping[str, Any]) -> list[str]:
    """What a chart folder lacks that its ``Chart.yaml`` says it has: templates, a dependency's chart under
    ``charts/`` (a folder with its own ``go.mod`` is not in a module zip, https://go.dev/ref/mod#zip-path-size-constraints)."""
    out = []
    if not any((folder / "templates").glob("*")):
        out.append("no templates/")
    for dep in meta.get("dependencies") or []:
        name = dep["name"]
        if not (folder / "charts" / name / "Chart.yaml").is_file() and not list(
            (folder / "charts").glob(f"{name}-*.tgz")
        ):
            out.append(f"dependency {name} not under charts/")
    return out


def crds_helm_keeps(folder: Path) -> list[str]:
    """The ``crds/`` folders, of the chart at ``folder`` and of the charts it vendors, that hold files: Helm installs
    them with the release and leaves them as they are at every upgrade."""
    found = [folder / "crds", *sorted((folder / "charts").glob("*/crds"))]
    return [str(d.relative_to(folder)) for d in found if d.is_dir() and any(d.iterdir())]


def render(
    release: Mapping[str, Any], kube_version: str, *, helm: Optional[Path] = None, show_only: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The objects ``helm install`` would create for ``release`` (a Release's inputs: ``chart``, ``version``, ``name``,
    ``namespace``, ``values``) on a cluster at ``kube_version`` (``"1.36"``), CRDs included, in Helm's order; only
    those of the templates ``show_only`` names (paths in the chart, e.g. ``templates/manager/manager.yaml``), if any."""
    key = chart_key(release.get("chart", ""))
    if key is None:
        raise ChartError(f"{release.get('chart')} is not a chart of components/catalog")
    if release.get("version") not in (None, HELM_CHARTS[key].version):
        raise ChartError(
            f"the release installs {key} {release.get('version')}, the catalog pins "
            f"{HELM_CHARTS[key].version}: the box renders the catalog's"
        )
    folder = chart_dir(key)
    helm = helm or box_build.build(["helm"])["helm"]
    namespace = release.get("namespace") or "default"
    with tempfile.TemporaryDirectory(prefix="box-helm-") as tmp:
        values = Path(tmp) / "values.json"  # JSON is YAML: the values exactly as registered
        values.write_text(json.dumps(release.get("values") or {}))
        proc = subprocess.run(
            [
                str(helm),
                "template",
                release.get("name") or key,
                str(folder),
                "--namespace",
                namespace,
                "--values",
                str(values),
                "--include-crds",
                "--kube-version",
                kube_version,
                *(a for t in show_only for a in ("--show-only", t)),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                "HOME": tmp,
                "HELM_CACHE_HOME": f"{tmp}/cache",
                "HELM_CONFIG_HOME": f"{tmp}/config",
                "HELM_DATA_HOME": f"{tmp}/data",
                "PATH": "/usr/bin:/bin",
            },
        )
    if proc.returncode != 0:
        raise ChartError(f"helm template of the {key} release failed: {proc.stderr.strip()[-3000:]}")
    out = []
    for doc in load_yaml_documents(proc.stdout):  # libyaml: 1.7 MB of CRDs
        if not doc["metadata"].get("namespace") and _namespaced(doc):
            doc["metadata"]["namespace"] = namespace  # as Helm's install does for a template that names none
        out.append(doc)
    return out


#: Kinds of the charts' cluster-scoped objects (all others get the release's namespace when they name none).
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "APIService",
    "PriorityClass",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "IngressClass",
    "RuntimeClass",
    "StorageClass",
    "FlowSchema",
    "PriorityLevelConfiguration",
}


def _namespaced(doc: Mapping[str, Any]) -> bool:
    return doc["kind"] not in CLUSTER_SCOPED
