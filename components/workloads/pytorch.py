"""``PyTorchJob``: any PyTorch script under torchrun elastic, as a Kubernetes Indexed Job."""

from typing import Optional, TypedDict, cast, get_args

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.conventions import APP_DIR, COMMON_LABELS, RENDEZVOUS_LABEL
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.workloads.indexed_job import indexed_job
from components.workloads.job_objects import BATCH_JOB
from components.workloads.spec import (
    DEFAULT_MAX_RESTARTS,
    JobSpec,
    RendezvousBackend,
    WorkerPlacement,
    c10d_endpoint,
    job_env,
    stop_grace_seconds,
    torchrun_command,
    worker_env,
)
from components.workloads.waits import finished

#: The launcher of the toolbox image: skips a finished run, reopens a closed rendezvous, then runs torchrun.
LAUNCHER = f"{APP_DIR}/launch.py"
#: The file the launcher writes in a run's output folder when its command exits 0 (training/launch_markers.py's
#: ``DONE_MARKER``, tied by tests/mock/test_resilience.py); a pod that finds it ends at once.
LAUNCHER_DONE_MARKER = "DONE"
#: Beside the launcher in the image: runs the job's script as ``python SCRIPT`` would, then ends the process without the
#: interpreter's finalisation, where torch's threads can abort a rank that finished (training/run_script.py says why).
RUN_SCRIPT = f"{APP_DIR}/run_script.py"
#: The launcher's exit codes the Job reacts to (training/launch.py, tied by tests/mock/test_workloads.py): a stop
#: signal (drain, spot interruption, scale-down) and a rendezvous lost with etcd (rescheduled) never count as
#: failures; a run that gave up (``FAILED``) and a usage error fail the Job at once.
LAUNCHER_EXIT_STOPPED = 143
LAUNCHER_EXIT_RENDEZVOUS_LOST = 69
LAUNCHER_EXIT_RUN_FAILED = 3
LAUNCHER_EXIT_USAGE = 2
#: torchrun's restarts per agent. Every restart a membership change causes (another node lost, stopped or
#: joining) counts against each surviving agent, so a per-agent budget ends a healthy elastic run that one node
#: used up (measured with real processes: docs/explanation/verified.md); the run's own failure budget is the trainer's
#: ``MAX_FAILED_ATTEMPTS`` (attempts in a row without a new checkpoint).
TORCHRUN_MAX_RESTARTS = 100
#: What the pod's grace period leaves after torchrun's wait for its workers (``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``,
#: honoured by torch >= 2.12): the launcher's and torchrun's own exit took 1.4-6.7 s after the signal (measured).
SHUTDOWN_MARGIN_S = 15
#: The trainer's resilience variables :func:`pytorch_env` sets (the last two when the job sets them).
RESILIENCE_VARIABLES = frozenset(
    {"MAX_FAILED_ATTEMPTS", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "CHECKPOINT_EVERY_SECONDS", "PG_TIMEOUT_SECONDS"}
)


def torch_env(gpus: int) -> dict[str, str]:
    """What torchrun elastic and torch.distributed need: ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` (without it
    elastic restarts hang, https://github.com/pytorch/pytorch/issues/135712; measured by
    tests/real/test_training_real.py), the agents' log level, NCCL's asynchronous error handling on GPUs."""
    env = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "LOGLEVEL": "INFO"}
    if gpus:
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
    return env


def pytorch_env(
    spec: JobSpec,
    placement: WorkerPlacement,
    *,
    nodes: int,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    checkpoint_every_seconds: Optional[float] = None,
    collective_timeout_seconds: Optional[float] = None,
) -> dict[str, pulumi.Input[str]]:
    """The environment of every pod of a PyTorch job: the node type's settings, torchrun's (:func:`torch_env`),
    the trainer's resilience budgets (``MAX_FAILED_ATTEMPTS``, ``CHECKPOINT_EVERY_SECONDS``, ``PG_TIMEOUT_SECONDS``),
    torchrun's wait for its workers after a stop (``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``: the grace period less
    :data:`SHUTDOWN_MARGIN_S`), then the job's variables. The local runner (stacks/local) uses it too."""
    grace = stop_grace_seconds(spec)
    if grace <= SHUTDOWN_MARGIN_S:
        raise ValueError(f"{spec['job_name']}: stop_grace_period_seconds must exceed {SHUTDOWN_MARGIN_S}")
    resilience = {
        "MAX_FAILED_ATTEMPTS": str(max_restarts + 1),  # the attempts: the first, then max_restarts more
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(grace - SHUTDOWN_MARGIN_S),
    }
    if checkpoint_every_seconds is not None:
        resilience["CHECKPOINT_EVERY_SECONDS"] = f"{float(checkpoint_every_seconds):g}"
    if collective_timeout_seconds is not None:
        resilience["PG_TIMEOUT_SECONDS"] = f"{float(collective_timeout_seconds):g}"
    return {
        **worker_env(placement, {**torch_env(placement["gpus"]), **resilience}),
        **job_env(spec, nodes=nodes, procs_per_node=placement["procs_per_node"]),
    }


