"""Teams on one cluster and priorities per kind of work over what the program registers.

The queues' semantics (a team borrows idle quota and gives it back when the lender submits) run on the real Kueue in
the cluster tier (tests/cluster/test_box_admission.py,
test_a_team_borrows_idle_gpus_and_gives_them_back_when_the_lender_submits); here: every ClusterQueue's fields are ones
kueue v0.19.1's v1beta2 CRD serves, the cohort's quota is the fleet, each team's namespace has what its jobs need, bad
teams are refused before anything is registered, and the priority classes order stages first, then kinds.
"""

import re
from typing import Any

import pytest
import yaml

from components.admission import RECLAIM_WITHIN_COHORT
from stacks.box.kueue import crds
from stacks.config import ConfigError
from stacks.plan.admission import amount
from stacks.plan.queues import COHORT, KIND_OFFSET, RESOURCES, STAGE_STEP, TEAM_STAGES
from stacks.stackfile import plan_stack
from tests.harness import PROJECT, run_program, stack_config, stack_names

TEAMS = {
    "vision": {"quotaPercent": 50, "mayBorrow": False},
    "nlp": {"namespace": "team-nlp", "quotaPercent": 25, "mayLend": False},
}


def _with_teams(stack: str, teams: Any = None) -> dict[str, Any]:
    cfg = stack_config(stack)
    cfg[f"{PROJECT}:teams"] = TEAMS if teams is None else teams
    return cfg


@pytest.fixture(scope="module")
def g5_teams():
    return run_program("g5", config=_with_teams("g5"))


def _objects(program, kind: str) -> list[dict[str, Any]]:
    return [{**r.inputs, "_urn": r.urn} for r in program.registrations if r.type.endswith(f":{kind}")]


def _quantity(resource: str, value: str) -> int:
    return amount(resource, str(value))


