"""A job's ``code`` from a folder of the user's project, as the real program registers it under mocks: one private
bucket, one object per distinct folder content keyed by its hash, a role per job that reads exactly its object, the
init container that downloads it, and the run id following the content. Bad folders stop the program before any
resource. (The rules over every stack, names, ARNs' partition, pod security, hold for the stress variant, whose first
job has a code folder: tests/variants.py.)"""

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from components.code_folder import code_hash, code_key, write_code_zip
from components.iam import s3_tls_only_bucket_policy
from components.workloads.identity import FETCH_CONTAINER
from components.workloads.spec import WORKSPACE
from stacks.config import ConfigError, load_config
from stacks.plan import build_plan
from tests.harness import JOB_OBJECT_TYPES, PROJECT, REPO, Program, run_program, stack_config, stack_names
from tests.variants import HELD_OUT

STACK = "workshop"
#: Every stack as shipped and as its stress variant, and every held-out stack (tests/variants.py).
VARIANT_CASES = [
    *[pytest.param(v, s, id=f"{s}-{v}") for s in stack_names() for v in ("shipped", "stress")],
    *[pytest.param("held-out", s, id=f"{s}-held-out") for s in HELD_OUT],
]


def _project(root: Path) -> Path:
    """A user's project folder: ``src`` (a script and a helper) and ``tools`` (another program)."""
    (root / "src" / "lib").mkdir(parents=True)
    (root / "src" / "fit.py").write_text("from lib import util\nprint(util.X)\n")
    (root / "src" / "lib" / "util.py").write_text("X = 1\n")
    (root / "tools").mkdir()
    (root / "tools" / "prep.sh").write_text("#!/bin/sh\necho prep\n")
    (root / "tools" / "prep.sh").chmod(0o755)
    return root


def _config(**codes: str) -> dict[str, Any]:
    """The workshop stack with a pytorch job ``fit`` and command jobs ``hello`` and ``prep``, with ``codes``."""
    cfg = stack_config(STACK)
    jobs: dict[str, Any] = {
        "fit": {"kind": "pytorch", "script": "fit.py", "nodes": 2},
        "hello": {"kind": "command", "command": ["python", "fit.py"]},
        "prep": {"kind": "command", "command": ["./prep.sh"]},
    }
    for job, code in codes.items():
        jobs[job]["code"] = code
    cfg[f"{PROJECT}:jobs"] = jobs
    return cfg


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="module")
def program(project: Path) -> Program:
    p = run_program(
        STACK, config=_config(fit="./src", hello="src", prep="tools"), project_dir=project, expect_error=True
    )
    assert p.error is None, p.error
    return p


def _job(p: Program, name: str) -> Any:
    return p.one("kubernetes:batch/v1:Job", lambda r: r.name.endswith(f"-{name}-job"))


def _bucket(p: Program) -> Any:
    return p.one("aws:s3/bucket:Bucket", lambda r: "job-code" in r.name)


