"""``BenchmarkCollector``: a Job that copies each finished experiment of a benchmark to S3.

It copies the configuration, manifests, logs, metrics and kept outputs, so the results survive whatever happens to
the machine that started the run. The collector (``/app/collect_results.py`` of the toolbox image) runs on the
system nodes with a Pod Identity role that may only write under the run's prefix, and a Role that may read the
experiments' jobs and the namespace's pods and logs. It mounts the shared volume read-only, and a ConfigMap says
what to collect. It is created after every experiment; ``pulumi up`` does not wait for it.

Why: docs/explanation/programs.md, "The benchmark collector"; docs/how-to/benchmarks.md."""

import json
from typing import Any, Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.conventions import COMMON_LABELS, IMAGE_PULL_POLICY, JOB_LABEL, SHARED_MOUNT
from components.iam import s3_write_prefix_policy
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.partition import current_partition
from components.pod_identity import pod_identity_role
from components.private_bucket import private_bucket
from components.workloads.identity import SERVICE_ACCOUNT_MOUNT, api_access_volume
from components.workloads.job_objects import JOB_OBJECTS
from components.workloads.pods import TMP_MOUNT, TMP_VOLUME, container_security, pod_security, shared_volume
from components.workloads.spec import DEFAULT_TIMEOUT_HOURS
from components.workloads.toolbox import COLLECT_SCRIPT
from components.workloads.waits import deadline_seconds

#: Output files the collector copies by default besides metrics and logs (globs relative to the output folder).
DEFAULT_KEPT_OUTPUTS: tuple[str, ...] = ("*.json", "*.csv", "*.txt")
#: Larger output files are listed as skipped, not copied (MiB), unless the run says otherwise.
DEFAULT_MAX_FILE_MIB = 1024
#: How much longer than the longest experiment's deadline the collector waits for the experiments.
COLLECTOR_GRACE_HOURS = 1
#: How long the collector waits by default: a job's default deadline, and the grace.
DEFAULT_COLLECTOR_TIMEOUT_HOURS = DEFAULT_TIMEOUT_HOURS + COLLECTOR_GRACE_HOURS

#: Where the collector's ConfigMap is mounted, and its one key.
CONFIG_DIR = "/etc/benchmark"
CONFIG_KEY = "benchmark.json"
#: The resources ``wait_for_jobs.py`` and the collector address experiments by.
RESOURCES = {o.resource: (o.group, o.resource) for o in JOB_OBJECTS.values()}


class CollectedExperiment(TypedDict):
    """One experiment the collector waits for."""

    resource: str
    """``jobs`` (a batch/v1 Job) or ``mpijobs`` (a kubeflow.org/v2beta1 MPIJob)."""
    job_name: pulumi.Input[str]
    """Its name; an Output of the experiment's component, so the collector is created after it."""
    output_dir: str
    """Its output folder inside the pods (``/data/benchmarks/<run>/<experiment>``)."""
    config: pulumi.Input[str]
    """Its configuration, a JSON object (copied to ``experiments/<experiment>/config/experiment.json``)."""


class BenchmarkCollectorArgs(TypedDict):
    """Inputs of :class:`BenchmarkCollector`."""

    name: str
    """Kubernetes name of the Job, its service account, Role and ConfigMap."""
    namespace: pulumi.Input[str]
    """The experiments' namespace (holds the shared claim)."""
    pvc_name: pulumi.Input[str]
    """The shared ReadWriteMany claim (mounted read-only at ``/data``)."""
    image: pulumi.Input[str]
    """The toolbox image (contains ``/app/collect_results.py``)."""
    node_selector: Mapping[str, str]
    """Where the collector runs (the system nodes)."""
    cluster_name: pulumi.Input[str]
    """EKS cluster name (Pod Identity)."""
    region: pulumi.Input[str]
    """The bucket's region (the stack's)."""
    run: str
    """The run id: the run's folder ``<prefix><run>/``."""
    prefix: str
    """The results prefix in the bucket (``benchmarks/``; ends in ``/``)."""
    experiments: Mapping[str, CollectedExperiment]
    """What to collect, by experiment name."""
    cluster_config: pulumi.Input[str]
    """The cluster's configuration, a JSON object (``cluster.json``)."""
    storage_config: pulumi.Input[str]
    """The shared storage's configuration, a JSON object (``storage.json``)."""
    bucket_name: NotRequired[str]
    """An existing bucket; omit to create one, kept when the stack is destroyed (the results outlive it)."""
    keep_outputs: NotRequired[Sequence[str]]
    """Globs of output files copied besides metrics and logs. Default ``["*.json", "*.csv", "*.txt"]``."""
    max_file_mib: NotRequired[int]
    """Larger output files are listed as skipped. Default 1024."""
    timeout_hours: NotRequired[float]
    """How long the collector waits for the experiments. Default 25."""
    poll_seconds: NotRequired[int]
    """How often it asks the Kubernetes API. Default 15."""
    tags: NotRequired[Mapping[str, str]]
    """AWS tags of the role and a created bucket."""


