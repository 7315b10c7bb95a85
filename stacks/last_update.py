"""What ``pulumi up`` changes since the stack's last update, said before the first change.

Each update that finishes exports the configuration it was given (:data:`CONFIG_OUTPUT`, a secret output), the versions
it installed (:data:`VERSIONS_OUTPUT`), its region (:data:`REGION_OUTPUT`) and the zones its new VPC was made in
(:data:`ZONES_OUTPUT`); a jobs-only stack's, the configuration only (:func:`announce_jobs_only_update` reads it). The
next update reads them back from the stack's own outputs (:func:`read_last_update`). It first refuses a new region,
before AWS is asked anything there (:func:`refuse_new_region`). Then it plans the configuration as ``python -m stacks
plan --from`` does, and prints that summary when nodes roll, the Kubernetes minor moves, add-ons change or a new
version of the project moves what it installs. A move EKS refuses (a skipped minor, a
downgrade, a kubelet outside the skew, new VPC zones), or one only a moved default would make (the stack file leaves the
minor unset, and the record holds the minor deployed), fails before any resource is registered.
"""

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
from pulumi.runtime.config import is_config_secret

from components.catalog.platform import minor_number
from stacks.config import NAMESPACE, ConfigError, load_config
from stacks.config.cluster import support_windows_ignored
from stacks.config.loader import default_cluster_name, quiet
from stacks.config.namespaces import REGION_KEY, setting
from stacks.plan import Plan, build_plan
from stacks.plan.flavor_change import FLAVOR_SUFFIX, spec_record
from stacks.plan.group_changes import desired_within
from stacks.plan.installs import installed_versions, render_moves, version_moves
from stacks.plan.minors import (
    CLUSTER_KEY,
    VERSION_KEY,
    leaves_minor_unset,
    moved_default_problem,
    step_problems,
    unset_minor,
    with_minor,
)
from stacks.plan.network_change import deployed_zone_problems
from stacks.plan.nodes import RELEASE_SUFFIX
from stacks.plan.program import PROGRAM_KEY, program_changed, program_digest
from stacks.plan.region_change import in_region, region_of, region_problem
from stacks.plan.upgrade import Upgrade, compare
from stacks.plan.upgrade_text import PROGRAM_CHANGES, render_upgrade, upgrade_report
from stacks.zones import RegionZones

#: The stack output that holds the configuration an update was given.
CONFIG_OUTPUT = "deployedConfiguration"
#: The stack output that holds the versions an update installed (:func:`stacks.plan.installs.installed_versions`).
VERSIONS_OUTPUT = "deployedVersions"
#: The engine's built-in function that returns a stack's outputs, called synchronously so the answer comes before
#: anything is registered (pulumi/pulumi ``pkg/resource/deploy/builtins.go``, ``readStackReference``).
READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
#: How the summary names the configuration it compares with.
LAST_UPDATE = "the configuration the stack's last finished update recorded"
#: The AWS provider's credentials: never recorded, even as a secret (the plan does not read them).
AWS_CREDENTIALS = frozenset({"aws:accessKey", "aws:secretKey", "aws:token"})
#: The stack output that holds the zone names of the update's new VPC, in its subnets' order (the configuration may
#: leave them to ``availabilityZoneCount``, which the region's zones resolve).
ZONES_OUTPUT = "vpcZones"
#: The stack output that names its EKS cluster: read back by the next update (:func:`deployed_zones`) and by a
#: jobs-only stack that runs its jobs there (:mod:`stacks.jobs_only`).
CLUSTER_NAME_OUTPUT = "clusterName"
#: The stack output that names the region its resources are in: read back by the next update
#: (:func:`refuse_new_region`) and by a team's jobs-only stack (:mod:`stacks.jobs_only`).
REGION_OUTPUT = "region"
#: The organization the DIY backend names (``pulumi.get_organization()`` there).
DIY_ORGANIZATION = "organization"


