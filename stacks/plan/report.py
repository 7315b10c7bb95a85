"""``python -m stacks.plan --stack NAME [--json] [--stack-file PATH] [--from OLD]``: what a stack will create and cost,
offline; with ``--from``, what changing a running stack from OLD does instead
(:mod:`stacks.plan.upgrade_text`).

No AWS call and no credentials. The stack file is validated with the same rules and messages as ``pulumi up`` (exit
status 2 on a bad configuration), planned and printed (:func:`report`, :func:`render`): the node groups, the jobs by
step, the queues, the shared storage, what preflight will check, the cost running and idle, and the modelled path to
the first training step (:func:`model_first_step`, :mod:`stacks.plan.timeline`). Spot is priced at an assumed or
configured discount, and Capacity Blocks as prepaid. ``--json`` prints the same as JSON.

What needs the account is not known offline: the zones a zone count resolves to, whether a zone exists, offerings,
quotas and reservations. Preflight checks those, and ``pulumi up`` runs it first."""

import json
from typing import Any, Optional, Sequence

from components.catalog import PRICES_AS_OF, SOURCES
from components.catalog.timings import CREATION, PODS_START
from components.catalog.torch import torch_build_label
from stacks.bundle import SHIPPED, shipped
from stacks.cli import EXIT_OK, add_stack_options, command, load_stack, parser_for
from stacks.costs import estimate, money, node_hour
from stacks.kinds import KINDS
from stacks.plan import NodeGroupPlan, Plan, job_steps
from stacks.plan.checklist import planned_checks
from stacks.plan.minors import unpinned_note
from stacks.plan.prepull import prepulls
from stacks.plan.timeline import CLUSTER_TYPE, NODE_GROUP_TYPE, FirstStep, first_step
from stacks.plan.upgrade_text import compare_stacks

#: Where the prices of the estimate come from.
PRICE_REGION = "us-east-1"


def _group(g: NodeGroupPlan) -> dict[str, Any]:
    facts = g.types[0]
    out: dict[str, Any] = {
        "name": g.name,
        "key": g.path,
        "instanceTypes": g.instance_types,
        "minSize": g.min_size,
        "desiredSize": g.desired_size,
        "maxSize": g.max_size,
        "capacityType": g.capacity_type,
        "capacityReservationId": g.capacity_reservation_id,
        "zone": g.zone or (None if g.subnet_id else "every zone of the VPC"),
        "subnetId": g.subnet_id,
        "gpusPerNode": g.profile.gpus,
        "gpuModel": facts.gpu_model,
        "efaInterfacesPerNode": g.profile.efa_interfaces,
        "amiType": g.profile.ami_type,
        "diskSizeGib": g.disk_size_gib,
        "nodeRepair": dict(g.repair) if g.repair is not None else None,
        "amiRelease": {
            "releaseVersion": g.ami.release_version,
            "release": g.ami.release,
            "pinned": g.ami.pinned,
            "nvidiaDriver": "{}.{}.{:02d}".format(*g.ami.nvidia_driver) if g.ami.nvidia_driver else None,
        },
        "updateStrategy": g.update_strategy,
        "eksUpdateStrategy": {
            "name": g.node_update.name,
            "what": g.node_update.what,
            "why": g.no_surge.why if g.no_surge is not None else None,
        },
    }
    if g.capacity_type == "CAPACITY_BLOCK":
        out["capacityBlock"] = (
            f"0 nodes until the block starts, then min {g.min_size} / desired {g.desired_size} / max {g.max_size} (a "
            "scheduled action at its start); EKS scales the group to 0 40 minutes before the end; the jobs on the "
            "group are created by the first `pulumi up` after the start"
        )
    return out


def _ami_line(g: dict[str, Any]) -> str:
    """The group's AMI release and how its nodes roll, in one line."""
    ami = g["amiRelease"]
    driver = f", NVIDIA driver {ami['nvidiaDriver']}" if ami["nvidiaDriver"] and g["gpusPerNode"] else ""
    tag = f" ({ami['release']}{driver})" if ami["release"] else ""
    release = (
        f"AMI release {ami['releaseVersion']}{tag}, pinned by amiRelease (a change rolls the nodes)"
        if ami["pinned"]
        else f"AMI release {ami['releaseVersion']}{tag} when created, then kept (set amiRelease to move)"
    )
    roll = (
        "a roll replaces one node at a time, one pod of a job at a time (an elastic job down to its minNodes)"
        if g["updateStrategy"] == "rolling"
        else "a roll waits for the group's jobs (EKS fails it after 15 minutes while they run)"
    )
    eks = g["eksUpdateStrategy"]
    if eks["why"]:
        roll += f"; EKS strategy {eks['name']} ({eks['why']}: each node goes before its replacement launches)"
    return f"{release}; {roll}"


