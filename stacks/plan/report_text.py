"""The plan's report as text (``python -m stacks plan`` without ``--json``): :func:`render` prints each section of
the mapping :func:`stacks.plan.report.report` builds, in order."""

import shlex
from typing import Any, Optional

from components.catalog.platform import EVICTION_LIMIT_MINUTES
from stacks.costs import money
from stacks.kinds import KINDS


def render(r: dict[str, Any]) -> str:
    """The report as text: its sections in order, a blank line between two."""
    if r["clusterStack"] is not None:
        return _render_jobs_only(r)
    sections = [
        _render_header(r),
        _render_node_groups(r),
        _render_jobs(r["jobs"], r["crowdedSteps"]),
        _render_images(r["images"]),
        _render_queues(r["queues"]),
        _render_storage(r["storage"]),
        _render_pre_pulls(r.get("prePulls")),
        _render_operations(r["operations"]),
        _render_preflight(r["preflight"]),
        _render_cost(r["cost"]),
        _render_first_step(r["firstStep"]) if r.get("firstStep") is not None else [],
    ]
    return "\n\n".join("\n".join(section) for section in sections if section)


def _render_jobs_only(r: dict[str, Any]) -> str:
    """A jobs-only stack's report as text: its jobs and images, and what it takes from the cluster stack."""
    ref, team = r["clusterStack"], r["team"]
    sections = [
        [
            f"plan of jobs-only stack {r['stack']} (project {r['project']}, region {r['region'] or 'not set'}): its "
            f"jobs run on the cluster of {ref}, as team {team}; it makes no cluster, VPC, node group, queue or storage"
        ]
        + _stack_file_line(r)
        + [f"note: {n}" for n in r.get("unread") or ()],
        [f"node groups of {ref} the jobs are placed for (this stack's copy of its nodeGroups):"]
        + [_render_node_group(g)[0] for g in r["nodeGroups"]],
        _render_jobs(r["jobs"], r["crowdedSteps"], jobs_only=True),
        _render_images(r["images"]),
        _render_pre_pulls(r["prePulls"]),
        [
            "in the team's namespace it also makes what the jobs need: network policies, each job's IAM role, and "
            "the dataset staging, etcd and TensorBoard its jobs use; a private bucket for the jobs' code folders",
            f"from {ref}, read at deploy: team {team}'s namespace, its claim on the shared file system and its "
            "LocalQueue (every job waits there until all of it fits); the jobs use the priority classes that stack "
            "made",
            f"checked at deploy, before any job is created: {ref} has team {team}, is in this stack's region (when "
            "it exports it), and its groups the jobs run on have this copy's instance types, maxSize, labels, taints "
            "and topology",
        ],
        _render_preflight(r["preflight"]),
        [
            f"estimated cost: none per hour of its own (its jobs run on the nodes of {ref}, whose plan shows their "
            "cost); its image builds bill CodeBuild minutes, and ECR, S3 and CloudWatch Logs storage"
        ],
        _render_first_step(r["firstStep"]) if r.get("firstStep") is not None else [],
    ]
    return "\n\n".join("\n".join(section) for section in sections if section)


def _stack_file_line(r: dict[str, Any]) -> list[str]:
    """The stack file the plan was made from (the current folder's, else this repository's: which one was read)."""
    return [f"read from {r['stackFile']}"] if r.get("stackFile") else []


def _render_header(r: dict[str, Any]) -> list[str]:
    """The stack, its cluster and its network."""
    lines = [
        f"plan of stack {r['stack']} (project {r['project']}, region {r['region'] or 'not set'}): cluster "
        f"{r['clusterName']}, Kubernetes {r['kubernetesVersion']}"
    ] + _stack_file_line(r)
    if r["kubernetesVersionNote"]:
        lines.append(f"note: {r['kubernetesVersionNote']}")
    lines.extend(f"note: {n}" for n in r.get("unread") or ())
    net = r["network"]
    if net["kind"] == "new VPC":
        zones = (
            ", ".join(net["zones"]) if net["zones"] else f"{net['zoneCount']} zones (chosen by zone ID at deploy time)"
        )
        lines.append(f"network: new VPC {net['vpcCidr']} in {zones}, NAT gateways: {net['natGateways']}")
    else:
        lines.append(f"network: existing VPC {net['vpcId']}, private subnets {', '.join(net['privateSubnetIds'])}")
    return lines


def _render_node_groups(r: dict[str, Any]) -> list[str]:
    """The node groups section."""
    lines = [
        "node groups:"
        + ("  (cluster-autoscaler scales the worker groups between min and max)" if r["autoscaler"] else "")
    ]
    for g in r["nodeGroups"]:
        lines.extend(_render_node_group(g))
    return lines


