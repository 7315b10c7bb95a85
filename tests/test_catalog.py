"""The catalog holds facts with public sources, and the repository stands on its own."""

import re
import subprocess

import pytest

from components.catalog import (
    CA_CHART_WITH_VOLUMEATTACHMENTS,
    CLUSTER_AUTOSCALER,
    KUBERNETES_VERSIONS,
    DEFAULT_KUBERNETES_VERSION,
    HELM_CHARTS,
    INSTANCE_TYPES,
    REFERENCE_ALLREDUCE,
    SERVICE_PRICES,
    SOURCES,
    SUPPORTED_KUBERNETES_VERSIONS,
)
from tests.harness import REPO

pytestmark = pytest.mark.unit


def test_every_source_is_a_public_address() -> None:
    for name, source in SOURCES.items():
        assert source.url.startswith("https://"), name
        assert source.shows, name


def test_every_fact_names_a_known_source() -> None:
    used = {s for t in INSTANCE_TYPES.values() for s in t.sources}
    used |= {c.source for c in HELM_CHARTS.values()} | {p.source for p in SERVICE_PRICES.values()}
    used |= {r.source.split(" ", 1)[0] for r in REFERENCE_ALLREDUCE.values()}
    assert used <= set(SOURCES), used - set(SOURCES)
    for t in INSTANCE_TYPES.values():
        assert t.sources, t.name


def test_every_source_key_the_code_names_exists() -> None:
    """Facts written as constants cite their source in a comment ("source key ``k``", "source keys ``a``, ``b``")."""
    named: set[str] = set()
    for path in [*(REPO / "components").rglob("*.py"), *(REPO / "stacks").rglob("*.py")]:
        for m in re.finditer(r"source keys?\s+((?:``[^`]+``[\s,#:]*(?:and\s+)?)+)", path.read_text()):
            named |= set(re.findall(r"``([^`]+)``", m.group(1)))
    assert {"eks-pod-identity", "aws-network-policy-node-ip", "cluster-autoscaler-releases"} <= named, "the search finds them"
    assert named <= set(SOURCES), named - set(SOURCES)


def test_instance_facts_are_plausible() -> None:
    for name, t in INSTANCE_TYPES.items():
        assert t.name == name and t.vcpus > 0 and t.memory_mib > 0 and t.network_gbps > 0
        assert (t.gpu_model is None) == (t.gpus == 0), name
        if t.supports_efa:
            assert t.max_efa_interfaces == t.network_cards, name
        if t.allocatable_cpu_m is not None:
            assert t.allocatable_cpu_m < t.vcpus * 1000 and t.allocatable_memory_mib is not None
            assert t.allocatable_memory_mib < t.memory_mib


def test_every_kubernetes_version_has_an_autoscaler_that_can_scale() -> None:
    """Each supported minor maps to the autoscaler image of the same minor and a chart whose ClusterRole has
    what autoscaler 1.32+ waits for (volumeattachments, from chart 9.46.3): without it the pod runs but never
    scales (https://github.com/kubernetes/autoscaler/issues/7663)."""
    assert DEFAULT_KUBERNETES_VERSION == SUPPORTED_KUBERNETES_VERSIONS[-1]
    assert set(CLUSTER_AUTOSCALER) == set(SUPPORTED_KUBERNETES_VERSIONS) == set(KUBERNETES_VERSIONS)
    for version in SUPPORTED_KUBERNETES_VERSIONS:
        release = CLUSTER_AUTOSCALER[version]
        assert re.search(rf":v{re.escape(version)}\.\d+$", release.image), release.image
        chart = tuple(int(x) for x in release.chart.version.split("."))
        assert chart >= CA_CHART_WITH_VOLUMEATTACHMENTS, version
        # the ClusterRole a user can open is the one of this very chart release
        assert release.clusterrole.startswith("https://github.com/kubernetes/autoscaler/blob/")
        assert f"/cluster-autoscaler-chart-{release.chart.version}/" in release.clusterrole
        assert release.clusterrole.endswith("/templates/clusterrole.yaml")
        v = KUBERNETES_VERSIONS[version]
        assert v.released < v.end_of_standard < v.end_of_extended


def test_nothing_in_the_repository_reads_or_cites_files_outside_it() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for path in tracked:
        if path.startswith("tests/snapshots/") or path == "tests/test_catalog.py":
            continue
        try:
            text = (REPO / path).read_text(errors="ignore")
        except (IsADirectoryError, FileNotFoundError):
            continue
        if "../shared" in text or "field-notes" in text or "field notes" in text.lower():
            offenders.append(path)
    assert not offenders, offenders
