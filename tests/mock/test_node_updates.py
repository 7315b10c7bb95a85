"""How every stack's node groups are updated and what an update may stop, read from what the program registers:

- each managed node group runs the cluster's Kubernetes minor and an EKS AMI release: unpinned, the newest the
  catalog knows at creation and then kept (Pulumi ignores the default's later changes) until a launch template
  change takes EKS's newest; pinned by ``cluster.amiRelease`` or the group's ``amiRelease``, that release, and a
  change rolls the nodes;
- EKS rolls one node at a time (``updateConfig.maxUnavailable`` 1) and never forces an update past a
  PodDisruptionBudget (source key ``eks-managed-node-update``);
- it launches new nodes first (``updateStrategy`` ``DEFAULT``) only where the group's capacity has room for them: a
  group on a Capacity Block, an On-Demand Capacity Reservation or a cluster placement group rolls ``MINIMAL`` (each
  old node terminated before its replacement launches; source key ``eks-nodegroup-update-config``), read here from
  what the group and its launch template register; ``pulumi up`` waits for the roll as the strategy makes it last;
- each job's pods have a PodDisruptionBudget that selects exactly them (its workers, for an MPIJob) with an integer
  ``minAvailable`` (a Job has no scale subresource): all but one for a rolling group (an elastic job: at most the
  fewest nodes torchrun trains on, so pods that never got a node do not hold the roll), all for ``whenIdle``; a pod
  that runs but is not ready never holds a node (``unhealthyPodEvictionPolicy: AlwaysAllow``; a finished pod is
  evicted whatever the budget says).
"""

import math
from typing import Any, Optional

import pytest

from components.catalog.amis import AMI_RELEASES, NEWEST_AMI_RELEASE
from components.catalog.platform import DEFAULT_KUBERNETES_VERSION
from components.catalog.timings import NODE_ROLL, NODE_SURGE, PROVIDER_NODE_GROUP_WAIT
from components.conventions import JOB_LABEL
from stacks.config import ConfigError
from tests.harness import JOB_OBJECT_TYPES, PROJECT, Program, Registration, run_program, stack_config, stack_names

P = f"{PROJECT}:"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"


def _minor(stack: str) -> str:
    return str((stack_config(stack).get(P + "cluster") or {}).get("kubernetesVersion", DEFAULT_KUBERNETES_VERSION))


@pytest.mark.parametrize("stack", stack_names())
def test_every_group_runs_the_clusters_minor_and_keeps_its_release(stack: str) -> None:
    p = run_program(stack)
    groups = p.of_type(NODE_GROUP)
    assert groups
    minor = _minor(stack)
    for g in groups:
        assert g.inputs["version"] == minor, g.name
        assert g.inputs["releaseVersion"] == AMI_RELEASES[NEWEST_AMI_RELEASE].versions[minor], g.name
        assert "releaseVersion" in g.ignore_changes, f"{g.name}: a project update would roll its nodes"
        assert g.inputs["updateConfig"]["maxUnavailable"] == 1, g.name
        assert g.inputs.get("forceUpdateVersion") is False, g.name


LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"


def _no_room(p: Program, g: Registration) -> Optional[str]:
    """What leaves a registered group no room for an instance beyond its size, read from the group and its launch
    template: a Capacity Block, a targeted reservation, a cluster placement group; ``None`` when nothing does."""
    if g.inputs["capacityType"] == "CAPACITY_BLOCK":
        return "capacity block"
    (lt_urn,) = g.deps_of("launchTemplate")
    lt = p.by_urn(lt_urn)
    assert lt.type == LAUNCH_TEMPLATE
    if (lt.inputs.get("capacityReservationSpecification") or {}).get("capacityReservationTarget"):
        return "capacity reservation"
    groups = [p.by_urn(u) for u in lt.deps_of("placement")]
    if any(r.type == PLACEMENT_GROUP and r.inputs["strategy"] == "cluster" for r in groups):
        return "cluster placement group"
    return None


def _check_rolls(p: Program) -> set[str]:
    """Every registered group's update strategy and update timeout against its capacity; the strategies seen."""
    seen = set()
    for g in p.of_type(NODE_GROUP):
        limit = _no_room(p, g)
        strategy = "DEFAULT" if limit is None else "MINIMAL"
        assert g.inputs["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": strategy}, (g.name, limit)
        # every node of its largest size rolled one at a time, DEFAULT's new nodes first, never below the provider
        surge = NODE_SURGE.minutes if limit is None else 0.0
        minutes = g.inputs["scalingConfig"]["maxSize"] * NODE_ROLL.minutes + surge
        assert g.custom_timeouts["update"] == f"{max(int(PROVIDER_NODE_GROUP_WAIT.minutes), math.ceil(minutes))}m"
        seen.add(strategy)
    return seen


