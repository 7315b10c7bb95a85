"""A running stack keeps its region: the refusal of a new ``aws:region``, and the region a zone's name gives.

pulumi-aws 7 keeps each resource in the region its state records and sends lookups and new resources to the new one:
the update would split the stack across regions, or fail partway. Moving takes ``pulumi destroy``, then ``pulumi up``
(https://github.com/pulumi/pulumi-aws/pull/5656,
https://www.pulumi.com/registry/packages/aws/how-to-guides/aws-enhanced-region-support/).
"""

import re

from stacks.config.namespaces import REGION_KEY, eks_regions


def region_problem(was: str, now: str) -> str:
    """The refusal of a running stack's new region ``now``; ``was``: its region, or how it is known."""
    return (
        f"{REGION_KEY} {was} -> {now}: a running stack's resources stay in the region they were made in (the cluster, "
        f"its network, the shared file system and its data): keep {REGION_KEY} {was}; to train in {now}, deploy "
        f"another stack there with a clusterName of its own, or move this one: `pulumi destroy` with {REGION_KEY} "
        f"{was}, then `pulumi up` with {now}"
    )


def in_region(zone: str, region: str) -> bool:
    """A zone's name is its region's code and a letter (``us-east-1a``,
    https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html), a Local Zone's the
    region's code and a location (``us-west-2-lax-1a``, https://docs.aws.amazon.com/local-zones/latest/ug/available-local-zones.html)."""
    return re.fullmatch(rf"{re.escape(region)}([a-z]|-.+)", zone) is not None


def region_of(zones: list[str]) -> str:
    """The region of ``zones``, from the regions EKS is offered in (or, for one newer than that list, the zones)."""
    found = [r for r in sorted(eks_regions()) if any(in_region(z, r) for z in zones)]
    return found[0] if found else f"(the region of {', '.join(zones)})"
