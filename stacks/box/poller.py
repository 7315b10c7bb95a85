"""A thread that looks at a box again and again while something else runs (``with poller: ...``)."""

from __future__ import annotations

import threading
from typing import Optional

from typing_extensions import Self


class Poller:
    """Calls :meth:`poll` every ``interval_s`` in a daemon thread from ``__enter__`` to ``__exit__``; the first
    exception stops the polling and is kept in :attr:`error` for the caller to report. With :attr:`last_look`,
    ``__exit__`` polls once more after the thread ended (what happened after the last poll)."""

    last_look = False
    """Poll once more at ``__exit__`` (an error there is kept unless an earlier one was: the box may be gone)."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def poll(self) -> None:
        """One look (subclasses say at what)."""
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - reported by the caller (self.error)
                self.error = exc
                return
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        if self.last_look:
            try:
                self.poll()
            except Exception as error:  # noqa: BLE001 - the box may be gone; the earlier polls stand
                self.error = self.error or error
