"""The CodeBuild buildspec and the ECR lifecycle policy of the image build (pure)."""

import json
from typing import Any

import yaml


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


def buildspec() -> str:
    """The inline buildspec (YAML). Uses ``IMAGE_TAG`` and ``REPOSITORY_URI`` (set per build by the
    dynamic resource), ``DOCKERFILE`` and ``DOCKER_PLATFORM`` (project environment), ``AWS_REGION``
    (set by CodeBuild). Logs in to ECR, builds, pushes and prints the pushed digest."""
    spec: dict[str, Any] = {
        "version": 0.2,
        "env": {"shell": "bash", "variables": {"DOCKER_BUILDKIT": "1"}},
        "phases": {
            "pre_build": {
                "commands": [
                    'test -n "${IMAGE_TAG:-}" || { echo "IMAGE_TAG is not set" >&2; exit 1; }',
                    'test -n "${REPOSITORY_URI:-}" || { echo "REPOSITORY_URI is not set" >&2; exit 1; }',
                    'REGISTRY="${REPOSITORY_URI%%/*}"',
                    'aws ecr get-login-password --region "$AWS_REGION" | docker login --username AWS --password-stdin "$REGISTRY"',
                ]
            },
            "build": {
                "commands": [
                    'docker build --platform "$DOCKER_PLATFORM" --file "$DOCKERFILE" --tag "$REPOSITORY_URI:$IMAGE_TAG" .',
                    'docker push "$REPOSITORY_URI:$IMAGE_TAG"',
                    'IMAGE_DIGEST="$(aws ecr describe-images --region "$AWS_REGION" --repository-name "${REPOSITORY_URI#*/}"'
                    ' --image-ids imageTag="$IMAGE_TAG" --query "imageDetails[0].imageDigest" --output text)"',
                    'echo "IMAGE_DIGEST=$IMAGE_DIGEST"',
                    'echo "IMAGE_URI=$REPOSITORY_URI@$IMAGE_DIGEST"',
                ]
            },
        },
    }
    return yaml.safe_dump(spec, sort_keys=False, width=4096)
