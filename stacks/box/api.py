"""The box's apiserver read and written over its REST API, without a kubectl process; :class:`BoxError`, the box's
error.

The rehearsal polls the cluster several times a second (jobs, pods, the objects ``pulumi up`` would await): one
``kubectl`` process per read cost about 80 ms of CPU, most of a 2-core machine's time in the cluster tier. Here a read
is one HTTPS request on a kept-alive connection (one per thread), with the client certificate of the box's kubeconfig.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional
from urllib.parse import quote, urlsplit

import yaml

#: How often a request the apiserver asks to send again later (``Retry-After``) is sent again: client-go's
#: ``maxRetries`` (k8s.io/client-go/rest/request.go, ``checkWait`` in with_retry.go), as kubectl would.
RETRIES = 10
#: The longest wait taken for one ``Retry-After`` (client-go takes any; the apiserver asks for 1 s).
RETRY_AFTER_MAX_S = 10.0


def wait_asked(status: int, retry_after: Optional[str]) -> Optional[float]:
    """The seconds to wait before sending a request again where the apiserver asks for it (client-go's
    ``checkWait``: a 429 or a 5xx with ``Retry-After`` in whole seconds), or ``None``."""
    after = (retry_after or "").strip()
    if (status == 429 or status >= 500) and after.isdigit():
        return min(float(after), RETRY_AFTER_MAX_S)
    return None


class BoxError(Exception):
    """The box could not be brought up, or a kubectl call failed (the message says which and why)."""


class NotRead(Exception):
    """A ``get`` argument :class:`Api` does not read (kubectl reads it instead)."""


class Api:
    """Reads and writes of the box's apiserver; resource names resolve as kubectl resolves them, from the server's
    discovery (refreshed when a name is not found: a CRD applied since)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.stamp = 0.0
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        server = urlsplit(cluster["server"])
        self._host, self._port = server.hostname or "127.0.0.1", server.port or 443
        self._ssl = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self._ssl.load_cert_chain(user["client-certificate"], user["client-key"])
        self._local = threading.local()
        self._resources: dict[str, tuple[str, str, str, bool]] = {}
        self._lock = threading.Lock()

    def connect(self, timeout_s: Optional[float]) -> http.client.HTTPSConnection:
        """A new connection to the apiserver (``timeout_s`` per socket operation; ``None``: none, for a watch)."""
        return http.client.HTTPSConnection(self._host, self._port, context=self._ssl, timeout=timeout_s)

    def request(
        self, method: str, path: str, body: Optional[Mapping[str, Any]] = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """``method path`` (with ``body`` as JSON, sent as ``content_type``) -> (HTTP status, the JSON body decoded,
        else its text)."""
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), content_type
        status, raw, wait_s = self._send(method, path, data, headers)
        for _ in range(RETRIES):
            if wait_s is None:
                break
            time.sleep(wait_s)
            status, raw, wait_s = self._send(method, path, data, headers)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:  # a plain-text error (e.g. "404 page not found" for a group version not served yet)
            return status, raw.decode(errors="replace")

    def _send(
        self, method: str, path: str, data: Optional[bytes], headers: Mapping[str, str]
    ) -> tuple[int, bytes, Optional[float]]:
        """One request: its status, its body and, where the server asks for the request again later, the seconds to
        wait first (as client-go's ``checkWait``: a 429 or a 5xx with ``Retry-After``, such as the apiserver's "storage
        is (re)initializing" while a CustomResourceDefinition changes)."""
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self.connect(timeout_s=60)
            try:
                conn.request(method, path, body=data, headers=dict(headers))
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
                continue  # a kept-alive connection the server closed: once more on a new one
            return resp.status, raw, wait_asked(resp.status, resp.getheader("Retry-After"))
        raise AssertionError("unreachable")

    def _discover(self) -> None:
        found: dict[str, tuple[str, str, str, bool]] = {}
        versions = [("", "/api/v1")]
        status, groups = self.request("GET", "/apis")
        if status != 200:
            raise BoxError(f"discovery failed: GET /apis -> {status}: {groups}")
        versions += [(g["name"], f"/apis/{g['preferredVersion']['groupVersion']}") for g in groups["groups"]]
        for group, base in versions:
            status, listing = self.request("GET", base)
            if status != 200:
                continue  # a group version not served (yet): as kubectl, resolve from the others
            for r in listing["resources"]:
                if "/" in r["name"] or "get" not in r.get("verbs", ()):
                    continue  # a subresource
                entry = (base, r["name"], r["kind"], bool(r["namespaced"]))
                names = {r["name"], r.get("singularName") or "", r["kind"].lower(), *(r.get("shortNames") or [])}
                for n in names - {""}:
                    found.setdefault(n, entry)  # the first group to serve a name has it: the core group first
                    if group:
                        found.setdefault(f"{n}.{group}", entry)
        self._resources = found

    def resolve(self, resource: str) -> tuple[str, str, str, bool]:
        """``resource`` as kubectl names it -> (group-version base path, plural, kind, namespaced)."""
        with self._lock:
            if resource not in self._resources:
                self._discover()
            if resource not in self._resources:
                raise BoxError(f'the server doesn\'t have a resource type "{resource}"')
            return self._resources[resource]

    def collection_path(self, resource: str, namespace: str) -> str:
        """The REST path of ``resource``'s objects (named as kubectl names it) in ``namespace``, where it has one."""
        base, plural, _kind, namespaced = self.resolve(resource)
        return base + (f"/namespaces/{quote(namespace)}" if namespaced else "") + f"/{plural}"

    def path_of(self, doc: Mapping[str, Any]) -> str:
        """The REST path of the collection ``doc`` belongs to (its kind's, in its namespace)."""
        group = doc["apiVersion"].rpartition("/")[0]
        resource = doc["kind"].lower() + (f".{group}" if group else "")
        return self.collection_path(resource, doc["metadata"].get("namespace") or "default")

    def write(
        self,
        method: str,
        doc: Mapping[str, Any],
        *,
        named: bool,
        query: str = "",
        content_type: str = "application/json",
    ) -> None:
        """``method`` ``doc`` at its collection's path (``named``: the object's own path), or :class:`BoxError` with
        the server's message, as kubectl would print it."""
        path = self.path_of(doc) + (f"/{quote(doc['metadata']['name'])}" if named else "") + query
        self.send(method, path, doc, content_type, what=f"{doc['kind']} {doc['metadata']['name']}")

    def send(self, method: str, path: str, body: Mapping[str, Any], content_type: str, *, what: str) -> None:
        """``method path`` with ``body``; a refusal raises :class:`BoxError` naming ``what`` and the server's reason."""
        status, answer = self.request(method, path, body, content_type)
        if status >= 300:
            message = answer.get("message") if isinstance(answer, dict) else answer
            raise BoxError(f"{method} {what} failed: ({status}): {message}")

    def get(self, *args: str) -> Any:
        """``kubectl get`` of ``RESOURCE [NAME] [-n NS | -A] [-l SELECTOR]`` (or ``RESOURCE/NAME``), as JSON."""
        resource, name, namespace, all_namespaces, selector = "", None, "default", False, None
        rest = list(args)
        while rest:
            a = rest.pop(0)
            if a in ("-n", "--namespace") and rest:
                namespace = rest.pop(0)
            elif a in ("-A", "--all-namespaces"):
                all_namespaces = True
            elif a in ("-l", "--selector") and rest:
                selector = rest.pop(0)
            elif a.startswith("-") or (resource and name is not None):
                raise NotRead(a)
            elif not resource:
                resource, _, slash_name = a.partition("/")
                name = slash_name or None
            else:
                name = a
        if not resource or (name is not None and all_namespaces):
            raise NotRead(" ".join(args))
        base, plural, kind, namespaced = self.resolve(resource)
        path = base + (f"/namespaces/{quote(namespace)}" if namespaced and not all_namespaces else "") + f"/{plural}"
        if name is not None:
            path += f"/{quote(name)}"
        elif selector:
            path += f"?labelSelector={quote(selector)}"
        status, body = self.request("GET", path)
        if status != 200:
            message = (body or {}).get("message") if isinstance(body, dict) else body
            raise BoxError(f"kubectl get {' '.join(args)} failed: Error from server ({status}): {message}")
        if name is None:  # a list: kubectl prints each item with its apiVersion and kind
            version = base.removeprefix("/api/").removeprefix("/apis/")
            for item in body.get("items") or []:
                item.setdefault("apiVersion", version)
                item.setdefault("kind", kind)
        return body
