"""A jobs-only stack (examples/teams/Pulumi.vision.yaml) on the cluster stack it references (examples/teams/
Pulumi.shared.yaml), both evaluated by the real program under mocks: the jobs-only stack reads exactly what the cluster
stack exported (its outputs put behind the mocked ``StackReference``) and registers only its team's jobs, in its
team's namespace and queue.

The queueing itself (a team's job borrowing and giving back) runs on the real Kueue in the cluster tier
(tests/cluster/test_box_admission.py)."""

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from stacks.config import ConfigError, load_config
from stacks.jobs_only import JobsOnlyError
from stacks.plan.queues import PRIORITY_LABEL, QUEUE_LABEL
from tests.harness import JOB_OBJECT_TYPES, PROJECT, REPO, STACK_OUTPUTS, resolve, run_program

EXAMPLES = REPO / "examples" / "teams"
REFERENCE = "organization/eks-training/shared"
#: What a jobs-only stack may register: its jobs and what they are made of (images, code, policies, staging, etcd,
#: health checks, TensorBoard) and the Kubernetes provider; never the cluster's parts.
CLUSTER_TYPES = (
    "aws:ec2/",
    "aws:eks/cluster",
    "aws:eks/nodeGroup",
    "aws:efs/",
    "aws:fsx/",
    "kubernetes:helm.sh/",
    "kubernetes:kueue.x-k8s.io/",
    "kubernetes:core/v1:Namespace",
    "kubernetes:apiextensions",
    "eks-training:index:TrainingCluster",
    "eks-training:index:TrainingVpc",
    "eks-training:index:Admission",
    "eks-training:index:MpiOperator",
    "kubernetes:yaml",
)


def _config(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((EXAMPLES / f"Pulumi.{name}.yaml").read_text())["config"])


@pytest.fixture(scope="module")
def cluster():
    """The cluster stack's run, its exported outputs behind the reference."""
    program = run_program("shared", config=_config("shared"))
    assert program.error is None
    STACK_OUTPUTS[REFERENCE] = {k: resolve(pulumi.Output.from_input(v)) for k, v in program.outputs.items()}
    yield program
    STACK_OUTPUTS.pop(REFERENCE, None)


@pytest.fixture(scope="module")
def vision(cluster):
    program = run_program("vision", config=_config("vision"))
    assert program.error is None, program.error
    return program


def test_the_cluster_stack_exports_what_a_jobs_only_stack_reads(cluster) -> None:
    out = STACK_OUTPUTS[REFERENCE]
    assert set(out["teams"]) == {"vision", "nlp"}
    nlp = dict(out["teams"]["nlp"])
    quota = nlp.pop("quota")
    assert nlp == {
        "namespace": "team-nlp",
        "localQueue": "nlp",
        "clusterQueue": "team-nlp",
        "pvcName": "shared-data",
        "nodes": {"system": 1, "gpu": 1},
        "mayBorrow": False,
        "mayLend": True,
    }
    # the team's ClusterQueue's nominal quota, as the cluster stack registered it
    queue = next(
        r
        for r in cluster.registrations
        if r.type.endswith(":ClusterQueue") and r.inputs["metadata"]["name"] == "team-nlp"
    )
    flavors = queue.inputs["spec"]["resourceGroups"][0]["flavors"]
    assert quota == {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in flavors}
    assert quota["gpu"]["nvidia.com/gpu"] == "1"
    assert out["nodeGroupPlacement"]["gpu"]["instanceTypes"] == ["g5.xlarge"]
    assert out["kubeconfig"] and out["clusterName"]


