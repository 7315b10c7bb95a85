"""Every shipped stack runs a Kubernetes minor in EKS's standard support on the calendar's day, or chose extended
support: the other tests judge support windows on one fixed day (:mod:`tests.day`), so this is where a minor that has
left standard support since shows, naming the stack to move to a newer minor (docs/how-to/kubernetes-version.md)."""

import datetime

import pytest

from components.catalog import DEFAULT_KUBERNETES_VERSION, KUBERNETES_VERSIONS, in_standard_support
from tests.harness import PROJECT, stack_config, stack_names


@pytest.mark.parametrize("stack", stack_names())
def test_a_shipped_stack_runs_a_minor_in_standard_support_today(stack: str) -> None:
    cluster = stack_config(stack).get(f"{PROJECT}:cluster") or {}
    minor = str(cluster.get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION))
    today = datetime.date.today()
    end = KUBERNETES_VERSIONS[minor].end_of_standard
    assert cluster.get("extendedSupport") or in_standard_support(minor, today), (
        f"Pulumi.{stack}.yaml: Kubernetes {minor} left EKS standard support on {end.isoformat()}; "
        "raise its cluster.kubernetesVersion to a newer minor"
    )


def test_the_check_can_fail() -> None:
    """Control: a minor judged on a day after its standard support ends is out of it."""
    oldest = min(KUBERNETES_VERSIONS.values(), key=lambda v: v.end_of_standard)
    assert not in_standard_support(oldest.minor, oldest.end_of_standard + datetime.timedelta(days=1))
