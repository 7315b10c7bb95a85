"""The kinds whose every pod runs the job's command in an Indexed Job, with no operator (``command``,
``tensorflow``): one build and one local run, each kind giving its component and its pods' environment."""

from typing import Any, Callable, ClassVar, Mapping

from components.workloads.indexed import indexed_backoff_limit
from stacks.kinds.base import BuildContext, JobComponent, JobKind, JobSettings, LocalContext, LocalProcesses, is_python


class IndexedCommandKind(JobKind):
    """A kind whose pods each run ``jobs.<name>.command`` (plus the job's args) in an Indexed Job."""

    one_process_per_pod = True
    component: ClassVar[Callable[..., JobComponent]]
    """The kind's component (``components.workloads``), built from the job's spec, placement, command and size."""

    def failure_limit(self, max_restarts: int, nodes: int) -> int:
        return indexed_backoff_limit(max_restarts, nodes)

    def noop_command(self, job: JobSettings) -> tuple[str, ...]:
        """The command's own interpreter when it starts with Python (``python``, ``python3.12``, a path to one):
        the image has it. Any other command: no pre-pull."""
        first = (job.command or [""])[0]
        return (first, "-c", "") if is_python(first) else ()

    def local_env(self, ctx: LocalContext) -> Mapping[str, Any]:
        """The environment every local process gets (what the kind's component puts in its pods)."""
        raise NotImplementedError

    def build(self, ctx: BuildContext) -> JobComponent:
        job, c = ctx.job, ctx.job.config
        assert c.command is not None
        return type(self).component(
            ctx.name,
            {
                "job": ctx.spec,
                "placement": job.placement,
                "command": list(c.command),
                "nodes": job.nodes,
                "max_retries": c.max_restarts,
            },
            opts=ctx.opts,
        )

    def local_processes(self, ctx: LocalContext) -> LocalProcesses:
        assert ctx.job.config.command is not None
        env = self.local_env(ctx)
        return LocalProcesses([[*ctx.job.config.command, *(ctx.spec.get("args") or [])]] * ctx.nodes, env)
