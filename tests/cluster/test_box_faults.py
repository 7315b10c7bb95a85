"""Faults with the real controllers: a failing training pod, a node lost mid-run, the rendezvous rescheduled."""

from __future__ import annotations

import time

import pytest

from stacks.box.devices import Registrar
from stacks.box.nodes import group_nodes
from stacks.box.rehearse import EXIT_CODE, RUN_MS, RehearsalError
from stacks.box.session import create_nodes
from stacks.box.timeline import Recorder, report
from stacks.box.waiting import JOB_TRACKING
from tests.cluster.support import _phase, _Polls, _rehearsal, _shorten, _train_pods, _without_evaluation
from tests.wait import patient

#: The Job controller's finalizer on each pod it has not yet counted in the Job's status (Kubernetes' job tracking
#: with finalizers, https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-tracking-with-finalizers).


def _run_until(binaries, box, rehearsal, stuck) -> None:
    """Run the rehearsal until ``stuck`` says what the test waits for happened (the run then stops as stuck), then
    bring the box down."""
    try:
        with Registrar(box):
            with pytest.raises(RehearsalError) as err:
                rehearsal.run(binaries, timeout_s=patient(240), stuck=stuck)
    finally:
        rehearsal.stop_operator()
        box.down()
    assert "stuck after" in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "code, outcome",
    [
        # 2 (USAGE_ERROR_EXIT_CODE, the policy's FailJob: fails at once) runs through the user's command:
        # test_the_rehearse_command_prints_the_log_of_a_failed_jobs_pod
        (69, "retried, not counted"),  # the launcher's lost-rendezvous code: Ignore, the pod is replaced
        (1, "retried, counted"),  # any other failure counts against backoffLimit
    ],
)
def test_a_failing_training_pod_is_retried_or_fails_the_job_as_the_policy_says(
    binaries, registrations_of, tmp_path, code: int, outcome: str
) -> None:
    """Every training pod exits with ``code``. The run is followed until the Job controller has handled the first
    failure (the pod replaced, its failure counted or not in the Job's status), whenever that is on a busy machine:
    then the job neither completed nor failed, and its status says whether the failure counted."""
    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, registrations_of("dev"), "dev", exit_codes={"train": (code, "worker")}
    )
    seen: dict = {}

    def handled(_reasons) -> bool:
        """The first failed pod is replaced and the Job controller has taken it into its status (it left the Job's
        uncounted pods and lost the Job's tracking finalizer). Before that, what a rehearsal that timed out would say
        of a Job in its back-off is noted."""
        seen.setdefault("retrying", []).extend(r for r in rehearsal.retrying() if r.startswith("training/train:"))
        pods = _train_pods(box)
        failed = [p for p in pods if _phase(p) == "Failed"]
        if not failed or len(pods) < 2:
            return False
        job = box.get("job", "train", "-n", "training")
        uncounted = (job.get("status") or {}).get("uncountedTerminatedPods") or {}
        if any(uncounted.values()) or any(JOB_TRACKING in (p["metadata"].get("finalizers") or []) for p in failed):
            return False
        seen.update(job=job, pods=pods)
        return True

    _run_until(binaries, box, rehearsal, handled)
    job, pods = seen["job"], seen["pods"]
    conditions = {c["type"]: c for c in job["status"].get("conditions") or []}
    status = job["status"]
    assert not any(conditions.get(c, {}).get("status") == "True" for c in ("Failed", "Complete")), conditions
    assert len(pods) >= 2, f"the failed pod was not replaced: {[p['metadata']['name'] for p in pods]}"
    if outcome == "retried, not counted":
        assert not status.get("failed"), status
        # a report while its replacement waits says the failure was ignored, not counted (the back-off counts it)
        assert all("0 of them counted" in r and "ignores the others" in r for r in seen["retrying"]), seen
    else:
        assert status.get("failed", 0) >= 1, status
        # the Job waits its back-off before the replacement: the rehearsal's report names it (not an empty list)
        assert seen["retrying"] and seen["retrying"][0].startswith("training/train: 1 pod(s) failed, of the"), seen


