"""``mpi``: an ``MPIJob`` (kubeflow.org/v2beta1) run by the Kubeflow MPI Operator, whose launcher runs ``mpirun`` over
the workers (:class:`~components.workloads.MpiJob`)."""

import os
import shutil

from components.catalog.environment import MPIRUN
from components.scheduling import system_node_selector
from components.workloads import MpiJob, MpiJobArgs
from components.workloads.job_objects import MPI_JOB, MPIJOB_CRD
from components.workloads.mpi import mpi_launcher
from components.workloads.toolbox import WORKERS_WAIT_SCRIPT
from stacks.kinds.base import (
    BuildContext,
    JobComponent,
    JobKind,
    LocalContext,
    LocalMachine,
    LocalProcesses,
    OwnedField,
    PlannedJob,
)


class Mpi(JobKind):
    name = "mpi"
    summary = "an MPIJob (Kubeflow MPI Operator) whose ranks run command under mpirun"
    fixed_size = "an MPI job has a fixed world size (mpirun -np)"
    program = "the program each rank runs"
    owned_fields = (
        OwnedField(
            "launcher_command", "launcherCommand", "only mpi jobs have a launcher (the command that runs mpirun)"
        ),
    )
    # the workers run sshd, which writes its session files to the image's file system
    writable_root = True
    # the launcher is one pod, not an Indexed Job's
    indexed_pods = False
    variables = frozenset({"MASTER_ADDR", "MASTER_PORT"})
    launcher = MPIRUN
    job_object = MPI_JOB
    needs_mpi_operator = True
    launcher_on_system_group = True
    toolbox_scripts = {WORKERS_WAIT_SCRIPT: "an MPI launcher's wait for its workers"}
    # the workers run sshd, which runs the launcher's commands through a shell
    noop = ("/bin/sh", "-c", ":")
    # the MPI Operator labels each pod it creates with its role, launcher or worker (v0.8.0:
    # https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go#L1743-L1749)
    worker_selector = {"training.kubeflow.org/job-role": "worker"}
    # mpirun starts orted on the workers over ssh, without the image's PATH: the image must say where Open MPI is
    needs_mpi_prefix = True
    # its MPIJob is replaced on any change of its spec (components/workloads/mpi.py): the keys its spec reads
    pod_keys = JobKind.pod_keys | {"launcherCommand", "maxRestarts", "timeoutHours"}

    def node_stop(self, nodes: int) -> str:
        # a worker's sshd goes with its pod: mpirun fails, and a new launcher pod (components/workloads/mpi.py) waits
        # for the worker's replacement, then runs the program again
        return (
            "each stop ends mpirun: a new launcher waits for the worker's replacement and runs the program again "
            "from its start (unless it resumes itself), using one of its maxRestarts"
        )

    def roll_failures(self, nodes: int) -> int:
        return nodes

    def build(self, ctx: BuildContext) -> JobComponent:
        job, c = ctx.job, ctx.job.config
        assert c.command is not None
        args: MpiJobArgs = {
            "job": ctx.spec,
            "placement": job.placement,
            "launcher_node_selector": system_node_selector(),
            "command": list(c.command),
            "nodes": job.nodes,
            "operator_ready": ctx.mpi_operator_ready if ctx.mpi_operator_ready is not None else MPIJOB_CRD,
            "mpi_prefix": job.image.mpi_prefix or "",  # required by the config rules for an MPI job's image
            "slots_per_worker": job.procs_per_node,
            "backoff_limit": c.max_restarts,
        }
        if c.launcher_command:
            args["launcher_command"] = list(c.launcher_command)
        return MpiJob(ctx.name, args, opts=ctx.opts)

    def check_local(self, machine: LocalMachine, job: PlannedJob) -> None:
        if shutil.which("mpirun") is None:
            raise machine.fail(f"job {job.name} is an MPI job: install Open MPI (mpirun) to run it locally")

    def local_pods_text(self, pods: int, nodes: int, procs_per_node: int) -> str:
        return f"its launcher pod as a local process, whose mpirun starts {nodes * procs_per_node} rank(s) here"

    def local_processes(self, ctx: LocalContext) -> LocalProcesses:
        """The launcher runs mpirun over a hostfile of this machine; the ranks are its children."""
        c = ctx.job.config
        assert c.command is not None
        slots = ctx.placement["procs_per_node"]
        hostfile = ctx.machine.work / "tmp" / f"{ctx.job.name}-hostfile"
        hostfile.parent.mkdir(parents=True, exist_ok=True)
        # the operator writes one line per worker pod; here one host holds every rank
        hostfile.write_text(f"127.0.0.1 slots={ctx.nodes * slots}\n")
        command, env = mpi_launcher(
            ctx.spec,
            ctx.placement,
            nodes=ctx.nodes,
            slots=slots,
            program=list(c.command),
            hosts=ctx.peers,
            mpi_prefix=ctx.machine.mpi_prefix(),
            launcher_command=list(c.launcher_command or ()),
            hostfile=str(hostfile),
            port=ctx.machine.free_port(),
        )
        if os.geteuid() == 0:
            env = {**env, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        # the pods' mapping puts `slots` ranks on each worker node; here the one host takes them all
        at = command.index("--map-by") + 1
        command = [*command[:at], f"ppr:{ctx.nodes * slots}:node", *command[at + 1 :]]
        return LocalProcesses([command], env)


KIND = Mpi()
