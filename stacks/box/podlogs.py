"""Container logs on the box: what each simulated container did, served by kwok as the container's log.

kwok's pods run no process. kwok serves a container's log from a file named by a ``Logs`` object, in the CRI logging
format (:func:`cri_line`), so ``kubectl logs`` works as on a cluster. :class:`PodLogs` writes those files while a
rehearsal runs: per container, which job's pod it is, where it runs, how long the Stage runs it and its exit code,
then its real outcome. Every line starts with :data:`PREFIX`: nothing in the box ran the image. ``kubectl logs -f``
keeps following after the container ended.

Why, with kwok's sources: docs/explanation/box.md, "Container logs"."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any, Mapping, Optional

from components.workloads.job_objects import BATCH_JOB, MPI_JOB
from stacks.box.cluster import Box
from stacks.box.poller import Poller

#: kwok's kind that serves a pod's container logs from files (enabled by ``kwokctl create cluster --enable-crds``).
LOGS_KIND = "Logs"
#: Every line the box writes starts with this (the container did not run: the box says what the simulation did).
PREFIX = "[box]"

_RUN_MS = "box.eks-training/run-ms"
_EXIT_CODE = "box.eks-training/exit-code"
_CONTAINER = "box.eks-training/container"


def cri_line(text: str, when: Optional[datetime.datetime] = None, stream: str = "stdout") -> str:
    """One full line of a container log in the CRI logging format."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return f"{when.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {stream} F {PREFIX} {text}\n"


#: The label the MPI Operator gives an MPIJob's pods: ``launcher`` or ``worker``.
MPI_ROLE_LABEL = "training.kubeflow.org/job-role"


def pod_owner(pod: Mapping[str, Any]) -> tuple[str, Optional[str]]:
    """What the box's reports call the object a pod belongs to (``MPIJob train (worker)``, ``Job stage``,
    ``Deployment etcd``), and the job's name when it is a job object's. An MPI launcher's pod is its MPIJob's (its
    batch Job carries both labels)."""
    labels = pod["metadata"].get("labels") or {}
    if job := labels.get(MPI_JOB.pod_label):
        return f"{MPI_JOB.kind} {job} ({labels.get(MPI_ROLE_LABEL, 'worker')})", job
    if job := labels.get(BATCH_JOB.pod_label):
        return f"{BATCH_JOB.kind} {job}", job
    ref = next(iter(pod["metadata"].get("ownerReferences") or []), None)
    if not ref:
        return "no owner", None
    if ref["kind"] == "ReplicaSet" and labels.get("pod-template-hash"):
        return f"Deployment {ref['name'][: -len(labels['pod-template-hash']) - 1]}", None
    return f"{ref['kind']} {ref['name']}", None


def _job_owned(pod: Mapping[str, Any]) -> bool:
    return any(r.get("kind") == "Job" for r in pod["metadata"].get("ownerReferences") or [])


def start_lines(pod: Mapping[str, Any], container: Mapping[str, Any], init: bool) -> list[str]:
    """What a container's log says when its pod starts: the pod, its owner, its node, and what the box's Stage does
    with it (how long it runs, the exit code it is to end with)."""
    meta, spec = pod["metadata"], pod["spec"]
    ann = meta.get("annotations") or {}
    name = container["name"]
    lines = [
        f"pod {meta['namespace']}/{meta['name']} ({pod_owner(pod)[0]}) started on node {spec.get('nodeName')}; "
        f"{'init ' if init else ''}container {name}, image {container.get('image', '?')}: simulated by kwok, "
        f"nothing ran"
    ]
    if init:
        lines.append(f"init container {name}: completed at once (exit code 0)")
    elif _job_owned(pod):
        target = ann.get(_CONTAINER)
        code = ann.get(_EXIT_CODE, "0") if not target or target == name else "0"
        lines.append(
            f"container {name}: runs {ann.get(_RUN_MS, '1000ms')} ({_RUN_MS}), then exits {code}"
            + (f" ({_EXIT_CODE})" if code != "0" else "")
        )
    else:
        lines.append(f"container {name}: runs until its pod is deleted (not a Job's pod)")
    return lines


def end_lines(pod: Mapping[str, Any], name: str) -> list[str]:
    """What a container's log says once its pod ended: the container's exit code and reason, the pod's phase, and the
    disruption that ended it, if any (the pod GC of a lost node, a preemption)."""
    status = pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    term = next(((s.get("state") or {}).get("terminated") or {} for s in statuses if s["name"] == name), {})
    lines = []
    if term:
        lines.append(f"container {name}: exited {term.get('exitCode')} ({term.get('reason', 'unknown reason')})")
    else:
        lines.append(f"container {name}: no exit recorded")
    why = next(
        (
            f"{c.get('reason')}: {c.get('message', '')}"
            for c in status.get("conditions") or []
            if c["type"] == "DisruptionTarget" and c["status"] == "True"
        ),
        None,
    )
    lines.append(
        f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: {status.get('phase')}"
        + (f" (DisruptionTarget {why})" if why else "")
    )
    return lines


class PodLogs(Poller):
    """Writes each started pod's container logs under ``<box>/pod-logs`` and a ``Logs`` object naming them
    (``with PodLogs(box): ...``); appends each container's outcome once its pod ended."""

    last_look = True

    def __init__(self, box: Box, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.box = box
        self.folder = box.home / "pod-logs"
        #: uid -> the files of the pod's containers (name -> path).
        self.files: dict[str, dict[str, Path]] = {}
        self._ended: set[str] = set()

    def poll(self) -> None:
        for pod in self.box.get("pods", "-A")["items"]:
            uid, status = pod["metadata"]["uid"], pod.get("status") or {}
            if not pod["spec"].get("nodeName") or not status.get("startTime"):
                continue
            if uid not in self.files:
                self._start(pod)
            if status.get("phase") in ("Succeeded", "Failed") and uid not in self._ended:
                for name, path in self.files[uid].items():
                    with path.open("a") as f:
                        f.writelines(cri_line(line) for line in end_lines(pod, name))
                self._ended.add(uid)

    def _start(self, pod: Mapping[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        folder = self.folder / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"
        folder.mkdir(parents=True, exist_ok=True)
        files: dict[str, Path] = {}
        for init, containers in ((True, spec.get("initContainers") or []), (False, spec.get("containers") or [])):
            for c in containers:
                path = folder / f"{c['name']}.log"
                path.write_text("".join(cri_line(line) for line in start_lines(pod, c, init)))
                files[c["name"]] = path
        logs = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": LOGS_KIND,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": {"logs": [{"containers": [name], "logsFile": str(path)} for name, path in files.items()]},
        }
        # a pod of the same name earlier (a StatefulSet's, recreated): its Logs object is replaced
        self.box.server_side_apply([logs], "eks-training-box-logs", force=True)
        self.files[meta["uid"]] = files


def last_lines(
    box: Box, namespace: str, pod: str, container: Optional[str] = None, lines: int = 10, timeout_s: float = 20.0
) -> str:
    """The last ``lines`` of a container's log as ``kubectl logs --tail`` prints them (kwok serves them a moment after
    the ``Logs`` object is created: retried until ``timeout_s``); the error kubectl printed when there is none."""
    argv = ["logs", "-n", namespace, pod, f"--tail={lines}"] + (["-c", container] if container else [])
    deadline = time.monotonic() + timeout_s
    while True:
        proc = box.kubectl(*argv, check=False)
        if proc.returncode == 0 or time.monotonic() > deadline:
            return proc.stdout if proc.returncode == 0 else proc.stderr.strip()
        time.sleep(0.5)
