"""Config rule: the EKS AMI release each node group runs exists for the cluster's Kubernetes minor, and the NVIDIA
driver of a catalogued release runs the CUDA of the torch build the group's GPUs get."""

from typing import Optional

from components.catalog.amis import AMI_RELEASES, RELEASE_TAG_RE, release_of, release_version
from components.catalog.gpus import compute_capability
from components.catalog.instances import Catalog
from components.catalog.torch import torch_build_for
from stacks.config.cluster import ClusterConfig
from stacks.config.errors import key


def _dotted(v: tuple[int, int, int]) -> str:
    """A driver version as NVIDIA writes it (580.159.03), a branch alone as its number (580)."""
    if v[1:] == (0, 0):
        return str(v[0])
    return ".".join(f"{n:02d}" if i == 2 else str(n) for i, n in enumerate(v))


def ami_release_problems(
    cluster: ClusterConfig,
    groups: list[tuple[str, Optional[str], list[str]]],
    catalog: Catalog,
) -> list[str]:
    """What is wrong with each group's AMI release: ``groups`` are (config path of the group, its own amiRelease, its
    instance types); a group without its own takes ``cluster.amiRelease``."""
    minor = cluster.kubernetes_version
    problems: list[str] = []
    reported: set[str] = set()
    for path, own, types in groups:
        release = own if own is not None else cluster.ami_release
        where = f"{path}.amiRelease" if own is not None else "cluster.amiRelease"
        if release is None:
            continue
        version = release_version(release, minor)
        if version is None and where not in reported:
            reported.add(where)
            having = [t for t, r in AMI_RELEASES.items() if minor in r.versions]
            if RELEASE_TAG_RE.match(release) and release not in AMI_RELEASES:
                why = f"{release} is not a release this project knows (components/catalog/amis.py)"
            elif RELEASE_TAG_RE.match(release):
                why = f"release {release} has no AMIs for Kubernetes {minor}"
            else:
                why = f"{release} is a release version of Kubernetes {release.rsplit('.', 1)[0]}, not of {minor}"
            problems.append(
                f"{key(where)}: {why}; use one of {', '.join(having)} (Kubernetes {minor}: "
                f"{', '.join(AMI_RELEASES[t].versions[minor] for t in having)}), or a release version of {minor}"
            )
            continue
        found = release_of(version) if version else None
        if found is None:
            continue  # a release newer than the catalog: EKS checks it when the group is updated
        if found.versions.get(minor) != version and where not in reported:
            reported.add(where)
            problems.append(
                f"{key(where)}: {version} is not in release {found.tag}, whose Kubernetes {minor} AMIs are "
                f"{found.versions.get(minor)}; use that release version or the tag {found.tag}"
            )
            continue
        capabilities = [
            cc
            for t in types
            if (f := catalog.get(t)) is not None and f.is_gpu and (cc := compute_capability(f.gpu_model)) is not None
        ]
        build = torch_build_for(capabilities) if capabilities else None
        if build is not None and found.nvidia_driver < build.min_driver:
            problems.append(
                f"{key(where)}: release {found.tag} ships NVIDIA driver {_dotted(found.nvidia_driver)}, older than the "
                f"{_dotted(build.min_driver)} the training image's CUDA {build.cuda} needs on {path}; pin a newer "
                "release"
            )
    return problems
