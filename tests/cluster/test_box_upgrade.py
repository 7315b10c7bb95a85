"""A Kubernetes minor upgrade of the control plane with a job running across it, on the same etcd data.

EKS upgrades a cluster's control plane in place: the API server, controller manager and scheduler of the next minor
take over the stored objects (https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html). The box plays it
with real binaries: the dev preset runs on a control plane of the minor before the stacks' default
(``box/kubernetes-previous``), and while its training job's pod runs, the box's control plane is replaced by the
default minor's (:meth:`stacks.box.cluster.Box.upgrade`). What was created under the old minor is served and updated
(server-side apply, strict field validation) by the new one, and the job completes under it, then the job that waits
for it."""

from __future__ import annotations

import json
from typing import Optional

from components.catalog import DEFAULT_KUBERNETES_VERSION
from stacks.box.build import PINNED_MINORS
from stacks.box.nodes import initial_size, plan_nodes
from stacks.box.rehearse import steps_of
from stacks.box.session import Session
from stacks.stackfile import plan_stack
from tests.cluster.support import WhileTraining, _box, _phase, _train_pods, stamp
from tests.wait import patient

PREVIOUS = PINNED_MINORS["kubernetes-previous"][1]


def _minor(box) -> str:
    version = box.api.request("GET", "/version")[1]
    return f"{version['major']}.{version['minor']}"


class _Upgrade(WhileTraining):
    """Upgrades the control plane once the training pod runs."""

    def __init__(self, box) -> None:
        super().__init__(box)
        self.before: Optional[str] = None
        self.after: Optional[str] = None
        self.pids: dict[str, tuple[str, str]] = {}
        """Component -> its pid before and after the upgrade."""

    def _pids(self) -> dict[str, str]:
        folder = self.box.home / "kwok" / "clusters" / self.box.name / "pids"
        return {p.stem: p.read_text().strip() for p in folder.glob("*.pid")}

    def change(self) -> str:
        self.before = _minor(self.box)
        before = self._pids()
        self.box.upgrade("kubernetes")
        self.after = _minor(self.box)
        self.pids = {name: (pid, self._pids()[name]) for name, pid in before.items()}
        return f"control plane {self.before} -> {self.after}"


def test_the_control_plane_moves_one_minor_under_a_running_job_and_the_stack_completes(
    binaries, registrations_of, tmp_path
) -> None:
    _config, plan = plan_stack("dev")
    session = Session(_box(binaries, tmp_path, "upgrade", "kubernetes-previous"))
    session.up()
    box = session.box
    upgrade = _Upgrade(box)
    rehearsal = None
    try:
        session.nodes(plan_nodes(plan, "us-east-1"))
        steps = steps_of(registrations_of("dev"))
        rehearsal = session.rehearse(plan, steps, region="us-east-1", run_ms={"train": 600_000})
        upgrade.rehearsal = rehearsal
        assert _minor(box) == PREVIOUS
        rehearsal.run(binaries, timeout_s=patient(300), stuck=upgrade)
        # what the old minor stored, the new one serves, and takes as an update: every object applied again (server
        # side, kubectl's strict field validation; a dry run, so the finished jobs are left as they are)
        docs = [d for s in rehearsal.steps for d in s.docs]
        reapplied = box.apply(docs, check=False, dry_run=True)
        job = box.get("job", "train", "-n", "training")
        pods = _train_pods(box)
        nodes = box.get("nodes")["items"]
    finally:
        if rehearsal is not None:
            rehearsal.stop_operator()
        box.down()
    assert (upgrade.before, upgrade.after) == (PREVIOUS, DEFAULT_KUBERNETES_VERSION), (upgrade.before, upgrade.after)
    assert reapplied.returncode == 0, reapplied.stderr[-3000:]
    # the training Job was created under the old minor, its pod ran across the switch, and it completed under the new
    assert upgrade.at is not None and upgrade.pod is not None
    assert stamp(job["metadata"]["creationTimestamp"]) < upgrade.at < stamp(job["status"]["completionTime"]) + 1, (
        json.dumps(job["status"]),
        upgrade.at,
    )
    assert job["status"].get("succeeded") == 1 and not job["status"].get("failed"), job["status"]
    # the same pod: it was not replaced, its node kept running it
    assert [p["metadata"]["uid"] for p in pods] == [upgrade.pod["metadata"]["uid"]], pods
    assert _phase(pods[0]) == "Succeeded" and pods[0]["spec"]["nodeName"] == upgrade.pod["spec"]["nodeName"]
    # the control plane's processes were replaced; etcd (the same data) and the nodes' kwok kept running
    changed = {name for name, (old, new) in upgrade.pids.items() if old != new}
    assert changed == {"kube-apiserver", "kube-controller-manager", "kube-scheduler"}, upgrade.pids
    assert {"etcd", "kwok-controller"} <= set(upgrade.pids), upgrade.pids
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] == "Complete", (name, rehearsal.timeline())
    assert "evaluate" in rehearsal.jobs  # the job that waits for training ran under the new minor
    # the rehearsal's record of pods went on through the new apiserver (its watch opened again)
    recorded = {(p.get("metadata", {}).get("labels") or {}).get("job-name") for p in rehearsal.pods.values()}
    assert {"train", "evaluate"} <= recorded, sorted(map(str, recorded))
    assert len(nodes) == sum(initial_size(plan, g) for g in plan.all_groups), [n["metadata"]["name"] for n in nodes]
    print(
        f"\ncontrol plane {PREVIOUS} -> {DEFAULT_KUBERNETES_VERSION} in {upgrade.seconds:.1f} s\n{rehearsal.timeline()}"
    )
