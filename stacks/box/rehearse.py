"""Rehearse a stack on a box: its objects applied as ``pulumi up`` would, its jobs scheduled, run and completed.

:class:`Rehearsal` plays the parts of a real deployment the box does not run itself: ``pulumi up``'s order and waits
(:func:`steps_of`, :mod:`stacks.box.awaits`), the device plugins' charts (:mod:`stacks.box.devices`), the EFS CSI
provisioner (:data:`EFS_PROVISIONER`), the ``wait-for-jobs`` and ``wait-for-workers`` init containers (:data:`HELD`),
the MPI Operator out of cluster, and the autoscaler's answer to ProvisioningRequests (:mod:`stacks.box.provisioner`).
Pods run for :data:`RUN_MS` and exit with :data:`EXIT_CODE`, the box's Stages; the driver annotates the pod templates
it applies.

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

import copy
import datetime
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from components.admission import PROVISIONING_CONTROLLER
from components.workloads.identity import WAIT_CONTAINER
from components.workloads.job_objects import BATCH_JOB, JOB_OBJECTS, MPI_JOB, MPIJOB_CRD
from components.workloads.mpi import WORKERS_WAIT_CONTAINER
from stacks.box.apply import Refusal, _refusals, applies
from stacks.box.awaits import SKIP_AWAIT, Awaiter, asks_provider, await_timeout_s, failure_of
from stacks.box.build import SUFFIXES
from stacks.box.cluster import Box, BoxError, crd_established, hold_for_child
from stacks.box.devices import stand_ins
from stacks.box.kueue import (
    Kueue,
    is_kueue_chart,
    kueue_release_configuration,
    kueue_release_feature_gates,
    workload_conditions,
)
from stacks.box.kueue import crds as kueue_crds
from stacks.box.manifests import registered_object, release_manifest
from stacks.box.provisioner import Provisioner
from stacks.box.watch import Changes
from stacks.yaml_text import dump_yaml_documents

HELD = "box.eks-training/held"
RUN_MS = "box.eks-training/run-ms"
START_MS = "box.eks-training/start-ms"
EXIT_CODE = "box.eks-training/exit-code"
EFS_PROVISIONER = "efs.csi.aws.com"
#: How long a box waits for another box's MPI Operator to end (one runs on a machine at a time: ``_start_operator``).
OPERATOR_PORT_WAIT_S = 900.0


@dataclass
class Step:
    """One registration: its objects, the steps it waits for, and whether ``pulumi up`` awaits it."""

    urn: str
    name: str
    docs: list[dict[str, Any]]
    deps: set[str] = field(default_factory=set)
    kueue: Optional[dict[str, Any]] = None
    """The Kueue release's Configuration (its step's docs are Kueue's CRDs; the box starts Kueue once they exist)."""
    kueue_gates: dict[str, bool] = field(default_factory=dict)
    """The Kueue release's feature gates (its chart values' ``controllerManager.featureGates``)."""
    kueue_module: str = "kueue"
    """The box module of the Kueue release whose CRDs the docs are and whose manager starts (``kueue-previous``: the
    release pinned before the stacks' own, :func:`steps_of`)."""
    timeout_s: float = 600.0
    """How long ``pulumi up`` waits for the registration to be ready (:func:`stacks.box.awaits.await_timeout_s`)."""
    gate: Optional[Callable[[Box], bool]] = None
    """A condition on the box the step also waits for before it is applied (a test's order; ``None``: none)."""


@dataclass
class Event:
    t: float
    text: str


class RehearsalError(Exception):
    """The stack did not run through: the message names what waited and why."""


