"""What a kind of job is (:class:`JobKind`): everything the program and its tools need to know about one kind.

The config models, the rules, the plan, the composition, the outputs, the collector, the reports and the local runner
ask the kind instead of branching on its name. A phase is a method (validate the job's fields, build its component,
start its processes locally) and a fact is an attribute (elastic, the Kubernetes object, the operator it needs), as
in Kubeflow Trainer's runtime framework. The registry is :data:`stacks.kinds.KINDS`.

The registry belongs to the core (:data:`stacks.cli.CORE`), so a kind imports neither the composition nor a tool:
the composition hands :meth:`JobKind.build` what it registered (:class:`BuildContext`), and the local runner hands
:meth:`JobKind.local_processes` the machine (:class:`LocalMachine`).

Why, with Kubeflow Trainer's sources: ARCHITECTURE.md, "Where defaults and decisions live"."""

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Optional, Protocol, Sequence

import pulumi

from components.catalog.environment import Launcher
from components.workloads.job_objects import BATCH_JOB, JobObject
from components.workloads.pods import INDEX_VARIABLE
from components.workloads.spec import JOB_VARIABLES, JobSpec, WorkerPlacement

#: A Python interpreter's file name.
_PYTHON = re.compile(r"python[0-9.]*")


def is_python(word: str) -> bool:
    """Whether a command's first word starts Python (``python``, ``python3.12``, a path to one)."""
    return bool(_PYTHON.fullmatch(posixpath.basename(word)))


class JobSettings(Protocol):
    """What a kind reads of a job's configuration, ``jobs.<name>`` (:class:`stacks.config.jobs.JobConfig`)."""

    @property
    def command(self) -> Optional[Sequence[str]]: ...
    @property
    def args(self) -> Sequence[str]: ...
    @property
    def launcher_command(self) -> Optional[Sequence[str]]: ...
    @property
    def script(self) -> Optional[str]: ...
    @property
    def rendezvous_backend(self) -> str: ...
    @property
    def max_restarts(self) -> int: ...
    @property
    def checkpoint_every_seconds(self) -> Optional[float]: ...
    @property
    def collective_timeout_seconds(self) -> Optional[float]: ...


class JobImage(Protocol):
    """What a kind reads of a job's image (:class:`stacks.plan.images.ImagePlan`)."""

    @property
    def name(self) -> str: ...
    @property
    def mpi_prefix(self) -> Optional[str]: ...


class PlannedJob(Protocol):
    """What a kind reads of a job's plan (:class:`stacks.plan.JobPlan`): the kinds sit below the config and the plan,
    which read the kinds."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> JobSettings: ...
    @property
    def image(self) -> JobImage: ...
    @property
    def placement(self) -> WorkerPlacement: ...
    @property
    def nodes(self) -> int: ...
    @property
    def min_nodes(self) -> int: ...
    @property
    def max_nodes(self) -> int: ...
    @property
    def procs_per_node(self) -> int: ...
    @property
    def run_id(self) -> str: ...


class JobComponent(Protocol):
    """What the program reads of a job's registered component (every kind's has both)."""

    job_name: pulumi.Output[str]
    """The name of the Kubernetes object (Job, MPIJob...)."""
    output_dir: pulumi.Output[str]
    """The job's output folder inside the pods; resolves after the object is created."""


@dataclass(frozen=True)
class OwnedField:
    """A field of ``jobs.<name>`` only this kind takes: set on a job of another kind, it is reported at ``key`` with
    ``why`` (``{kind}`` is the job's kind)."""

    field: str
    """The model's field name (snake case)."""
    key: str
    """The key in the stack file (camel case)."""
    why: str


