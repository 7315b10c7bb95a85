"""The shared body of the jobs that run one program in every pod of an Indexed Job with a headless Service and no
operator (:class:`~components.workloads.command.CommandJob`, :class:`~components.workloads.tensorflow.TensorFlowJob`,
or a component of one's own): :func:`indexed_workers` given the pods' ``app.kubernetes.io/name``, the port the workers
talk on and their environment from the peers' stable hostnames."""

from typing import Any, Callable, Mapping, Optional, Sequence

import pulumi

from components.conventions import COMMON_LABELS
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.workloads.indexed_job import indexed_job
from components.workloads.job_objects import BATCH_JOB
from components.workloads.spec import DEFAULT_MAX_RESTARTS, JobSpec, WorkerPlacement, peer_hosts
from components.workloads.waits import finished

#: A job's pods' environment from the pods' stable hostnames (in index order).
Environment = Callable[[pulumi.Output[list[str]]], Mapping[str, pulumi.Input[str]]]


def indexed_backoff_limit(max_retries: int, nodes: int) -> int:
    """The pod failures an Indexed Job of ``nodes`` pods tolerates: ``max_retries`` per pod."""
    return max_retries * nodes


def indexed_workers(
    parent: pulumi.ComponentResource,
    name: str,
    spec: JobSpec,
    placement: WorkerPlacement,
    *,
    command: Sequence[str],
    nodes: int,
    max_retries: int,
    app_name: str,
    port: tuple[str, int],
    environment: Environment,
) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
    """The children of a job whose ``nodes`` pods all run ``command`` (then the job's ``args``; ``max_retries`` pod
    failures tolerated per pod): an Indexed Job and its
    headless Service (:func:`~components.workloads.indexed_job.indexed_job`) under ``parent``, the pods labelled
    ``app.kubernetes.io/name: <app_name>``, the Service on ``port`` (name, number), every pod's environment
    ``environment(hosts)`` (before Kubernetes expands ``$(JOB_INDEX)``). Returns the Job's name and the job's output
    folder (resolving once the Job is created): the component's ``job_name`` and ``output_dir``."""
    hosts = pulumi.Output.from_input(spec["namespace"]).apply(lambda ns: peer_hosts(spec["job_name"], ns, nodes))
    _, job = indexed_job(
        name,
        parent,
        spec,
        labels={**COMMON_LABELS, "app.kubernetes.io/name": app_name},
        placement=placement,
        nodes=nodes,
        command=[*command, *(spec.get("args") or [])],
        env=environment(hosts),
        backoff_limit=indexed_backoff_limit(max_retries, nodes),
        ports=(port,),
    )
    done = finished(BATCH_JOB, spec["job_name"], job, awaited=bool(spec.get("wait_for_completion")))
    return done, done.apply(lambda _: spec["output_dir"])


class IndexedWorkersJob(pulumi.ComponentResource):
    """A component that is one :func:`indexed_workers` call: a subclass sets the pods' app name, the port and
    the environment; its ``__init__`` names its type token and Args, then registers :meth:`_outputs`."""

    _app_name: str
    _port: tuple[str, int]

    def __init__(
        self, type_name: str, name: str, args: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions]
    ) -> None:
        super().__init__(type_name, name, None, opts)
        warn_without_kubernetes_provider(self, name)
        spec, placement, nodes = args["job"], args["placement"], int(args["nodes"])
        self.job_name, self.output_dir = indexed_workers(
            self,
            name,
            spec,
            placement,
            command=args["command"],
            nodes=nodes,
            max_retries=int(args.get("max_retries", DEFAULT_MAX_RESTARTS)),
            app_name=self._app_name,
            port=self._port,
            environment=lambda hosts: self._environment(spec, placement, nodes, hosts),
        )

    def _outputs(self) -> dict[str, pulumi.Output[str]]:
        """What the subclass registers as its outputs, last in its ``__init__``."""
        return {"job_name": self.job_name, "output_dir": self.output_dir}

    def _environment(
        self, spec: JobSpec, placement: WorkerPlacement, nodes: int, hosts: pulumi.Output[list[str]]
    ) -> Mapping[str, pulumi.Input[str]]:
        """Every pod's environment from the pods' stable hostnames (in index order)."""
        raise NotImplementedError
