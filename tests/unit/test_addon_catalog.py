"""The add-on version facts (components/catalog/addons.py): their shape, their sources, and that every pin has what the
program relies on."""

import pytest

from components.catalog import EKS_ADDONS, INSTANCE_TYPES, KUBERNETES_VERSIONS, SOURCES
from components.catalog.addons import (
    ADDON_FEATURES,
    ADDON_VERSION_RE,
    ADDON_VERSIONS,
    CONFIGURATION,
    DCGM_INSTANCE_TYPES,
    ONE_MINOR_STEP_ADDONS,
    POD_IDENTITY,
    VersionRange,
    addon_version_for,
    addon_version_tuple,
    configuration_settings,
    features_of,
    in_ranges,
    missing_features,
    ranges_text,
    require_version,
)

NVIDIA_TYPES = sorted(n for n, t in INSTANCE_TYPES.items() if t.gpus)


def _well_formed(ranges: tuple[VersionRange, ...]) -> bool:
    """Non-empty, each range non-empty, in order and apart."""
    ends = [(r.since, r.before) for r in ranges]
    ordered = all(a[1] is not None and a[1] < b[0] for a, b in zip(ends, ends[1:]))
    return bool(ranges) and all(b is None or s < b for s, b in ends) and ordered


def test_every_feature_is_of_an_installed_addon_with_versions_and_sources() -> None:
    assert ADDON_FEATURES
    for key, f in ADDON_FEATURES.items():
        assert key == f"{f.addon}:{f.setting}" and f.addon in EKS_ADDONS, key
        assert f.setting.startswith((CONFIGURATION, "behaviour:")) or f.setting == POD_IDENTITY, key
        assert _well_formed(f.ranges), key
        assert f.sources and all(s in SOURCES for s in f.sources), key
        assert f.what, key


def test_every_dcgm_table_knows_every_nvidia_type_of_the_catalog() -> None:
    """A GPU type added to the catalog needs its line here: without it no rule can tell whether the add-on's DCGM
    DaemonSet runs on it (and a version missing it publishes no GPU metrics, or watches no GPU health)."""
    for addon, c in DCGM_INSTANCE_TYPES.items():
        assert c.addon == addon and addon in EKS_ADDONS
        missing, extra = (
            sorted(set(NVIDIA_TYPES) - set(c.instance_types)),
            sorted(set(c.instance_types) - set(NVIDIA_TYPES)),
        )
        assert not missing and not extra, (
            f"{addon}: DCGM_INSTANCE_TYPES (components/catalog/addons.py) misses {missing} and names {extra}, which "
            "the catalog's NVIDIA types do not: give each type its line (the add-on versions whose DCGM DaemonSet runs "
            "on it)"
        )
        assert all(_well_formed(r) for r in c.instance_types.values()), addon
        assert c.sources and all(s in SOURCES for s in c.sources)


def test_every_pin_is_an_eks_version_of_a_supported_minor_with_a_source() -> None:
    for addon, pins in ADDON_VERSIONS.items():
        assert addon in EKS_ADDONS, addon
        for minor, pin in pins.items():
            assert minor in KUBERNETES_VERSIONS, (addon, minor)
            assert ADDON_VERSION_RE.match(pin.version), (addon, minor, pin.version)
            assert pin.sources and all(s in SOURCES for s in pin.sources), (addon, minor)
            for s in pin.sources:
                assert pin.version in SOURCES[s].shows and minor in SOURCES[s].shows, (addon, minor, s)


def test_the_pins_of_one_minor_step_addons_move_one_minor_with_kubernetes() -> None:
    """A cluster moving one Kubernetes minor moves such an add-on from one pin to the next: EKS takes one add-on minor
    at a time (:data:`ONE_MINOR_STEP_ADDONS`, with its source)."""
    for addon, source in ONE_MINOR_STEP_ADDONS.items():
        assert source in SOURCES and addon in EKS_ADDONS
        pins = ADDON_VERSIONS.get(addon, {})
        minors = [m for m in KUBERNETES_VERSIONS if m in pins]
        for a, b in zip(minors, minors[1:]):
            was, will = addon_version_tuple(pins[a].version), addon_version_tuple(pins[b].version)
            assert was and will and was[0] == will[0] and 0 <= will[1] - was[1] <= 1, (addon, a, b)