def test_a_jobs_only_stack_registers_only_its_jobs_into_its_teams_queue(cluster, vision) -> None:
    types = {r.type for r in vision.registrations}
    assert not [t for t in types if t.startswith(CLUSTER_TYPES)], sorted(types)
    jobs = [r for r in vision.registrations if r.type in JOB_OBJECT_TYPES]
    names = {r.inputs["metadata"]["name"] for r in jobs}
    assert {"train", "evaluate", "train-allreduce"} <= names, names
    classes = {r.inputs["metadata"]["name"] for r in cluster.registrations if r.type.endswith(":WorkloadPriorityClass")}
    for r in vision.registrations:
        meta = (r.inputs or {}).get("metadata") or {}
        if r.type.startswith("kubernetes:") and r.type != "pulumi:providers:kubernetes" and "namespace" in meta:
            assert meta["namespace"] == "vision", (r.name, meta)
    for r in jobs:
        labels = r.inputs["metadata"]["labels"]
        if r.inputs["metadata"]["name"] == "dataset-cifar10" or QUEUE_LABEL not in labels:
            continue
        assert labels[QUEUE_LABEL] == "vision", (r.name, labels)
        assert labels[PRIORITY_LABEL] in classes, (r.name, labels)  # the classes the cluster stack made
    queued = {r.inputs["metadata"]["name"] for r in jobs if QUEUE_LABEL in r.inputs["metadata"]["labels"]}
    assert {"train", "evaluate", "train-allreduce"} <= queued
    # the Kubernetes provider is the referenced cluster's
    provider = next(r for r in vision.registrations if r.type == "pulumi:providers:kubernetes")
    assert STACK_OUTPUTS[REFERENCE]["kubeconfig"] in str(provider.inputs.get("kubeconfig")), provider.inputs
    # a refresh that cannot reach the cluster keeps the jobs in the state (tests/mock/test_kubernetes_provider.py)
    assert "deleteUnreachable" not in provider.inputs, provider.inputs
    # the jobs mount the team's claim
    train = next(r for r in jobs if r.inputs["metadata"]["name"] == "train")
    volumes = train.inputs["spec"]["template"]["spec"]["volumes"]
    assert any((v.get("persistentVolumeClaim") or {}).get("claimName") == "shared-data" for v in volumes), volumes
    outputs = {k: resolve(pulumi.Output.from_input(v)) for k, v in vision.outputs.items()}
    assert outputs["namespace"] == "vision" and outputs["localQueue"] == "vision"
    assert "-n vision" in outputs["jobs"]["train"]["waitCommand"]


def test_a_jobs_only_stack_without_jobs_builds_no_image_and_says_it_runs_nothing(cluster) -> None:
    """Its jobs all removed (to end them), a team's stack deploys and makes nothing: no training image is built in
    CodeBuild for helpers no pod runs. The plan says it runs nothing, not "the environment only"."""
    from stacks.plan import build_plan
    from stacks.plan.report import render, report

    config = {k: v for k, v in _config("vision").items() if k not in (f"{PROJECT}:jobs", f"{PROJECT}:datasets")}
    program = run_program("vision", config=config)
    assert program.error is None, program.error
    types = {r.type for r in program.registrations}
    assert not [t for t in types if "codebuild" in t or "ecr/" in t or t.endswith(":TrainingImage")], sorted(types)
    assert not [r for r in program.registrations if r.type in JOB_OBJECT_TYPES]
    text = render(report(build_plan(load_config(PROJECT, "vision", config, REPO)), "us-east-1"))
    assert "jobs: none: this stack runs nothing on the cluster" in text, text
    assert "the environment only" not in text


def test_a_team_the_referenced_stack_does_not_have_fails_the_deployment_naming_the_key(cluster) -> None:
    config = _config("vision")
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "team": "audio"}
    program = run_program("vision", config=config, expect_error=True)
    error = program.error
    while error is not None and not isinstance(error, JobsOnlyError) and error.__cause__ is not None:
        error = error.__cause__
    assert (
        error is not None
        and "eks-training:cluster.team: 'audio' is not a team of the referenced stack "
        f"{REFERENCE} (its teams: nlp, vision)"
        in str(error)
    ), repr(program.error)
    assert not [r for r in program.registrations if r.type == "kubernetes:batch/v1:Job"]


def test_a_jobs_only_stack_in_another_region_than_the_cluster_fails_the_deployment(cluster) -> None:
    """Its jobs' Pod Identity associations name the cluster in the stack's own region: elsewhere EKS would not find
    it, after the images were built."""
    assert STACK_OUTPUTS[REFERENCE]["region"] == _config("shared")["aws:region"]
    config = _config("vision")
    config["aws:region"] = "us-west-2"
    program = run_program("vision", config=config, expect_error=True)
    assert (
        program.error is not None
        and f"aws:region: 'us-west-2' is not the region of the referenced stack {REFERENCE}'s cluster ('us-east-1')"
        in str(program.error)
    ), repr(program.error)
    assert not [r for r in program.registrations if r.type == "kubernetes:batch/v1:Job"]


