"""The stack outputs: ids, the kubeconfig, and the commands to follow the jobs."""

import functools
import shlex
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws

from components import BenchmarkCollector
from components.conventions import JOB_LABEL
from components.workloads.waits import await_seconds, deadline_seconds, queue_seconds
from stacks.bundle import TOOLBOX_IMAGE
from stacks.config.benchmark import BenchmarkSettings
from stacks.environment import Environment, token_credentials
from stacks.kinds import KINDS
from stacks.last_update import (
    CLUSTER_NAME_OUTPUT,
    CONFIG_OUTPUT,
    REGION_OUTPUT,
    VERSIONS_OUTPUT,
    ZONES_OUTPUT,
    configuration_output,
    versions_output,
)
from stacks.plan import JobPlan, Plan
from stacks.plan.admission import placement_of
from stacks.results import copy_command
from stacks.storage import SharedStorage
from stacks.workloads import Workloads


def workload_conditions_command(namespace: str, job: str) -> str:
    """``kubectl get`` of the Kueue Workload of ``job`` (the one it owns), one line per condition: whether it is
    admitted, and when it waits, Kueue's reason (e.g. ``QuotaReserved=False (Pending: couldn't assign flavors to pod
    set worker: insufficient unused quota for nvidia.com/gpu ...)``); then one line per admission check with its state
    (``Pending``, ``Ready``, ``Retry``, ``Rejected``) and message: a job on a group that scales from zero waits there,
    its quota reserved, for the cluster autoscaler's answer to its ProvisioningRequest, whose message the check shows
    (e.g. ``Capacity is not found, CA will try to find it later.``). Workload ``status.admissionChecks``:
    https://kueue.sigs.k8s.io/docs/concepts/admission_check/."""
    path = (
        f"{{range {_owned_by(job)}}}{{range .status.conditions[*]}}"
        f"{job}: {{.type}}={{.status}} ({{.reason}}: {{.message}}){{\"\\n\"}}{{end}}"
        f"{{range .status.admissionChecks[*]}}{job}: admission check {{.name}}={{.state}} ({{.message}})"
        f"{{\"\\n\"}}{{end}}{{end}}"
    )
    return f"kubectl get workloads.kueue.x-k8s.io -n {namespace} -o jsonpath='{path}'"


def _owned_by(job: str) -> str:
    """The namespace's Kueue Workloads that ``job`` owns, as a jsonpath over their list (Kueue makes the job the
    Workload's first owner)."""
    return f'.items[?(@.metadata.ownerReferences[0].name=="{job}")]'


def _workload_of(job: str, then: str) -> str:
    """A jsonpath over the namespace's Kueue Workloads: ``then`` of those ``job`` owns."""
    return f"{{{_owned_by(job)}{then}}}"


def wait_command(namespace: str, job: str, timeout_s: int) -> str:
    """What ``waitCommand`` runs: the job's Kueue admission (:func:`workload_conditions_command`), then a wait of up
    to ``timeout_s`` until its newest Workload is ``Finished`` (Kueue's one condition for a job that succeeded or
    failed, of every kind: https://kueue.sigs.k8s.io/docs/concepts/workload/), the conditions again, and an exit
    status of 1 unless it succeeded. A wait for the job's own ``Complete`` would not end when it fails. In a subshell:
    the shell that runs it through ``eval`` keeps no variable of it."""
    workloads = f"kubectl get workloads.kueue.x-k8s.io -n {namespace}"
    newest = f"{workloads} --sort-by=.metadata.creationTimestamp -o jsonpath='{_workload_of(job, '.metadata.name')}'"
    reason = f"{workloads} \"$w\" -o jsonpath='{{.status.conditions[?(@.type==\"Finished\")].reason}}'"
    conditions = workload_conditions_command(namespace, job)
    missing = f"{job}: no Kueue Workload yet: the job is not created, or Kueue has not queued it"
    return (
        f'{conditions}; (w=$({newest}); w=${{w##* }}; if [ -z "$w" ]; then echo "{missing}" >&2; false; else '
        f'kubectl wait -n {namespace} --for=condition=Finished --timeout={timeout_s}s "workloads.kueue.x-k8s.io/$w" '
        f'&& {conditions} && [ "$({reason})" = Succeeded ]; fi)'
    )


