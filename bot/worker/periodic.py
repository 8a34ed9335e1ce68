"""A worker's housekeeping on a thread of its own: a step run again and again, each time after
the pause the one before asked for, until the worker stops. Retention and /forget's scrubs
are two; a step that fails (the database is away) is logged in one line and tried again."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


class Periodic:
    """Runs `step` on a thread named `name` until `stop`: first after `first_delay()` seconds,
    then after the seconds each step returns; after a failure, after `retry_seconds`, with a
    warning that names `what` (`log`'s)."""

    def __init__(
        self,
        name: str,
        step: Callable[[], float],
        *,
        first_delay: Callable[[], float],
        retry_seconds: Callable[[], float],
        what: str,
        log: logging.Logger,
    ) -> None:
        self.name = name
        self._step = step
        self.first_delay = first_delay
        self.retry_seconds = retry_seconds
        self.what = what
        self.log = log
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once: a second start does nothing)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Run no more steps after the one under way (if any)."""
        self._stopping.set()

    def join(self, deadline: float) -> bool:
        """Wait until the `time.monotonic()` `deadline` for the step under way to end; True if
        the thread ended (or never ran)."""
        if self._thread is None:
            return True
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()

    def _run(self) -> None:
        delay = self.first_delay()
        while not self._stopping.wait(delay):
            try:
                delay = self._step()
            except Exception as exc:  # the database is away: the next step tries again
                name = type(exc).__name__
                self.log.warning("%s failed (%s); trying again later", self.what, name)
                delay = self.retry_seconds()
