"""Retention: each worker deletes finished inbox and outbox items once they are past
PAM_QUEUE_RETENTION_HOURS, /progress charts once their links have expired
(PAM_CHART_LINK_SECONDS), and the chat history no feature reads any more once it is past
PAM_CHAT_RETENTION_DAYS, now and then, on a thread of its own. What may be deleted, and in
which small batches, is the queues' business (`memory.queue`, `prune`) and the history's
(`memory.store.history`)."""

from __future__ import annotations

import logging
import random
from datetime import datetime, timedelta

from bot.worker.periodic import Periodic
from memory.clock import Clock
from memory.queue.inbox import Inbox
from memory.queue.outbox import Outbox
from memory.store.charts import Charts
from memory.store.history import History
from memory.store.voice_clips import VoiceClips

log = logging.getLogger(__name__)

# How often a worker prunes; each time waits a random 50–100% of it, so that several workers
# rarely prune at once.
PRUNE_EVERY_SECONDS = 600.0


class Retention(Periodic):
    """Prunes `inbox` and `outbox` of what finished more than `hours` ago (0: keeps all),
    `charts` and spoken replies (`clips`) of those made more than `chart_seconds` ago (their
    links' lifetime), and the chat `history` of what is more than `chat_days` old (0: keeps
    all), as `clock` tells the time."""

    def __init__(
        self,
        inbox: Inbox,
        outbox: Outbox,
        hours: float,
        clock: Clock,
        charts: Charts | None = None,
        chart_seconds: float = 0,
        clips: VoiceClips | None = None,
        history: History | None = None,
        chat_days: int = 0,
    ) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.clock = clock
        self.window = timedelta(hours=hours) if hours else None  # None: keep them all
        self.charts = charts
        self.chart_window = timedelta(seconds=chart_seconds)
        self.clips = clips
        self.history = history if chat_days else None
        self.chat_window = timedelta(days=chat_days)
        super().__init__(
            "queue-retention",
            self._prune_round,
            first_delay=_pause,
            retry_seconds=_pause,
            what="queue pruning",
            log=log,
        )

    def prune(self) -> int:
        """Delete the finished inbox and outbox items older than the window, as of the
        clock's time, that nothing needs any more; the number deleted. The inbox keeps each
        message that long after it was answered, so a platform's redelivery is still
        recognised; unfinished items and undelivered replies stay. Charts go once no link
        to them works any more, and so do spoken replies; the chat history once it is past
        the chat window and no feature reads it."""
        now = self.clock()
        expired = now - self.chart_window
        charts = self.charts.prune(expired) if self.charts is not None else 0
        clips = self.clips.prune(expired) if self.clips is not None else 0
        if charts or clips:
            log.info("media pruned charts=%d voice_clips=%d", charts, clips)
        charts += clips
        history = self._prune_history(now)
        if self.window is None:
            return charts + history
        cutoff = now - self.window
        sent = self.outbox.prune(cutoff)
        answered = self.inbox.prune(cutoff)
        if sent or answered:
            log.info("queues pruned inbox=%d outbox=%d before=%s", answered, sent, cutoff)
        return charts + history + sent + answered

    def _prune_history(self, now: datetime) -> int:
        """Prune the chat history past the chat window, if one is set: the rows removed."""
        if self.history is None:
            return 0
        cutoff = now - self.chat_window
        pruned = self.history.prune(cutoff)
        if pruned.total:
            log.info(
                "chat history pruned messages=%d corrections=%d usage=%d grades=%d before=%s",
                *pruned,
                cutoff,
            )
        return pruned.total

    def start(self) -> None:
        """Prune every PRUNE_EVERY_SECONDS or so, on a thread of its own, until `stop`
        (nothing happens with nothing to prune, or when already started)."""
        if self.window is None and self.charts is None and self.history is None:
            return
        super().start()

    def _prune_round(self) -> float:
        self.prune()
        return _pause()


def _pause() -> float:
    """The wait before a round: a random 50–100% of PRUNE_EVERY_SECONDS."""
    return PRUNE_EVERY_SECONDS * random.uniform(0.5, 1.0)
