"""Lanes: the threads a worker runs each of its queues on. Each drains its queue, then waits
for a wake-up or the next poll; after a failure (the database away, say) it rests longer each
time it fails again, and logs a traceback once per cause."""

from __future__ import annotations

import logging
import random
import threading
import time
import traceback
from collections.abc import Callable

log = logging.getLogger(__name__)

# The longest rest of a lane that keeps failing: also how late, at most, it notices a recovery.
MAX_FAILURE_PAUSE = 15.0


def failure_pause(failures: int, poll_seconds: float) -> float:
    """Seconds a lane rests after its `failures`-th failure in a row: twice the poll, doubling
    with each failure up to MAX_FAILURE_PAUSE, less up to a quarter so that lanes drift apart."""
    return min(MAX_FAILURE_PAUSE, poll_seconds * 2.0**failures) * random.uniform(0.75, 1.0)


def cause_of(exc: BaseException) -> tuple[str, str, int]:
    """What a failure is, for saying it once: the exception's type and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = frames[-1] if frames else None
    return (
        type(exc).__qualname__,
        where.filename if where else "",
        (where.lineno or 0) if where else 0,
    )


def idle_wait(poll_seconds: float, count: int) -> float:
    """Seconds an idle lane of `count` waits before it looks again: the poll times the lanes,
    so that they look `1 / poll_seconds` times a second together however many there are
    (128 lanes at 0.25 s would otherwise send 512 claims a second to an empty queue), less
    or more by up to a half so that they drift apart."""
    return poll_seconds * count * random.uniform(0.5, 1.5)


class Lanes:
    """`count` threads running `step` until it returns False (it found no work, or knows
    that no more is ready), then waiting for a wake-up or their share of the poll
    (`idle_wait`). A wake-up that comes while every lane is busy is
    kept, so the next lane to finish looks again instead of waiting for the poll. A lane whose
    step fails rests for `pause(failures in a row)` seconds (default `failure_pause`),
    wake-ups or not."""

    def __init__(
        self,
        name: str,
        count: int,
        step: Callable[[], bool],
        poll_seconds: float,
        *,
        pause: Callable[[int], float] | None = None,
    ) -> None:
        self.step = step
        self.poll_seconds = poll_seconds
        self.pause = pause or (lambda failures: failure_pause(failures, poll_seconds))
        self._causes: set[tuple[str, str, int]] = set()  # failures whose traceback was logged
        self._causes_lock = threading.Lock()
        self._ready = threading.Condition()
        self._wakes = 0  # wake-ups not yet taken by a lane
        self._idle = 0  # lanes waiting for a wake-up or their poll
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{n}", daemon=True)
            for n in range(count)
        ]

    def start(self) -> None:
        """Start every lane's thread."""
        for thread in self._threads:
            thread.start()

    def wake(self, lanes: int | None = None) -> bool:
        """Have `lanes` idle lanes (default: all) look for work now. True if an idle lane no
        earlier wake-up had spoken for takes this one; False if every lane is busy (the
        wake-up is kept for the next lane that finishes)."""
        count = len(self._threads) if lanes is None else min(lanes, len(self._threads))
        with self._ready:
            taken = self._idle > self._wakes
            self._wakes = min(len(self._threads), self._wakes + count)
            self._ready.notify(count)
        return taken

    def stop(self, deadline: float) -> bool:
        """Let each lane finish its item, then end; True if all ended by `deadline`."""
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _run(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                while not self._stopping and self.step():
                    pass
            except Exception as exc:  # the database went away, say: rest, then try again
                failures += 1
                self._rest(exc, failures)
                continue
            if failures:
                log.info("lane %s works again after %d failures", _lane(), failures)
                failures = 0
            with self._ready:
                if not self._wakes and not self._stopping:
                    self._idle += 1
                    try:
                        self._ready.wait(idle_wait(self.poll_seconds, len(self._threads)))
                    finally:
                        self._idle -= 1
                self._wakes = max(0, self._wakes - 1)

    def _rest(self, exc: Exception, failures: int) -> None:
        """Say that the step failed (with its traceback the first time of each cause), then
        rest before the next try; only stopping ends the rest early."""
        pause = self.pause(failures)
        cause = cause_of(exc)
        with self._causes_lock:
            first = cause not in self._causes
            self._causes.add(cause)
        if first:
            log.exception("lane %s failed; retrying in %.1fs", _lane(), pause)
        else:
            said = str(exc).splitlines()[0][:200] if str(exc) else ""
            log.warning(
                "lane %s failed again (%s: %s; %d in a row, traceback above once); "
                "retrying in %.1fs",
                _lane(),
                type(exc).__name__,
                said,
                failures,
                pause,
            )
        with self._ready:
            self._ready.wait_for(lambda: self._stopping, pause)


def _lane() -> str:
    return threading.current_thread().name