def recorded(config: Mapping[str, Any], minor: Optional[str] = None) -> dict[str, Any]:
    """What of the configuration an update records: the project's settings and the AWS provider's, less its
    credentials and any other secret of the AWS provider. ``minor``, the Kubernetes minor the update deploys, is
    recorded where the configuration leaves it to the project's default: the next update then sees a moved default."""
    out = {
        k: v
        for k, v in config.items()
        if k.startswith(f"{NAMESPACE}:")
        or (k.startswith("aws:") and k not in AWS_CREDENTIALS and not is_config_secret(k))
    }
    raw = setting(out, CLUSTER_KEY)
    cluster = json.loads(raw) if raw is not None else None
    if minor is not None and leaves_minor_unset(cluster):
        out[CLUSTER_KEY] = json.dumps(with_minor(cluster, minor))
    return out


def configuration_output(
    config: Mapping[str, Any], minor: Optional[str], finished: pulumi.Input[Any]
) -> pulumi.Output[str]:
    """The configuration this update was given (:func:`recorded`, with the Kubernetes minor it deploys; ``None`` for a
    jobs-only stack, which deploys none), as the secret JSON the next update reads back; resolved only once
    ``finished`` is (the stack's other outputs and what it installs, :func:`stacks.outputs.installs_done`): an update
    that fails before them keeps the previous record."""
    text = json.dumps(recorded(config, minor), sort_keys=True)
    return pulumi.Output.secret(pulumi.Output.from_input(finished).apply(lambda _: text))


def versions_output(
    plan: Plan,
    finished: pulumi.Input[Any],
    releases: Optional[Mapping[str, pulumi.Input[str]]] = None,
    flavors: Optional[Mapping[str, pulumi.Input[Any]]] = None,
) -> pulumi.Output[dict[str, str]]:
    """The program that made this update (:func:`~stacks.plan.program.program_digest`), the versions it installs
    (:func:`installed_versions`), the AMI release each node group runs as EKS reports it (``releases``, by the
    group's config path; :data:`~stacks.plan.nodes.RELEASE_SUFFIX`) and each Kueue flavor's spec as the cluster holds
    it (``flavors``, by its group's config path; :data:`FLAVOR_SUFFIX`; never the plan's), which the next update reads
    back; resolved only once ``finished``, the releases and the flavors are, as :func:`configuration_output`."""
    planned = {k: v for k, v in installed_versions(plan).items() if not k.endswith(FLAVOR_SUFFIX)}
    paths, groups = list(releases or {}), list(flavors or {})
    values = [*((releases or {})[p] for p in paths), *((flavors or {})[g] for g in groups)]

    def record(resolved: list[Any]) -> dict[str, str]:
        ran, specs = resolved[1 : 1 + len(paths)], resolved[1 + len(paths) :]
        applied = {g + FLAVOR_SUFFIX: spec_record(s) for g, s in zip(groups, specs)}
        return {
            PROGRAM_KEY: program_digest(),
            **planned,
            **{p + RELEASE_SUFFIX: str(r) for p, r in zip(paths, ran) if r},
            **{k: v for k, v in applied.items() if v is not None},
        }

    # plain, though ``finished`` holds secrets (the kubeconfig): versions are no secret
    return pulumi.Output.unsecret(pulumi.Output.all(pulumi.Output.from_input(finished), *values).apply(record))


def stack_name() -> str:
    """This stack's fully qualified name (``organization/project/stack``)."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def _outputs(name: str) -> Mapping[str, Any]:
    result = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": name})
    return (result.value or {}).get("outputs") or {}


def last_outputs() -> Mapping[str, Any]:
    """The outputs of the stack's last update (none before the first)."""
    try:
        return _outputs(stack_name())
    except Exception:
        if pulumi.get_organization() != DIY_ORGANIZATION:
            raise
        return _outputs(pulumi.get_stack())  # a DIY backend in its legacy layout names stacks without a project