def _crowded_steps(plan: Plan) -> list[dict[str, Any]]:
    """Each step whose jobs on one worker group need more nodes at once than the group's ``maxSize`` (a worker pod
    takes a whole node; the system group's jobs take a share of one): Kueue admits them in turn, as the quota (the
    group at its ``maxSize``) frees."""
    steps = job_steps(plan)
    asked: dict[tuple[int, str], list[str]] = {}
    for name, job in plan.jobs.items():
        if job.group.name != plan.system.name:
            asked.setdefault((steps[name], job.group.name), []).append(name)
    out = []
    for (step, group_name), names in sorted(asked.items()):
        group = plan.jobs[names[0]].group
        nodes = sum(plan.jobs[n].nodes for n in names)
        if len(names) > 1 and nodes > group.max_size:
            out.append(
                {"step": step, "nodeGroup": group_name, "jobs": names, "nodes": nodes, "maxSize": group.max_size}
            )
    return out


def _jobs(plan: Plan) -> list[dict[str, Any]]:
    out = []
    steps = job_steps(plan)
    for name in sorted(plan.jobs, key=lambda n: steps[n]):  # stable: config order within a step
        job = plan.jobs[name]
        hc = job.health_check
        out.append(
            {
                "step": steps[name],
                "name": job.name,
                "kind": job.kind,
                "nodeGroup": job.group.name,
                "nodes": job.nodes,
                "minNodes": job.min_nodes,
                "maxNodes": job.max_nodes,
                "processesPerNode": job.procs_per_node,
                "processesPerPod": 1 if KINDS[job.kind].one_process_per_pod else job.procs_per_node,
                "gpusPerPod": job.placement["gpus"],
                "efaInterfacesPerPod": job.placement["efa_devices"],
                "image": job.image.name,
                "imageBuild": torch_build_label(job.image.torch_build),
                "dataset": job.dataset,
                "after": list(job.after),
                "outputDir": job.output_dir,
                "timeoutHours": job.config.timeout_hours,
                "waitForCompletion": job.config.wait_for_completion,
                "queueTimeoutHours": job.config.queue_timeout_hours,
                "healthCheck": None
                if hc is None
                else {
                    "enforce": hc.config.enforce,
                    "minBusBandwidthGBps": hc.threshold_gbytes_per_s,
                    "maxBytes": hc.message_bytes,
                },
            }
        )
    return out


def _queues(plan: Plan) -> Optional[dict[str, Any]]:
    """Kueue's queues, quotas and priorities (:mod:`stacks.plan.admission`), with teams their queues; ``None`` without
    jobs and teams."""
    a = plan.admission
    if a is None:
        return None
    return {
        "localQueue": f"{plan.config.storage.namespace}/{a.local_queue}",
        "clusterQueue": a.cluster_queue,
        "queueingStrategy": a.queueing_strategy,
        "podsReadyTimeoutSeconds": a.pods_ready_timeout_s,
        "requeueBackoffSeconds": [a.requeue_backoff_base_s, a.requeue_backoff_max_s],
        "flavors": [
            {
                "name": f.name,
                "nodeGroup": f.path,
                "maxSize": f.max_size,
                "quota": dict(f.quota),
                "nodeLabels": dict(f.node_labels),
                "nodeTaints": [dict(t) for t in f.node_taints],
                **(
                    {}
                    if f.topology is None
                    else {
                        "topology": {
                            "name": f.topology.name,
                            "levels": list(f.topology.levels),
                            "podsPrefer": f"one {f.topology.placement_level} (else the level above)",
                        }
                    }
                ),
                **(
                    {}
                    if not f.provisioned or a.provisioning is None
                    else {
                        "admissionCheck": {
                            "name": a.provisioning.check,
                            "provisioningClass": a.provisioning.provisioning_class,
                            "retryBackoffSeconds": [a.provisioning.backoff_base_s, a.provisioning.backoff_max_s],
                        }
                    }
                ),
            }
            for f in a.flavors
        ],
        "priorities": {
            **{job: {"class": c, "value": a.priorities[c]} for job, c in a.job_priority.items()},
            **{f"{job}-allreduce": {"class": c, "value": a.priorities[c]} for job, c in a.check_priority.items()},
        },
        **(
            {}
            if a.cohort is None
            else {
                "cohort": a.cohort,
                "ownQuota": {f: dict(q) for f, q in a.own_quota.items()},
                "teams": {
                    t.name: {
                        "namespace": t.namespace,
                        "localQueue": f"{t.namespace}/{t.local_queue}",
                        "clusterQueue": t.cluster_queue,
                        "nodes": dict(t.nodes),
                        "quota": {f: dict(q) for f, q in t.quota.items()},
                        "mayBorrow": t.may_borrow,
                        "mayLend": t.may_lend,
                    }
                    for t in a.teams
                },
            }
        ),
    }


