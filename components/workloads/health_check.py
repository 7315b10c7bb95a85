"""``AllReduceHealthCheck``: the all-reduce bus bandwidth across a job's nodes, before the job."""

from typing import Optional, TypedDict

import pulumi
from typing_extensions import NotRequired

from components.args import checks_args
from components.conventions import COMMON_LABELS
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.workloads.indexed_job import indexed_job
from components.workloads.job_objects import BATCH_JOB
from components.workloads.pytorch import torch_env
from components.workloads.spec import JobSpec, WorkerPlacement, c10d_endpoint, torchrun_command, worker_env
from components.workloads.toolbox import BENCHMARK_SCRIPT
from components.workloads.waits import finished

#: Minutes the all-reduce check may take once admitted, unless it says otherwise (``timeout_minutes``).
DEFAULT_CHECK_TIMEOUT_MINUTES = 60


class AllReduceHealthCheckArgs(TypedDict):
    """Inputs of :class:`AllReduceHealthCheck`."""

    job: JobSpec
    """Namespace, claim, the toolbox image (with /app/allreduce_bench.py) and the report folder (output_dir)."""
    placement: WorkerPlacement
    """The nodes of the job checked: same group, same requests as its pods."""
    nodes: int
    """Nodes to test (the checked job's node count)."""
    min_bus_bandwidth_gbytes_per_s: NotRequired[float]
    """Fail the check (and so stop the job from being created) below this bus bandwidth (GB/s)."""
    max_bytes: NotRequired[int]
    """Largest all-reduce message. Default 1 GiB on GPU, 64 MiB on CPU."""
    timeout_minutes: NotRequired[int]
    """The check's deadline once admitted (its time in the queue and for nodes is the job spec's
    ``queue_timeout_hours``). Default 60."""


class AllReduceHealthCheck(pulumi.ComponentResource):
    """An Indexed Job that runs ``allreduce_bench.py`` under torchrun across the nodes (NCCL over EFA on GPU
    nodes, gloo on CPU nodes) and writes the all-reduce bus bandwidth to ``<output_dir>/allreduce.json``.
    Pulumi waits for it; with a threshold a low bandwidth fails it, ``pulumi up`` stops and the job it
    guards (which is created after ``report_path``) is never created. It runs once: later updates (a new
    size, a new image) leave the completed check alone, since re-running it would need the nodes the
    running job holds. It needs a ``kubernetes`` provider in ``opts``."""

    job_name: pulumi.Output[str]
    """Name of the Job."""
    report_path: pulumi.Output[str]
    """Path of the JSON report; resolves once the check completed (passed)."""

    @checks_args
    def __init__(
        self, name: str, args: AllReduceHealthCheckArgs, opts: Optional[pulumi.ResourceOptions] = None
    ) -> None:
        super().__init__("eks-training:index:AllReduceHealthCheck", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        spec = args["job"]
        job_name = spec["job_name"]
        placement = args["placement"]
        nodes = args["nodes"]
        report = f"{spec['output_dir']}/allreduce.json"
        endpoint = c10d_endpoint(job_name, spec["namespace"])
        max_bytes = int(args.get("max_bytes") or ((1 << 30) if placement["gpus"] else (64 << 20)))

        def command(ep: str) -> list[str]:
            return torchrun_command(
                min_nodes=nodes,
                max_nodes=nodes,
                procs_per_node=placement["procs_per_node"],
                backend="c10d",
                endpoint=ep,
                rdzv_id=job_name,
                max_restarts=0,
                script=BENCHMARK_SCRIPT,
                script_args=_benchmark_args(args, max_bytes, report),
            )

        # the benchmark writes only its report (to the shared volume) and torchrun's logs (to /tmp)
        timed: JobSpec = {
            **spec,
            "timeout_hours": int(args.get("timeout_minutes", DEFAULT_CHECK_TIMEOUT_MINUTES)) / 60,
            "read_only_root_filesystem": True,
        }
        _, job = indexed_job(
            name,
            self,
            timed,
            labels={**COMMON_LABELS, "app.kubernetes.io/name": "allreduce-health-check"},
            placement=placement,
            nodes=nodes,
            command=endpoint.apply(command),
            # NCCL logs its transport ("NET/OFI ... Libfabric" on EFA) in the check's pod logs
            env=worker_env(
                placement, {**torch_env(placement["gpus"]), **({"NCCL_DEBUG": "INFO"} if placement["gpus"] else {})}
            ),
            # a low bandwidth fails deterministically: retry once (for transient pod failures), not per node
            backoff_limit=1,
            run_once=True,
            await_completion=True,
            output_folder=False,  # allreduce_bench.py creates its report's folder
        )
        self.job_name = finished(BATCH_JOB, job_name, job, awaited=True)
        self.report_path = self.job_name.apply(lambda _: report)
        self.register_outputs({"job_name": self.job_name, "report_path": self.report_path})


def _benchmark_args(args: AllReduceHealthCheckArgs, max_bytes: int, report: str) -> list[str]:
    """allreduce_bench.py's arguments: every node takes part (so the link between nodes is what gets measured), the
    report's path, and the EFA and bandwidth floors the check fails under."""
    placement = args["placement"]
    script = [
        "--max-bytes",
        str(max_bytes),
        "--expect-world-size",
        str(args["nodes"] * placement["procs_per_node"]),
        "--output-json",
        report,
    ]
    if placement["efa_devices"]:
        # fail, rather than measure TCP, when a node lacks its EFA devices or the OFI plugin
        script += ["--require-efa", str(placement["efa_devices"])]
    if args.get("min_bus_bandwidth_gbytes_per_s") is not None:
        # allreduce_bench.py's --min-busbw-gbps is in GB/s (1e9 bytes/s), like nccl-tests
        script += ["--min-busbw-gbps", str(args["min_bus_bandwidth_gbytes_per_s"])]
    return script
