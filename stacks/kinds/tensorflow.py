"""``tensorflow``: ``MultiWorkerMirroredStrategy`` workers with ``TF_CONFIG``, an Indexed Job without an operator
(:class:`~components.workloads.TensorFlowJob`)."""

from typing import Any, Mapping

from components.workloads import TensorFlowJob
from components.workloads.tensorflow import tensorflow_env
from stacks.kinds.base import LocalContext
from stacks.kinds.indexed import IndexedCommandKind


class TensorFlow(IndexedCommandKind):
    name = "tensorflow"
    summary = "MultiWorkerMirroredStrategy workers with TF_CONFIG"
    fixed_size = "MultiWorkerMirroredStrategy has a fixed cluster (TF_CONFIG)"
    component = TensorFlowJob
    variables = frozenset({"TF_CONFIG"})
    image_package = "tensorflow"
    example_image = "images/tensorflow"

    def node_stop(self, nodes: int) -> str:
        # MultiWorkerMirroredStrategy's collectives end with a lost worker (tests/real/test_jobs_real.py's survivor)
        if nodes < 2:
            return ""
        return (
            "its other workers fail with it, and its Job starts them again from the last backup, each failure using "
            "one of its maxRestarts per pod"
        )

    def roll_failures(self, nodes: int) -> int:
        return nodes * (nodes - 1)

    def local_env(self, ctx: LocalContext) -> Mapping[str, Any]:
        return tensorflow_env(
            ctx.spec, ctx.placement, ctx.nodes, [f"127.0.0.1:{ctx.machine.free_port()}" for _ in range(ctx.nodes)]
        )


KIND = TensorFlow()