def pytorch_command(
    spec: JobSpec,
    placement: WorkerPlacement,
    *,
    script: str,
    run_id: str,
    min_nodes: int,
    max_nodes: int,
    backend: RendezvousBackend,
    endpoint: str,
    launcher: bool = True,
) -> list[str]:
    """The command of every pod of a PyTorch job: torchrun elastic with the production rendezvous settings
    (:func:`torchrun_command`, ``--max-restarts`` :data:`TORCHRUN_MAX_RESTARTS`) running ``script`` and the job's
    args through :data:`RUN_SCRIPT` (so a rank that finished exits with its own code), behind the toolbox image's
    launcher when ``launcher``. The local runner (stacks/local) uses it too."""
    torchrun = torchrun_command(
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        procs_per_node=placement["procs_per_node"],
        backend=backend,
        endpoint=endpoint,
        rdzv_id=run_id,
        max_restarts=TORCHRUN_MAX_RESTARTS,
        script=RUN_SCRIPT,
        script_args=[script, *(spec.get("args") or [])],
    )
    if not launcher:
        return torchrun
    return [
        "python",
        LAUNCHER,
        "--output-dir",
        spec["output_dir"],
        "--rdzv-backend",
        backend,
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        run_id,
        "--",
        *torchrun,
    ]


class PyTorchJobArgs(TypedDict):
    """Inputs of :class:`PyTorchJob`."""

    job: JobSpec
    """Namespace, claim, image, output folder, arguments, data, order and code of the job."""
    placement: WorkerPlacement
    """Node selection, tolerations and per-pod requests (from the node group's plan)."""
    script: str
    """The script torchrun runs (a path in the image, or relative to the downloaded code)."""
    run_id: str
    """Stable id of the run: the rendezvous id (resizing keeps it, so training resumes)."""
    nodes: int
    """Pods (one per node) created now."""
    min_nodes: int
    """torchrun's minimum node count (``--nnodes=MIN:MAX``)."""
    max_nodes: int
    """torchrun's maximum node count; ``nodes`` can be raised up to this without a new run."""
    rendezvous_backend: str
    """``etcd-v2`` (needs ``etcd_endpoint``) or ``c10d`` (hosted by worker 0)."""
    etcd_endpoint: NotRequired[pulumi.Input[str]]
    """``host:port`` of etcd for ``etcd-v2``."""
    max_restarts: NotRequired[int]
    """The run's failure budget. The trainer gives up after this many restarts in a row that failed without a new
    checkpoint (``MAX_FAILED_ATTEMPTS`` counts the attempts: one more). It is also the Job's pod backoff per node.
    Default 3; 0 gives up at the first such failure."""
    checkpoint_every_seconds: NotRequired[float]
    """Checkpoint cadence in seconds of training (``CHECKPOINT_EVERY_SECONDS``; the trainer's default: 120)."""
    collective_timeout_seconds: NotRequired[float]
    """How long a hung peer may stall a collective before the workers fail and re-rendezvous
    (``PG_TIMEOUT_SECONDS``; the trainer's default: 60)."""
    launcher: NotRequired[bool]
    """Start through the toolbox image's ``/app/launch.py`` (the image must contain it). Default True."""


