"""A jobs-only stack: a team's jobs on a cluster another stack made (``cluster.stackReference``, ``cluster.team``).

Several people share one cluster without sharing one Pulumi stack: the cluster stack (with ``teams``) makes the
cluster, Kueue, the MPI Operator and per team a namespace, a claim and a LocalQueue (:mod:`stacks.teams`); each team's
stack takes it by a ``pulumi.StackReference`` and registers only its own jobs, into its team's namespace and queue,
with the Kubernetes provider made from the referenced stack's ``kubeconfig`` output. It registers no cluster, VPC,
node group, Kueue or MPI Operator.

Offline (``pulumi preview``, ``python -m stacks.plan``) the stack's own config is validated as any stack's (its jobs
against its ``nodeGroups``, a copy of the cluster stack's: the jobs' placement is derived from them). What only the
referenced stack knows is checked at deploy, when its outputs are read: that ``cluster.team`` is one of its teams, and
that the node groups the jobs run on have the instance types, maxSize, labels and taints the cluster's have; a
mismatch fails the deployment naming the key and the fix (:class:`JobsOnlyError`) before any job is created (every
job waits for the checked namespace).
"""

from typing import Any, Mapping

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import with_token_credentials
from components.kubernetes_provider import warn_if_delete_unreachable_set
from stacks.config.errors import key
from stacks.environment import token_credentials
from stacks.last_update import CLUSTER_NAME_OUTPUT, CONFIG_OUTPUT, REGION_OUTPUT, configuration_output
from stacks.outputs import jobs_outputs, placement_of
from stacks.plan import Plan
from stacks.plan.admission import flavor_name, launcher_beyond_team
from stacks.workloads import JobTarget, build_jobs


class JobsOnlyError(Exception):
    """The referenced stack does not have what this stack's config says (raised at deploy)."""


def team_of(
    plan: Plan,
    reference: str,
    team: str,
    teams: Mapping[str, Any],
    groups: Mapping[str, Any],
    region: Any = None,
    own_region: Any = None,
) -> dict[str, Any]:
    """``team``'s entry of the referenced stack's ``teams`` output, after checking the node groups of the jobs and
    that this stack deploys in the cluster's region (its jobs' roles and Pod Identity associations name the cluster
    there; the kubeconfig alone would reach it from anywhere)."""
    if region is not None and own_region is not None and region != own_region:
        raise JobsOnlyError(
            f"aws:region: {own_region!r} is not the region of the referenced stack {reference}'s cluster ({region!r}): "
            f"the jobs' Pod Identity associations are made in the cluster's region; set aws:region to {region}"
        )
    if not teams or team not in teams:
        known = ", ".join(sorted(teams or {})) or "none: it has no teams"
        raise JobsOnlyError(
            f"{key('cluster.team')}: {team!r} is not a team of the referenced stack {reference} (its teams: {known}); "
            f"set one of them, or add it to that stack's eks-training:teams and update it first"
        )
    mine = placement_of(plan)
    problems = []
    for name in sorted({j.group.name for j in plan.jobs.values()}):
        theirs = (groups or {}).get(name)
        path = plan.group(name).path
        if theirs is None:
            problems.append(
                f"{key(path)}: the referenced stack {reference} has no node group {name!r} (its groups: "
                f"{', '.join(sorted(groups or {}))}); copy its nodeGroups"
            )
        elif dict(theirs) != mine[name]:
            problems.append(
                f"{key(path)}: differs from the referenced stack {reference}'s group ({dict(theirs)} there, "
                f"{mine[name]} here): the jobs would be placed for another fleet; copy its nodeGroups"
            )
    entry = dict(teams[team])
    if entry.get("mayBorrow") is False:
        # Kueue admits a team that may not borrow only within its own quota: a job larger waits for ever
        own = entry.get("nodes") or {}
        for name, job in sorted(plan.jobs.items()):
            have = int(own.get(flavor_name(job.group.name), 0))
            if job.max_nodes > have:
                problems.append(
                    f"{key(f'jobs.{name}.nodes')}: the job needs up to {job.max_nodes} node(s) of "
                    f"{job.group.name}; team {team} may not borrow and its quota there is {have} node(s) (the "
                    f"referenced stack {reference}'s teams.{team}): Kueue would never admit it; lower nodes/maxNodes, "
                    f"or raise the team's quotaPercent or set mayBorrow there"
                )
        # an MPI job's launcher is admitted against the team's quota on the system group
        if "quota" not in entry:
            problems.append(
                f"{key('cluster.stackReference')}: the referenced stack {reference}'s teams output has no "
                f"quota (an older version of this program made it): update that stack first"
            )
        else:
            problems += launcher_beyond_team(
                plan, team, entry["quota"], f"the referenced stack {reference}'s teams.{team}"
            )
    if problems:
        raise JobsOnlyError("\n".join(problems))
    return entry