def _copy_of(job: str, values: list[str]) -> str:
    namespace, job_name, output_dir, image, claim = values
    return copy_command(namespace, job, job_name, output_dir, image, claim)


def _wait_of(job: str, timeout_s: int, namespace: str) -> str:
    return wait_command(namespace, job, timeout_s)


def wait_seconds(job: JobPlan) -> int:
    """How long a job's ``waitCommand`` waits: as long as ``pulumi up`` would for it (its time in the queue, its
    deadline and its pods' grace period, :func:`components.workloads.waits.await_seconds`)."""
    cfg = job.config
    return await_seconds(
        deadline_seconds(cfg.timeout_hours),
        queue_s=queue_seconds(True, cfg.queue_timeout_hours),
        grace_s=cfg.stop_grace_period_seconds,
    )


def jobs_outputs(plan: Plan, w: Workloads, ns: pulumi.Input[str], claim: pulumi.Input[str]) -> dict[str, Any]:
    """Per job: its kind, name, output folder and the commands to follow it and to copy its folder (``jobs`` output);
    ``claim``: the shared volume's claim in ``ns``."""
    jobs: dict[str, Any] = {}
    for job_name, job in w.jobs.items():
        kind = KINDS[plan.jobs[job_name].kind]
        jobs[job_name] = {
            "kind": kind.name,
            "name": job.job_name,
            "outputDir": job.output_dir,
            "copyCommand": pulumi.Output.all(
                ns, job.job_name, job.output_dir, w.image_uris[TOOLBOX_IMAGE], claim
            ).apply(functools.partial(_copy_of, job_name)),
            # with a selector kubectl prints only each pod's last 10 lines unless told --tail=-1
            "logsCommand": pulumi.Output.concat(
                "kubectl logs -n ", ns, " -f --tail=-1 --prefix --max-log-requests 64 -l ", JOB_LABEL, "=", job_name
            ),
            "waitCommand": pulumi.Output.from_input(ns).apply(
                functools.partial(_wait_of, job_name, wait_seconds(plan.jobs[job_name]))
            ),
        }
    return jobs


def teams_outputs(env: Environment) -> dict[str, Any]:
    """What a team's jobs-only stack reads (:mod:`stacks.jobs_only`): per team its namespace, LocalQueue,
    ClusterQueue and claim (``teams``); the node groups' instance types and maxSize its jobs are placed by
    (``nodeGroupPlacement``). It also reads ``region``, which every stack exports. Without teams: nothing."""
    a = env.plan.admission
    w: Optional[Workloads] = env.workloads
    if a is None or not a.teams or w is None or w.admission is None:
        return {}
    queues = w.admission.team_queue_names
    return {
        "teams": {
            t.name: {
                "namespace": w.teams[t.name].namespace,
                "localQueue": queues[t.cluster_queue],
                "clusterQueue": t.cluster_queue,
                "pvcName": w.teams[t.name].pvc_name,
                "nodes": dict(t.nodes),
                "quota": {f: dict(q) for f, q in t.quota.items()},
                "mayBorrow": t.may_borrow,
                "mayLend": t.may_lend,
            }
            for t in a.teams
        },
        "nodeGroupPlacement": placement_of(env.plan),
    }


