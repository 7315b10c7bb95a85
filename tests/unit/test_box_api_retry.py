"""The box's REST client sends a request again where the apiserver asks it to, as client-go does: a 429 or a 5xx with
``Retry-After`` (the apiserver's "storage is (re)initializing" while a CustomResourceDefinition changes, which a
Kueue upgrade on the box met), at most ``RETRIES`` times; any other answer is returned as it came."""

import json
import threading
from typing import Any, Optional

import pytest

from stacks.box import api


class _Response:
    def __init__(self, status: int, body: Any, retry_after: Optional[str]) -> None:
        self.status, self._body, self._after = status, body, retry_after

    def getheader(self, name: str) -> Optional[str]:
        return self._after if name == "Retry-After" else None

    def read(self) -> bytes:
        return json.dumps(self._body).encode()


class _Conn:
    """A kept-alive connection that answers from a list, recording each request."""

    def __init__(self, answers: list[_Response]) -> None:
        self.answers, self.sent = answers, 0

    def request(self, *args: Any, **kwargs: Any) -> None:
        self.sent += 1

    def getresponse(self) -> _Response:
        return self.answers.pop(0)

    def close(self) -> None:
        pass


def _client(conn: _Conn) -> api.Api:
    client = api.Api.__new__(api.Api)  # no kubeconfig: the connection is the stand-in's
    client._local = threading.local()
    client._local.conn = conn
    return client


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(api.time, "sleep", slept.append)
    return slept


def test_a_429_with_retry_after_is_sent_again_after_the_wait(_no_sleep: list[float]) -> None:
    busy = {"message": "storage is (re)initializing"}
    conn = _Conn([_Response(429, busy, "1"), _Response(503, busy, "2"), _Response(200, {"items": []}, None)])
    assert _client(conn).request("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads") == (200, {"items": []})
    assert conn.sent == 3 and _no_sleep == [1.0, 2.0]


@pytest.mark.parametrize("status, after", [(429, None), (404, "1"), (500, "soon")])
def test_an_answer_without_a_wait_in_seconds_is_returned_as_it_came(status: int, after: Optional[str]) -> None:
    conn = _Conn([_Response(status, {"message": "no"}, after), _Response(200, {}, None)])
    assert _client(conn).request("GET", "/api/v1/pods") == (status, {"message": "no"})
    assert conn.sent == 1


def test_it_gives_up_after_client_gos_ten_retries(_no_sleep: list[float]) -> None:
    conn = _Conn([_Response(429, {"message": "busy"}, "100") for _ in range(api.RETRIES + 2)])
    assert _client(conn).request("GET", "/api/v1/pods") == (429, {"message": "busy"})
    assert conn.sent == api.RETRIES + 1 and _no_sleep == [api.RETRY_AFTER_MAX_S] * api.RETRIES


def test_a_watch_opened_while_the_apiserver_asks_to_wait_opens_after_the_wait(_no_sleep: list[float]) -> None:
    """A watch (stacks/box/watch.py) opens its own connection: it waits as a request does."""
    from stacks.box import watch

    answers = [_Response(429, {"message": "storage is (re)initializing"}, "1"), _Response(200, {}, None)]
    opened: list[_Conn] = []

    class _Api:
        def connect(self, timeout_s: Optional[float]) -> _Conn:
            opened.append(_Conn(answers))
            return opened[-1]

    w = watch.Watch.__new__(watch.Watch)  # its constructor resolves the resource on a box: set what __enter__ reads
    w.api, w.path, w._thread = _Api(), "/api/v1/pods?watch=1", None  # type: ignore[assignment]
    w._read = lambda response: None  # type: ignore[method-assign]
    w.__enter__()
    assert len(opened) == 2 and _no_sleep == [1.0]
    assert api.wait_asked(429, None) is None and api.wait_asked(503, "3") == 3.0 and api.wait_asked(409, "1") is None