@pytest.mark.parametrize("stack", stack_names())
def test_every_group_rolls_as_its_capacity_allows(stack: str) -> None:
    assert _check_rolls(run_program(stack))


def test_the_presets_roll_both_ways() -> None:
    """The check above meets both strategies: the presets' EFA groups (their cluster placement group) and the rest."""
    seen = set().union(*(_check_rolls(run_program(s)) for s in ("dev", "p5")))
    assert seen == {"DEFAULT", "MINIMAL"}


@pytest.mark.parametrize(
    ("stack", "gpu", "expected"),
    [
        ("p5", {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"}, "MINIMAL"),
        ("p4d", {"capacityReservationId": "cr-0fedcba9876543210"}, "MINIMAL"),
        ("p5", {"efa": False}, "DEFAULT"),  # no EFA: no placement group, On-Demand in any zone
        ("g5", {"capacityReservationId": "cr-0fedcba9876543210", "availabilityZone": "us-east-1a"}, "MINIMAL"),
    ],
)
def test_a_group_on_a_block_or_a_reservation_rolls_minimal(stack: str, gpu: dict[str, Any], expected: str) -> None:
    config = _with(stack, gpu=gpu)
    if gpu.get("efa") is False:  # the enforced health check's published threshold is with EFA: report only
        jobs = {name: dict(job) for name, job in config[P + "jobs"].items()}
        jobs["train"]["healthCheck"] = {**jobs["train"].get("healthCheck", {}), "enforce": False}
        config[P + "jobs"] = jobs
    p = run_program(stack, config=config)
    assert p.error is None, p.error
    _check_rolls(p)
    (ng,) = [g for g in p.of_type(NODE_GROUP) if "-gpu-" in g.name]
    assert ng.inputs["updateConfig"]["updateStrategy"] == expected


def _with(stack: str, cluster: dict[str, Any] | None = None, **groups: dict[str, Any]) -> dict[str, Any]:
    cfg = dict(stack_config(stack))
    if cluster:
        cfg[P + "cluster"] = {**(cfg.get(P + "cluster") or {}), **cluster}
    if groups:
        merged = {k: dict(v) for k, v in cfg[P + "nodeGroups"].items()}
        for name, fields in groups.items():
            merged[name] = {**merged[name], **fields}
        cfg[P + "nodeGroups"] = merged
    return cfg


def _groups(p: Program) -> dict[str, Any]:
    return {g.name: g for g in p.of_type(NODE_GROUP)}


def test_a_pinned_release_is_applied_to_every_group_and_not_ignored() -> None:
    p = run_program("p3-2xlarge", config=_with("p3-2xlarge", {"amiRelease": "v20260625"}))
    assert p.error is None, p.error
    for g in _groups(p).values():
        assert g.inputs["releaseVersion"] == "1.36.2-20260625"
        assert "releaseVersion" not in g.ignore_changes


def test_a_groups_own_release_overrides_the_clusters() -> None:
    cfg = _with("p3-2xlarge", {"amiRelease": "v20260625"}, gpu={"amiRelease": "1.36.1-20260610"})
    p = run_program("p3-2xlarge", config=cfg)
    assert p.error is None, p.error
    by_role = {("gpu" if "-gpu-" in n else "system"): g for n, g in _groups(p).items()}
    assert by_role["gpu"].inputs["releaseVersion"] == "1.36.1-20260610"
    assert by_role["system"].inputs["releaseVersion"] == "1.36.2-20260625"


def test_moving_the_release_is_one_setting_shown_in_the_plan() -> None:
    from tests.config_support import stack_report

    assert stack_report("p3-2xlarge")["nodeGroups"][1]["amiRelease"] == {
        "releaseVersion": AMI_RELEASES[NEWEST_AMI_RELEASE].versions["1.36"],
        "release": NEWEST_AMI_RELEASE,
        "pinned": False,
        "nvidiaDriver": "580.159.03",
    }


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            {"amiRelease": "v20990101"},
            "eks-training:cluster.amiRelease: v20990101 is not a release this project knows",
        ),
        (
            {"amiRelease": "1.35.6-20260714"},
            "eks-training:cluster.amiRelease: 1.35.6-20260714 is a release version of Kubernetes 1.35, not of 1.36",
        ),
        ({"amiRelease": "latest"}, "eks-training:cluster.amiRelease: 'latest' is not an EKS AMI release"),
    ],
)
def test_a_release_without_amis_for_the_minor_is_refused(change: dict[str, Any], fragment: str) -> None:
    p = run_program("dev", config=_with("dev", change), expect_error=True)
    assert isinstance(p.error, ConfigError) and fragment in str(p.error), p.error
    assert p.registrations == []


