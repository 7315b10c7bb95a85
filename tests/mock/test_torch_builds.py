"""Every pod of every stack that runs an image installing torch runs a build with kernels for its node's GPU: read
from what the program registers (the pod's image, the CodeBuild project that builds it and the build arguments it
passes, the node group its pods select), checked with the CUDA compatibility rules (components/catalog/gpus.py)."""

from typing import Any, Iterator

import pytest

from components.catalog import INSTANCE_TYPES
from components.catalog.gpus import CudaTarget, compute_capability, runs_on
from components.catalog.torch import TORCH_VERSION
from components.scheduling import NODE_ROLE_LABEL
from components.workloads.pods import OUTPUT_FOLDER_CONTAINER
from tests.harness import JOB_OBJECT_TYPES, PROJECT, Program, run_program, stack_config, stack_names


def _templates(r: Any) -> Iterator[dict[str, Any]]:
    spec = r.inputs["spec"]
    if "template" in spec:
        yield spec["template"]
    for replica in (spec.get("mpiReplicaSpecs") or {}).values():
        yield replica["template"]


def _builds(p: Program) -> dict[str, dict[str, str]]:
    """Image URI -> the build arguments its CodeBuild project passes (empty without torch arguments)."""
    out: dict[str, dict[str, str]] = {}
    for image in p.of_type("eks-training:index:TrainingImage"):
        build = next(r for r in p.descendants(image) if r.type == "pulumi-python:dynamic/eks-training:ImageBuild")
        project = next(r for r in p.descendants(image) if r.type == "aws:codebuild/project:Project")
        env = {v["name"]: v["value"] for v in project.inputs["environment"]["environmentVariables"]}
        names = env.get("DOCKER_BUILD_ARGS", "").split()
        out[build.outputs["image_uri"]] = {n: env[n] for n in names}
    return out


def _targets(flags: str) -> list[CudaTarget]:
    return [CudaTarget("sm", (int(f[3:-1]), int(f[-1]))) for f in flags.split()]


def _gpus(stack: str, role: str) -> list[tuple[str, tuple[int, int]]]:
    cfg = stack_config(stack)
    if role == "system":
        return []
    group = (cfg.get(f"{PROJECT}:nodeGroups") or {})[role]
    out = []
    for t in group["instanceTypes"]:
        facts = INSTANCE_TYPES.get(t)
        if facts is not None and facts.is_gpu and (cc := compute_capability(facts.gpu_model)) is not None:
            out.append((t, cc))
    return out


@pytest.mark.parametrize("stack", stack_names())
def test_every_pod_runs_a_torch_build_with_kernels_for_its_gpus(stack: str) -> None:
    p = run_program(stack)
    builds = _builds(p)
    checked = 0
    for r in p.registrations:
        if r.type not in JOB_OBJECT_TYPES:
            continue
        for template in _templates(r):
            pod = template["spec"]
            role = (pod.get("nodeSelector") or {}).get(NODE_ROLE_LABEL)
            if role is None:
                continue
            gpus = _gpus(stack, role)
            for c in pod.get("initContainers", []) + pod["containers"]:
                args = builds.get(c["image"])
                if not args or not gpus:
                    continue
                assert args["TORCH_VERSION"] == TORCH_VERSION
                for t, cc in gpus:
                    assert runs_on(_targets(args["TORCH_CUDA_ARCHS"]), cc), (stack, r.name, c["name"], t, args)
                checked += 1
    gpu_stacks = {"p3-2xlarge", "p3-16xlarge", "p6-b200", "g5", "p5"}
    if stack in gpu_stacks:
        assert checked, f"{stack}: no GPU pod runs the bundled image"


def test_a_v100_stack_builds_the_bundled_image_twice_and_each_pod_gets_its_own() -> None:
    """p3 (V100): the training job, its health check and its helpers get the CUDA 12.6 build; the evaluation, staging
    and TensorBoard on the system nodes get PyPI's, which the tests run."""
    p = run_program("p3-2xlarge")
    builds = _builds(p)
    by_build = {args["TORCH_CUDA_VERSION"]: uri for uri, args in builds.items() if args}
    assert set(by_build) == {"13.0", "12.6"}
    for r in p.registrations:
        if r.type not in JOB_OBJECT_TYPES:
            continue
        for template in _templates(r):
            pod = template["spec"]
            role = (pod.get("nodeSelector") or {}).get(NODE_ROLE_LABEL)
            expected = by_build["12.6"] if role == "gpu" else by_build["13.0"]
            for c in pod.get("initContainers", []) + pod["containers"]:
                if c["name"] == OUTPUT_FOLDER_CONTAINER:  # the catalog's busybox, no torch
                    continue
                assert c["image"] == expected, (r.name, c["name"], role)
