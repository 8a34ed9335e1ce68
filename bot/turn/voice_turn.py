"""A voice note's turn: heard (bot/voice/hearing.py), or why not, then answered like text, the
transcript being the learner's message. Heard once: a turn run again after its LLM call failed
finds the transcript stored, and a note answered with a friendly word (kept `untranscribed`)
is not fetched again. The limits are checked before the download: a learner over them costs
no transcription."""

from __future__ import annotations

import logging
from dataclasses import replace

from bot import phrases
from bot.i18n import native_of
from bot.turn.conversing import Conversing, Said
from bot.turn.limits import Limits
from bot.turn.values import ModelUnavailable, Turn, TurnRequest
from bot.voice.hearing import Heard, Hearing, HearingUnavailable, NotHeard, heard_line
from memory import metrics
from memory.database.records import LearnerInfo, StoredMessage
from memory.store.message_store import Store
from memory.tokens import TokenCounter

log = logging.getLogger(__name__)


class VoiceTurns:
    """Voice notes heard with `hearing` and answered with `conversing`, within `limits`."""

    def __init__(
        self,
        store: Store,
        counter: TokenCounter,
        hearing: Hearing,
        limits: Limits,
        conversing: Conversing,
        max_chars: int,
    ) -> None:
        self.store = store
        self.counter = counter
        self.hearing = hearing
        self.limits = limits
        self.conversing = conversing
        self.max_chars = max_chars  # a transcript is cut to what a typed message may be

    def answer(self, learner: LearnerInfo, request: TurnRequest, caption: str) -> Turn:
        """The turn for `request`'s voice note (said with `caption`, if any) by `learner`."""
        assert request.voice is not None
        stored = self.store.conversation.message_for(learner.id, inbox_id=request.inbox_id)
        if stored is None:
            heard = self._hear(learner, request)
        elif stored.untranscribed:
            said = phrases.said(phrases.VOICE_UNREADABLE, native_of(learner))
            heard = NotHeard("answered before", said, stored.spoken_seconds)
        else:  # the transcript, after the caption if there was one, as it was stored
            transcript = stored.content.removeprefix(f"{caption}\n\n" if caption else "")
            heard = Heard(transcript, stored.spoken_seconds or 0.0)
        if isinstance(heard, NotHeard):
            return self._not_heard(learner, heard, caption, request, stored)
        text = f"{caption}\n\n{heard.text}" if caption else heard.text
        message = Said(
            text[: self.max_chars], heard=heard_line(heard.text), spoken_seconds=heard.seconds
        )
        return self.conversing.reply(learner, message, request)

    def _hear(self, learner: LearnerInfo, request: TurnRequest) -> Heard | NotHeard:
        """The note heard for the first time, unless a limit stops it before the download."""
        assert request.voice is not None
        language = learner.target_language
        limit = self.limits.passed_before(learner.id)
        if limit is not None:
            log.info("voice note limited learner=%s limit=%s", learner.id, limit)
            metrics.BUDGET_REFUSALS.labels(limit).inc()
            return NotHeard(limit, self.limits.say(limit, learner.id, native_of(learner)))
        try:
            return self.hearing.hear(
                learner.id,
                language,
                request.voice,
                request.fetcher,
                can_retry=request.can_retry,
                native=native_of(learner),
            )
        except HearingUnavailable as exc:
            raise ModelUnavailable(str(exc)) from exc

    def _not_heard(
        self,
        learner: LearnerInfo,
        heard: NotHeard,
        caption: str,
        request: TurnRequest,
        stored: StoredMessage | None,
    ) -> Turn:
        """A voice note Pam could not hear: kept as a note not transcribed, and answered with
        the friendly word — and, when it came with a caption, the caption answered after it
        like any message (the two are one learner message)."""
        kept = heard.kept()
        if caption:
            text = stored.content if stored is not None else f"{kept}\n\n{caption}"
            message = Said(text, note=heard.said, untranscribed=True)
            # Answered in text alone: a spoken answer to the caption would read as one to the
            # note Pam did not hear.
            return self.conversing.reply(learner, message, replace(request, can_speak=False))
        if stored is None:
            self.store.conversation.add_learner_message(
                learner.id,
                kept,
                self.counter.count_message(kept),
                inbox_id=request.inbox_id,
                spoken_seconds=heard.seconds,
                untranscribed=True,
            )
        # Said is "" when a limit stopped it and Pam said so within the minute.
        return Turn([heard.said] if heard.said else [], learner.id, problem=heard.problem)
