"""``python -m stacks.plan --stack NAME [--json] [--stack-file PATH] [--from OLD]``: what a stack will create and cost,
offline; with ``--from``, what changing a running stack from OLD does instead
(:mod:`stacks.plan.upgrade_text`).

No AWS call and no credentials. The stack file is validated with the same rules and messages as ``pulumi up`` (exit
status 2 on a bad configuration), planned (:func:`report`) and printed (:mod:`stacks.plan.report_text`): the node
groups, the jobs by step, the queues, the shared storage, what preflight will check, the cost running and idle, and
the modelled path to the first training step (:func:`model_first_step`, :mod:`stacks.plan.timeline`). Spot is
priced at an assumed or configured discount, and Capacity Blocks as prepaid. ``--json`` prints the same as JSON.

What needs the account is not known offline: the zones a zone count resolves to, whether a zone exists, offerings,
quotas and reservations. Preflight checks those, and ``pulumi up`` runs it first."""

import json
from pathlib import Path
from typing import Any, Optional, Sequence

from components.catalog import PRICES_AS_OF, SOURCES
from components.catalog.timings import CREATION, PODS_START
from components.catalog.torch import torch_build_label
from stacks.bundle import SHIPPED, shipped
from stacks.cli import EXIT_OK, add_stack_options, command, load_stack, parser_for
from stacks.costs import estimate, node_hour
from stacks.kinds import KINDS
from stacks.plan import NodeGroupPlan, Plan, job_steps
from stacks.plan.checklist import planned_checks
from stacks.plan.images import image_warnings
from stacks.plan.minors import unpinned_note
from stacks.plan.prepull import prepulls
from stacks.plan.report_text import render
from stacks.plan.timeline import CLUSTER_TYPE, NODE_GROUP_TYPE, FirstStep, first_step
from stacks.plan.unread import unread_entries
from stacks.plan.upgrade_text import compare_stacks
from stacks.stackfile import stack_file_for

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
                "runs": {
                    "script" if job.config.script else "command": job.config.script or list(job.config.command or []),
                    "args": list(job.config.args),
                    "code": job.config.code,
                },
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
    used = {i.name for i in plan.used_images}
    for image in (i for i in plan.images.values() if i.name in used):
        folder = image.context.resolve() if image.context is not None else None
        out.append(
            {
                "name": image.variant,
                "builtFrom": None if folder is None else str(folder),
                "shipped": folder is not None and any(folder == shipped(f).resolve() for f in SHIPPED),
                "prebuilt": image.prebuilt,
                "warnings": image_warnings(image, plan.jobs.values()),
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
                # a Capacity Block's instances are paid with the block: the alarm guards its root volumes only
                "paidUpFront": plan.groups[a.group].capacity_type == "CAPACITY_BLOCK",
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
    plan: Plan,
    region: Optional[str],
    first: Optional[FirstStep] = None,
    first_note: Optional[str] = None,
    stack_file: Optional[Path] = None,
) -> dict[str, Any]:
    """The plan as a JSON-ready mapping (what ``--json`` prints); ``first`` the modelled path to the first training
    step (:func:`stacks.plan.timeline.first_step`), or ``first_note`` why there is none; ``stack_file`` the file the
    configuration was read from."""
    cfg = plan.config
    if cfg.jobs_only:
        r = _jobs_only_report(plan, region, first_step_report(first, first_note))
        return {"stackFile": None if stack_file is None else str(stack_file), **r}
    return {
        "stackFile": None if stack_file is None else str(stack_file),
        "stack": cfg.stack,
        "project": cfg.project,
        "region": region,
        "clusterStack": None,
        "team": None,
        "clusterName": cfg.cluster_name,
        "kubernetesVersion": cfg.cluster.kubernetes_version,
        "unread": unread_entries(plan),
        "kubernetesVersionNote": unpinned_note(plan),
        "network": _network(plan),
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
        "cost": _cost(plan, region),
    }


def _network(plan: Plan) -> dict[str, Any]:
    """The stack's VPC: the one it makes, or the one it is given."""
    cfg = plan.config
    if cfg.network is not None:
        return {
            "kind": "new VPC",
            "vpcCidr": cfg.network.vpc_cidr,
            "zones": cfg.network.availability_zones,
            "zoneCount": cfg.network.zone_count,
            "natGateways": cfg.network.nat_gateways,
        }
    assert cfg.existing_vpc is not None
    return {
        "kind": "existing VPC",
        "vpcId": cfg.existing_vpc.vpc_id,
        "privateSubnetIds": list(cfg.existing_vpc.private_subnet_ids),
    }


def _cost(plan: Plan, region: Optional[str]) -> dict[str, Any]:
    """The hourly estimate, running and idle, line by line, with what it leaves out."""
    cost = estimate(plan)
    notes = [
        f"{PRICE_REGION} list prices (instances: On-Demand as published on {PRICES_AS_OF}, "
        "components/catalog/instances.py; EKS, NAT, EBS, KMS, FSx: components/catalog/prices.py)"
        + (f"; the stack is in {region}, where prices differ" if region and region != PRICE_REGION else ""),
        "running: desired sizes, or what the jobs of one step ask where the autoscaler grows a group; idle: minimum "
        "sizes",
        "usage-dependent costs (data transfer, NAT data processing, EFS storage and throughput, S3, ECR, logs, "
        "CodeBuild minutes) are extra",
    ]
    if any(g.capacity_type == "SPOT" for g in plan.groups.values()):
        notes.append(
            "spot prices are estimates: the On-Demand price less spotDiscount (default an assumed 50%; "
            f"{SOURCES['ec2-spot-advisor'].url} lists each type's recent saving; preflight reports the current price)"
        )
    return {
        "currency": "USD",
        "runningPerHour": cost.running,
        "idlePerHour": cost.idle,
        "lines": [
            {"what": c.what, "runningPerHour": _round(c.running), "idlePerHour": _round(c.idle), "basis": c.basis}
            for c in cost.lines
        ],
        "notes": notes,
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
        "unread": unread_entries(plan),
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
        "and print only what the upgrade does: the Kubernetes minor, the node groups that roll and the jobs on them, "
        "the add-on pins that move, the changes to the data, the expected duration; a minor skipped or gone back, or "
        "another region, VPC or subnet block exits 2",
    )
    args = parser.parse_args(argv)

    config, plan = load_stack(args)
    if args.old is not None:
        print(compare_stacks(args.old, args.stack, args.stack_file, plan, as_json=args.json))
        return EXIT_OK
    first, note = model_first_step(args.stack, args.stack_file, config, plan)
    r = report(plan, plan.config.region, first, note, (args.stack_file or stack_file_for(args.stack)).resolve())
    print(json.dumps(r, indent=2) if args.json else render(r))
    return EXIT_OK


def model_first_step(
    stack: str, stack_file: Any, config: dict[str, Any], plan: Plan
) -> tuple[Optional[FirstStep], Optional[str]]:
    """The modelled first training step of the stack (its program evaluated offline), or why there is none."""
    from stacks.mocked import evaluate_config

    if plan.config.jobs_only:
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
        return None, (
            "no training job is registered: the stack has none, they wait for a Capacity Block, or each waits for "
            "another job (after)"
        )
    return first, None


__all__ = ["first_step_report", "main", "model_first_step", "render", "report"]
