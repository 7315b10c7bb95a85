"""A node group's roll while its training job runs: EKS's managed node group update played on the box.

The workshop preset's training job (2 pods, one per node of the ``cpu`` group, a PodDisruptionBudget keeping 1) runs
while each old node of its group is replaced, one at a time, as EKS's ``DEFAULT`` update strategy does it
(https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html): a new node from the plan first,
then the old node cordoned and drained through the eviction API (``kubectl drain``, which retries an eviction the
budget refuses, as EKS does for 15 minutes), then the old node terminated.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time
from typing import Optional

from components.workloads.pods import WORKER_CONTAINER
from components.workloads.pytorch import LAUNCHER_EXIT_STOPPED
from stacks.box.cluster import Box
from stacks.box.devices import Registrar
from stacks.box.nodes import group_nodes
from stacks.box.session import create_nodes
from stacks.box.timeline import Recorder, report
from tests.cluster.support import _phase, _Polls, _rehearsal, _shorten, _train_pods, _without_evaluation, stamp
from tests.wait import patient

#: The budget's refusal, as the eviction API words it (kubernetes pkg/registry/core/pod/storage/eviction.go).
REFUSED = "Cannot evict pod as it would violate the pod's disruption budget"
BUDGET = "train-disruption"


def _condition(pod: dict, kind: str) -> Optional[dict]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def _ready(pod: dict) -> bool:
    """Counted by the budget: Running, Ready and not being deleted (the disruption controller's healthy pods)."""
    ready = _condition(pod, "Ready")
    return (
        _phase(pod) == "Running"
        and not pod["metadata"].get("deletionTimestamp")
        and ready is not None
        and ready["status"] == "True"
    )


def _evict(box: Box, pod: dict) -> subprocess.CompletedProcess[str]:
    """One ``policy/v1`` Eviction of ``pod`` (what a drain sends for each pod)."""
    meta = pod["metadata"]
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": meta["name"], "namespace": "training"}}
    return box.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/training/pods/{meta['name']}/eviction",
        "-f",
        "-",
        input=json.dumps(body),
        check=False,
    )


