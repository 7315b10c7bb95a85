"""The CodeBuild environment, buildspec and ECR lifecycle policy of the image build (pure).

The build's network steps (registry logins, base-image pulls, ``docker build``, ``docker push``) fail now and
then for reasons that pass (throttling, a reset connection, a registry hiccup); each runs under ``retry``, a
small script the buildspec writes once and every later command calls: a bounded number of attempts with a
doubling wait. It is a script on ``PATH`` rather than a shell function because CodeBuild carries variables and
the working directory from one command to the next (source key ``codebuild-shell``), not functions.
"""

import functools
import json
from typing import Any, Literal, get_args

import yaml

#: platform -> (CodeBuild environment type, curated CodeBuild image with Docker)
PLATFORM_BUILD_ENVIRONMENTS: dict[str, tuple[str, str]] = {
    "linux/amd64": ("LINUX_CONTAINER", "aws/codebuild/amazonlinux2-x86_64-standard:5.0"),
    "linux/arm64": ("ARM_CONTAINER", "aws/codebuild/amazonlinux2-aarch64-standard:3.0"),
}
#: CodeBuild compute types (listed once; the config reads this).
ComputeType = Literal[
    "BUILD_GENERAL1_SMALL",
    "BUILD_GENERAL1_MEDIUM",
    "BUILD_GENERAL1_LARGE",
    "BUILD_GENERAL1_XLARGE",
    "BUILD_GENERAL1_2XLARGE",
]
COMPUTE_TYPES: frozenset[str] = frozenset(get_args(ComputeType))
#: The compute type a build runs on unless its settings name another (the stack config's default too:
#: ``images.<i>.computeType``).
DEFAULT_COMPUTE_TYPE: ComputeType = "BUILD_GENERAL1_LARGE"
#: The images an ECR repository's lifecycle policy keeps (the stack config's default too: ``imageBuild.keepImages``).
DEFAULT_KEEP_IMAGES = 10
#: CodeBuild's timeout for one build, in minutes (the stack config's default too: ``imageBuild.buildTimeoutMinutes``).
DEFAULT_BUILD_TIMEOUT_MINUTES = 90
#: The build timeouts CodeBuild takes, in minutes (CreateProject's ``timeoutInMinutes``: 5 to 2160).
BUILD_TIMEOUT_MINUTES_RANGE = (5, 2160)
RETRY_ATTEMPTS = 3
"""Attempts of each retried step (the first run included)."""
RETRY_DELAY_SECONDS = 10
"""Wait after the first failure; doubled after each further one (10 s, then 20 s)."""
ECR_PUBLIC_REGISTRY = "public.ecr.aws"
"""Amazon ECR Public, where the Dockerfiles' Ubuntu base comes from (:data:`components.catalog.BASE_IMAGES`)."""
ECR_PUBLIC_AUTH_REGION = "us-east-1"
"""Region of ECR Public's authorization API (source key ``ecr-public-login``)."""
BUILD_ARGS_VARIABLE = "DOCKER_BUILD_ARGS"
"""The project variable naming the build arguments (space-separated); each argument's value is in the variable of
its name, which ``docker build --build-arg NAME`` reads from the environment
(https://docs.docker.com/reference/cli/docker/buildx/build/#build-arg), so no value is parsed by a shell."""
#: Variables the build itself sets: no build argument may take their names.
RESERVED_BUILD_VARIABLES: tuple[str, ...] = (
    "DOCKERFILE",
    "DOCKER_PLATFORM",
    "IMAGE_TAG",
    "REPOSITORY_URI",
    "REGISTRY",
    "PATH",
    "TOOLS_DIR",
    "RETRY_DELAY_SECONDS",
    "DOCKER_BUILDKIT",
    BUILD_ARGS_VARIABLE,
)

RETRY_SCRIPT = """\
#!/usr/bin/env bash
# retry ATTEMPTS COMMAND [ARG...]: run COMMAND; when it fails, wait and run it again, ATTEMPTS times in all.
# The first wait is RETRY_DELAY_SECONDS (default 10) and doubles after each failure. Exits with COMMAND's status.
set -u
attempts="${1:-}"
case "$attempts" in
  '' | *[!0-9]* | 0) echo "usage: retry ATTEMPTS COMMAND [ARG...] (ATTEMPTS >= 1)" >&2; exit 2 ;;
esac
shift
if [ "$#" -eq 0 ]; then echo "usage: retry ATTEMPTS COMMAND [ARG...]" >&2; exit 2; fi
delay="${RETRY_DELAY_SECONDS:-10}"
attempt=1
while :; do
  "$@" && exit 0
  status=$?
  if [ "$attempt" -ge "$attempts" ]; then
    echo "retry: giving up after $attempt attempts (exit status $status): $*" >&2
    exit "$status"
  fi
  echo "retry: attempt $attempt of $attempts failed (exit status $status), again in ${delay}s: $*" >&2
  sleep "$delay"
  delay=$((delay * 2))
  attempt=$((attempt + 1))
done
"""
"""The ``retry`` script (bash)."""

#: awk program printing the images a Dockerfile pulls: each ``FROM``'s image (``--platform=...`` and other
#: options skipped) unless it is ``scratch``, an earlier stage's name or built from a build argument.
BASE_IMAGES_AWK = (
    'toupper($1) == "FROM" {'
    " ref = \"\"; for (i = 2; i <= NF; i++) if ($i !~ /^--/) { ref = $i; break }"
    " if (ref != \"\" && tolower(ref) != \"scratch\" && !(tolower(ref) in stages) && ref !~ /\\$/) print ref;"
    " for (i = 2; i < NF; i++) if (toupper($i) == \"AS\") stages[tolower($(i + 1))] = 1"
    " }"
)


