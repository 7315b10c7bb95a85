"""TrainingImage / ImageBuild tests.

* The dynamic provider's ``create``/``diff``/``read``/``delete`` run against a real ``moto_server``
  process (boto3 reaches it through ``AWS_ENDPOINT_URL``; boto3 is not patched).
* What moto does for CodeBuild (moto 5.2.5, observed): ``start_build`` records a build with
  ``buildStatus`` IN_PROGRESS / phase QUEUED and *ignores* the source and environment overrides (the
  returned record shows neither); the first ``batch_get_builds`` flips the build to SUCCEEDED /
  COMPLETED and appends 9 SUCCEEDED phases (every further call appends 9 more); ``stop_build``
  returns a STOPPED record, but the next ``batch_get_builds`` reports SUCCEEDED again;
  ``logs.deepLink`` is a fixed placeholder URL. moto never pushes an image, so the tests do the push
  the real build would do (``ecr.put_image``) while ``create`` waits. The overrides are checked on the
  wire through moto's request recorder.
* A failing build cannot be produced by moto, so the failure path is tested (a) with the pure
  ``evaluate_build``/``format_build_failure`` on a real moto build record turned into a failed one,
  and (b) end-to-end through ``create`` with a provider subclass whose CodeBuild client is the real
  moto client except that ``batch_get_builds`` reports that failed record.
* Build-context hashing, the deterministic zip, image-reference validation, policies, and the
  component's children under ``pulumi.runtime.set_mocks``.
"""

import base64
import copy
import io
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Optional

import pulumi
import pytest
import yaml
from pulumi.runtime import mocks as pmocks

REPO = Path(__file__).resolve().parents[2]  # on sys.path via tests/conftest.py

from components.iam import codebuild_policy as codebuild_policy_document  # noqa: E402
from components.image import (  # noqa: E402
    CONTEXT_PREFIX,
    TAG_HEX_LENGTH,
    TrainingImage,
    buildspec,
    collect_build_context,
    hash_build_context,
    image_tag_for,
    is_ignored,
    lifecycle_policy_document,
    parse_dockerignore,
    validate_image_reference,
    write_context_zip,
)
from components.image.build_provider import (  # noqa: E402
    ImageBuildError,
    ImageBuildProvider,
    evaluate_build,
    find_reusable_build,
    format_build_failure,
)
from tests import image_support as sup  # noqa: E402
from tests.wait import patient  # noqa: E402

# ------------------------------------------------------------------------------------------------
# moto fixtures
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Any:
    workdir = tmp_path_factory.mktemp("moto")
    server = sup.start_moto_server(workdir)
    mp = pytest.MonkeyPatch()
    for key, value in sup.aws_test_environment(server.endpoint, workdir).items():
        if value is None:
            mp.delenv(key, raising=False)
        else:
            mp.setenv(key, value)
    try:
        yield server
    finally:
        mp.undo()
        sup.stop_moto_server(server)


Aws = sup.AwsAccount


@pytest.fixture()
def aws_env(moto: Any, tmp_path: Path) -> tuple[Aws, dict[str, Any]]:
    ctx = sup.make_context(tmp_path / "ctx", {"train.py": "print('train')\n"})
    aws = Aws()
    return aws, aws.provision(ctx, tmp_path / "zips")


_create_while_pushing = sup.create_while_pushing


# ------------------------------------------------------------------------------------------------
# Provider against moto
# ------------------------------------------------------------------------------------------------