#: The labels the MPI Operator adds to the pods it creates from an MPIJob's templates (v0.8.0, the pinned release:
#: https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go#L1743-L1749).
MPI_ROLE_LABEL = "training.kubeflow.org/job-role"


def _pod_labels(r: Any) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """The labels and spec of each kind of pod of a Job or MPIJob, as they are on the pods."""
    spec = r.inputs["spec"]
    if "template" in spec:
        return [(spec["template"]["metadata"]["labels"], spec["template"]["spec"])]
    return [
        ({**t["template"]["metadata"]["labels"], MPI_ROLE_LABEL: role.lower()}, t["template"]["spec"])
        for role, t in spec["mpiReplicaSpecs"].items()
    ]


def _fewest(pods: list[tuple[dict[str, str], dict[str, Any]]], count: int) -> int:
    """The fewest pods the job trains on: an elastic torchrun's ``--nnodes MIN:MAX``, else all of them."""
    for _, pod in pods:
        for c in pod["containers"]:
            for arg in c.get("command", []):
                if arg.startswith("--nnodes=") and ":" in arg:
                    return int(arg.split("=", 1)[1].split(":")[0])
    return count


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("stack", stack_names())
def test_every_job_has_a_budget_over_exactly_its_pods_on_its_group(stack: str) -> None:
    p = run_program(stack)
    budgets = p.of_type(PDB)
    jobs = {j.name: j for j in [r for t in JOB_OBJECT_TYPES for r in p.of_type(t)]}
    configured = stack_config(stack).get(P + "jobs") or {}
    if configured:
        assert budgets, stack
    for b in budgets:
        spec = b.inputs["spec"]
        selector = spec["selector"]["matchLabels"]
        # a number, not a percentage (the mocks carry numbers as floats)
        assert isinstance(spec["minAvailable"], (int, float)) and float(spec["minAvailable"]).is_integer()
        assert "maxUnavailable" not in spec
        job_name = selector[JOB_LABEL]
        owners = [j for j in jobs.values() if j.inputs["metadata"]["name"] == job_name]
        assert len(owners) == 1, (b.name, job_name)
        selected = [(labels, pod) for labels, pod in _pod_labels(owners[0]) if _matches(selector, labels)]
        assert selected, f"{b.name} selects none of its job's pods"
        spec_pods = owners[0].inputs["spec"]
        count = spec_pods.get("parallelism") or spec_pods.get("mpiReplicaSpecs", {}).get("Worker", {}).get("replicas")
        fewest = _fewest(selected, int(count))
        assert spec["minAvailable"] == max(0, min(int(count) - 1, fewest)), (b.name, count, fewest)
        assert spec["unhealthyPodEvictionPolicy"] == "AlwaysAllow", b.name
        # the unselected pods (an MPIJob's launcher) run elsewhere: on the system group
        for labels, pod in _pod_labels(owners[0]):
            if not _matches(selector, labels):
                assert pod["nodeSelector"]["eks-training/role"] == "system", b.name


def test_when_idle_keeps_every_pod_of_the_groups_jobs() -> None:
    cfg = _with("p3-2xlarge", gpu={"updateStrategy": "whenIdle"})
    p = run_program("p3-2xlarge", config=cfg)
    assert p.error is None, p.error
    by_job = {b.inputs["spec"]["selector"]["matchLabels"][JOB_LABEL]: b.inputs["spec"] for b in p.of_type(PDB)}
    train = next(v for k, v in by_job.items() if k.endswith("train"))
    evaluate = next(v for k, v in by_job.items() if k.endswith("evaluate"))
    assert train["minAvailable"] == 2  # both pods of the training job on the gpu group
    assert evaluate["minAvailable"] == 0  # the evaluation is on the system group, which still rolls
