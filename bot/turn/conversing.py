"""The conversational turn, top to bottom: the learner's message stored and the context read
(two statements on one connection), the limits checked, the model asked (with recall and
review in the prompt), its answer read and checked, and the reply returned as a plain `Turn`
to store and send. An LLM failure loses nothing: the message is stored first."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from bot import corrections, phrases
from bot.i18n import native_of
from bot.review.prompt import Asked
from bot.review.reviewing import NO_REVIEW, Reviewing, ReviewUse
from bot.turn.asking import Asking
from bot.turn.density import shown
from bot.turn.limits import Limits
from bot.turn.taps import reply_buttons
from bot.turn.values import AfterSend, ModelUnavailable, Turn, TurnRequest
from bot.voice.hearing import spoken_corrections
from bot.voice.speaking import Speaking
from memory import metrics
from memory.config import MemoryConfig
from memory.database.records import FEW, LearnerInfo, ReplyRecord
from memory.jobs.profile_facts import density
from memory.llm import LLMError, Misconfigured, Outage, Refused, Unusable
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from memory.turns import due_now

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Said:
    """What the learner said, as the turn answers it: `text` (typed, or a voice note's
    transcript after its caption); `note`, a line Pam says before the reply and keeps with it
    (a photo Pam cannot see, a voice note it could not hear); `heard`, the "🎙 …" line that
    shows what Pam heard, before it all, not kept; and for a voice note, its length
    (`spoken_seconds`: the text is its transcript) or that it could not be transcribed
    (`untranscribed`: the text says so, before the caption)."""

    text: str
    note: str | None = None
    heard: str | None = None
    spoken_seconds: float | None = None
    untranscribed: bool = False


class Conversing:
    """Answers what a learner said with the model (`asking`), in the limits of `limits`,
    with review's items and exercises (`review`) and, when asked for, a spoken copy
    (`speaking`)."""

    def __init__(
        self,
        store: Store,
        counter: TokenCounter,
        asking: Asking,
        limits: Limits,
        review: Reviewing,
        speaking: Speaking,
        memory: MemoryConfig,
    ) -> None:
        self.store = store
        self.counter = counter
        self.asking = asking
        self.limits = limits
        self.review = review
        self.speaking = speaking
        self.memory = memory

    def reply(self, learner: LearnerInfo, said: Said, request: TurnRequest) -> Turn:
        """The reply to `said` by `learner` (the message of `request`), to store and send.
        The learner's message is stored first, so an LLM failure loses nothing."""
        started = time.monotonic()
        text = said.text
        stored, answered, context, activity = self.store.conversation.begin_turn(
            learner.id,
            text,
            self.counter.count_message(text),
            inbox_id=request.inbox_id,
            window=self.limits.window(),
            spoken_seconds=said.spoken_seconds,
            untranscribed=said.untranscribed,
        )
        if answered is not None:  # a re-run after a crash: the reply exists already
            return Turn([answered.content], learner.id)
        assert context is not None
        native = native_of(context.learner)  # what Pam says herself is in it
        limit = self.limits.passed(activity)
        if limit is not None:  # the message stays in memory; the LLM is not called
            log.info("turn limited learner=%s limit=%s", learner.id, limit)
            metrics.BUDGET_REFUSALS.labels(limit).inc()
            said_instead = self.limits.say(limit, learner.id, native)
            return Turn([said_instead] if said_instead else [], learner.id)
        asked = self.review.prepare(learner.id, context)
        try:
            completion, recalled = self.asking.ask(learner.id, text, context, stored.id, asked)
            answer = corrections.parse_answer(completion.text)
            # Only what the learner really wrote this turn is corrected (and so drilled).
            answer = corrections.checked(answer, text, learner.id)
            if said.spoken_seconds is not None:  # the transcriber wrote the spelling
                answer = replace(answer, corrections=spoken_corrections(answer.corrections))
        except LLMError as exc:
            self.store.ledger.record_calls(learner.id, "reply", exc.billed)
            return self._failed(learner.id, exc, native, can_retry=request.can_retry)
        except corrections.NoReply as exc:  # JSON with no reply in it, even with more room
            self.store.ledger.record_calls(learner.id, "reply", completion.calls)
            return self._failed(learner.id, Unusable(str(exc)), native, can_retry=False)
        # The unusable answers before this one; its own call is stored with the reply.
        self.store.ledger.record_calls(learner.id, "reply", completion.billed)
        # The items' grades are left with the reply for the review job, off the reply lane;
        # a /review answer's are written here: its reply says what comes next.
        added, grades = self.review.finish(
            learner.id, stored.id, text, answer.corrections, answer.rest, asked
        )
        if added:  # the next exercise or the score, before the correction lines
            answer = replace(answer, reply=f"{answer.reply}\n\n{added}")
        # At FEW the reply shows the most important correction; all are stored, for review.
        at = density(context.learner, context.profile.data)
        pointed_out = shown(answer.corrections, at)
        text = corrections.render(replace(answer, corrections=pointed_out))
        if said.note:
            text = f"{said.note}\n\n{text}"
        # Spoken after the text went out, never before (bot/voice/speaking.py).
        speech = self.speaking.words(answer.reply) if request.can_speak else None
        speech = speech if context.learner.voice_replies else None
        reviewed = self._review_use(asked)
        log.info(
            "turn learner=%s prompt_tokens=%s output_tokens=%s calls=%d corrections=%s "
            "shown=%s density=%s truncated=%s recall=%s snippets=%d review_items=%d "
            "review_tokens=%d exercise=%s ms=%d",
            learner.id,
            completion.input_tokens,
            completion.output_tokens,
            1 + len(completion.billed),
            len(answer.corrections),
            len(pointed_out),
            at,
            completion.truncated,
            recalled.how,
            recalled.snippets,
            reviewed.items,
            reviewed.tokens,
            reviewed.exercise,
            (time.monotonic() - started) * 1000,
        )
        reply = ReplyRecord(
            learner_id=learner.id,
            reply_to=stored.id,
            content=text,
            tokens=self.counter.count_message(text),
            corrections=tuple(answer.corrections),
            usage=(completion.model, completion.input_tokens, completion.output_tokens),
            review=grades,
        )
        sent = f"{said.heard}\n\n{text}" if said.heard else text
        # Translate, Explain, Say it, Fewer corrections: each names this reply by the message
        # it answers (its own id is the caller's to store).
        voice = self.speaking.enabled and request.can_speak
        buttons = reply_buttons(
            context.learner, stored.id, corrected=bool(pointed_out), voice=voice, fewer=at != FEW
        )
        return Turn(
            [sent],
            learner.id,
            reply,
            recall=recalled,
            review=reviewed,
            speech=speech,
            buttons=buttons,
        )

    def _review_use(self, asked: Asked | None) -> ReviewUse:
        """What review added to this turn's prompt, counted."""
        if asked is None:
            return NO_REVIEW
        tokens = self.counter.count(asked.added)
        return ReviewUse(len(asked.items), tokens, exercise=asked.session is not None)

    def _failed(
        self, learner_id: int, exc: LLMError, native: str | None, *, can_retry: bool
    ) -> Turn:
        """The answer when the model gave none. An outage (or a configuration an operator
        may fix) is worth trying again later when the caller can; an unusable answer is not
        asked for again (each costs a billed call); a refusal gets a friendly word."""
        problem = exc.advice
        # An Outage is what the adapter (bot/llm/failures.py) makes of a call the server may
        # still be working on, even after unusable answers it billed (a body cut off, then a
        # timeout); any other failure after billed answers it makes Unusable. An Outage is
        # tried again, at most LLM_TURN_ATTEMPTS times in all; a misconfiguration after billed
        # answers is not: until an operator fixes it, each try would bill them again.
        retryable = isinstance(exc, Outage) or (isinstance(exc, Misconfigured) and not exc.billed)
        if can_retry and retryable:
            wait = exc.retry_after if isinstance(exc, Outage) else None
            raise ModelUnavailable(str(exc), wait) from exc
        if isinstance(exc, Refused):
            log.warning("turn refused learner=%s reason=%s", learner_id, exc.reason)
            said = phrases.said(phrases.REFUSED, native)
        else:
            log.warning("turn failed learner=%s: %s", learner_id, type(exc).__name__)
            said = phrases.apology(native)
        due = due_now(self.store.conversation, learner_id, self.memory)
        return Turn([said], learner_id, after_send=AfterSend(memory_jobs=due), problem=problem)