def _render_node_group(g: dict[str, Any]) -> list[str]:
    """One node group: its size, capacity and nodes, its Capacity Block, AMI and node repair."""
    where = g["zone"] or f"the zone of subnet {g['subnetId']}"
    gpu = f"{g['gpusPerNode']} x {g['gpuModel']} GPUs" if g["gpusPerNode"] else "no GPU"
    capacity = g["capacityType"] + (f" {g['capacityReservationId']}" if g["capacityReservationId"] else "")
    lines = [
        f"  {g['name']:<12} {', '.join(g['instanceTypes'])}: min {g['minSize']} / desired {g['desiredSize']} / max "
        f"{g['maxSize']}, {capacity}, in {where}; per node {gpu}, {g['efaInterfacesPerNode']} EFA interface(s); "
        f"AMI {g['amiType']}, {g['diskSizeGib']} GiB gp3"
    ]
    if g.get("capacityBlock"):
        lines.append(f"  {'':<12} Capacity Block: {g['capacityBlock']}")
    lines.append(f"  {'':<12} {_ami_line(g)}")
    repair = g.get("nodeRepair")
    if repair is not None:
        limits = ", ".join(f"{k} {v}" for k, v in repair.items() if k not in ("enabled", "overrides"))
        overrides = "; ".join(f"{o['condition']}/{o['reason']}: {o['action']}" for o in repair.get("overrides") or ())
        lines.append(
            f"  {'':<12} node auto repair: {'on' if repair['enabled'] else 'off'}"
            + (f" ({limits})" if limits else "")
            + (f", except {overrides}" if overrides else "")
        )
    return lines


def _render_jobs(jobs: list[dict[str, Any]], crowded: list[dict[str, Any]], jobs_only: bool = False) -> list[str]:
    """The jobs section, by step, then the steps whose jobs a group cannot hold at once."""
    none = (
        "jobs: none: this stack runs nothing on the cluster (a `pulumi up` removes the jobs it made before)"
        if jobs_only
        else "jobs: none (the environment only)"
    )
    lines = [
        "jobs, by step (the jobs of a step start together, side by side, as far as their groups hold them; a job "
        "starts once the jobs in its after completed):"
        if jobs
        else none
    ]
    for j in jobs:
        lines.extend(_render_job(j))
    for c in crowded:
        lines.append(
            f"  step {c['step']} asks group {c['nodeGroup']} for {c['nodes']} nodes at once, more than its maxSize "
            f"{c['maxSize']}: Kueue admits {', '.join(c['jobs'])} one at a time, in the order they reach its queue, "
            "each once the group's nodes are free"
        )
    return lines


def _render_job(j: dict[str, Any]) -> list[str]:
    """One job: its step, size, processes, pod, image and wait; what it runs (its words quoted only where they hold a
    space or a quote: Kubernetes, not a shell, expands its $(VARIABLES)) and where it writes; its health check."""
    size = f"{j['nodes']} node(s)" + (f" ({j['minNodes']}-{j['maxNodes']} elastic)" if KINDS[j["kind"]].elastic else "")
    procs = KINDS[j["kind"]].processes_text(j["processesPerNode"])
    after = f", after {', '.join(j['after'])}" if j["after"] else ""
    data = f", dataset {j['dataset']}" if j["dataset"] else ""
    data = (f" ({j['imageBuild']})" if j["imageBuild"] else "") + data
    waits = (
        f"; pulumi up waits for it: its {j['timeoutHours']:g} h deadline and up to "
        f"{j['queueTimeoutHours']:g} h in the queue"
        if j["waitForCompletion"]
        else ""
    )
    lines = [
        f"  {j['step']}. {j['name']} ({j['kind']}) on {j['nodeGroup']}: {size} x {procs}; per pod "
        f"{j['gpusPerPod']} GPU(s), {j['efaInterfacesPerPod']} EFA interface(s); image {j['image']}{data}{after}"
        f"{waits}"
    ]
    runs = j["runs"]
    program = [runs["script"]] if "script" in runs else runs["command"]
    code = f"; code {runs['code']} at /workspace" if runs["code"] else ""
    words = " ".join(
        w if w and not any(c.isspace() or c in "'\"" for c in w) else shlex.quote(w) for w in [*program, *runs["args"]]
    )
    lines.append(f"     runs {words}{code}; output {j['outputDir']}")
    hc = j["healthCheck"]
    if hc is not None:
        lines.append(f"     all-reduce health check first: {_health_check_threshold(hc)}")
    return lines


def _health_check_threshold(hc: dict[str, Any]) -> str:
    """What a job's all-reduce health check does with the bandwidth it measures."""
    if hc["minBusBandwidthGBps"] is not None and hc["enforce"]:
        return f"fails below {hc['minBusBandwidthGBps']} GB/s"
    return "reports the bandwidth" + (
        f" (threshold {hc['minBusBandwidthGBps']} GB/s, not enforced)" if hc["minBusBandwidthGBps"] is not None else ""
    )


