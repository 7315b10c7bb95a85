"""The upgrade summary as JSON and as text, and the ``--from`` command that prints it (:mod:`stacks.plan.upgrade`
compares; this module says what it found)."""

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from components.catalog.platform import DELETE_DRAIN_LIMIT_S, GRACEFUL_SHUTDOWN_FROM
from components.catalog.timings import CONTROL_PLANE_UPGRADE, CREATION, NODE_ROLL, NODE_SURGE
from components.conventions import SHARED_MOUNT
from stacks.config import ConfigError
from stacks.plan import Plan
from stacks.plan.group_changes import GroupChange
from stacks.plan.job_changes import NEW_DATA_RERUN, JobRun
from stacks.plan.job_stops import JobStop
from stacks.plan.minors import unpinned_note, unset_minor
from stacks.plan.old_config import plan_old
from stacks.plan.upgrade import GROUP_DELETION_MINUTES, Upgrade, compare
from stacks.stackfile import (
    StackLoadError,
)

#: The modelled times of an add-on's update and a node group's creation (components/catalog/timings.py).
_ADDON = CREATION["aws:eks/addon:Addon"]
_NODE_GROUP = CREATION["aws:eks/nodeGroup:NodeGroup"]
_DELETION_ESTIMATE = (
    "EKS lets a deleted group's nodes drain this long, then terminates them (source key "
    "eks-delete-managed-node-group); the termination is not timed"
)

#: What a new minor updates after the control plane, in the order the program's dependencies give
#: (components/cluster.py: NODE_ADDONS before the node groups, the Pod Identity agent beside them, LATE_ADDONS after
#: the system group; the CSI driver and CloudWatch's add-on wait for the system group and the agent too).
ORDER = (
    "    vpc-cni, kube-proxy and eks-pod-identity-agent (the node groups wait for the first two only)",
    "    the node groups side by side, the other add-ons after the system group",
)


def upgrade_report(u: Upgrade) -> dict[str, Any]:
    """The comparison as a JSON-ready mapping."""
    return {
        "from": u.old_label,
        "kubernetesVersion": {"from": u.old_minor, "to": u.new_minor, **({"running": u.running} if u.running else {})},
        "nodeGroups": [_group_json(g) for g in u.groups],
        "addons": [
            {"name": a.name, "from": a.old, "to": a.new, **({"change": a.change} if a.change != "version" else {})}
            for a in u.addons
        ],
        "data": list(u.data),
        "dataEmpty": u.data_empty,
        "untimed": list(u.untimed),
        "clusterReplaced": u.cluster_replaced,
        **({"fromJobsOnly": True} if u.from_jobs_only else {}),
        "jobs": [_run_json(j, u.data_empty) for j in u.runs],
        "expectedMinutes": u.minutes,
        "countsSurge": u.counts_surge,
        "durations": {
            "controlPlane": {"minutes": CONTROL_PLANE_UPGRADE.minutes, "estimate": CONTROL_PLANE_UPGRADE.estimate},
            "addon": {"minutes": _ADDON.minutes, "estimate": _ADDON.estimate},
            "nodeGroup": {"minutes": _NODE_GROUP.minutes, "estimate": _NODE_GROUP.estimate},
            "nodeRoll": {"minutes": NODE_ROLL.minutes, "estimate": NODE_ROLL.estimate},
            "groupDeletion": {"minutes": GROUP_DELETION_MINUTES, "estimate": _DELETION_ESTIMATE},
            "nodeSurge": {"minutes": NODE_SURGE.minutes, "estimate": NODE_SURGE.estimate},
            "source": "components/catalog/timings.py",
        },
        "notes": list(u.notes),
        "jobsOnly": u.jobs_only,
        "blockDeferred": list(u.deferred),
    }


def _group_json(g: GroupChange) -> dict[str, Any]:
    """One node group's change in :func:`upgrade_report`."""
    return {
        "key": g.path,
        "action": g.action,
        "reasons": list(g.reasons),
        "nodes": g.nodes,
        "upTo": g.up_to,
        "maybe": g.maybe,
        "updateStrategy": g.strategy,
        "eksUpdateStrategy": {"name": g.node_update.name, "why": g.no_surge},
        "surge": (
            {
                "perZone": g.surge.per_zone,
                "zones": g.surge.zones,
                "instanceType": g.surge.instance_type,
                "vcpus": g.surge.vcpus,
            }
            if g.surge is not None
            else None
        ),
        "minutes": g.minutes,
        "jobs": [
            {"name": j.name, "pods": j.pods, "keeps": j.keeps, "strategy": j.strategy, "what": _stop_text(j)}
            for j in g.jobs
        ],
    }