def last_configuration(outputs: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The configuration the stack's last finished update recorded in its ``outputs`` (``None`` before the first, or
    from a version of this project that did not record it); :class:`ValueError` when the record cannot be read."""
    if CONFIG_OUTPUT not in outputs:
        return None
    raw = outputs[CONFIG_OUTPUT]
    if not isinstance(raw, str):  # the engine answers a secret it cannot decrypt with an empty map
        raise ValueError(f"the output {CONFIG_OUTPUT} holds {raw!r}, not the configuration (a secret not decrypted?)")
    loaded = json.loads(raw)
    if not isinstance(loaded, dict):
        raise ValueError(f"the output {CONFIG_OUTPUT} holds {type(loaded).__name__}, not a configuration")
    return loaded


@dataclass(frozen=True)
class LastUpdate:
    """What the stack's last update left for the next one (:func:`read_last_update`)."""

    #: Its outputs (none before the first update, or where they could not be read).
    outputs: Mapping[str, Any] = field(default_factory=dict)
    #: The configuration it recorded (:func:`last_configuration`): ``None`` where there is none, or it is unreadable.
    previous: Optional[dict[str, Any]] = None
    #: Why its outputs or its record could not be read; ``None`` where they could.
    unreadable: Optional[Exception] = None


def read_last_update() -> LastUpdate:
    """The stack's last update, read once before anything is registered (an unreadable one is not an error here:
    :func:`announce_upgrade` says so)."""
    outputs: Mapping[str, Any] = {}
    try:
        outputs = last_outputs()
        return LastUpdate(outputs, last_configuration(outputs))
    except Exception as exc:  # noqa: BLE001 - the summary is advice: an unreadable stack must not stop the update
        return LastUpdate(outputs, None, exc)


def new_region_problem(plan: Plan, last: LastUpdate) -> Optional[str]:
    """The refusal of a region the stack's resources are not in, whatever the cluster's name: the region its last
    update recorded (its configuration's ``aws:region``, else the plain :data:`REGION_OUTPUT`), else the one its VPC's
    zones name (:data:`ZONES_OUTPUT`); ``None`` where the region is the same or none was exported, or the record is a
    jobs-only stack's (it made no cluster, network or file system there)."""
    if last.previous is not None and recorded_jobs_only(last.previous):
        return None
    now = plan.config.region
    was = setting(last.previous, REGION_KEY) if last.previous is not None else None
    if not was and isinstance(last.outputs.get(REGION_OUTPUT), str):
        was = last.outputs[REGION_OUTPUT]
    if was:
        return region_problem(was, now) if was != now else None
    zones = last.outputs.get(ZONES_OUTPUT)
    if isinstance(zones, list) and zones and all(isinstance(z, str) for z in zones):
        if not any(in_region(z, now) for z in zones):
            return region_problem(region_of(zones), now)
    return None


def refuse_new_region(plan: Plan, last: LastUpdate) -> None:
    """Raise :class:`ConfigError` where ``plan`` moves a running stack to another region
    (:func:`new_region_problem`): before anything is asked of AWS in the new region, which may not even be enabled in
    the account."""
    if problem := new_region_problem(plan, last):
        raise ConfigError([problem])


def deployed_zones(outputs: Mapping[str, Any], cluster_name: str) -> Optional[list[str]]:
    """The zone names the last update's new VPC was made in, from its ``outputs``; ``None`` where it exported none
    (an existing VPC, or an update by an earlier commit of this project), or made another cluster than
    ``cluster_name`` (a new ``clusterName`` replaces the VPC too)."""
    if outputs.get(CLUSTER_NAME_OUTPUT, cluster_name) != cluster_name:
        return None
    zones = outputs.get(ZONES_OUTPUT)
    if isinstance(zones, list) and zones and all(isinstance(z, str) for z in zones):
        return list(zones)
    return None


def deployed_folders(outputs: Mapping[str, Any]) -> Optional[dict[str, str]]:
    """Each job's output folder as the last update exported it (``jobs.<job>.outputDir``, written by the version of
    this project that deployed it); ``None`` where it exported none."""
    jobs = outputs.get("jobs")
    if not isinstance(jobs, Mapping):
        return None
    folders = {str(n): j.get("outputDir") for n, j in jobs.items() if isinstance(j, Mapping)}
    return {n: f for n, f in folders.items() if isinstance(f, str)}


def recorded_minor(previous: Mapping[str, Any]) -> Optional[str]:
    """The Kubernetes minor a recorded configuration deployed; ``None`` where the record does not hold one (an update
    by an earlier commit of this project that left it unset)."""
    raw = setting(previous, CLUSTER_KEY)
    try:
        cluster = json.loads(raw) if raw is not None else {}
    except json.JSONDecodeError:
        return None
    minor = cluster.get("kubernetesVersion") if isinstance(cluster, dict) else None
    return minor if isinstance(minor, str) else None


