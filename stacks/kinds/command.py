"""``command``: any command in every pod of an Indexed Job, with its peers in the environment
(:class:`~components.workloads.CommandJob`)."""

from typing import TYPE_CHECKING, Sequence

from components.workloads import CommandJob
from components.workloads.command import command_env
from components.workloads.pods import JobSpec, WorkerPlacement
from stacks.kinds.base import BuildContext, JobComponent, JobKind, LocalMachine, LocalProcesses

if TYPE_CHECKING:
    from stacks.plan import JobPlan


class Command(JobKind):
    name = "command"
    summary = "any command in every pod, with its peers in the environment"
    fixed_size = "a command job runs a fixed number of pods"
    on_system_group = True
    one_process_per_pod = True

    def build(self, ctx: BuildContext) -> JobComponent:
        job, c = ctx.job, ctx.job.config
        assert c.command is not None
        return CommandJob(
            ctx.name,
            {"job": ctx.spec, "placement": job.placement, "command": list(c.command), "nodes": job.nodes,
             "max_retries": c.max_restarts},
            opts=ctx.opts,
        )

    def local_processes(self, machine: LocalMachine, job: "JobPlan", spec: JobSpec, placement: WorkerPlacement,
                        nodes: int, peers: Sequence[str]) -> LocalProcesses:
        assert job.config.command is not None
        env = command_env(spec, placement, nodes, peers, port=machine.free_port())
        return LocalProcesses([[*job.config.command, *(spec.get("args") or [])]] * nodes, env)


KIND = Command()