def _run_json(j: JobRun, data_empty: bool) -> dict[str, Any]:
    """One job's run in :func:`upgrade_report`; ``data_empty``: the update gives the jobs a new, empty file system."""
    return {
        "name": j.name,
        "action": j.action,
        "reasons": list(j.reasons),
        "from": j.old_dir,
        "to": j.new_dir,
        **({"how": j.how} if j.how else {}),
        **({"rerun": j.rerun} if j.rerun else {}),
        **({"renamedFrom": j.renamed_from} if j.renamed_from else {}),
        # a new file system holds none of the old folders: no outputDir keeps the run
        **({"keep": j.keep} if j.keep and not (j.action == "new run" and data_empty) else {}),
    }


def _stop_text(j: JobStop) -> str:
    if j.moves_to:
        return (
            f"its {j.replaced} is replaced earlier in this update (below), with its pods on {j.moves_to}: its pods "
            "here stop then"
        )
    if j.replaced:
        return (
            f"its {j.replaced} is replaced earlier in this update (below); new pods that start on the old group's "
            "nodes stop again when Pulumi deletes it"
        )
    if j.strategy == "delete" and not (j.launcher or j.rendezvous):
        stop = f"stopped: all {j.pods} pod(s) go with the old group's nodes"
        if j.grace_s > j.shutdown_grace_s:
            # EKS drains through evictions, which the job's budget holds back; the node then shuts down
            gets = (
                f"gets at most {j.shutdown_grace_s} s to stop: a stop checkpoint past that"
                if j.shutdown_grace_s
                else f"is not waited for (EKS's nodes wait for pods from Kubernetes {GRACEFUL_SHUTDOWN_FROM}): its "
                "stop checkpoint"
            )
            stop += (
                f"; EKS evicts them as their budget allows, then terminates a node still draining after "
                f"{DELETE_DRAIN_LIMIT_S // 60} minutes, and a pod still on it {gets} is cut short (its "
                f"stopGracePeriodSeconds is {j.grace_s})"
            )
        return stop
    return j.what


#: A restart's key in words, where the change may be outside the job (its group's own keys).
_KEY_WORDS = {
    "nodeGroup": "nodeGroup (or that group's labels, taints or zone)",
    "maxNodes": "maxNodes (its group's maxSize, where the job leaves it unset)",
}


def _run_line(j: dict[str, Any], new_data: bool) -> str:
    """A job whose run starts or ends, as the summary says it; ``new_data``: the update gives the jobs a new file
    system (``dataEmpty``), so a new run starts from its first step whatever folder it has."""
    if j["action"] == "added" and j.get("renamedFrom"):
        kept = j["from"].removeprefix(f"{SHARED_MOUNT}/")
        return (
            f"  job {j['name']}: added, runs in {j['to']}; if it is {j['renamedFrom']} under a new name, set its "
            f"outputDir: {kept} to go on with {j['renamedFrom']}'s run there"
        )
    if j["action"] == "added":
        return f"  job {j['name']}: added, runs in {j['to']}"
    if j["action"] == "removed":
        return f"  job {j['name']}: removed, its pods stop; {j['from']} stays on the shared volume"
    if j["action"] == "restarts":
        return (
            f"  job {j['name']}: {', '.join(_KEY_WORDS.get(k, k) for k in j['reasons'])} changed: {j['how']}, in "
            f"{j['to']}: {j['rerun']}" + (f"; {j['keep']}" if j.get("keep") else "")
        )
    if j["action"] == "same folder":
        return (
            f"  job {j['name']}: {j['how']} ({', '.join(j['reasons'])}) and starts again in its outputDir {j['to']}: "
            f"{j['rerun']}"
        )
    start = (
        NEW_DATA_RERUN
        if new_data
        else "it starts from its first step, unless an earlier run of this definition left that folder (a job set "
        f"back): then {j['rerun']}"
    )
    kept = "with the old shared data (the data: line says whether it stays)" if new_data else "on the shared volume"
    return (
        f"  job {j['name']}: a new run ({', '.join(j['reasons'])}) in {j['to']}: {j['how']}; {j['from']} stays "
        f"{kept}\n    {start}" + (f"; {j['keep']}" if j.get("keep") else "")
    )


