"""``ElasticTrainingJob``: PyTorch DDP with torchrun elastic as a Kubernetes Indexed Job."""

from typing import Mapping, Optional, TypedDict, cast, get_args

import pulumi
from typing_extensions import NotRequired

from components.conventions import COMMON_LABELS, SHARED_MOUNT
from components.workloads.pods import RendezvousBackend, WorkerPlacement, c10d_endpoint, torchrun_command, worker_job

#: The training script and the launcher in the training image.
TRAIN_SCRIPT = "/app/train.py"
LAUNCHER = "/app/launch.py"


class TrainingHyperparameters(TypedDict):
    """train.py's recipe (see training/train.py)."""

    epochs: int
    """Epochs to train."""
    batch_size: int
    """Images per process and step."""
    learning_rate: float
    """Peak learning rate."""
    width: int
    """ResNet-9 base width."""
    data_loader_workers: int
    """DataLoader worker processes per rank."""
    checkpoint_every_steps: int
    """Also checkpoint every N optimizer steps (0: every epoch only)."""



class ElasticTrainingJobArgs(TypedDict):
    """Inputs of :class:`ElasticTrainingJob`."""

    namespace: pulumi.Input[str]
    """Training namespace."""
    pvc_name: pulumi.Input[str]
    """Shared claim (data, checkpoints, model)."""
    image: pulumi.Input[str]
    """Training image, by digest."""
    job_name: str
    """Kubernetes name of the Job (and prefix of the headless Service)."""
    run_id: str
    """Stable id of the run: rendezvous id and output folder ``/data/runs/<run_id>``."""
    placement: WorkerPlacement
    """Node selection, tolerations and per-pod requests of the workers (from the node group's plan)."""
    workers: int
    """Number of worker pods (one per node)."""
    min_workers: int
    """torchrun's minimum node count (``--nnodes=MIN:MAX``)."""
    max_workers: int
    """torchrun's maximum node count; the worker count can be raised up to this without a new run."""
    rendezvous_backend: str
    """``etcd-v2`` (needs ``etcd_endpoint``) or ``c10d`` (hosted by worker 0)."""
    etcd_endpoint: NotRequired[pulumi.Input[str]]
    """``host:port`` of etcd for ``etcd-v2``."""
    data_dir: pulumi.Input[str]
    """Dataset folder inside the pods (an Output of the staging step: the Job waits for it)."""
    hyperparameters: TrainingHyperparameters
    """train.py's recipe."""
    max_restarts: NotRequired[int]
    """torchrun restarts per agent, and the Job's pod backoff per worker. Default 3."""
    wait_for_completion: NotRequired[bool]
    """Make ``pulumi up`` wait until the Job completes. Default False."""
    timeout_hours: NotRequired[float]
    """Deadline of the Job (activeDeadlineSeconds), and Pulumi's wait when waiting. Default 24."""
    extra_env: NotRequired[Mapping[str, str]]
    """Additional environment for the workers."""


