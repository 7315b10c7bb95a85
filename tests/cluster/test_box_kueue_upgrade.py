"""Kueue upgraded from the release the stacks pinned before (``box/kueue-previous``) to the current one
(``box/kueue``), and moved back, with a workload admitted across the switch.

On a cluster, ``pulumi up`` with a new chart pin upgrades the Helm release: the chart's CRDs (in its templates, so
Helm updates them) and then the manager's Deployment, which replaces the manager's pod. The box plays it with the
real managers: dev's jobs run under the previous release; while the training pod runs, that manager stops, the
current release's CRDs are applied over the old ones, and the current manager starts on the same objects. The
training workload stays admitted (the same admission, never evicted) and finishes, and a job created after the switch
is admitted by the new manager (docs/how-to/update-project.md, "Kueue and the MPI Operator keep their objects").
Moving back (``git reset`` to the project's earlier version) is the same switch the other way
(docs/how-to/update-project.md, "Go back to the version you had")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stacks.box.build import MODULES, SUFFIXES
from stacks.box.kueue import Kueue
from stacks.box.kueue import crds as kueue_crds
from stacks.box.nodes import plan_nodes
from stacks.box.rehearse import steps_of
from stacks.box.session import Session
from stacks.stackfile import plan_stack
from tests.cluster.support import WhileTraining, _box, _doc, stamp
from tests.wait import patient

PREVIOUS = MODULES["kueue-previous"].version()
CURRENT = MODULES["kueue"].version()
#: The Job created once the current release runs.
AGAIN = "evaluate-again"


def _workloads(box) -> dict[str, dict[str, Any]]:
    """The training namespace's Workloads by their job's name."""
    out = {}
    for wl in box.get("workloads", "-n", "training")["items"]:
        owner = next(iter(wl["metadata"].get("ownerReferences") or []), {})
        out[owner.get("name", wl["metadata"]["name"])] = wl
    return out


def _condition(wl: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _stored_versions(box) -> dict[str, list[str]]:
    """Kueue's CRDs and the versions their objects are stored in (``status.storedVersions``)."""
    return {
        c["metadata"]["name"]: c["status"]["storedVersions"]
        for c in box.get("crd")["items"]
        if c["spec"]["group"] == "kueue.x-k8s.io"
    }


class _KueueUpgrade(WhileTraining):
    """Moves Kueue from the release of box folder ``old`` to that of ``new`` once the training pod runs: the old
    release's manager stops, the new release's CRDs are applied (Helm applies the chart's templates first), and its
    manager starts on the same objects."""

    def __init__(self, box, binary, old: str, new: str) -> None:
        super().__init__(box)
        self.binary = binary
        self.old, self.new = old, new
        self.before: dict[str, Any] = {}
        """The training Workload when the old release stopped."""
        self.stored: dict[str, list[str]] = {}
        """Each CRD's stored versions under the old release."""

    def change(self) -> str:
        old = self.rehearsal.operators.kueue
        self.before = _workloads(self.box)["train"]
        self.stored = _stored_versions(self.box)
        old.stop()
        self.box.apply(kueue_crds(self.new))
        new = Kueue(
            self.box,
            self.binary,
            old.configuration,
            log_dir=self.rehearsal.log_dir,
            feature_gates=old.feature_gates,
            folder=self.new,
        )
        new.start()
        self.rehearsal.operators.kueue = new
        return f"Kueue {MODULES[self.old].version()} -> {MODULES[self.new].version()}"


@pytest.mark.parametrize("old, new", [("kueue-previous", "kueue"), ("kueue", "kueue-previous")], ids=["up", "back"])
def test_kueue_moves_release_under_an_admitted_workload_and_admits_the_next(
    binaries, registrations_of, tmp_path, old: str, new: str
) -> None:
    """Up: from the release the stacks pinned before to the current one. Back: the other way."""
    assert PREVIOUS != CURRENT, "box/kueue-previous pins the current release: pin the release before it"
    before, after = MODULES[old].version(), MODULES[new].version()
    _config, plan = plan_stack("dev")
    session = Session(_box(binaries, tmp_path, "kueue", "kubernetes"))
    session.up()
    box = session.box
    upgrade = _KueueUpgrade(box, binaries["kueue" + SUFFIXES.get(new, "")], old, new)
    rehearsal = None
    try:
        session.nodes(plan_nodes(plan, "us-east-1"))
        steps = steps_of(registrations_of("dev"), kueue_module=old)  # its CRDs and its manager
        rehearsal = session.rehearse(plan, steps, region="us-east-1", run_ms={"train": 600_000})
        upgrade.rehearsal = rehearsal
        rehearsal.run(binaries, timeout_s=patient(300), stuck=upgrade)
        # a job created under the current release (the stack's own could all be admitted before the switch): the
        # evaluation's Job again, under another name, queued where the stack queues it
        again = copy.deepcopy(_doc(steps, "Job", "evaluate"))
        again["metadata"]["name"] = AGAIN
        box.apply([again])
        box.wait_for(
            lambda: _condition(_workloads(box).get(AGAIN, {}), "Admitted").get("status") == "True",
            timeout_s=patient(60),
            what=f"the Job {AGAIN} admitted by Kueue {after}",
        )
        workloads = _workloads(box)
        stored = _stored_versions(box)
        new_crds = {d["metadata"]["name"] for d in kueue_crds(new)}
        log = rehearsal.operators.kueue.log()
    finally:
        if rehearsal is not None:
            rehearsal.stop_operator()
        box.down()
    assert upgrade.at is not None, rehearsal.timeline()
    # the old release's manager ran first, the new one after it (each logs its version as it starts)
    assert log.index(before) < log.rindex(after), log[-3000:]
    # the training Workload was admitted by the old release and kept its admission across the switch
    assert _condition(upgrade.before, "Admitted").get("status") == "True", upgrade.before.get("status")
    train = workloads["train"]
    assert train["metadata"]["uid"] == upgrade.before["metadata"]["uid"]
    assert train["status"]["admission"] == upgrade.before["status"]["admission"], (train["status"], upgrade.before)
    assert _condition(train, "Evicted").get("status") != "True", train["status"]
    assert _condition(train, "Finished").get("status") == "True", train["status"]
    # the new release admits a job created after the switch
    admitted = _condition(workloads[AGAIN], "Admitted")
    assert stamp(admitted["lastTransitionTime"]) > upgrade.at, workloads[AGAIN]
    for name, rec in rehearsal.jobs.items():
        assert rec["outcome"] == "Complete", (name, rehearsal.timeline())
    # every CRD of the new release is served, and the objects the old release stored are kept in the same versions
    # (no storage migration is needed: docs/explanation/admission.md's table)
    assert new_crds <= set(stored), sorted(new_crds - set(stored))
    assert {n: v for n, v in stored.items() if n in upgrade.stored} == upgrade.stored, (stored, upgrade.stored)
    print(f"\nKueue {before} -> {after} in {upgrade.seconds:.1f} s\n{rehearsal.timeline()}")
