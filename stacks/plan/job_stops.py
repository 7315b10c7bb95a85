"""The running jobs a node group's roll or deletion stops (:class:`JobStop`), and what that does to each, as its kind
says; :mod:`stacks.plan.group_changes` asks it for each group that rolls or goes."""

from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog.platform import (
    EVICTION_LIMIT_MINUTES,
    NODE_SHUTDOWN_GRACE_S,
    NODEGROUP_LABEL,
    node_shutdown_grace_s,
)
from components.catalog.timings import NODE_SURGE
from stacks.config import key
from stacks.kinds import KINDS
from stacks.plan import Plan
from stacks.plan.admission import group_network
from stacks.plan.minors import kubelet_minor
from stacks.plan.queues import PODS_READY_TIMEOUT_S


@dataclass(frozen=True)
class JobStop:
    """A running job (of the old configuration) on a group that rolls or goes."""

    name: str
    group: str
    pods: int
    strategy: str
    """The ``updateStrategy`` the roll runs under: the new configuration's, or the old one's beside a system group
    update, after which the budgets change (:func:`~stacks.plan.upgrade.compare`); ``rolling`` or ``whenIdle``;
    ``delete`` for a group that goes; ``shrink`` for a group made smaller (nodes terminated, budgets or not)."""
    keeps: int
    """Of its pods, how many its PodDisruptionBudget keeps through the roll."""
    surge: bool = True
    """EKS launches a node's replacement before the node goes (``DEFAULT``); else (``MINIMAL``) after it."""
    effect: str = ""
    """What a stopped pod does to the running job beyond the stop, as its kind says (:meth:`JobKind.node_stop`)."""
    failures: int = 0
    """The failures the roll charges to the job's retries (:meth:`JobKind.roll_failures`)."""
    limit: int = 0
    """The failures the job tolerates (:meth:`JobKind.failure_limit`)."""
    launcher: bool = False
    """The job's launcher pod (an MPI job's, on the system group) is what the roll stops, not its workers."""
    rendezvous: bool = False
    """The job's rendezvous (the stack's etcd, on the system group) is what the roll moves, not its pods."""
    replaced: str = ""
    """Its object (``Job``, ``MPIJob``), when the update replaces it before the group goes
    (:func:`~stacks.plan.job_changes.run_changes`)."""
    topology: bool = False
    """Kueue placed it by topology (its group's flavor names a Topology, :func:`group_network`)."""
    moves_to: str = ""
    """The group its replaced object's pods select now (a group that goes): its pods leave this one when it is
    replaced, not when the group goes."""
    grace_s: int = 0
    """Its pods' grace period after SIGTERM (``stopGracePeriodSeconds``)."""
    shutdown_grace_s: int = NODE_SHUTDOWN_GRACE_S
    """The most its pods get after SIGTERM when their node shuts down (:func:`~stacks.plan.nodes.node_shutdown_grace_s`
    of the kubelet its group's nodes run)."""

    def _past_limit(self) -> str:
        """The clause that says the roll fails the job, when it uses more retries than the job has."""
        if self.failures <= self.limit:
            return ""
        return (
            f"; the roll's {self.failures} failure(s) are more than the {self.limit} it tolerates, so the job fails: "
            f"set the group's updateStrategy to whenIdle, or raise {key(f'jobs.{self.name}.maxRestarts')}"
        )

    def _past_eviction_limit(self) -> str:
        """The clause that says a pod's grace period outlasts the time EKS gives a node's pods to leave it: a pod still
        terminating is still on the node (source key ``eks-managed-node-update``)."""
        if self.grace_s <= EVICTION_LIMIT_MINUTES * 60:
            return ""
        return (
            f"; its stopGracePeriodSeconds ({self.grace_s}) is longer than the {EVICTION_LIMIT_MINUTES} minutes EKS "
            "gives a node's pods to leave it: a pod still stopping may fail the group's update (PodEvictionFailure) "
            f"or have its stop cut short; lower {key(f'jobs.{self.name}.stopGracePeriodSeconds')}, or set the "
            "group's updateStrategy to whenIdle"
        )

    @property
    def what(self) -> str:
        """What the roll does to it, in words."""
        where = "if it runs on a node EKS terminates, " if self.strategy == "shrink" else ""
        if self.rendezvous:
            return (
                f"{where}its rendezvous, etcd, moves to a new system node: all its pods stop with the stop checkpoint "
                "and start again (exit 69, which uses no retry), resuming from it"
            )
        if self.launcher:
            return (
                f"{where}its launcher (mpirun) is stopped once: a new launcher runs the program again from its start "
                "(unless it resumes itself), using one of its maxRestarts" + self._past_limit()
            )
        if self.strategy == "shrink":
            # EKS ignores PodDisruptionBudgets when it lowers the desired size (source key ``eks-scaling-config``)
            stop = (
                f"its pods on the nodes EKS terminates stop (SIGTERM and their grace period), none kept by its "
                f"PodDisruptionBudget; the configuration cannot tell which of its {self.pods} pod(s) run there"
            )
            return f"{stop}; {self.effect}" if self.effect else stop
        if self.strategy == "whenIdle":
            # EKS marks the old nodes unschedulable before it drains one (source key ``eks-managed-node-update``)
            return (
                f"keeps all {self.pods} pod(s): EKS cannot drain its nodes and fails the group's update after "
                f"{EVICTION_LIMIT_MINUTES} minutes; it first marks the old nodes unschedulable, so a pod that starts "
                f"again meanwhile cannot use them; if they still are after the failure, `kubectl uncordon -l "
                f"{NODEGROUP_LABEL}=<the group's EKS name>` lets pods use them; run `pulumi up --refresh` once it is "
                "done"
            )
        stop = (
            f"one pod at a time is stopped (SIGTERM and its grace period), its PodDisruptionBudget keeping "
            f"{self.keeps} of {self.pods} running"
        )
        if self.effect:
            stop += f"; {self.effect}"
        stop += self._past_limit() + self._past_eviction_limit()
        if self.topology:
            # Kueue v0.19.1 evicts a topology-placed job whose failed node it finds no replacement for at once
            # (TASFailedNodeReplacementFailFast, on by default: source key ``kueue-tas-node-failure``)
            if not self.surge:
                return (
                    f"{stop}; Kueue placed the job by topology, and this roll frees no node before the pod stops: "
                    "unless an updated node of the group is free, Kueue stops the whole job and queues it again"
                )
            stop += (
                "; Kueue placed the job by topology: if no updated node of the group is free for a stopped pod at "
                "once, it stops the whole job and queues it again"
            )
        if self.surge:
            return stop
        return (
            f"{stop}; the pod stops before the node that replaces its own is up (EKS terminates a node before "
            f"launching its replacement), so it waits for that node's launch (about {NODE_SURGE.minutes:g} min) "
            f"while EKS drains the next node: a wait past {EVICTION_LIMIT_MINUTES} minutes fails the group's "
            # waitForPodsReady's recoveryTimeout defaults to its timeout (source key ``kueue-recovery-timeout``)
            f"update, and one past {PODS_READY_TIMEOUT_S / 60:g} minutes makes Kueue stop the whole job and queue "
            "it again"
        )


