"""The rehearsal's pods, as the box's kwok Stages run them: how long each runs and how it exits (annotations on the
pod templates, ``stacks/box/stages.yaml``), and the pods held by an init container until what it waits for is there.

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from components.workloads.identity import WAIT_CONTAINER
from components.workloads.job_objects import BATCH_JOB, MPI_JOB
from components.workloads.mpi import WORKERS_WAIT_CONTAINER
from stacks.box.api import BoxError
from stacks.box.cluster import Box
from stacks.box.watch import Changes

HELD = "box.eks-training/held"
RUN_MS = "box.eks-training/run-ms"
START_MS = "box.eks-training/start-ms"
EXIT_CODE = "box.eks-training/exit-code"


def pod_templates(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] == BATCH_JOB.kind:
        return [doc["spec"]["template"]]
    if doc["kind"] == MPI_JOB.kind:
        return [r["template"] for r in doc["spec"]["mpiReplicaSpecs"].values()]
    return []


def _init_values(template: Mapping[str, Any], container: str, flag: str) -> list[str]:
    """The values after each ``flag`` in the command of the init container ``container`` of a pod template."""
    for c in template.get("spec", {}).get("initContainers") or []:
        if c["name"] == container:
            argv = [*(c.get("command") or []), *(c.get("args") or [])]
            return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]
    return []


def predecessors(template: Mapping[str, Any]) -> list[str]:
    """The jobs a pod's ``wait-for-jobs`` init container waits for (``kind/name`` after each ``--job``)."""
    return _init_values(template, WAIT_CONTAINER, "--job")


def peer_pods(template: Mapping[str, Any]) -> list[str]:
    """The worker pods an MPI launcher's ``wait-for-workers`` init container waits for (the first label of the host
    after each ``--host``: the pod's name)."""
    return [host.split(".")[0] for host in _init_values(template, WORKERS_WAIT_CONTAINER, "--host")]


@dataclass
class PodRuns:
    """How long each job's pods run and how they end: the annotations the Stages read, per job name."""

    run_ms: dict[str, int]
    exit_codes: dict[str, tuple[int, str]]
    default_run_ms: int = 1000
    #: How long an MPI job's workers take to start once scheduled (their image's pull, their code's download,
    #: sshd), which their launcher must wait out.
    worker_start_ms: int = 0

    def annotate(self, doc: dict[str, Any]) -> None:
        """Annotate ``doc``'s pod templates (a Job's, an MPIJob's) with their run, exit and holds."""
        name = doc["metadata"]["name"]
        for template in pod_templates(doc):
            ann = template.setdefault("metadata", {}).setdefault("annotations", {})
            ann[RUN_MS] = f"{self.run_ms.get(name, self.default_run_ms)}ms"  # kwok reads a Go duration
            if name in self.exit_codes:
                code, container = self.exit_codes[name]
                ann[EXIT_CODE] = str(code)
                ann["box.eks-training/container"] = container
            held = [*predecessors(template), *(f"pods/{pod}" for pod in peer_pods(template))]
            if held:
                ann[HELD] = ",".join(held)
        workers = doc["spec"]["mpiReplicaSpecs"].get("Worker") if doc["kind"] == MPI_JOB.kind else None
        if workers and self.worker_start_ms:
            workers["template"]["metadata"]["annotations"][START_MS] = f"{self.worker_start_ms}ms"


def released(box: Box, ref: str, namespace: str) -> bool:
    """Whether what a held pod waits for is there: a job completed (``wait-for-jobs``), a worker pod running and
    ready (``wait-for-workers``: on a cluster, its sshd accepts connections)."""
    kind, _, name = ref.partition("/")
    try:
        obj = box.get(kind, name, "-n", namespace)
    except BoxError:
        return False
    conds = (obj.get("status") or {}).get("conditions") or []
    if kind == "pods":
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
        return ready and (obj.get("status") or {}).get("phase") == "Running"
    return any(c["type"] in ("Complete", "Succeeded") and c["status"] == "True" for c in conds)


def release_held(box: Box, note: Callable[[str], None]) -> None:
    """Let every held pod start whose waits are over (its ``HELD`` annotation removed)."""
    for pod in box.get("pods", "-A")["items"]:
        held = (pod["metadata"].get("annotations") or {}).get(HELD) or ""
        if not held:
            continue
        ns = pod["metadata"]["namespace"]
        if all(released(box, ref, ns) for ref in held.split(",")):
            box.annotate("pod", pod["metadata"]["name"], ns, {HELD: None})
            note(f"pod {pod['metadata']['name']}: its wait ended ({held})")


def record_started(changes: Optional[Changes], pods: dict[str, dict[str, Any]]) -> None:
    """Add the pods started since the last pass to ``pods`` (uid -> the pod as last seen)."""
    for _at, _kind, pod in changes.read() if changes else ():
        if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("startTime"):
            pods[pod["metadata"]["uid"]] = pod
