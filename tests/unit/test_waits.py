"""The bound of every wait ``pulumi up`` makes for a job (components/workloads/waits.py) and how the box reads a
registration's timeout (stacks/box/awaits.py)."""

import pulumi
import pytest

from components.workloads.job_objects import BATCH_JOB, JOB_OBJECTS, MPI_JOB
from components.workloads.waits import (
    DEFAULT_QUEUE_TIMEOUT_HOURS,
    FAILURE_REPORT_S,
    await_annotations,
    await_seconds,
    await_timeouts,
    deadline_seconds,
    queue_seconds,
)
from stacks.box.awaits import PROVIDER_DEFAULT_TIMEOUT_S, asks_provider, await_timeout_s, go_duration_s


def test_the_wait_is_the_queue_time_the_deadline_the_grace_and_the_report() -> None:
    assert await_seconds(86400, queue_s=3600, grace_s=60) == 3600 + 86400 + 60 + FAILURE_REPORT_S
    assert await_seconds(900) == 900 + 30 + FAILURE_REPORT_S


def test_only_a_queued_job_gets_queue_time() -> None:
    assert queue_seconds(False, 5) == 0
    assert queue_seconds(True, None) == int(DEFAULT_QUEUE_TIMEOUT_HOURS * 3600)
    assert queue_seconds(True, 0) == 0
    assert queue_seconds(True, 2.5) == 9000


def test_timeouts_round_up_to_whole_minutes_for_create_and_update() -> None:
    t = await_timeouts(3730)
    assert isinstance(t, pulumi.CustomTimeouts)
    assert (t.create, t.update, t.delete) == ("63m", "63m", "10m")  # delete: the provider's own ten minutes
    assert await_timeouts(3720, grace_s=3600).delete == "62m"  # an hour's grace and two minutes
    assert await_timeouts(3720).create == "62m"


@pytest.mark.parametrize("obj", list(JOB_OBJECTS.values()), ids=list(JOB_OBJECTS))
def test_a_job_object_reports_its_failure_and_nothing_else(obj) -> None:
    assert obj.failure(None) is None
    assert obj.failure({"status": {"conditions": [{"type": obj.succeeded, "status": "True"}]}}) is None
    assert obj.failure({"status": {"conditions": [{"type": obj.failed, "status": "False"}]}}) is None
    failed = {"type": obj.failed, "status": "True", "reason": "DeadlineExceeded", "message": "active too long"}
    assert obj.failure({"status": {"conditions": [failed]}}) == "DeadlineExceeded: active too long"
    assert obj.failure({"status": {"conditions": [{"type": obj.failed, "status": "True"}]}}) == obj.failed
    with pytest.raises(pulumi.RunError) as err:
        obj.succeeded_or_raise("j", {"conditions": [failed]}, "training", "urn:pulumi:s::p::x::j")
    assert str(err.value) == (
        f"{obj.kind} j failed: DeadlineExceeded: active too long. Its pods: kubectl get pods -n training -l "
        f"{obj.pod_label}=j; their logs: kubectl logs -n training -l {obj.pod_label}=j --all-containers --tail=50. "
        "Fix the cause, then run it again: pulumi up --replace 'urn:pulumi:s::p::x::j'"
    )
    assert obj.succeeded_or_raise("j", None) == "j"


def test_the_finished_expression_names_both_ends() -> None:
    assert MPI_JOB.finished == (
        'jsonpath={.status.conditions[?(@.status=="True" && (@.type=="Succeeded" || @.type=="Failed"))].type}'
    )
    assert '@.type=="Complete"' in BATCH_JOB.finished
    assert await_annotations(BATCH_JOB, True) == {"pulumi.com/waitFor": BATCH_JOB.finished}
    assert await_annotations(MPI_JOB, False) == {"pulumi.com/skipAwait": "true"}


def test_go_durations_as_the_engine_reads_them() -> None:
    assert go_duration_s("90m") == 5400
    assert go_duration_s("1h30m") == 5400
    assert go_duration_s("45s") == 45
    assert go_duration_s("1502m") == 90120
    for bad in ("", "90", "m", "1x", "10 m"):
        with pytest.raises(ValueError):
            go_duration_s(bad)


def test_the_timeout_is_the_custom_one_else_the_annotation_else_ten_minutes() -> None:
    annotated = {"metadata": {"annotations": {"pulumi.com/timeoutSeconds": "120"}}}
    assert await_timeout_s({"create": "5m", "update": "7m"}, annotated) == 300
    assert await_timeout_s({}, annotated) == 120
    assert await_timeout_s({}, {"metadata": {}}) == PROVIDER_DEFAULT_TIMEOUT_S == 600


def test_the_provider_decides_for_jobs_and_waitfor_objects_only() -> None:
    assert asks_provider({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}})
    assert asks_provider(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"annotations": {"pulumi.com/waitFor": "x"}},
        }
    )
    assert not asks_provider({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {}})
    assert not asks_provider({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}})


def test_a_deadline_is_whole_seconds_and_never_zero() -> None:
    """timeoutHours to activeDeadlineSeconds: whole seconds, and 1 at least (a fraction of a second made 0, a
    deadline already past)."""
    assert [deadline_seconds(h) for h in (24, 0.003, 0.0001, 1 / 7200)] == [86400, 10, 1, 1]
