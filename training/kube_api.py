"""The Kubernetes API as the toolbox's in-cluster programs read it (``wait_for_jobs.py``, ``collect_results.py``):
GET requests with the pod's service-account token, standard library only.

The pod gets its token only in the container that reads the API (a projected volume at the service account's usual
path); the API server's address comes from ``KUBERNETES_SERVICE_HOST``/``PORT``, which the kubelet sets in every
container (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class Resource(NamedTuple):
    """A kind of job the programs read: its API path, the condition type that means success, its kind's name."""

    path: str
    success: str
    kind: str


#: ``RESOURCE/NAME`` prefixes the programs accept: batch/v1 Jobs and the MPI Operator's MPIJobs.
RESOURCES: dict[str, Resource] = {
    "jobs": Resource("/apis/batch/v1/namespaces/{ns}/jobs/{name}", "Complete", "job"),
    "mpijobs": Resource("/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs/{name}", "Succeeded", "mpijob"),
}


def add_api_arguments(parser: argparse.ArgumentParser) -> None:
    """``--api-server``, ``--token-file`` and ``--ca-file`` (defaults: the pod's own)."""
    parser.add_argument(
        "--api-server", default=None, help="default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
    )
    parser.add_argument("--token-file", type=Path, default=SERVICE_ACCOUNT / "token")
    parser.add_argument("--ca-file", type=Path, default=SERVICE_ACCOUNT / "ca.crt")


class Api:
    """GET requests to the Kubernetes API with a bearer token (JSON, or text for logs)."""

    def __init__(self, server: str, token_file: Path, ca_file: Path, timeout_s: float = 30.0):
        self.server = server.rstrip("/")
        self.token_file = token_file
        self.timeout_s = timeout_s
        self.context = (
            ssl.create_default_context(cafile=str(ca_file)) if server.startswith("https") and ca_file.exists() else None
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace, timeout_s: float = 30.0) -> "Api":
        """The API of :func:`add_api_arguments`' options (the pod's own by default)."""
        server = (
            args.api_server
            or f"https://{os.environ.get('KUBERNETES_SERVICE_HOST', 'kubernetes.default.svc')}:"
            f"{os.environ.get('KUBERNETES_SERVICE_PORT', '443')}"
        )
        return cls(server, args.token_file, args.ca_file, timeout_s)

    def _get(self, path: str) -> bytes | None:
        token = self.token_file.read_text().strip() if self.token_file.exists() else ""
        req = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s, context=self.context) as resp:
                return bytes(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or ``None`` when it does not exist (404)."""
        body = self._get(path)
        return None if body is None else json.loads(body)

    def text(self, path: str) -> str | None:
        """A text resource (a log), or ``None`` when it does not exist."""
        body = self._get(path)
        return None if body is None else body.decode("utf-8", errors="replace")
