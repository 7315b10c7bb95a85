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
import time
from typing import Any, Optional
from urllib.parse import quote, urlencode

from typing_extensions import Self

from stacks.box.api import RETRIES, Api, BoxError, wait_asked


class Watch:
    """Collects the events of a watch of ``resource`` (in ``namespace``, all if ``None``; matching ``selector``) in a
    thread, from ``__enter__`` (the watch is open when it returns) to ``__exit__``. :attr:`events` holds (type,
    object) in order, :attr:`times` when each arrived (:func:`time.monotonic`); :attr:`error` says why the watch ended
    early, if it did."""

    def __init__(self, api: Api, resource: str, namespace: Optional[str], selector: str = "") -> None:
        base, plural, _kind, namespaced = api.resolve(resource)
        query = {"watch": "1", "allowWatchBookmarks": "false", **({"labelSelector": selector} if selector else {})}
        scope = f"/namespaces/{quote(namespace)}" if namespaced and namespace else ""
        self.path = f"{base}{scope}/{plural}?{urlencode(query)}"
        self.api = api
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.times: list[float] = []
        self.error: Optional[str] = None
        self._conn: Optional[http.client.HTTPSConnection] = None
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> Self:
        for tries_left in range(RETRIES, -1, -1):
            conn = self._conn = self.api.connect(timeout_s=None)
            conn.request("GET", self.path, headers={"Accept": "application/json"})
            response = conn.getresponse()
            if response.status == 200:
                break
            body = response.read().decode(errors="replace")
            conn.close()
            wait_s = wait_asked(response.status, response.getheader("Retry-After"))
            if wait_s is None or not tries_left:
                raise BoxError(f"watch {self.path}: {response.status}: {body}")
            time.sleep(wait_s)  # the apiserver asks for it again later, as for any request (stacks/box/api.py)
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
                self.times.append(time.monotonic())  # first: a reader of events[i] finds times[i]
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


class Changes:
    """The changes to ``resource`` (all namespaces) since the last :meth:`read`, from a :class:`Watch` opened again
    when the apiserver ends it (an upgrade of the box: the new watch starts from the objects there are then)."""

    def __init__(self, api: Api, resource: str) -> None:
        self.api, self.resource = api, resource
        self._watch: Optional[Watch] = None
        self._read = 0

    def open(self) -> None:
        """Open the watch; when the apiserver is away, the next :meth:`read` tries again."""
        try:
            self._watch = Watch(self.api, self.resource, None).__enter__()
        except (OSError, BoxError, http.client.HTTPException):
            self._watch = None
        self._read = 0

    def read(self) -> list[tuple[float, str, dict[str, Any]]]:
        """(arrival time, ``ADDED``/``MODIFIED``/``DELETED``, object) in the apiserver's order."""
        watch = self._watch
        if watch is None:
            self.open()
            return []
        closed = watch.error is not None  # read first: every event of an ended watch is in by then
        events, times = watch.events[self._read :], watch.times[self._read :]
        self._read += len(events)
        if closed:
            self.close()
            self.open()
        return [(at, kind, obj) for at, (kind, obj) in zip(times, events)]

    def close(self) -> None:
        if self._watch is not None:
            self._watch.__exit__(None, None, None)
            self._watch = None
