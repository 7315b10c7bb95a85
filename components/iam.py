"""Every IAM document the components write, as pure functions of plain values (no resources).

ARNs are built with the partition the stack runs in (``aws``, ``aws-cn``, ``aws-us-gov``), so the
policies stay valid outside the commercial partition.
"""

import json
from typing import Any, Optional, Sequence

#: Version of the IAM policy language.
POLICY_VERSION = "2012-10-17"


def _doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": POLICY_VERSION, "Statement": list(statements)}, sort_keys=True)


def managed_policy_arn(partition: str, name: str) -> str:
    """ARN of an AWS managed policy, e.g. ``AmazonEKSWorkerNodePolicy`` or ``service-role/AmazonEFSCSIDriverPolicy``."""
    return f"arn:{partition}:iam::aws:policy/{name}"


def eks_access_policy_arn(partition: str, name: str) -> str:
    """ARN of an EKS access policy, e.g. ``AmazonEKSClusterAdminPolicy``."""
    return f"arn:{partition}:eks::aws:cluster-access-policy/{name}"


def service_trust_policy(service: str, *, source_account: Optional[str] = None, sid: Optional[str] = None) -> str:
    """Trust policy for an AWS service principal (``ec2.amazonaws.com``, ``codebuild.amazonaws.com``),
    optionally limited to calls on behalf of one account (confused-deputy guard)."""
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"Service": service},
        "Action": "sts:AssumeRole",
    }
    if sid is not None:
        statement["Sid"] = sid
    if source_account is not None:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": source_account}}
    return _doc(statement)


def pod_identity_trust_policy(
    account_id: str, cluster_name: str, namespace: str, service_accounts: Sequence[str]
) -> str:
    """Trust policy for a role assumed through EKS Pod Identity, limited to one cluster, one namespace
    and the given service accounts via the session tags Pod Identity sets
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""
    return _doc(
        {
            "Sid": "EksPodIdentity",
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {
                "StringEquals": {
                    "aws:SourceAccount": account_id,
                    "aws:RequestTag/eks-cluster-name": cluster_name,
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": list(service_accounts),
                }
            },
        }
    )


def _account_administers(partition: str, account_id: str) -> dict[str, Any]:
    """The default key policy's statement: the account administers and uses the key through IAM."""
    return {
        "Sid": "AccountAdministers",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
        "Action": "kms:*",
        "Resource": "*",
    }


def account_admin_key_policy(partition: str, account_id: str) -> str:
    """KMS key policy: the account administers and uses the key through IAM (the default key policy)."""
    return _doc(_account_administers(partition, account_id))


def alarm_topic_key_policy(partition: str, account_id: str) -> str:
    """KMS key policy of an SNS topic CloudWatch alarms publish to: the account administers the key, and CloudWatch
    may encrypt with it (it cannot use the AWS managed ``alias/aws/sns`` key,
    https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger). The CloudWatch statement is the one
    AWS documents (https://repost.aws/knowledge-center/cloudwatch-configure-alarm-sns), without a condition: CloudWatch
    is not documented to send aws:SourceAccount on these calls, and a condition it does not meet makes every alarm
    action fail, visible only in the alarm's history."""
    return _doc(
        _account_administers(partition, account_id),
        {
            "Sid": "CloudWatchAlarmsPublish",
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
            "Resource": "*",
        },
    )


def autoscaler_policy(cluster_name: str) -> str:
    """cluster-autoscaler: describe calls need ``*``; scaling only on Auto Scaling groups tagged as owned
    by this cluster (EKS tags managed node groups' groups that way)."""
    return _doc(
        {
            "Sid": "Describe",
            "Effect": "Allow",
            "Action": [
                "autoscaling:DescribeAutoScalingGroups",
                "autoscaling:DescribeAutoScalingInstances",
                "autoscaling:DescribeLaunchConfigurations",
                "autoscaling:DescribeScalingActivities",
                "autoscaling:DescribeTags",
                "ec2:DescribeImages",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplateVersions",
                "ec2:GetInstanceTypesFromInstanceRequirements",
                "eks:DescribeNodegroup",
            ],
            "Resource": "*",
        },
        {
            "Sid": "ScaleOwnGroups",
            "Effect": "Allow",
            "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
            "Resource": "*",
            "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}},
        },
    )