class ElasticTrainingJob(pulumi.ComponentResource):
    """PyTorch DDP with torchrun elastic as a Kubernetes Indexed Job plus a headless Service.

    One pod per node (required anti-affinity), stable hostnames ``<job>-<index>.<service>``, the
    shared volume at ``/data``, a memory-backed ``/dev/shm``, ``nvidia.com/gpu`` equal to the
    node's GPUs, and on EFA groups ``vpc.amazonaws.com/efa`` equal to the node's interfaces plus
    huge pages and the family's NCCL/libfabric settings, all from one catalog row. Pods start
    through ``/app/launch.py``, which exits at once when the run is already complete and resets a
    rendezvous that an earlier failed attempt closed. A failed pod is replaced by the Job (same
    index) and its torchrun agent re-joins the rendezvous; train.py resumes from the latest
    checkpoint. Node drains and spot interruptions (``DisruptionTarget``) don't count against the
    backoff; a launcher usage error (exit code 2: an inconsistent command) fails the Job at once.
    Changing ``workers`` replaces the Job (pulumi-kubernetes replaces a Job whose completions,
    parallelism or template change; the old one is deleted first): the new pods keep the run id and
    output folder, so torchrun re-rendezvouses at the new size and train.py resumes from the latest
    checkpoint.
    """

    job_name: pulumi.Output[str]
    """Name of the Job."""
    service_name: pulumi.Output[str]
    """Name of the headless Service."""
    output_dir: pulumi.Output[str]
    """Where checkpoints, ``model.pt`` and ``DONE`` are written inside the pods; resolves after the
    Job is created, so an evaluation built from it comes after it."""
    rendezvous_endpoint: pulumi.Output[str]
    """The ``--rdzv-endpoint`` used."""

    def __init__(self, name: str, args: ElasticTrainingJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:ElasticTrainingJob", name, None, opts)
        job_name = args["job_name"]
        placement = args["placement"]
        workers = args["workers"]
        if not 1 <= args["min_workers"] <= workers <= args["max_workers"]:
            raise ValueError(f"{name}: need 1 <= min_workers <= workers <= max_workers")
        max_restarts = int(args.get("max_restarts", 3))
        hp = args["hyperparameters"]
        output_dir = f"{SHARED_MOUNT}/runs/{args['run_id']}"
        labels = {**COMMON_LABELS, "app.kubernetes.io/name": "trainer", "eks-training/run": args["run_id"]}
        if args["rendezvous_backend"] not in get_args(RendezvousBackend):
            raise ValueError(f"{name}: rendezvous_backend must be one of {', '.join(get_args(RendezvousBackend))}")
        backend = cast(RendezvousBackend, args["rendezvous_backend"])

        if backend == "etcd-v2":
            if args.get("etcd_endpoint") is None:
                raise ValueError(f"{name}: etcd-v2 rendezvous needs etcd_endpoint")
            endpoint: pulumi.Output[str] = pulumi.Output.from_input(args["etcd_endpoint"])
        else:
            endpoint = c10d_endpoint(job_name, args["namespace"])

        def command(ep: str, data_dir: str) -> list[str]:
            launcher = [
                "python",
                LAUNCHER,
                "--output-dir",
                output_dir,
                "--rdzv-backend",
                backend,
                "--rdzv-endpoint",
                ep,
                "--rdzv-id",
                args["run_id"],
                "--",
            ]
            return launcher + torchrun_command(
                min_nodes=args["min_workers"],
                max_nodes=args["max_workers"],
                procs_per_node=placement["procs_per_node"],
                backend=backend,
                endpoint=ep,
                rdzv_id=args["run_id"],
                max_restarts=max_restarts,
                script=TRAIN_SCRIPT,
                script_args=[
                    "--data-dir",
                    data_dir,
                    "--output-dir",
                    output_dir,
                    "--epochs",
                    str(hp["epochs"]),
                    "--batch-size",
                    str(hp["batch_size"]),
                    "--lr",
                    str(hp["learning_rate"]),
                    "--width",
                    str(hp["width"]),
                    "--workers",
                    str(hp["data_loader_workers"]),
                    "--checkpoint-every-steps",
                    str(hp["checkpoint_every_steps"]),
                ],
            )

        service, job = worker_job(
            name,
            self,
            namespace=args["namespace"],
            job_name=job_name,
            labels=labels,
            placement=placement,
            image=args["image"],
            command=pulumi.Output.all(endpoint, args["data_dir"]).apply(lambda v: command(str(v[0]), str(v[1]))),
            pvc_name=args["pvc_name"],
            workers=workers,
            backoff_limit=max_restarts * args["max_workers"],
            timeout_s=int(float(args.get("timeout_hours", 24)) * 3600),
            await_completion=bool(args.get("wait_for_completion")),
            extra_env=args.get("extra_env"),
        )
        self.job_name = job.metadata.name
        self.service_name = service.metadata.name
        self.output_dir = job.metadata.apply(lambda _: output_dir)
        self.rendezvous_endpoint = endpoint
        self.register_outputs(
            {
                "job_name": self.job_name,
                "service_name": self.service_name,
                "output_dir": self.output_dir,
                "rendezvous_endpoint": self.rendezvous_endpoint,
            }
        )