def recorded_jobs_only(previous: Mapping[str, Any]) -> bool:
    """Whether a recorded configuration is a jobs-only stack's (its cluster is another stack's: no minor, no groups of
    its own)."""
    raw = setting(previous, CLUSTER_KEY)
    try:
        cluster = json.loads(raw) if raw is not None else {}
    except json.JSONDecodeError:
        return False
    return isinstance(cluster, dict) and cluster.get("stackReference") is not None


def renamed_cluster(plan: Plan, previous: Mapping[str, Any]) -> bool:
    """Whether the stack file gives the cluster another name than the recorded configuration's (a cluster stack's):
    the update makes a new cluster, and the minor preflight read is that name's cluster, if one exists already."""
    if recorded_jobs_only(previous) or plan.config.jobs_only:
        return False
    config = plan.config
    recorded = setting(previous, f"{NAMESPACE}:clusterName") or default_cluster_name(config.project, config.stack)
    return recorded != config.cluster_name


def upgrade_summary(
    plan: Plan,
    previous: Mapping[str, Any],
    running: Optional[str] = None,
    unread: Optional[str] = None,
    region: Optional[RegionZones] = None,
    zones: Optional[list[str]] = None,
    folders: Optional[Mapping[str, str]] = None,
    versions: Optional[Mapping[str, object]] = None,
    eks_defaults: Optional[Mapping[str, tuple[str, str]]] = None,
) -> tuple[Optional[str], Optional[Plan]]:
    """What moving from ``previous`` (the last update's configuration) to ``plan`` does, as
    :func:`stacks.plan.upgrade_text.render_upgrade` writes it (``None`` when nothing rolls, no version moves and no job
    starts a new run), and the plan of ``previous`` (``None`` where it does not load with this version of the project).
    :class:`ConfigError` when the move breaks an upgrade rule. ``running`` is the minor the control plane runs, where
    preflight read it: newer than the record's, it moved since (:func:`ahead_of_record`); ``unread``: why it
    was not read (:func:`unread_hint`); ``region``: the region's zones; ``zones``: those the last update's VPC was
    made in (:func:`deployed_zones`); ``folders``: the jobs' output folders it exported (:func:`deployed_folders`);
    ``versions``: what it installed (:data:`VERSIONS_OUTPUT`); ``eks_defaults``: the add-ons the cluster runs beside
    EKS's default now, where preflight read them (:func:`stacks.preflight.cluster.eks_defaults`). A new region is
    refused before (:func:`refuse_new_region`)."""
    config = plan.config
    renamed = renamed_cluster(plan, previous)
    deployed = recorded_minor(previous)
    # a new name's cluster: none yet, or one that has that name already (compare names it)
    ahead = running if renamed else ahead_of_record(deployed, running)
    if unset_minor(plan) and not renamed:
        current = ahead or deployed
        if current is not None and current != config.cluster.kubernetes_version:
            # before the record is loaded: a minor since past its support would not load, and the move would go on
            raise ConfigError([moved_default_problem(current, config.cluster.kubernetes_version, outside=bool(ahead))])
    hint = unread_hint(config.cluster.kubernetes_version, unread) if unread else None
    try:
        with quiet(), support_windows_ignored():  # its warnings were shown at its own update, its minor then supported
            old = build_plan(load_config(config.project, config.stack, dict(previous)))  # in the working folder
    except ConfigError as exc:
        return _unloaded(plan, exc, deployed, ahead, renamed, region, zones, hint), None
    upgrade = compare(
        old,
        plan,
        LAST_UPDATE,
        running=ahead,
        unread=hint,
        region=region,
        deployed_zones=zones,
        deployed_dirs=folders,
        deployed_versions=versions if isinstance(versions, Mapping) else None,
        eks_defaults=eks_defaults,
    )
    return _summary(upgrade, old, plan, versions, ahead, renamed), old