def test_a_job_larger_than_a_non_borrowing_teams_quota_fails_the_deployment(cluster) -> None:
    """Team nlp may not borrow and holds 1 GPU node: a 2-node job of its stack would wait for ever in Kueue."""
    team = STACK_OUTPUTS[REFERENCE]["teams"]["nlp"]
    assert team["mayBorrow"] is False and team["nodes"]["gpu"] == 1
    config = _config("vision")
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "team": "nlp"}
    program = run_program("vision", config=config, expect_error=True)
    assert (
        program.error is not None
        and "eks-training:jobs.train.nodes: the job needs up to 2 node(s) of gpu; team "
        "nlp may not borrow and its quota there is 1 node(s)"
        in str(program.error)
    ), repr(program.error)
    assert not [r for r in program.registrations if r.type == "kubernetes:batch/v1:Job"]


SMALL = "organization/eks-training/small"


@pytest.fixture(scope="module")
def small_system_cluster():
    """The cluster stack with one system node at most: each team's half of it is no whole node, so a team's quota
    on the system group is 0."""
    config = _config("shared")
    config[f"{PROJECT}:systemNodeGroup"] = {"minSize": 1, "desiredSize": 1, "maxSize": 1}
    program = run_program("small", config=config)
    assert program.error is None, program.error
    STACK_OUTPUTS[SMALL] = {k: resolve(pulumi.Output.from_input(v)) for k, v in program.outputs.items()}
    yield program
    STACK_OUTPUTS.pop(SMALL, None)


def _with_mpi_job(config: dict[str, Any], reference: str, team: str) -> dict[str, Any]:
    """``config`` (vision's) on team ``team`` of ``reference``, with its one-node training job and a one-node MPI
    job (its launcher runs on the system group): no job larger than a team's one GPU node, none on the system group."""
    config = dict(config)
    config[f"{PROJECT}:cluster"] = {"stackReference": reference, "team": team}
    config[f"{PROJECT}:images"] = {"nccl-tests": {"context": "images/nccl-tests"}}
    jobs = {"train": {k: v for k, v in config[f"{PROJECT}:jobs"]["train"].items() if k != "minNodes"}}
    jobs["train"].update(nodes=1, maxNodes=1)
    jobs["nccl"] = {
        "kind": "mpi",
        "image": "nccl-tests",
        "nodeGroup": "gpu",
        "nodes": 1,
        "command": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1M", "-g", "1"],
    }
    config[f"{PROJECT}:jobs"] = jobs
    return config


def test_an_mpi_job_whose_launcher_a_non_borrowing_teams_system_quota_cannot_hold_fails_the_deployment(
    small_system_cluster,
) -> None:
    """An MPIJob's launcher is a pod set Kueue admits against the system group's flavor: team nlp may not borrow and
    holds no system node, so its MPI job would wait for ever; its other jobs (on the GPU group) are fine."""
    team = STACK_OUTPUTS[SMALL]["teams"]["nlp"]
    assert team["mayBorrow"] is False and team["nodes"] == {"system": 0, "gpu": 1}
    assert team["quota"]["system"]["cpu"] == "0"
    program = run_program("vision", config=_with_mpi_job(_config("vision"), SMALL, "nlp"), expect_error=True)
    assert (
        program.error is not None
        and "eks-training:jobs.nccl.kind: the job's MPI launcher asks 250m cpu on the "
        "system group; team nlp may not borrow and its quota there is 0 "
        in str(program.error)
    ), repr(program.error)
    assert "jobs.train" not in str(program.error)
    assert not [r for r in program.registrations if r.type.startswith("kubernetes:kubeflow.org")]


def test_an_mpi_job_of_a_team_that_holds_a_system_node_or_may_borrow_is_deployed(cluster, small_system_cluster) -> None:
    """The same MPI job: on team nlp of the cluster whose system group holds a node per team, and on team vision
    (which may borrow the cohort's system quota) of the small one."""
    for reference, team in ((REFERENCE, "nlp"), (SMALL, "vision")):
        program = run_program("vision", config=_with_mpi_job(_config("vision"), reference, team))
        assert program.error is None, (reference, team, program.error)
        mpi = [r for r in program.registrations if r.type == "kubernetes:kubeflow.org/v2beta1:MPIJob"]
        assert [r.inputs["metadata"]["labels"][QUEUE_LABEL] for r in mpi] == [team]


def test_node_groups_that_differ_from_the_cluster_stacks_fail_the_deployment(cluster) -> None:
    config = _config("vision")
    config[f"{PROJECT}:nodeGroups"] = {"gpu": {**config[f"{PROJECT}:nodeGroups"]["gpu"], "maxSize": 4}}
    program = run_program("vision", config=config, expect_error=True)
    assert program.error is not None and "eks-training:nodeGroups.gpu: differs from the referenced stack" in str(
        program.error
    ), repr(program.error)
    assert not [r for r in program.registrations if r.type == "kubernetes:batch/v1:Job"]


