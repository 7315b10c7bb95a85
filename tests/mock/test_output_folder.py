"""Every job's program finds its output folder (``OUTPUT_DIR``) on the cluster, as in ``python -m stacks local``,
which creates it. On the cluster the toolbox's launcher creates it, or an init container does before the program
starts: Kubernetes runs a pod's init containers in order, each to completion, before its app containers
(https://kubernetes.io/docs/concepts/workloads/pods/init-containers/). Nothing else there creates it, so a program that
writes ``$OUTPUT_DIR/result.json`` at once would fail with ``FileNotFoundError``."""

from __future__ import annotations

import copy
from typing import Any, Iterator

from components.conventions import SHARED_MOUNT
from components.workloads.job_objects import BATCH_JOB, MPI_JOB
from components.workloads.pods import OUTPUT_FOLDER_CONTAINER
from components.workloads.pytorch import LAUNCHER
from tests.harness import PROJECT, Program, run_program, stack_config, stack_names
from tests.variants import HELD_OUT, held_out_program


def programs_pods(p: Program) -> Iterator[tuple[str, dict[str, Any]]]:
    """(object name, pod spec) of each pod that runs a job's program: a Job's pods, an MPIJob's launcher (``mpirun``
    starts the ranks on the workers from there). Pods without ``OUTPUT_DIR`` (staging, the health check) are no
    job's."""
    for r in p.registrations:
        if r.type == BATCH_JOB.type_token:
            spec = r.inputs["spec"]["template"]["spec"]
        elif r.type == MPI_JOB.type_token:
            spec = r.inputs["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        else:
            continue
        env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env") or []}
        if "OUTPUT_DIR" in env:
            yield r.name, spec


def how_made(spec: dict[str, Any]) -> str:
    """How the pod's output folder exists before its program starts: ``launcher``, ``init container``, or the
    problem."""
    main = spec["containers"][0]
    out = next(e["value"] for e in main["env"] if e["name"] == "OUTPUT_DIR")
    argv = [*(main.get("command") or []), *(main.get("args") or [])]
    if LAUNCHER in argv and "--output-dir" in argv and argv[argv.index("--output-dir") + 1] == out:
        return "launcher"
    for init in spec.get("initContainers") or []:
        if init["name"] != OUTPUT_FOLDER_CONTAINER:
            continue
        if [*init["command"], *(init.get("args") or [])] != ["mkdir", "-p", "--", out]:
            return f"its {OUTPUT_FOLDER_CONTAINER} init container does not create {out}: {init['command']}"
        mounts = {m["mountPath"] for m in init.get("volumeMounts") or [] if m["name"] == "shared"}
        if SHARED_MOUNT not in mounts or not out.startswith(SHARED_MOUNT + "/"):
            return f"{out} is not on the shared volume its {OUTPUT_FOLDER_CONTAINER} init container mounts: {mounts}"
        return "init container"
    return f"nothing creates {out} before {main['name']} starts"


def own_image_config() -> dict[str, Any]:
    """``dev`` with its training job on an image of the user's own: torchrun starts without the toolbox's launcher."""
    config = copy.deepcopy(stack_config("dev"))
    digest = "sha256:" + "0" * 64
    config[f"{PROJECT}:images"] = {"mine": {"prebuilt": f"123456789012.dkr.ecr.us-east-1.amazonaws.com/mine@{digest}"}}
    config[f"{PROJECT}:jobs"]["train"]["image"] = "mine"
    return config


def test_every_jobs_program_finds_its_output_folder() -> None:
    made: dict[str, set[str]] = {}
    bad = []
    programs = {s: run_program(s) for s in stack_names()}
    programs |= {f"held-out {n}": held_out_program(n) for n in HELD_OUT}
    programs["dev, train on an image of its own"] = run_program("dev", config=own_image_config())
    for where, p in programs.items():
        for name, spec in programs_pods(p):
            how = how_made(spec)
            if how in ("launcher", "init container"):
                made.setdefault(how, set()).add(f"{where}: {name}")
            else:
                bad.append(f"{where}: {name}: {how}")
    assert not bad, "\n".join(bad)
    # both ways are exercised: the launcher (pytorch on the toolbox image), the init container (every other kind, and
    # pytorch on an image of one's own)
    assert set(made) == {"launcher", "init container"}, made
    assert any(n.startswith("dev, train on an image of its own: ") and "train-job" in n for n in made["init container"])
    assert any("mpijob" in n for n in made["init container"]), made["init container"]
