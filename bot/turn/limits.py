"""The cost and abuse limits a turn is checked against: messages a minute
(PAM_RATE_LIMIT_PER_MINUTE), the learner's tokens today (PAM_LEARNER_DAILY_TOKENS) and
everyone's (PAM_DAILY_TOKENS), with what Pam says when one stops a turn: once a minute at
most, so that a burst of 2,000 messages gets one "slow down", not 2,000 (each one a send,
billed on WhatsApp). The counts come with the turn's own context read; a voice note is
checked on its own, before it costs a download and a transcription."""

from __future__ import annotations

from datetime import timedelta

from bot import phrases
from bot.settings import LimitSettings
from memory.clock import Clock
from memory.database.records import Activity, ActivityWindow
from memory.store.conversation import Conversation
from memory.store.learners import Learners

SAID = {
    "rate": phrases.SLOW_DOWN,
    "learner_budget": phrases.LEARNER_BUDGET,
    "service_budget": phrases.SERVICE_BUDGET,
}
# Pam says a limit stopped a learner's turn at most once in this long; the turns it stops
# meanwhile are kept (the messages stay in memory) and answered with silence.
SAID_EVERY = timedelta(minutes=1)


class Limits:
    """The limits of `settings`, counted in windows that end now by `clock`."""

    def __init__(
        self,
        settings: LimitSettings,
        conversation: Conversation,
        learners: Learners,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.conversation = conversation
        self.learners = learners
        self.clock = clock

    def window(self) -> ActivityWindow | None:
        """What the limits count this turn; None if none is set."""
        settings, now = self.settings, self.clock()
        if not (
            settings.rate_limit_per_minute or settings.learner_daily_tokens or settings.daily_tokens
        ):
            return None
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return ActivityWindow(now - timedelta(minutes=1), today, bool(settings.daily_tokens))

    def passed(self, activity: Activity | None) -> str | None:
        """Which limit a turn with `activity` (its own message counted) passes, if any."""
        if activity is None:
            return None
        settings = self.settings
        if settings.rate_limit_per_minute and activity.messages > settings.rate_limit_per_minute:
            return "rate"
        if settings.learner_daily_tokens and activity.tokens >= settings.learner_daily_tokens:
            return "learner_budget"
        if settings.daily_tokens and (activity.everyone_tokens or 0) >= settings.daily_tokens:
            return "service_budget"
        return None

    def passed_before(self, learner_id: int) -> str | None:
        """Which limit a message the learner is about to send passes, read on its own."""
        window = self.window()
        if window is None:
            return None
        activity = self.conversation.context_and_activity(learner_id, window)[1]
        if activity is None:
            return None
        return self.passed(activity._replace(messages=activity.messages + 1))

    @staticmethod
    def said(limit: str, native: str | None) -> str:
        """What Pam says when `limit` stops a turn, in the learner's native language."""
        return phrases.said(SAID[limit], native)

    def say(self, limit: str, learner_id: int, native: str | None) -> str:
        """What Pam says now that `limit` stopped a turn of the learner: `said`, unless she
        said a limit to them within `SAID_EVERY` ("": nothing, this time)."""
        now = self.clock()
        if not self.learners.say_limit(learner_id, now, now - SAID_EVERY):
            return ""
        return self.said(limit, native)
