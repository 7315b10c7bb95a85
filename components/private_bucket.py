"""One way to create an S3 bucket a component owns: encrypted at rest, public access blocked, TLS only.

Used by the image build (build contexts), FSx for Lustre (its data repository) and the benchmark collector
(results). Children are created under the calling component (``parent``) and named after ``prefix``.
"""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.iam import s3_tls_only_bucket_policy


@dataclass
class PrivateBucket:
    """What :func:`private_bucket` created."""

    # quoted: the offline tools' config imports this module, and an annotation evaluated here would load
    # pulumi-aws's s3 service (tests/unit/test_lazy_imports.py)
    bucket: "aws.s3.Bucket"
    encryption: "aws.s3.BucketServerSideEncryptionConfiguration"
    """Wait for it before writing objects that must be encrypted with the bucket's default."""


def private_bucket(
    parent: pulumi.Resource,
    prefix: str,
    *,
    force_destroy: bool,
    retain: bool = False,
    versioned: bool = False,
    kms_key_arn: Optional[pulumi.Input[str]] = None,
    tags: Optional[dict[str, str]] = None,
) -> PrivateBucket:
    """Bucket ``prefix`` (auto-named) with ``{prefix}-versioning`` when ``versioned``, default encryption
    ``{prefix}-sse`` (SSE-KMS with ``kms_key_arn`` and a bucket key, else SSE-S3), ``{prefix}-pab`` blocking every
    kind of public access, and ``{prefix}-tls-only`` denying requests without TLS. ``retain`` keeps them all on
    ``pulumi destroy``."""
    opts = pulumi.ResourceOptions(parent=parent, retain_on_delete=retain or None)
    bucket = aws.s3.Bucket(prefix, force_destroy=force_destroy, tags=tags, opts=opts)
    if versioned:
        aws.s3.BucketVersioning(
            f"{prefix}-versioning", bucket=bucket.id, versioning_configuration={"status": "Enabled"}, opts=opts
        )
    default: aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgsDict = (
        {"sse_algorithm": "aws:kms", "kms_master_key_id": kms_key_arn}
        if kms_key_arn is not None
        else {"sse_algorithm": "AES256"}
    )
    rule: aws.s3.BucketServerSideEncryptionConfigurationRuleArgsDict = {
        "apply_server_side_encryption_by_default": default
    }
    if kms_key_arn is not None:
        rule["bucket_key_enabled"] = True
    encryption = aws.s3.BucketServerSideEncryptionConfiguration(
        f"{prefix}-sse", bucket=bucket.id, rules=[rule], opts=opts
    )
    pab = aws.s3.BucketPublicAccessBlock(
        f"{prefix}-pab",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=opts,
    )
    aws.s3.BucketPolicy(
        f"{prefix}-tls-only",
        bucket=bucket.id,
        policy=bucket.arn.apply(s3_tls_only_bucket_policy),
        opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=retain or None, depends_on=[pab]),
    )
    return PrivateBucket(bucket=bucket, encryption=encryption)
