"""The EKS AMI releases of the catalog (components/catalog/amis.py): every supported Kubernetes minor in each, versions
of the right minor and date, a driver every torch build runs on; and how a stack's setting resolves."""

import pytest

from components.catalog.amis import (
    AMI_RELEASES,
    NEWEST_AMI_RELEASE,
    RELEASE_VERSION_RE,
    ami_release_problem,
    release_of,
    release_version,
)
from components.catalog.gpus import GPU_MODELS, last_driver_branch
from components.catalog.platform import SUPPORTED_KUBERNETES_VERSIONS
from components.catalog.sources import SOURCES
from components.catalog.torch import TORCH_BUILDS


def test_every_release_covers_every_supported_minor_with_its_own_versions() -> None:
    for tag, r in AMI_RELEASES.items():
        assert set(r.versions) == set(SUPPORTED_KUBERNETES_VERSIONS), tag
        for minor, version in r.versions.items():
            m = RELEASE_VERSION_RE.match(version)
            assert m and m.group("minor") == minor and m.group("date") == tag[1:], (tag, version)
            assert version in SOURCES[r.source].shows, (tag, version)
        assert r.released.strftime("v%Y%m%d") == tag


def test_the_newest_release_is_the_latest_and_releases_are_in_order() -> None:
    days = [r.released for r in AMI_RELEASES.values()]
    assert days == sorted(days) and AMI_RELEASES[NEWEST_AMI_RELEASE].released == max(days)


def test_every_release_runs_every_torch_build() -> None:
    """The NVIDIA AMIs' driver runs the CUDA of every build the training image installs (CUDA 13 needs 580)."""
    for r in AMI_RELEASES.values():
        for b in TORCH_BUILDS.values():
            assert r.nvidia_driver >= b.min_driver, (r.tag, b.name)


@pytest.mark.parametrize(
    ("release", "minor", "expected"),
    [
        (None, "1.36", AMI_RELEASES[NEWEST_AMI_RELEASE].versions["1.36"]),
        ("v20260625", "1.35", "1.35.6-20260625"),
        ("v20260610", "1.36", "1.36.1-20260610"),
        ("1.36.3-20260801", "1.36", "1.36.3-20260801"),  # a release the catalog does not know yet
        ("1.35.6-20260714", "1.36", None),  # another minor's
        ("v20990101", "1.36", None),  # unknown tag
    ],
)
def test_release_version_resolution(release: str | None, minor: str, expected: str | None) -> None:
    assert release_version(release, minor) == expected


def test_release_of_finds_the_catalogued_release_by_date() -> None:
    assert release_of("1.34.9-20260714") is AMI_RELEASES["v20260714"]
    assert release_of("1.36.3-20260801") is None


@pytest.mark.parametrize("bad", ["latest", "20260714", "v2026-07-14", "1.36", "1.36.2"])
def test_a_release_that_is_neither_a_tag_nor_a_version_is_refused(bad: str) -> None:
    why = ami_release_problem(bad)
    assert why is not None and "release tag such as" in why
    assert ami_release_problem("v20260714") is None and ami_release_problem("1.36.2-20260714") is None


def test_a_release_whose_driver_is_older_than_the_groups_torch_build_needs_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rule over a stack's groups (stacks/config/amis.py) compares the release's NVIDIA driver with the CUDA of
    the build each GPU group's image installs: a release of 12.x drivers cannot run the CUDA 13.0 build (H100) but
    runs the CUDA 12.6 build (V100); a CPU group has no driver to check."""
    import stacks.config.amis as rule
    from components.catalog.amis import AmiRelease
    from components.catalog.instances import Catalog
    from stacks.config.cluster import ClusterConfig

    old = AmiRelease(
        tag="v20260714",
        released=AMI_RELEASES["v20260714"].released,
        versions=AMI_RELEASES["v20260714"].versions,
        nvidia_driver=(570, 1, 1),
        source="eks-ami-v20260714",
    )
    monkeypatch.setattr(rule, "release_of", lambda v: old)
    cluster = ClusterConfig.model_validate({"kubernetesVersion": "1.36", "amiRelease": "v20260714"})
    groups: list[tuple[str, str | None, list[str]]] = [
        ("nodeGroups.h100", None, ["p5.48xlarge"]),
        ("nodeGroups.v100", None, ["p3.2xlarge"]),
        ("systemNodeGroup", None, ["m5.large"]),
    ]
    problems = rule.ami_release_problems(cluster, groups, Catalog.builtin())
    assert problems == [
        "eks-training:cluster.amiRelease: release v20260714 ships NVIDIA driver 570.1.01, older than the 580 the "
        "training image's CUDA 13.0 needs on nodeGroups.h100; pin a newer release"
    ], problems


def test_every_release_drives_every_gpu_model() -> None:
    """A release models one NVIDIA driver for every GPU group, so that driver's branch must still support each GPU
    model the catalog names: a release whose branch dropped one (the 580 series is the last for Volta) needs the
    driver per GPU model first (the comment above AMI_RELEASES says why)."""
    for r in AMI_RELEASES.values():
        for model in GPU_MODELS.values():
            last = last_driver_branch(model.compute_capability)
            assert last is None or r.nvidia_driver[0] <= last, (r.tag, model.name, last)


def test_the_last_driver_branch_of_each_architecture() -> None:
    assert last_driver_branch(GPU_MODELS["NVIDIA V100"].compute_capability) == 580
    assert last_driver_branch(GPU_MODELS["NVIDIA T4"].compute_capability) is None
    assert last_driver_branch((6, 0)) == 580 and last_driver_branch((10, 0)) is None
