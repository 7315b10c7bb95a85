"""The deploying machine's check: the AWS CLI that the cluster's kubeconfig runs for its token."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from components.catalog import SOURCES
from stacks.plan.checklist import AWS_CLI, AWS_CLI_KEY, AWS_CLI_MINIMUM
from stacks.preflight.findings import Finding

_VERSION = re.compile(r"aws-cli/(\d+)\.(\d+)\.(\d+)")
INSTALL = SOURCES["aws-cli-install"].url


def program_bin() -> Optional[Path]:
    """The ``bin`` folder of the virtualenv this program runs in (Pulumi puts it first on the program's ``PATH``, not
    on the providers'), or ``None`` outside one."""
    return Path(sys.prefix) / "bin" if sys.prefix != sys.base_prefix else None


def cli_version(command: str) -> Optional[tuple[int, int, int]]:
    """What ``aws --version`` says (on stdout, or stderr for old builds), or ``None`` when it says nothing we read."""
    try:
        done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION.search(done.stdout + done.stderr)
    return None if m is None else (int(m[1]), int(m[2]), int(m[3]))


def aws_cli_finding(path: str, own_bin: Optional[Path]) -> Finding:
    """Whether the Kubernetes provider of ``pulumi up`` will find an AWS CLI that answers the kubeconfig's token
    requests: on ``path`` (this process's ``PATH``), outside the program's own virtualenv ``own_bin``, and recent
    enough to answer in ``client.authentication.k8s.io/v1beta1``."""
    source = SOURCES["pulumi-eks-prerequisites"].url
    found = shutil.which(AWS_CLI, path=path)
    if found is None:
        return Finding(
            False,
            AWS_CLI_KEY,
            f"no `{AWS_CLI}` command: the cluster's kubeconfig runs `aws eks get-token` ({source}), and `pulumi up` "
            f"needs it for every Kubernetes object once the cluster exists; install the AWS CLI ({INSTALL}) where "
            "`pulumi up` runs",
        )
    outside = [p for p in path.split(os.pathsep) if p and (own_bin is None or Path(p).resolve() != own_bin.resolve())]
    elsewhere = shutil.which(AWS_CLI, path=os.pathsep.join(outside))
    version = cli_version(elsewhere or found)
    minimum = AWS_CLI_MINIMUM.get(version[0]) if version else None
    if version is not None and minimum is not None and version < minimum:
        shown, needed = ".".join(map(str, version)), ".".join(map(str, minimum))
        return Finding(
            False,
            AWS_CLI_KEY,
            f"{found} is aws-cli {shown}: before {needed} it answers `aws eks get-token` in an API version Kubernetes "
            f"clients no longer read ({SOURCES['aws-cli-exec-info'].url}); install a newer AWS CLI ({INSTALL})",
        )
    if elsewhere is None:
        return Finding(
            True,
            AWS_CLI_KEY,
            f"{found} is in this program's virtualenv only: `pulumi up` runs the Kubernetes provider with the shell's "
            f"PATH, which has it only when the virtualenv is active; install the AWS CLI outside it ({INSTALL})",
        )
    return Finding(
        True, AWS_CLI_KEY, f"the AWS CLI is {found}" + (f" (aws-cli {'.'.join(map(str, version))})" if version else "")
    )