def _render_queues(q: Optional[dict[str, Any]]) -> list[str]:
    """The Kueue section (none without queues): the queue, each flavor, the priorities."""
    if q is None:
        return []
    lines = [
        f"queues (Kueue): every job waits in {q['localQueue']} -> ClusterQueue {q['clusterQueue']} "
        f"({q['queueingStrategy']}) until all of it fits, then starts whole; an admitted job whose pods "
        f"do not all run within {q['podsReadyTimeoutSeconds']} s is requeued (backoff "
        f"{q['requeueBackoffSeconds'][0]}-{q['requeueBackoffSeconds'][1]} s)"
    ]
    for f in q["flavors"]:
        lines.extend(_render_flavor(f))
    lines.append(
        "  priorities (a job outranks the jobs that wait for it): "
        + ", ".join(f"{job} {p['value']}" for job, p in q["priorities"].items())
    )
    for name, t in (q.get("teams") or {}).items():
        nodes = ", ".join(f"{n} {group}" for group, n in t["nodes"].items())
        lends = ("may borrow" if t["mayBorrow"] else "never borrows") + (
            ", lends its idle share" if t["mayLend"] else ", keeps its idle share"
        )
        lines.append(
            f"  team {name}: namespace {t['namespace']}, queue {t['localQueue']} -> ClusterQueue {t['clusterQueue']} "
            f"in cohort {q['cohort']}; quota {nodes} node(s); {lends}"
        )
    return lines


def _render_flavor(f: dict[str, Any]) -> list[str]:
    """One Kueue flavor: its quota, topology and admission check."""
    quota = ", ".join(f"{v} {k}" for k, v in f["quota"].items() if v not in ("0", "0Mi"))
    lines = [f"  flavor {f['name']} ({f['nodeGroup']}, quota = maxSize {f['maxSize']} nodes): {quota}"]
    if "topology" in f:
        t = f["topology"]
        lines.append(
            f"    topology-aware (Topology {t['name']}: {' > '.join(t['levels'])}): a job's pods "
            f"share {t['podsPrefer']}"
        )
    if "admissionCheck" in f:
        c = f["admissionCheck"]
        lines.append(
            f"    admission check {c['name']} (the group autoscales): Kueue reserves the quota, asks the "
            "cluster autoscaler for all of the job's nodes in one ProvisioningRequest "
            f"({c['provisioningClass']}), places the pods on the nodes once it is Provisioned; a request that "
            "fails or whose booking expires is retried (backoff "
            f"{c['retryBackoffSeconds'][0]}-{c['retryBackoffSeconds'][1]} s), the job holding nothing meanwhile"
        )
    return lines


def _render_storage(st: dict[str, Any]) -> list[str]:
    """The shared file system and its claim, then each dataset: where it comes from and where the jobs find it."""
    if st["backend"] == "fsx":
        lines = [
            f"storage: FSx for Lustre {st['capacityGib']} GiB at {st['throughputPerTib']} MB/s/TiB"
            f"{', EFA' if st['efa'] else ''} in {st['zone'] or 'subnet ' + str(st['subnetId'])} (from "
            f"{st['zoneFrom']}), linked to {st['dataRepository']}; claim {st['namespace']}/{st['claim']}"
        ]
    else:
        lines = [
            f"storage: EFS ({st['throughputMode']} throughput) in {st['zone']}; claim {st['namespace']}/{st['claim']}"
        ]
    for name, d in st["datasets"].items():
        how = "imported by the file system from S3" if d["imported"] else "unpacked there once by a staging Job"
        lines.append(f"  dataset {name}: {d['source']} at {d['dataDir']} ({how})")
    return lines


def _render_images(images: list[dict[str, Any]]) -> list[str]:
    """Where each image comes from."""
    if not images:
        return ["images: none (no pod of this stack runs one)"]
    lines = ["images (CodeBuild builds each folder; a folder the project lacks is the one shipped of that name):"]
    for i in images:
        if i["builtFrom"] is None:
            lines.append(f"  {i['name']}: prebuilt {i['prebuilt']}")
            lines.extend(f"    warning: {w}" for w in i.get("warnings", []))
        else:
            whose = "shipped with this project" if i["shipped"] else "the project's own"
            lines.append(f"  {i['name']}: built from {i['builtFrom']} ({whose})")
    return lines