def _eks_strategy(g: dict[str, Any]) -> str:
    """The group's EKS update strategy and, for ``MINIMAL``, why."""
    eks = g["eksUpdateStrategy"]
    if eks["why"] is None:
        return f"EKS strategy {eks['name']} (new nodes first)"
    return f"EKS strategy {eks['name']} ({eks['why']}: each node goes before its replacement launches)"


#: Where the changes of another version of the program show, which a summary planned with this one cannot see.
PROGRAM_CHANGES = (
    "its own changes to the stack's objects, such as a Job's pod template, show only in the preview's list of changes "
    "(a replaced Job shows +-)"
)


def _only_file(r: dict[str, Any]) -> str:
    """What follows a "none ..." line where the comparison sees the stack file's changes only (``projectChanged``,
    ``programChanged``)."""
    return " for the stack file's changes" if r.get("projectChanged") or r.get("programChanged") else ""


def _version(v: Optional[str], minor: str) -> str:
    return v if v is not None else f"EKS's default for {minor}"


def render_upgrade(r: dict[str, Any]) -> str:
    """The comparison as text: the cluster's part (:func:`_cluster_lines`), then the jobs', then the notes.
    ``projectChanged``: ``--from`` names a revision of another version of this project, whose own changes this
    comparison cannot see (:func:`~stacks.plan.old_config.project_changed`); ``programChanged``: another version of
    the program made the last update (:func:`~stacks.plan.program.program_changed`)."""
    lines = [f"upgrade from {r['from']}:"]
    if r.get("projectChanged"):
        lines.append(
            "  the stack file's changes only, and its image and code folders': this project's other changes since "
            "then do not show (a note says where they do)"
        )
    elif r.get("programChanged"):
        lines.append(f"  another version of this project made the last update: {PROGRAM_CHANGES}")
    if r.get("jobsOnly"):
        lines.append(
            "  cluster: another stack's (cluster.stackReference): its own summary shows its Kubernetes minor, add-ons "
            "and node groups"
        )
        lines.extend(f"  data: {d}" for d in r["data"])
    else:
        lines += _cluster_lines(r)
    if r["data"] and r.get("dataEmpty"):
        lines.append("  jobs: every job starts from its first step on the shared data the data: line names")
    elif r["data"]:
        lines.append(
            "  jobs: each job starts again on the shared data the data: line names: from its first step where its "
            "folder is not there"
        )
    lines.extend(_run_line(j, bool(r.get("dataEmpty"))) for j in r["jobs"])
    lines.extend(
        f"  job {n}: an image or code folder it runs was read as it is now (a note says which): a change there starts "
        "it again, which this comparison cannot see; the preview shows it"
        for n in r.get("unseenJobs", ())
    )
    unchanged = not r["jobs"] and not r["data"] and not r.get("unseenJobs")
    if r.get("blockDeferred"):
        lines.append(
            f"  jobs: {', '.join(r['blockDeferred'])}: deleted while their Capacity Block has not started (a note says "
            "why), created again after its start" + (", in the runs they had" if unchanged else "")
        )
    elif unchanged:
        lines.append("  jobs: none restarts or starts a new run" + _only_file(r))
    if not r.get("jobsOnly"):
        lines.append(_duration_line(r))
    lines.extend(f"  note: {n}" for n in r["notes"])
    return "\n".join(lines)


