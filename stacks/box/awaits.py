"""What ``pulumi up`` waits for, answered on the box by the Kubernetes provider's own await code.

:class:`Awaiter` runs ``pulumi-await`` (``box/await``: pulumi-kubernetes' ``pulumi.com/skipAwait`` and
``pulumi.com/waitFor`` handling and its Job checker) and asks it about one object at a time. :func:`await_timeout_s`
reads how long the provider waits for a registration: its custom timeouts, else ``pulumi.com/timeoutSeconds``, else
ten minutes (https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/metadata/overrides.go).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from components.workloads.waits import JOB_OBJECTS

#: The provider's wait when a resource sets no timeout (``provider/pkg/await/await.go``, ``timeout := 10 *
#: time.Minute``; ``DefaultJobTimeoutMins`` for Jobs).
PROVIDER_DEFAULT_TIMEOUT_S = 600.0
TIMEOUT_SECONDS = "pulumi.com/timeoutSeconds"
WAIT_FOR = "pulumi.com/waitFor"
SKIP_AWAIT = "pulumi.com/skipAwait"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def go_duration_s(text: str) -> float:
    """Seconds of a Go duration as the engine parses a custom timeout (``90m``, ``1h30m``, ``45s``)."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def await_timeout_s(custom_timeouts: Mapping[str, str], inputs: Mapping[str, Any]) -> float:
    """How long the provider waits to create the object: the ``create`` custom timeout, else the
    ``pulumi.com/timeoutSeconds`` annotation, else :data:`PROVIDER_DEFAULT_TIMEOUT_S`."""
    if custom_timeouts.get("create"):
        return go_duration_s(custom_timeouts["create"])
    annotation = ((inputs.get("metadata") or {}).get("annotations") or {}).get(TIMEOUT_SECONDS)
    if annotation is not None and str(annotation).isdigit():
        return float(annotation)
    return PROVIDER_DEFAULT_TIMEOUT_S


def asks_provider(doc: Mapping[str, Any]) -> bool:
    """Whether the provider's await code decides when ``doc`` is ready: a Job, or any object with ``waitFor`` (the
    box stands in for the other awaited kinds itself)."""
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    return (doc.get("apiVersion"), doc.get("kind")) == ("batch/v1", "Job") or WAIT_FOR in annotations


@dataclass(frozen=True)
class Answer:
    awaited: bool
    """The provider waits for the object at all."""
    ready: bool
    error: str = ""
    """Why the wait failed (a failed Job's reason, a malformed ``waitFor``): ``pulumi up`` stops there."""


class Awaiter:
    """One ``pulumi-await`` process, asked about objects one at a time (thread-safe)."""

    def __init__(self, binary: Path) -> None:
        self.proc = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lock = threading.Lock()

    def answer(self, inputs: Mapping[str, Any], live: Mapping[str, Any]) -> Answer:
        """The provider's answer for ``inputs`` (the object as registered) now that the cluster holds ``live``."""
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps({"inputs": inputs, "live": live}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"pulumi-await exited ({self.proc.wait()}): {err.strip()}")
        got = json.loads(line)
        return Answer(bool(got.get("awaited")), bool(got.get("ready")), str(got.get("error") or ""))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "Awaiter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def failure_of(kind: str, live: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The failed condition's ``reason: message`` of a job object the program awaited (the program stops ``pulumi
    up`` with it once the wait ends: :meth:`components.workloads.waits.JobObject.succeeded_or_raise`)."""
    obj = JOB_OBJECTS.get(kind)
    return obj.failure(live) if obj is not None else None