def steps_of(registrations: Sequence[Any], kueue_module: str = "kueue") -> list[Step]:
    """The Kubernetes steps of a program's registrations (``type``, ``name``, ``urn``, ``parent``, ``custom``,
    ``dependencies``, ``inputs``), dependencies on components expanded to the steps under them; the Kueue release as
    the box module ``kueue_module`` pins it."""
    children: dict[str, list[str]] = {}
    for r in registrations:
        children.setdefault(r.parent, []).append(r.urn)

    def under(urn: str) -> set[str]:
        out = {urn}
        for c in children.get(urn, []):
            out |= under(c)
        return out

    steps: list[Step] = []
    k8s = set()
    for r in registrations:
        if not r.type.startswith("kubernetes:"):
            continue
        kueue, gates = None, {}
        if r.type.startswith("kubernetes:helm.sh/") and is_kueue_chart(r.inputs.get("chart", "")):
            docs, kueue = kueue_crds(kueue_module), kueue_release_configuration(r.inputs.get("values") or {})
            gates = kueue_release_feature_gates(r.inputs.get("values") or {})
        elif r.type.startswith("kubernetes:helm.sh/"):
            docs = stand_ins([copy.deepcopy(r.inputs)])
        elif r.type.startswith("kubernetes:yaml"):
            docs = release_manifest(r.inputs["file"])
        else:
            docs = [registered_object(r)]
        timeout_s = await_timeout_s(getattr(r, "custom_timeouts", None) or {}, r.inputs)
        if r.type.startswith("kubernetes:helm.sh/") and r.inputs.get("timeout"):
            timeout_s = float(r.inputs["timeout"])  # a Release's own wait, in seconds
        deps = {u for d in r.dependencies for u in under(d)}
        steps.append(Step(r.urn, r.name, docs, deps, kueue, gates, kueue_module, timeout_s))
        k8s.add(r.urn)
    for s in steps:
        s.deps &= k8s
        s.deps.discard(s.urn)
    return steps


def rolled_out(deployment: Mapping[str, Any]) -> bool:
    """Whether the provider's wait for a Deployment (its creation, or a change such as a patch's) is over: the
    controller saw this generation, the Deployment is Available and, past its first generation, its new ReplicaSet
    is (pulumi-kubernetes ``provider/pkg/await/deployment.go``)."""
    status = deployment.get("status") or {}
    generation = deployment["metadata"].get("generation") or 1
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    return (
        (status.get("observedGeneration") or 0) >= generation
        and (conditions.get("Available") or {}).get("status") == "True"
        and (generation <= 1 or (conditions.get("Progressing") or {}).get("reason") == "NewReplicaSetAvailable")
    )


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


