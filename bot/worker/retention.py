"""Retention: each worker deletes finished inbox and outbox items once they are past
PAM_QUEUE_RETENTION_HOURS, and /progress charts once their links have expired
(PAM_CHART_LINK_SECONDS), now and then, on a thread of its own. What may be deleted, and in
which small batches, is the queues' business (`memory.queue`, `prune`)."""

from __future__ import annotations

import logging
import random
import threading
import time
from datetime import timedelta

from memory.clock import Clock
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.store.charts import Charts
from memory.store.voice_clips import VoiceClips

log = logging.getLogger(__name__)

# How often a worker prunes; each time waits a random 50–100% of it, so that several workers
# rarely prune at once.
PRUNE_EVERY_SECONDS = 600.0


class Retention:
    """Prunes `inbox` and `outbox` of what finished more than `hours` ago (0: keeps all), and
    `charts` and spoken replies (`clips`) of those made more than `chart_seconds` ago (their
    links' lifetime), as `clock` tells the time."""

    def __init__(
        self,
        inbox: Inbox,
        outbox: Outbox,
        hours: float,
        clock: Clock,
        charts: Charts | None = None,
        chart_seconds: float = 0,
        clips: VoiceClips | None = None,
    ) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.clock = clock
        self.window = timedelta(hours=hours) if hours else None  # None: keep them all
        self.charts = charts
        self.chart_window = timedelta(seconds=chart_seconds)
        self.clips = clips
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def prune(self) -> int:
        """Delete the finished inbox and outbox items older than the window, as of the
        clock's time, that nothing needs any more; the number deleted. The inbox keeps each
        message that long after it was answered, so a platform's redelivery is still
        recognised; unfinished items and undelivered replies stay. Charts go once no link
        to them works any more, and so do spoken replies."""
        now = self.clock()
        expired = now - self.chart_window
        charts = self.charts.prune(expired) if self.charts is not None else 0
        clips = self.clips.prune(expired) if self.clips is not None else 0
        if charts or clips:
            log.info("media pruned charts=%d voice_clips=%d", charts, clips)
        charts += clips
        if self.window is None:
            return charts
        cutoff = now - self.window
        sent = self.outbox.prune(cutoff)
        answered = self.inbox.prune(cutoff)
        if sent or answered:
            log.info("queues pruned inbox=%d outbox=%d before=%s", answered, sent, cutoff)
        return charts + sent + answered

    def start(self) -> None:
        """Prune every PRUNE_EVERY_SECONDS or so, on a thread of its own, until `stop`
        (nothing happens with nothing to prune, or when already started)."""
        if (self.window is None and self.charts is None) or self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._prune_now_and_then, name="queue-retention", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Prune no more after the round under way (if any)."""
        self._stopping.set()

    def join(self, deadline: float) -> bool:
        """Wait until the `time.monotonic()` `deadline` for the round under way to end; True
        if the thread ended (or never ran)."""
        if self._thread is None:
            return True
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()

    def _prune_now_and_then(self) -> None:
        while not self._stopping.wait(PRUNE_EVERY_SECONDS * random.uniform(0.5, 1.0)):
            try:
                self.prune()
            except Exception as exc:  # the database is away: the next round prunes
                log.warning("queue pruning failed (%s); trying again later", type(exc).__name__)
