"""Lease renewal for long work: a claim stays live while its holder is alive, however slow,
and lapses soon after the holder dies. One primitive for every lease Pam renews (an inbox or
outbox claim, a memory job's): `Heartbeats`."""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)
# How long a beat with `first` 0 waits for the beat thread to start its first call: a
# moment normally; the bound only keeps a wedged thread from holding the block up.
STARTS_WITHIN = 1.0
# How long the beat thread of a `Heartbeats` outlives its last beat: a busy worker keeps one
# thread for all its turns, and one that goes idle (or is dropped) does not keep it forever.
IDLE_SECONDS = 30.0


class Heartbeats:
    """Lease renewals, many on one background thread: `beat(interval, renew)` calls `renew`
    every `interval` seconds while its block runs, at no thread of its own, so a worker keeps
    every lease of every turn and send on one thread instead of starting and joining one for
    each. `renew` returning False means the claim is gone (forgotten, taken over): its beat
    stops, and the work's own compare-and-set writes will find out. A `renew` that blocks
    delays the others: give slow calls (a platform's "typing…") their own `Heartbeats`. The
    thread ends once no beat has run for `idle_seconds`; the next beat starts another."""

    def __init__(self, name: str, *, idle_seconds: float = IDLE_SECONDS) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        self._due: dict[int, tuple[float, float, Callable[[], bool]]] = {}
        self._ids = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._renewing: int | None = None  # the key whose `renew` runs right now
        # Until when the beat thread sleeps: a new beat due later needs no wake-up (the
        # thread looks at every beat once it wakes); -inf while it is not asleep.
        self._asleep_until = -math.inf

    @contextlib.contextmanager
    def beat(
        self,
        interval: float,
        renew: Callable[[], bool],
        *,
        first: float | None = None,
        wait_on_exit: bool = True,
    ) -> Iterator[None]:
        """Call `renew` every `interval` seconds (the first time after `first`) while the
        `with` block runs; it stops once `renew` returns False. With `first` 0 the block
        starts once the first call has (on the beat thread: the block does not wait for it
        to end), so a quick block still gets it. Leaving the block waits for a call of
        `renew` that is running, so none outlives it, unless `wait_on_exit` is False (for
        calls that may end late, such as a platform's "typing…": the work never waits)."""
        key = next(self._ids)
        due = time.monotonic() + (interval if first is None else first)
        with self._changed:
            self._due[key] = (due, interval, renew)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            elif due < self._asleep_until:
                # Only when the thread would sleep past it: a beat each turn would otherwise
                # wake it every turn, to go back to sleep (a thread switch, 1.5% of a
                # worker's CPU per reply).
                self._changed.notify_all()
            if first is not None and first <= 0:
                self._changed.wait_for(
                    lambda: self._due.get(key, (None,))[0] != due, timeout=STARTS_WITHIN
                )
        try:
            yield
        finally:
            with self._changed:
                self._due.pop(key, None)
                # No call of this `renew` is still running once the block is left.
                if wait_on_exit:
                    self._changed.wait_for(lambda: self._renewing != key)

    def _run(self) -> None:
        while True:
            with self._changed:
                if not self._due:
                    self._asleep_until = math.inf
                    found = self._changed.wait_for(
                        lambda: bool(self._due), timeout=self.idle_seconds
                    )
                    self._asleep_until = -math.inf
                    if not found:
                        self._thread = None  # under the lock: the next beat starts a new one
                        return
                now = time.monotonic()
                soonest = min(d for d, _, _ in self._due.values())
                if soonest > now:
                    self._asleep_until = soonest
                    self._changed.wait(soonest - now)
                    self._asleep_until = -math.inf
                    continue
                key, (_, interval, renew) = next(
                    (k, v) for k, v in self._due.items() if v[0] <= now
                )
                self._due[key] = (now + interval, interval, renew)
                self._renewing = key
                self._changed.notify_all()  # a beat waiting for its first call to start
            renewed = _renewed(renew)
            with self._changed:
                self._renewing = None
                self._changed.notify_all()
                if not renewed:
                    self._due.pop(key, None)


def _renewed(renew: Callable[[], bool]) -> bool:
    """`renew()`, with a database hiccup counting as renewed (it is tried again next beat)."""
    try:
        return bool(renew())
    except Exception as exc:
        log.warning("lease renewal failed: %s", type(exc).__name__)
        return True
