"""A TCP port on 127.0.0.1 for a process about to start, picked below the kernel's ephemeral range.

A port asked of the kernel (``bind`` to port 0) comes from its ephemeral range, which every client connection on the
machine also draws its local port from: under load, one often takes the port before the process that was given it
listens ("address already in use"). A port below that range is taken only by a process that binds it by number.
kwokctl counts its components' ports down from 32767 (sigs.k8s.io/kwok ``pkg/utils/net/unused_port.go``), so the
pick stays a kilobyte of ports below that too.
"""

import random
import socket
from pathlib import Path

#: Linux's default ephemeral range starts here (``net.ipv4.ip_local_port_range``).
DEFAULT_EPHEMERAL_LOW = 32768
#: Ports kept clear below the range's start (kwokctl's count down from 32767).
KWOK_MARGIN = 1024


def ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """Where the kernel's ephemeral range starts: read from ``path``, else Linux's default."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, outside the ephemeral range (the kernel's own pick where that range leaves
    no room below it)."""
    low = min(ephemeral_low(), DEFAULT_EPHEMERAL_LOW) - KWOK_MARGIN
    picks = random.SystemRandom()
    for _ in range(64 if low > 4096 else 0):
        port = picks.randrange(low // 2, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
