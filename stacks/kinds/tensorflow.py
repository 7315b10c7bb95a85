"""``tensorflow``: ``MultiWorkerMirroredStrategy`` workers with ``TF_CONFIG``, an Indexed Job without an operator
(:class:`~components.workloads.TensorFlowJob`)."""

from typing import Any, Mapping, Sequence

from components.workloads import TensorFlowJob
from components.workloads.pods import JobSpec, WorkerPlacement
from components.workloads.tensorflow import tensorflow_env
from stacks.kinds.base import LocalMachine
from stacks.kinds.indexed import IndexedCommandKind


class TensorFlow(IndexedCommandKind):
    name = "tensorflow"
    summary = "MultiWorkerMirroredStrategy workers with TF_CONFIG"
    fixed_size = "MultiWorkerMirroredStrategy has a fixed cluster (TF_CONFIG)"
    component = TensorFlowJob

    def local_env(
        self, machine: LocalMachine, spec: JobSpec, placement: WorkerPlacement, nodes: int, peers: Sequence[str]
    ) -> Mapping[str, Any]:
        return tensorflow_env(spec, placement, nodes, [f"127.0.0.1:{machine.free_port()}" for _ in range(nodes)])


KIND = TensorFlow()
