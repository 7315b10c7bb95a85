"""The benchmark as the real program registers it under mocks: one job per experiment, none waiting for another,
the collector after all of them, its write-only results role and read-only Role, the results bucket kept on
destroy, and what the collector is told to collect."""

import json
import sys
from typing import Any

import pytest

from stacks.config.benchmark import RUN_ENV, merged_experiments
from tests.harness import JOB_OBJECT_TYPES, PROJECT, REPO, Program, Registration, resolve, run_program, stack_config

STACK = "benchmark"


def _experiments() -> dict[str, dict[str, Any]]:
    merged, problems = merged_experiments(stack_config(STACK)[f"{PROJECT}:benchmark"]["experiments"])
    assert not problems
    return merged


def _experiment_jobs(p: Program) -> dict[str, Registration]:
    out = {}
    for name in _experiments():
        (job,) = [
            r
            for r in p.registrations
            # named -<job>-job, -<job>-mpijob: the object's kind in lower case (JobObject.kubectl_name)
            if r.type in JOB_OBJECT_TYPES and r.name.endswith(f"-{name}-{r.type.rpartition(':')[2].lower()}")
        ]
        out[name] = job
    return out


def _collector(p: Program) -> Registration:
    return p.one("kubernetes:batch/v1:Job", lambda r: r.name.endswith("-bench-job"))


def _collector_config(p: Program) -> dict[str, Any]:
    cm = p.one("kubernetes:core/v1:ConfigMap", lambda r: r.name.endswith("-bench-config"))
    return json.loads(cm.inputs["data"]["benchmark.json"])


