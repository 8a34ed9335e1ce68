"""Scrubbing: each worker on SQLite runs the scrubs /forget records (memory/store/scrubs.py), on a
thread of its own: as soon as a /forget's confirmation is out, at the worker's start for any
left from before, and again with a backoff while another connection keeps the checkpoint from
completing, until it does."""

from __future__ import annotations

import logging

from bot.backoff import backoff
from bot.worker.periodic import Periodic
from memory.store.scrubs import BUSY, Outcome, Scrubs

log = logging.getLogger(__name__)

# Nothing recorded: look now and then (the operator's /forget, in the web process, records
# one when it could not complete it there).
IDLE_POLL_SECONDS = 2.0
# A /forget's confirmation is on its way: look again shortly.
WAITING_POLL_SECONDS = 0.5
# A checkpoint that could not complete is tried again after a backoff up to this.
MAX_RETRY_SECONDS = 60.0


class Scrubbing(Periodic):
    """Runs `scrubs` until stopped, each run a step (`step`) that says how long to wait."""

    def __init__(self, scrubs: Scrubs) -> None:
        self.scrubs = scrubs
        self.failures = 0  # runs in a row that could not complete
        super().__init__(
            "forget-scrub",
            self.step,
            first_delay=lambda: 0.0,
            retry_seconds=lambda: IDLE_POLL_SECONDS,
            what="forget scrub",
            log=log,
        )

    def step(self) -> float:
        """Run the scrubs that are ready; the seconds to wait before the next run."""
        outcome = self.scrubs.run()
        if outcome is Outcome.BUSY:
            self.failures += 1
            delay = min(MAX_RETRY_SECONDS, backoff(self.failures))
            log.warning(
                "forget scrub pending: %s; attempt=%d retry_in=%.1fs", BUSY, self.failures, delay
            )
            return delay
        if outcome is Outcome.DONE:
            log.info("forget scrub done failed_attempts=%d", self.failures)
            self.failures = 0
            return 0.0  # more may have become ready meanwhile
        return WAITING_POLL_SECONDS if outcome is Outcome.WAITING else IDLE_POLL_SECONDS
