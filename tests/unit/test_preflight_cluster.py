"""Preflight's check of a cluster that runs already: its state, and the ways EKS says there is none."""

import boto3
import pytest
from botocore.stub import Stubber

from stacks.plan.minors import VERSION_KEY
from stacks.preflight.aws import AwsClient
from stacks.preflight.cluster import running_cluster_finding


@pytest.mark.parametrize(
    ("running", "wanted", "status", "ok", "says"),
    [
        ("1.36", "1.36", "DELETING", False, "is being deleted: wait until it is gone"),
        ("1.35", "1.36", "UPDATING", False, "is UPDATING, and EKS takes one update at a time: wait until it is ACTIVE"),
        ("1.35", "1.36", "PENDING", False, "if EKS is upgrading it itself, set the minor it then runs"),
        ("1.35", "1.36", "CREATING", False, "is CREATING"),
        ("1.36", "1.36", "UPDATING", True, "runs 1.36, as the stack sets (UPDATING)"),
        ("1.36", "1.36", "FAILED", False, "failed to create, and EKS updates no failed cluster: delete it"),
        ("1.36", "1.36", "DELETING", False, "then run `pulumi up --refresh`"),
        ("1.34", "1.36", "ACTIVE", False, "to '1.35', run `pulumi up --refresh`, and repeat up to 1.36"),
        ("1.36", "1.35", "UPDATING", False, "never moves a cluster down"),
        # the record's summary and the plan's refusal name the same causes (stacks.plan.minors.minor_problems)
        (
            "1.36",
            "1.35",
            "ACTIVE",
            False,
            "newer than the stack's 1.35: an earlier `pulumi up` that failed moved it, or EKS did (it upgrades a "
            "cluster itself at the end of standard or extended support), or someone did outside Pulumi",
        ),
    ],
)
def test_a_cluster_busy_or_going_away_is_named_with_what_to_wait_for(
    running: str, wanted: str, status: str, ok: bool, says: str
) -> None:
    got_ok, key, message = running_cluster_finding("c", running, wanted, status)
    assert (got_ok, key) == (ok, VERSION_KEY)
    assert says in message, message


def _client(error_code: str, message: str) -> AwsClient:
    aws = AwsClient(boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b"), "us-east-1")
    stub = Stubber(aws.eks)
    stub.add_client_error("describe_cluster", service_error_code=error_code, service_message=message)
    stub.activate()
    return aws


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("ResourceNotFoundException", "No cluster found for name: c."),
        # terraform-provider-aws findClusterByName reads this form too ("Sometimes the EKS API returns ...")
        ("ClientException", "No cluster found for name: c."),
    ],
)
def test_eks_saying_no_cluster_either_way_is_no_cluster(code: str, message: str) -> None:
    assert _client(code, message).cluster_version("c") is None


def test_another_client_error_is_not_taken_for_no_cluster() -> None:
    with pytest.raises(Exception, match="AccessDenied"):
        _client("AccessDeniedException", "not allowed").cluster_version("c")


def test_the_cluster_is_described_once_per_run() -> None:
    """The running-cluster check and the datasets' check both ask; EKS answers once (the stub holds
    one response: a second DescribeCluster would fail it)."""
    aws = AwsClient(boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b"), "us-east-1")
    stub = Stubber(aws.eks)
    stub.add_response(
        "describe_cluster", {"cluster": {"name": "c", "version": "1.35", "status": "ACTIVE"}}, {"name": "c"}
    )
    stub.activate()
    assert aws.cluster_version("c") == ("1.35", "ACTIVE")
    assert aws.cluster_version("c") == ("1.35", "ACTIVE")
    stub.assert_no_pending_responses()
