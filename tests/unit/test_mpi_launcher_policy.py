"""The MPIJob component's launcher and its workers (:mod:`components.workloads.mpi`): a launcher created at startup is
refused for a job with code; otherwise the launcher waits for its workers in an init container."""

from typing import Any

import pytest

from components.workloads.mpi import (
    SSHD_PORT,
    WORKERS_WAIT_CONTAINER,
    WORKERS_WAIT_SCRIPT,
    _shape,
    _workers_wait,
)


def _args(policy: str, **job: Any) -> Any:
    """The settings ``_shape`` reads, for a two-worker job."""
    return {
        "job": {"job_name": "ranks", **job},
        "placement": {"procs_per_node": 1},
        "nodes": 2,
        "launcher_creation_policy": policy,
    }


def test_a_launcher_at_startup_is_refused_for_a_job_with_code() -> None:
    """Each worker downloads the code in an init container, before its sshd starts; a launcher created at startup
    would run mpirun against workers still downloading. MPI Operator v0.8.0 waits for every worker only under
    ``WaitForWorkersReady`` (and, for a queued job, not even then: the launcher's own wait does)."""
    with pytest.raises(ValueError, match="AtStartup with code_uri.*WaitForWorkersReady"):
        _shape("ranks", _args("AtStartup", code_uri="s3://team-code/code/c.zip"))
    assert _shape("ranks", _args("AtStartup")).policy == "AtStartup", "without code the policy is the caller's"
    assert _shape("ranks", _args("WaitForWorkersReady", code_uri="s3://team-code/code/c.zip")).nodes == 2


def test_the_launcher_waits_for_its_workers_with_the_toolbox_unless_created_at_startup() -> None:
    """The ``wait-for-workers`` init container runs the toolbox image; a caller that chose ``AtStartup`` gets none, nor
    does one that gave no toolbox (``helper_image``)."""
    hosts = ["r-worker-0.r.training.svc", "r-worker-1.r.training.svc"]
    args = _args("WaitForWorkersReady", helper_image="toolbox@sha256:" + "0" * 64)
    (wait,) = _workers_wait(args, _shape("ranks", args), hosts)
    assert wait["name"] == WORKERS_WAIT_CONTAINER and wait["image"] == args["job"]["helper_image"]
    assert wait["command"] == [
        "python",
        WORKERS_WAIT_SCRIPT,
        "--port",
        str(SSHD_PORT),
        "--host",
        hosts[0],
        "--host",
        hosts[1],
    ]
    other = {**args, "worker_port": 2022}
    assert _workers_wait(other, _shape("ranks", other), hosts)[0]["command"][2:4] == ["--port", "2022"]
    at_startup = {**args, "launcher_creation_policy": "AtStartup"}
    assert _workers_wait(at_startup, _shape("ranks", at_startup), hosts) == []
    bare = _args("WaitForWorkersReady")
    assert _workers_wait(bare, _shape("ranks", bare), hosts) == []


@pytest.mark.parametrize("port", [0, 65536, "2222", True])
def test_a_worker_port_that_is_not_a_tcp_port_is_refused(port: Any) -> None:
    with pytest.raises(ValueError, match=f"ranks: worker_port {port!r} is not a TCP port"):
        _shape("ranks", {**_args("WaitForWorkersReady"), "worker_port": port})
