"""``TensorFlowJob``: multi-worker TensorFlow (``MultiWorkerMirroredStrategy``) without an operator."""

import json
from typing import Mapping, Optional, Sequence, TypedDict

import pulumi
from typing_extensions import NotRequired

from components.args import checks_args
from components.workloads.indexed import IndexedWorkersJob
from components.workloads.spec import JobSpec, WorkerPlacement, apply_input, job_env, worker_env

#: The port each TensorFlow worker serves its collective ops on.
TF_PORT = 2222
#: Keras 3 (TensorFlow >= 2.16's default) does not support MultiWorkerMirroredStrategy; tf-keras does
#: (https://github.com/keras-team/keras/issues/20585, https://github.com/tensorflow/tensorflow/issues/72388).
LEGACY_KERAS_ENV = {"TF_USE_LEGACY_KERAS": "1"}


def tf_config(workers: Sequence[str], index: str) -> str:
    """``TF_CONFIG`` of one worker: the cluster (``host:port`` of every worker, in index order) and this
    worker's task. ``index`` is ``$(JOB_INDEX)`` in the pods (Kubernetes expands it from the downward API)."""
    cluster = json.dumps({"worker": list(workers)}, separators=(",", ":"))
    return f'{{"cluster":{cluster},"task":{{"type":"worker","index":{index}}}}}'


def tensorflow_env(
    spec: JobSpec, placement: WorkerPlacement, nodes: int, workers: pulumi.Input[Sequence[str]]
) -> dict[str, pulumi.Input[str]]:
    """The environment of every TensorFlow worker (before Kubernetes expands ``$(JOB_INDEX)``): the node
    type's settings with ``TF_USE_LEGACY_KERAS=1``, the job's variables, and ``TF_CONFIG`` (:func:`tf_config`)
    naming ``workers`` (``host:port`` of every worker in index order; on the cluster
    ``<job>-<i>.<service>...:2222``) and this worker's index."""
    return {
        **worker_env(placement, LEGACY_KERAS_ENV),
        **job_env(spec, nodes=nodes, procs_per_node=placement["procs_per_node"]),
        "TF_CONFIG": apply_input(workers, lambda w: tf_config(w, "$(JOB_INDEX)")),
    }


class TensorFlowJobArgs(TypedDict):
    """Inputs of :class:`TensorFlowJob`."""

    job: JobSpec
    """Namespace, claim, image, output folder, arguments, data, order and code of the job."""
    placement: WorkerPlacement
    """Node selection, tolerations and per-pod requests (from the node group's plan)."""
    command: Sequence[str]
    """The trainer's command (``args`` of the job follow it)."""
    nodes: int
    """Workers (one pod per node)."""
    max_retries: NotRequired[int]
    """Pod failures tolerated per worker before the Job fails (a restarted worker resumes from its
    BackupAndRestore backup). Default 3."""


class TensorFlowJob(IndexedWorkersJob):
    """An Indexed Job plus a headless Service; each worker gets ``TF_CONFIG`` with every worker's stable
    hostname (``<job>-<i>.<service>:2222``) and its own index, and ``TF_USE_LEGACY_KERAS=1``.
    It needs a ``kubernetes`` provider in ``opts``."""

    job_name: pulumi.Output[str]
    """Name of the Job."""
    output_dir: pulumi.Output[str]
    """The job's output folder inside the pods; resolves after the Job is created."""

    _app_name = "tensorflow-job"
    _port = ("tf", TF_PORT)

    def _environment(
        self, spec: JobSpec, placement: WorkerPlacement, nodes: int, hosts: pulumi.Output[list[str]]
    ) -> Mapping[str, pulumi.Input[str]]:
        return tensorflow_env(spec, placement, nodes, hosts.apply(lambda h: [f"{x}:{TF_PORT}" for x in h]))

    @checks_args
    def __init__(self, name: str, args: TensorFlowJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:TensorFlowJob", name, args, opts)
        self.register_outputs(self._outputs())