def lifecycle_policy_document(keep_images: int) -> str:
    """ECR lifecycle policy JSON: expire all but the newest ``keep_images`` images (one rule)."""
    if keep_images < 1:
        raise ValueError("keep_images must be >= 1")
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": f"Keep only the newest {keep_images} images",
                    "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep_images},
                    "action": {"type": "expire"},
                }
            ]
        },
        sort_keys=True,
    )


def install_retry_command() -> str:
    """The command that writes :data:`RETRY_SCRIPT` to ``$TOOLS_DIR/retry`` (a folder on ``PATH``)."""
    return (
        'mkdir -p "$TOOLS_DIR"\n'
        "cat > \"$TOOLS_DIR/retry\" <<'EKS_TRAINING_RETRY'\n"
        f"{RETRY_SCRIPT}"
        "EKS_TRAINING_RETRY\n"
        'chmod 0755 "$TOOLS_DIR/retry"\n'
        "command -v retry\n"
    )


@functools.cache  # constant text (a str), rendered once per process: every image of every evaluation reads it
def buildspec() -> str:
    """The inline buildspec (YAML). Uses ``IMAGE_TAG`` and ``REPOSITORY_URI`` (set per build by the
    dynamic resource), ``DOCKERFILE``, ``DOCKER_PLATFORM`` and :data:`BUILD_ARGS_VARIABLE` with the arguments it
    names (project environment), ``AWS_REGION`` (set by CodeBuild).

    ``pre_build`` writes ``retry``, logs in to the repository's registry (retried, fatal) and to ECR Public
    (retried, not fatal: an authenticated pull only raises the limits, source key ``ecr-public-pulls``), then
    pulls the Dockerfile's base images (retried). ``build`` builds and pushes (both retried) and prints the
    pushed digest. A push that keeps failing is accepted when ECR already holds the tag (tags are content
    hashes and immutable: an earlier attempt or a concurrent build of the same context pushed it). Commands
    run as root (source key ``codebuild-buildspec``), so ``retry`` goes to ``/usr/local/bin``."""
    login = (
        "retry {attempts} bash -o pipefail -c '{password} | docker login --username AWS --password-stdin {registry}'"
    )
    spec: dict[str, Any] = {
        "version": 0.2,
        "env": {
            "shell": "bash",
            "variables": {
                "DOCKER_BUILDKIT": "1",
                "TOOLS_DIR": "/usr/local/bin",
                "RETRY_DELAY_SECONDS": str(RETRY_DELAY_SECONDS),
            },
        },
        "phases": {
            "pre_build": {
                "commands": [
                    install_retry_command(),
                    'test -n "${IMAGE_TAG:-}" || { echo "IMAGE_TAG is not set" >&2; exit 1; }',
                    'test -n "${REPOSITORY_URI:-}" || { echo "REPOSITORY_URI is not set" >&2; exit 1; }',
                    'export REGISTRY="${REPOSITORY_URI%%/*}"',
                    login.format(
                        attempts=RETRY_ATTEMPTS,
                        password='aws ecr get-login-password --region "$AWS_REGION"',
                        registry='"$REGISTRY"',
                    ),
                    login.format(
                        attempts=RETRY_ATTEMPTS,
                        password=f"aws ecr-public get-login-password --region {ECR_PUBLIC_AUTH_REGION}",
                        registry=ECR_PUBLIC_REGISTRY,
                    )
                    + f' || echo "ECR Public login failed: pulling {ECR_PUBLIC_REGISTRY} images anonymously (lower '
                    'limits)"',
                    f"for image in $(awk '{BASE_IMAGES_AWK}' \"$DOCKERFILE\"); do"
                    f' retry {RETRY_ATTEMPTS} docker pull --platform "$DOCKER_PLATFORM" "$image" || exit 1; done',
                ]
            },
            "build": {
                "commands": [
                    "build_args=()\n"
                    f'for arg in ${{{BUILD_ARGS_VARIABLE}:-}}; do build_args+=(--build-arg "$arg"); done\n'
                    f"retry {RETRY_ATTEMPTS} docker build --platform \"$DOCKER_PLATFORM\" --file \"$DOCKERFILE\""
                    ' ${build_args[@]+"${build_args[@]}"} --tag "$REPOSITORY_URI:$IMAGE_TAG" .\n',
                    f'retry {RETRY_ATTEMPTS} docker push "$REPOSITORY_URI:$IMAGE_TAG"'
                    ' || { echo "docker push failed; accepting the tag if ECR already holds it" >&2;'
                    ' aws ecr describe-images --region "$AWS_REGION" --repository-name "${REPOSITORY_URI#*/}"'
                    ' --image-ids imageTag="$IMAGE_TAG" > /dev/null; }',
                    'IMAGE_DIGEST="$(aws ecr describe-images --region "$AWS_REGION" --repository-name '
                    '"${REPOSITORY_URI#*/}" --image-ids imageTag="$IMAGE_TAG" --query "imageDetails[0].imageDigest" '
                    '--output text)"',
                    'echo "IMAGE_DIGEST=$IMAGE_DIGEST"',
                    'echo "IMAGE_URI=$REPOSITORY_URI@$IMAGE_DIGEST"',
                ]
            },
        },
    }
    return yaml.dump(spec, Dumper=_LiteralDumper, sort_keys=False, width=4096)


class _LiteralDumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks (``|``), readable in the CodeBuild console."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _str)