def _storage(plan: Plan) -> dict[str, Any]:
    st = plan.storage
    cfg = plan.config.storage
    out: dict[str, Any] = {
        "backend": st.backend,
        "namespace": cfg.namespace,
        "claim": cfg.pvc_name,
        "fileSystemId": cfg.file_system_id,
        "datasets": {
            d.name: {"source": d.config.source, "dataDir": d.data_dir, "imported": d.imported}
            for d in plan.datasets.values()
        },
    }
    if st.is_fsx and st.fsx is not None:
        out.update(
            zone=st.zone,
            subnetId=st.subnet_id,
            zoneFrom=st.zone_key,
            capacityGib=st.fsx.storage_capacity_gib,
            throughputPerTib=st.fsx.throughput_per_tib,
            efa=st.fsx.efa,
            dataRepository=st.fsx.data_repository.s3_path or "a bucket the stack creates",
        )
    else:
        out.update(
            zone="every zone of the VPC (a mount target per private subnet)",
            capacity=cfg.capacity,
            throughputMode=cfg.throughput_mode,
        )
    return out


def _images(plan: Plan) -> list[dict[str, Any]]:
    """Each image: the folder it is built from (the project's own, or one shipped with this project), or the
    prebuilt image it pulls."""
    out = []
    for image in plan.images.values():
        folder = image.context.resolve() if image.context is not None else None
        out.append(
            {
                "name": image.variant,
                "builtFrom": None if folder is None else str(folder),
                "shipped": folder is not None and any(folder == shipped(f).resolve() for f in SHIPPED),
                "prebuilt": image.prebuilt,
            }
        )
    return out


def _prepulls(plan: Plan) -> list[dict[str, Any]]:
    """The images pulled onto their groups' nodes ahead of their pods (:mod:`stacks.plan.prepull`)."""
    return [
        {"group": p.group, "image": p.image, "command": list(p.command), "neededBy": list(p.needed_by)}
        for p in prepulls(plan)
    ]


def _operations(plan: Plan) -> dict[str, Any]:
    ops = plan.operations
    alarms = []
    for a in ops.idle_alarms:
        hour = node_hour(plan.groups[a.group])
        alarms.append(
            {
                "nodeGroup": a.group,
                "minutes": a.minutes,
                "utilizationPercent": a.utilization_percent,
                # what the group's nodes cost per hour while they idle at its maximum size: what the alarm guards
                "guardsPerHour": None if hour is None else round(hour * a.max_nodes, 4),
                "maxNodes": a.max_nodes,
            }
        )
    return {
        "nodeMonitoringAgent": True,
        "metrics": ops.metrics,
        "dashboard": ops.dashboard,
        "idleGpuAlarms": alarms,
        "alarmEmail": ops.alarm_email,
    }


#: Where the model's durations come from (each with its source or why it is an estimate).
DURATIONS = "components/catalog/timings.py"


def first_step_report(first: Optional[FirstStep], note: Optional[str] = None) -> Optional[dict[str, Any]]:
    """The modelled path to the first training step as JSON-ready data (``None``: not modelled; with ``note``: why)."""
    if first is None:
        return None if note is None else {"note": note}
    return {
        "job": first.job,
        "minutes": round(first.minutes, 2),
        "floorMinutes": round(first.floor, 2),
        "ratio": round(first.ratio, 3),
        "floor": {
            "cluster": CREATION[CLUSTER_TYPE].minutes,
            "nodeGroup": CREATION[NODE_GROUP_TYPE].minutes,
            "podsStart": PODS_START.minutes,
        },
        "path": [
            {"start": round(s.start, 2), "minutes": round(s.minutes, 2), "type": s.type, "name": s.name, "what": s.what}
            for s in first.path
        ],
        "durations": DURATIONS,
    }