def export_outputs(env: Environment, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The stack's outputs (exported by ``__main__``); ``settings``: the configuration this update was given.

    Outputs:

    - ``clusterName``: the EKS cluster's name.
    - ``kubeconfig``: a kubeconfig for the cluster; its ``aws eks get-token`` signs with its reader's credentials,
      not the deployer's profile or role; a secret.
    - ``vpcId``: the VPC the cluster runs in (created, or ``existingVpc``'s).
    - ``privateSubnetIds``: the private subnets, where the nodes run.
    - ``publicSubnetIds``: the public subnets (NAT gateways only).
    - ``systemNodeGroupName``: the EKS name of the system node group.
    - ``nodeGroupNames``: the EKS names of every node group, the system group first.
    - ``storageBackend``: the shared file system, ``efs`` or ``fsx``.
    - ``fileSystemId``: its id.
    - ``datasetRoot``: where the data of a dataset the file system imports from S3 appears in the pods.
    - ``pvcName``: the shared claim every job mounts at ``/data``.
    - ``pvcNamespace``: the namespace of the jobs and of that claim.
    - ``updateKubeconfigCommand``: the ``aws eks update-kubeconfig`` command that gives ``kubectl`` the cluster.
    - ``dashboardUrl``: the stack's CloudWatch dashboard (with ``operations.dashboard``).
    - ``alarms``: the names of the stack's CloudWatch alarms (idle GPUs, missing metrics).
    - ``fsxDataBucket``: the S3 bucket linked to the FSx for Lustre file system (FSx stacks).
    - ``fsxDataRepositoryPath``: the S3 prefix the file system imports datasets from (FSx stacks).
    - ``fsxExportRepositoryPath``: the S3 prefix the file system exports ``exportPath`` to (FSx stacks with one).
    - ``fsxSecurityGroupId``: the file system's security group, to adopt it in another stack (FSx stacks).
    - ``fsxDnsName``: the file system's DNS name (FSx stacks).
    - ``efsFileSystemId``: the EFS file system's id, the name earlier versions exported (EFS stacks).
    - ``imageUris``: each image the jobs run, by name, pinned by digest.
    - ``imageBuildLogLinks``: each image build's CodeBuild log, by name.
    - ``jobs``: one entry per job, by name, with the fields below.
    - ``jobs.<job>.kind``: the job's kind (``pytorch``, ``mpi``, ``tensorflow``, ``command``).
    - ``jobs.<job>.name``: the Kubernetes name of its Job or MPIJob.
    - ``jobs.<job>.outputDir``: its output folder on the shared volume.
    - ``jobs.<job>.logsCommand``: ``kubectl logs -f`` of every pod of the job, each from its first line.
    - ``jobs.<job>.waitCommand``: prints the job's Kueue admission, then waits until the job ends, for as long as
      ``pulumi up`` would: it exits 0 if the job succeeded, 1 if it failed or the wait timed out.
    - ``jobs.<job>.copyCommand``: copies its output folder from the shared volume to ``./<job>`` here.
    - ``teams``: per team (with ``teams``): its namespace, queues, claim, nodes and quota, read by its jobs-only stack.
    - ``nodeGroupPlacement``: per node group, what a team's jobs are placed by (types, ``maxSize``, labels, taints).
    - ``region``: the region of the stack's resources: a team's jobs-only stack deploys there, and the next
      ``pulumi up`` refuses another.
    - ``tensorboardCommand``: ``kubectl port-forward`` to TensorBoard (when a job sets ``tensorboard``).
    - ``benchmark``: the benchmark run the driver follows: its id, results folder in S3 and experiments (with
      ``benchmark``).
    - ``vpcZones``: the zones of the new VPC, in its subnets' order (not with ``existingVpc``): the next ``pulumi up``
      refuses to move them.
    - ``deployedConfiguration``: the configuration this update was given (the project's settings and the AWS
      provider's, less its credentials; the Kubernetes minor it deployed where the settings leave it unset), a secret,
      recorded once the other outputs are and everything ``deployedVersions`` names is installed: the next
      ``pulumi up`` reads it back to say what it rolls (:mod:`stacks.last_update`).
    - ``deployedVersions``: a digest of the program that made this update (``program``), what it installed beside
      the jobs (EKS add-ons, Kueue, the device plugins, the
      cluster autoscaler, the MPI Operator, etcd), at the versions this version of the project pins, by name, the
      build of each image the jobs run (``images.<variant>.build``), a digest of each node group's launch template
      (``<group path>.launchTemplate``), the AMI release it runs as EKS reports it (``<group path>.releaseVersion``)
      and its Kueue flavor's Topology and node labels as the cluster holds them (``<group path>.kueueFlavor``),
      recorded once the other outputs are and each of them is installed: the next ``pulumi up`` names what a new
      version moves, the jobs a new build starts again and the groups whose nodes it rolls, and refuses what EKS or
      Kueue would.
    """
    region = aws.get_region_output().region
    outputs = _environment_outputs(env, region)
    outputs.update(_operations_outputs(env))
    outputs.update(_storage_outputs(env.storage))
    w: Optional[Workloads] = env.workloads
    if w is not None:
        outputs.update(_workloads_outputs(env, w, region))
    if env.config.network is not None and env.zones is not None:
        outputs[ZONES_OUTPUT] = [z.name for z in env.zones]
    minor = env.config.cluster.kubernetes_version
    releases = node_releases(env)
    finished = [*outputs.values(), *installs_done(env), *releases.values()]
    outputs[VERSIONS_OUTPUT] = versions_output(env.plan, finished, releases, flavor_specs(env))
    outputs[CONFIG_OUTPUT] = configuration_output(settings, minor, finished)
    return outputs


def node_releases(env: Environment) -> dict[str, pulumi.Output[str]]:
    """The AMI release each node group runs, as EKS reports it once the group is created or updated, by the group's
    config path (the system group first)."""
    releases = {env.plan.system.path: env.cluster.system_release_version}
    releases.update({env.plan.groups[name].path: g.release_version for name, g in env.node_groups.items()})
    return releases


def flavor_specs(env: Environment) -> dict[str, pulumi.Output[Any]]:
    """Each Kueue flavor's spec as the provider reports it after this update, by its group's config path; none
    without Kueue."""
    admission = env.workloads.admission if env.workloads is not None else None
    if admission is None or env.plan.admission is None:
        return {}
    return {f.path: admission.flavor_specs[f.name] for f in env.plan.admission.flavors}


def installs_done(env: Environment) -> list[pulumi.Output[Any]]:
    """An output of each thing ``deployedVersions`` names, resolving once it is installed at its version: the EKS
    add-ons, the device plugins, the cluster autoscaler, the ProvisioningRequest CRD, Kueue and its flavors, the MPI
    Operator and etcd.
    The records wait for them, so an update whose install failed (a release rolled back) records neither."""
    done: list[pulumi.Output[Any]] = [env.cluster.installed_addons]
    if env.observability is not None:
        done.append(env.observability.installed_addon)
    done += [plugin.release_name for plugin in env.device_plugins.values()]
    if env.autoscaler is not None:
        done.append(env.autoscaler.release_name)
    if env.provisioning_crd is not None:
        done.append(env.provisioning_crd.urn)  # a ConfigFile's URN resolves once it is applied
    w: Optional[Workloads] = env.workloads
    if w is not None:
        done += [x.queue_name for x in (w.admission,) if x is not None]
        done += flavor_specs(env).values()
        done += [x.crd_name for x in (w.mpi_operator,) if x is not None]
        done += [x.service_name for x in (w.etcd,) if x is not None]  # its Service is made after its Deployment
    return done


def _environment_outputs(env: Environment, region: pulumi.Output[str]) -> dict[str, Any]:
    """The cluster, its network and node groups, the shared claim and the kubeconfig command."""
    # the command signs as the stack's AWS provider does: its profile, the one role it assumes
    profile, (_, role) = env.config.aws.get("profile"), token_credentials(env.config.aws)
    as_deployer = (f" --profile {shlex.quote(profile)}" if profile else "") + (f" --role-arn {role}" if role else "")
    return {
        CLUSTER_NAME_OUTPUT: env.cluster.cluster_name,
        REGION_OUTPUT: env.plan.config.region,
        "kubeconfig": env.cluster.shared_kubeconfig,
        "vpcId": env.vpc_id,
        "privateSubnetIds": env.private_subnet_ids,
        "publicSubnetIds": env.public_subnet_ids,
        "systemNodeGroupName": env.cluster.system_node_group_name,
        "nodeGroupNames": pulumi.Output.all(
            env.cluster.system_node_group_name, *[ng.node_group_name for ng in env.node_groups.values()]
        ),
        "storageBackend": env.storage.backend,
        "fileSystemId": env.storage.file_system_id,
        "datasetRoot": env.storage.dataset_root,
        "pvcName": env.storage.pvc_name,
        "pvcNamespace": env.storage.namespace,
        "updateKubeconfigCommand": pulumi.Output.concat(
            "aws eks update-kubeconfig --region ",
            region,
            " --name ",
            env.cluster.cluster_name,
            " --alias ",
            env.config.cluster_name,
            as_deployer,
        ),
    }


def _operations_outputs(env: Environment) -> dict[str, Any]:
    """The dashboard's URL and the alarms' names, where the stack has them."""
    outputs: dict[str, Any] = {}
    if env.observability is not None and env.plan.operations.dashboard:
        outputs["dashboardUrl"] = env.observability.dashboard_url
    if env.observability is not None and env.observability.alarm_names:
        outputs["alarms"] = env.observability.alarm_names
    return outputs


def _storage_outputs(storage: SharedStorage) -> dict[str, Any]:
    """The FSx file system's bucket, paths, security group and DNS name, or the EFS file system's id."""
    if storage.backend == "fsx":
        fsx = {
            "fsxDataBucket": storage.data_bucket_name,
            "fsxDataRepositoryPath": storage.data_repository_path,
            "fsxExportRepositoryPath": storage.export_repository_path,
            "fsxSecurityGroupId": storage.security_group_id,
            "fsxDnsName": storage.dns_name,
        }
        return {k: v for k, v in fsx.items() if v is not None}
    return {"efsFileSystemId": storage.file_system_id}  # the name earlier versions exported


def _workloads_outputs(env: Environment, w: Workloads, region: pulumi.Output[str]) -> dict[str, Any]:
    """The images, the jobs, the teams, TensorBoard's command and the benchmark run."""
    ns = env.storage.namespace
    outputs: dict[str, Any] = {
        "imageUris": w.image_uris,
        "imageBuildLogLinks": {k: img.build_log_link for k, img in w.images.items()},
    }
    jobs = jobs_outputs(env.plan, w, ns, env.storage.pvc_name)
    outputs["jobs"] = jobs
    outputs.update(teams_outputs(env))
    if w.tensorboard is not None:
        outputs["tensorboardCommand"] = w.tensorboard.port_forward_command
    bench = env.config.benchmark
    if w.collector is not None and bench is not None:
        outputs["benchmark"] = _benchmark_output(env, w.collector, bench, jobs, region)
    return outputs


def _benchmark_output(
    env: Environment,
    collector: BenchmarkCollector,
    bench: BenchmarkSettings,
    jobs: dict[str, Any],
    region: pulumi.Output[str],
) -> dict[str, Any]:
    """What python -m stacks.benchmark follows: the run's folder in S3 and the jobs of the run."""
    return {
        "run": bench.run,
        "resultsUri": collector.results_uri,
        "bucket": collector.bucket_name,
        "prefix": bench.run_prefix,
        "region": region,
        "namespace": env.storage.namespace,
        "collectorJob": collector.job_name,
        "experiments": {
            j.name: {
                "kind": j.kind,
                "job": jobs[j.name]["name"],
                "nodes": j.nodes,
                "instanceType": j.group.profile.instance.name,
                "outputDir": j.output_dir,
            }
            for j in env.plan.experiments
        },
    }
