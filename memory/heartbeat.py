"""Lease renewal for long work: a claim stays live while its holder is alive, however slow,
and lapses soon after the holder dies."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

log = logging.getLogger(__name__)


class Heartbeat:
    """Calls `renew` every `interval` seconds on a background thread while the `with` block
    runs, the first time after `first` seconds if given. `renew` returning False means the
    claim is gone (forgotten, taken over): the heartbeat stops, and the work's own
    compare-and-set writes will find out."""

    def __init__(
        self, interval: float, renew: Callable[[], bool], *, first: float | None = None
    ) -> None:
        self.interval = interval
        self.renew = renew
        self.first = interval if first is None else first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="pam-heartbeat", daemon=True)

    def _beat(self) -> None:
        wait = self.first
        while not self._stop.wait(wait):
            if not self._beat_once():
                return
            wait = self.interval

    def _beat_once(self) -> bool:
        try:
            return bool(self.renew())
        except Exception as exc:  # a database hiccup: try again next beat
            log.warning("lease renewal failed: %s", type(exc).__name__)
            return True

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
