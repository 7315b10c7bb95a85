"""The box's Kueue manager starts again on new ports when one it was given is taken before it listens: the ports come
from the kernel's ephemeral range (``free_port``), where any client's connection may take one first. A stand-in
manager (a Python script that reads the configuration as Kueue does) exits the way Kueue's ``main.go`` does the first
time, then serves its health probe and webhook."""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stacks.box import kueue as box_kueue
from stacks.box.api import BoxError
from tests.wait import patient

MANAGER = """#!{python}
import http.server, ssl, socket, sys, threading, yaml
from pathlib import Path

config = yaml.safe_load(Path(next(a for a in sys.argv if a.startswith("--config="))[9:]).read_text())
health = int(config["health"]["healthProbeBindAddress"].rsplit(":", 1)[1])
marker = Path({marker!r})
starts = int(marker.read_text()) if marker.exists() else 0
marker.write_text(str(starts + 1))
if starts < {failures}:
    print('{{"level":"error","msg":"Could not run manager","error":"listen tcp 127.0.0.1:%d: bind: address already '
          'in use"}}' % health, flush=True)
    sys.exit(1)


class Ready(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()


threading.Thread(target=http.server.HTTPServer(("127.0.0.1", health), Ready).serve_forever, daemon=True).start()
certs = Path(config["webhook"]["certDir"])
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(certs / "tls.crt", certs / "tls.key")
listener = socket.create_server(("127.0.0.1", int(config["webhook"]["port"])))
while True:
    conn, _ = listener.accept()
    try:
        tls.wrap_socket(conn, server_side=True).close()
    except OSError:
        conn.close()
"""


def _kueue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: int) -> tuple[box_kueue.Kueue, list[Any]]:
    monkeypatch.setattr(box_kueue, "establish_crds", lambda box, names: None)
    monkeypatch.setattr(box_kueue, "crds", lambda folder="kueue": [])
    monkeypatch.setattr(box_kueue, "_metrics_certificate", lambda: None)
    monkeypatch.setattr(box_kueue, "webhook_configurations", lambda port, ca, folder="kueue": [{"port": port}])
    binary = tmp_path / "manager"
    binary.write_text(MANAGER.format(python=sys.executable, marker=str(tmp_path / "starts"), failures=failures))
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    applied: list[Any] = []
    box = SimpleNamespace(home=tmp_path, kubeconfig=tmp_path / "kubeconfig", apply=applied.append)
    return box_kueue.Kueue(box, binary, {}, log_dir=tmp_path), applied  # type: ignore[arg-type]


def test_a_port_taken_before_the_manager_listens_starts_it_again_on_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kueue, applied = _kueue(tmp_path, monkeypatch, failures=2)
    try:
        kueue.start(timeout_s=patient(60))
    finally:
        kueue.stop()
    assert (tmp_path / "starts").read_text() == "3"
    assert kueue.log().count("address already in use") == 2
    assert applied == [[{"port": kueue.webhook_port}]]  # the webhooks name the port it listens on at last


def test_a_manager_that_keeps_failing_is_reported_with_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kueue, applied = _kueue(tmp_path, monkeypatch, failures=10)
    with pytest.raises(BoxError, match="address already in use"):
        kueue.start(timeout_s=patient(60))
    assert (tmp_path / "starts").read_text() == "4"  # the first start and three more
    assert applied == []
