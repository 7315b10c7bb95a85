"""Helpers for the image tests: a real ``moto_server`` process with request
recording, the boto3 environment pointing at it (both from :mod:`tests.aws_support`), and tiny
Docker build contexts.

Nothing here patches boto3: the server is a separate process and boto3 reaches it through the
standard ``AWS_ENDPOINT_URL`` environment variable.
"""

import json
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator, Optional

from components.image import CONTEXT_PREFIX, buildspec, hash_build_context, image_tag_for, write_context_zip
from components.image.dockerfile import instructions
from stacks.ports import free_port
from tests import aws_support
from tests.aws_support import MOTO_SERVER, REGION, aws_test_environment, wait_for
from tests.wait import patient

__all__ = [  # MOTO_SERVER ... wait_for are re-exported from tests.aws_support
    "MOTO_SERVER",
    "REGION",
    "AwsAccount",
    "MotoServer",
    "aws_test_environment",
    "base_images",
    "copy_tree_reversed",
    "create_while_pushing",
    "dockerfile_instructions",
    "fake_manifest",
    "free_port",
    "iter_statements",
    "make_context",
    "repository_dockerfiles",
    "start_moto_server",
    "stop_moto_server",
    "unique",
    "wait_for",
]

MotoServer = aws_support.MotoProcess
"""A running ``moto_server``; :meth:`~tests.aws_support.MotoProcess.recorded_requests` reads what
went over the wire."""


def start_moto_server(workdir: Path) -> MotoServer:
    """Start ``moto_server`` with request recording; fail loudly if it is missing or dead."""
    return aws_support.start_moto_server(workdir, record=True)


def stop_moto_server(server: MotoServer) -> None:
    server.stop()


def make_context(root: Path, files: dict[str, str], dockerignore: Optional[str] = None) -> Path:
    """A tiny Docker build context: a Dockerfile plus ``files`` (relative path -> text)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text("FROM public.ecr.aws/docker/library/python:3.11-slim\nCOPY . /app\n")
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    if dockerignore is not None:
        (root / ".dockerignore").write_text(dockerignore)
    return root


def copy_tree_reversed(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` creating files in reverse order (different directory order and mtimes)."""
    files = sorted((p for p in src.rglob("*") if p.is_file()), reverse=True)
    for p in files:
        target = dst / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
        os.chmod(target, os.stat(p).st_mode & 0o777)
        os.utime(target, (1_000_000_000, 1_000_000_000))


def fake_manifest(seed: str) -> str:
    """A Docker v2 image manifest whose digest differs per ``seed`` (what ``docker push`` uploads)."""
    import hashlib

    def dg(s: str) -> str:
        return "sha256:" + hashlib.sha256(s.encode()).hexdigest()

    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": 1234,
                "digest": dg(seed + "c"),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": 5678,
                    "digest": dg(seed + "l"),
                }
            ],
        }
    )


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def iter_statements(policy: dict[str, Any]) -> Iterator[dict[str, Any]]:
    stmts = policy["Statement"]
    yield from (stmts if isinstance(stmts, list) else [stmts])


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """A Dockerfile's instructions as ``(INSTRUCTION, arguments)``: the product's own reader
    (:func:`components.image.dockerfile.instructions`, which the config rules read images with)."""
    return instructions(text)


def base_images(text: str) -> list[str]:
    """The images a Dockerfile pulls: each ``FROM``'s image (options skipped) that is neither ``scratch`` nor an
    earlier stage's name nor built from a build argument."""
    stages: set[str] = set()
    images: list[str] = []
    for word, args in dockerfile_instructions(text):
        if word != "FROM":
            continue
        parts = [p for p in args.split() if not p.startswith("--")]
        ref = parts[0]
        if ref.lower() != "scratch" and ref.lower() not in stages and "$" not in ref:
            images.append(ref)
        if len(parts) >= 3 and parts[1].upper() == "AS":
            stages.add(parts[2].lower())
    return images