def _check(name: str, args: "BenchmarkCollectorArgs") -> None:
    """The prefix's form and the experiments' resources, before any resource is made."""
    prefix = args["prefix"]
    if not prefix.endswith("/") or prefix.startswith("/"):
        raise ValueError(f"{name}: prefix must end in '/' and not start with it, got {prefix!r}")
    unknown = sorted(e["resource"] for e in args["experiments"].values() if e["resource"] not in RESOURCES)
    if unknown:
        raise ValueError(f"{name}: resource must be one of {', '.join(RESOURCES)}, got {unknown}")


class BenchmarkCollector(pulumi.ComponentResource):
    """The collector Job of a benchmark run, its write-only S3 role, its read-only Role, and, unless an existing
    bucket is given, the results bucket (SSE-S3, public access blocked, TLS only, kept on destroy).
    It needs a ``kubernetes`` provider in ``opts``."""

    bucket_name: pulumi.Output[str]
    """The results bucket."""
    results_uri: pulumi.Output[str]
    """``s3://<bucket>/<prefix><run>/``: the run's folder."""
    job_name: pulumi.Output[str]
    """Name of the collector Job."""
    role_arn: pulumi.Output[str]
    """ARN of the collector's write-only role."""

    @checks_args
    def __init__(self, name: str, args: BenchmarkCollectorArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:BenchmarkCollector", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        _check(name, args)
        labels = {**COMMON_LABELS, "app.kubernetes.io/name": "benchmark-collector", "eks-training/run": args["run"]}
        run_prefix = f"{args['prefix']}{args['run']}/"
        bucket_name = self._bucket(name, args)
        sa, binding = self._reader(name, args, labels)
        role_arn, association = self._writer(name, args, sa, bucket_name, run_prefix)
        config_map = self._config_map(name, args, labels, bucket_name)
        job = self._job(name, args, labels, sa, config_map, [binding.urn, association.urn])
        self.bucket_name = bucket_name
        self.results_uri = pulumi.Output.concat("s3://", bucket_name, "/", run_prefix)
        self.job_name = job.metadata.name
        self.role_arn = role_arn
        self.register_outputs(
            {
                "bucket_name": self.bucket_name,
                "results_uri": self.results_uri,
                "job_name": self.job_name,
                "role_arn": self.role_arn,
            }
        )

    def _bucket(self, name: str, args: BenchmarkCollectorArgs) -> pulumi.Output[str]:
        """The given results bucket, else a new one (private, kept on destroy)."""
        if args.get("bucket_name"):
            return pulumi.Output.from_input(str(args.get("bucket_name")))
        tags = dict(args.get("tags") or {})
        return private_bucket(self, f"{name}-results", force_destroy=False, retain=True, tags=tags).bucket.bucket

    def _reader(
        self, name: str, args: BenchmarkCollectorArgs, labels: dict[str, str]
    ) -> tuple[k8s.core.v1.ServiceAccount, k8s.rbac.v1.RoleBinding]:
        """The service account and its Role: ``get`` the experiments by name, list pods and read their logs."""
        k8s_name, namespace, experiments = args["name"], args["namespace"], args["experiments"]
        child = pulumi.ResourceOptions(parent=self)
        sa = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": k8s_name, "namespace": namespace, "labels": labels},
            automount_service_account_token=False,
            opts=child,
        )
        rules: list[k8s.rbac.v1.PolicyRuleArgsDict] = []
        for resource, (group, plural) in RESOURCES.items():
            names = sorted(n for n, e in experiments.items() if e["resource"] == resource)
            if names:
                rules.append({"api_groups": [group], "resources": [plural], "resource_names": names, "verbs": ["get"]})
        rules += [
            {"api_groups": [""], "resources": ["pods"], "verbs": ["list"]},
            {"api_groups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        ]
        role = k8s.rbac.v1.Role(
            f"{name}-role",
            metadata={"name": k8s_name, "namespace": namespace, "labels": labels},
            rules=rules,
            opts=child,
        )
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-binding",
            metadata={"name": k8s_name, "namespace": namespace, "labels": labels},
            role_ref={"api_group": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
            subjects=[{"kind": "ServiceAccount", "name": sa.metadata.name, "namespace": namespace}],
            opts=child,
        )
        return sa, binding

    def _writer(
        self,
        name: str,
        args: BenchmarkCollectorArgs,
        sa: k8s.core.v1.ServiceAccount,
        bucket_name: pulumi.Output[str],
        run_prefix: str,
    ) -> tuple[pulumi.Output[str], aws.eks.PodIdentityAssociation]:
        """The Pod Identity role that may only write objects under the run's prefix: its ARN and association."""
        policy = pulumi.Output.all(current_partition(self), bucket_name).apply(
            lambda v: s3_write_prefix_policy(str(v[0]), str(v[1]), run_prefix)
        )
        identity = pod_identity_role(
            self,
            f"{name}-writer",
            cluster_name=args["cluster_name"],
            namespace=args["namespace"],
            service_account=sa.metadata.name,
            description=f"Benchmark collector: write results under {run_prefix}",
            role_name=f"{name}-writer",
            policy=policy,
            policy_suffix="write",
            tags=dict(args.get("tags") or {}),
        )
        assert identity.association is not None
        return identity.role.arn, identity.association

    def _config_map(
        self, name: str, args: BenchmarkCollectorArgs, labels: dict[str, str], bucket_name: pulumi.Output[str]
    ) -> k8s.core.v1.ConfigMap:
        """What to collect: the run, the bucket and prefix, each experiment's configuration, the cluster's and the
        storage's configuration."""
        experiments, names = args["experiments"], list(args["experiments"])
        keep = {
            "outputs": list(args.get("keep_outputs") or DEFAULT_KEPT_OUTPUTS),
            "maxFileMib": int(args.get("max_file_mib", DEFAULT_MAX_FILE_MIB)),
        }

        def render(values: list[Any]) -> str:
            bucket, ns, cluster, storage, *configs = values
            return json.dumps(
                {
                    "run": args["run"],
                    "bucket": bucket,
                    "prefix": args["prefix"],
                    "namespace": ns,
                    "keep": keep,
                    "experiments": {
                        n: {
                            "resource": experiments[n]["resource"],
                            "name": n,
                            "outputDir": experiments[n]["output_dir"],
                            "config": json.loads(c),
                        }
                        for n, c in zip(names, configs)
                    },
                    "cluster": json.loads(cluster),
                    "storage": json.loads(storage),
                },
                indent=1,
                sort_keys=True,
            )

        document = pulumi.Output.all(
            bucket_name,
            args["namespace"],
            args["cluster_config"],
            args["storage_config"],
            *[experiments[n]["config"] for n in names],
        ).apply(render)
        return k8s.core.v1.ConfigMap(
            f"{name}-config",
            metadata={"name": args["name"], "namespace": args["namespace"], "labels": labels},
            data={CONFIG_KEY: document},
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _job(
        self,
        name: str,
        args: BenchmarkCollectorArgs,
        labels: dict[str, str],
        sa: k8s.core.v1.ServiceAccount,
        config_map: k8s.core.v1.ConfigMap,
        ready: Sequence[pulumi.Output[str]],
    ) -> k8s.batch.v1.Job:
        """The collector Job, created after every experiment exists and its access is in place (``ready``)."""
        timeout_s = deadline_seconds(args.get("timeout_hours", DEFAULT_COLLECTOR_TIMEOUT_HOURS))
        waits = [e["job_name"] for e in args["experiments"].values()]
        job_name = pulumi.Output.all(args["name"], ready[0], ready[1], config_map.urn, *waits).apply(
            lambda v: str(v[0])
        )
        command: list[pulumi.Input[str]] = [
            "python",
            COLLECT_SCRIPT,
            "--config",
            f"{CONFIG_DIR}/{CONFIG_KEY}",
            "--region",
            args["region"],
            "--poll-seconds",
            str(int(args.get("poll_seconds", 15))),
            "--timeout-seconds",
            str(timeout_s),
        ]
        return k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                "name": job_name,
                "namespace": args["namespace"],
                "labels": labels,
                "annotations": {"pulumi.com/skipAwait": "true"},
            },
            spec={
                "backoff_limit": 3,
                "active_deadline_seconds": timeout_s + 600,
                "template": {
                    # a job's pod: HTTPS to S3 and the API server (TrainingNetworkPolicies)
                    "metadata": {"labels": {**labels, JOB_LABEL: job_name}},
                    "spec": {
                        "restart_policy": "OnFailure",
                        "service_account_name": sa.metadata.name,
                        # the token only in the one container that reads the API, as the waits get it
                        "automount_service_account_token": False,
                        "node_selector": dict(args["node_selector"]),
                        "security_context": pod_security(),
                        "containers": [
                            {
                                "name": "collect",
                                "image": args["image"],
                                "image_pull_policy": IMAGE_PULL_POLICY,
                                "command": command,
                                "env": [
                                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                                    {"name": "HOME", "value": "/tmp"},
                                    {"name": "AWS_REGION", "value": args["region"]},
                                ],
                                "resources": {
                                    "requests": {"cpu": "100m", "memory": "256Mi"},
                                    "limits": {"memory": "512Mi"},
                                },
                                "volume_mounts": [
                                    {"name": "shared", "mount_path": SHARED_MOUNT, "read_only": True},
                                    {"name": "config", "mount_path": CONFIG_DIR, "read_only": True},
                                    TMP_MOUNT,
                                    {"name": "kube-api-access", "mount_path": SERVICE_ACCOUNT_MOUNT, "read_only": True},
                                ],
                                "security_context": container_security(read_only_root=True),
                            }
                        ],
                        "volumes": [
                            shared_volume(args["pvc_name"]),
                            {"name": "config", "config_map": {"name": config_map.metadata.name}},
                            TMP_VOLUME,
                            api_access_volume(),
                        ],
                    },
                },
            },
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
