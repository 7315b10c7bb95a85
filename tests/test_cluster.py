"""The ``cluster`` tier: every preset's Kubernetes objects on the cluster in a box (:mod:`stacks.box`).

A real kube-apiserver checks what no schema can: its validation beyond the OpenAPI schema (e.g. a Job's
``podFailurePolicy`` exit codes must be in ascending order, ``pkg/apis/batch/validation``), CRD validation of custom
resources (MPIJobs against the MPI Operator's CRD), admission, strict field validation. Every object is applied as
``pulumi up`` would (server-side apply, Namespaces and CRDs first, then the stack's order), at the stacks' default
Kubernetes minor and at the oldest minor the config accepts (validation changes between minors).

The binaries are built from the pinned modules in ``box/`` (or reused from the cache); a machine that cannot build
them fails this tier, it does not skip it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from components.catalog import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from stacks.box import build as box_build
from stacks.box.apply import apply_stack
from stacks.box.cluster import Box
from stacks.box.manifests import registered_objects
from tests.harness import run_program, stack_names

pytestmark = pytest.mark.cluster

STACKS = stack_names()
MINORS = {"kubernetes": DEFAULT_KUBERNETES_VERSION, "kubernetes-oldest": SUPPORTED_KUBERNETES_VERSIONS[0]}


@pytest.fixture(scope="session")
def binaries() -> dict[str, Path]:
    return box_build.build()


@pytest.fixture(scope="session")
def objects_of():
    cache: dict[str, list[dict]] = {}

    def get(stack: str) -> list[dict]:
        if stack not in cache:
            cache[stack] = registered_objects(run_program(stack).registrations)
        return copy.deepcopy(cache[stack])

    return get


def _box(binaries: dict[str, Path], tmp_path: Path, name: str, control_plane: str) -> Box:
    return Box(name=name, workdir=tmp_path, binaries=binaries, control_plane=control_plane)


def test_the_box_runs_the_pinned_minors(binaries, tmp_path) -> None:
    """The servers report the versions the modules pin (a server without the ldflags reports v0.0.0-master, which
    clients that parse it refuse), and each module sits at the minor the config means."""
    box_build.check_pins()
    for folder, minor in MINORS.items():
        with _box(binaries, tmp_path, f"v-{minor.replace('.', '-')}", folder) as box:
            server = json.loads(box.kubectl("version", "-o", "json").stdout)["serverVersion"]
            assert server["gitVersion"] == box_build.MODULES[folder].version()
            assert f"{server['major']}.{server['minor']}" == minor


@pytest.mark.parametrize("control_plane", list(MINORS))
@pytest.mark.parametrize("stack", STACKS)
def test_every_object_is_accepted_by_the_apiserver(binaries, objects_of, tmp_path, stack: str, control_plane: str) -> None:
    docs = objects_of(stack)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "Job"} <= kinds or {"Namespace", "MPIJob"} <= kinds
    with _box(binaries, tmp_path, "apply", control_plane) as box:
        refused = apply_stack(box, docs)
        assert not refused, f"{stack} at Kubernetes {MINORS[control_plane]}: the apiserver refused:\n" + "\n".join(
            str(r) for r in refused)
        # Every object is there, as applied.
        for doc in docs:
            meta = doc["metadata"]
            args = [doc["kind"].lower() + "." + doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"]
                    else doc["kind"].lower(), meta["name"]]
            if meta.get("namespace"):
                args += ["-n", meta["namespace"]]
            assert box.get(*args)["metadata"]["name"] == meta["name"]


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