def _cluster_lines(r: dict[str, Any]) -> list[str]:
    """The minor, the add-ons, the data and the node groups, as the summary says them."""
    k = r["kubernetesVersion"]
    lines = []
    if k.get("running"):
        moves = f", which moves to {k['to']} first" if k["running"] != k["to"] else ""
        lines.append(
            f"  Kubernetes {k['from']} -> {k['to']}: the control plane already runs {k['running']}{moves}; then"
        )
        lines.extend(ORDER)
    elif k["from"] != k["to"]:
        lines.append(
            f"  Kubernetes {k['from']} -> {k['to']}: the control plane first (about "
            f"{r['durations']['controlPlane']['minutes']:g} min, an estimate), then"
        )
        lines.extend(ORDER)
    elif r["clusterReplaced"]:
        lines.append(f"  Kubernetes {k['to']}: the new cluster's")
    else:
        lines.append(f"  Kubernetes {k['from']}: unchanged")
    if r["addons"]:
        lines.append("  add-ons:")
        for a in r["addons"]:
            change = a.get("change")
            if change == "installed":
                lines.append(f"    {a['name']}: installed, {_version(a['to'], k['to'])}")
            elif change == "removed":
                lines.append(f"    {a['name']}: removed (EKS deletes it and its pods)")
            else:
                lines.append(f"    {a['name']}: {_version(a['from'], k['from'])} -> {_version(a['to'], k['to'])}")
    lines.extend(f"  data: {d}" for d in r["data"])
    if r["clusterReplaced"] and r.get("fromJobsOnly"):
        lines.append("  node groups: every group is made with the new cluster")
    elif r["clusterReplaced"]:
        lines.append("  node groups: every group is made again with the new cluster, then the old ones deleted")
    elif not r["nodeGroups"]:
        lines.append("  node groups: none rolls" + _only_file(r))
    for g in [] if r["clusterReplaced"] else r["nodeGroups"]:
        verb = {
            "roll": "rolls",
            "replace": "is replaced (a new group, then the old one deleted)",
            "add": "is created",
            "update": "is updated in place, no roll",
            "shrink": "gets smaller, no roll",
            "delete": "goes",
        }
        lines.append(f"  {g['key']} {'may roll' if g.get('maybe') else verb[g['action']]}: {'; '.join(g['reasons'])}")
        lines.append(
            f"    {'up to ' if g['upTo'] else ''}{g['nodes']} node(s)"
            + (f", updateStrategy {g['updateStrategy']}, {_eks_strategy(g)}" if g["action"] == "roll" else "")
        )
        if g["action"] == "roll" and g.get("surge"):
            lines.append(_surge_line(g["surge"]))
        for j in g["jobs"]:
            first, *rest = _clauses(j["what"])
            lines.append(f"    job {j['name']}: {first}")
            lines.extend(f"      {c}" for c in rest)
        if g["action"] == "update":
            lines.append(
                "    EKS applies them to its nodes; a job replaced for them (below) waits for that before it starts"
            )
        elif g["action"] == "roll" and not g["nodes"]:
            lines.append("    no running pod stops: it rolls with no node")
        elif not g["jobs"] and g["action"] != "add":
            lines.append("    no job of this stack file on it")
    return lines


def _surge_line(s: dict[str, Any]) -> str:
    """The room a ``DEFAULT`` roll needs beyond the group's size (:class:`~stacks.plan.group_changes.RollSurge`)."""
    each = f"{s['instanceType']}, {s['vcpus']} vCPUs each"
    if s["zones"] is None:
        more = f"up to {s['perZone']} more node(s) per zone of its subnets ({each})"
    else:
        n = s["perZone"] * s["zones"]
        more = f"up to {n} more node(s) ({n} x {s['instanceType']}, {n * s['vcpus']} vCPUs)"
    return f"    it first launches {more}: the EC2 vCPU quota needs room for them"


def _clauses(text: str) -> list[str]:
    """``text``'s clauses, one a line: split at each ``"; "`` outside parentheses and backquotes."""
    out, depth, quoted, start = [], 0, False, 0
    for i, c in enumerate(text):
        if c == "`":
            quoted = not quoted
        elif not quoted and c in "()":
            depth += 1 if c == "(" else -1
        elif c == ";" and not quoted and depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    return [*out, text[start:]]


