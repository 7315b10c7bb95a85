"""Preflight's listing calls follow every page: EC2 and FSx name the token ``NextToken``, EKS ``nextToken``."""

import boto3
from botocore.stub import Stubber

from stacks.preflight.aws import AwsClient


def _client() -> AwsClient:
    return AwsClient(boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b"), "us-east-1")


def test_the_zones_of_an_offering_are_read_from_every_page() -> None:
    aws = _client()
    filters = [{"Name": "instance-type", "Values": ["p5.48xlarge"]}]
    with Stubber(aws.ec2) as stub:
        stub.add_response(
            "describe_instance_type_offerings",
            {"InstanceTypeOfferings": [{"Location": "us-east-1b"}], "NextToken": "t1"},
            {"LocationType": "availability-zone", "Filters": filters},
        )
        stub.add_response(
            "describe_instance_type_offerings",
            {"InstanceTypeOfferings": [{"Location": "us-east-1a"}]},
            {"LocationType": "availability-zone", "Filters": filters, "NextToken": "t1"},
        )
        assert aws.offered_zones("p5.48xlarge") == ["us-east-1a", "us-east-1b"]
        stub.assert_no_pending_responses()


def test_the_node_groups_are_read_from_every_page_of_eks() -> None:
    aws = _client()
    with Stubber(aws.eks) as stub:
        stub.add_response("list_nodegroups", {"nodegroups": ["system"], "nextToken": "t1"}, {"clusterName": "c"})
        stub.add_response("list_nodegroups", {"nodegroups": ["gpu"]}, {"clusterName": "c", "nextToken": "t1"})
        for name, version in (("system", "1.35"), ("gpu", "1.34")):
            stub.add_response(
                "describe_nodegroup",
                {"nodegroup": {"nodegroupName": name, "version": version}},
                {"clusterName": "c", "nodegroupName": name},
            )
        assert aws.node_group_versions("c") == {"system": "1.35", "gpu": "1.34"}
        stub.assert_no_pending_responses()


def test_a_file_system_not_found_on_any_page_is_no_file_system() -> None:
    aws = _client()
    with Stubber(aws.fsx) as stub:
        stub.add_response(
            "describe_file_systems",
            {"FileSystems": [{"FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "LUSTRE"}], "NextToken": "t"},
            {"FileSystemIds": ["fs-0123456789abcdef0"]},
        )
        stub.add_client_error("describe_file_systems", service_error_code="FileSystemNotFound")
        assert aws.lustre_file_systems(["fs-0123456789abcdef0"]) == []
