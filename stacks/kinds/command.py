"""``command``: any command in every pod of an Indexed Job, with its peers in the environment
(:class:`~components.workloads.CommandJob`)."""

from typing import Any, Mapping

from components.workloads import CommandJob
from components.workloads.command import command_env
from components.workloads.spec import PEER_VARIABLES
from stacks.kinds.base import LocalContext
from stacks.kinds.indexed import IndexedCommandKind


class Command(IndexedCommandKind):
    name = "command"
    summary = "any command in every pod, with its peers in the environment"
    fixed_size = "a command job runs a fixed number of pods"
    on_system_group = True
    component = CommandJob
    variables = PEER_VARIABLES

    def node_stop(self, nodes: int) -> str:
        return "its other pods run on without it, as its program decides" if nodes > 1 else ""

    def local_env(self, ctx: LocalContext) -> Mapping[str, Any]:
        return command_env(ctx.spec, ctx.placement, ctx.nodes, ctx.peers, port=ctx.machine.free_port())


KIND = Command()
