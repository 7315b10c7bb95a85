"""The one polling helper every test uses."""

import os
import time
from typing import Callable, TypeVar

T = TypeVar("T")

#: The most a bound is stretched on a busy machine.
MOST_PATIENCE = 4.0


def patient(seconds: float) -> float:
    """A safety bound (how long a test lets a run go before calling it hung) stretched by how busy the machine is:
    the last minute's load average per core, between 1 and :data:`MOST_PATIENCE`. A correct run ends when done, so
    only a hung one waits longer; a bound the test asserts (a claim such as "replaced within 15 s") is not one."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * min(MOST_PATIENCE, max(1.0, load))


def wait_for(
    predicate: Callable[[], T], timeout: float | None = None, interval: float = 0.1, what: str = "condition"
) -> T:
    """Poll ``predicate`` until it returns a truthy value and return it; ``TimeoutError`` naming ``what``
    after ``timeout`` seconds (by default ``patient(20)``)."""
    timeout = patient(20.0) if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
