"""The CodeBuild buildspec run for real under bash: the ``retry`` script it installs (attempts, doubling waits,
giving up with the command's status), the awk program that lists a Dockerfile's base images, and every command
of both phases in order, as CodeBuild runs them, against fake ``aws`` and ``docker`` commands that fail the
way registries do now and then.

The fakes are small bash scripts first on ``PATH``; so is a fake ``sleep`` that records how long ``retry``
would wait (the waits are checked, not spent)."""

import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from components.catalog import BASE_IMAGES
from components.catalog.torch import TORCH_BUILDS, torch_build_args
from components.image.buildspec import (
    BASE_IMAGES_AWK,
    BUILD_ARGS_VARIABLE,
    ECR_PUBLIC_REGISTRY,
    RETRY_ATTEMPTS,
    RETRY_DELAY_SECONDS,
    buildspec,
)
from tests.harness import REPO
from tests.image_support import base_images, repository_dockerfiles
from tests.wait import patient

BASH = shutil.which("bash")
REPOSITORY_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train"
IMAGE_TAG = "0123456789abcdef01234567"
DIGEST = "sha256:" + "ab" * 32

# A command that fails its first N calls (N from its second argument; exit status from the third, default 1)
# and counts its calls in $WORK/<name>.count.
FLAKY = """#!/usr/bin/env bash
name="$1"; failures="$2"; status="${3:-1}"
count_file="$WORK/$name.count"
n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$count_file"
if [ "$n" -le "$failures" ]; then echo "$name: call $n fails" >&2; exit "$status"; fi
echo "$name: call $n succeeds"
"""

# sleep that only records how long it was asked to wait.
FAKE_SLEEP = """#!/usr/bin/env bash
echo "$1" >> "$WORK/sleep.log"
"""

# docker: FAIL_DOCKER_<SUBCOMMAND>=N makes the first N calls of that subcommand fail; every call is logged.
FAKE_DOCKER = """#!/usr/bin/env bash
sub="$1"
echo "$*" >> "$WORK/docker.log"
if [ "$sub" = build ]; then  # each --build-arg NAME with the value docker reads from its environment
  prev=
  for a in "$@"; do [ "$prev" != --build-arg ] || echo "$a=${!a-<unset>}" >> "$WORK/build-args.log"; prev="$a"; done
fi
if [ "$sub" = login ]; then
  password="$(cat)"
  echo "${@: -1} $password" >> "$WORK/login.log"
  [ -n "$password" ] || { echo "docker login: empty password" >&2; exit 1; }
fi
var="FAIL_DOCKER_${sub^^}"
count_file="$WORK/docker-$sub.count"
n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$count_file"
if [ "$n" -le "${!var:-0}" ]; then echo "docker $sub: error from daemon: toomanyrequests (call $n)" >&2; exit 1; fi
echo "docker $sub ok"
"""

# aws: the two logins print a password (after FAIL_* failures); describe-images answers from ECR_HAS_IMAGE.
FAKE_AWS = """#!/usr/bin/env bash
echo "$*" >> "$WORK/aws.log"
fail_first() {
  local count_file="$WORK/aws-$1.count"
  local n=$(( $(cat "$count_file" 2>/dev/null || echo 0) + 1 ))
  echo "$n" > "$count_file"
  [ "$n" -le "$2" ]
}
case "$1 $2" in
  "ecr get-login-password")
    if fail_first ecr-login "${FAIL_AWS_ECR_LOGIN:-0}"; then echo "Connection was closed" >&2; exit 255; fi
    echo "ecr-password" ;;
  "ecr-public get-login-password")
    if fail_first ecr-public-login "${FAIL_AWS_ECR_PUBLIC_LOGIN:-0}"; then echo "AccessDenied" >&2; exit 254; fi
    echo "public-password" ;;
  "ecr describe-images")
    if [ "${ECR_HAS_IMAGE:-0}" = 1 ]; then echo "$DIGEST"; else echo "ImageNotFoundException" >&2; exit 254; fi ;;
  *) echo "fake aws: unexpected $*" >&2; exit 2 ;;
esac
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _spec() -> dict[str, Any]:
    return yaml.safe_load(buildspec())


class Box:
    """A work folder with fake commands first on PATH and the folder ``retry`` is installed to."""

    def __init__(self, root: Path) -> None:
        self.work = root
        self.tools = root / "tools"
        self.fakes = root / "fakes"
        _write(self.fakes / "flaky", FLAKY)
        _write(self.fakes / "sleep", FAKE_SLEEP)
        _write(self.fakes / "docker", FAKE_DOCKER)
        _write(self.fakes / "aws", FAKE_AWS)

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": f"{self.tools}:{self.fakes}:/usr/bin:/bin",
            "HOME": str(self.work),
            "WORK": str(self.work),
            "TOOLS_DIR": str(self.tools),
            "DIGEST": DIGEST,
        }
        env.update(extra)
        return env

    def run(self, script: str, cwd: Optional[Path] = None, **extra: str) -> "subprocess.CompletedProcess[str]":
        assert BASH, "bash is required"
        return subprocess.run(
            [BASH, "-c", script],
            env=self.env(**extra),
            cwd=str(cwd or self.work),
            capture_output=True,
            text=True,
            timeout=patient(60),
        )

    def count(self, name: str) -> int:
        path = self.work / f"{name}.count"
        return int(path.read_text()) if path.exists() else 0

    def lines(self, name: str) -> list[str]:
        path = self.work / name
        return path.read_text().splitlines() if path.exists() else []

    def install_retry(self) -> Path:
        """Run the buildspec's own first command, which writes ``$TOOLS_DIR/retry``."""
        install = _spec()["phases"]["pre_build"]["commands"][0]
        done = self.run(install)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(self.tools / "retry")  # found on PATH
        return self.tools / "retry"