class Rehearsal:
    """Drive one stack's steps on ``box`` (nodes already there)."""

    def __init__(
        self,
        box: Box,
        steps: list[Step],
        *,
        run_ms: Optional[Mapping[str, int]] = None,
        exit_codes: Optional[Mapping[str, tuple[int, str]]] = None,
        default_run_ms: int = 1000,
        log_dir: Optional[Path] = None,
        await_jobs: Iterable[str] = (),
        provisioner: Optional[Provisioner] = None,
        time_scale: float = 1.0,
        worker_start_ms: int = 0,
    ) -> None:
        self.box, self.steps = box, steps
        #: How long an MPI job's workers take to start once scheduled (their image's pull, their code's download,
        #: sshd), which their launcher must wait out.
        self.worker_start_ms = worker_start_ms
        #: How many times faster than the wall clock ``pulumi up``'s wait for a job object runs out (its timeout /
        #: time_scale): the box runs its pods for ``run_ms``, a duration it stands in for. The other objects (a
        #: DaemonSet's pods, a Deployment's) are ready in the machine's time, on a busy machine many seconds.
        self.time_scale = time_scale
        #: When each step was applied (monotonic seconds).
        self.applied_at: dict[str, float] = {}
        #: Where each step's timeout runs from: when it was applied, moved on by the time the machine held the box.
        self.waits_from: dict[str, float] = {}
        #: When each step applied and not ready was last seen not ready: it is late only if it was late then.
        self.seen_waiting: dict[str, float] = {}
        #: Seconds the machine, not the cluster, held the rehearsal (another box's lock, the box's own work).
        self.host_wait_s = 0.0
        #: The provider's await code (``pulumi-await``), started by :meth:`run`.
        self.awaiter: Optional[Awaiter] = None
        #: The cluster autoscaler's stand-in for ProvisioningRequests, polled on every pass of :meth:`run`.
        self.provisioner = provisioner
        checks = [
            d["metadata"]["name"]
            for s in steps
            for d in s.docs
            if d["kind"] == "AdmissionCheck" and (d.get("spec") or {}).get("controllerName") == PROVISIONING_CONTROLLER
        ]
        if checks and provisioner is None:  # else every job it guards waits for a request nothing answers
            raise RehearsalError(
                f"the stack's admission check {', '.join(checks)} asks the cluster autoscaler for "
                "ProvisioningRequests: give the rehearsal the autoscaler's stand-in "
                "(stacks.box.provisioner.provisioner_for)"
            )
        self.run_ms, self.exit_codes, self.default_run_ms = dict(run_ms or {}), dict(exit_codes or {}), default_run_ms
        self.start = time.monotonic()
        #: The same instant on the wall clock, which the box's apiserver stamps its objects with (same machine).
        self.start_wall = time.time()
        self.events: list[Event] = []
        self.ready: set[str] = set()
        self.applied: dict[str, Step] = {}
        self.operator: Optional[subprocess.Popen[bytes]] = None
        self.kueue: Optional[Kueue] = None
        #: Seconds Kueue took to start (its webhooks serving and registered).
        self.kueue_start_s: Optional[float] = None
        self.log_dir = log_dir or box.home
        self.refused: list[Refusal] = []
        #: Jobs and MPIJobs awaited to completion although pulumi would not (a test's order).
        self.await_jobs = set(await_jobs)
        self.jobs: dict[str, dict[str, Any]] = {}
        #: Every pod started on a node (uid -> the pod as last seen), kept after the pod is gone (the MPI Operator
        #: deletes its workers when the job ends). Read from a watch while :meth:`run` runs: no pod is missed.
        self.pods: dict[str, dict[str, Any]] = {}
        self._pod_changes: Optional[Changes] = None  # while run() runs

    def note(self, text: str) -> None:
        self.events.append(Event(time.monotonic() - self.start, text))

    # --- pulumi up ----------------------------------------------------------------------------------------------

    def _annotate(self, doc: dict[str, Any]) -> None:
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

    def _apply(self, step: Step) -> None:
        self._apply_all([step])

    def _apply_timed(self, steps: Sequence[Step]) -> None:
        """:meth:`_apply_all`, its time the box's work: steps already waiting are not charged for it."""
        started = time.monotonic()
        try:
            self._apply_all(steps)
        finally:
            self._host_waited(time.monotonic() - started, exclude={s.urn for s in steps})

    def _apply_all(self, steps: Sequence[Step]) -> None:
        """Apply ``steps`` (each one's dependencies ready, so ``pulumi up`` would apply them side by side) in one
        server-side apply: kubectl applies each object and reports every refusal."""
        docs: list[dict[str, Any]] = []
        created: list[dict[str, Any]] = []
        for step in steps:
            # A Helm release the box does not stand in for (cluster-autoscaler: stacks/box/provisioner.py plays its
            # ProvisioningRequests).
            if not step.docs:
                self.applied[step.urn] = step
                self.applied_at[step.urn] = self.waits_from[step.urn] = time.monotonic()
            for doc in step.docs:
                self._annotate(doc)
                # Kueue's release: Helm's install creates a release's objects (no server-side apply), and creating
                # Kueue's 1.8 MB of CRDs costs the apiserver a fraction of applying them server-side.
                (created if step.kueue is not None else docs).append(doc)
        if not docs and not created:
            return
        proc = None
        # As Helm's install does with a chart's CRDs: one that exists already is left as it is.
        created = [
            d
            for d in created
            if not (d["kind"] == "CustomResourceDefinition" and self.box.exists("crd", d["metadata"]["name"]))
        ]
        if created:
            proc = self.box.kubectl(
                "create",
                "--validate=strict",
                "-f",
                "-",
                input=dump_yaml_documents(created),
                check=False,
            )
        # the stack's objects, then each Patch under its own field manager, as the provider applies them
        for flags, group in applies(docs):
            if proc is not None and proc.returncode != 0:
                break
            proc = self.box.kubectl(
                "apply", *flags, "--validate=strict", "-f", "-", input=dump_yaml_documents(group), check=False
            )
        docs += created
        if proc is not None and proc.returncode != 0:
            refused = _refusals(docs, proc.stderr)
            self.refused += refused
            names = [
                s.name
                for s in steps
                if any(r.name.rpartition("/")[2] == d["metadata"]["name"] for r in refused for d in s.docs)
            ] or [s.name for s in steps]
            raise RehearsalError(f"{', '.join(names)} was refused: " + "; ".join(str(r) for r in self.refused))
        for step in steps:
            if not step.docs:
                continue
            self.applied[step.urn] = step
            self.applied_at[step.urn] = self.waits_from[step.urn] = time.monotonic()
            self.note(f"applied {step.name} ({', '.join(d['kind'] + ' ' + d['metadata']['name'] for d in step.docs)})")
            for doc in step.docs:
                if doc["kind"] == "PersistentVolumeClaim":
                    self._provision(doc)

    def _provision(self, claim: Mapping[str, Any]) -> None:
        """The EFS CSI provisioner's part: a PersistentVolume bound to a claim of an EFS StorageClass."""
        spec = claim["spec"]
        if spec.get("volumeName") or not spec.get("storageClassName"):
            return
        sc = (
            self.box.get("storageclass", spec["storageClassName"])
            if self._exists("storageclass", spec["storageClassName"])
            else None
        )
        if not sc or sc.get("provisioner") != EFS_PROVISIONER:
            return
        meta = claim["metadata"]
        # The claim's reference with its UID, and the provisioner's annotation, as the CSI external-provisioner writes
        # them (kubernetes-sigs/sig-storage-lib-external-provisioner, controller.go): a reference without the UID
        # leaves the claim Pending until the PV controller's next periodic sync (15 s), not bound on the PV's creation.
        uid = self.box.get("persistentvolumeclaim", meta["name"], "-n", meta["namespace"])["metadata"]["uid"]
        pv: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"pvc-{meta['namespace']}-{meta['name']}",
                "annotations": {"pv.kubernetes.io/provisioned-by": EFS_PROVISIONER},
            },
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec["accessModes"],
                "storageClassName": spec["storageClassName"],
                "persistentVolumeReclaimPolicy": "Delete",
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": uid,
                },
                "csi": {"driver": EFS_PROVISIONER, "volumeHandle": "fs-box::fsap-box"},
            },
        }
        self.box.create([pv])
        self.note(f"provisioned {pv['metadata']['name']} for claim {meta['name']} (EFS CSI stand-in)")

    def _exists(self, *args: str) -> bool:
        return self.box.exists(*args)

    def _established(self, crd: str) -> bool:
        return crd_established(self.box, crd)

    def _is_ready(self, step: Step) -> bool:
        if step.kueue is not None:
            return self.kueue is not None
        for doc in step.docs:
            ann = (doc.get("metadata") or {}).get("annotations") or {}
            if ann.get(SKIP_AWAIT) == "true":
                continue
            kind, meta = doc["kind"], doc["metadata"]
            ns = ["-n", meta["namespace"]] if meta.get("namespace") else []
            if meta["name"] in self.await_jobs:
                if "outcome" not in self.jobs.get(meta["name"], {}):
                    return False
            elif kind == "DaemonSet":  # a Helm release's stand-in: pulumi awaits a release's resources
                status = self.box.get("daemonset", meta["name"], *ns).get("status") or {}
                if not status.get("observedGeneration") or (status.get("numberReady") or 0) != (
                    status.get("desiredNumberScheduled") or 0
                ):
                    return False
            elif asks_provider(doc):
                if not self._provider_ready(step, doc):
                    return False
            elif kind == "Deployment":
                if not rolled_out(self.box.get("deployment", meta["name"], *ns)):
                    return False
            elif kind == "CustomResourceDefinition":
                if not crd_established(self.box, meta["name"]):
                    return False
        return True

    def _provider_ready(self, step: Step, doc: Mapping[str, Any]) -> bool:
        """The provider's answer for ``doc`` (a Job, or an object with ``waitFor``); a failure, the provider's or the
        program's check of a job object it awaited (its failed condition), stops the rehearsal as ``pulumi up``."""
        assert self.awaiter is not None, "run() starts the awaiter"
        meta = doc["metadata"]
        group = doc["apiVersion"].rpartition("/")[0]
        resource = doc["kind"].lower() + (f".{group}" if group else "")
        try:
            live = self.box.get(resource, meta["name"], *(["-n", meta["namespace"]] if meta.get("namespace") else []))
        except BoxError:
            return False  # not served yet
        answer = self.awaiter.answer(doc, live)
        failure = answer.error or (answer.ready and answer.awaited and failure_of(doc["kind"], live))
        if failure:
            self.note(f"{doc['kind']} {meta['name']}: the wait ended: {failure}")
            raise RehearsalError(
                f"{step.name}: {doc['kind']} {meta['name']} failed: {failure} (pulumi up stops here)\ntimeline:\n"
                + self.timeline()
            )
        return answer.ready

    def _late(self) -> list[str]:
        """Steps not ready within their timeout (on the scaled clock) when last seen: ``pulumi up`` would stop there.
        A step is judged by when it was last seen waiting, not by when the pass ends (a busy machine's pass is long)."""
        return [
            f"{s.name} (timeout {s.timeout_s:.0f} s"
            + (f", {self._limit_s(s):.1f} s on the box's clock" if self._limit_s(s) != s.timeout_s else "")
            + ")"
            for urn, s in self.applied.items()
            if urn not in self.ready
            and urn in self.seen_waiting
            and self.seen_waiting[urn] - self.waits_from[urn] > self._limit_s(s)
        ]

    def _limit_s(self, step: Step) -> float:
        """Seconds the rehearsal waits for ``step``: its timeout, on the scaled clock if it registers a job object."""
        scaled = any(d["kind"] in JOB_OBJECTS for d in step.docs)
        return step.timeout_s / self.time_scale if scaled else step.timeout_s

    def _host_waited(self, seconds: float, exclude: Iterable[str] = ()) -> None:
        """The machine, not the cluster, held the rehearsal ``seconds``: another box's lock, or the box's own work
        (applying, starting Kueue), which on a busy machine takes many seconds and on the scaled clock many minutes no
        cluster spends. The rehearsal's deadline and the clock of each step waiting then move by them; a step applied
        later (or in ``exclude``: applied by that work) is awaited for its own timeout."""
        self.host_wait_s += seconds
        skip = set(exclude)
        for urn in self.applied:
            if urn not in self.ready and urn not in skip:
                self.waits_from[urn] += seconds

    # --- the parts the box plays --------------------------------------------------------------------------------

    def _check_operator(self, binary: Path) -> None:
        """The operator's Deployment restarts its pod when it exits; so does the box (at most 5 times). A component
        of the box's control plane that exited ends the rehearsal at once, naming it (nothing would move again)."""
        gone = self.box.exited()
        if gone:
            raise RehearsalError(self.box.exit_report(gone))
        if self.operator is None or self.operator.poll() is None:
            return
        self.restarts = getattr(self, "restarts", 0) + 1
        tail = (self.log_dir / "mpi-operator.log").read_text(errors="replace")[-600:]
        if self.restarts > 5:
            raise RehearsalError(f"the MPI Operator exited {self.restarts} times; its log ends:\n{tail}")
        self.note(f"the MPI Operator exited ({self.operator.returncode}); restarting it: ...{tail[-200:]}")
        self._start_operator(binary)

    def _start_operator(self, binary: Path) -> None:
        """The MPI Operator, out of cluster. It serves its health check on port 8080 of every address, fixed in its
        code, and exits when that port is taken (mpi-operator v0.8.0 ``cmd/mpi-operator/app/server.go``,
        ``healthCheckPort``): one runs on the machine at a time, holding the lock ``mpi-operator-8080`` for its
        whole life (a kept box's operator too); another box's waits for it."""
        log = open(self.log_dir / "mpi-operator.log", "ab")
        started = time.monotonic()
        lock = hold_for_child(
            "mpi-operator-8080", OPERATOR_PORT_WAIT_S, lambda: self.note("waiting for another box's MPI Operator")
        )
        self._host_waited(time.monotonic() - started)
        try:
            self.operator = subprocess.Popen(
                [
                    str(binary),
                    "-kubeConfig",
                    str(self.box.kubeconfig),
                    "--kube-api-qps",
                    "100",
                    "--kube-api-burst",
                    "200",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(lock,),
            )
        finally:
            os.close(lock)
        self.note(f"started the MPI Operator (pid {self.operator.pid}, out of cluster)")

    def _start_kueue(self, binaries: Mapping[str, Path], step: Step) -> None:
        """Kueue's release: its CRDs are applied; the manager starts once they are Established (once per box)."""
        binary = binaries["kueue" + SUFFIXES.get(step.kueue_module, "")]
        assert step.kueue is not None
        kueue = Kueue(
            self.box, binary, step.kueue, log_dir=self.log_dir, feature_gates=step.kueue_gates, folder=step.kueue_module
        )
        self.kueue_start_s = kueue.start()
        self.kueue = kueue
        # A real cluster starts Kueue's pod in seconds, within its release's wait; the box's start is its own work.
        self._host_waited(self.kueue_start_s)
        self.note(
            f"started Kueue (pid {kueue.process.pid if kueue.process else '?'}, out of cluster) in "
            f"{self.kueue_start_s:.1f} s"
        )

    def stop_operator(self) -> None:
        """Stop the operators the box runs (the MPI Operator, Kueue)."""
        if self.kueue is not None:
            self.kueue.stop()
        if self.operator and self.operator.poll() is None:
            self.operator.terminate()
            try:
                self.operator.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.operator.kill()
                self.operator.wait()

    def _released(self, ref: str, namespace: str) -> bool:
        """Whether what a held pod waits for is there: a job completed (``wait-for-jobs``), a worker pod running and
        ready (``wait-for-workers``: on a cluster, its sshd accepts connections)."""
        kind, _, name = ref.partition("/")
        try:
            obj = self.box.get(kind, name, "-n", namespace)
        except BoxError:
            return False
        conds = (obj.get("status") or {}).get("conditions") or []
        if kind == "pods":
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
            return ready and (obj.get("status") or {}).get("phase") == "Running"
        return any(c["type"] in ("Complete", "Succeeded") and c["status"] == "True" for c in conds)

    def _record_pods(self) -> None:
        """Add the pods started since the last pass to :attr:`pods`."""
        for _at, _kind, pod in self._pod_changes.read() if self._pod_changes else ():
            if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("startTime"):
                self.pods[pod["metadata"]["uid"]] = pod

    def _release_held(self) -> None:
        for pod in self.box.get("pods", "-A")["items"]:
            held = (pod["metadata"].get("annotations") or {}).get(HELD) or ""
            if not held:
                continue
            ns = pod["metadata"]["namespace"]
            if all(self._released(ref, ns) for ref in held.split(",")):
                self.box.annotate("pod", pod["metadata"]["name"], ns, {HELD: None})
                self.note(f"pod {pod['metadata']['name']}: its wait ended ({held})")

    # --- the run ------------------------------------------------------------------------------------------------

    def pending_reasons(self) -> list[str]:
        out = []
        for pod in self.box.get("pods", "-A")["items"]:
            if (pod.get("status") or {}).get("phase") != "Pending":
                continue
            conds = (pod.get("status") or {}).get("conditions") or []
            why = next(
                (
                    c.get("message") or c.get("reason")
                    for c in conds
                    if c["type"] == "PodScheduled" and c["status"] == "False"
                ),
                None,
            )
            held = (pod["metadata"].get("annotations") or {}).get(HELD)
            out.append(
                f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: "
                + (why or (f"waiting for {held}" if held else "scheduled, not started"))
            )
        if self.kueue is not None:
            for ns in sorted(
                {d["metadata"]["namespace"] for s in self.applied.values() for d in s.docs if d["kind"] in JOB_OBJECTS}
            ):
                out += workload_conditions(self.box, ns)
        return out

    def retrying(self) -> list[str]:
        """The Jobs whose pods failed and that wait to start the next: the Job controller's back-off, 10 s doubling
        to at most 6 minutes, within the Job's backoffLimit
        (https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-backoff-failure-policy)."""
        out = []
        for ns in sorted(
            {d["metadata"]["namespace"] for s in self.applied.values() for d in s.docs if "namespace" in d["metadata"]}
        ):
            for job in self.box.get("jobs", "-n", ns)["items"]:
                status = job.get("status") or {}
                over = any(
                    c.get("status") == "True"
                    for c in status.get("conditions") or []
                    if c.get("type") in ("Complete", "Failed")
                )
                if status.get("failed") and not status.get("active") and not over:
                    out.append(
                        f"{ns}/{job['metadata']['name']}: {status['failed']} pod(s) failed, of the "
                        f"{job['spec'].get('backoffLimit', 6)} the Job allows; the next starts after the Job "
                        "controller's back-off (10 s, doubling to 6 min): a longer --timeout shows the outcome"
                    )
        return out

    def run(
        self,
        binaries: Mapping[str, Path],
        *,
        timeout_s: float = 120.0,
        stuck: Optional[Callable[[list[str]], bool]] = None,
    ) -> None:
        """Apply every step in dependency order, then wait until every job completed (else :class:`RehearsalError`
        naming what waits and the scheduler's reasons). ``stuck(reasons)``, given :meth:`pending_reasons` after each
        pass (an empty list when nothing is pending), may end the wait early: true means what waits will not move (a
        job Kueue will never admit, a failure the caller waited for), and the error is raised then, not at the
        deadline."""
        deadline = time.monotonic() + timeout_s
        todo = list(self.steps)
        if self.awaiter is None:
            self.awaiter = Awaiter(binaries["pulumi-await"])
        self._pod_changes = Changes(self.box.api, "pods")
        self._pod_changes.open()
        try:
            self._run(binaries, todo, deadline, timeout_s, stuck)
        finally:
            self.awaiter.close()
            self.awaiter = None
            self._record_pods()
            self._pod_changes.close()
            self._pod_changes = None
        self.note("every job completed" if self.jobs else "every object is ready (the stack has no jobs)")

    def _run(
        self,
        binaries: Mapping[str, Path],
        todo: list[Step],
        deadline: float,
        timeout_s: float,
        stuck: Optional[Callable[[list[str]], bool]],
    ) -> None:
        while todo or not self._all_done():
            progressed = False
            now = [
                step
                for step in todo
                if all(d in self.ready for d in step.deps) and (step.gate is None or step.gate(self.box))
            ]
            if now:
                self._apply_timed(now)
                todo = [step for step in todo if step not in now]
                progressed = True
            for urn, step in self.applied.items():
                if urn in self.ready:
                    continue
                seen = time.monotonic()
                if self._is_ready(step):
                    self.ready.add(urn)
                    progressed = True
                    if any(
                        d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == MPIJOB_CRD
                        for d in step.docs
                    ):
                        self._start_operator(binaries["mpi-operator"])
                else:
                    self.seen_waiting[urn] = seen
            for step in self.applied.values():
                if step.kueue is not None and self.kueue is None:
                    self._start_kueue(binaries, step)
                    progressed = True
            self._record_pods()
            self._release_held()
            if self.provisioner is not None:
                done = len(self.provisioner.decisions)
                self.provisioner.poll()
                for d in self.provisioner.decisions[done:]:
                    added = ", ".join(f"{k} node(s) of {g}" for g, k in d.added.items())
                    self.note(
                        f"ProvisioningRequest {d.request}: Provisioned={d.status} ({d.reason})"
                        + (f", added {added}" if added else "")
                    )
                    progressed = True
            self._watch_jobs()
            late_steps = self._late()
            if late_steps:
                raise RehearsalError(
                    f"{', '.join(late_steps)}: not ready within the time pulumi up waits for it (pulumi up stops "
                    "here); pending pods:\n" + "\n".join(self.pending_reasons()) + "\ntimeline:\n" + self.timeline()
                )
            self._check_operator(binaries["mpi-operator"])
            reasons = self.pending_reasons() if stuck is not None else None
            late = time.monotonic() > deadline + self.host_wait_s
            if late or (reasons is not None and stuck is not None and stuck(reasons)):
                waiting = [s.name for s in todo] + [s.name for u, s in self.applied.items() if u not in self.ready]
                when = (
                    f"not done after {timeout_s:.0f} s"
                    if late
                    else f"stuck after {time.monotonic() - self.start:.0f} s"
                )
                retrying = self.retrying()
                raise RehearsalError(
                    f"{when}; waiting: {', '.join(waiting) or 'the jobs'}; pending pods:\n"
                    + "\n".join(reasons if reasons is not None else self.pending_reasons())
                    + ("\nretrying:\n" + "\n".join(retrying) if retrying else "")
                    + "\ntimeline:\n"
                    + self.timeline()
                )
            if not progressed:
                time.sleep(0.3)

    def _watch_jobs(self) -> None:
        """Record each job's (``self.jobs``: name -> kind, started, finished seconds since the start, outcome)."""
        for job_object in JOB_OBJECTS.values():
            if job_object.crd is not None and not self._established(job_object.crd):
                continue
            try:
                items = self.box.get(job_object.resource, "-A")["items"]
            except BoxError:
                if job_object.crd is None:
                    raise
                continue  # Established, not yet in discovery (updated asynchronously): the next pass reads them
            for obj in items:
                if obj["metadata"].get("ownerReferences"):
                    continue  # an MPI launcher Job: its MPIJob is the job
                name = obj["metadata"]["name"]
                rec = self.jobs.setdefault(name, {"kind": obj["kind"]})
                conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
                if "started" not in rec and (obj.get("status") or {}).get("active") or conds.get("Running") == "True":
                    rec.setdefault("started", time.monotonic() - self.start)
                for done in (job_object.succeeded, job_object.failed):
                    if conds.get(done) == "True" and "outcome" not in rec:
                        rec["outcome"] = done
                        rec["finished"] = time.monotonic() - self.start
                        if "started" not in rec:  # ran between two passes: its controller's own start stamp
                            rec["started"] = self._stamped_start(obj, rec["finished"])
                        self.note(f"{obj['kind']} {name}: {done}")

    def _stamped_start(self, obj: Mapping[str, Any], finished: float) -> float:
        """Seconds since the start at which ``obj``'s controller says it started (``status.startTime``: the Job
        controller's and the MPI Operator's, whole seconds), for a job that started and ended between two passes;
        kept within the rehearsal and no later than ``finished``."""
        stamp = (obj.get("status") or {}).get("startTime")
        if not stamp:
            return finished
        started = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - self.start_wall
        return min(max(started, 0.0), finished)

    def _all_done(self) -> bool:
        ours = {d["metadata"]["name"] for s in self.applied.values() for d in s.docs if d["kind"] in JOB_OBJECTS}
        jobs = self.jobs
        failed = [n for n in ours if jobs.get(n, {}).get("outcome") == "Failed"]
        if failed:
            raise RehearsalError(f"job(s) failed: {', '.join(sorted(failed))}")
        if not ours:  # a stack without jobs (the environment only): done once every object it applied is ready
            return all(urn in self.ready for urn in self.applied)
        return all("outcome" in jobs.get(n, {}) for n in ours)

    def timeline(self) -> str:
        return "\n".join(f"{e.t:7.1f} s  {e.text}" for e in self.events)
