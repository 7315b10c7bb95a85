"""``CommandJob``: any image and command on one or more nodes, for frameworks this project does not know."""

from typing import Mapping, Optional, Sequence, TypedDict

import pulumi
from typing_extensions import NotRequired

from components.args import checks_args
from components.workloads.indexed import IndexedWorkersJob
from components.workloads.spec import MASTER_PORT, JobSpec, WorkerPlacement, job_env, peer_env, worker_env


def command_env(
    spec: JobSpec, placement: WorkerPlacement, nodes: int, peers: pulumi.Input[Sequence[str]], port: int = MASTER_PORT
) -> dict[str, pulumi.Input[str]]:
    """The environment of every pod of a command job (before Kubernetes expands ``$(JOB_INDEX)``): the node
    type's settings (:func:`worker_env`), where the peers are (:func:`peer_env`: ``peers`` are the pods'
    addresses in index order, their stable hostnames on the cluster) and the job's own variables
    (:func:`job_env`, which come last, so a job's ``env`` wins)."""
    return {
        **worker_env(placement),
        **peer_env(peers, nodes, port),
        **job_env(spec, nodes=nodes, procs_per_node=placement["procs_per_node"]),
    }


class CommandJobArgs(TypedDict):
    """Inputs of :class:`CommandJob`."""

    job: JobSpec
    """Namespace, claim, image, output folder, arguments, data, order and code of the job."""
    placement: WorkerPlacement
    """Node selection, tolerations and per-pod requests (from the node group's plan)."""
    command: Sequence[str]
    """The container command (``args`` of the job follow it)."""
    nodes: int
    """Pods (one per node)."""
    max_retries: NotRequired[int]
    """Pod failures tolerated per node before the Job fails. Default 3."""


class CommandJob(IndexedWorkersJob):
    """An Indexed Job plus a headless Service running ``command`` in ``nodes`` pods. Each pod gets the job's
    environment (``OUTPUT_DIR``, ``DATA_DIR``, ...) and where its peers are: ``JOB_INDEX``, ``JOB_SIZE``,
    ``JOB_PEERS``, ``MASTER_ADDR``/``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``/``NODE_RANK`` (enough for
    ``torch.distributed``'s ``env://``, JAX, Ray or a script of one's own).
    It needs a ``kubernetes`` provider in ``opts``."""

    _app_name = "command-job"
    _port = ("peers", MASTER_PORT)

    job_name: pulumi.Output[str]
    """Name of the Job."""
    output_dir: pulumi.Output[str]
    """The job's output folder inside the pods; resolves after the Job is created."""

    def _environment(
        self, spec: JobSpec, placement: WorkerPlacement, nodes: int, hosts: pulumi.Output[list[str]]
    ) -> Mapping[str, pulumi.Input[str]]:
        return command_env(spec, placement, nodes, hosts)

    @checks_args
    def __init__(self, name: str, args: CommandJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:CommandJob", name, args, opts)
        self.register_outputs(self._outputs())