@pytest.fixture()
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


# ------------------------------------------------------------------------------------------------ retry


def test_retry_runs_a_failing_command_again_until_it_succeeds(box: Box) -> None:
    box.install_retry()
    done = box.run("retry 3 flaky pull 2")
    assert done.returncode == 0, done.stderr
    assert box.count("pull") == 3
    assert box.lines("sleep.log") == ["10", "20"]  # doubling waits from the default 10 s
    assert "attempt 1 of 3 failed (exit status 1), again in 10s: flaky pull 2" in done.stderr
    assert "attempt 2 of 3 failed (exit status 1), again in 20s" in done.stderr
    assert "flaky: call 3 succeeds" not in done.stderr and "pull: call 3 succeeds" in done.stdout


def test_retry_gives_up_after_the_attempts_with_the_commands_status(box: Box) -> None:
    box.install_retry()
    done = box.run("retry 3 flaky push 99 7")
    assert done.returncode == 7
    assert box.count("push") == 3
    assert box.lines("sleep.log") == ["10", "20"]  # no wait after the last attempt
    assert "retry: giving up after 3 attempts (exit status 7): flaky push 99 7" in done.stderr


def test_retry_does_not_wait_when_the_first_attempt_succeeds(box: Box) -> None:
    box.install_retry()
    done = box.run("retry 3 flaky login 0")
    assert done.returncode == 0 and box.count("login") == 1 and box.lines("sleep.log") == []


def test_retry_reads_the_first_wait_from_the_environment(box: Box) -> None:
    box.install_retry()
    done = box.run("retry 4 flaky build 99", RETRY_DELAY_SECONDS="3")
    assert done.returncode == 1 and box.count("build") == 4
    assert box.lines("sleep.log") == ["3", "6", "12"]
    # The buildspec sets the waits it documents.
    assert _spec()["env"]["variables"]["RETRY_DELAY_SECONDS"] == str(RETRY_DELAY_SECONDS) == "10"


@pytest.mark.parametrize("args", ["0 true", "x true", "-1 true", "3", ""])
def test_retry_rejects_a_bad_call(box: Box, args: str) -> None:
    box.install_retry()
    done = box.run(f"retry {args}")
    assert done.returncode == 2 and "usage: retry ATTEMPTS COMMAND" in done.stderr


# ----------------------------------------------------------------------------------- base images (awk)

SYNTHETIC = (
    "# syntax=docker/dockerfile:1\n"
    "ARG BASE=ubuntu:24.04\n"
    "FROM --platform=$BUILDPLATFORM golang:1.22 AS build\n"
    "RUN echo from the build stage\n"
    "FROM scratch AS empty\n"
    "FROM ${BASE}\n"
    "from Build as final\n"
    "FROM nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04\n"
)


@pytest.mark.parametrize(
    "name, text",
    [("synthetic", SYNTHETIC)] + [(p.relative_to(REPO).as_posix(), p.read_text()) for p in repository_dockerfiles()],
)
def test_awk_lists_the_base_images_the_python_parser_lists(box: Box, name: str, text: str) -> None:
    (box.work / "Dockerfile").write_text(text)
    done = box.run(f"awk '{BASE_IMAGES_AWK}' Dockerfile")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == base_images(text), name
    if name == "synthetic":
        assert done.stdout.split() == ["golang:1.22", "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu22.04"]
    if name == "training/Dockerfile":
        assert done.stdout.split() == [BASE_IMAGES["ubuntu-24.04"].ref]


