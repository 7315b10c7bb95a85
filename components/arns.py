"""Fields of ARNs (``arn:partition:service:region:account:resource``)."""


def _field(arn: str, index: int, what: str) -> str:
    parts = arn.split(":")
    if len(parts) < 6 or parts[0] != "arn" or not parts[index]:
        raise ValueError(f"{arn!r} has no {what} field")
    return parts[index]


def partition_from_arn(arn: str) -> str:
    """The partition (``aws``, ``aws-cn``, ``aws-us-gov``) of an ARN."""
    return _field(arn, 1, "partition")


def region_from_arn(arn: str) -> str:
    """The region of a regional ARN."""
    return _field(arn, 3, "region")


def account_from_arn(arn: str) -> str:
    """The account of an ARN."""
    return _field(arn, 4, "account")
