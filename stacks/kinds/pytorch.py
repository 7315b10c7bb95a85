"""``pytorch``: any PyTorch script under torchrun elastic, as an Indexed Job
(:class:`~components.workloads.PyTorchJob`)."""

from typing import Mapping, Sequence, cast

from components.catalog.environment import TORCHRUN
from components.workloads import PyTorchJob, PyTorchJobArgs
from components.workloads.pytorch import LAUNCHER, RESILIENCE_VARIABLES, RUN_SCRIPT, pytorch_command, pytorch_env
from components.workloads.spec import RendezvousBackend
from stacks.bundle import TOOLBOX_IMAGE
from stacks.kinds.base import (
    BuildContext,
    JobComponent,
    JobKind,
    JobSettings,
    LocalContext,
    LocalMachine,
    LocalProcesses,
    OwnedField,
    PlannedJob,
    is_python,
)
from stacks.yaml_text import quoted_list

#: What only a PyTorch job's trainer reads (through the environment).
_TRAINER = "only pytorch jobs pass it to their trainer (through the environment); remove it from this {kind} job"


class PyTorch(JobKind):
    name = "pytorch"
    summary = "torchrun (elastic) runs script"
    elastic = True
    takes_script = True
    # the pods run the launcher with the image's python
    noop = ("python", "-c", "")
    variables = RESILIENCE_VARIABLES
    launcher = TORCHRUN
    owned_fields = (
        OwnedField("script", "script", "only pytorch jobs take a script; put it in the command of a {kind} job"),
        OwnedField("rendezvous_backend", "rendezvousBackend", "only pytorch jobs use a torchrun rendezvous"),
        OwnedField("checkpoint_every_seconds", "checkpointEverySeconds", _TRAINER),
        OwnedField("collective_timeout_seconds", "collectiveTimeoutSeconds", _TRAINER),
    )
    # the run id is the pods' eks-training/run label and torchrun's --rdzv-id (components/workloads/pytorch.py)
    run_in_pods = True
    # torchrun's command line (--nnodes, --max-restarts, the rendezvous) and the trainer's variables are in the pods
    pod_keys = JobKind.pod_keys | {
        "minNodes",
        "maxNodes",
        "maxRestarts",
        "rendezvousBackend",
        "checkpointEverySeconds",
        "collectiveTimeoutSeconds",
    }

    def problems(self, job: JobSettings) -> list[tuple[str, str]]:
        if job.command is not None:  # one mistake: the script written as a command
            return [("command", f"a pytorch job's command is torchrun; {_script_instead(job.command, job.args)}")]
        if job.script is None:
            return [
                (
                    "script",
                    "a pytorch job runs a script under torchrun; set script (a path in the image, "
                    "or relative to the downloaded code)",
                )
            ]
        return []

    def image_scripts(self, toolbox: bool) -> Mapping[str, str]:
        scripts = {RUN_SCRIPT: "torchrun's wrapper of a pytorch job's script"}
        return {**scripts, LAUNCHER: "a pytorch job's launcher"} if toolbox else scripts

    def skips_finished_runs(self, job: PlannedJob) -> bool:
        return _launcher(job)

    def rerun_text(self) -> str:
        return (
            "an unfinished run resumes from its latest checkpoint; a finished one ends at once on the training image "
            "(whose launcher skips it), its script runs again on another"
        )

    def needs_etcd(self, job: JobSettings) -> bool:
        return job.rendezvous_backend == "etcd-v2"

    def program_text(self, job: JobSettings) -> str:
        return job.script or ""

    def build(self, ctx: BuildContext) -> JobComponent:
        job, c = ctx.job, ctx.job.config
        assert c.script is not None
        args: PyTorchJobArgs = {
            "job": ctx.spec,
            "placement": job.placement,
            "script": c.script,
            "run_id": job.run_id,
            "nodes": job.nodes,
            "min_nodes": job.min_nodes,
            "max_nodes": job.max_nodes,
            "rendezvous_backend": c.rendezvous_backend,
            "max_restarts": c.max_restarts,
            # the toolbox image's /app/launch.py wraps torchrun (not the class's `launcher`, torchrun itself)
            "launcher": _launcher(job),
        }
        if c.checkpoint_every_seconds is not None:
            args["checkpoint_every_seconds"] = c.checkpoint_every_seconds
        if c.collective_timeout_seconds is not None:
            args["collective_timeout_seconds"] = c.collective_timeout_seconds
        if ctx.etcd_endpoint is not None and c.rendezvous_backend == "etcd-v2":
            args["etcd_endpoint"] = ctx.etcd_endpoint
        return PyTorchJob(ctx.name, args, opts=ctx.opts)

    def check_local(self, machine: LocalMachine, job: PlannedJob) -> None:
        machine.check_torch(job)  # torchrun comes with PyTorch

    def local_processes(self, ctx: LocalContext) -> LocalProcesses:
        c = ctx.job.config
        assert c.script is not None
        backend = cast(RendezvousBackend, c.rendezvous_backend)
        endpoint = ctx.machine.etcd_endpoint() if backend == "etcd-v2" else f"127.0.0.1:{ctx.machine.free_port()}"
        command = pytorch_command(
            ctx.spec,
            ctx.placement,
            script=c.script,
            run_id=ctx.job.run_id,
            min_nodes=min(ctx.job.min_nodes, ctx.nodes),
            max_nodes=max(ctx.job.max_nodes, ctx.nodes),
            backend=backend,
            endpoint=endpoint,
            launcher=_launcher(ctx.job),
        )
        env = pytorch_env(
            ctx.spec,
            ctx.placement,
            nodes=ctx.nodes,
            max_restarts=c.max_restarts,
            checkpoint_every_seconds=c.checkpoint_every_seconds,
            collective_timeout_seconds=c.collective_timeout_seconds,
        )
        return LocalProcesses([command] * ctx.nodes, env)


def _launcher(job: PlannedJob) -> bool:
    """The job's pods start through the toolbox image's ``/app/launch.py``, which wraps torchrun (images of the user's
    own run torchrun directly)."""
    return job.image.name == TOOLBOX_IMAGE


KIND = PyTorch()


def _script_instead(command: Sequence[str], args: Sequence[str]) -> str:
    """The fix for a pytorch job given a ``command``: its script as ``script``, the words after it first in ``args``."""
    words = list(command)
    if len(words) >= 2 and is_python(words[0]) and words[1].endswith(".py"):
        moved = f", args: {quoted_list([*words[2:], *args])}" if words[2:] else ""
        return f"remove command and write script: {words[1]}{moved}"
    return "remove command, and give the script and args instead"
