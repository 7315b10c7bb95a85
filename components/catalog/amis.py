"""EKS AMI releases: the node image a managed node group runs, per Kubernetes minor, and the NVIDIA driver it has.

EKS publishes an AL2023 AMI release every few weeks (awslabs/amazon-eks-ami, one GitHub release per tag, whose notes
list the release version of each Kubernetes minor and the packages of each AMI type). A managed node group runs one
release version (``releaseVersion``, ``<kubelet version>-<date>``); changing it rolls the group's nodes
(https://docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html). The stack pins one of the releases
below (``cluster.amiRelease``, ``nodeGroups.<g>.amiRelease``); unset, a new group starts on :data:`NEWEST_AMI_RELEASE`
and keeps the release it has when this table moves on.
"""

import re
from dataclasses import dataclass
from datetime import date
from typing import Mapping, Optional


@dataclass(frozen=True, kw_only=True)
class AmiRelease:
    """One release of the EKS-optimized AL2023 AMIs (the standard and NVIDIA types share its release versions)."""

    tag: str
    """The release's tag, ``vYYYYMMDD``."""
    released: date
    versions: Mapping[str, str]
    """Kubernetes minor -> the release version of that minor's AMIs (``releaseVersion``)."""
    nvidia_driver: tuple[int, int, int]
    """The NVIDIA driver of its AL2023_x86_64_NVIDIA AMIs (``kmod-nvidia-latest-dkms``)."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""


def _release(tag: str, versions: Mapping[str, str], driver: tuple[int, int, int]) -> AmiRelease:
    day = date(int(tag[1:5]), int(tag[5:7]), int(tag[7:9]))
    return AmiRelease(tag=tag, released=day, versions=versions, nvidia_driver=driver, source=f"eks-ami-{tag}")


def _versions(tag: str, patches: Mapping[str, int]) -> dict[str, str]:
    return {minor: f"{minor}.{patch}-{tag[1:]}" for minor, patch in patches.items()}


#: Releases of the EKS AL2023 AMIs for the Kubernetes minors this project supports, oldest first (each from its
#: release notes: source keys ``eks-ami-v20260610``, ``eks-ami-v20260618``, ``eks-ami-v20260625``,
#: ``eks-ami-v20260714``). All four ship NVIDIA driver 580.159.03, which runs CUDA 13.0 (the training image's torch).
#: Releases from v20260917 carry two drivers and load one per instance type at first boot (source key
#: ``eks-ami-two-drivers``): their rows need the driver per GPU model before they go here, since the 580 series is the
#: last for p3's V100 (:func:`components.catalog.gpus.last_driver_branch`).
AMI_RELEASES: Mapping[str, AmiRelease] = {
    r.tag: r
    for r in (
        _release(
            "v20260610",
            _versions("v20260610", {"1.32": 13, "1.33": 12, "1.34": 8, "1.35": 5, "1.36": 1}),
            (580, 159, 3),
        ),
        _release(
            "v20260618",
            _versions("v20260618", {"1.32": 13, "1.33": 13, "1.34": 9, "1.35": 6, "1.36": 2}),
            (580, 159, 3),
        ),
        _release(
            "v20260625",
            _versions("v20260625", {"1.32": 13, "1.33": 13, "1.34": 9, "1.35": 6, "1.36": 2}),
            (580, 159, 3),
        ),
        _release(
            "v20260714",
            _versions("v20260714", {"1.32": 13, "1.33": 13, "1.34": 9, "1.35": 6, "1.36": 2}),
            (580, 159, 3),
        ),
    )
}
#: What a new node group gets when the stack pins no release: the newest release above.
NEWEST_AMI_RELEASE = list(AMI_RELEASES)[-1]

#: A release tag, and a release version (``1.36.2-20260714``).
RELEASE_TAG_RE = re.compile(r"^v\d{8}$")
RELEASE_VERSION_RE = re.compile(r"^(?P<minor>1\.\d+)\.\d+-(?P<date>\d{8})$")


def release_version(release: Optional[str], minor: str) -> Optional[str]:
    """The ``releaseVersion`` of ``release`` (a tag of :data:`AMI_RELEASES`, or a release version itself) for the
    Kubernetes ``minor``, or ``None`` when there is none (an unknown tag, a tag without that minor, a release version
    of another minor). Unset: :data:`NEWEST_AMI_RELEASE`'s."""
    if release is None:
        release = NEWEST_AMI_RELEASE
    if RELEASE_TAG_RE.match(release):
        found = AMI_RELEASES.get(release)
        return found.versions.get(minor) if found else None
    m = RELEASE_VERSION_RE.match(release)
    return release if m and m.group("minor") == minor else None


def release_of(version: str) -> Optional[AmiRelease]:
    """The catalogued release a release version belongs to (by its date), or ``None``."""
    m = RELEASE_VERSION_RE.match(version)
    return AMI_RELEASES.get(f"v{m.group('date')}") if m else None


def ami_release_problem(v: Optional[str]) -> Optional[str]:
    """Why ``v`` is neither an EKS AMI release tag (vYYYYMMDD) nor a release version (1.36.2-20260714)."""
    if v is None or RELEASE_TAG_RE.match(v) or RELEASE_VERSION_RE.match(v):
        return None
    return (
        f"{v!r} is not an EKS AMI release: give a release tag such as {NEWEST_AMI_RELEASE} (components/catalog/"
        "amis.py lists them) or a release version such as 1.36.2-20260714"
    )