@dataclass
class BuildContext:
    """What :meth:`JobKind.build` gets from the composition (:func:`stacks.workloads.build_jobs`): the component's
    name, the job's plan, the spec every kind shares (:func:`stacks.plan.jobspec.job_spec`, with its waits), the
    Kubernetes provider's options, and the shared pieces registered before the jobs."""

    name: str
    job: PlannedJob
    spec: JobSpec
    opts: pulumi.ResourceOptions
    etcd_endpoint: Optional[pulumi.Output[str]] = None
    """The stack's etcd rendezvous (``None``: no job needs one, :meth:`JobKind.needs_etcd`)."""
    mpi_operator_ready: Optional[pulumi.Output[str]] = None
    """The MPI Operator's CRD name, resolved once it is installed (``None``: the cluster stack's operator, a jobs-only
    stack)."""


class LocalMachine(Protocol):
    """What the local runner (:class:`stacks.local.runner.LocalRunner`) offers a kind's local phases."""

    @property
    def work(self) -> Path:
        """The runner's state folder (a kind's scratch files go under ``work/tmp``)."""
        ...

    def free_port(self) -> int:
        """A TCP port free on 127.0.0.1 now."""
        ...

    def etcd_endpoint(self) -> str:
        """A local etcd 3.5 with the v2 API (started once per run)."""
        ...

    def mpi_prefix(self) -> str:
        """This machine's Open MPI installation (raises when there is none)."""
        ...

    def check_torch(self, job: PlannedJob) -> None:
        """Raise the runner's error, with its fix, when the job's Python has no PyTorch."""
        ...

    def fail(self, reason: str, fix: str = "") -> Exception:
        """The runner's error for a job that cannot run here (the caller raises it)."""
        ...


@dataclass(frozen=True)
class LocalContext:
    """What :meth:`JobKind.local_processes` gets from the local runner (:meth:`stacks.local.runner.LocalRunner.pods`):
    the machine, the job's plan, the spec its component would get, the placement on this machine, and how many
    processes stand for its pods, with their hosts."""

    machine: LocalMachine
    job: PlannedJob
    spec: JobSpec
    placement: WorkerPlacement
    nodes: int
    peers: Sequence[str]


@dataclass
class LocalProcesses:
    """What :meth:`JobKind.local_processes` gives the local runner: one command per process and their environment
    (before Kubernetes' expansion of ``$(VAR)``)."""

    commands: list[list[str]]
    env: Mapping[str, Any]