@pytest.mark.parametrize(
    "change, fragment",
    [
        (
            lambda c: c.update({f"{PROJECT}:network": {"availabilityZoneCount": 2}}),
            "eks-training:network: a jobs-only stack (eks-training:cluster.stackReference) registers only its jobs",
        ),
        (
            lambda c: c.update({f"{PROJECT}:teams": {"x": {"quotaPercent": 10}}}),
            "eks-training:teams: a jobs-only stack",
        ),
        (
            lambda c: c[f"{PROJECT}:cluster"].update({"kubernetesVersion": "1.35"}),
            "eks-training:cluster.kubernetesVersion: a jobs-only stack reads only",
        ),
        (lambda c: c[f"{PROJECT}:cluster"].pop("team"), "eks-training:cluster.team: a jobs-only stack"),
        (
            lambda c: c[f"{PROJECT}:cluster"].update({"stackReference": "shared"}),
            "eks-training:cluster.stackReference: 'shared' is not a stack reference",
        ),
    ],
)
def test_a_jobs_only_config_that_would_make_a_cluster_is_refused_offline(change, fragment: str) -> None:
    config = _config("vision")
    config[f"{PROJECT}:cluster"] = dict(config[f"{PROJECT}:cluster"])
    change(config)
    program = run_program("vision", config=config, expect_error=True)
    assert isinstance(program.error, ConfigError) and fragment in str(program.error), repr(program.error)
    assert program.registrations == []


@pytest.mark.parametrize("depth, refused", [(9, False), (10, True)])
def test_a_jobs_only_job_past_the_cluster_stacks_priority_stages_is_refused(cluster, depth: int, refused: bool) -> None:
    """The cluster stack makes the priority classes of stages 0..9 for its teams; a job waiting through 10 levels of
    `after` would name a class that does not exist, and Kueue would never create its Workload."""
    from stacks.plan.queues import TEAM_STAGES

    assert depth == TEAM_STAGES - 1 + int(refused)
    config = _config("vision")
    config[f"{PROJECT}:jobs"] = {
        f"s{i}": {
            "kind": "command",
            "nodeGroup": "system",
            "command": ["true"],
            **({"after": [f"s{i - 1}"]} if i else {}),
        }
        for i in range(depth + 1)
    }
    config.pop(f"{PROJECT}:datasets", None)
    program = run_program("vision", config=config, expect_error=refused)
    if refused:
        assert isinstance(program.error, ConfigError), repr(program.error)
        assert f"eks-training:jobs.s{depth}.after: the job waits through {depth} levels of jobs" in str(program.error)
        assert "s9.after" not in str(program.error) and program.registrations == []
    else:
        assert program.error is None, program.error


def test_a_team_without_a_reference_is_refused() -> None:
    config = _config("shared")
    config[f"{PROJECT}:cluster"] = {"team": "vision"}
    program = run_program("shared", config=config, expect_error=True)
    assert isinstance(program.error, ConfigError) and "eks-training:cluster.team: only a jobs-only stack" in str(
        program.error
    )


def test_the_examples_are_where_the_guide_says(tmp_path: Path) -> None:
    guide = (REPO / "docs" / "how-to" / "teams.md").read_text()
    assert "examples/teams/Pulumi.vision.yaml" in guide and "examples/teams/Pulumi.shared.yaml" in guide


def test_every_output_of_both_stacks_is_documented(cluster, vision) -> None:
    """The teams' outputs of the cluster stack and every output of the jobs-only stack are in the outputs reference
    (the docstrings' ``Outputs:`` lists, docs/reference/outputs.md)."""
    from stacks.docs.stack_outputs import EXPORTERS, documented_outputs

    assert {"teams", "nodeGroupPlacement", "region"} <= set(cluster.outputs)
    assert set(cluster.outputs) - set(documented_outputs(*EXPORTERS["A cluster stack"])) == set()
    jobs_only = documented_outputs(*EXPORTERS["A jobs-only stack (a team's)"])
    assert set(vision.outputs) - set(jobs_only) == set() and set(jobs_only) - set(vision.outputs) <= {
        "tensorboardCommand"
    }