def repository_dockerfiles() -> list[Path]:
    """Every Dockerfile tracked in the repository."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    tracked = subprocess.run(["git", "ls-files", "*Dockerfile"], cwd=root, capture_output=True, text=True, check=True)
    return [root / p for p in tracked.stdout.split()]


class AwsAccount:
    """boto3 clients on the moto server (of ``session``, default: the environment's credentials) plus the
    resources ``ImageBuildProvider`` needs, created in that session's account."""

    def __init__(self, session: Any = None) -> None:
        import boto3

        session = session or boto3.session.Session()
        self.ecr = session.client("ecr", region_name=REGION)
        self.s3 = session.client("s3", region_name=REGION)
        self.iam = session.client("iam", region_name=REGION)
        self.logs = session.client("logs", region_name=REGION)
        self.codebuild = session.client("codebuild", region_name=REGION)

    def provision(self, context_dir: Path, zip_dir: Path) -> dict[str, Any]:
        """Create repo, bucket + context object, role, log group and project like the component
        does; return the provider inputs."""
        repo = self.ecr.create_repository(
            repositoryName=unique("train"),
            imageTagMutability="IMMUTABLE",
            imageScanningConfiguration={"scanOnPush": True},
            encryptionConfiguration={"encryptionType": "AES256"},
        )["repository"]
        bucket = unique("contexts")
        self.s3.create_bucket(Bucket=bucket)
        context_hash = hash_build_context(str(context_dir))
        zip_path = zip_dir / f"{context_hash}.zip"
        write_context_zip(str(context_dir), str(zip_path))
        key = f"{CONTEXT_PREFIX}/{context_hash}.zip"
        self.s3.put_object(Bucket=bucket, Key=key, Body=zip_path.read_bytes(), ServerSideEncryption="AES256")
        role_arn = self.iam.create_role(
            RoleName=unique("codebuild"),
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "codebuild.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        log_group = unique("/aws/codebuild/train")
        self.logs.create_log_group(logGroupName=log_group)
        project = unique("train-image")
        self.codebuild.create_project(
            name=project,
            source={"type": "S3", "location": f"{bucket}/{CONTEXT_PREFIX}/", "buildspec": buildspec()},
            artifacts={"type": "NO_ARTIFACTS"},
            environment={
                "type": "LINUX_CONTAINER",
                "image": "aws/codebuild/amazonlinux2-x86_64-standard:5.0",
                "computeType": "BUILD_GENERAL1_LARGE",
                "privilegedMode": True,
            },
            serviceRole=role_arn,
            logsConfig={"cloudWatchLogs": {"status": "ENABLED", "groupName": log_group}},
        )
        return {
            "project_name": project,
            "repository_url": repo["repositoryUri"],
            "repository_name": repo["repositoryName"],
            "region": REGION,
            "image_tag": image_tag_for(context_hash),
            "source_bucket": bucket,
            "source_key": key,
            "poll_interval_seconds": 0.05,
            "wait_timeout_seconds": 30.0,
            "digest_wait_seconds": 20.0,
            # The engine passes the serialized provider along with the inputs.
            "__provider": "serialized-provider-placeholder",
        }

    def push(self, props: dict[str, Any], seed: str) -> str:
        """What the real build's ``docker push`` does: put a manifest under the tag. Returns the digest."""
        image = self.ecr.put_image(
            repositoryName=props["repository_name"], imageManifest=fake_manifest(seed), imageTag=props["image_tag"]
        )["image"]
        return str(image["imageId"]["imageDigest"])

    def builds(self, project: str) -> list[str]:
        return list(self.codebuild.list_builds_for_project(projectName=project)["ids"])


def create_while_pushing(aws: AwsAccount, props: dict[str, Any], provider: Any = None) -> Any:
    """Run ``create`` in a thread; when its build appears, push the image like the build would."""
    from components.image.build_provider import ImageBuildProvider

    provider = provider or ImageBuildProvider()
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = provider.create(dict(props))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            result["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    build_ids = wait_for(lambda: aws.builds(props["project_name"]) or ("error" in result and ["-"]))
    pushed = aws.push(props, seed=props["image_tag"]) if "error" not in result else None
    t.join(timeout=patient(60))
    assert not t.is_alive(), "create did not return"
    if "error" in result:
        raise result["error"]
    return result["value"], build_ids, pushed