@pytest.mark.parametrize("preview", [False, True])
def test_one_job_per_experiment_and_none_waits_for_another(program_for, preview: bool) -> None:
    p: Program = program_for(STACK, preview)
    jobs = _experiment_jobs(p)
    assert set(jobs) == set(_experiments()) and len(jobs) == 4
    for name, job in jobs.items():
        assert job.inputs["metadata"]["name"] == name or preview
        for other, other_job in jobs.items():
            if other != name:
                assert not p.depends_transitively(job, other_job.urn), f"{name} waits for {other}"
        template = (
            job.inputs["spec"]["template"]
            if job.type.endswith(":Job")
            else job.inputs["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
        )
        # an MPI launcher waits for its own workers only (tests/mock/test_mpi_launcher_wait.py), after it created its
        # output folder (tests/mock/test_output_folder.py)
        waits = [c["name"] for c in template["spec"].get("initContainers") or [] if c["name"] != "output-folder"]
        assert waits == ([] if job.type.endswith(":Job") else ["wait-for-workers"]), f"{name} waits: {waits}"
    # the overrides of `from`: sizes differ, the rest is the base's
    sizes = {n: j.inputs["spec"]["completions"] for n, j in jobs.items() if j.type.endswith(":Job")}
    assert sizes == {"resnet50-1-worker": 1, "resnet50-2-workers": 2, "resnet50-4-workers": 4}
    assert jobs["nccl-allreduce-2-nodes"].inputs["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2


@pytest.mark.parametrize("preview", [False, True])
def test_the_collector_comes_after_every_experiment(program_for, preview: bool) -> None:
    p: Program = program_for(STACK, preview)
    collector = _collector(p)
    for name, job in _experiment_jobs(p).items():
        assert p.depends_transitively(collector, job.urn), f"the collector does not wait for {name}"
        assert not p.depends_transitively(job, collector.urn)
    association = p.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", lambda r: "-bench-writer" in r.name)
    assert p.depends_transitively(collector, association.urn), "S3 credentials exist before the collector starts"
    assert collector.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_the_results_role_may_only_write_the_runs_prefix(program_for) -> None:
    p: Program = program_for(STACK, False)
    bucket = p.one("aws:s3/bucket:Bucket", lambda r: r.name.endswith("-bench-results"))
    policy = json.loads(
        p.one("aws:iam/rolePolicy:RolePolicy", lambda r: r.name.endswith("-bench-writer-write")).inputs["policy"]
    )
    run = _collector_config(p)["run"]
    assert policy["Statement"] == [
        {
            "Sid": "WriteResults",
            "Effect": "Allow",
            "Action": ["s3:PutObject"],
            "Resource": f"arn:aws:s3:::{bucket.outputs['bucket']}/benchmarks/{run}/*",
        }
    ]
    role = p.one("aws:iam/role:Role", lambda r: r.name.endswith("-bench-writer-role"))
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == ["benchmark-collector"]
    assert not [r for r in p.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if "-bench-" in r.name]


def test_the_collector_reads_the_experiments_and_writes_nothing_in_the_cluster(program_for) -> None:
    p: Program = program_for(STACK, False)
    role = p.one("kubernetes:rbac.authorization.k8s.io/v1:Role", lambda r: r.name.endswith("-bench-role"))
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): r for r in role.inputs["rules"]}
    assert rules[(("batch",), ("jobs",))]["resourceNames"] == [
        "resnet50-1-worker",
        "resnet50-2-workers",
        "resnet50-4-workers",
    ]
    assert rules[(("kubeflow.org",), ("mpijobs",))]["resourceNames"] == ["nccl-allreduce-2-nodes"]
    assert {v for r in role.inputs["rules"] for v in r["verbs"]} == {"get", "list"}
    assert rules[(("",), ("pods",))]["verbs"] == ["list"] and rules[(("",), ("pods/log",))]["verbs"] == ["get"]
    pod = _collector(p).inputs["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    shared = next(m for m in c["volumeMounts"] if m["mountPath"] == "/data")
    assert shared["readOnly"] is True and c["securityContext"]["readOnlyRootFilesystem"] is True
    # the API token only in the collector's container, through the projected volume the waits use
    assert pod["automountServiceAccountToken"] is False and pod["serviceAccountName"] == "benchmark-collector"
    assert any(v.get("projected") for v in pod["volumes"]) and any(
        m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount" for m in c["volumeMounts"]
    )


def test_a_created_results_bucket_outlives_the_stack(program_for) -> None:
    p: Program = program_for(STACK, False)
    bench = [r for r in p.registrations if r.name.startswith("eks-training-benchmark-bench-results")]
    assert {r.type for r in bench} == {
        "aws:s3/bucket:Bucket",
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "aws:s3/bucketPolicy:BucketPolicy",
    }
    assert all(r.retain_on_delete for r in bench), "pulumi destroy keeps the results"
    assert p.one("aws:s3/bucket:Bucket", lambda r: r.name.endswith("-bench-results")).inputs["forceDestroy"] is False


def test_what_the_collector_collects(program_for) -> None:
    p: Program = program_for(STACK, False)
    cfg = _collector_config(p)
    assert cfg["prefix"] == "benchmarks/" and cfg["namespace"] == "training"
    assert cfg["keep"] == {"outputs": ["*.json"], "maxFileMib": 1024}
    for name, exp in cfg["experiments"].items():
        assert exp["outputDir"] == f"/data/benchmarks/{cfg['run']}/{name}"
        assert exp["config"]["experiment"] == name and exp["config"]["instanceType"] == "g6.xlarge"
        assert "@sha256:" in exp["config"]["imageUri"]
        assert exp["resource"] == ("mpijobs" if exp["config"]["kind"] == "mpi" else "jobs")
    assert cfg["experiments"]["resnet50-4-workers"]["config"]["nodes"] == 4
    assert (
        cfg["cluster"]["nodeGroups"]["gpu"]["instanceTypes"] == ["g6.xlarge"]
        and cfg["cluster"]["region"] == "us-east-1"
    )
    assert cfg["storage"]["backend"] == "efs" and cfg["storage"]["fileSystemId"].startswith("fs-")
    # the collector's command is one its script accepts
    sys.path.insert(0, str(REPO / "training"))
    try:
        import collect_results
    finally:
        sys.path.remove(str(REPO / "training"))
    (c,) = _collector(p).inputs["spec"]["template"]["spec"]["containers"]
    assert c["command"][:2] == ["python", "/app/collect_results.py"]
    args = collect_results.parse_args(c["command"][2:])
    assert args.region == "us-east-1" and args.timeout_seconds == 3 * 3600


def test_the_stack_output_tells_the_driver_where_the_run_is(program_for) -> None:
    p: Program = program_for(STACK, False)
    out = {k: resolve(v) for k, v in resolve(p.outputs["benchmark"]).items()}
    run = _collector_config(p)["run"]
    assert out["run"] == run and out["prefix"] == f"benchmarks/{run}/"
    assert out["resultsUri"] == f"s3://{out['bucket']}/benchmarks/{run}/"
    assert set(out["experiments"]) == set(_experiments()) and out["region"] == "us-east-1"


def test_the_driver_names_the_run_and_an_existing_bucket_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUN_ENV, "run-20260521-101500")
    cfg = stack_config(STACK)
    cfg[f"{PROJECT}:benchmark"] = {**cfg[f"{PROJECT}:benchmark"], "results": {"s3Path": "s3://team-results/eks/bench/"}}
    p = run_program(STACK, config=cfg)
    assert not [b for b in p.of_type("aws:s3/bucket:Bucket") if "-bench-" in b.name], (
        "an existing bucket is not created"
    )
    policy = json.loads(
        p.one("aws:iam/rolePolicy:RolePolicy", lambda r: r.name.endswith("-bench-writer-write")).inputs["policy"]
    )
    assert policy["Statement"][0]["Resource"] == "arn:aws:s3:::team-results/eks/bench/run-20260521-101500/*"
    assert resolve(resolve(p.outputs["benchmark"])["resultsUri"]) == "s3://team-results/eks/bench/run-20260521-101500/"
    jobs = _experiment_jobs(p)
    env = {
        e["name"]: e.get("value")
        for e in jobs["resnet50-1-worker"].inputs["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["OUTPUT_DIR"] == "/data/benchmarks/run-20260521-101500/resnet50-1-worker"


def test_the_default_run_id_follows_the_experiments() -> None:
    """A plain pulumi up of an unchanged benchmark keeps its run (nothing re-created); a changed one gets another."""
    cfg = stack_config(STACK)
    first = json.loads(
        run_program(STACK, config=cfg)
        .one("kubernetes:core/v1:ConfigMap", lambda r: r.name.endswith("-bench-config"))
        .inputs["data"]["benchmark.json"]
    )["run"]
    again = json.loads(
        run_program(STACK, config=cfg)
        .one("kubernetes:core/v1:ConfigMap", lambda r: r.name.endswith("-bench-config"))
        .inputs["data"]["benchmark.json"]
    )["run"]
    bench = cfg[f"{PROJECT}:benchmark"]
    changed = dict(bench["experiments"])
    changed["resnet50-1-worker"] = {**changed["resnet50-1-worker"], "args": ["--model", "resnet18"]}
    cfg[f"{PROJECT}:benchmark"] = {**bench, "experiments": changed}
    other = json.loads(
        run_program(STACK, config=cfg)
        .one("kubernetes:core/v1:ConfigMap", lambda r: r.name.endswith("-bench-config"))
        .inputs["data"]["benchmark.json"]
    )["run"]
    assert first == again != other
