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

    def local_env(self, ctx: LocalContext) -> Mapping[str, Any]:
        return tensorflow_env(
            ctx.spec, ctx.placement, ctx.nodes, [f"127.0.0.1:{ctx.machine.free_port()}" for _ in range(ctx.nodes)]
        )


KIND = TensorFlow()