def test_create_starts_codebuild_with_overrides_and_returns_ecr_digest(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    res, build_ids, pushed_digest = _create_while_pushing(aws, props)

    # Exactly one build, started on our project.
    assert len(build_ids) == 1
    assert aws.builds(props["project_name"]) == build_ids
    build_id = build_ids[0]
    assert build_id.startswith(props["project_name"] + ":")

    # The overrides as sent on the wire (moto drops them from its build record).
    starts = [b for b in moto.recorded_requests(".StartBuild") if b["projectName"] == props["project_name"]]
    assert len(starts) == 1
    req = starts[0]
    assert req["sourceTypeOverride"] == "S3"
    assert req["sourceLocationOverride"] == f"{props['source_bucket']}/{props['source_key']}"
    env = {v["name"]: v["value"] for v in req["environmentVariablesOverride"]}
    assert env == {"IMAGE_TAG": props["image_tag"], "REPOSITORY_URI": props["repository_url"]}
    assert req["idempotencyToken"]

    # The source override points at an object that exists and is our context.
    obj = aws.s3.get_object(Bucket=props["source_bucket"], Key=props["source_key"])["Body"].read()
    assert "Dockerfile" in zipfile.ZipFile(io.BytesIO(obj)).namelist()

    # moto's record of the build: finished successfully.
    record = aws.codebuild.batch_get_builds(ids=[build_id])["builds"][0]
    assert record["buildStatus"] == "SUCCEEDED"

    # The digest is the one ECR holds for the tag.
    ecr_digest = aws.ecr.describe_images(
        repositoryName=props["repository_name"], imageIds=[{"imageTag": props["image_tag"]}]
    )["imageDetails"][0]["imageDigest"]
    assert pushed_digest == ecr_digest
    outs = res.outs
    assert res.id == f"{props['repository_url']}:{props['image_tag']}"
    assert outs["image_digest"] == ecr_digest
    assert outs["image_uri"] == f"{props['repository_url']}@{ecr_digest}"
    assert outs["build_id"] == build_id
    assert outs["log_link"] == record["logs"]["deepLink"]
    assert outs["build_skipped"] is False
    assert outs["image_tag"] == props["image_tag"]
    assert "__provider" not in outs


def test_existing_tag_skips_start_build(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    digest = aws.push(props, seed="prebuilt")
    res = ImageBuildProvider().create(dict(props))
    assert res.outs["build_skipped"] is True
    assert res.outs["build_id"] == ""
    assert res.outs["image_digest"] == digest
    assert res.outs["image_uri"] == f"{props['repository_url']}@{digest}"
    assert aws.builds(props["project_name"]) == []
    assert [b for b in moto.recorded_requests(".StartBuild") if b["projectName"] == props["project_name"]] == []


def test_diff_replaces_only_on_tag_key_or_repository_change() -> None:
    p = ImageBuildProvider()
    olds = {
        "project_name": "proj",
        "repository_url": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train",
        "repository_name": "train",
        "region": "us-east-1",
        "image_tag": "a" * TAG_HEX_LENGTH,
        "source_bucket": "bucket",
        "source_key": f"contexts/{'a' * 64}.zip",
        "poll_interval_seconds": 15.0,
        "image_digest": "sha256:" + "1" * 64,
        "__provider": "old-serialization",
    }
    same = {k: v for k, v in olds.items() if k != "image_digest"} | {"__provider": "new-serialization"}
    d = p.diff("id", olds, same)
    assert d.changes is False and d.replaces == []

    changed = same | {"image_tag": "b" * TAG_HEX_LENGTH, "source_key": f"contexts/{'b' * 64}.zip"}
    d = p.diff("id", olds, changed)
    assert d.changes is True and sorted(d.replaces or []) == ["image_tag", "source_key"]
    assert d.delete_before_replace is False

    d = p.diff("id", olds, same | {"repository_url": "other/train"})
    assert d.replaces == ["repository_url"]

    d = p.diff("id", olds, same | {"poll_interval_seconds": 5.0, "project_name": "proj2"})
    assert d.changes is True and d.replaces == []
    upd = p.update("id", olds, same | {"poll_interval_seconds": 5.0})
    assert upd.outs is not None
    assert upd.outs["image_digest"] == olds["image_digest"] and upd.outs["poll_interval_seconds"] == 5.0


def test_read_refreshes_digest_and_reports_vanished_image(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    digest = aws.push(props, seed="read")
    outs = ImageBuildProvider().create(dict(props)).outs
    state = {**outs, "__provider": props["__provider"], "image_digest": "sha256:" + "0" * 64}
    r = ImageBuildProvider().read("id-1", state)
    assert r.id == "id-1"
    assert r.outs is not None and r.outs["image_digest"] == digest
    assert r.outs["image_uri"] == f"{props['repository_url']}@{digest}"

    aws.ecr.batch_delete_image(repositoryName=props["repository_name"], imageIds=[{"imageTag": props["image_tag"]}])
    gone = ImageBuildProvider().read("id-1", state)
    assert gone.id == ""  # the engine drops it; the next `pulumi up` rebuilds


def test_delete_leaves_image_in_place(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    digest = aws.push(props, seed="delete")
    outs = ImageBuildProvider().create(dict(props)).outs
    ImageBuildProvider().delete("id", {**outs, "__provider": "x"})
    left = aws.ecr.describe_images(repositoryName=props["repository_name"])["imageDetails"]
    assert [d["imageDigest"] for d in left] == [digest]


FAILURE_CONTEXTS = {
    "BUILD": {
        "statusCode": "COMMAND_EXECUTION_ERROR",
        "message": "Error while executing command: docker build ... Reason: exit status 1",
    },
    "DOWNLOAD_SOURCE": {"statusCode": "ACCESS_DENIED", "message": "Access Denied"},
}


def _failed_copy(record: dict[str, Any], phase_type: str = "BUILD") -> dict[str, Any]:
    """A moto build record changed into the shape CodeBuild reports for a build failing in
    ``phase_type`` (moto's own records only ever end SUCCEEDED)."""
    failed = copy.deepcopy(record)
    failed["buildStatus"] = "FAILED"
    failed["currentPhase"] = "COMPLETED"
    for phase in failed["phases"]:
        if phase["phaseType"] == phase_type:
            phase["phaseStatus"] = "FAILED"
            phase["contexts"] = [FAILURE_CONTEXTS[phase_type]]
            break
    return failed


def test_failed_build_message_from_real_moto_record(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    build_id = aws.codebuild.start_build(projectName=props["project_name"])["build"]["id"]
    record = aws.codebuild.batch_get_builds(ids=[build_id])["builds"][0]
    assert evaluate_build(record).succeeded and evaluate_build(record).done

    # stop_build is the one non-success status moto produces; it reports no failed phase.
    stopped = aws.codebuild.stop_build(id=build_id)["build"]
    st = evaluate_build(stopped)
    assert st.done and not st.succeeded and st.status == "STOPPED"
    msg = format_build_failure(st)
    assert build_id in msg and "STOPPED" in msg and stopped["logs"]["deepLink"] in msg

    failed = evaluate_build(_failed_copy(record))
    assert failed.done and not failed.succeeded and failed.failed_phase == "BUILD"
    msg = format_build_failure(failed)
    assert build_id in msg
    assert "FAILED" in msg
    assert "failing phase: BUILD" in msg
    assert "COMMAND_EXECUTION_ERROR" in msg
    assert record["logs"]["deepLink"] in msg

    # Still running -> not done.
    running = copy.deepcopy(record) | {"buildStatus": "IN_PROGRESS", "currentPhase": "BUILD"}
    assert not evaluate_build(running).done


class _FailingCodeBuild:
    """The real moto CodeBuild client, except that ``batch_get_builds`` reports failed builds."""

    def __init__(self, real: Any, phase_type: str) -> None:
        self._real = real
        self._phase_type = phase_type

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def batch_get_builds(self, ids: list[str]) -> dict[str, Any]:
        resp = self._real.batch_get_builds(ids=ids)
        return {**resp, "builds": [_failed_copy(b, self._phase_type) for b in resp["builds"]]}


class _FailingProvider(ImageBuildProvider):
    """Test double: the real provider with its CodeBuild client wrapped (boto3 itself untouched)."""

    def __init__(self, phase_type: str = "BUILD") -> None:
        super().__init__()
        self.phase_type = phase_type

    def _clients(self, props: Any) -> tuple[Any, Any]:
        cb, ecr = super()._clients(props)
        return _FailingCodeBuild(cb, self.phase_type), ecr


def test_create_raises_with_build_id_phase_and_log_link_when_build_fails(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    with pytest.raises(ImageBuildError) as err:
        _FailingProvider("BUILD").create(dict(props))
    (build_id,) = aws.builds(props["project_name"])  # started on moto, not retried (docker failed)
    msg = str(err.value)
    assert build_id in msg and "FAILED" in msg and "failing phase: BUILD" in msg
    assert "COMMAND_EXECUTION_ERROR" in msg
    deep_link = aws.codebuild.batch_get_builds(ids=[build_id])["builds"][0]["logs"]["deepLink"]
    assert deep_link in msg


def test_failure_before_docker_work_is_retried_once(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    with pytest.raises(ImageBuildError) as err:
        _FailingProvider("DOWNLOAD_SOURCE").create(dict(props))
    build_ids = aws.builds(props["project_name"])
    assert len(build_ids) == 2
    msg = str(err.value)
    assert all(b in msg for b in build_ids) and "failing phase: DOWNLOAD_SOURCE" in msg and "ACCESS_DENIED" in msg
    tokens = [
        b["idempotencyToken"]
        for b in moto.recorded_requests(".StartBuild")
        if b["projectName"] == props["project_name"]
    ]
    assert len(tokens) == 2 and tokens[0] != tokens[1]


def test_build_succeeded_but_tag_missing_is_an_error(moto: Any, aws_env: Any) -> None:
    aws, props = aws_env
    with pytest.raises(ImageBuildError, match="not in ECR"):
        ImageBuildProvider().create(dict(props) | {"digest_wait_seconds": 0.2})
    assert len(aws.builds(props["project_name"])) == 1


def test_running_build_of_same_tag_is_reused() -> None:
    tag, repo = "c" * TAG_HEX_LENGTH, "123456789012.dkr.ecr.us-east-1.amazonaws.com/train"

    def rec(i: str, status: str, env_tag: str) -> dict[str, Any]:
        return {
            "id": f"proj:{i}",
            "buildStatus": status,
            "environment": {
                "environmentVariables": [
                    {"name": "IMAGE_TAG", "value": env_tag, "type": "PLAINTEXT"},
                    {"name": "REPOSITORY_URI", "value": repo, "type": "PLAINTEXT"},
                ]
            },
        }

    builds = [rec("1", "SUCCEEDED", tag), rec("2", "IN_PROGRESS", "d" * TAG_HEX_LENGTH), rec("3", "IN_PROGRESS", tag)]
    assert find_reusable_build(builds, tag, repo) == "proj:3"
    assert find_reusable_build(builds[:2], tag, repo) is None


def test_provider_survives_dill_round_trip_in_a_fresh_process() -> None:
    """The engine stores the provider with dill and the dynamic-provider host loads it in another
    process started in the program directory (the repo root)."""
    from pulumi.dynamic.dynamic import serialize_provider

    blob = serialize_provider(ImageBuildProvider())
    code = (
        "import base64, sys, dill\n"
        "p = dill.loads(base64.b64decode(sys.stdin.read()))\n"
        "d = p.diff('id', {'image_tag': 'a'}, {'image_tag': 'b'})\n"
        "print(type(p).__module__, type(p).__name__, d.replaces)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=blob,
        capture_output=True,
        text=True,
        cwd=str(REPO),
        timeout=patient(120),
        check=True,
    )
    assert out.stdout.split() == ["components.image.build_provider", "ImageBuildProvider", "['image_tag']"]
    # Same provider -> same serialization (no spurious diffs of the __provider input).
    assert serialize_provider(ImageBuildProvider()) == blob
    assert "boto3" not in base64.b64decode(blob).decode("latin-1")


# ------------------------------------------------------------------------------------------------
# Context hashing and zip
# ------------------------------------------------------------------------------------------------


def _ctx(tmp_path: Path, name: str = "ctx", dockerignore: Optional[str] = None) -> Path:
    return sup.make_context(
        tmp_path / name,
        {"train.py": "print('train')\n", "scripts/run.sh": "#!/bin/sh\necho hi\n", "lib/util.py": "X = 1\n"},
        dockerignore=dockerignore,
    )


def test_same_context_same_tag_regardless_of_location_order_and_mtime(tmp_path: Path) -> None:
    a = _ctx(tmp_path, "a", dockerignore="*.log\n")
    b = tmp_path / "b"
    sup.copy_tree_reversed(a, b)
    h = hash_build_context(str(a))
    assert len(h) == 64 and hash_build_context(str(a)) == h
    assert hash_build_context(str(b)) == h
    os.utime(a / "train.py", (2_000_000_000, 2_000_000_000))
    assert hash_build_context(str(a)) == h
    assert len(image_tag_for(h)) == TAG_HEX_LENGTH and h.startswith(image_tag_for(h))


def test_changed_content_or_exec_bit_changes_tag_but_umask_does_not(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    h = hash_build_context(str(ctx))
    (ctx / "lib/util.py").write_text("X = 2\n")
    h2 = hash_build_context(str(ctx))
    assert h2 != h
    os.chmod(ctx / "lib/util.py", 0o664)  # group-writable: git would not see it, neither do we
    assert hash_build_context(str(ctx)) == h2
    os.chmod(ctx / "lib/util.py", 0o755)
    assert hash_build_context(str(ctx)) != h2
    (ctx / "lib/new.py").write_text("")
    assert hash_build_context(str(ctx)) not in (h, h2)


def test_dockerignored_files_do_not_change_tag(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, dockerignore="# comment\n*.log\ndata\n/cache/**\n**/__pycache__\n!keep.log\n")
    h = hash_build_context(str(ctx))
    (ctx / "debug.log").write_text("noise")
    (ctx / "data/x").mkdir(parents=True)
    (ctx / "data/x/big.bin").write_bytes(b"\0" * 1000)
    (ctx / "cache/a").mkdir(parents=True)
    (ctx / "cache/a/b.txt").write_text("c")
    (ctx / "lib/__pycache__").mkdir()
    (ctx / "lib/__pycache__/util.cpython-311.pyc").write_bytes(b"pyc")
    assert hash_build_context(str(ctx)) == h
    (ctx / "keep.log").write_text("re-included by !keep.log")
    assert hash_build_context(str(ctx)) != h
    paths = [e.path for e in collect_build_context(str(ctx))]
    assert paths == sorted(paths)
    assert (
        "keep.log" in paths and "debug.log" not in paths and not any(p.startswith(("data/", "cache/")) for p in paths)
    )


def test_dockerfile_and_dockerignore_always_in_context(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, dockerignore="Dockerfile\n.dockerignore\n*.py\n")
    paths = [e.path for e in collect_build_context(str(ctx))]
    # `*.py` matches top-level files only (Docker's `*` does not cross `/`).
    assert paths == [".dockerignore", "Dockerfile", "lib/util.py", "scripts/run.sh"]
    h = hash_build_context(str(ctx))
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    assert hash_build_context(str(ctx)) != h


def test_dockerignore_pattern_semantics() -> None:
    pats = parse_dockerignore("*/temp*\n**/*.md\n!README.md\nbuild/\n./out\n")
    assert [p.pattern for p in pats] == ["*/temp*", "**/*.md", "README.md", "build", "out"]
    assert (
        is_ignored("a/temporary.txt", pats)
        and not is_ignored("temporary.txt", pats)
        and not is_ignored("a/b/temp", pats)
    )
    assert is_ignored("docs/x/notes.md", pats) and is_ignored("notes.md", pats) and not is_ignored("README.md", pats)
    assert is_ignored("build/lib/x.so", pats) and is_ignored("out/a", pats) and not is_ignored("outer", pats)


def test_missing_context_or_dockerfile_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        hash_build_context(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="Dockerfile"):
        hash_build_context(str(tmp_path / "empty"))


def test_context_zip_is_deterministic_and_honours_dockerignore(tmp_path: Path) -> None:
    a = _ctx(tmp_path, "a", dockerignore="*.log\n")
    (a / "scripts/run.sh").chmod(0o755)
    (a / "x.log").write_text("ignored")
    b = tmp_path / "b"
    sup.copy_tree_reversed(a, b)
    write_context_zip(str(a), str(tmp_path / "a.zip"))
    write_context_zip(str(b), str(tmp_path / "b.zip"))
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        assert names == sorted(names) == [".dockerignore", "Dockerfile", "lib/util.py", "scripts/run.sh", "train.py"]
        assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
        modes = {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in infos}
        assert modes["scripts/run.sh"] == 0o755 and modes["train.py"] == 0o644
        assert zf.read("train.py") == b"print('train')\n"


# ------------------------------------------------------------------------------------------------
# Image references, policies, buildspec
# ------------------------------------------------------------------------------------------------

GOOD_DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "uri",
    [
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:0123abcd",
        f"123456789012.dkr.ecr.us-east-1.amazonaws.com/team/train@{GOOD_DIGEST}",
        f"nvcr.io/nvidia/pytorch:24.01-py3@{GOOD_DIGEST}",
        "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "localhost:5000/my_img:1.0",
        "public.ecr.aws/docker/library/python:3.11-slim",
    ],
)
def test_valid_image_references(uri: str) -> None:
    assert validate_image_reference(uri) is None


@pytest.mark.parametrize(
    "uri, problem",
    [
        ("", "empty"),
        ("nvcr.io/nvidia/PyTorch:24.01", "lowercase"),
        ("repo/img@sha256:abc", "digest"),
        (f"repo/img@md5:{'a' * 64}", "digest"),
        ("repo/img:-bad", "tag"),
        ("repo/img:has space", "whitespace"),
        ("https://nvcr.io/nvidia/pytorch:1", "scheme"),
        ("repo//img:1", "empty path"),
        ("bad_host-.io/x/y:1", "registry host"),
        ("nvcr.io/-nvidia/x:1", "repository path"),
        ("pytorch/pytorch", "neither a tag nor"),
        ("nvcr.io/nvidia/pytorch:latest", "floats on :latest"),
    ],
)
def test_invalid_image_references_name_the_problem(uri: str, problem: str) -> None:
    msg = validate_image_reference(uri)
    assert msg is not None and problem in msg


def test_unpinned_reference_allowed_when_not_required() -> None:
    assert validate_image_reference("pytorch/pytorch", require_pinned=False) is None


#: The only actions allowed on "*": registry logins, whose APIs have no resource-level permissions.
LOGIN_ACTIONS = [["ecr:GetAuthorizationToken"], ["ecr-public:GetAuthorizationToken", "sts:GetServiceBearerToken"]]


def test_policy_only_star_is_get_authorization_token() -> None:
    doc = codebuild_policy_document(
        "arn:aws:ecr:us-east-1:123456789012:repository/train",
        "arn:aws:s3:::ctx-bucket",
        "arn:aws:logs:us-east-1:123456789012:log-group:train-logs:*",
        kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/k",
    )
    for s in sup.iter_statements(dict(doc)):
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        if "*" in resources:
            assert s["Action"] in LOGIN_ACTIONS
        assert not any(a.endswith(":*") or a == "*" for a in s["Action"])
    stars = [s["Action"] for s in doc["Statement"] if s["Resource"] == "*"]
    assert stars == LOGIN_ACTIONS  # ECR Public's login needs both (source key ``ecr-public-login``)
    s3 = [s for s in doc["Statement"] if s["Sid"] == "ReadBuildContexts"][0]
    assert s3["Resource"] == [f"arn:aws:s3:::ctx-bucket/{CONTEXT_PREFIX}/*"]
    logs = [s for s in doc["Statement"] if s["Sid"] == "BuildLogs"][0]
    assert logs["Resource"] == [
        "arn:aws:logs:us-east-1:123456789012:log-group:train-logs",
        "arn:aws:logs:us-east-1:123456789012:log-group:train-logs:*",
    ]


def test_buildspec_logs_in_builds_pushes_and_prints_digest() -> None:
    spec = yaml.safe_load(buildspec())
    assert spec["version"] == 0.2
    cmds = spec["phases"]["pre_build"]["commands"] + spec["phases"]["build"]["commands"]
    text = "\n".join(cmds)
    assert "aws ecr get-login-password" in text and "docker login" in text
    # the build arguments by name (each value in its own variable), then the build
    (build,) = [c for c in cmds if "docker build" in c]
    assert build.startswith("build_args=()\n"), build
    assert (
        'retry 3 docker build --platform "$DOCKER_PLATFORM" --file "$DOCKERFILE" ${build_args[@]+"${build_args[@]}"} '
        '--tag "$REPOSITORY_URI:$IMAGE_TAG" .'
    ) in build.splitlines(), build
    assert any(c.startswith('retry 3 docker push "$REPOSITORY_URI:$IMAGE_TAG"') for c in cmds)
    assert any("IMAGE_DIGEST=" in c for c in cmds) and any("$REPOSITORY_URI@$IMAGE_DIGEST" in c for c in cmds)
    # What runs the steps is tested under bash in tests/real/test_buildspec.py.


def test_lifecycle_policy_keeps_last_n() -> None:
    rules = json.loads(lifecycle_policy_document(7))["rules"]
    assert len(rules) == 1
    assert rules[0]["selection"] == {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 7}
    assert rules[0]["action"] == {"type": "expire"}
    with pytest.raises(ValueError):
        lifecycle_policy_document(0)


# ------------------------------------------------------------------------------------------------
# The component under pulumi mocks
# ------------------------------------------------------------------------------------------------

ACCOUNT = "123456789012"
MOCK_REGION = "us-west-2"


class _Mocks(pmocks.Mocks):
    """Minimal cloud: computed outputs for the types TrainingImage creates."""

    def new_resource(self, args: pmocks.MockResourceArgs) -> tuple[Optional[str], dict]:
        out = dict(args.inputs)
        name = args.name
        t = args.typ
        if t == "aws:ecr/repository:Repository":
            repo = out.get("name") or f"{name}-1234567"
            out.update(
                name=repo,
                arn=f"arn:aws:ecr:{MOCK_REGION}:{ACCOUNT}:repository/{repo}",
                registryId=ACCOUNT,
                repositoryUrl=f"{ACCOUNT}.dkr.ecr.{MOCK_REGION}.amazonaws.com/{repo}",
            )
        elif t == "aws:s3/bucket:Bucket":
            out.update(bucket=f"{name}-1234567", arn=f"arn:aws:s3:::{name}-1234567")
            return f"{name}-1234567", out
        elif t == "aws:cloudwatch/logGroup:LogGroup":
            out.update(name=f"{name}-1234567", arn=f"arn:aws:logs:{MOCK_REGION}:{ACCOUNT}:log-group:{name}-1234567")
        elif t == "aws:iam/role:Role":
            out.update(name=f"{name}-1234567", arn=f"arn:aws:iam::{ACCOUNT}:role/{name}-1234567")
            return f"{name}-1234567", out
        elif t == "aws:codebuild/project:Project":
            out.update(name=f"{name}-1234567", arn=f"arn:aws:codebuild:{MOCK_REGION}:{ACCOUNT}:project/{name}-1234567")
        elif t.startswith("pulumi-python:dynamic"):
            digest = "sha256:" + "f" * 64
            out.update(image_digest=digest, image_uri=f"{out['repository_url']}@{digest}", build_id="b:1", log_link="")
        return f"{name}-id", out

    def call(self, args: pmocks.MockCallArgs) -> tuple[dict, Optional[list[tuple[str, str]]]]:
        return {}, None


class _Monitor(pmocks.MockMonitor):
    """Records every RegisterResource request (type, name, parent, inputs)."""

    def __init__(self, mocks: pmocks.Mocks) -> None:
        super().__init__(mocks)
        self.registered: list[dict[str, Any]] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        resp = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return resp
        from pulumi.runtime import rpc

        self.registered.append(
            {
                "type": request.type,
                "name": request.name,
                "urn": resp.urn,
                "parent": request.parent,
                "custom": request.custom,
                "inputs": rpc.deserialize_properties(request.object),
                "dependencies": list(request.dependencies),
            }
        )
        return resp


def _normalise(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _normalise(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [_normalise(x) for x in v]
    if isinstance(v, pulumi.FileAsset):
        return ("FileAsset", v.path)
    return v


def _run_component(context_dir: Path, **extra: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    mocks = _Mocks()
    monitor = _Monitor(mocks)
    pmocks.set_mocks(mocks, monitor=monitor, preview=False)
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> Any:
        comp = TrainingImage("train-image", {"context_dir": str(context_dir), "keep_images": 5, **extra})
        return pulumi.Output.all(
            comp.image_uri, comp.image_tag, comp.digest, comp.repository_url, comp.repository_arn, comp.context_hash
        ).apply(
            lambda v: outputs.update(
                zip(["image_uri", "image_tag", "digest", "repository_url", "repository_arn", "context_hash"], v)
            )
        )

    program()
    return monitor.registered, outputs


def test_component_children_under_mocks(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    regs, outs = _run_component(ctx)
    comp = [r for r in regs if r["type"] == "eks-training:index:TrainingImage"]
    assert len(comp) == 1
    comp_urn = comp[0]["urn"]
    children = [r for r in regs if r["urn"] != comp_urn]
    by_type = {r["type"]: r for r in children}
    assert sorted(by_type) == sorted(
        [
            "aws:ecr/repository:Repository",
            "aws:ecr/lifecyclePolicy:LifecyclePolicy",
            "aws:s3/bucket:Bucket",
            "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
            "aws:s3/bucketPolicy:BucketPolicy",
            "aws:s3/bucketObjectv2:BucketObjectv2",
            "aws:cloudwatch/logGroup:LogGroup",
            "aws:iam/role:Role",
            "aws:iam/rolePolicy:RolePolicy",
            "aws:codebuild/project:Project",
            "pulumi-python:dynamic/eks-training:ImageBuild",
        ]
    )
    assert len(children) == len(by_type)
    for r in children:
        assert r["parent"] == comp_urn, r["name"]
        assert r["name"].startswith("train-image-"), r["name"]

    repo = by_type["aws:ecr/repository:Repository"]["inputs"]
    assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repo["encryptionConfigurations"] == [{"encryptionType": "AES256"}]
    assert repo["imageTagMutability"] == "IMMUTABLE" and repo["forceDelete"] is True
    rules = json.loads(by_type["aws:ecr/lifecyclePolicy:LifecyclePolicy"]["inputs"]["policy"])["rules"]
    assert len(rules) == 1 and rules[0]["selection"]["countNumber"] == 5

    sse = by_type["aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"]["inputs"]
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "AES256"}
    pab = by_type["aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"]["inputs"]
    assert all(
        pab[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )

    project = by_type["aws:codebuild/project:Project"]["inputs"]
    assert project["environment"]["privilegedMode"] is True
    assert project["environment"]["computeType"] == "BUILD_GENERAL1_LARGE"
    assert project["environment"]["type"] == "LINUX_CONTAINER"
    assert project["source"]["type"] == "S3" and project["source"]["location"].endswith(f"/{CONTEXT_PREFIX}/")
    assert yaml.safe_load(project["source"]["buildspec"])["phases"]["build"]["commands"]
    assert project["logsConfig"]["cloudwatchLogs"]["status"] == "ENABLED"
    assert project["serviceRole"].startswith(f"arn:aws:iam::{ACCOUNT}:role/")

    policy = json.loads(by_type["aws:iam/rolePolicy:RolePolicy"]["inputs"]["policy"])
    for s in sup.iter_statements(policy):
        if s["Resource"] == "*" or "*" in (s["Resource"] if isinstance(s["Resource"], list) else []):
            assert s["Action"] in LOGIN_ACTIONS, s
    repo_arn = f"arn:aws:ecr:{MOCK_REGION}:{ACCOUNT}:repository/train-image-repo-1234567"
    push = [s for s in policy["Statement"] if "ecr:PutImage" in s["Action"]]
    assert push and push[0]["Resource"] == [repo_arn]
    trust = json.loads(by_type["aws:iam/role:Role"]["inputs"]["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "codebuild.amazonaws.com"}
    assert trust["Statement"][0]["Condition"]["StringEquals"]["aws:SourceAccount"] == ACCOUNT

    h = hash_build_context(str(ctx))
    obj = by_type["aws:s3/bucketObjectv2:BucketObjectv2"]["inputs"]
    assert obj["key"] == f"{CONTEXT_PREFIX}/{h}.zip"
    assert isinstance(obj["source"], pulumi.FileAsset) and obj["source"].path.endswith(f"{h}.zip")
    assert obj["serverSideEncryption"] == "AES256"
    build = by_type["pulumi-python:dynamic/eks-training:ImageBuild"]["inputs"]
    assert build["image_tag"] == image_tag_for(h)
    assert build["source_key"] == obj["key"]
    assert build["region"] == MOCK_REGION
    assert build["repository_url"] == f"{ACCOUNT}.dkr.ecr.{MOCK_REGION}.amazonaws.com/train-image-repo-1234567"
    assert "__provider" in build
    dep_names = {d.split("::")[-1] for d in by_type["pulumi-python:dynamic/eks-training:ImageBuild"]["dependencies"]}
    assert {"train-image-codebuild-policy", "train-image-context", "train-image-build"} <= dep_names

    assert outs["image_tag"] == image_tag_for(h) and outs["context_hash"] == h
    assert outs["digest"] == "sha256:" + "f" * 64
    assert outs["image_uri"] == f"{outs['repository_url']}@{outs['digest']}"
    assert outs["repository_arn"] == repo_arn


def test_component_is_deterministic_and_a_context_change_touches_only_the_build(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    first, _ = _run_component(ctx)
    second, _ = _run_component(ctx)
    # Registration order is asynchronous; compare by name.
    assert sorted((r["name"], r["type"], repr(_normalise(r["inputs"]))) for r in first) == sorted(
        (r["name"], r["type"], repr(_normalise(r["inputs"]))) for r in second
    )
    (ctx / "train.py").write_text("print('train v2')\n")
    third, _ = _run_component(ctx)
    before = {r["name"]: _normalise(r["inputs"]) for r in first}
    after = {r["name"]: _normalise(r["inputs"]) for r in third}
    assert before.keys() == after.keys()
    changed = {n for n in before if before[n] != after[n]}
    assert changed == {"train-image-context", "train-image-image"}
    diff_keys = {
        k for k in before["train-image-image"] if before["train-image-image"][k] != after["train-image-image"].get(k)
    }
    assert diff_keys == {"image_tag", "source_key"}
    d = ImageBuildProvider().diff("id", before["train-image-image"], after["train-image-image"])
    assert sorted(d.replaces or []) == ["image_tag", "source_key"]


def test_component_with_kms_key_and_arm(tmp_path: Path) -> None:
    key = f"arn:aws:kms:{MOCK_REGION}:{ACCOUNT}:key/abc"
    regs, _ = _run_component(_ctx(tmp_path), kms_key_arn=key, platform="linux/arm64", force_delete=False)
    by_type = {r["type"]: r["inputs"] for r in regs}
    assert by_type["aws:ecr/repository:Repository"]["encryptionConfigurations"] == [
        {"encryptionType": "KMS", "kmsKey": key}
    ]
    assert by_type["aws:ecr/repository:Repository"]["forceDelete"] is False
    sse = by_type["aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"]["rules"][0]
    assert sse["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": key}
    env = by_type["aws:codebuild/project:Project"]["environment"]
    assert env["type"] == "ARM_CONTAINER" and "aarch64" in env["image"]
    policy = json.loads(by_type["aws:iam/rolePolicy:RolePolicy"]["policy"])
    assert any(s["Resource"] == [key] for s in policy["Statement"])


def test_component_rejects_bad_arguments(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    with pytest.raises(Exception, match="platform"):
        _run_component(ctx, platform="windows/amd64")
    with pytest.raises(Exception, match="compute_type"):
        _run_component(ctx, compute_type="HUGE")
