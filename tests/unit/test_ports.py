"""A port for a process about to start comes from one helper, below the kernel's ephemeral range
(:mod:`stacks.ports`): a port the kernel picks (``bind`` to port 0) is one any client connection may take before the
process listens, which failed the box's Kueue once under load ("address already in use")."""

import re
import socket
import subprocess
from pathlib import Path

import pytest

from stacks import ports
from tests.harness import REPO

#: Asking the kernel for a port: ``bind(("127.0.0.1", 0))`` and the like.
KERNEL_PICK = re.compile(r"""\.bind\(\(\s*["'][^"']*["']\s*,\s*0\s*\)\)""")


def test_a_port_is_below_the_ephemeral_range_and_free() -> None:
    low = ports.ephemeral_low()
    for _ in range(20):
        port = ports.free_port()
        assert port < min(low, ports.DEFAULT_EPHEMERAL_LOW) - ports.KWOK_MARGIN, (port, low)
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_without_room_below_the_range_the_kernel_picks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text("1024\t65535\n")
    assert ports.ephemeral_low(narrow) == 1024
    assert ports.ephemeral_low(tmp_path / "absent") == ports.DEFAULT_EPHEMERAL_LOW
    monkeypatch.setattr(ports, "ephemeral_low", lambda: 1024)
    assert 1024 <= ports.free_port() <= 65535


def test_no_other_code_asks_the_kernel_for_a_port() -> None:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    found = [
        path
        for path in tracked.stdout.split()
        if path != "stacks/ports.py" and KERNEL_PICK.search((REPO / path).read_text())
    ]
    assert found == [], f"pick a port with stacks.ports.free_port: {found}"
    pick = 's.bind(("127.0.0.1", ' + "0))"  # split, or the check above finds this file
    assert KERNEL_PICK.search(pick) and not KERNEL_PICK.search('s.bind(("127.0.0.1", port))')
