"""The ``jobs`` section: a map of jobs of any kind, with their health checks (images: :mod:`stacks.config.images`;
datasets: :mod:`stacks.config.datasets`).

A job says what to run (kind, image, script or command, arguments, environment, code, dataset, order);
where it runs and what each pod requests (GPUs, EFA, huge pages, ``/dev/shm``, tolerations, zone,
NCCL/libfabric environment) comes from the plan of its node group, never from the job.
"""

import json
import re
from typing import Annotated, Any, Literal, Mapping, Optional, Sequence, Union

from pydantic import Field, field_validator, model_validator

from components.workloads.health_check import DEFAULT_CHECK_TIMEOUT_MINUTES
from components.workloads.pytorch import RESILIENCE_VARIABLES
from components.workloads.spec import (
    DEFAULT_MAX_RESTARTS,
    DEFAULT_STOP_GRACE_S,
    DEFAULT_TIMEOUT_HOURS,
    JOB_VARIABLES,
    RendezvousBackend,
)
from components.workloads.waits import DEFAULT_QUEUE_TIMEOUT_HOURS
from stacks.bundle import TOOLBOX_IMAGE as TOOLBOX_IMAGE  # the name config readers import from here
from stacks.config.base import (
    ENTRY_NAME_MAX,
    OBJECT_NOT_NULL,
    S3_FOLDER_URI_RE,
    Model,
    Number,
    reference,
    relative_path_problem,
    volume_path_problem,
)
from stacks.config.errors import check
from stacks.kinds import KINDS, kind_names
from stacks.yaml_text import quoted_list, shell_words

#: Job names become Kubernetes names: the Job, its pods ``<job>-<index>`` and Services ``<job>-workers``,
#: ``<job>-allreduce``; 40 characters leave room for those suffixes within the 63 of a DNS label.
JOB_NAME_MAX = ENTRY_NAME_MAX["jobs"]
#: Environment names the program sets itself (a job's ``env`` may not override them).
RESERVED_ENV = JOB_VARIABLES | RESILIENCE_VARIABLES | {"JOB_PEERS", "TF_CONFIG"}
#: The job's setting the program derives each reserved variable from, where a user sets one (the rules name it).
RESERVED_FROM = {
    "OUTPUT_DIR": "outputDir",
    "DATA_DIR": "dataset",
    "TENSORBOARD_DIR": "tensorboard",
    "JOB_SIZE": "nodes",
    "PROCS_PER_NODE": "processesPerNode",
    "MAX_FAILED_ATTEMPTS": "maxRestarts",
    "CHECKPOINT_EVERY_SECONDS": "checkpointEverySeconds",
    "PG_TIMEOUT_SECONDS": "collectiveTimeoutSeconds",
    "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "stopGracePeriodSeconds",
}
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_name_fix(name: str) -> str:
    """How to write ``name`` as an environment variable name a shell and every program can read."""
    fix = "use letters, digits and '_', not starting with a digit"
    meant = re.sub(r"[^A-Za-z0-9_]+", "_", name.strip()).strip("_").upper()
    if meant and meant[0].isdigit():
        meant = "_" + meant
    return f"{fix}, e.g. {meant}" if meant else fix


def _set_instead(name: str) -> str:
    """The setting to change instead of a reserved variable, as the end of a message."""
    setting = RESERVED_FROM.get(name)
    return f", and set the job's {setting} instead" if setting else ""


#: Bounds of the health check's largest message (bytes).
MIN_CHECK_BYTES = 1 << 20
MAX_CHECK_BYTES = 1 << 34


