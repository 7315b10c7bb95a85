"""Every object every stack registers, accepted by a real kube-apiserver at each pinned minor."""

from __future__ import annotations

import json

import pytest

from stacks.box import build as box_build
from stacks.box.apply import apply_stack
from tests.cluster.support import MINORS, STACKS, _box, _ref, _remove, _self_contained


def test_the_box_runs_the_pinned_minors(binaries, tmp_path) -> None:
    """The servers report the versions the modules pin (a server without the ldflags reports v0.0.0-master, which
    clients that parse it refuse), and each module sits at the minor the config means."""
    box_build.check_pins()
    for folder, minor in MINORS.items():
        with _box(binaries, tmp_path, f"v-{minor.replace('.', '-')}", folder) as box:
            server = json.loads(box.kubectl("version", "-o", "json").stdout)["serverVersion"]
            assert server["gitVersion"] == box_build.MODULES[folder].version()
            assert f"{server['major']}.{server['minor']}" == minor


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_is_accepted_by_the_apiserver(oldest_box, objects_of, stack: str) -> None:
    """At the oldest minor (the apiserver alone: nothing runs). At the default minor, every object is applied by the
    rehearsal (test_every_job_runs_through_in_order) with the same strict server-side apply."""
    docs = objects_of(stack)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "Job"} <= kinds or {"Namespace", "MPIJob"} <= kinds
    box = oldest_box
    assert not _self_contained(docs, box.built_in_groups), _self_contained(docs, box.built_in_groups)
    # A CRD an earlier preset applied with the same content (the same chart's) is not applied again: it was accepted
    # then, and re-applying 1.8 MB of Kueue's CRDs cost the apiserver seconds per preset.
    held = box.__dict__.setdefault("crds", {})
    todo = [
        d
        for d in docs
        if d["kind"] != "CustomResourceDefinition" or held.get(d["metadata"]["name"]) != json.dumps(d, sort_keys=True)
    ]
    try:
        refused = apply_stack(box, todo)
        assert not refused, (
            f"{stack} at Kubernetes {MINORS['kubernetes-oldest']}: the apiserver refused:\n"
            + "\n".join(str(r) for r in refused)
        )
        # Every object is there, as applied.
        for doc in docs:
            assert box.get(*_ref(doc))["metadata"]["name"] == doc["metadata"]["name"]
        held.update(
            {
                d["metadata"]["name"]: json.dumps(d, sort_keys=True)
                for d in docs
                if d["kind"] == "CustomResourceDefinition"
            }
        )
    finally:
        _remove(box, docs)


def test_a_shared_box_refuses_what_a_fresh_one_would() -> None:
    """Control of the shared box's checks: an object in a Namespace the stack does not create, and a custom resource
    whose CRD the stack does not install, are reported."""
    docs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "training"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {},
        },
    ]
    assert _self_contained(docs, {"", "apps", "batch", "apiextensions.k8s.io"}) == [
        "ServiceAccount training/a: no Namespace training",
        "LocalQueue q: no CustomResourceDefinition for kueue.x-k8s.io",
    ]
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "training"}})
    docs.append(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "localqueues.kueue.x-k8s.io"},
            "spec": {"group": "kueue.x-k8s.io", "names": {"kind": "LocalQueue"}},
        }
    )
    assert _self_contained(docs, {"", "apps", "batch", "apiextensions.k8s.io"}) == []


def test_the_apiserver_check_can_fail(binaries, objects_of, tmp_path) -> None:
    """Control: a Job whose podFailurePolicy exit codes are out of order (the bug of issue 25) is refused, naming the
    field; so is an MPIJob that breaks its CRD's schema."""
    docs = objects_of("dev")
    job = next(d for d in docs if d["kind"] == "Job" and (d["spec"].get("podFailurePolicy") or {}).get("rules"))
    rule = next(r for r in job["spec"]["podFailurePolicy"]["rules"] if r.get("onExitCodes"))
    rule["onExitCodes"]["values"] = [143, 69]
    with _box(binaries, tmp_path, "control", "kubernetes") as box:
        refused = apply_stack(box, docs)
    assert [r.name for r in refused] == [f"{job['metadata']['namespace']}/{job['metadata']['name']}"]
    assert "must be ordered" in refused[0].message