def _timed_steps(r: dict[str, Any], timed: list[dict[str, Any]]) -> list[str]:
    """The steps the expected duration adds up, in their order: the control plane's update, the add-ons', the slowest
    group's change (a roll at its minutes a node, or a new group's creation), then a replaced or removed group's
    deletion."""
    k, d = r["kubernetesVersion"], r["durations"]
    steps = (
        [f"the control plane ({d['controlPlane']['minutes']:g} min)"]
        if k["from"] != k["to"] or k.get("running")
        else []
    )
    steps += [f"the add-ons ({d['addon']['minutes']:g} min)"] if r["addons"] else []
    slowest = max(timed, key=lambda g: g["minutes"], default=None)
    if slowest is not None and slowest["action"] == "roll" and slowest["minutes"]:
        steps.append(f"the slowest group's roll at {d['nodeRoll']['minutes']:g} min a node")
    elif slowest is not None and slowest["minutes"]:
        steps.append(f"a new group's creation ({d['nodeGroup']['minutes']:g} min)")
    going = sum(g["action"] in ("replace", "delete") for g in timed)
    if going:
        whose = (
            "the old group's deletion at the end (its" if going == 1 else "the old groups' deletion at the end (their"
        )
        steps.append(f"{whose} nodes drain, up to {d['groupDeletion']['minutes']:g} min)")
    return steps


def _duration_line(r: dict[str, Any]) -> str:
    """The expected duration, or why there is none, then what it does not count (``untimed``)."""
    untimed = r.get("untimed") or []
    line = _duration(r)
    return line + (f"\n    not counted: {'; '.join(untimed)}" if untimed and not r["clusterReplaced"] else "")


def _duration(r: dict[str, Any]) -> str:
    """The expected duration, or why there is none."""
    if r["clusterReplaced"]:
        return (
            "  expected duration: a new stack's: `python -m stacks plan --stack NAME` models its path to the first "
            "training step; the old stack's deletion follows"
        )
    k = r["kubernetesVersion"]
    timed = [g for g in r["nodeGroups"] if g["action"] != "update"]
    if not r["expectedMinutes"] and timed and all(g["action"] == "shrink" for g in timed):
        return "  expected duration: no roll: EKS terminates the nodes a smaller group no longer needs"
    if timed or r["addons"] or k["from"] != k["to"] or k.get("running"):
        counted = [
            *(["an autoscaled group at its maxSize"] if any(g["upTo"] for g in timed) else []),
            *(["a group that may roll as rolling"] if any(g.get("maybe") for g in timed) else []),
            *(
                [f"{r['durations']['nodeSurge']['minutes']:g} min more for DEFAULT's first new nodes"]
                if r["countsSurge"]
                else []
            ),
        ]
        # at a group's maxSize, or counting a roll that may not happen, the figure is a bound
        bound = "up to " if any(g["upTo"] or g.get("maybe") for g in timed) else ""
        source = r["durations"]["source"]
        return "\n".join(
            [
                f"  expected duration: {bound}about {r['expectedMinutes']:g} min, a model ({source}):",
                *([f"    {', then '.join(steps)}"] if (steps := _timed_steps(r, timed)) else []),
                *([f"    counted: {', '.join(counted)}"] if counted else []),
            ]
        )
    if r["nodeGroups"]:
        return "  expected duration: no roll (labels and taints change on the running nodes)"
    return "  expected duration: no control plane, add-on or node group update" + _only_file(r)


def compare_stacks(old: str, stack: str, stack_file: Optional[Path], plan: Plan, *, as_json: bool = False) -> str:
    """The ``--from`` summary of the stack planned as ``plan`` against ``old``, as text or JSON; a broken upgrade
    rule raises :class:`StackLoadError` with the configuration error's message (the command exits 2)."""
    read, old_plan = plan_old(
        old, stack, stack_file, None if unset_minor(plan) else plan.config.cluster.kubernetes_version
    )
    try:
        u = compare(old_plan, plan, read.label, from_file=True)
    except ConfigError as exc:
        raise StackLoadError("\n".join([exc.offline, *(f"note: {n}" for n in read.notes)])) from exc
    unpinned = unpinned_note(plan)
    r = upgrade_report(replace(u, notes=(*read.notes, *u.notes, *([unpinned] if unpinned else []))))
    said = {j["name"] for j in r["jobs"]}
    r["unseenJobs"] = [n for n in read.unseen if n not in said]
    r["projectChanged"] = read.project_changed
    return json.dumps({"upgrade": r}, indent=2) if as_json else render_upgrade(r)