def fsx_csi_static_controller_policy() -> str:
    """The FSx CSI controller with statically provisioned volumes only: the driver polls
    ``fsx:DescribeFileSystems`` (every minute, and when it validates a volume's capabilities); nothing
    creates, updates or deletes a file system, so no write action and no ``iam:CreateServiceLinkedRole``
    is granted (https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/5b227125add708cd0b87c76abe1a4c074e71dfc5/pkg/cloud/cloud.go).
    DescribeFileSystems without ids lists every file system, so it needs ``"*"``."""
    return _doc(
        {"Sid": "DescribeFileSystems", "Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}
    )


def s3_object_arn(partition: str, bucket: str, key: str) -> str:
    """ARN of an S3 object (or of a key pattern such as ``prefix/*``)."""
    return f"arn:{partition}:s3:::{bucket}/{key}"


def s3_read_object_policy(partition: str, bucket: str, key: str) -> str:
    """Read one S3 object (a dataset tarball)."""
    return _doc({"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": s3_object_arn(partition, bucket, key)})


def s3_read_prefix_policy(partition: str, bucket: str, prefix: str) -> str:
    """List and read the objects under one S3 prefix (a job's code)."""
    return _doc(
        {
            "Sid": "ReadPrefix",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": s3_object_arn(partition, bucket, f"{prefix}*"),
        },
        {
            "Sid": "ListPrefix",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": f"arn:{partition}:s3:::{bucket}",
            "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        },
    )


def s3_write_prefix_policy(partition: str, bucket: str, prefix: str) -> str:
    """Write, and only write, objects under one S3 prefix (the benchmark collector's results): ``s3:PutObject`` on
    ``bucket/prefix*``. No read, list or delete: a compromised collector can add results, never see or remove
    others. Objects are written with single PutObject requests, so no multipart permission is needed
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-with-s3-policy-actions.html)."""
    return _doc(
        {
            "Sid": "WriteResults",
            "Effect": "Allow",
            "Action": ["s3:PutObject"],
            "Resource": s3_object_arn(partition, bucket, f"{prefix}*"),
        }
    )


def s3_tls_only_bucket_policy(bucket_arn: str) -> str:
    """Deny every request to the bucket that does not use TLS."""
    return _doc(
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    )


def codebuild_policy(
    repository_arn: str,
    bucket_arn: str,
    log_group_arn: str,
    kms_key_arn: Optional[str] = None,
    context_prefix: str = "contexts",
) -> dict[str, Any]:
    """Least-privilege permissions of the image build's CodeBuild role (as a document dict).

    Only the registry logins use ``"*"`` (their APIs have no resource-level permissions):
    ``ecr:GetAuthorizationToken`` for this account's registry, and ``ecr-public:GetAuthorizationToken`` with
    ``sts:GetServiceBearerToken`` for an authenticated pull from ECR Public, which has higher limits than an
    anonymous one (source keys ``ecr-public-login``, ``ecr-public-pulls``). ECR push/pull and DescribeImages
    on this repository; read of this bucket's context prefix; log streams/events in this project's log
    group; the KMS key, when one is used."""
    log_group = log_group_arn[:-2] if log_group_arn.endswith(":*") else log_group_arn
    statements: list[dict[str, Any]] = [
        {"Sid": "EcrLogin", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
        {
            "Sid": "EcrPublicLogin",
            "Effect": "Allow",
            "Action": ["ecr-public:GetAuthorizationToken", "sts:GetServiceBearerToken"],
            "Resource": "*",
        },
        {
            "Sid": "EcrPushPullThisRepository",
            "Effect": "Allow",
            "Action": [
                "ecr:BatchCheckLayerAvailability",
                "ecr:BatchGetImage",
                "ecr:CompleteLayerUpload",
                "ecr:DescribeImages",
                "ecr:GetDownloadUrlForLayer",
                "ecr:InitiateLayerUpload",
                "ecr:PutImage",
                "ecr:UploadLayerPart",
            ],
            "Resource": [repository_arn],
        },
        {
            "Sid": "ReadBuildContexts",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": [f"{bucket_arn}/{context_prefix}/*"],
        },
        {
            "Sid": "ContextBucketLocation",
            "Effect": "Allow",
            "Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"],
            "Resource": [bucket_arn],
        },
        {
            "Sid": "BuildLogs",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": [log_group, f"{log_group}:*"],
        },
    ]
    if kms_key_arn:
        statements.append(
            {
                "Sid": "UseEncryptionKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
                "Resource": [kms_key_arn],
            }
        )
    return {"Version": POLICY_VERSION, "Statement": statements}
