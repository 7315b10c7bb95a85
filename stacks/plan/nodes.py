"""How a node group's nodes are kept and replaced: the EKS AMI release they run, and what a roll may stop.

The release: the group's ``amiRelease``, else ``cluster.amiRelease``, pinned (a change rolls the nodes); neither set,
a new group starts on the newest release this project knows and keeps the release it has (Pulumi ignores later
changes of the default), so updating the project never rolls nodes.

A roll (a new release, a Kubernetes minor, a launch template change): EKS drains the group one node at a time through
the eviction API, which honours PodDisruptionBudgets, and gives a pod 15 minutes to leave before the update fails
(PodEvictionFailure; the update is never forced here), source key ``eks-managed-node-update``. Each job gets a budget
over its pods on its group: ``rolling`` keeps all but one (one pod of a job stopped at a time, with SIGTERM and its
grace period; an elastic job keeps its ``minNodes``, fewer when it has fewer pods, so pods that never got a node do
not hold the roll), ``whenIdle`` keeps all (EKS cannot drain a node while a job runs on it: the update fails after 15
minutes and the next ``pulumi up`` after the jobs retries it). Kubernetes counts a Job's pods for an integer
``minAvailable`` only (``maxUnavailable`` needs a controller with a scale subresource, which a Job lacks:
https://kubernetes.io/docs/tasks/run-application/configure-pdb/#arbitrary-controllers-and-selectors).
"""

from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog.amis import NEWEST_AMI_RELEASE, release_of, release_version
from stacks.config.cluster import ClusterConfig
from stacks.plan.record import recorded_entry

#: How the record (the output ``deployedVersions``) names the AMI release a group runs, as EKS reported it at the end
#: of the update: ``<the group's config path>.releaseVersion``.
RELEASE_SUFFIX = ".releaseVersion"


@dataclass(frozen=True)
class AmiPlan:
    """The AMI release of one node group."""

    release_version: str
    """The ``releaseVersion`` the program sends: the pinned one, else the newest known for the minor."""
    pinned: bool
    """Set by ``amiRelease`` (a change rolls the nodes); else the group keeps the release it has once created."""
    release: Optional[str] = None
    """The catalogued release tag of :attr:`release_version` (``None``: a release version the catalog lacks)."""
    nvidia_driver: Optional[tuple[int, int, int]] = None
    """The NVIDIA driver of the catalogued release's NVIDIA AMI."""


def ami_plan(cluster: ClusterConfig, own: Optional[str]) -> AmiPlan:
    """The release of a group whose own ``amiRelease`` is ``own``, in a cluster configured as ``cluster`` (the config
    rules have refused a release without a version for the cluster's minor)."""
    release = own if own is not None else cluster.ami_release
    version = release_version(release, cluster.kubernetes_version)
    if version is None:  # refused by the config rules; keep the plan total
        version = release_version(NEWEST_AMI_RELEASE, cluster.kubernetes_version) or ""
    found = release_of(version)
    return AmiPlan(
        release_version=version,
        pinned=release is not None,
        release=found.tag if found else None,
        nvidia_driver=found.nvidia_driver if found else None,
    )


def recorded_release(recorded: Optional[Mapping[str, object]], path: str) -> Optional[str]:
    """The AMI release the last update's record says the group at config ``path`` ran (:data:`RELEASE_SUFFIX`);
    ``None`` where it holds none (an update by an earlier version of this project)."""
    return recorded_entry(recorded, path + RELEASE_SUFFIX)


def min_available(strategy: str, pods: int, min_pods: int) -> int:
    """The ``minAvailable`` of a job's PodDisruptionBudget over ``pods`` pods on a group rolled by ``strategy``, for a
    job that keeps training with ``min_pods`` of them (an elastic job's ``minNodes``; else ``pods``)."""
    return pods if strategy == "whenIdle" else max(0, min(pods - 1, min_pods))
