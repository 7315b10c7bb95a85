"""The MPIJob component refuses a launcher created at startup for a job with code (:mod:`components.workloads.mpi`)."""

from typing import Any

import pytest

from components.workloads.mpi import _shape


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
    ``WaitForWorkersReady``."""
    with pytest.raises(ValueError, match="AtStartup with code_uri.*WaitForWorkersReady"):
        _shape("ranks", _args("AtStartup", code_uri="s3://team-code/code/c.zip"))
    assert _shape("ranks", _args("AtStartup")).policy == "AtStartup", "without code the policy is the caller's"
    assert _shape("ranks", _args("WaitForWorkersReady", code_uri="s3://team-code/code/c.zip")).nodes == 2
