"""The AWS partition a stack runs in (``aws``, ``aws-cn``, ``aws-us-gov``), for the ARNs in IAM documents."""

import pulumi
import pulumi_aws as aws


def current_partition(parent: pulumi.Resource) -> pulumi.Output[str]:
    """The partition of the provider ``parent``'s children use (``aws.getPartition``), so ARNs written into
    policies are valid in every partition (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html)."""
    return aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=parent)).partition