def _unloaded(
    plan: Plan,
    exc: ConfigError,
    deployed: Optional[str],
    ahead: Optional[str],
    renamed: bool,
    region: Optional[RegionZones],
    zones: Optional[list[str]],
    hint: Optional[str],
) -> str:
    """The warning of a record this version of the project cannot load (``exc`` says why). What the record's raw
    values still show is refused: zones the VPC was not made in, and a skipped or lower minor than the one it
    ``deployed`` (or the control plane runs, ``ahead``; ``hint``: why that was not read), where the stack keeps its
    cluster (not a new ``clusterName``, nor a jobs-only stack, whose cluster is another stack's)."""
    if region is not None and zones is not None and (problems := deployed_zone_problems(plan, region, zones)):
        raise ConfigError(problems) from None
    config = plan.config
    current, cluster = ahead or deployed, config.cluster
    if current is not None and not renamed and not config.jobs_only:
        problems = step_problems(
            current, cluster.kubernetes_version, outside=bool(ahead), extended=cluster.extended_support, unread=hint
        )
        if problems:
            raise ConfigError(problems) from None
    return (
        f"{LAST_UPDATE} does not load with this version of the project, so what this update rolls is not shown "
        f"({exc}). The Kubernetes minor's step is still checked, but not the node groups' kubelets and AMI "
        "releases, the Kueue flavors or the add-ons' steps: read `pulumi preview --diff` before you confirm. "
        f"python -m stacks plan --stack {config.stack} --from <the revision of its stack file that was deployed> "
        "shows the summary where that file loads"
    ) + (
        "\n" + moved_outside_note(deployed, ahead, cluster.kubernetes_version)
        if deployed and ahead and not renamed
        else ""
    )


def _summary(
    upgrade: Upgrade,
    old: Plan,
    plan: Plan,
    versions: Optional[Mapping[str, object]],
    ahead: Optional[str],
    renamed: bool,
) -> Optional[str]:
    """The summary of ``upgrade`` with what this version of the project moves at the recorded configuration, and the
    note of a control plane that moved (``ahead``) or may have; ``None`` when nothing rolls, moves or starts again and
    nothing needs a note (a job's shorter deadline in place, an autoscaled group's new sizes)."""
    changes = upgrade.groups or upgrade.addons or upgrade.data or upgrade.runs or upgrade.notes
    # what this version of the project moves at the recorded configuration (the stack file's own moves are above)
    moves = version_moves(versions, old, plan, said={a.name for a in upgrade.addons})
    if not changes and upgrade.old_minor == upgrade.new_minor:
        said = [render_moves(moves)] if moves else []
        if program_changed(versions):
            said.append(f"Another version of this project made the stack's last update: {PROGRAM_CHANGES}")
        return "\n".join(said) or None
    report = upgrade_report(upgrade)
    report["programChanged"] = program_changed(versions)
    summary = render_upgrade(report) + ("\n" + render_moves(moves) if moves else "")
    if renamed:  # a new cluster, or the new name's cluster that exists already, which compare's note names
        return summary
    if ahead is not None:
        summary += "\n" + moved_outside_note(upgrade.old_minor, ahead, upgrade.new_minor)
    elif upgrade.old_minor != upgrade.new_minor:
        summary += "\n" + already_moved_note(upgrade.old_minor, upgrade.new_minor)
    return summary


#: Why the program did not read the minor the cluster runs when preflight is off.
PREFLIGHT_OFF = "preflight is off"


def unread_hint(new: str, why: str) -> str:
    """Added to a skipped minor's refusal when the program could not read the minor the cluster runs (``why``): the
    skip may be a move EKS already made."""
    fix = (
        f"set {NAMESPACE}:preflight.enabled to true for this update"
        if why == PREFLIGHT_OFF
        else "it calls eks:DescribeCluster with the stack's credentials in its region: fix what stopped that call"
    )
    return (
        f"If the cluster already runs {new} (EKS upgrades a cluster itself at the end of standard or extended "
        f"support), the program must read the minor it runs to step from it, and could not ({why}): {fix}"
    )


def ahead_of_record(deployed: Optional[str], running: Optional[str]) -> Optional[str]:
    """``running`` where the control plane runs a newer minor than the record's ``deployed``: an earlier ``pulumi up``
    moved it and then failed (a failed update keeps the record), EKS upgraded it itself (at the end of standard or
    extended support), or someone did outside Pulumi; else ``None``."""
    if running is None or deployed is None or minor_number(running) <= minor_number(deployed):
        return None
    return running


