"""The one polling helper every test uses."""

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 20.0, interval: float = 0.1, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns a truthy value and return it; ``TimeoutError`` naming ``what``
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
