"""``AllReduceHealthCheck``: the all-reduce bus bandwidth across the training nodes, before training."""

from typing import Optional, TypedDict

import pulumi
from typing_extensions import NotRequired

from components.conventions import COMMON_LABELS
from components.workloads.pods import WorkerPlacement, c10d_endpoint, torchrun_command, worker_job

#: The benchmark script in the training image.
BENCHMARK_SCRIPT = "/app/allreduce_bench.py"


class AllReduceHealthCheckArgs(TypedDict):
    """Inputs of :class:`AllReduceHealthCheck`."""

    namespace: pulumi.Input[str]
    """Training namespace."""
    pvc_name: pulumi.Input[str]
    """Shared claim (the report is written there)."""
    image: pulumi.Input[str]
    """Training image (contains /app/allreduce_bench.py)."""
    job_name: str
    """Kubernetes name of the Job."""
    report_path: str
    """Where the JSON report goes inside the pods (on the shared volume)."""
    placement: WorkerPlacement
    """The training nodes: same group, same requests as the training pods."""
    workers: int
    """Nodes to test (the training job's worker count)."""
    min_bus_bandwidth_gbytes_per_s: NotRequired[float]
    """Fail the Job (and so stop training from being created) below this bus bandwidth."""
    max_bytes: NotRequired[int]
    """Largest all-reduce message. Default 1 GiB on GPU, 64 MiB on CPU."""
    timeout_minutes: NotRequired[int]
    """How long Pulumi waits for the Job (including nodes scaling up). Default 60."""
    after: NotRequired[pulumi.Input[str]]
    """An Output the Job waits for (e.g. the staged data), to serialise it after earlier steps."""


class AllReduceHealthCheck(pulumi.ComponentResource):
    """An Indexed Job that runs ``allreduce_bench.py`` under torchrun across the training nodes
    (NCCL over EFA on GPU nodes, gloo on CPU nodes) and reports the all-reduce bus bandwidth.
    Pulumi waits for it; with a threshold a low bandwidth fails the Job, ``pulumi up`` stops and the
    training Job (which waits for ``report_path``) is never created."""

    job_name: pulumi.Output[str]
    """Name of the Job."""
    report_path: pulumi.Output[str]
    """Path of the JSON report; resolves once the Job completed (passed)."""

    # The check gates the first start of training. Later updates (a new worker count, a new image)
    # leave the completed Job alone: re-running it would need the nodes the running training holds.

    def __init__(
        self, name: str, args: AllReduceHealthCheckArgs, opts: Optional[pulumi.ResourceOptions] = None
    ) -> None:
        super().__init__("eks-training:index:AllReduceHealthCheck", name, None, opts)
        job_name = args["job_name"]
        placement = args["placement"]
        workers = args["workers"]
        report = args["report_path"]
        labels = {**COMMON_LABELS, "app.kubernetes.io/name": "allreduce-health-check"}
        endpoint = c10d_endpoint(job_name, args["namespace"])
        max_bytes = int(args.get("max_bytes") or ((1 << 30) if placement["gpus"] else (64 << 20)))

        def command(v: list[object]) -> list[str]:
            # every node must take part, so the link between nodes is what gets measured
            script = [
                "--max-bytes", str(max_bytes),
                "--expect-world-size", str(workers * placement["procs_per_node"]),
                "--output-json", report,
            ]
            if placement["efa_devices"]:
                # fail, rather than measure TCP, when a node lacks its EFA devices or the OFI plugin
                script += ["--require-efa", str(placement["efa_devices"])]
            if args.get("min_bus_bandwidth_gbytes_per_s") is not None:
                # allreduce_bench.py's --min-busbw-gbps is in GB/s (1e9 bytes/s), like nccl-tests
                script += ["--min-busbw-gbps", str(args["min_bus_bandwidth_gbytes_per_s"])]
            return torchrun_command(
                min_nodes=workers,
                max_nodes=workers,
                procs_per_node=placement["procs_per_node"],
                backend="c10d",
                endpoint=str(v[0]),
                rdzv_id=job_name,
                max_restarts=0,
                script=BENCHMARK_SCRIPT,
                script_args=script,
            )

        timeout_s = 60 * int(args.get("timeout_minutes", 60))
        _, job = worker_job(
            name,
            self,
            namespace=args["namespace"],
            job_name=job_name,
            labels=labels,
            placement=placement,
            image=args["image"],
            command=pulumi.Output.all(endpoint, args.get("after", "")).apply(command),
            pvc_name=args["pvc_name"],
            workers=workers,
            # a low bandwidth fails deterministically: retry once (for transient pod failures), not per node
            backoff_limit=1,
            timeout_s=timeout_s,
            await_completion=True,
            run_once=True,
            # NCCL logs its transport ("NET/OFI ... Libfabric" on EFA) in the check's pod logs
            extra_env={"NCCL_DEBUG": "INFO"} if placement["gpus"] else None,
        )
        self.job_name = job.metadata.name
        self.report_path = job.metadata.apply(lambda _: report)
        self.register_outputs({"job_name": self.job_name, "report_path": self.report_path})