def _stop(box: Box, pod: dict) -> None:
    """The kubelet's part of an evicted pod's stop, which the box's kwok does not play (it leaves a deleted pod
    Running while the Job controller's finalizer holds it): SIGTERM, the launcher's workers checkpoint and it exits
    143, the pod ends Failed (a kubelet moves a deleted pod to a terminal phase before it goes,
    https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = pod["status"].get("startTime", now)
    statuses = [
        {
            "name": c["name"],
            "image": c["image"],
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {
                "terminated": {
                    "exitCode": LAUNCHER_EXIT_STOPPED if c["name"] == WORKER_CONTAINER else 0,
                    "reason": "Error" if c["name"] == WORKER_CONTAINER else "Completed",
                    "startedAt": started,
                    "finishedAt": now,
                }
            },
        }
        for c in pod["spec"]["containers"]
    ]
    conditions = [
        {"type": kind, "status": "False", "reason": "PodFailed", "lastTransitionTime": now}
        for kind in ("Ready", "ContainersReady")
    ]
    patch = {"status": {"phase": "Failed", "conditions": conditions, "containerStatuses": statuses}}
    box.kubectl(
        "patch",
        "pod",
        pod["metadata"]["name"],
        "-n",
        "training",
        "--subresource=status",
        "--type=strategic",
        "-p",
        json.dumps(patch),
    )


class _Roll:
    """EKS's update of one node group (``DEFAULT`` strategy, ``maxUnavailable`` 1), one look at a time (:meth:`poll`,
    from a :class:`_Polls`): for each old node, its replacement created from the plan, then ``kubectl drain`` (cordon,
    then each pod evicted through the eviction API; a refusal is retried every 5 s), then the old Node deleted (the
    Auto Scaling group terminates the instance). Each look also records what the budget guards: how many of the job's
    pods were Ready, and its Kueue Workload's admission."""

    def __init__(self, box: Box, old: list[str], new: list[dict]) -> None:
        self.box = box
        self.todo = list(zip(old, new))
        self.started = False
        self.budget_before: dict = {}
        self.current: Optional[tuple[str, dict]] = None
        self.drain: Optional[subprocess.Popen[str]] = None
        self.began = 0.0
        #: Per node rolled: (old node, new node, seconds from its drain to its deletion, the drain's output).
        self.rolled: list[tuple[str, str, float, str]] = []
        #: Per look during the roll: the job's pods the budget counts as healthy.
        self.looks: list[int] = []
        #: Per look during the roll: the job's Workload admitted.
        self.admitted: list[bool] = []
        #: Pod name -> the pod when first seen evicted (its DisruptionTarget condition set, being deleted).
        self.evicted: dict[str, dict] = {}
        #: The pods that existed when the first evicted pod was still stopping (no replacement yet).
        self.while_stopping: list[str] = []
        #: The control: an eviction of the other pod while the first one stops.
        self.control: Optional[subprocess.CompletedProcess[str]] = None
        self.budget_at_control: dict = {}
        #: Pod name -> the pod when first seen Ready, for the pods made during the roll (the replacements).
        self.replacements: dict[str, dict] = {}
        self.originals: set[str] = set()
        #: When each evicted pod was stopped, and when each replacement was first seen Ready (monotonic seconds).
        self.stopped_at: list[float] = []
        self.ready_at: list[float] = []
        self.done = False
        self.error: Optional[str] = None

    def poll(self) -> None:
        if self.done:
            return
        pods = _train_pods(self.box)
        if not self.started:
            # the roll starts once both pods train and the disruption controller has counted them
            if (
                len(pods) != 2
                or not all(_ready(p) for p in pods)
                or not self.box.exists("pdb", BUDGET, "-n", "training")
            ):
                return
            budget = self.box.get("pdb", BUDGET, "-n", "training").get("status") or {}
            if budget.get("currentHealthy") == 2:
                self.started, self.budget_before = True, budget
                self.originals = {p["metadata"]["name"] for p in pods}
            else:
                return
        self.looks.append(sum(_ready(p) for p in pods))
        self.admitted.append(self._admitted())
        for pod in pods:
            name = pod["metadata"]["name"]
            if name not in self.originals and name not in self.replacements and _ready(pod):
                self.replacements[name] = pod
                self.ready_at.append(time.monotonic())
            disruption = _condition(pod, "DisruptionTarget")
            if not pod["metadata"].get("deletionTimestamp") or _phase(pod) != "Running" or disruption is None:
                continue
            if name not in self.evicted:
                self.evicted[name] = pod
            if self.control is None:
                # the first evicted pod is still stopping: its replacement cannot start yet, so the budget is at its
                # minimum and must refuse the other pod's eviction
                self.while_stopping = [p["metadata"]["name"] for p in pods]
                other = next(p for p in pods if p["metadata"]["name"] != name)
                self.control = _evict(self.box, other)
                self.budget_at_control = self.box.get("pdb", BUDGET, "-n", "training").get("status") or {}
            _stop(self.box, pod)
            self.stopped_at.append(time.monotonic())
        self._step(pods)

    def _admitted(self) -> bool:
        for wl in self.box.get("workloads.kueue.x-k8s.io", "-n", "training")["items"]:
            if any(r.get("name") == "train" for r in wl["metadata"].get("ownerReferences") or []):
                return (_condition(wl, "Admitted") or {}).get("status") == "True"
        return False

    def _step(self, pods: list[dict]) -> None:
        if self.current is None and not self.todo:
            self._finish(pods)
            return
        if self.current is None:
            old, new = self.todo.pop(0)
            create_nodes(self.box, [new], timeout_s=patient(60))  # the replacement first (DEFAULT)
            self.current, self.began = (old, new), time.monotonic()
            assert self.box.binaries
            self.drain = subprocess.Popen(
                [
                    str(self.box.binaries["kubectl"]),
                    "--kubeconfig",
                    str(self.box.kubeconfig),
                    "drain",
                    old,
                    "--ignore-daemonsets",
                    "--delete-emptydir-data",
                    f"--timeout={int(patient(180))}s",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            return
        assert self.drain is not None
        if self.drain.poll() is None:
            return
        output = self.drain.stdout.read() if self.drain.stdout else ""
        old, new = self.current
        if self.drain.returncode != 0:
            self.error, self.done = f"kubectl drain {old} exited {self.drain.returncode}:\n{output}", True
            return
        self.box.kubectl("delete", "node", old)  # the Auto Scaling group terminates the drained instance
        self.rolled.append((old, new["metadata"]["name"], time.monotonic() - self.began, output))
        self.current = None

    def _finish(self, pods: list[dict]) -> None:
        """Once every old node is gone and both pods train on the new nodes: the rest of the training need not take
        the roll's time again."""
        if len(pods) == 2 and all(_ready(p) for p in pods):
            for pod in pods:
                _shorten(self.box, pod)
            self.done = True


def test_the_training_group_rolls_one_node_at_a_time_through_the_eviction_api_and_the_job_completes(
    binaries, registrations_of, tmp_path
) -> None:
    """The workshop's training job (an Indexed Job of 2 pods, one per node; its PodDisruptionBudget keeps 1 of 2,
    ``components/workloads/disruption.py``) while the ``cpu`` group rolls under ``DEFAULT``
    (``components/nodeplan.py``): each old node in turn gets its replacement first, is drained with
    ``kubectl drain`` (cordon; evictions through the eviction API) and deleted. What the cluster records:

    - each training pod left through the eviction API (its ``DisruptionTarget`` condition, reason
      ``EvictionByEvictionAPI``), and the Job controller replaced it without counting a failure (the pod failure
      policy's ``DisruptionTarget`` rule: ``status.failed`` stays 0); the replacement is made only once the stopped
      pod has ended (a Job with a pod failure policy replaces failed pods only);
    - the control: while the first evicted pod stops, the other pod's eviction is refused (429, the budget at its
      minimum), and in no look during the roll did fewer of the job's pods train than the budget keeps; the second
      node's eviction came only after the first replacement was Ready (the drain waits on the budget);
    - Kueue kept the job's Workload admitted throughout, the job completed on the new nodes, and only new nodes of
      the group remain.
    """
    box, plan, rehearsal = _rehearsal(
        binaries,
        tmp_path,
        registrations_of("workshop"),
        "workshop",
        run_ms={"train": 600_000},
        mutate=_without_evaluation,
    )
    job = plan.jobs["train"]
    group = job.group
    assert (job.nodes, job.min_available, group.node_update.name) == (2, 1, "DEFAULT"), (job, group.node_update)
    old = [n["metadata"]["name"] for n in group_nodes(group, "us-east-1")]
    new = group_nodes(group, "us-east-1", count=len(old), first=len(old))
    roll = _Roll(box, old, new)
    recorder = Recorder(box, rehearsal.start)
    watch = _Polls(box, roll.poll)
    try:
        with Registrar(box) as registrar, recorder, watch:
            # a failed look ends the run at once (else the training pods' 600 s would run out)
            rehearsal.run(
                binaries, timeout_s=patient(300), stuck=lambda _r: watch.error is not None or roll.error is not None
            )
        assert registrar.error is None and watch.error is None, (registrar.error, watch.error)
        final = box.get("job", "train", "-n", "training")
        pods = _train_pods(box)
        nodes = [
            n["metadata"]["name"] for n in box.get("nodes", "-l", f"eks.amazonaws.com/nodegroup={group.name}")["items"]
        ]
    finally:
        if roll.drain is not None and roll.drain.poll() is None:
            roll.drain.kill()
        rehearsal.stop_operator()
        box.down()
    text = report(rehearsal, recorder)
    assert roll.error is None, roll.error
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] == "Complete", (name, text)
    # every old node drained and deleted, one at a time, after its replacement joined
    assert [r[0] for r in roll.rolled] == old and sorted(nodes) == sorted(n["metadata"]["name"] for n in new), (
        roll.rolled,
        nodes,
    )
    # the budget before the roll: 2 healthy, 1 kept, 1 disruption allowed
    before = roll.budget_before
    assert (before.get("desiredHealthy"), before.get("disruptionsAllowed")) == (1, 1), before
    # each original pod went through the eviction API and was stopped, never counted as a failure
    assert len(roll.evicted) == 2, roll.evicted
    for pod in roll.evicted.values():
        disruption = _condition(pod, "DisruptionTarget")
        assert disruption and disruption["reason"] == "EvictionByEvictionAPI", disruption
        assert pod["spec"]["nodeName"] in old, pod["spec"]["nodeName"]
    assert not final["status"].get("failed"), final["status"]
    assert final["status"].get("succeeded") == 2, final["status"]
    # the control: the other pod's eviction refused while the first stopped (no replacement yet: the Job controller
    # replaces a pod only once it has failed)
    assert roll.control is not None and roll.control.returncode != 0, roll.control
    assert REFUSED in roll.control.stderr, roll.control.stderr
    assert roll.budget_at_control.get("disruptionsAllowed") == 0, roll.budget_at_control
    assert len(roll.while_stopping) == 2 and set(roll.while_stopping) <= set(roll.evicted), roll.while_stopping
    # never fewer pods training than the budget keeps; Kueue never let go of the job
    assert roll.looks and min(roll.looks) >= job.min_available, roll.looks
    assert roll.admitted and all(roll.admitted), roll.admitted
    states = [s for _t, s in recorder.workloads["train"]]
    assert "admitted" in states and not any(
        s.startswith(("evicted", "queued")) for s in states[states.index("admitted") :]
    ), states
    # the jobs' pods ran to the end on the new nodes
    ran = [p for p in pods if _phase(p) == "Succeeded"]
    assert sorted(p["spec"]["nodeName"] for p in ran) == sorted(n["metadata"]["name"] for n in new), text
    # the drain of the second node evicted its pod only once the first replacement was Ready (the apiserver's stamps,
    # whole seconds)
    first, second = sorted(roll.evicted.values(), key=lambda p: p["spec"]["nodeName"] != old[0])
    assert first["spec"]["nodeName"] == old[0] and second["spec"]["nodeName"] == old[1], roll.evicted
    replaced = next(p for p in roll.replacements.values() if p["spec"]["nodeName"] == roll.rolled[0][1])
    ready_at = stamp(_condition(replaced, "Ready")["lastTransitionTime"])
    assert stamp(_condition(second, "DisruptionTarget")["lastTransitionTime"]) >= ready_at, (replaced, second)
    waited = [r[3] for r in roll.rolled if REFUSED in r[3]]
    print(
        "\n".join(f"{o} -> {n}: drained and deleted in {s:.1f} s" for o, n, s, _out in roll.rolled)
        + f"\nlooks during the roll: {len(roll.looks)}, fewest pods training: {min(roll.looks)}"
        + "\nreplacement Ready after its pod stopped: "
        + ", ".join(f"{r - s:.1f} s" for s, r in zip(roll.stopped_at, roll.ready_at))
        + f"\ndrains that waited on the budget: {len(waited)}\n{text}"
    )