def test_a_failed_mpi_launcher_is_a_new_pod_that_waits_for_its_workers_again(
    binaries, registrations_of, tmp_path
) -> None:
    """mpi-horovod's nccl launcher exits 1 (mpirun failed: a worker lost, say). The MPI Operator's launcher Job
    (restartPolicy Never, components/workloads/mpi.py) counts one failed pod and starts a new one, which runs its
    wait for the workers again: a container restarted in place runs no init container. Followed until the Job
    controller has counted the first failure and made the second launcher pod."""
    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, registrations_of("mpi-horovod"), "mpi-horovod", exit_codes={"nccl": (1, "launcher")}
    )
    seen: dict = {}

    def retried(_reasons) -> bool:
        pods = [
            p
            for p in box.get("pods", "-n", "training", "-l", "training.kubeflow.org/job-role=launcher")["items"]
            if p["metadata"]["name"].startswith("nccl-launcher")
        ]
        job = box.get("job", "nccl-launcher", "-n", "training") if pods else {}
        if len(pods) < 2 or not (job.get("status") or {}).get("failed"):
            return False
        seen.update(pods=pods, job=job)
        return True

    _run_until(binaries, box, rehearsal, retried)
    pods, job = seen["pods"], seen["job"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never" and job["status"]["failed"] >= 1, job
    assert all("wait-for-workers" in [c["name"] for c in p["spec"].get("initContainers") or []] for p in pods), [
        p["spec"].get("initContainers") for p in pods
    ]
    # no launcher restarted in place: each failure is a pod of its own
    restarts = [s.get("restartCount", 0) for p in pods for s in (p.get("status") or {}).get("containerStatuses") or []]
    assert not any(restarts), restarts


def test_a_node_lost_mid_run_is_replaced_and_the_job_completes(binaries, registrations_of, tmp_path) -> None:
    """``kubectl delete node`` of the node running dev's training pod (a PyTorchJob's Indexed Job), as when its
    instance dies and the cloud's node lifecycle deletes the Node. What the README promises:

    - "Every job and health check goes through Kueue's admission ... it is created suspended and starts only when all
      of it fits", and "A job admitted but not all running within waitForPodsReady's 1200 s ... is evicted": a lost
      pod does not evict the job; it stays admitted, holding its quota, while its pod is replaced.
    - The pod failure policy: "disruptions (DisruptionTarget) never count against the backoff"
      (components/workloads/indexed_job.py; the README's exit-code table: "143 | stopped by a signal | Ignore (like the
      DisruptionTarget condition)").
    - "A node is lost ...: the survivor's first resumed step came 6.9-12.6 s after the kill" -- that is torchrun, on a
      real process group; here the part Kubernetes plays: the lost pod is failed by the pod garbage collector with
      DisruptionTarget (reason DeletionByPodGC) once the Node is gone, 40-80 s later (kube-controller-manager's
      pkg/controller/podgc: a fixed 40 s quarantine for a missing node, on passes 20 s apart), the Job controller
      replaces it without counting it, the replacement waits Pending (the scheduler's reason: no node of the group)
      until the managed node group's replacement instance registers (the test creates it from the plan), runs there,
      and the job completes (the evaluation, which only follows training, is left out of the run).
    """
    box, plan, rehearsal = _rehearsal(
        binaries, tmp_path, registrations_of("dev"), "dev", run_ms={"train": 600_000}, mutate=_without_evaluation
    )
    cpu = next(g for g in plan.all_groups if g.name == "cpu")
    spare = group_nodes(cpu, "us-east-1", count=2)[1]  # the replacement instance: a new node of the group
    recorder = Recorder(box, rehearsal.start)
    seen: dict = {}

    def poll() -> None:
        pods = _train_pods(box)
        if "lost" not in seen:
            running = [p for p in pods if _phase(p) == "Running"]
            if running:
                seen["lost"] = running[0]
                box.kubectl("delete", "node", running[0]["spec"]["nodeName"])
                seen["deleted"] = time.monotonic()
            return
        new = [p for p in pods if p["metadata"]["uid"] != seen["lost"]["metadata"]["uid"]]
        if not new:
            return
        pod = new[0]
        seen.setdefault("replaced", time.monotonic())
        scheduled = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), None
        )
        # the spare node only once the timeline shows the scheduler's reason (the recorder reads on its own)
        shown = any(
            w.reason.startswith("not scheduled: ")
            for r in list(recorder.pods.values())
            if r.name == pod["metadata"]["name"]
            for w in r.waits
        )
        if "spare" not in seen and scheduled and scheduled["status"] == "False" and shown:
            seen["pending"] = scheduled.get("message")
            create_nodes(box, [spare])
            seen["spare"] = time.monotonic()
        if _phase(pod) == "Running" and "ran" not in seen:
            seen["ran"] = pod
            _shorten(box, pod)

    watch = _Polls(box, poll)
    try:
        with Registrar(box) as registrar, recorder, watch:
            rehearsal.run(binaries, timeout_s=patient(240))
        assert registrar.error is None and watch.error is None, (registrar.error, watch.error)
        job = box.get("job", "train", "-n", "training")
    finally:
        rehearsal.stop_operator()
        box.down()
    text = report(rehearsal, recorder)
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] == "Complete", (name, text)
    lost, ran = seen["lost"], seen["ran"]
    assert lost["spec"]["nodeName"] == "cpu-0" and ran["spec"]["nodeName"] == spare["metadata"]["name"], text
    # not counted: the DisruptionTarget rule of the pod failure policy matched the pod GC's condition
    assert not job["status"].get("failed"), job["status"]
    assert job["status"].get("succeeded") == 1
    # the pod GC's quarantine, then the replacement: Pending until a node of the group registered
    replaced_after = seen["replaced"] - seen["deleted"]
    assert replaced_after >= 39, replaced_after
    assert "didn't match Pod's node affinity/selector" in seen["pending"], seen["pending"]
    waits = [w.reason for r in recorder.pods.values() if r.name == ran["metadata"]["name"] for w in r.waits]
    assert any("not scheduled: 0/1 nodes are available" in w for w in waits), text
    # Kueue kept the job admitted throughout: never evicted, never queued again
    states = [s for _t, s in recorder.workloads["train"]]
    assert "admitted" in states and not any(
        s.startswith(("evicted", "queued")) for s in states[states.index("admitted") :]
    ), states
    print(
        f"pod replaced {replaced_after:.1f} s after its node was deleted; spare node at "
        f"{seen['spare'] - seen['deleted']:.1f} s\n{text}"
    )