def already_moved_note(old: str, new: str) -> str:
    """What to do when EKS moved the control plane itself: Pulumi's state still holds ``old``, and EKS refuses an update
    to the minor a cluster runs (terraform-provider-aws calls UpdateClusterVersion whenever the version differs)."""
    return (
        f"If the cluster already runs {new} (EKS upgrades a cluster itself at the end of standard or extended "
        f"support), run `pulumi up --refresh` instead: Pulumi's state still holds {old}, and EKS refuses an update to "
        "the minor a cluster runs"
    )


def moved_outside_note(old: str, running: str, new: str) -> str:
    """The control plane runs ``running``, the last finished update deployed ``old``, this one sets ``new``: the nodes
    and add-ons may still move as the summary says. After EKS's own upgrade Pulumi's state needs a refresh first; after
    an earlier ``pulumi up`` that moved it and failed, the state holds ``running`` already, and the refresh is
    harmless."""
    why = " (without the refresh, `pulumi up` asks EKS for the move to the minor the cluster runs, which EKS refuses)"
    return (
        f"The control plane already runs {running}, past the {old} the last finished update recorded: an earlier "
        f"`pulumi up` that failed moved it, or EKS did (it upgrades a cluster itself at the end of standard or "
        f"extended support). Its nodes and add-ons may not have moved. Run this update as `pulumi up --refresh` "
        f"unless it is one: after EKS's own upgrade, Pulumi's state still holds {old}{why if new == running else ''}"
    )


def unchecked_minor_warning(plan: Plan, unread: str) -> str:
    """What an update says where nothing tells it the minor the cluster runs: the stack's last update recorded none
    (an earlier version of this project), the minor is left to the project's default, and EKS was not asked
    (``unread``, why)."""
    return (
        f"the stack's last update recorded no configuration (an earlier version of this project made it), and the "
        f"minor the cluster runs was not read ({unread}): {VERSION_KEY} is not set, so this update deploys the "
        f"project's default, {plan.config.cluster.kubernetes_version}, unchecked. If the cluster runs another minor, "
        f"answer no, and set {VERSION_KEY} to it: docs/how-to/upgrading.md, \"Pin the minor\""
    )


def resize_warning(plan: Plan, names: Sequence[str], why: Optional[str]) -> str:
    """What an update says where a group's sizes move under the autoscaler and EKS did not give the desired size it
    holds (``why``: why it was not asked; ``None``: EKS has no group of that name)."""
    paths = ", ".join(g.path for g in plan.all_groups if g.name in names)
    return (
        f"{paths}: new sizes, and the desired size EKS holds was not read ({why or 'EKS has no such group'}): the "
        "provider sends the one Pulumi recorded, and EKS scales the group to it at once, whatever its pods' "
        "PodDisruptionBudgets. Answer no, and run this update as `pulumi up --refresh`, which reads it first"
    )


def desired_size_notes(plan: Plan, desired: Mapping[str, int]) -> list[str]:
    """What ``pulumi up`` sends as the desired size of each group whose sizes move under the autoscaler: the one EKS
    holds (``desired``), within the new sizes (:func:`stacks.environment._sizing`)."""
    return [
        f"{g.path}: desiredSize {desired_within(g, desired[g.name])} sent with minSize {g.min_size} and maxSize "
        f"{g.max_size} (EKS holds {desired[g.name]}, read now)"
        for g in plan.all_groups
        if g.name in desired
    ]


def unreadable_warning(plan: Plan, why: Exception) -> str:
    """What ``pulumi up`` says where it cannot read the stack's last update (``why``): no summary, and the command
    that shows one."""
    return (
        f"cannot read {LAST_UPDATE} ({why}), so what this update changes is not shown; "
        f"python -m stacks plan --stack {plan.config.stack} --from <the deployed stack file> shows it. If it gives an "
        "autoscaled group a new minSize or maxSize, answer no and run `pulumi up --refresh`: without the record, the "
        "provider sends the desired size Pulumi recorded, and EKS scales the group to it at once"
    )