class PyTorchJob(pulumi.ComponentResource):
    """PyTorch DDP (or any torch.distributed program) under torchrun elastic: an Indexed Job plus a headless
    Service. It needs a ``kubernetes`` provider in ``opts``.

    Each pod takes one node. It has a stable hostname ``<job>-<index>.<service>``, the shared volume at ``/data``
    and a memory-backed ``/dev/shm``. It requests the node's GPUs, and on EFA groups its EFA devices, huge pages and
    the family's NCCL and libfabric settings, all from the placement.

    With the launcher, a pod starts through ``/app/launch.py``. It exits at once when the run is complete, and
    reopens a rendezvous an earlier failed attempt closed. The Job replaces a failed pod (same index), and its agent
    joins the rendezvous again. A new ``nodes`` replaces the Job: the new pods keep the run id and output folder,
    so torchrun's rendezvous runs again at the new size and training resumes."""

    job_name: pulumi.Output[str]
    """Name of the Job."""
    service_name: pulumi.Output[str]
    """Name of the headless Service."""
    output_dir: pulumi.Output[str]
    """The job's output folder inside the pods; resolves after the Job is created."""
    rendezvous_endpoint: pulumi.Output[str]
    """The ``--rdzv-endpoint`` used."""

    @checks_args
    def __init__(self, name: str, args: PyTorchJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:PyTorchJob", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        spec, placement = args["job"], args["placement"]
        backend = _checked_backend(name, args)
        max_restarts = int(args.get("max_restarts", DEFAULT_MAX_RESTARTS))
        run, output_dir = args["run_id"], spec["output_dir"]
        endpoint = self._rendezvous_endpoint(name, args, backend)
        service, job = self._indexed_job(name, args, placement, run, backend, endpoint, max_restarts)
        self.job_name = finished(BATCH_JOB, spec["job_name"], job, awaited=bool(spec.get("wait_for_completion")))
        self.service_name = service.metadata.name
        self.output_dir = self.job_name.apply(lambda _: output_dir)
        self.rendezvous_endpoint = endpoint
        self.register_outputs(
            {
                "job_name": self.job_name,
                "service_name": self.service_name,
                "output_dir": self.output_dir,
                "rendezvous_endpoint": self.rendezvous_endpoint,
            }
        )

    @staticmethod
    def _rendezvous_endpoint(name: str, args: PyTorchJobArgs, backend: RendezvousBackend) -> pulumi.Output[str]:
        """torchrun's ``--rdzv-endpoint``: etcd's address for ``etcd-v2``, worker 0's stable hostname for ``c10d``."""
        spec = args["job"]
        if backend == "c10d":
            return c10d_endpoint(spec["job_name"], spec["namespace"])
        if args.get("etcd_endpoint") is None:
            raise ValueError(f"{name}: etcd-v2 rendezvous needs etcd_endpoint")
        return pulumi.Output.from_input(args["etcd_endpoint"])

    def _indexed_job(
        self,
        name: str,
        args: PyTorchJobArgs,
        placement: WorkerPlacement,
        run: str,
        backend: RendezvousBackend,
        endpoint: pulumi.Output[str],
        max_restarts: int,
    ) -> tuple[k8s.core.v1.Service, k8s.batch.v1.Job]:
        """The headless Service and the Indexed Job of the workers, each pod starting torchrun (through the launcher
        unless it is turned off)."""
        spec = args["job"]
        use_launcher = args.get("launcher", True)

        def command(ep: str) -> list[str]:
            return pytorch_command(
                spec,
                placement,
                script=args["script"],
                run_id=run,
                min_nodes=args["min_nodes"],
                max_nodes=args["max_nodes"],
                backend=backend,
                endpoint=ep,
                launcher=use_launcher,
            )

        env = pytorch_env(
            spec,
            placement,
            nodes=args["nodes"],
            max_restarts=max_restarts,
            checkpoint_every_seconds=args.get("checkpoint_every_seconds"),
            collective_timeout_seconds=args.get("collective_timeout_seconds"),
        )
        # the rendezvous label admits etcd-v2 pods to etcd (TrainingNetworkPolicies)
        labels = {
            **COMMON_LABELS,
            "app.kubernetes.io/name": "pytorch-job",
            "eks-training/run": run,
            RENDEZVOUS_LABEL: backend,
        }
        return indexed_job(
            name,
            self,
            spec,
            labels=labels,
            placement=placement,
            nodes=args["nodes"],
            command=endpoint.apply(command),
            env=env,
            backoff_limit=max_restarts * args["max_nodes"],
            ignore_exit_codes=(LAUNCHER_EXIT_STOPPED, LAUNCHER_EXIT_RENDEZVOUS_LOST) if use_launcher else (),
            fail_exit_codes=(LAUNCHER_EXIT_USAGE, LAUNCHER_EXIT_RUN_FAILED) if use_launcher else (LAUNCHER_EXIT_USAGE,),
            output_folder=not use_launcher,  # the launcher creates it
        )


def _checked_backend(name: str, args: PyTorchJobArgs) -> RendezvousBackend:
    """The job's rendezvous backend, after its node counts and backend are checked (ValueError naming the job)."""
    if not 1 <= args["min_nodes"] <= args["nodes"] <= args["max_nodes"]:
        raise ValueError(f"{name}: need 1 <= min_nodes <= nodes <= max_nodes")
    if args["rendezvous_backend"] not in get_args(RendezvousBackend):
        raise ValueError(f"{name}: rendezvous_backend must be one of {', '.join(get_args(RendezvousBackend))}")
    return cast(RendezvousBackend, args["rendezvous_backend"])