def test_the_rendezvous_rescheduled_mid_run_and_the_job_completes(binaries, registrations_of, tmp_path) -> None:
    """dev's etcd rendezvous pod deleted while the training pod runs. What the README promises ("etcd is
    rescheduled"): "its data is on the shared volume ... one member, replaced with Recreate, so it comes back with the
    rendezvous it had: the agents lose their connection (RendezvousConnectionError) about 2 s later and stop their
    workers, which checkpoint the step reached; the pods end with 69 (rendezvous lost), are replaced, and resume at
    that step", and the exit-code table: "69 | rendezvous lost with etcd | Ignore (the next pod waits for etcd)".

    Here: the Deployment's ReplicaSet brings a new etcd pod up, the Service's EndpointSlice follows it (the new pod's
    address, ready; the old one gone), the training pod exits 69 as the launcher does
    (tests/real/test_training_faults_real.py shows that part on real processes), the Job controller replaces it without
    counting the failure, and the job completes (the evaluation, which only follows training, is left out of the
    run). The replacement trains only once the Service leads to the new etcd, as the launcher waits for etcd before
    it starts torchrun (kwok does not wait: the test holds the replacement's end until then, whichever of the two
    controllers is quicker on a busy machine)."""
    box, _plan, rehearsal = _rehearsal(
        binaries, tmp_path, registrations_of("dev"), "dev", run_ms={"train": 600_000}, mutate=_without_evaluation
    )
    etcd = "eks-training-dev-etcd"
    recorder = Recorder(box, rehearsal.start)
    seen: dict = {}

    def etcd_pods() -> list[dict]:
        return [
            p
            for p in box.get("pods", "-n", "training")["items"]
            if p["metadata"]["name"].startswith(etcd + "-") and not p["metadata"].get("deletionTimestamp")
        ]

    def endpoints() -> list:
        """The etcd Service's endpoints as (pod, addresses, ready)."""
        slices = box.get("endpointslices", "-n", "training", "-l", f"kubernetes.io/service-name={etcd}")["items"]
        return [
            ((e.get("targetRef") or {}).get("name"), e.get("addresses"), (e.get("conditions") or {}).get("ready"))
            for sl in slices
            for e in sl.get("endpoints") or []
        ]

    def poll() -> None:
        pods = _train_pods(box)
        if "old" not in seen:
            if any(_phase(p) == "Running" for p in pods):
                old = next(p for p in etcd_pods() if _phase(p) == "Running")
                seen["old"], seen["train"] = old, next(p for p in pods if _phase(p) == "Running")
                box.kubectl("delete", "pod", old["metadata"]["name"], "-n", "training", "--wait=false")
                # the launcher loses its rendezvous and exits 69 (its agent stops the workers, which checkpoint)
                box.kubectl(
                    "annotate",
                    "pod",
                    seen["train"]["metadata"]["name"],
                    "-n",
                    "training",
                    f"{EXIT_CODE}=69",
                    "box.eks-training/container=worker",
                    f"{RUN_MS}=500ms",
                    "--overwrite",
                )
            return
        if "new" not in seen:
            new = [
                p
                for p in etcd_pods()
                if p["metadata"]["uid"] != seen["old"]["metadata"]["uid"]
                and _phase(p) == "Running"
                and p["status"].get("podIP")
            ]
            if new:
                seen["new"] = new[0]
        if "new" in seen and "followed" not in seen:
            if endpoints() == [(seen["new"]["metadata"]["name"], [seen["new"]["status"]["podIP"]], True)]:
                seen["followed"] = True
        again = [p for p in pods if p["metadata"]["uid"] != seen["train"]["metadata"]["uid"] and _phase(p) == "Running"]
        if again and "again" not in seen and "followed" in seen:  # the launcher's wait for etcd is over
            seen["again"] = again[0]
            _shorten(box, again[0])

    watch = _Polls(box, poll)
    try:
        with Registrar(box) as registrar, recorder, watch:
            rehearsal.run(binaries, timeout_s=patient(120))
        assert registrar.error is None and watch.error is None, (registrar.error, watch.error)
        job = box.get("job", "train", "-n", "training")
        deployment = box.get("deployment", etcd, "-n", "training")
        followed = endpoints()
    finally:
        rehearsal.stop_operator()
        box.down()
    text = report(rehearsal, recorder)
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] == "Complete", (name, text)
    assert deployment["status"].get("availableReplicas") == 1, deployment["status"]
    # the Service follows the new pod: its one ready endpoint is the new pod, at the new pod's address (seen so
    # before the replacement ran, and still so at the end)
    assert "followed" in seen and followed == [
        (seen["new"]["metadata"]["name"], [seen["new"]["status"]["podIP"]], True)
    ], (followed, text)
    assert seen["new"]["spec"]["nodeName"].startswith("system-"), seen["new"]["spec"]["nodeName"]
    # the training pod's 69 was not counted (the pod failure policy's Ignore), and it was replaced
    first = next(r for r in recorder.pods.values() if r.name == seen["train"]["metadata"]["name"])
    assert first.outcome == "Failed (exit 69 in worker)", text
    assert not job["status"].get("failed"), job["status"]
    assert job["status"].get("succeeded") == 1 and "again" in seen, text