def test_each_stack_signs_its_kubernetes_requests_as_its_own_aws_provider(cluster) -> None:
    """The cluster stack exports its kubeconfig without its deployer's profile; a team's stack signs with its own."""
    shared = run_program("shared", config=_config("shared") | {"aws:profile": "admin"})
    assert shared.error is None, shared.error
    before = STACK_OUTPUTS[REFERENCE]
    try:
        STACK_OUTPUTS[REFERENCE] = {k: resolve(pulumi.Output.from_input(v)) for k, v in shared.outputs.items()}
        (user,) = json.loads(STACK_OUTPUTS[REFERENCE]["kubeconfig"])["users"]
        assert "env" not in user["user"]["exec"], user
        team = run_program("vision", config=_config("vision") | {"aws:profile": "member"})
        assert team.error is None, team.error
    finally:
        STACK_OUTPUTS[REFERENCE] = before
    for program, profile in ((shared, "admin"), (team, "member")):
        kubeconfig = program.one("pulumi:providers:kubernetes").inputs["kubeconfig"]
        (user,) = json.loads(kubeconfig if isinstance(kubeconfig, str) else kubeconfig["value"])["users"]
        assert user["user"]["exec"]["args"][-2:] == ["--profile", profile], user


#: The vision stack's own name, as the engine reads its last update's outputs (``stacks.last_update.stack_name``).
VISION = "organization/eks-training/vision"


def _vision_after(record: str, config: dict[str, Any]):
    """The vision stack's program with ``config``, after an update that recorded ``record`` as its configuration."""
    from stacks.last_update import CONFIG_OUTPUT

    STACK_OUTPUTS[VISION] = {CONFIG_OUTPUT: record}
    try:
        return run_program("vision", config=config)
    finally:
        STACK_OUTPUTS.pop(VISION)


def test_a_jobs_only_stack_records_its_configuration_for_the_next_update(cluster, vision) -> None:
    """Its ``deployedConfiguration`` holds what it was given, as a cluster stack's does, with no minor added (it
    deploys none): the next update reads it back, whichever kind of stack the file then makes."""
    from stacks.last_update import CONFIG_OUTPUT

    assert CONFIG_OUTPUT in vision.secret_outputs
    record = json.loads(resolve(pulumi.Output.from_input(vision.outputs[CONFIG_OUTPUT])))
    given = _config("vision")
    assert {k: json.loads(record[k]) if k.startswith(f"{PROJECT}:") else record[k] for k in given} == given, record
    assert "kubernetesVersion" not in json.loads(record[f"{PROJECT}:cluster"])


def test_a_cluster_stack_turned_jobs_only_says_at_pulumi_up_what_it_deletes(cluster) -> None:
    """The stack's last update made a cluster (shared's configuration, recorded under vision's name); its file now
    makes a jobs-only stack: ``pulumi up`` says, before anything is registered, that it deletes the cluster it made.
    Before, only ``plan --from`` said so."""
    from stacks.last_update import CONFIG_OUTPUT

    made = STACK_OUTPUTS[REFERENCE][CONFIG_OUTPUT]
    with pytest.raises(ConfigError, match="the update deletes the file system the stack made"):
        _vision_after(made, _config("vision"))  # its file system goes with the jobs' folders
    # the record kept it (storage.retainOnDelete): the update goes on, and its summary names what it deletes
    record = json.loads(made)
    record[f"{PROJECT}:storage"] = json.dumps(
        {**json.loads(record.get(f"{PROJECT}:storage", "{}")), "retainOnDelete": True}
    )
    program = _vision_after(json.dumps(record), _config("vision"))
    assert program.error is None, program.error
    said = [w for w in program.warnings if "the stack becomes a jobs-only stack" in w]
    assert len(said) == 1 and "deletes what it made (the cluster, its nodes" in said[0], program.warnings


def test_a_jobs_only_stack_turned_cluster_stack_says_at_pulumi_up_what_it_makes(cluster, vision) -> None:
    """The other way: the last update recorded vision's jobs-only configuration, and the file now makes a cluster
    (shared's configuration under vision's name). The summary names the new cluster; no warning asks for a minor
    the record could not hold (a jobs-only stack deploys none)."""
    from stacks.last_update import CONFIG_OUTPUT

    program = _vision_after(resolve(pulumi.Output.from_input(vision.outputs[CONFIG_OUTPUT])), _config("shared"))
    assert program.error is None, program.error
    said = [w for w in program.warnings if "cluster.stackReference" in w]
    assert len(said) == 1 and "-> unset" in said[0], program.warnings
    assert not [w for w in program.warnings if "holds no Kubernetes minor" in w], program.warnings