# ---------------------------------------------------------------------------------- the whole buildspec


def _codebuild_script(spec: dict[str, Any]) -> str:
    """The commands of both phases as one bash script, the way CodeBuild runs a 0.2 buildspec: in order, in
    one shell (variables carry over), stopping at the first command that fails."""
    lines = ["set -u +e"]
    n = 0
    for phase in ("pre_build", "build"):
        for command in spec["phases"][phase]["commands"]:
            n += 1
            lines.append(f"echo '[codebuild] {phase} command {n}' >&2")
            lines.append(command.rstrip("\n"))
            lines.append(
                f'__s=$?; if [ "$__s" -ne 0 ]; then echo "[codebuild] {phase} command {n} failed: $__s" >&2; exit '
                '"$__s"; fi'
            )
    return "\n".join(lines) + "\n"


def _run_buildspec(box: Box, **faults: str) -> "subprocess.CompletedProcess[str]":
    spec = _spec()
    assert spec["version"] == 0.2 and spec["env"]["shell"] == "bash"
    context = box.work / "context"
    context.mkdir(exist_ok=True)
    shutil.copyfile(REPO / "training" / "Dockerfile", context / "Dockerfile")
    variables = {k: str(v) for k, v in spec["env"]["variables"].items()}
    variables["TOOLS_DIR"] = str(box.tools)  # /usr/local/bin in CodeBuild (it runs as root)
    codebuild = {  # set by CodeBuild, by the project and by start_build's overrides
        "AWS_REGION": "us-east-1",
        "DOCKERFILE": "Dockerfile",
        "DOCKER_PLATFORM": "linux/amd64",
        "IMAGE_TAG": IMAGE_TAG,
        "REPOSITORY_URI": REPOSITORY_URI,
    }
    return box.run(_codebuild_script(spec), cwd=context, **variables, **codebuild, **faults)


def test_buildspec_rides_out_flaky_logins_pulls_builds_and_pushes(box: Box) -> None:
    done = _run_buildspec(
        box,
        FAIL_AWS_ECR_LOGIN="1",  # the registry password call fails once
        FAIL_AWS_ECR_PUBLIC_LOGIN="99",  # ECR Public login never works (no permission): not fatal
        FAIL_DOCKER_PULL="2",  # the base image pull is throttled twice
        FAIL_DOCKER_BUILD="1",
        FAIL_DOCKER_PUSH="1",
        ECR_HAS_IMAGE="1",
    )
    assert done.returncode == 0, done.stderr
    assert f"IMAGE_URI={REPOSITORY_URI}@{DIGEST}" in done.stdout.splitlines()
    # docker login runs on every attempt (the pipe starts it); it gets a password once, from the second attempt.
    logins = box.lines("login.log")
    assert [line for line in logins if not line.endswith(" ")] == [f"{REPOSITORY_URI.split('/')[0]} ecr-password"]
    assert logins.count(f"{ECR_PUBLIC_REGISTRY} ") == RETRY_ATTEMPTS  # attempted, never with a password
    assert box.count("aws-ecr-login") == 2
    assert box.count("aws-ecr-public-login") == RETRY_ATTEMPTS
    assert f"ECR Public login failed: pulling {ECR_PUBLIC_REGISTRY} images anonymously" in done.stdout
    docker = box.lines("docker.log")
    pulls = [c for c in docker if c.startswith("pull ")]
    assert pulls == [f"pull --platform linux/amd64 {BASE_IMAGES['ubuntu-24.04'].ref}"] * 3
    builds = [c for c in docker if c.startswith("build ")]
    assert builds == [f"build --platform linux/amd64 --file Dockerfile --tag {REPOSITORY_URI}:{IMAGE_TAG} ."] * 2
    assert [c for c in docker if c.startswith("push ")] == [f"push {REPOSITORY_URI}:{IMAGE_TAG}"] * 2
    # The order CodeBuild must keep: pull before build before push.
    first = {word: next(i for i, c in enumerate(docker) if c.startswith(word)) for word in ("pull", "build", "push")}
    assert first["pull"] < first["build"] < first["push"]
    # Waits: ECR login 10; ECR Public 10, 20; pull 10, 20; build 10; push 10.
    assert box.lines("sleep.log") == ["10", "10", "20", "10", "20", "10", "10"]


