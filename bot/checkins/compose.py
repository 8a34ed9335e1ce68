"""What a check-in says: the seam between when Pam writes first (bot/checkins/rounds.py) and
what she writes. A placeholder of declarations only: the composer itself (the check-in prompt
and its model call) replaces it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memory.llm import Usage


@dataclass(frozen=True)
class CheckinDraft:
    """A check-in ready to send: its text in the learner's target language, what it follows
    up ("plan", "thread", "review" or "invitation"), an operator-facing label of that (never the
    message's text) and the LLM calls it billed."""

    text: str
    follows_up: str
    topic: str
    usage: tuple[Usage, ...]


class Composer(Protocol):
    """Writes a learner's check-in."""

    def compose(self, learner_id: int, now: datetime) -> CheckinDraft | None:
        """The check-in for the learner as of `now`; None when there is nothing worth saying
        now. Raises the LLM layer's errors as a reply's model call does."""
        ...
