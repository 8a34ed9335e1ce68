"""Lanes: the threads a worker runs each of its queues on. Each drains its queue, then waits
for a wake-up or the next poll."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Lanes:
    """`count` threads running `step` until it finds no work, then waiting for a wake-up or
    the next poll. A wake-up that comes while every lane is busy is kept, so the next lane to
    finish looks again instead of waiting for the poll."""

    def __init__(
        self, name: str, count: int, step: Callable[[], bool], poll_seconds: float
    ) -> None:
        self.step = step
        self.poll_seconds = poll_seconds
        self._ready = threading.Condition()
        self._wakes = 0  # wake-ups not yet taken by a lane
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{n}", daemon=True)
            for n in range(count)
        ]

    def start(self) -> None:
        """Start every lane's thread."""
        for thread in self._threads:
            thread.start()

    def wake(self, lanes: int | None = None) -> None:
        """Have `lanes` idle lanes (default: all) look for work now."""
        count = len(self._threads) if lanes is None else min(lanes, len(self._threads))
        with self._ready:
            self._wakes = min(len(self._threads), self._wakes + count)
            self._ready.notify(count)

    def stop(self, deadline: float) -> bool:
        """Let each lane finish its item, then end; True if all ended by `deadline`."""
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _run(self) -> None:
        while not self._stopping:
            try:
                while not self._stopping and self.step():
                    pass
            except Exception:  # the database went away, say: log, and try again after a pause
                log.exception("lane %s failed; retrying", threading.current_thread().name)
            with self._ready:
                if not self._wakes and not self._stopping:
                    self._ready.wait(self.poll_seconds)
                self._wakes = max(0, self._wakes - 1)