def test_buildspec_passes_the_projects_build_arguments_by_name(box: Box) -> None:
    """The project names its build arguments in DOCKER_BUILD_ARGS and gives each value in the variable of its name
    (components/image/component.py): docker gets ``--build-arg NAME`` and reads the value, spaces and all."""
    torch_args = torch_build_args(TORCH_BUILDS["cu126"])
    done = _run_buildspec(box, ECR_HAS_IMAGE="1", **{BUILD_ARGS_VARIABLE: " ".join(sorted(torch_args))}, **torch_args)
    assert done.returncode == 0, done.stderr
    (build,) = [c for c in box.lines("docker.log") if c.startswith("build ")]
    assert build == (
        "build --platform linux/amd64 --file Dockerfile "
        + " ".join(f"--build-arg {k}" for k in sorted(torch_args))
        + f" --tag {REPOSITORY_URI}:{IMAGE_TAG} ."
    )
    assert box.lines("build-args.log") == [f"{k}={v}" for k, v in sorted(torch_args.items())]


def test_buildspec_accepts_a_push_that_keeps_failing_when_ecr_holds_the_tag(box: Box) -> None:
    done = _run_buildspec(box, FAIL_DOCKER_PUSH="99", ECR_HAS_IMAGE="1")
    assert done.returncode == 0, done.stderr
    assert len([c for c in box.lines("docker.log") if c.startswith("push ")]) == RETRY_ATTEMPTS
    assert "docker push failed; accepting the tag if ECR already holds it" in done.stderr
    assert f"IMAGE_URI={REPOSITORY_URI}@{DIGEST}" in done.stdout


def test_buildspec_fails_when_the_push_fails_and_ecr_lacks_the_tag(box: Box) -> None:
    done = _run_buildspec(box, FAIL_DOCKER_PUSH="99", ECR_HAS_IMAGE="0")
    assert done.returncode != 0
    assert "[codebuild] build command" in done.stderr and "failed" in done.stderr
    assert "IMAGE_URI=" not in done.stdout


def test_buildspec_stops_after_three_failed_builds_and_never_pushes(box: Box) -> None:
    done = _run_buildspec(box, FAIL_DOCKER_BUILD="99", ECR_HAS_IMAGE="1")
    assert done.returncode == 1
    docker = box.lines("docker.log")
    assert len([c for c in docker if c.startswith("build ")]) == RETRY_ATTEMPTS
    assert not [c for c in docker if c.startswith("push ")]
    assert "retry: giving up after 3 attempts" in done.stderr


def test_buildspec_stops_in_pre_build_when_the_registry_login_keeps_failing(box: Box) -> None:
    done = _run_buildspec(box, FAIL_AWS_ECR_LOGIN="99")
    assert done.returncode != 0
    assert "[codebuild] pre_build command" in done.stderr and "failed" in done.stderr
    assert box.count("aws-ecr-login") == RETRY_ATTEMPTS
    assert not [c for c in box.lines("docker.log") if c.startswith(("pull ", "build "))]


def test_buildspec_stops_when_a_base_image_cannot_be_pulled(box: Box) -> None:
    done = _run_buildspec(box, FAIL_DOCKER_PULL="99")
    assert done.returncode != 0
    docker = box.lines("docker.log")
    assert len([c for c in docker if c.startswith("pull ")]) == RETRY_ATTEMPTS
    assert not [c for c in docker if c.startswith("build ")]


def test_buildspec_requires_the_per_build_variables(box: Box) -> None:
    spec = _spec()
    script = _codebuild_script(spec)
    variables = {k: str(v) for k, v in spec["env"]["variables"].items()} | {"TOOLS_DIR": str(box.tools)}
    done = box.run(
        script,
        **variables,
        AWS_REGION="us-east-1",
        DOCKERFILE="Dockerfile",
        DOCKER_PLATFORM="linux/amd64",
        REPOSITORY_URI=REPOSITORY_URI,
    )
    assert done.returncode != 0 and "IMAGE_TAG is not set" in done.stderr
    assert box.lines("docker.log") == []


def test_fakes_are_first_on_path(box: Box) -> None:
    """The fakes shadow any real docker or aws on the machine (else a test could push for real)."""
    done = box.run("command -v docker aws sleep")
    assert done.stdout.split() == [str(box.fakes / "docker"), str(box.fakes / "aws"), str(box.fakes / "sleep")]