class JobKind:
    """One kind of job. A kind sets the class attributes and implements :meth:`build` and :meth:`local_processes`;
    the defaults describe a kind whose pods run ``command`` as a batch/v1 Job of a fixed size."""

    name: ClassVar[str]
    """The value of ``jobs.<name>.kind``."""
    summary: ClassVar[str]
    """What a job of this kind is, one clause (the ``kind`` key's documentation)."""
    elastic: ClassVar[bool] = False
    """Its node count may change while it runs (``minNodes``/``maxNodes``; default minNodes 1, maxNodes the group's
    maxSize)."""
    fixed_size: ClassVar[str] = ""
    """Why a job of a kind that is not elastic cannot change size (the message to a job that sets minNodes)."""
    takes_script: ClassVar[bool] = False
    """Its program is ``script`` (run by the kind's own launcher), not ``command``."""
    program: ClassVar[str] = "the program"
    """What its ``command`` is (the message to a job without one)."""
    owned_fields: ClassVar[tuple[OwnedField, ...]] = ()
    """The fields of ``jobs.<name>`` only this kind takes."""
    on_system_group: ClassVar[bool] = False
    """Light jobs of this kind may run on the system node group (``nodeGroup: system``)."""
    writable_root: ClassVar[bool] = False
    """Its containers need a writable root file system by default (``readOnlyRootFilesystem`` unset)."""
    one_process_per_pod: ClassVar[bool] = False
    """A pod starts one process, the job's command (it gets ``PROCS_PER_NODE`` to start more itself)."""
    toolbox_scripts: ClassVar[Mapping[str, str]] = {}
    """The toolbox's scripts its pods run besides those every job may (:mod:`components.workloads.toolbox`), each
    with what runs it."""

    launcher_on_system_group: ClassVar[bool] = False
    """Each job also runs a launcher pod on the system node group (the MPI Operator's launcher, which runs
    ``mpirun``), which Kueue admits against the system flavor (:func:`stacks.plan.admission.launcher_requests`)."""
    worker_selector: ClassVar[Mapping[str, str]] = {}
    """Labels that tell its worker pods (on the job's group) from its other pods, for the job's
    PodDisruptionBudget (empty: every pod of the job is a worker)."""
    indexed_pods: ClassVar[bool] = True
    """Its pods are an Indexed Job's (each gets ``JOB_INDEX`` from the downward API)."""
    variables: ClassVar[frozenset[str]] = frozenset()
    """The variables its component sets in the pods beyond every job's (:meth:`pod_variables`)."""
    launcher: ClassVar[Optional[Launcher]] = None
    """The program that starts its processes and sets their ranks in their own environment, not the pod's (torchrun,
    mpirun). Not an MPI job's launcher pod (:attr:`launcher_on_system_group`), nor the toolbox image's
    ``/app/launch.py`` (the component's ``launcher`` argument)."""
    job_object: ClassVar[JobObject] = BATCH_JOB
    """The Kubernetes object its component creates: its resource (``wait_for_jobs.py``'s ``RESOURCE/NAME``, the
    collector's, the wait Role's), its conditions, Kueue's integration that queues it."""
    needs_mpi_operator: ClassVar[bool] = False
    """The cluster needs the Kubeflow MPI Operator (:class:`~components.workloads.MpiOperator`) for it."""
    needs_mpi_prefix: ClassVar[bool] = False
    """Its image must say where its Open MPI is (``images.<name>.mpiPrefix`` or ``ENV OPAL_PREFIX``): the config rules
    check it (:func:`stacks.config.rules.kind_images.check_mpi_image`)."""
    image_package: ClassVar[str] = ""
    """The Python package its program imports, which its image must hold: inherited from a catalogued base or
    installed by the image's own files (:func:`stacks.config.rules.kind_images.check_image_package`); empty: none."""
    example_image: ClassVar[str] = ""
    """A shipped build folder whose image has :attr:`image_package` (the fix the check suggests)."""
    pod_keys: ClassVar[frozenset[str]] = frozenset(
        {"nodes", "nodeGroup", "stopGracePeriodSeconds", "readOnlyRootFilesystem", "tensorboard"}
    )
    """The job's keys outside its run (:func:`stacks.plan.run_recipe`) whose change replaces its object, so that its
    pods start again in the same run (:func:`stacks.plan.job_changes.run_changes`): for a batch/v1 Job, those its pod
    template, completions or parallelism read (pulumi-kubernetes replaces a Job for them); for an object replaced on
    any change of its spec (the MPIJob), those its spec reads."""
    run_in_pods: ClassVar[bool] = False
    """Its pods carry the job's run id (a label, the rendezvous id): a new id alone, such as an ``outputDir`` set to
    the folder the job runs in, replaces its object (:func:`stacks.plan.job_changes.run_changes`)."""
    noop: ClassVar[tuple[str, ...]] = ()
    """A command every image of this kind runs and exits 0 from at once (what its job contract requires of the
    image); empty: the image may be anything. :meth:`noop_command` reads it."""

    def node_stop(self, nodes: int) -> str:
        """What one of its ``nodes`` pods stopped by a drain (a node roll, a Spot interruption) does to its running job,
        beyond the stop itself: a clause of the upgrade summary (:mod:`stacks.plan.upgrade`); empty when nothing more
        happens."""
        return ""

    def roll_failures(self, nodes: int) -> int:
        """The failures a roll that stops each of a running job's ``nodes`` pods once charges to its retries: 0 where
        a stop never counts, or where its program decides."""
        return 0

    def failure_limit(self, max_restarts: int, nodes: int) -> int:
        """The failures a job of ``nodes`` pods with ``maxRestarts`` tolerates before it fails, counted as
        :meth:`roll_failures` counts them: ``maxRestarts`` itself here (an MPI job's new launchers)."""
        return max_restarts

    def restart_text(self) -> str:
        """How a change of one of its :attr:`pod_keys` starts its pods again (an upgrade summary clause)."""
        return (
            f"its {self.job_object.kind} is replaced, so its pods start again in the same run, finished or not, once "
            "Kueue admits it"
        )

    def skips_finished_runs(self, job: PlannedJob) -> bool:
        """Its pods end at once, doing nothing, when the run's output folder holds the launcher's ``DONE``."""
        return False

    def rerun_text(self) -> str:
        """What its program does when its pods start again in the run's folder (an upgrade summary clause)."""
        return "its command runs again from its start, resuming only from what it saved in its output folder"

    def noop_command(self, job: JobSettings) -> tuple[str, ...]:
        """What the job's image runs to be pulled onto its nodes ahead of the job (:mod:`stacks.plan.prepull`); empty:
        the image is pulled when the job's pods start."""
        return self.noop

    def pod_variables(self) -> frozenset[str]:
        """The variables the program sets in its pods, which a job's ``$(NAME)`` may name: every job's
        (:data:`~components.workloads.spec.JOB_VARIABLES`), ``JOB_INDEX`` in an Indexed Job's, and :attr:`variables`."""
        return JOB_VARIABLES | self.variables | ({INDEX_VARIABLE} if self.indexed_pods else set())

    # --- config ---------------------------------------------------------------------------------------------------
    def problems(self, job: JobSettings) -> list[tuple[str, str]]:
        """The job's problems of this kind beyond the shared ones (elastic size, fields of other kinds): by default,
        a command is required (a ``script`` given instead is reported once, as another kind's field)."""
        if job.command is None and job.script is None:
            return [("command", f"a {self.name} job needs a command ({self.program})")]
        return []

    # --- plan and composition -------------------------------------------------------------------------------------
    def image_scripts(self, toolbox: bool) -> Mapping[str, str]:
        """The project's scripts (paths in the image) the job's own image must hold, each with what runs it;
        ``toolbox``: the job runs the toolbox image (``training``)."""
        return {}

    def needs_etcd(self, job: JobSettings) -> bool:
        """The job's rendezvous is the stack's etcd (:class:`~components.workloads.EtcdRendezvous`)."""
        return False

    def processes_text(self, procs_per_node: int) -> str:
        """The processes a pod starts, as the reports show them."""
        if self.one_process_per_pod:
            return f"1 process (the command; PROCS_PER_NODE={procs_per_node} in its environment)"
        return f"{procs_per_node} process(es)"

    def program_text(self, job: JobSettings) -> str:
        """The job's program as the benchmark's summary shows it (its command)."""
        return " ".join(job.command or [])

    def build(self, ctx: BuildContext) -> JobComponent:
        """Register the job's component (:mod:`components.workloads`)."""
        raise NotImplementedError(f"{self.name}: build")

    # --- the local runner (stacks/local) --------------------------------------------------------------------------
    def check_local(self, machine: LocalMachine, job: PlannedJob) -> None:
        """Raise :meth:`LocalMachine.fail`'s error when this machine lacks what the job needs."""

    def local_nodes(self, job: PlannedJob, asked: Optional[int]) -> int:
        """How many processes stand for its pods when the runner is asked for ``asked`` nodes (``None``: the
        job's): an elastic kind stays within its range."""
        if asked is None:
            return job.nodes
        return max(job.min_nodes, min(asked, job.max_nodes)) if self.elastic else asked

    def local_pods_text(self, pods: int, nodes: int, procs_per_node: int) -> str:
        """How the local runner's start line counts the processes that stand for the job's pods."""
        return f"{pods} pod(s) as local processes"

    def local_processes(self, ctx: LocalContext) -> LocalProcesses:
        """The processes standing for the job's pods on this machine, from the functions its component uses."""
        raise NotImplementedError(f"{self.name}: local_processes")