def job_stops(
    old_plan: Plan,
    new_plan: Plan,
    group: str,
    strategy: str,
    surge: bool = True,
    replaced: frozenset[str] = frozenset(),
    *,
    old_budgets: bool = False,
    recorded: Optional[Mapping[str, object]] = None,
) -> tuple[JobStop, ...]:
    """The old configuration's jobs on ``group``, with what the new budget keeps (``old_budgets``: the old one, which
    the roll runs under): those of them that run when it rolls (the configuration cannot tell which) stop as it says.
    ``replaced``: the jobs whose object the update replaces (:func:`~stacks.plan.job_changes.run_changes`), during the
    update, before a group it deletes goes at its end; ``recorded``: the last update's record, whose AMI releases give
    the kubelet a node's shutdown waits with (:func:`~stacks.plan.minors.kubelet_minor`)."""
    out = []
    for name, job in old_plan.jobs.items():
        kind = KINDS[job.kind]
        limit = kind.failure_limit(job.config.max_restarts, job.nodes)
        # etcd and the MPI launchers have no PodDisruptionBudget: a roll of the system group (whenIdle too), its
        # shrink or its deletion moves them
        system_roll = group == old_plan.system.name != job.group.name
        if system_roll and kind.launcher_on_system_group:
            out.append(JobStop(name, group, 1, strategy, keeps=0, surge=surge, failures=1, limit=limit, launcher=True))
        if system_roll and kind.needs_etcd(job.config):  # etcd runs as one pod there (EtcdRendezvous)
            out.append(JobStop(name, group, job.nodes, strategy, keeps=0, surge=surge, limit=limit, rendezvous=True))
        if job.group.name != group:
            continue
        now = new_plan.jobs.get(name)
        if strategy == "delete" and name in replaced and now is not None and now.group.name != group:
            # its new pods select another group: the old group's deletion stops none of them
            kind_of = kind.job_object.kind
            out.append(JobStop(name, group, job.nodes, strategy, 0, replaced=kind_of, moves_to=now.group.path))
            continue
        keeps = 0 if strategy == "shrink" else job.min_available
        if strategy != "shrink" and not old_budgets and now is not None and now.group.name == group:
            keeps = now.min_available
        topology = strategy == "rolling" and group_network(old_plan, job.group) is not None
        out.append(
            JobStop(
                name=name,
                group=group,
                pods=job.nodes,
                strategy=strategy,
                keeps=keeps,
                surge=surge,
                effect=kind.node_stop(job.nodes),
                failures=kind.roll_failures(job.nodes) if strategy == "rolling" else 0,
                limit=limit,
                replaced=kind.job_object.kind if strategy == "delete" and name in replaced else "",
                topology=topology,
                grace_s=job.config.stop_grace_period_seconds,
                shutdown_grace_s=node_shutdown_grace_s(
                    kubelet_minor(job.group, old_plan.config.cluster.kubernetes_version, recorded)
                ),
            )
        )
    return tuple(out)
