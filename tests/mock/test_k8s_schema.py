"""Every Kubernetes object the program registers itself validates against the official schema
of the stack's Kubernetes version (kubernetes-validate, strict: unknown fields fail)."""

import copy
import json
import shlex
from typing import Any

import pytest

from components.catalog import DEFAULT_KUBERNETES_VERSION
from components.conventions import SHARED_MOUNT
from components.scheduling import system_node_selector
from stacks.box.manifests import is_patch
from stacks.bundle import TOOLBOX_IMAGE
from tests.harness import PROJECT, Program, resolve, run_program, stack_config, stack_names
from tests.kube_schema import ValidationError, validate
from tests.variants import HELD_OUT, held_out_program

STACKS = stack_names()


def manifests(p: Program) -> list[dict[str, Any]]:
    """The objects registered through the Kubernetes provider (Helm releases are checked by value)."""
    out = []
    for r in p.registrations:
        if not r.type.startswith("kubernetes:") or r.type.startswith(("kubernetes:helm.sh/", "kubernetes:yaml/")):
            continue
        if r.type.startswith("kubernetes:kubeflow.org/"):
            continue  # custom resources: checked against their CRD's types in tests/mock/test_workloads.py
        if r.type.startswith("kubernetes:kueue.x-k8s.io/"):
            # Kueue's: applied (strict) against Kueue's own CRDs by the cluster tier
            # (tests/cluster/test_box_apiserver.py).
            continue
        if is_patch(r.type):
            # part of an object: applied (strict) over the object it patches by the cluster tier
            # (tests/cluster/test_box_apiserver.py)
            continue
        doc = {k: v for k, v in r.inputs.items() if not k.startswith("__")}
        out.append(doc)
    return out


def k8s_version(stack: str) -> str:
    cluster = stack_config(stack).get(f"{PROJECT}:cluster") or {}
    return cluster.get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION) + ".0"


@pytest.mark.parametrize("stack", STACKS)
def test_registered_objects_match_the_official_schema(program_for, stack: str) -> None:
    p = program_for(stack, False)
    docs = manifests(p)
    backend = (stack_config(stack).get(f"{PROJECT}:storage") or {}).get("backend", "efs")
    volume = {"efs": "StorageClass", "fsx": "PersistentVolume"}[backend]
    assert {d["kind"] for d in docs} >= {"Namespace", volume, "PersistentVolumeClaim", "NetworkPolicy"}
    version = k8s_version(stack)
    for doc in docs:
        validate(doc, version)


@pytest.mark.parametrize("stack", STACKS)
def test_mpi_job_pod_templates_match_the_official_schema(program_for, stack: str) -> None:
    """An MPIJob's pod templates are sent as written (a custom resource): each must be a valid PodTemplate, or
    the API server prunes the fields it does not know."""
    p = program_for(stack, False)
    for mpi in p.of_type("kubernetes:kubeflow.org/v2beta1:MPIJob"):
        for role, replica in mpi.inputs["spec"]["mpiReplicaSpecs"].items():
            doc = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": role.lower()},
                "template": replica["template"],
            }
            validate(copy.deepcopy(doc), k8s_version(stack))


@pytest.mark.parametrize("stack", sorted(HELD_OUT))
def test_a_held_out_stacks_objects_match_the_official_schema(stack: str) -> None:
    """The same two checks over the held-out stacks (tests/variants.py): configurations no preset resembles."""
    p = held_out_program(stack)
    cluster = HELD_OUT[stack].get(f"{PROJECT}:cluster") or {}
    version = cluster.get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION) + ".0"
    docs = manifests(p)
    assert {d["kind"] for d in docs} >= {"Namespace", "PersistentVolumeClaim", "NetworkPolicy", "Job"}
    for doc in docs:
        validate(doc, version)
    for mpi in p.of_type("kubernetes:kubeflow.org/v2beta1:MPIJob"):
        for role, replica in mpi.inputs["spec"]["mpiReplicaSpecs"].items():
            template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": role.lower()}}
            validate(copy.deepcopy({**template, "template": replica["template"]}), version)


def test_the_schema_check_can_fail() -> None:
    """Control: a misspelt field in one of our own objects is rejected in strict mode."""
    p = run_program("dev")
    pvc = next(d for d in manifests(p) if d["kind"] == "PersistentVolumeClaim")
    bad = copy.deepcopy(pvc)
    bad["spec"]["accesModes"] = bad["spec"].pop("accessModes")
    with pytest.raises(ValidationError):
        validate(bad, DEFAULT_KUBERNETES_VERSION + ".0")


def copy_pod_of(command: str) -> dict[str, Any]:
    """The pod a job's ``copyCommand`` creates (the JSON it prints to ``kubectl create -f -``)."""
    words = shlex.split(command)
    return json.loads(words[words.index("printf") + 2])


@pytest.mark.parametrize("stack", STACKS)
def test_each_jobs_copy_pod_matches_the_official_schema_and_reads_the_shared_claim(program_for, stack: str) -> None:
    """``jobs.<job>.copyCommand``'s pod: a valid Pod of the stack's Kubernetes version, in the jobs' namespace, on a
    system node, with the stack's claim mounted read-only where the jobs mount it, the toolbox image, and a security
    context within Pod Security ``restricted`` (the namespace enforces ``baseline``)."""
    p = program_for(stack, False)
    jobs = resolve(p.outputs["jobs"])
    assert jobs, stack
    for name, job in jobs.items():
        command = resolve(job["copyCommand"])
        pod = copy_pod_of(command)
        validate(copy.deepcopy(pod), k8s_version(stack))
        spec = pod["spec"]
        assert pod["metadata"]["namespace"] == resolve(p.outputs["pvcNamespace"])
        assert spec["volumes"] == [
            {"name": "shared", "persistentVolumeClaim": {"claimName": resolve(p.outputs["pvcName"]), "readOnly": True}}
        ]
        (container,) = spec["containers"]
        assert container["volumeMounts"] == [{"name": "shared", "mountPath": SHARED_MOUNT, "readOnly": True}]
        assert container["image"] == resolve(p.outputs["imageUris"])[TOOLBOX_IMAGE]
        assert spec["nodeSelector"] == system_node_selector()
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["seccompProfile"]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        }
        # it copies the job's own folder to ./<job> once it is there (kubectl cp exits 0 on a missing folder), and
        # deletes the pod whatever the copy did
        pod_name, folder = pod["metadata"]["name"], resolve(job["outputDir"])
        assert (
            f" -- test -d {folder} && kubectl cp -n {pod['metadata']['namespace']} {pod_name}:{folder} ./{name};"
            in (command)
        ), command
        assert command.endswith(
            f'; kubectl delete -n {pod["metadata"]["namespace"]} pod/{pod_name} --wait=false '
            '--ignore-not-found; [ "$copied" -eq 0 ]'
        ), command