def report(
    plan: Plan, region: Optional[str], first: Optional[FirstStep] = None, first_note: Optional[str] = None
) -> dict[str, Any]:
    """The plan as a JSON-ready mapping (what ``--json`` prints); ``first`` the modelled path to the first training
    step (:func:`stacks.plan.timeline.first_step`), or ``first_note`` why there is none."""
    cfg = plan.config
    if cfg.cluster.stack_reference is not None:
        return _jobs_only_report(plan, region, first_step_report(first, first_note))
    network: dict[str, Any]
    if cfg.network is not None:
        network = {
            "kind": "new VPC",
            "vpcCidr": cfg.network.vpc_cidr,
            "zones": cfg.network.availability_zones,
            "zoneCount": cfg.network.zone_count,
            "natGateways": cfg.network.nat_gateways,
        }
    else:
        assert cfg.existing_vpc is not None
        network = {
            "kind": "existing VPC",
            "vpcId": cfg.existing_vpc.vpc_id,
            "privateSubnetIds": list(cfg.existing_vpc.private_subnet_ids),
        }
    cost = estimate(plan)
    notes = [
        f"{PRICE_REGION} list prices (instances: On-Demand as published on {PRICES_AS_OF}, "
        "components/catalog/instances.py; EKS, NAT, EBS, KMS, FSx: components/catalog/prices.py)"
        + (f"; the stack is in {region}, where prices differ" if region and region != PRICE_REGION else ""),
        "running: desired sizes; idle: minimum sizes",
        "usage-dependent costs (data transfer, NAT data processing, EFS storage and throughput, S3, ECR, logs, "
        "CodeBuild minutes) are extra",
    ]
    if any(g.capacity_type == "SPOT" for g in plan.groups.values()):
        notes.append(
            "spot prices are estimates: the On-Demand price less spotDiscount (default an assumed 50%; "
            f"{SOURCES['ec2-spot-advisor'].url} lists each type's recent saving; preflight reports the current price)"
        )
    return {
        "stack": cfg.stack,
        "project": cfg.project,
        "region": region,
        "clusterStack": None,
        "team": None,
        "clusterName": cfg.cluster_name,
        "kubernetesVersion": cfg.cluster.kubernetes_version,
        "kubernetesVersionNote": unpinned_note(plan),
        "network": network,
        "nodeGroups": [_group(g) for g in plan.all_groups],
        "autoscaler": plan.autoscale,
        "jobs": _jobs(plan),
        "crowdedSteps": _crowded_steps(plan),
        "images": _images(plan),
        "queues": _queues(plan),
        "storage": _storage(plan),
        "prePulls": _prepulls(plan),
        "operations": _operations(plan),
        "preflight": {
            "enabled": cfg.preflight.enabled,
            "checks": [{"key": k, "check": what} for k, what in planned_checks(plan)],
        },
        "firstStep": first_step_report(first, first_note),
        "cost": {
            "currency": "USD",
            "runningPerHour": cost.running,
            "idlePerHour": cost.idle,
            "lines": [
                {"what": c.what, "runningPerHour": _round(c.running), "idlePerHour": _round(c.idle), "basis": c.basis}
                for c in cost.lines
            ],
            "notes": notes,
        },
    }


def _jobs_only_report(plan: Plan, region: Optional[str], first_step: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A jobs-only stack's plan: what it registers (its jobs, their images and pre-pulls). The cluster, its network,
    queues, storage, operations and cost are the referenced stack's, and its plan shows them."""
    cfg = plan.config
    return {
        "stack": cfg.stack,
        "project": cfg.project,
        "region": region,
        "clusterStack": cfg.cluster.stack_reference,
        "team": cfg.cluster.team,
        "clusterName": None,
        "kubernetesVersion": None,
        "kubernetesVersionNote": None,
        "network": None,
        # the stack's copy of the cluster stack's worker groups: the jobs are placed for them
        "nodeGroups": [_group(g) for g in plan.groups.values()],
        "autoscaler": plan.autoscale,
        "jobs": _jobs(plan),
        "crowdedSteps": _crowded_steps(plan),
        "images": _images(plan),
        "queues": None,
        "storage": None,
        "prePulls": _prepulls(plan),
        "operations": None,
        "preflight": {
            "enabled": cfg.preflight.enabled,
            "checks": [{"key": k, "check": what} for k, what in planned_checks(plan)],
        },
        "firstStep": first_step,
        "cost": {"currency": "USD", "runningPerHour": 0.0, "idlePerHour": 0.0, "lines": [], "notes": []},
    }


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 4)


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
        ],
        [f"node groups of {ref} the jobs are placed for (this stack's copy of its nodeGroups):"]
        + [_render_node_group(g)[0] for g in r["nodeGroups"]],
        _render_jobs(r["jobs"], r["crowdedSteps"]),
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