def test_every_pin_has_every_feature_and_runs_dcgm_on_every_nvidia_type() -> None:
    """A pin never makes the stack's rules refuse a preset: it has every setting the program passes its add-on and
    runs its DCGM DaemonSet on every NVIDIA type of the catalog."""
    for addon, pins in ADDON_VERSIONS.items():
        for minor, pin in pins.items():
            assert missing_features(addon, pin.version, [f.setting for f in features_of(addon)]) == [], (addon, minor)
            coverage = DCGM_INSTANCE_TYPES.get(addon)
            if coverage is not None:
                assert [t for t in NVIDIA_TYPES if not coverage.covers(t, pin.version)] == [], (addon, minor)


def test_the_p6_b200_coverage_of_the_issue() -> None:
    """The CloudWatch add-on's DCGM exporter lists p6-b200 from 4.8.0, on the 5.x line only from 5.3.0; the node
    monitoring agent's DCGM host engine from 1.4.3."""
    cw = DCGM_INSTANCE_TYPES["amazon-cloudwatch-observability"]
    yes = ["v4.8.0-eksbuild.1", "v4.10.3-eksbuild.1", "v5.3.0-eksbuild.1", "v6.4.0-eksbuild.1"]
    no = ["v4.7.0-eksbuild.1", "v5.0.0-eksbuild.1", "v5.2.3-eksbuild.1"]
    assert [cw.covers("p6-b200.48xlarge", v) for v in yes + no] == [True] * len(yes) + [False] * len(no)
    assert cw.covers("p5.48xlarge", "v5.2.3-eksbuild.1") is True
    assert cw.covers("x9.metal", "v5.3.0-eksbuild.1") is None
    nma = DCGM_INSTANCE_TYPES["eks-node-monitoring-agent"]
    assert nma.covers("p6-b200.48xlarge", "v1.4.2-eksbuild.1") is False
    assert nma.covers("p6-b200.48xlarge", "v1.4.3-eksbuild.2") is True
    assert ranges_text(cw.instance_types["p6-b200.48xlarge"]) == (
        "v4.8.0 up to (not including) v5.0.0, or v5.3.0 or later"
    )


def test_the_stack_override_wins_then_the_pin_then_eks() -> None:
    assert addon_version_for("vpc-cni", "1.35", {}) == "v1.21.1-eksbuild.1"
    assert addon_version_for("vpc-cni", "1.35", {"vpc-cni": "v1.20.0-eksbuild.1"}) == "v1.20.0-eksbuild.1"
    assert addon_version_for("eks-node-monitoring-agent", "1.35", {}) is None
    assert addon_version_for("eks-node-monitoring-agent", "1.35", {"vpc-cni": "v1.20.0-eksbuild.1"}) is None


def test_configuration_keys_map_to_their_features() -> None:
    assert configuration_settings("eks-node-monitoring-agent", {"dcgmAgent": {"tolerations": []}}) == {
        CONFIGURATION + "dcgmAgent.tolerations"
    }
    assert configuration_settings(
        "amazon-cloudwatch-observability", {"tolerations": [], "agent": {"config": {"logs": {"a": 1}}}}
    ) == {CONFIGURATION + "tolerations", CONFIGURATION + "agent.config"}
    for addon, values in (
        ("vpc-cni", {"env": {"ENABLE_PREFIX_DELEGATION": "true"}}),
        ("eks-node-monitoring-agent", {"dcgmAgent": {"resources": {}}}),
        ("amazon-cloudwatch-observability", {"agent": {"mode": "daemonset"}}),
    ):
        with pytest.raises(KeyError, match="has no version fact"):
            configuration_settings(addon, values)


def test_a_known_version_without_a_setting_is_refused_and_eks_default_is_left_to_the_account() -> None:
    settings = [CONFIGURATION + "dcgmAgent.tolerations"]
    with pytest.raises(ValueError, match=r"eks-node-monitoring-agent v1.2.0-eksbuild.1 lacks dcgmAgent.tolerations"):
        require_version("eks-node-monitoring-agent", "v1.2.0-eksbuild.1", settings)
    require_version("eks-node-monitoring-agent", "v1.3.0-eksbuild.2", settings)
    require_version("eks-node-monitoring-agent", None, settings)
    assert not in_ranges("latest", [VersionRange((0, 0, 0))])
