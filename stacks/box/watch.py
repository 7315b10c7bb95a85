"""Every change to a box's objects of one kind, in the apiserver's order (``with Watch(box.api, "pods", ...): ...``).

A :class:`stacks.box.poller.Poller` sees the state at each look and misses what lasts less than the time between two
looks: on a loaded machine, a pod that ran for 3 s. A watch misses nothing. The server sends each object as it is
when the watch starts, then every change (``ADDED``, ``MODIFIED``, ``DELETED``), one JSON event per line
(https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import quote, urlencode

from typing_extensions import Self

if TYPE_CHECKING:
    from stacks.box.cluster import Api


class Watch:
    """Collects the events of a watch of ``resource`` (in ``namespace``, all if ``None``; matching ``selector``) in a
    thread, from ``__enter__`` (the watch is open when it returns) to ``__exit__``. :attr:`events` holds (type,
    object) in order; :attr:`error` says why the watch ended early, if it did."""

    def __init__(self, api: Api, resource: str, namespace: Optional[str], selector: str = "") -> None:
        base, plural, _kind, namespaced = api.resolve(resource)
        query = {"watch": "1", "allowWatchBookmarks": "false", **({"labelSelector": selector} if selector else {})}
        scope = f"/namespaces/{quote(namespace)}" if namespaced and namespace else ""
        self.path = f"{base}{scope}/{plural}?{urlencode(query)}"
        self.api = api
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.error: Optional[str] = None
        self._conn: Optional[http.client.HTTPSConnection] = None
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> Self:
        conn = self._conn = self.api.connect(timeout_s=None)
        conn.request("GET", self.path, headers={"Accept": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            body = response.read().decode(errors="replace")
            conn.close()
            raise RuntimeError(f"watch {self.path}: {response.status}: {body}")
        self._thread = threading.Thread(target=self._read, args=(response,), daemon=True)
        self._thread.start()
        return self

    def _read(self, response: http.client.HTTPResponse) -> None:
        try:
            for line in iter(response.readline, b""):
                event = json.loads(line)
                if event["type"] == "ERROR":  # e.g. 410 Gone: the watch cannot go on
                    self.error = f"watch {self.path}: {event['object'].get('message')}"
                    return
                self.events.append((event["type"], event["object"]))
            if not self._stopping.is_set():
                self.error = f"watch {self.path}: the server closed it"
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if not self._stopping.is_set():
                self.error = f"watch {self.path}: {exc!r}"

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._conn and self._conn.sock:
            with contextlib.suppress(OSError):
                self._conn.sock.shutdown(socket.SHUT_RDWR)  # ends the reader's blocking read
        if self._thread:
            self._thread.join(timeout=30)
        if self._conn:
            self._conn.close()  # after the reader ended: closing under its read breaks http.client