def _render_header(r: dict[str, Any]) -> list[str]:
    """The stack, its cluster and its network."""
    lines = [
        f"plan of stack {r['stack']} (project {r['project']}, region {r['region'] or 'not set'}): cluster "
        f"{r['clusterName']}, Kubernetes {r['kubernetesVersion']}"
    ]
    if r["kubernetesVersionNote"]:
        lines.append(f"note: {r['kubernetesVersionNote']}")
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


def _render_jobs(jobs: list[dict[str, Any]], crowded: list[dict[str, Any]]) -> list[str]:
    """The jobs section, by step, then the steps whose jobs a group cannot hold at once."""
    lines = [
        "jobs, by step (the jobs of a step start together, side by side, as far as their groups hold them; a job "
        "starts once the jobs in its after completed):"
        if jobs
        else "jobs: none (the environment only)"
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
    """One job: its step, size, processes, pod, image and wait, then its health check."""
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
    lines = ["images (CodeBuild builds each folder; a folder the project lacks is the one shipped of that name):"]
    for i in images:
        if i["builtFrom"] is None:
            lines.append(f"  {i['name']}: prebuilt {i['prebuilt']}")
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
            else "no metrics add-on"
        )
        + ("; a CloudWatch dashboard (output dashboardUrl)" if ops["dashboard"] else "")
    ]
    for a in ops["idleGpuAlarms"]:
        lines.append(
            f"  idle-GPU alarm on {a['nodeGroup']}: every GPU below {a['utilizationPercent']:g}% for {a['minutes']} "
            f"min; guards {money(a['guardsPerHour'])} ({a['maxNodes']} node(s) at most)"
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


@command
def main(argv: Optional[Sequence[str]] = None, *, prog: Optional[str] = None) -> int:
    """Print the plan; exit status 0, or 2 when the stack file cannot be read or its configuration is invalid."""
    parser = parser_for(
        "plan",
        prog,
        "Validate a stack offline (the same messages as `pulumi up`) and print what it will create and "
        "cost: node groups, jobs (with the deadline and queue time of each one `pulumi up` waits for), the folder "
        "each image is built from, storage, the "
        "preflight checks, the estimated hourly cost, and the modelled path to the first training step (`firstStep` "
        "in --json). No AWS call. Exit 0, or 2 on a configuration error.",
    )
    add_stack_options(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--from",
        dest="old",
        metavar="OLD",
        help="compare with the running stack's earlier stack file (a path, or a git revision of Pulumi.<stack>.yaml) "
        "and print only what the upgrade does: the Kubernetes minor, the node groups that roll, the jobs they stop, "
        "the add-on pins that move, the expected duration; a minor skipped or gone back exits 2",
    )
    args = parser.parse_args(argv)

    config, plan = load_stack(args)
    if args.old is not None:
        print(compare_stacks(args.old, args.stack, args.stack_file, plan, as_json=args.json))
        return EXIT_OK
    first, note = model_first_step(args.stack, args.stack_file, config, plan)
    r = report(plan, plan.config.region, first, note)
    print(json.dumps(r, indent=2) if args.json else render(r))
    return EXIT_OK


def model_first_step(
    stack: str, stack_file: Any, config: dict[str, Any], plan: Plan
) -> tuple[Optional[FirstStep], Optional[str]]:
    """The modelled first training step of the stack (its program evaluated offline), or why there is none."""
    from stacks.mocked import evaluate_config

    if plan.config.cluster.stack_reference is not None:
        return None, (
            f"a jobs-only stack: its jobs start on the cluster of {plan.config.cluster.stack_reference}, whose plan "
            "shows that cluster's path"
        )
    try:
        evaluation = evaluate_config(stack, stack_file, config)
    except Exception as exc:  # noqa: BLE001 - the program failed offline: the rest of the plan still stands
        return None, f"the program failed under the offline mocks: {type(exc).__name__}: {exc}"
    first = first_step(plan, evaluation.registrations)
    if first is None:
        return None, "no training job is registered: the stack has none, or they wait for a Capacity Block"
    return first, None


__all__ = ["first_step_report", "main", "model_first_step", "render", "report"]
