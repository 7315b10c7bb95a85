"""Every MPIJob's launcher waits for its workers in its own init container.

MPI Operator v0.8.0 starts a queued (suspended) MPIJob's launcher together with its workers, whatever its
``launcherCreationPolicy`` (https://github.com/kubeflow/mpi-operator/issues/615): the policy is read only when the
launcher Job is created, which happens while the MPIJob is suspended and has no workers. ``mpirun`` then finds no
sshd. The ``wait-for-workers`` init container (tests/real/test_mpi_sshd_real.py runs it against real sshd; the box
holds a launcher until its workers run) is what keeps the launcher back on a cluster.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.workloads.mpi import SSHD_PORT, WORKERS_WAIT_CONTAINER, mpi_worker_hosts, workers_wait_command
from tests.harness import Program, run_program, stack_names
from tests.variants import HELD_OUT, held_out_program, stress_program

VARIANT_CASES = [
    *[pytest.param(v, s, id=f"{s}-{v}") for s in stack_names() for v in ("shipped", "stress")],
    *[pytest.param("held-out", s, id=f"{s}-held-out") for s in HELD_OUT],
]


def launcher_wait_problems(program: Program) -> list[str]:
    """MPIJobs whose launcher would start ``mpirun`` before its workers' sshd listens: no ``wait-for-workers`` as the
    launcher's last init container, or one that waits for other hosts or another port than the workers'."""
    found = []
    for job in (r for r in program.registrations if r.type.endswith(":MPIJob")):
        spec = job.inputs["spec"]
        meta = job.inputs["metadata"]
        replicas = spec["mpiReplicaSpecs"]
        inits = replicas["Launcher"]["template"]["spec"].get("initContainers") or []
        if spec.get("launcherCreationPolicy") == "AtStartup":
            continue
        if not inits or inits[-1]["name"] != WORKERS_WAIT_CONTAINER:
            found.append(f"{meta['name']}: the launcher does not wait for its workers last")
            continue
        hosts = mpi_worker_hosts(meta["name"], meta["namespace"], int(replicas["Worker"]["replicas"]))
        if inits[-1]["command"] != workers_wait_command(hosts, SSHD_PORT):
            found.append(f"{meta['name']}: the launcher waits with {inits[-1]['command']}")
        worker_inits = replicas["Worker"]["template"]["spec"].get("initContainers") or []
        if any(c["name"] == WORKERS_WAIT_CONTAINER for c in worker_inits):
            found.append(f"{meta['name']}: a worker waits for the workers")
    return found


@pytest.mark.parametrize("variant, stack", VARIANT_CASES)
def test_every_mpi_launcher_waits_for_its_workers(variant: str, stack: str) -> None:
    """Every stack, its stress variant and the held-out stacks."""
    program = {"shipped": run_program, "stress": stress_program, "held-out": held_out_program}[variant](stack)
    assert launcher_wait_problems(program) == []


def _mpijob(program: Program) -> Any:
    return next(r for r in program.registrations if r.type.endswith(":MPIJob"))


def test_the_check_finds_a_launcher_without_the_wait_or_with_the_wrong_hosts() -> None:
    """Controls on the MPI preset: one worker fewer, another port, the wait taken out."""
    program = copy.deepcopy(run_program("mpi-horovod"))
    job = _mpijob(program)
    name = job.inputs["metadata"]["name"]
    launcher = job.inputs["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    wait = launcher["initContainers"][-1]
    assert launcher_wait_problems(program) == []
    full = list(wait["command"])
    for changed in (full[:-2], [("22" if a == str(SSHD_PORT) else a) for a in full]):
        wait["command"] = changed
        assert launcher_wait_problems(program) == [f"{name}: the launcher waits with {changed}"]
    launcher["initContainers"].pop()
    assert launcher_wait_problems(program) == [f"{name}: the launcher does not wait for its workers last"]