def test_one_private_bucket_and_one_object_per_distinct_content(
    program: Program, project: Path, tmp_path: Path
) -> None:
    code = program.one("eks-training:index:JobCode")
    bucket = _bucket(program)
    assert bucket.parent == code.urn
    bucket_name = bucket.outputs["bucket"]
    sse = program.one(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        lambda r: r.parent == code.urn,
    )
    assert sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "AES256"}
    pab = program.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", lambda r: r.parent == code.urn)
    assert all(
        pab.inputs[k] is True
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    tls = program.one("aws:s3/bucketPolicy:BucketPolicy", lambda r: r.parent == code.urn)
    assert json.loads(tls.inputs["policy"]) == json.loads(s3_tls_only_bucket_policy(bucket.outputs["arn"]))
    objects = [o for o in program.of_type("aws:s3/bucketObjectv2:BucketObjectv2") if o.parent == code.urn]
    hashes = {code_hash(str(project / "src")), code_hash(str(project / "tools"))}
    # fit and hello share ./src (written two ways): one object; prep's tools another
    assert sorted(o.inputs["key"] for o in objects) == sorted(code_key(h) for h in hashes)
    for o in objects:
        assert o.inputs["bucket"] == bucket_name and o.inputs["serverSideEncryption"] == "AES256"
        digest = o.inputs["key"][len("code/") : -len(".zip")]
        folder = project / ("src" if digest == code_hash(str(project / "src")) else "tools")
        assert write_code_zip(str(folder), str(tmp_path / "expected.zip")) == digest
        assert Path(o.inputs["source"].path).read_bytes() == (tmp_path / "expected.zip").read_bytes(), (
            "the uploaded file is the folder's deterministic zip"
        )
    assert len([b for b in program.of_type("aws:s3/bucket:Bucket") if "job-code" in b.name]) == 1


@pytest.mark.parametrize("job, folder", [("fit", "src"), ("hello", "src"), ("prep", "tools")])
def test_each_job_reads_exactly_its_object_and_downloads_it(
    program: Program, project: Path, job: str, folder: str
) -> None:
    bucket = _bucket(program).outputs["bucket"]
    key = code_key(code_hash(str(project / folder)))
    policy = json.loads(
        program.one("aws:iam/rolePolicy:RolePolicy", lambda r: r.name.endswith(f"-{job}-code-policy")).inputs["policy"]
    )
    assert policy["Statement"] == [
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": f"arn:aws:s3:::{bucket}/{key}"}
    ], "the object, and nothing else: no listing, no other key"
    pod = _job(program, job).inputs["spec"]["template"]["spec"]
    (fetch,) = [c for c in pod["initContainers"] if c["name"] == "fetch-code"]
    assert fetch["command"] == [
        "python",
        "/app/fetch_code.py",
        "--source",
        f"s3://{bucket}/{key}",
        "--dest",
        "/workspace",
    ]
    (worker,) = pod["containers"]
    assert worker["workingDir"] == "/workspace"
    obj = program.one("aws:s3/bucketObjectv2:BucketObjectv2", lambda r: r.inputs.get("key") == key)
    assert program.depends_transitively(_job(program, job), obj.urn), (
        "the pods are created after their code is uploaded"
    )


def test_the_run_follows_the_content_not_the_folder(tmp_path: Path) -> None:
    """The run id (the output folder, where the launcher records a finished run) is the folder's content: new code
    is a new run on the cluster, the same code in another place the same run."""

    def plan_of(project: Path, code: str) -> Any:
        return build_plan(load_config(PROJECT, STACK, _config(fit=code), project_dir=project)).jobs["fit"]

    a = plan_of(_project(tmp_path / "a"), "./src")
    moved = _project(tmp_path / "b")
    shutil.move(str(moved / "src"), str(moved / "code"))
    b = plan_of(moved, "code")
    assert a.code_hash == b.code_hash and a.run_id == b.run_id and a.output_dir == b.output_dir
    (moved / "code" / "lib" / "util.py").write_text("X = 2\n")
    c = plan_of(moved, "code")
    assert c.code_hash != a.code_hash and c.run_id != a.run_id
    assert a.code_folder == tmp_path / "a" / "src" and c.code_folder == moved / "code"


def test_stacks_without_code_folders_have_no_code_bucket(program_for: Any) -> None:
    assert program_for(STACK, False).of_type("eks-training:index:JobCode") == []


@pytest.mark.parametrize(
    "code, prepare, message",
    [
        ("./src", "missing", "eks-training:jobs.fit.code: the folder ./src does not exist in the project folder"),
        ("./scr", "", "eks-training:jobs.fit.code: the folder ./scr does not exist in the project folder"),
        ("scr", "", "; did you mean src? give a folder of your"),
        ("./scr", "", "; did you mean ./src? give a folder of your"),
        (
            "./src",
            "empty",
            "eks-training:jobs.fit.code: the folder ./src holds no file to upload (left out: .git, .venv",
        ),
        (
            "src/fit.py",
            "",
            "eks-training:jobs.fit.code: src/fit.py is a file; give a folder of your project, the one that holds it "
            "(src), and the file as the job's script or command",
        ),
        ("../src", "", "eks-training:jobs.fit.code: '../src' is neither a folder of your project"),
        ("/abs/src", "", "eks-training:jobs.fit.code: '/abs/src' is neither a folder of your project"),
        (
            "https://example.com/src.zip",
            "",
            "is neither a folder of your project (relative to the folder of Pulumi.yaml",
        ),
        ("s3://bucket/src.zip", "", "'s3://bucket/src.zip' is not an s3://bucket/prefix/ URI"),
    ],
)
def test_a_bad_code_folder_stops_the_program_before_any_resource(
    tmp_path: Path, code: str, prepare: str, message: str
) -> None:
    project = _project(tmp_path / "p")
    if prepare == "missing":
        shutil.rmtree(project / "src")
    elif prepare == "empty":
        shutil.rmtree(project / "src")
        (project / "src" / "__pycache__").mkdir(parents=True)
        (project / "src" / "__pycache__" / "fit.cpython-311.pyc").write_bytes(b"\0")  # what a local run leaves
    p = run_program(STACK, config=_config(fit=code), project_dir=project, expect_error=True)
    assert isinstance(p.error, ConfigError), p.error
    (problem,) = [m for m in p.error.problems if "jobs.fit.code" in m]
    assert message in problem, problem
    assert "give a folder of your" in problem or "s3://" in problem, "the fix is named"
    assert [r for r in p.registrations if r.custom] == [], "nothing registered"


def test_the_stress_variant_runs_the_rules_over_a_code_folder() -> None:
    """The rules over every stack (names, ARNs' partition, pod security...) see a job with a code folder: the stress
    variant's first job has one (tests/variants.py)."""
    from tests.variants import STRESS_CODE_FOLDER, stress_program

    p = stress_program(STACK)
    (code,) = p.of_type("eks-training:index:JobCode")
    (obj,) = [o for o in p.of_type("aws:s3/bucketObjectv2:BucketObjectv2") if o.parent == code.urn]
    assert obj.inputs["key"] == code_key(code_hash(str(REPO / STRESS_CODE_FOLDER)))
    policies = [
        json.loads(r.inputs["policy"])
        for r in p.of_type("aws:iam/rolePolicy:RolePolicy")
        if r.name.endswith("-code-policy")
    ]
    assert [pol["Statement"][0]["Resource"].startswith("arn:aws-cn:s3:::") for pol in policies] == [True]


def _pod_templates(job: Any) -> dict[str, dict[str, Any]]:
    """A job object's pod templates by role: an MPIJob's launcher and workers, a Job's one."""
    spec = job.inputs["spec"]
    if "mpiReplicaSpecs" in spec:
        return {role: replica["template"] for role, replica in spec["mpiReplicaSpecs"].items()}
    return {"pod": spec["template"]}


def _fetches(template: dict[str, Any]) -> bool:
    return any(c["name"] == FETCH_CONTAINER for c in template["spec"].get("initContainers") or [])


def code_problems(program: Program) -> list[str]:
    """Pods of a job with code that would not find it: a pod template of the job without the download, a main
    container without ``/workspace`` mounted or not started there, a pod without the job's service account (whose
    Pod Identity reads the code), ``mpirun`` without ``--wdir /workspace`` (the ranks, on the workers), or an MPI
    worker that would not retry a failed download (MPI Operator v0.8.0 never replaces a failed worker pod)."""
    found = []
    for job in (r for r in program.registrations if r.type in JOB_OBJECT_TYPES):
        templates = _pod_templates(job)
        fetching = {role for role, t in templates.items() if _fetches(t)}
        if not fetching:
            continue
        if fetching != set(templates):
            found.append(f"{job.name}: {sorted(set(templates) - fetching)} run the program without its code")
        accounts = {t["spec"].get("serviceAccountName") for t in templates.values()}
        if len(accounts) != 1 or None in accounts:
            found.append(f"{job.name}: service accounts {accounts}, not the job's one in every pod")
        for role, t in templates.items():
            (main,) = t["spec"]["containers"]
            if {"name": "workspace", "mountPath": WORKSPACE} not in main.get("volumeMounts", []):
                found.append(f"{job.name} ({role}): {WORKSPACE} not mounted")
            launches = "mpiReplicaSpecs" not in job.inputs["spec"] or role == "Launcher"
            if launches and main.get("workingDir") != WORKSPACE:
                found.append(f"{job.name} ({role}): starts in {main.get('workingDir')}, not {WORKSPACE}")
            replicas = job.inputs["spec"].get("mpiReplicaSpecs") or {}
            if role == "Worker" and replicas["Worker"].get("restartPolicy") != "OnFailure":
                found.append(f"{job.name}: a worker whose download failed would never be replaced (not OnFailure)")
            if role == "Launcher":
                at = main["command"].index("--wdir") if "--wdir" in main["command"] else -1
                if at < 0 or main["command"][at + 1] != WORKSPACE:
                    found.append(f"{job.name}: mpirun starts the ranks outside {WORKSPACE}")
    return found


def test_the_code_check_finds_an_mpi_worker_without_the_code() -> None:
    """Control: the stress variant of the MPI stack (its first job, an MPI job, has a code folder) with the download
    taken out of the workers' template."""
    from tests.variants import stress_program

    p = copy.deepcopy(stress_program("mpi-horovod"))
    (job,) = [
        r for r in p.registrations if r.type.endswith(":MPIJob") and any(map(_fetches, _pod_templates(r).values()))
    ]
    assert code_problems(p) == []
    del job.inputs["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["initContainers"]
    assert code_problems(p) == [f"{job.name}: ['Worker'] run the program without its code"]


@pytest.mark.parametrize("variant, stack", VARIANT_CASES)
def test_every_pod_of_a_job_with_code_finds_it(variant: str, stack: str) -> None:
    """Every stack, its stress variant (whose first job has a code folder) and the held-out stacks: every pod that
    runs a job's program downloads the job's code and starts in it, an MPI job's workers included (``mpirun`` runs
    the ranks there, from the launcher's command)."""
    from tests.variants import held_out_program, stress_program

    program = {"shipped": run_program, "stress": stress_program, "held-out": held_out_program}[variant](stack)
    assert code_problems(program) == []