def announce_upgrade(
    plan: Plan,
    last: LastUpdate,
    running: Optional[str] = None,
    unread: Optional[str] = None,
    region: Optional[RegionZones] = None,
    eks_defaults: Optional[Mapping[str, tuple[str, str]]] = None,
) -> Optional[Plan]:
    """Print :func:`upgrade_summary` against the stack's ``last`` update as a warning, before anything is registered,
    and return the plan of the configuration it recorded (``None`` where there is none, or it does not load), which
    preflight reads; a broken upgrade rule raises :class:`ConfigError`. ``running`` is the minor the cluster runs,
    where preflight read it (:func:`ahead_of_record`); ``unread``: why it was not read (:data:`PREFLIGHT_OFF`, or EKS's
    error); ``region``: the region's zones; ``eks_defaults``: the add-ons the cluster runs beside EKS's default now
    (:func:`upgrade_summary`)."""
    refuse_new_region(plan, last)
    outputs, previous = last.outputs, last.previous
    if last.unreadable is not None:
        zones = deployed_zones(outputs, plan.config.cluster_name)
        if region is not None and zones is not None and (problems := deployed_zone_problems(plan, region, zones)):
            raise ConfigError(problems) from None  # the zones, a plain output, are known: a move fails partway
        pulumi.log.warn(unreadable_warning(plan, last.unreadable))
        return None
    jobs_only_record = previous is not None and recorded_jobs_only(previous)  # it made no cluster: no minor
    if previous is None or jobs_only_record:  # a new stack, one no update of this version has recorded, or a
        # jobs-only stack's record: no minor to compare with
        minor = plan.config.cluster.kubernetes_version
        if running is not None and unset_minor(plan) and running != minor:  # the cluster's own minor
            raise ConfigError(
                [
                    moved_default_problem(running, minor, outside=True)
                    + f"; if another stack made the cluster {plan.config.cluster_name}, give this stack a "
                    f"{NAMESPACE}:clusterName of its own instead"
                ]
            )
        if previous is None:
            if last.outputs and running is None and unread is not None and unset_minor(plan):
                pulumi.log.warn(unchecked_minor_warning(plan, unread))
            return None
    elif unset_minor(plan) and recorded_minor(previous) is None and not renamed_cluster(plan, previous):
        minor = plan.config.cluster.kubernetes_version
        if running is not None and running != minor:  # the minor the cluster runs stands in for the record's
            raise ConfigError(
                [
                    moved_default_problem(running, minor, outside=True)
                    + "; if the cluster moved outside Pulumi (EKS upgrades a cluster itself at the end of standard or "
                    "extended support), run that update as `pulumi up --refresh`"
                ]
            )
        if running is None:
            pulumi.log.warn(
                f"{LAST_UPDATE} holds no Kubernetes minor, and the stack file sets none: if the cluster runs another "
                f"minor than this project's default ({minor}), this update moves it. Set "
                f"{NAMESPACE}:cluster.kubernetesVersion to the minor it runs (the EKS console, or aws eks "
                "describe-cluster)"
            )
    zones = deployed_zones(outputs, plan.config.cluster_name)
    summary, old = upgrade_summary(
        plan,
        previous,
        running,
        unread,
        region,
        zones,
        deployed_folders(outputs),
        outputs.get(VERSIONS_OUTPUT),
        eks_defaults,
    )
    if summary is not None:
        pulumi.log.warn(summary)
    return None if jobs_only_record else old  # a jobs-only stack's groups were another stack's


def announce_jobs_only_update(plan: Plan, last: LastUpdate) -> None:
    """For a jobs-only stack: print :func:`upgrade_summary` against the stack's ``last`` update as a warning, before
    anything is registered (a broken upgrade rule raises :class:`ConfigError`). Its last update may have been a
    cluster stack's: the summary then names the cluster, VPC and file system this update deletes."""
    if last.unreadable is not None:
        pulumi.log.warn(unreadable_warning(plan, last.unreadable))
        return
    if last.previous is None:
        return
    summary, _old = upgrade_summary(
        plan, last.previous, folders=deployed_folders(last.outputs), versions=last.outputs.get(VERSIONS_OUTPUT)
    )
    if summary is not None:
        pulumi.log.warn(summary)