def build_jobs_only(plan: Plan, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Register the jobs of ``plan`` on the referenced cluster stack's team queue; returns the stack's outputs.

    Outputs:

    - ``clusterStack``: the cluster stack it runs on (``cluster.stackReference``).
    - ``team``: its team (``cluster.team``).
    - ``namespace``: the team's namespace, where its jobs run.
    - ``localQueue``: the team's Kueue LocalQueue, which queues its jobs.
    - ``imageUris``: each image the jobs run, by name, pinned by digest.
    - ``imageBuildLogLinks``: each image build's CodeBuild log, by name.
    - ``jobs``: one entry per job, as a cluster stack's ``jobs`` output.
    - ``tensorboardCommand``: ``kubectl port-forward`` to TensorBoard (when a job sets ``tensorboard``).
    - ``deployedConfiguration``: the configuration this update was given (``settings``, as a cluster stack records
      it, with no minor), a secret, recorded once the other outputs are: the next ``pulumi up`` reads it back to say
      what it changes (:mod:`stacks.last_update`), as a cluster stack does, whichever of the two the stack then is.
    """
    cfg = plan.config
    reference, team = cfg.cluster.stack_reference, cfg.cluster.team
    assert reference is not None and team is not None  # the config rules
    ref = pulumi.StackReference(f"{cfg.cluster_name}-cluster", stack_name=reference)

    own_region = cfg.region
    credentials = token_credentials(cfg.aws)

    def check(values: list[Any]) -> dict[str, Any]:
        return team_of(plan, reference, team, values[0], values[1], values[2], own_region)

    mine = pulumi.Output.all(
        ref.get_output("teams"), ref.get_output("nodeGroupPlacement"), ref.get_output(REGION_OUTPUT)
    ).apply(check)
    provider = k8s.Provider(
        f"{cfg.cluster_name}-k8s",
        # signed as this stack's AWS provider signs (its profile, its one role), not as the cluster stack's deployer
        kubeconfig=ref.require_output("kubeconfig").apply(lambda k: with_token_credentials(str(k), *credentials)),
        enable_server_side_apply=True,
        # no delete_unreachable, as the cluster stack's provider (stacks/environment.py)
    )
    warn_if_delete_unreachable_set(provider)
    namespace = mine.apply(lambda t: str(t["namespace"]))
    target = JobTarget(
        plan=plan,
        k8s_opts=pulumi.ResourceOptions(provider=provider),
        namespace=namespace,
        pvc_name=mine.apply(lambda t: str(t["pvcName"])),
        data_ready=namespace,  # EFS (the only backend with teams): the data can be read at once
        cluster_name=ref.require_output(CLUSTER_NAME_OUTPUT).apply(str),
        local_queue=mine.apply(lambda t: str(t["localQueue"])),
    )
    w = build_jobs(target)
    outputs: dict[str, Any] = {
        "clusterStack": reference,
        "team": team,
        "namespace": namespace,
        "localQueue": target.local_queue,
        "imageUris": w.image_uris,
        "imageBuildLogLinks": {k: img.build_log_link for k, img in w.images.items()},
        "jobs": jobs_outputs(plan, w, namespace, target.pvc_name),
        **({"tensorboardCommand": w.tensorboard.port_forward_command} if w.tensorboard is not None else {}),
    }
    outputs[CONFIG_OUTPUT] = configuration_output(settings, None, list(outputs.values()))
    return outputs
