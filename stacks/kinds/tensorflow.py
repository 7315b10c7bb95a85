"""``tensorflow``: ``MultiWorkerMirroredStrategy`` workers with ``TF_CONFIG``, an Indexed Job without an operator
(:class:`~components.workloads.TensorFlowJob`)."""

from typing import TYPE_CHECKING, Sequence

from components.workloads import TensorFlowJob
from components.workloads.pods import JobSpec, WorkerPlacement
from components.workloads.tensorflow import tensorflow_env
from stacks.kinds.base import BuildContext, JobComponent, JobKind, LocalMachine, LocalProcesses

if TYPE_CHECKING:
    from stacks.plan import JobPlan


class TensorFlow(JobKind):
    name = "tensorflow"
    summary = "MultiWorkerMirroredStrategy workers with TF_CONFIG"
    fixed_size = "MultiWorkerMirroredStrategy has a fixed cluster (TF_CONFIG)"
    one_process_per_pod = True

    def build(self, ctx: BuildContext) -> JobComponent:
        job, c = ctx.job, ctx.job.config
        assert c.command is not None
        return TensorFlowJob(
            ctx.name,
            {"job": ctx.spec, "placement": job.placement, "command": list(c.command), "nodes": job.nodes,
             "max_retries": c.max_restarts},
            opts=ctx.opts,
        )

    def local_processes(self, machine: LocalMachine, job: "JobPlan", spec: JobSpec, placement: WorkerPlacement,
                        nodes: int, peers: Sequence[str]) -> LocalProcesses:
        assert job.config.command is not None
        env = tensorflow_env(spec, placement, nodes, [f"127.0.0.1:{machine.free_port()}" for _ in range(nodes)])
        return LocalProcesses([[*job.config.command, *(spec.get("args") or [])]] * nodes, env)


KIND = TensorFlow()
