"""Every object every stack registers, accepted by a real kube-apiserver at each pinned minor."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest
import yaml

from components.catalog import MANIFESTS
from components.scheduling import system_node_selector
from stacks.box import build as box_build
from stacks.box.apply import apply_stack
from stacks.box.cluster import BoxError, establish_crds
from stacks.box.manifests import release_manifest
from stacks.box.operators import Operators
from stacks.box.processes import process_alive
from stacks.yaml_text import dump_yaml_documents
from tests.cluster.support import MINORS, STACKS, _box, _ref, _remove, _self_contained
from tests.quantities import quantities
from tests.wait import patient


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
        # Every object is there, as applied, its quantities as the apiserver writes them back: the canonical form
        # (tests/mock/test_quantities.py says why).
        for doc in docs:
            live = box.get(*_ref(doc))
            assert live["metadata"]["name"] == doc["metadata"]["name"]
            sent = dict(quantities(doc))
            back = {p: v for p, v in quantities(live) if p in sent}
            assert back == sent, (doc["kind"], doc["metadata"]["name"])
        # Every Deployment, as the apiserver merged it (a release manifest's with its patch), runs on system nodes.
        for doc in docs:
            if doc["kind"] == "Deployment":
                spec = box.get(*_ref(doc))["spec"]["template"]["spec"]
                assert spec.get("nodeSelector") == system_node_selector(), (doc["metadata"]["name"], spec)
        held.update(
            {
                d["metadata"]["name"]: json.dumps(d, sort_keys=True)
                for d in docs
                if d["kind"] == "CustomResourceDefinition"
            }
        )
    finally:
        _remove(box, docs)


#: The refusal of the PersistentVolumeClaimResize admission plugin (kubernetes
#: plugin/pkg/admission/storage/persistentvolume/resize/admission.go).
RESIZE_REFUSED = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must"


@pytest.mark.parametrize("stack", ["dev", "p5"])
def test_a_bound_claim_of_the_stack_cannot_grow_and_a_static_volume_can(oldest_box, objects_of, stack: str) -> None:
    """What tests/mock/test_claim_sizes.py holds the program to, executed by the apiserver: a bound claim of the
    stack's EFS StorageClass, and one bound to FSx's static volume, cannot grow (so `pulumi up` must never send it a
    new size); the static volume itself can (FSx's grown capacity). Bound as the PV controller would mark them. Nor
    may the EFS StorageClass's reclaim policy change."""
    docs = [
        d
        for d in objects_of(stack)
        if d["kind"] in ("PersistentVolume", "StorageClass", "PersistentVolumeClaim")
        or (d["kind"] == "Namespace" and d["metadata"]["name"] == "training")
    ]
    claims = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    assert claims and all(c["metadata"]["namespace"] == "training" for c in claims), claims
    box = oldest_box
    try:
        assert not apply_stack(box, docs)
        for claim in claims:
            ref = _ref(claim)
            size = claim["spec"]["resources"]["requests"]["storage"]
            bound = {"status": {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": size}}}
            box.kubectl("patch", *ref, "--subresource=status", "--type=merge", "-p", json.dumps(bound))
            grow = {"spec": {"resources": {"requests": {"storage": "4Pi"}}}}
            refused = box.kubectl("patch", *ref, "--type=merge", "-p", json.dumps(grow), check=False)
            assert refused.returncode != 0 and RESIZE_REFUSED in refused.stderr, (ref, refused.stderr)
        for volume in (d for d in docs if d["kind"] == "PersistentVolume"):
            grown = {"spec": {"capacity": {"storage": "4Pi"}}}
            box.kubectl("patch", *_ref(volume), "--type=merge", "-p", json.dumps(grown))
            assert box.get(*_ref(volume))["spec"]["capacity"]["storage"] == "4Pi"
        assert (stack == "p5") == any(d["kind"] == "PersistentVolume" for d in docs)
        # nor may a StorageClass's reclaim policy change (tests/update_rules.py): the stack's EFS class keeps one
        for storage_class in (d for d in docs if d["kind"] == "StorageClass"):
            other = "Retain" if storage_class.get("reclaimPolicy") == "Delete" else "Delete"
            patch = json.dumps({"reclaimPolicy": other})
            refused = box.kubectl("patch", *_ref(storage_class), "--type=merge", "-p", patch, check=False)
            assert refused.returncode != 0 and "reclaimPolicy" in refused.stderr, refused.stderr
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
    """Control: a Job whose podFailurePolicy exit codes are out of order is refused, naming the
    field; so is an MPIJob that breaks its CRD's schema."""
    docs = objects_of("dev")
    job = next(d for d in docs if d["kind"] == "Job" and (d["spec"].get("podFailurePolicy") or {}).get("rules"))
    rule = next(r for r in job["spec"]["podFailurePolicy"]["rules"] if r.get("onExitCodes"))
    rule["onExitCodes"]["values"] = [143, 69]
    with _box(binaries, tmp_path, "control", "kubernetes") as box:
        refused = apply_stack(box, docs)
    assert [r.name for r in refused] == [f"{job['metadata']['namespace']}/{job['metadata']['name']}"]
    assert "must be ordered" in refused[0].message


def test_two_boxes_created_at_once_are_two_clusters(binaries, tmp_path) -> None:
    """Two boxes brought up at the same moment (two test workers, two rehearsals on one machine): kwokctl picks its
    components' ports by counting down from 32767 in each process, so without the machine-wide lock around the
    creation both got the same ports and one box's components joined the other's (nodes never Ready). Each must be
    its own cluster: its own apiserver address, its own objects. Each runs its own MPI Operator at once: the
    release's command serves a health check on port 8080 of every address and exits when it is taken, so one box's
    operator had to wait for the other's to end (box/mpi-operator/main.go runs the controller without it)."""
    boxes = [_box(binaries, tmp_path, f"twin-{i}", "kubernetes") for i in range(2)]
    mpi_crd = next(
        d for d in release_manifest(MANIFESTS["mpi-operator"].url) if d["kind"] == "CustomResourceDefinition"
    )
    with ExitStack() as stack, ThreadPoolExecutor(2) as pool:
        for box in pool.map(stack.enter_context, boxes):
            box.kubectl("create", "namespace", box.name)
        servers = {yaml.safe_load(b.kubeconfig.read_text())["clusters"][0]["cluster"]["server"] for b in boxes}
        assert len(servers) == 2, servers
        for box in boxes:
            names = set(box.kubectl("get", "namespaces", "-o", "name").stdout.split())
            assert f"namespace/{box.name}" in names and len({f"namespace/{b.name}" for b in boxes} & names) == 1
            ready = box.kubectl("get", "--raw", "/readyz").stdout.strip()
            assert ready == "ok", ready
        operators = []
        for box in boxes:
            box.kubectl("apply", "--server-side", "-f", "-", input=dump_yaml_documents([mpi_crd]))
            establish_crds(box, [mpi_crd["metadata"]["name"]], timeout_s=patient(60))
            operators.append(Operators(box, box.home, lambda _note: None, lambda _s: None))
            stack.callback(operators[-1].stop_operator)
            operators[-1].start_operator(binaries["mpi-operator"])
        logs = [box.home / "mpi-operator.log" for box in boxes]
        # each controller's informers synced against its own box, and both still run
        boxes[0].wait_for(
            lambda: all("Started workers" in log.read_text(errors="replace") for log in logs),
            timeout_s=patient(60),
            what="both MPI Operators' workers started",
        )
        assert [o.operator.poll() for o in operators if o.operator] == [None, None], [
            log.read_text(errors="replace")[-1000:] for log in logs
        ]


def test_the_control_plane_outlives_a_stalled_machine(binaries, tmp_path) -> None:
    """The apiserver held 20 s (SIGSTOP), past the controller manager's and the scheduler's leader lease renew
    deadline (10 s): both keep running and the controller still makes pods. With leader election on, they exit and
    nothing in the box restarts them. A pod made before the stall shows the controllers at work first: a controller
    manager still starting (its service account controller not yet done with `default`, whose absence the pods'
    admission refuses, each refusal doubling the ReplicaSet's retry delay) is not what the stall is tested for."""
    with _box(binaries, tmp_path, "stalled", "kubernetes") as box:
        pids_dir = box.home / "kwok" / "clusters" / box.name / "pids"
        pids = {c: int((pids_dir / f"{c}.pid").read_text()) for c in ("kube-controller-manager", "kube-scheduler")}
        apiserver = int((pids_dir / "kube-apiserver.pid").read_text())
        _made_a_pod(box, "before-stall")
        os.kill(apiserver, signal.SIGSTOP)
        try:
            time.sleep(20)
        finally:
            os.kill(apiserver, signal.SIGCONT)
        time.sleep(5)  # past a renew attempt after the stall: an elector would have given up by now
        _made_a_pod(box, "after-stall")
        alive = {c: process_alive(pid) for c, pid in pids.items()}
        assert all(alive.values()), alive


def _made_a_pod(box, name: str) -> None:
    """A Deployment ``name`` in ``default`` gets a pod from the controller manager; else the failure says what the box
    shows: its components alive or not, the namespace's events, the controller manager's log's end."""
    box.kubectl("create", "deployment", name, "--image=registry.k8s.io/pause:3.10", "-n", "default")
    deadline = time.monotonic() + patient(60)
    while not _pods(box, name):
        if time.monotonic() > deadline:
            events = box.kubectl("get", "events", "-n", "default", check=False).stdout
            gone = box.exited()
            log = box.home / "kwok" / "clusters" / box.name / "logs" / "kube-controller-manager.log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
            raise AssertionError(
                f"no pod of {name}; components gone: {gone or 'none'}\nevents:\n{events}\ncontroller manager:\n{tail}"
            )
        time.sleep(0.5)


def _pods(box, name: str) -> list:
    """The pods of Deployment ``name``; none while the apiserver answers with an error (it is waited for above)."""
    try:
        return box.get("pods", "-n", "default", "-l", f"app={name}")["items"]
    except (BoxError, OSError):
        return []


def test_a_control_plane_component_that_exits_is_noticed(binaries, tmp_path, monkeypatch) -> None:
    """The controller manager exits when the apiserver is not healthy within 10 s of its start (a busy machine): the
    box is then created once more, and a component gone later is named with its log's end (the rehearsal stops on
    it instead of waiting for objects no controller will move)."""
    from stacks.box.cluster import Box

    box = _box(binaries, tmp_path, "exits", "kubernetes")
    created = []
    create = Box._create

    def create_then_lose_the_controller_manager(self, timeout_s: float) -> None:
        create(self, timeout_s)
        created.append(1)
        if len(created) == 1:
            kill_controller_manager(self)

    def kill_controller_manager(b) -> None:
        pid = int((b.home / "kwok" / "clusters" / b.name / "pids" / "kube-controller-manager.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        while process_alive(pid):
            time.sleep(0.05)

    monkeypatch.setattr(Box, "_create", create_then_lose_the_controller_manager)
    try:
        box.up()
        assert len(created) == 2 and box.exited() == []
        kill_controller_manager(box)
        assert box.exited() == ["kube-controller-manager"]
        assert box.exit_report(box.exited()).startswith("the box's kube-controller-manager exited; ")
    finally:
        box.down()
