"""The box's Helm charts (:mod:`stacks.box.charts`): which charts are rendered from source and which are stood in for,
and the checks of a chart's source (its folder complete). Rendering itself runs in the cluster tier
(``tests/cluster/test_box_admission.py``), where the box's helm is built."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from components.catalog import EFA_CHART_INSTANCE_TYPES, HELM_CHARTS
from components.device_plugins import efa_device_plugin_values
from components.scheduling import EFA_LABEL
from stacks.box import charts
from stacks.box.charts import CHART_SOURCES, NOT_AT_HAND, ChartError, chart_key, crds_helm_keeps, incomplete, render
from stacks.box.devices import PLUGIN_CHARTS, stand_ins


def test_every_catalog_chart_is_rendered_from_source_or_stood_in_for_never_both() -> None:
    """One place per chart: a chart whose source the box has is rendered by helm (its stand-in goes), a stand-in only
    for a chart whose source is not at hand, and every catalog chart is one or the other."""
    assert not set(CHART_SOURCES) & set(NOT_AT_HAND)
    assert set(CHART_SOURCES) | set(NOT_AT_HAND) == set(HELM_CHARTS)
    assert set(PLUGIN_CHARTS) == set(NOT_AT_HAND)
    for key, url in NOT_AT_HAND.items():
        assert url.startswith("https://github.com/"), key
    # NVIDIA's chart is named by its release tag (the EFA chart's by the eks-charts commit that made its release)
    release = f"/tree/v{HELM_CHARTS['nvidia-device-plugin'].version}/"
    assert release in NOT_AT_HAND["nvidia-device-plugin"], f"stacks/box/charts.py NOT_AT_HAND: name {release}"
    for key, source in CHART_SOURCES.items():
        assert source.url.startswith("https://github.com/") and HELM_CHARTS[key].version in source.url, key


def test_a_release_is_named_by_its_chart_or_its_oci_reference() -> None:
    assert chart_key("nvidia-device-plugin") == "nvidia-device-plugin"
    assert chart_key("oci://registry.k8s.io/kueue/charts/kueue") == "kueue"
    assert chart_key("kueue") == "kueue"
    assert chart_key("cluster-autoscaler") is None


def test_a_chart_not_at_hand_or_at_another_version_is_refused_naming_why() -> None:
    url = NOT_AT_HAND["nvidia-device-plugin"]
    with pytest.raises(ChartError, match=rf"no source for the chart nvidia-device-plugin \({re.escape(url)} is not"):
        render({"chart": "nvidia-device-plugin", "version": HELM_CHARTS["nvidia-device-plugin"].version}, "1.36")
    with pytest.raises(
        ChartError, match=rf"installs kueue 0\.1\.0, the catalog pins {re.escape(HELM_CHARTS['kueue'].version)}"
    ):
        render({"chart": "kueue", "version": "0.1.0"}, "1.36")
    with pytest.raises(ChartError, match=r"not a chart of components/catalog"):
        render({"chart": "cluster-autoscaler"}, "1.36")


def _chart(folder: Path, *, dependencies=(), templates=True, vendored=()) -> dict:
    meta = {
        "apiVersion": "v2",
        "name": "c",
        "version": "1.0.0",
        "dependencies": [{"name": d, "version": "1.0.0", "condition": f"{d}.enabled"} for d in dependencies],
    }
    folder.mkdir(parents=True)
    (folder / "Chart.yaml").write_text(yaml.safe_dump(meta))
    if templates:
        (folder / "templates").mkdir()
        (folder / "templates" / "a.yaml").write_text("kind: ConfigMap\n")
    for d in vendored:
        (folder / "charts" / d).mkdir(parents=True)
        (folder / "charts" / d / "Chart.yaml").write_text("name: x\n")
    return meta


def test_an_incomplete_chart_folder_is_reported(tmp_path) -> None:
    """A module zip leaves out a sub-folder with its own go.mod: a chart whose templates or dependency went missing
    is reported; a complete one is not."""
    assert incomplete(tmp_path / "ok", _chart(tmp_path / "ok", dependencies=["nfd"], vendored=["nfd"])) == []
    assert incomplete(tmp_path / "dep", _chart(tmp_path / "dep", dependencies=["nfd"])) == [
        "dependency nfd not under charts/"
    ]
    assert incomplete(tmp_path / "bare", _chart(tmp_path / "bare", templates=False)) == ["no templates/"]


def test_a_chart_whose_crds_helm_would_never_upgrade_is_refused(tmp_path, monkeypatch) -> None:
    """Helm installs a chart's crds/ (its own, or a vendored chart's) once and leaves them at every upgrade: a pinned
    chart that keeps its CRDs there is refused with the reason and the fix, as the box reads it. Kueue's chart keeps
    them in templates/crd/, which Helm upgrades."""
    folder = tmp_path / "kueue"
    meta = _chart(folder, dependencies=["nfd"], vendored=["nfd"])
    assert crds_helm_keeps(folder) == []
    (folder / "crds").mkdir()
    assert crds_helm_keeps(folder) == []  # an empty folder installs nothing
    (folder / "crds" / "a.yaml").write_text("kind: CustomResourceDefinition\n")
    (folder / "charts" / "nfd" / "crds").mkdir()
    (folder / "charts" / "nfd" / "crds" / "b.yaml").write_text("kind: CustomResourceDefinition\n")
    assert crds_helm_keeps(folder) == ["crds", "charts/nfd/crds"]
    meta["version"] = HELM_CHARTS["kueue"].version
    (folder / "Chart.yaml").write_text(yaml.safe_dump(meta))
    monkeypatch.setattr(charts, "module_dir", lambda box_module, module: tmp_path)
    monkeypatch.setitem(CHART_SOURCES, "kueue", charts.ChartSource("kueue", "sigs.k8s.io/kueue", "kueue", "https://x"))
    with pytest.raises(ChartError, match=r"kueue .* in crds, charts/nfd/crds: Helm installs a chart's crds/ once"):
        charts.chart_dir("kueue")


def test_the_box_stands_in_for_the_device_plugin_charts_the_catalog_pins() -> None:
    """A chart bump in the catalog fails here, in the fast tiers, until the stand-in follows the new chart's template
    (else only the cluster tier would see it)."""
    for key, chart in PLUGIN_CHARTS.items():
        assert chart.version == HELM_CHARTS[key].version, (
            f"stacks/box/devices.py stands in for {key} {chart.version}, the catalog pins "
            f"{HELM_CHARTS[key].version}: read the new chart's DaemonSet template and update its stand-in"
        )


def _efa_terms(values: dict | None) -> list:
    release = {"chart": "aws-efa-k8s-device-plugin", "version": HELM_CHARTS["aws-efa-k8s-device-plugin"].version}
    (daemonset,) = stand_ins([{**release, "values": values}])
    affinity = daemonset["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_the_efa_plugin_runs_on_every_efa_node_whatever_its_type() -> None:
    """The chart's default affinity lists the instance types its release knew; the stack's values replace it with the
    EFA node label, so a type the chart does not list (one described under instanceFacts) still gets its devices."""
    not_auto = {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["auto"]}
    (default,) = _efa_terms(None)
    assert default["matchExpressions"] == [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(EFA_CHART_INSTANCE_TYPES)},
        not_auto,
    ]
    assert "p6-b300.48xlarge" not in EFA_CHART_INSTANCE_TYPES
    (ours,) = _efa_terms(efa_device_plugin_values(HELM_CHARTS["aws-efa-k8s-device-plugin"].version))
    assert ours["matchExpressions"] == [{"key": EFA_LABEL[0], "operator": "In", "values": [EFA_LABEL[1]]}, not_auto]