def _render_pre_pulls(pre_pulls: Optional[list[dict[str, Any]]]) -> list[str]:
    """The images pre-pulled onto node groups (none when no image is)."""
    if not pre_pulls:
        return []
    return [
        "pre-pulled (a DaemonSet pulls the image onto the group's nodes as they join, beside the storage and the "
        "Jobs `pulumi up` waits for): "
        + "; ".join(f"{p['image']} on {p['group']} ({', '.join(p['neededBy'])})" for p in pre_pulls)
    ]


def _render_operations(ops: dict[str, Any]) -> list[str]:
    """Monitoring, metrics, the dashboard and the idle-GPU alarms."""
    lines = [
        "operations: EKS node monitoring agent on every node; "
        + (
            "Container Insights GPU/EFA metrics (amazon-cloudwatch-observability)"
            if ops["metrics"]
            else "no Container Insights metrics (operations.metrics is off)"
        )
        + ("; a CloudWatch dashboard (output dashboardUrl)" if ops["dashboard"] else "")
    ]
    for a in ops["idleGpuAlarms"]:
        lines.append(
            f"  idle-GPU alarm on {a['nodeGroup']}: every GPU below {a['utilizationPercent']:g}% for {a['minutes']} "
            f"min; guards {money(a['guardsPerHour'])} ({a['maxNodes']} node(s) at most"
            + (
                "; the Capacity Block's instances are paid up front, so only their root volumes)"
                if a.get("paidUpFront")
                else ")"
            )
            + (f"; mails {ops['alarmEmail']}" if ops["alarmEmail"] else "")
        )
    return lines


def _render_preflight(pf: dict[str, Any]) -> list[str]:
    """What preflight will check on the deploying machine and in the account."""
    lines = [
        "preflight will check, where `pulumi up` runs and in the account"
        + (
            ""
            if pf["enabled"]
            else " (preflight.enabled is false: `pulumi up` skips it; python -m stacks.preflight still runs it)"
        )
        + ":"
    ]
    lines.extend(f"  - {c['key']}: {c['check']}" for c in pf["checks"])
    return lines


def _render_cost(cost: dict[str, Any]) -> list[str]:
    """The estimated cost, line by line, with its notes."""
    lines = [f"estimated cost: running {money(cost['runningPerHour'])}, idle {money(cost['idlePerHour'])}"]
    for c in cost["lines"]:
        lines.append(
            f"  {money(c['runningPerHour'])} running, {money(c['idlePerHour'])} idle: {c['what']} [{c['basis']}]"
        )
    lines.extend(f"  note: {n}" for n in cost["notes"])
    return lines


def _render_first_step(fs: dict[str, Any]) -> list[str]:
    """The modelled path to the first training step, or why it is not modelled."""
    if "note" in fs:
        return [f"first training step: not modelled ({fs['note']})"]
    floor = fs["floor"]
    lines = [
        f"first training step (modelled): {fs['job']}'s pods start {fs['minutes']:.1f} min after `pulumi up` begins, "
        f"{fs['ratio']:.2f} x the floor of {fs['floorMinutes']:.1f} min (the EKS cluster {floor['cluster']:g}, one "
        f"node group {floor['nodeGroup']:g}, the pods' start {floor['podsStart']:g}); the path that sets it, each "
        "step starting when the one before it is done (minute it starts, minutes it takes, resource):"
    ]
    width = max(len(s["type"]) for s in fs["path"])
    for s in fs["path"]:
        lines.append(f"  {s['start']:5.2f} +{s['minutes']:5.2f}  {s['type']:<{width}}  {s['name']}")
    lines[-1] += f" ({fs['path'][-1]['what']})"
    lines.append(f"  durations: {fs['durations']} (each with its source, or why it is an estimate)")
    return lines


def _ami_line(g: dict[str, Any]) -> str:
    """The group's AMI release and how its nodes roll, in one line."""
    ami = g["amiRelease"]
    driver = f", NVIDIA driver {ami['nvidiaDriver']}" if ami["nvidiaDriver"] and g["gpusPerNode"] else ""
    tag = f" ({ami['release']}{driver})" if ami["release"] else ""
    release = (
        f"AMI release {ami['releaseVersion']}{tag}, pinned by amiRelease (a change rolls the nodes)"
        if ami["pinned"]
        else f"AMI release {ami['releaseVersion']}{tag} when created, then kept until its launch template changes "
        "(set amiRelease to move)"
    )
    roll = (
        "a roll replaces one node at a time, one pod of a job at a time (an elastic job down to its minNodes)"
        if g["updateStrategy"] == "rolling"
        else f"a roll waits for the group's jobs (EKS fails it after {EVICTION_LIMIT_MINUTES} minutes while they run)"
    )
    eks = g["eksUpdateStrategy"]
    if eks["why"]:
        roll += f"; EKS strategy {eks['name']} ({eks['why']}: each node goes before its replacement launches)"
    return f"{release}; {roll}"


__all__ = ["render"]
