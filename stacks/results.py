"""The command that copies a job's output folder from the shared volume to the machine that runs it
(``jobs.<job>.copyCommand``): a pod mounts the claim read-only on a system node, ``kubectl cp`` reads the folder
through it (tar, in the toolbox image), then the pod is deleted."""

import json
import shlex
from typing import Any

from components.conventions import SHARED_MOUNT
from components.scheduling import system_node_selector
from components.workloads.pods import camel, container_security, pod_security

#: The copy pod's life if nobody deletes it (an interrupted copy), from its start, the image's pull included.
COPY_POD_SECONDS = 6 * 3600
#: How long the command waits for the pod to start (a system node may pull the toolbox image first).
COPY_POD_START_TIMEOUT = "15m"


def copy_pod_name(job_name: str) -> str:
    """The copy pod of the job whose Kubernetes name is ``job_name``."""
    return f"{job_name}-copy"


def copy_pod(namespace: str, job_name: str, image: str, claim: str) -> dict[str, Any]:
    """The pod ``kubectl cp`` reads through: the shared claim at its usual mount, read-only; the toolbox image's
    unprivileged user, as the jobs run (the namespace enforces Pod Security ``baseline``); no network needed."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": copy_pod_name(job_name),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "copy-results", "app.kubernetes.io/part-of": job_name},
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": COPY_POD_SECONDS,
            "terminationGracePeriodSeconds": 1,  # sleep, the pod's first process, ignores SIGTERM
            "nodeSelector": system_node_selector(),
            "securityContext": camel(pod_security()),  # the jobs' own
            "containers": [
                {
                    "name": "copy",
                    "image": image,
                    "command": ["sleep", "infinity"],
                    "securityContext": camel(container_security(read_only_root=True)),
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                    "volumeMounts": [{"name": "shared", "mountPath": SHARED_MOUNT, "readOnly": True}],
                }
            ],
            "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}],
        },
    }


def copy_command(namespace: str, job: str, job_name: str, output_dir: str, image: str, claim: str) -> str:
    """Copy ``output_dir`` (the job's folder, as its pods see it) to ``./<job>``: a copy pod left by an earlier run is
    deleted, the pod is made and awaited, the folder is checked to exist (``kubectl cp`` exits 0 on a missing one,
    kubernetes/kubectl#980), ``kubectl cp`` copies, and the pod is deleted whatever the copy did; the command's status
    is the copy's (no ``exit``: it may run in the reader's own shell, through ``eval``)."""
    ns, pod = shlex.quote(namespace), copy_pod_name(job_name)
    manifest = json.dumps(copy_pod(namespace, job_name, image, claim), separators=(",", ":"))
    return (
        f"kubectl delete -n {ns} pod/{pod} --ignore-not-found"
        f" && printf '%s\\n' {shlex.quote(manifest)} | kubectl create -f -"
        f" && kubectl wait -n {ns} --for=condition=Ready --timeout={COPY_POD_START_TIMEOUT} pod/{pod}"
        f" && kubectl exec -n {ns} {pod} -- test -d {shlex.quote(output_dir)}"
        f" && kubectl cp -n {ns} {pod}:{shlex.quote(output_dir)} {shlex.quote('./' + job)}"
        f"; copied=$?; kubectl delete -n {ns} pod/{pod} --wait=false --ignore-not-found"
        '; [ "$copied" -eq 0 ]'
    )
