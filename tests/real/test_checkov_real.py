"""checkov's Kubernetes checks over every object every stack registers.

Each stack's Kubernetes objects are written out as YAML (an MPIJob, which checkov does not know, as one Job per
replica template: batch pods, so its launcher and workers are checked like our other jobs' pods) and checkov (pinned in
requirements-checkov.txt, installed by .ci/run into .venv-checkov: it pins boto3 to a release older than the program's)
runs its ``kubernetes`` framework on them offline. Any failed check fails the test unless it is in :data:`SKIPS`, each
with the reason it does not apply; a skip that no longer matches anything fails too, so the list stays small.
Third-party manifests the program installs (the Helm releases, the MPI Operator's release manifest) are not
ours to change and are not rendered, nor is a patch of one (the MPI Operator's node selector: part of an object).
"""

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stacks.box.manifests import is_patch
from tests.harness import REPO, run_program, stack_names
from tests.wait import patient

CHECKOV = Path(os.environ.get("CHECKOV", REPO / ".venv-checkov" / "bin" / "checkov"))
PINNED = (REPO / "requirements-checkov.txt").read_text().split("checkov==", 1)[1].split()[0]


@dataclass(frozen=True)
class Skip:
    resources: str
    """Regular expression of the checkov resources (``Kind.namespace.name``) the skip covers."""
    reason: str


#: Why the FSx for Lustre stacks run one container as root with two capabilities.
_FSX_CHOWN = (
    "root with CHOWN and FOWNER only: a new FSx for Lustre file system belongs to root, and handing its data "
    "directories to the training user (UID 1000) takes chown; the one-shot Job runs busybox with every other "
    "capability dropped, a read-only root, no escalation and no service-account token"
)

#: Checks that do not apply to these workloads, and why.
_PREPULL = (
    "probes: a pre-pull's pod runs its image's no-op once, then sleeps; it serves nothing and no one reads its "
    "readiness (nothing awaits the DaemonSet), and a liveness probe could only restart a sleep"
)
SKIPS: dict[str, Skip] = {
    "CKV_K8S_11": Skip(
        ".*",
        (
            "CPU limits: the jobs request the CPU their node offers (all of it, less the system's share) and a limit "
            "would only add CFS throttling to data loaders and collectives; requests already reserve the capacity, and "
            "every container has a memory limit (CKV_K8S_13 passes)"
        ),
    ),
    "CKV_K8S_40": Skip(
        ".*",
        (
            "high UID: pods run as the images' own user, UID 1000 (training/Dockerfile's trainer, the MPI images' "
            "mpiuser, who owns sshd's host keys), which owns the files on the shared volume; runAsNonRoot, no "
            "privilege escalation, all capabilities dropped, read-only roots and no host namespaces or host paths "
            "keep that UID from meaning anything on the node (etcd, whose image has no user, runs as 65532)"
        ),
    ),
    "CKV_K8S_23": Skip(r"^Job\.training\.shared-data-init$", _FSX_CHOWN),
    "CKV_K8S_25": Skip(r"^Job\.training\.shared-data-init$", _FSX_CHOWN),
    # MPIJob replicas are rendered as Jobs named <job>-launcher and <job>-worker (every MPI job of every stack)
    "CKV_K8S_22": Skip(
        r"^Job\.training\.[a-z0-9-]+-(launcher|worker)$",
        (
            "read-only root: MPI jobs default to readOnlyRootFilesystem false, their workers' sshd writing to the "
            "image (a job can set true: /tmp becomes an emptyDir); every other container's root is read-only"
        ),
    ),
    # a pre-pull's pods pull an image and sleep (components/workloads/prepull.py): nothing to probe
    "CKV_K8S_8": Skip(r"^DaemonSet\.[a-z0-9-]+\.prepull-", _PREPULL),
    "CKV_K8S_9": Skip(r"^DaemonSet\.[a-z0-9-]+\.prepull-", _PREPULL),
}


def _ints(value: Any) -> Any:
    """Integral floats (how the mocks carry numbers) back to the integers the provider sends."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def rendered(stack: str) -> list[dict[str, Any]]:
    """The Kubernetes objects ``stack`` registers, as they reach the API server."""
    docs: list[dict[str, Any]] = []
    for r in run_program(stack).registrations:
        if not r.type.startswith("kubernetes:") or r.type.startswith(("kubernetes:helm.sh/", "kubernetes:yaml/")):
            continue
        if is_patch(r.type):
            continue
        doc = _ints(json.loads(json.dumps({k: v for k, v in r.inputs.items() if not k.startswith("__")})))
        if doc["kind"] == "MPIJob":
            md = doc["metadata"]
            for role, replica in doc["spec"]["mpiReplicaSpecs"].items():
                template = {
                    **replica["template"],
                    "spec": {**replica["template"]["spec"], "restartPolicy": replica["restartPolicy"]},
                }
                docs.append(
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": f"{md['name']}-{role.lower()}",
                            "namespace": md["namespace"],
                            "labels": md.get("labels", {}),
                        },
                        "spec": {"template": template},
                    }
                )
            continue
        docs.append(doc)
    return docs


def test_checkov_finds_nothing_but_the_justified_skips(tmp_path: Path) -> None:
    assert CHECKOV.is_file(), (
        f"{CHECKOV} not found: python3 -m venv .venv-checkov && .venv-checkov/bin/pip install -r "
        "requirements-checkov.txt (bash .ci/run does this)"
    )
    kinds: set[str] = set()
    for stack in stack_names():
        docs = rendered(stack)
        kinds |= {d["kind"] for d in docs}
        (tmp_path / f"{stack}.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    assert {"Deployment", "Job", "Service", "NetworkPolicy", "Namespace"} <= kinds
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CKV_NO_OUTPUT_COLOR": "1"}
    done = subprocess.run(
        [
            str(CHECKOV),
            "--directory",
            str(tmp_path),
            "--framework",
            "kubernetes",
            "--skip-download",
            "--compact",
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=patient(600),
        env=env,
        cwd=tmp_path,
    )
    assert done.stdout.strip(), f"checkov printed nothing (exit {done.returncode}):\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    reports = report if isinstance(report, list) else [report]
    versions = {r["summary"]["checkov_version"] for r in reports}
    assert versions == {PINNED}, f"checkov {versions}, requirements-checkov.txt pins {PINNED}"
    results = [r["results"] for r in reports]
    passed = [c for r in results for c in r["passed_checks"]]
    failed = [c for r in results for c in r["failed_checks"]]
    assert len({c["check_id"] for c in passed}) > 40, "checkov ran its Kubernetes checks"

    def skipped(c: dict[str, Any]) -> bool:
        skip = SKIPS.get(c["check_id"])
        return skip is not None and re.search(skip.resources, c["resource"]) is not None

    unexpected = sorted(
        {
            f"{c['check_id']} {c['check_name']}: {c['resource']} ({Path(c['file_path']).name})"
            for c in failed
            if not skipped(c)
        }
    )
    assert not unexpected, "\n".join(unexpected)
    stale = set(SKIPS) - {c["check_id"] for c in failed if skipped(c)}
    assert not stale, f"skips that match nothing any more (remove them): {sorted(stale)}"