def _schema_fields(schema: dict[str, Any], obj: Any, path: str = "") -> list[str]:
    """Paths of ``obj`` that the CRD's structural schema does not declare (the apiserver would prune or refuse them)."""
    out = []
    if isinstance(obj, dict):
        props = schema.get("properties")
        if props is None:
            return (
                out
                if schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema
                else [path]
            )
        for k, v in obj.items():
            if k not in props:
                out.append(f"{path}.{k}")
            else:
                out += _schema_fields(props[k], v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _schema_fields(schema.get("items") or {}, v, f"{path}[{i}]")
    return out


def test_every_cluster_queue_field_is_in_kueues_v1beta2_schema(g5_teams) -> None:
    """cohortName, borrowingLimit, lendingLimit, reclaimWithinCohort, borrowWithinCohort as kueue v0.19.1 serves them
    (its CRD from the pinned module), and the preemption policies among the values its enum allows."""
    crd = next(c for c in crds() if c["metadata"]["name"] == "clusterqueues.kueue.x-k8s.io")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2" and v["served"])
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    queues = _objects(g5_teams, "ClusterQueue")
    assert len(queues) == 3
    for q in queues:
        assert not _schema_fields(spec_schema, q["spec"]), _schema_fields(spec_schema, q["spec"])
        enum = spec_schema["properties"]["preemption"]["properties"]["reclaimWithinCohort"]["enum"]
        assert q["spec"]["preemption"]["reclaimWithinCohort"] in enum


def test_the_cohorts_quota_is_the_fleet_split_by_the_teams_shares(g5_teams) -> None:
    _, plan = plan_stack("g5")
    queues = {q["metadata"]["name"]: q["spec"] for q in _objects(g5_teams, "ClusterQueue")}
    assert set(queues) == {"training", "team-vision", "team-nlp"}
    assert {q["cohortName"] for q in queues.values()} == {COHORT}
    assert {q["preemption"]["reclaimWithinCohort"] for q in queues.values()} == {RECLAIM_WITHIN_COHORT} == {"Any"}
    assert plan.admission is not None
    for flavor in plan.admission.flavors:
        for resource in RESOURCES:
            total = sum(
                _quantity(resource, r["nominalQuota"])
                for q in queues.values()
                for f in q["resourceGroups"][0]["flavors"]
                if f["name"] == flavor.name
                for r in f["resources"]
                if r["name"] == resource
            )
            assert total == flavor.per_node[resource] * flavor.max_size, (flavor.name, resource)
    gpu = {
        name: next(
            r
            for f in q["resourceGroups"][0]["flavors"]
            if f["name"] == "gpu"
            for r in f["resources"]
            if r["name"] == "nvidia.com/gpu"
        )
        for name, q in queues.items()
    }
    # g5's GPU group: maxSize 2 of one GPU; vision 50 % = 1 node, nlp 25 % = 0 nodes (whole nodes), the stack 1
    assert {n: g["nominalQuota"] for n, g in gpu.items()} == {"team-vision": "1", "team-nlp": "0", "training": "1"}
    assert gpu["team-nlp"]["lendingLimit"] == gpu["team-vision"]["borrowingLimit"] == "0"
    assert "borrowingLimit" not in gpu["team-nlp"] and "lendingLimit" not in gpu["team-vision"]
    assert not any(k in gpu["training"] for k in ("borrowingLimit", "lendingLimit"))
    # each queue admits its own namespace's workloads only (a team cannot point a LocalQueue at another's quota)
    assert queues["team-nlp"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-nlp"}}
    assert queues["training"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "training"}}


def test_each_team_namespace_has_its_queue_claim_and_policies(g5_teams) -> None:
    local = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in _objects(g5_teams, "LocalQueue")}
    assert {("vision", "vision"), ("team-nlp", "nlp"), ("training", "training")} == set(local)
    assert local[("team-nlp", "nlp")]["spec"] == {"clusterQueue": "team-nlp"}
    namespaces = {n["metadata"]["name"]: n for n in _objects(g5_teams, "Namespace")}
    for team, ns in (("vision", "vision"), ("nlp", "team-nlp")):
        labels = namespaces[ns]["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline" and labels["eks-training/team"] == team
        claims = [c for c in _objects(g5_teams, "PersistentVolumeClaim") if c["metadata"]["namespace"] == ns]
        assert [c["spec"]["storageClassName"] for c in claims] == ["efs-shared"]
        policies = {
            p["metadata"]["name"]: p for p in _objects(g5_teams, "NetworkPolicy") if p["metadata"]["namespace"] == ns
        }
        deny = [
            p
            for p in policies.values()
            if p["spec"]["podSelector"] == {}
            and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
            and not p["spec"].get("ingress")
            and not p["spec"].get("egress")
        ]
        assert deny, f"{ns}: no default-deny policy"
        # the LocalQueue and the claim come after the namespace's policies (no pod of the team runs unprotected)
        queue = next(
            r
            for r in g5_teams.registrations
            if r.type.endswith(":LocalQueue") and r.inputs["metadata"]["namespace"] == ns
        )
        deny_urn = next(
            r.urn
            for r in g5_teams.registrations
            if r.type.endswith(":NetworkPolicy")
            and r.inputs["metadata"]["namespace"] == ns
            and r.inputs["spec"]["podSelector"] == {}
            and not r.inputs["spec"].get("egress")
        )
        assert g5_teams.depends_transitively(queue, deny_urn)


def test_teams_without_jobs_still_get_kueue_the_mpi_operator_and_their_queues() -> None:
    cfg = _with_teams("g5")
    cfg.pop(f"{PROJECT}:jobs")
    cfg.pop(f"{PROJECT}:datasets", None)
    program = run_program("g5", config=cfg)
    types = {r.type for r in program.registrations}
    assert "kubernetes:helm.sh/v3:Release" in types
    assert {q["metadata"]["name"] for q in _objects(program, "LocalQueue")} == {"training", "vision", "nlp"}
    assert any(r.name.endswith("-mpi-operator") for r in program.registrations)
    # every kind at every stage a jobs-only stack may use
    classes = {p["metadata"]["name"] for p in _objects(program, "WorkloadPriorityClass")}
    assert len(classes) == len(KIND_OFFSET) * TEAM_STAGES


@pytest.mark.parametrize(
    "teams, fragments",
    [
        pytest.param(
            {"a": {"quotaPercent": 60}, "b": {"quotaPercent": 50}},
            ["eks-training:teams: the teams' quotaPercent add up to 110 (a 60, b 50)", "lower them"],
            id="shares",
        ),
        pytest.param(
            {"a": {"quotaPercent": 10, "namespace": "training"}},
            ["eks-training:teams.a.namespace: 'training' is the stack's own training namespace"],
            id="training-ns",
        ),
        pytest.param(
            {"a": {"quotaPercent": 10, "namespace": "kueue-system"}},
            ["eks-training:teams.a.namespace: 'kueue-system' is a namespace of Kubernetes or of a controller"],
            id="reserved-ns",
        ),
        pytest.param(
            {"a": {"quotaPercent": 10, "namespace": "x"}, "b": {"quotaPercent": 10, "namespace": "x"}},
            ["eks-training:teams.b.namespace: 'x' is also the namespace of eks-training:teams.a"],
            id="same-ns",
        ),
        pytest.param({"Team_A": {"quotaPercent": 10}}, ["eks-training:teams.Team_A: the name must be"], id="name"),
        pytest.param({"a": {"quotaPercent": 0}}, ["eks-training:teams.a.quotaPercent"], id="zero"),
        pytest.param({"a": {"share": 10}}, ["eks-training:teams.a"], id="unknown-key"),
        pytest.param(
            {"a": {"quotaPercent": 25, "mayBorrow": False}},
            [
                "eks-training:teams.a.quotaPercent: the team's share is no whole node of any worker group "
                "(eks-training:nodeGroups.gpu.maxSize 2) and eks-training:teams.a.mayBorrow is false"
            ],
            id="idle",
        ),
        pytest.param(
            {"a": {"quotaPercent": 50, "mayLend": False}, "b": {"quotaPercent": 50, "mayLend": False}},
            [
                "eks-training:jobs.train.nodes: the job asks ",
                " on nodeGroups.gpu; the stack's own queue holds 0 there",
                "not lending: eks-training:teams.a.mayLend, eks-training:teams.b.mayLend",
            ],
            id="own-queue-starved",
        ),
    ],
)
def test_bad_teams_are_refused_before_anything_is_registered(teams, fragments) -> None:
    p = run_program("g5", config=_with_teams("g5", teams), expect_error=True)
    assert isinstance(p.error, ConfigError), p.error
    for fragment in fragments:
        assert fragment in str(p.error), str(p.error)
    assert p.registrations == []


def test_a_teams_members_get_its_namespace_and_nothing_else(g5_teams) -> None:
    """Members of a team (not cluster admins) must reach the cluster to deploy the team's jobs-only stack: an access
    entry with EKS's admin policy scoped to the team's namespace and the team's Kubernetes group, which is bound there
    to the custom resources the jobs-only stack makes and reads. Without members: no access entry, no binding."""
    arn = "arn:aws:iam::123456789012:role/VisionTeam"
    teams = {**TEAMS, "vision": {**TEAMS["vision"], "memberRoleArns": [arn]}}
    p = run_program("g5", config=_with_teams("g5", teams))
    (entry,) = p.one("eks:index:Cluster").inputs["accessEntries"].values()
    assert entry["principalArn"] == arn and entry["kubernetesGroups"] == ["eks-training-team-vision"]
    (policy,) = entry["accessPolicies"].values()
    assert policy["policyArn"].endswith(":cluster-access-policy/AmazonEKSAdminPolicy")
    assert policy["accessScope"] == {"type": "namespace", "namespaces": ["vision"]}
    (binding,) = [b for b in _objects(p, "RoleBinding") if b["metadata"]["name"] == "eks-training-team-members"]
    assert binding["metadata"]["namespace"] == "vision"
    assert binding["subjects"] == [
        {"kind": "Group", "name": "eks-training-team-vision", "apiGroup": "rbac.authorization.k8s.io"}
    ]
    (role,) = [r for r in _objects(p, "ClusterRole") if r["metadata"]["name"] == binding["roleRef"]["name"]]
    granted = {
        (g, res, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for res in rule["resources"]
        for v in rule["verbs"]
    }
    assert {("kubeflow.org", "mpijobs", "create"), ("kueue.x-k8s.io", "workloads", "list")} <= granted
    assert not any(v in ("create", "delete", "update", "patch") for g, _r, v in granted if g == "kueue.x-k8s.io")
    assert not g5_teams.one("eks:index:Cluster").inputs.get("accessEntries")
    assert not [b for b in _objects(g5_teams, "RoleBinding") if b["metadata"]["name"] == "eks-training-team-members"]
    bad = run_program(
        "g5", config=_with_teams("g5", {"a": {"quotaPercent": 10, "memberRoleArns": ["VisionTeam"]}}), expect_error=True
    )
    assert isinstance(
        bad.error, ConfigError
    ) and "eks-training:teams.a.memberRoleArns[0]: 'VisionTeam' is not an IAM role ARN" in str(bad.error), bad.error


def test_teams_need_the_efs_backend() -> None:
    """A stack with teams and FSx for Lustre (p5's storage) is refused offline with the reason and the fix, before
    anything is registered; the same teams on EFS (p5 with storage.backend efs) are not."""
    p = run_program("p5", config=_with_teams("p5"), expect_error=True)
    assert isinstance(p.error, ConfigError), p.error
    (problem,) = [line for line in str(p.error).splitlines() if "eks-training:teams:" in line]
    assert (
        "eks-training:storage.backend fsx" in problem
        and "installs its client only by the node groups of its own jobs" in problem
        and "one static volume binds one claim" in problem
        and "use backend efs" in problem
    ), problem
    assert p.registrations == []
    config = _with_teams("p5")
    storage = {k: v for k, v in (config.get(f"{PROJECT}:storage") or {}).items() if k not in ("backend", "fsx")}
    config[f"{PROJECT}:storage"] = {**storage, "backend": "efs"}
    datasets = config.get(f"{PROJECT}:datasets") or {}
    assert not [d for d in datasets.values() if str((d or {}).get("source", "")).endswith("/")], (
        "p5's datasets would need FSx's data repository"
    )
    ok = run_program("p5", config=config)
    assert ok.error is None, ok.error
    assert [
        r
        for r in ok.registrations
        if r.type.endswith(":ClusterQueue") and r.inputs["metadata"]["name"] == "team-vision"
    ]


# --- priorities per kind -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", stack_names())
def test_priorities_order_stages_first_then_kinds(stack: str) -> None:
    """Every job and health check of every preset: a job outranks each job after it whatever the kinds; within a
    stage, health check > evaluation > training > experiment; each class is the one its kind and stage name."""
    _, plan = plan_stack(stack)
    a = plan.admission
    assert a is not None
    assert max(KIND_OFFSET.values()) - min(KIND_OFFSET.values()) < STAGE_STEP
    bench = set(plan.config.benchmark.experiments) if plan.config.benchmark else set()
    for name, job in plan.jobs.items():
        kind = "experiment" if name in bench else job.config.purpose
        assert f"-{kind}-stage-" in a.job_priority[name], (name, a.job_priority[name])
        for before in job.after:
            assert a.priorities[a.job_priority[before]] > a.priorities[a.job_priority[name]], (before, name)
            if before in a.check_priority:
                assert a.priorities[a.check_priority[before]] > a.priorities[a.job_priority[name]]
        if name in a.check_priority:
            assert a.priorities[a.check_priority[name]] > a.priorities[a.job_priority[name]]
    assert set(a.priorities) == {*a.job_priority.values(), *a.check_priority.values()}


def test_the_presets_queue_each_kind_of_work() -> None:
    kinds = set()
    for stack in ("dev", "benchmark"):
        _, plan = plan_stack(stack)
        assert plan.admission is not None
        kinds |= {
            c.split("eks-training-")[1].rsplit("-stage-", 1)[0]
            for c in (*plan.admission.job_priority.values(), *plan.admission.check_priority.values())
        }
    assert kinds == set(KIND_OFFSET), kinds


def test_the_plan_report_shows_the_teams_queues() -> None:
    from stacks.config import load_config
    from stacks.plan import build_plan
    from stacks.plan.report import _queues

    queues = _queues(build_plan(load_config(PROJECT, "g5", _with_teams("g5"))))
    assert queues is not None and queues["cohort"] == COHORT
    assert queues["teams"]["nlp"]["localQueue"] == "team-nlp/nlp" and queues["teams"]["vision"]["nodes"]["gpu"] == 1
    yaml.safe_dump(queues)  # printable


def test_an_elastic_job_is_checked_against_the_own_queue_at_its_nodes() -> None:
    """Kueue admits a pytorch job's Job at its parallelism, its ``nodes``; it grows past them only through a
    ``pulumi up`` with larger ``nodes``, checked again then. So a job of 1 node whose maxNodes (by default its
    group's maxSize, 2) the stack's own queue cannot hold is admitted; one whose nodes it cannot hold is refused,
    naming nodes."""
    cfg = _with_teams("g5", {"a": {"quotaPercent": 25, "mayLend": False}, "b": {"quotaPercent": 25, "mayLend": False}})
    cfg[f"{PROJECT}:jobs"]["train"]["nodes"] = 1
    assert run_program("g5", config=cfg).error is None  # its own queue holds 1 of the group's 2 nodes
    full = _with_teams("g5", {"a": {"quotaPercent": 50, "mayLend": False}, "b": {"quotaPercent": 50, "mayLend": False}})
    full[f"{PROJECT}:jobs"]["train"]["nodes"] = 1
    p = run_program("g5", config=full, expect_error=True)
    assert isinstance(p.error, ConfigError), p.error
    assert re.search(r"eks-training:jobs\.train\.nodes: the job asks \S+ \S+ on nodeGroups\.gpu", str(p.error)), str(
        p.error
    )
    assert "maxNodes" not in str(p.error)