class HealthCheckConfig(Model):
    """The all-reduce bandwidth check run on a job's nodes before the job (key ``jobs.<name>.healthCheck``)."""

    enabled: bool = True
    """Run the check once, when the job is first created."""
    enforce: bool = False
    """false: report only; true: the job is not created below minBusBandwidthGBps."""
    min_bus_bandwidth_gbytes_per_s: Optional[Number] = Field(default=None, gt=0, alias="minBusBandwidthGBps")
    """The threshold in GB/s (1e9 bytes/s, nccl-tests' busbw); default when enforced, 80% of the published two-node
    figure for the instance type at its message size (components/catalog/); above what the nodes can reach, an
    error naming the unit."""
    max_bytes: Optional[int] = None
    """The largest message in bytes, a power of two from 1 MiB to 16 GiB below one GPU's memory (on CPU, a process's
    share of the pod's); default the reference's size, else 1 GiB on GPU and 64 MiB on CPU."""
    timeout_minutes: int = Field(default=DEFAULT_CHECK_TIMEOUT_MINUTES, ge=5, le=1440)
    """How long the check may take."""

    @model_validator(mode="after")
    def _read_only_when_enabled(self) -> "HealthCheckConfig":
        if not self.enabled:
            check(
                [
                    (alias, "tunes the health check, which enabled: false turns off; remove it, or set enabled: true")
                    for field, alias in _CHECK_SETTINGS.items()
                    if field in self.model_fields_set
                ]
            )
        return self

    @field_validator("max_bytes")
    @classmethod
    def _message_size(cls, v: Optional[int]) -> Optional[int]:
        if v is None:
            return v
        if v < MIN_CHECK_BYTES:
            hint = f"; did you write MiB? {v} MiB is {v << 20}" if (v << 20) <= MAX_CHECK_BYTES else ""
            raise ValueError(f"{v} bytes is below 1 MiB (1048576), the smallest maxBytes; the value is in bytes{hint}")
        if v > MAX_CHECK_BYTES:
            raise ValueError(
                f"{v} bytes is above 16 GiB (17179869184), the largest message checked; the value is in bytes "
                "(1 GiB is 1073741824)"
            )
        if v & (v - 1):
            raise ValueError(f"{v} is not a power of two (e.g. 1073741824)")
        return v


#: The health check's settings besides ``enabled``, by field, with their keys.
_CHECK_SETTINGS = {
    "enforce": "enforce",
    "min_bus_bandwidth_gbytes_per_s": "minBusBandwidthGBps",
    "max_bytes": "maxBytes",
    "timeout_minutes": "timeoutMinutes",
}


#: Words YAML 1.1 read as booleans (https://yaml.org/type/bool.html) that a YAML 1.2 reader, or quotes, keep as text.
_BOOLEAN_WORDS = frozenset({"y", "yes", "n", "no", "on", "off", "true", "false"})


#: What a job is for (its Kueue priority's kind, :mod:`stacks.plan.admission`); benchmark experiments are
#: ``experiment``.
JobPurpose = Literal["training", "evaluation"]


