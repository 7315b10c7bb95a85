"""Which images the program pulls onto which nodes ahead of the pods that run them
(:class:`components.workloads.prepull.ImagePrePull`; why and how: docs/explanation/pulumi-up.md).

For every job the stack creates now: its image on its group (when :meth:`stacks.kinds.JobKind.noop_command` names a
no-op for it), the toolbox on its group where its health check or its code download runs (a wait for other jobs hides
its own pull), and on the system group for a dataset's staging. Only groups
with nodes at creation and a root volume of at least :data:`MIN_DISK_GIB`; never an MPI launcher's image on the
system group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from components.scheduling import SYSTEM_ROLE, Toleration, system_node_selector
from stacks.config import TOOLBOX_IMAGE
from stacks.kinds import KINDS

if TYPE_CHECKING:
    from stacks.plan import NodeGroupPlan, Plan

#: The toolbox (the bundled image: staging, health checks, the jobs' helper containers) runs its helpers with
#: ``python`` (training/Dockerfile puts the virtual environment's first on PATH).
TOOLBOX_NOOP: tuple[str, ...] = ("python", "-c", "")


@dataclass(frozen=True, kw_only=True)
class PrePull:
    """One image pulled onto one node group's nodes ahead of its pods."""

    group: str
    """The node group (``system`` for the system group)."""
    image: str
    """The image's variant (a key of the program's image references: ``training``, ``training-cu126``...)."""
    command: tuple[str, ...]
    """The no-op the image runs once pulled."""
    node_selector: Mapping[str, str]
    """The labels the pods that need it select the group's nodes by."""
    tolerations: tuple[Toleration, ...]
    """The tolerations of those pods (the group's taints)."""
    needed_by: tuple[str, ...]
    """What runs the image there: ``job train``, ``health check of train``, ``staging of cifar10``."""

    @property
    def name(self) -> str:
        """The pre-pull's own name: group and variant."""
        return f"{self.group}-{self.image}"


#: The smallest root volume a pre-pull keeps images on (as large as the system nodes' default disk). The pods keep
#: their images there for the stack's life (the kubelet does not collect an image an exited container used), a
#: training image is ~10 GB unpacked, and a smaller disk would reach the kubelet's eviction threshold.
MIN_DISK_GIB = 50


def _has_room(group: "NodeGroupPlan") -> bool:
    """Nodes at creation (a group that scales from zero gets its nodes for the job itself) with disk to spare."""
    return group.desired_size > 0 and group.disk_size_gib >= MIN_DISK_GIB


def prepulls(plan: "Plan", deferred: Iterable[str] = ()) -> list[PrePull]:
    """The stack's pre-pulls, one per (group, image variant), in job order; ``deferred`` are jobs the program does not
    create now (their group's Capacity Block has not started), whose images are not pulled either."""
    skip = set(deferred)
    wanted: dict[tuple[str, str], tuple[tuple[str, ...], Mapping[str, str], tuple[Toleration, ...], list[str]]] = {}

    def want(group: "NodeGroupPlan", variant: str, command: Sequence[str], why: str) -> None:
        if not command or not _has_room(group):
            return
        if group.name == SYSTEM_ROLE:
            selector: Mapping[str, str] = system_node_selector()
            tolerations: tuple[Toleration, ...] = ()
        else:
            placement = group.placement()
            selector, tolerations = dict(placement["node_selector"]), tuple(placement["tolerations"])
        key = (group.name, variant)
        if key not in wanted:
            wanted[key] = (tuple(command), selector, tolerations, [])
        wanted[key][3].append(why)

    for ds_name, ds in plan.datasets.items():
        if not ds.imported:  # the program stages it whether or not its jobs are created now
            want(plan.system, plan.images[TOOLBOX_IMAGE].variant, TOOLBOX_NOOP, f"staging of {ds_name}")
    for job in plan.jobs.values():
        if job.name in skip:
            continue
        if job.health_check is not None:
            want(job.group, job.toolbox.variant, TOOLBOX_NOOP, f"health check of {job.name}")
        if job.config.code:  # the fetch-code init container of its pods (an MPI job's workers too)
            want(job.group, job.toolbox.variant, TOOLBOX_NOOP, f"code download of {job.name}")
        kind = KINDS[job.kind]
        want(job.group, job.image.variant, kind.noop_command(job.config), f"job {job.name}")
    return [
        PrePull(
            group=g,
            image=v,
            command=command,
            node_selector=selector,
            tolerations=tolerations,
            needed_by=tuple(why),
        )
        for (g, v), (command, selector, tolerations, why) in wanted.items()
    ]