class JobConfig(Model):
    """One job (key ``jobs.<name>``)."""

    kind: str = Field(
        description="; ".join(f"{k.name}: {k.summary}" for k in KINDS.values()) + ".",
        json_schema_extra=reference(allowed=KINDS),
    )
    """A registered job kind (:data:`stacks.kinds.KINDS`; its description lists them)."""
    purpose: JobPurpose = "training"
    """training or evaluation: the job's WorkloadPriorityClass kind within its stage (an evaluation outranks a training
    job of the same stage); not for benchmark experiments, which are always experiments."""
    image: str = TOOLBOX_IMAGE
    """The key of images the pods run. A pytorch job's image holds /app/run_script.py: training, or one built from a
    copy of training/; a tensorflow job's holds TensorFlow, which training lacks."""
    node_group: Optional[str] = None
    """The worker group the pods run on; default the only one; "system" for light command jobs."""
    nodes: int = Field(default=1, ge=1)
    """Pods, one per node, at most the group's maxSize."""
    min_nodes: Optional[int] = Field(default=None, ge=1)
    """pytorch: the fewest nodes torchrun runs with (--nnodes=MIN:MAX); default 1."""
    max_nodes: Optional[int] = Field(default=None, ge=1)
    """pytorch: the most nodes torchrun grows to; default the group's maxSize."""
    processes_per_node: Optional[int] = Field(default=None, ge=1)
    """Processes per pod (MPI slots per worker); default the node type's GPUs, or 1 on CPU; a command job runs one
    process per pod."""
    script: Optional[str] = None
    """pytorch: the script torchrun runs, a path in the image or relative to the job's code."""
    command: Optional[list[str]] = Field(default=None, min_length=1)
    """mpi, tensorflow, command: the program and its arguments."""
    args: list[str] = Field(default_factory=list)
    """Arguments appended to script or command; $(VAR) references to the environment are expanded by Kubernetes."""
    launcher_command: Optional[list[str]] = Field(default=None, min_length=1)
    """mpi: a command the launcher runs with mpirun ... appended (e.g. a parser of the output)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the pods, plain text in their spec (no tokens or passwords); the program's own
    (OUTPUT_DIR, DATA_DIR, JOB_NAME...) are reserved."""
    code: Optional[str] = None
    """The job's program, downloaded into /workspace (its working folder) before it starts: a folder of the project
    relative to the folder of Pulumi.yaml and the stack file (./src), zipped and uploaded content-addressed to a
    private bucket of the stack, or an s3://bucket/prefix/ you uploaded; read through the job's own Pod Identity
    role."""
    dataset: Optional[str] = None
    """A key of datasets, staged before the job starts: the job's DATA_DIR."""
    after: list[str] = Field(default_factory=list)
    """Jobs that must complete first (the pods wait in the cluster); each one's output folder is <JOB>_OUTPUT_DIR."""
    output_dir: Optional[str] = None
    """The job's folder on the shared volume, OUTPUT_DIR; default runs/<job>-<hash of the job's definition>, so the
    same definition resumes the same run. No two pytorch jobs share one (the second would find DONE and run
    nothing)."""
    tensorboard: Union[bool, str] = False
    """true: serve <outputDir>/tensorboard with TensorBoard (TENSORBOARD_DIR), or a folder under outputDir."""
    rendezvous_backend: RendezvousBackend = "etcd-v2"
    """pytorch: torchrun's rendezvous, an etcd 3.5 Service or c10d hosted by pod 0."""
    max_restarts: int = Field(default=DEFAULT_MAX_RESTARTS, ge=0, le=100)
    """The failures the job survives. command, tensorflow: pod failures its Job's backoff allows per node. mpi: new
    launchers after mpirun fails (the MPIJob's backoffLimit). pytorch: pod failures per node, and the run's budget:
    the restarts of your script after attempts in a row that each failed within 5 minutes of starting, or of the
    bundled trainer without a new checkpoint (MAX_FAILED_ATTEMPTS, the attempts, is one more); 0 gives up at the
    first. A pod's own stop (a drain, a spot interruption, a scale-up; a script's exit 75 or 143 after it) never
    counts, nor a rank's failure because another rank went away."""
    checkpoint_every_seconds: Optional[Number] = Field(default=None, ge=0, le=86400)
    """pytorch: checkpoint cadence in seconds of training (CHECKPOINT_EVERY_SECONDS), 0 = only at epoch ends and on
    stop; default the program's own (the bundled trainer's, components/workloads/pytorch.py)."""
    collective_timeout_seconds: Optional[Number] = Field(default=None, ge=10, le=600)
    """pytorch: how long a hung peer stalls a collective before the workers fail and re-rendezvous
    (PG_TIMEOUT_SECONDS); default the program's own (the bundled trainer's, components/workloads/pytorch.py)."""
    stop_grace_period_seconds: int = Field(default=DEFAULT_STOP_GRACE_S, ge=20, le=3600)
    """The time a stopped pod gets to checkpoint and exit (terminationGracePeriodSeconds); torchrun waits that minus
    15 s for its workers (TORCH_ELASTIC_SHUTDOWN_TIMEOUT). Over 900, a rolling node update may fail while a pod still
    stops (EKS gives a node's pods 15 minutes to leave it)."""
    timeout_hours: Number = Field(default=DEFAULT_TIMEOUT_HOURS, gt=0, le=720)
    """Hours the job may run from its start (a queued job's: once admitted) before Kubernetes stops it and its pods
    (the Job's activeDeadlineSeconds): the cap on what a runaway job costs. A job with `after` may be admitted while
    the jobs before it run: its pods wait for them within this time, until Kueue requeues a job whose pods are not
    ready (waitForPodsReady)."""
    wait_for_completion: bool = False
    """`pulumi up` waits for the job to complete (a failure stops it with the job's reason); false returns once it is
    created."""
    queue_timeout_hours: Number = Field(default=DEFAULT_QUEUE_TIMEOUT_HOURS, ge=0, le=720)
    """When `pulumi up` waits for the job (waitForCompletion) or its health check: how long each may wait in the queue
    and for nodes, on top of its deadline (a queued job's deadline runs only once admitted); past it `pulumi up` stops
    with a timeout and the job stays queued."""
    read_only_root_filesystem: Optional[bool] = None
    """The containers' root file system is read-only (/tmp, also HOME, is a writable emptyDir and outputs go to the
    shared volume); unset, true except for mpi, whose workers' sshd writes to the image."""
    health_check: Annotated[Optional[HealthCheckConfig], OBJECT_NOT_NULL] = None
    """An all-reduce bandwidth check (nccl-tests) on the job's nodes before the job."""

    @field_validator("kind")
    @classmethod
    def _registered(cls, v: str) -> str:
        if v not in KINDS:
            raise ValueError(f"{v!r} is not a kind of job; use one of {kind_names()}")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        problems = [
            (k, f"{k!r} is not an environment variable name; {_env_name_fix(k)}")
            for k in v
            if not _ENV_NAME_RE.match(k)
        ]
        problems += [
            (k, f"{k} is set in the job's pods by this project; remove it" + _set_instead(k))
            for k in v
            if k in RESERVED_ENV
        ]
        check(problems)
        return v

    @field_validator("code")
    @classmethod
    def _code(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        if v.startswith("s3://"):
            if not S3_FOLDER_URI_RE.match(v):
                raise ValueError(
                    f"{v!r} is not an s3://bucket/prefix/ URI (a prefix ending in '/'); or give a folder of "
                    "your project (./src), which the program uploads"
                )
            return v
        if "://" in v or relative_path_problem(v):
            raise ValueError(
                f"{v!r} is neither a folder of your project (relative to the folder of Pulumi.yaml, such as "
                "./src; the program uploads it) nor an s3://bucket/prefix/ URI"
            )
        return v

    @property
    def code_folder(self) -> Optional[str]:
        """``code`` when it names a folder of the project (uploaded by the program), else ``None`` (none, or
        ``s3://``)."""
        return self.code if self.code is not None and not self.code.startswith("s3://") else None

    @field_validator("output_dir")
    @classmethod
    def _output_dir(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (why := volume_path_problem(v)):
            raise ValueError(why)
        return v

    @field_validator("command", "launcher_command")
    @classmethod
    def _program(cls, v: Optional[list[str]]) -> Optional[list[str]]:
        if v is not None and not v[0].strip():
            raise ValueError("its first item is the program to run, and it is empty; name the program (e.g. python)")
        if v is not None and len(words := shell_words(v[0])) > 1:
            # no shell splits the command: the container runtime would look for a program named the whole item
            raise ValueError(
                f"its first item {v[0]!r} is the program to run, and no shell splits it into words (the container "
                f"would look for a program of that name); write each word as an item: {quoted_list([*words, *v[1:]])}"
            )
        return v

    @field_validator("script")
    @classmethod
    def _script(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not v.strip():
            raise ValueError("empty; name the script torchrun runs (e.g. train.py)")
        if v is not None and len(words := shell_words(v)) > 1:
            # torchrun runs the script by its path: the words after it would be part of the file's name
            raise ValueError(
                f"{v!r} is the script's path, and torchrun does not split it into words; write script: {words[0]} and "
                f"put the rest in args: {quoted_list(words[1:])}"
            )
        return v

    @field_validator("tensorboard", mode="before")
    @classmethod
    def _tensorboard_type(cls, v: Any) -> Any:
        if not isinstance(v, (bool, str)):
            raise ValueError(
                f"{json.dumps(v)} is neither true, false nor a folder; write true (event files in "
                "<output>/tensorboard), false, or a folder relative to the job's output folder"
            )
        return v

    @field_validator("tensorboard")
    @classmethod
    def _tensorboard(cls, v: Union[bool, str]) -> Union[bool, str]:
        if isinstance(v, str) and v.strip().lower() in _BOOLEAN_WORDS:
            raise ValueError(
                f"{v!r} would be a folder named {v}; write true (event files in <output>/tensorboard, served by "
                "TensorBoard), false, or a folder relative to the job's output folder"
            )
        if isinstance(v, str) and (why := relative_path_problem(v)):
            raise ValueError(why.replace("the shared volume", "the job's output folder"))
        return v

    @property
    def sets_node_range(self) -> bool:
        """The job gives its node count as a range (minNodes or maxNodes), which only an elastic kind reads."""
        return self.min_nodes is not None or self.max_nodes is not None

    @property
    def node_range(self) -> tuple[int, int]:
        """The fewest and the most nodes the job runs on: minNodes (default 1 for an elastic kind, else nodes) and
        maxNodes (default nodes; an elastic kind's comes from its group, :func:`with_group_defaults`)."""
        fewest = self.min_nodes or (1 if KINDS[self.kind].elastic else self.nodes)
        return fewest, self.max_nodes or self.nodes

    @property
    def read_only_root(self) -> bool:
        """The containers' root file system is read-only (``readOnlyRootFilesystem``; default true, false for mpi)."""
        if self.read_only_root_filesystem is not None:
            return self.read_only_root_filesystem
        return not KINDS[self.kind].writable_root

    @property
    def tensorboard_dir(self) -> Optional[str]:
        """The log directory TensorBoard serves, relative to the output folder (``None``: not served)."""
        if self.tensorboard is True:
            return "tensorboard"
        return self.tensorboard or None

    @model_validator(mode="after")
    def _kind(self) -> "JobConfig":
        """The job against its kind (:mod:`stacks.kinds`): its size, its kind's own checks, and no field only another
        kind takes."""
        problems: list[tuple[str, str]] = []
        kind = KINDS[self.kind]
        if self.sets_node_range and not kind.elastic:
            problems.append(
                (
                    "minNodes" if self.min_nodes is not None else "maxNodes",
                    f"{kind.name} jobs cannot change size while running ({kind.fixed_size}); set only nodes",
                )
            )
        if kind.elastic and self.min_nodes is not None and self.min_nodes > self.nodes:
            problems.append(("minNodes", f"{self.min_nodes} > @{{nodes}} ({self.nodes}); set minNodes <= nodes"))
        if kind.elastic and self.max_nodes is not None and self.nodes > self.max_nodes:
            problems.append(
                ("nodes", f"{self.nodes} > @{{maxNodes}} ({self.max_nodes}); raise maxNodes or lower nodes")
            )
        problems += kind.problems(self)
        awaited = self.wait_for_completion or (self.health_check is not None and self.health_check.enabled)
        if "queue_timeout_hours" in self.model_fields_set and not awaited:
            problems.append(
                (
                    "queueTimeoutHours",
                    "read only when `pulumi up` waits for the job or its health check; set waitForCompletion: true, "
                    "or remove it",
                )
            )
        own = {f.field for f in kind.owned_fields}
        for other in KINDS.values():
            for f in other.owned_fields:
                if f.field not in own and f.field in self.model_fields_set and getattr(self, f.field) is not None:
                    problems.append((f.key, f.why.format(kind=kind.name)))
        check(problems)
        return self


def default_max_nodes(max_size: int, nodes: int) -> int:
    """An elastic job's ``maxNodes`` where it sets none: its group's ``maxSize``, at least its ``nodes``."""
    return max(max_size, nodes)


def with_group_defaults(job: JobConfig, group_names: Sequence[str], groups: Mapping[str, Any]) -> JobConfig:
    """The job with the defaults that depend on the stack's worker groups, derived here and nowhere else: nodeGroup,
    when the job names none and the stack has exactly one worker group (``group_names``), is that group; an elastic
    kind's maxNodes, when not given, is its group's maxSize (at least nodes). ``groups``: the worker groups that
    parsed (:class:`~stacks.config.nodegroups.NodeGroupConfig`, by name). The loader applies it to every job before
    the rules run (:attr:`stacks.config.rules.Sections.jobs`, ``StackConfig.jobs``); the rules check, and the plan
    reads, the jobs it returns."""
    update: dict[str, Any] = {}
    group_name = job.node_group
    if group_name is None and len(group_names) == 1:
        group_name = update["node_group"] = group_names[0]
    group = groups.get(group_name) if group_name is not None else None
    if group is not None and KINDS[job.kind].elastic and job.max_nodes is None:
        update["max_nodes"] = default_max_nodes(group.max_size, job.nodes)
    return job.model_copy(update=update) if update else job
