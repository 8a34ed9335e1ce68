"""A tutor turn: store the learner's message and answer it with corrections. The answer is a
plain value (`Turn`): the caller stores the reply with `memory.turns.TurnWriter`, sends it,
and then starts the memory jobs it made due."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from bot import corrections, phrases
from bot.asking import Asking
from bot.channels import GroupChats, VoiceFetcher
from bot.commands import CommandAnswer, Commands, parse_command
from bot.hearing import (
    Heard,
    Hearing,
    HearingUnavailable,
    NotHeard,
    heard_line,
    spoken_corrections,
)
from bot.limits import Limits
from bot.recall import NO_RECALL, RecallUse
from bot.review import NO_REVIEW, Asked, Grading, Reviewing, ReviewUse
from bot.settings import Settings
from bot.speaking import Speaking, Spoken
from bot.voice import Speaker, Transcriber
from memory import metrics
from memory.claims import InboxClaim
from memory.clock import Clock, utcnow
from memory.jobs import JobRunner
from memory.llm import (
    ChatModel,
    LLMError,
    Misconfigured,
    Outage,
    Refused,
    Unusable,
)
from memory.messages import TURNED_AWAY, VOICE, VoiceNote, clean_text
from memory.recall import Searcher
from memory.records import (
    LearnerGone,
    LearnerInfo,
    ReplyRecord,
    StoredMessage,
)
from memory.store import Store
from memory.tokens import TokenCounter
from memory.turns import TurnWriter, Written, due_now

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000


@dataclass(frozen=True)
class Turn:
    """What the tutor made of one inbound message: whose it was, the texts to send, the reply
    to store with them (None: nothing to store, e.g. a command's answer or an apology), and
    the memory jobs it made due as far as the tutor knows (the writer adds those due after the
    reply). The caller starts the jobs with `Tutor.start_jobs` once the replies are on their
    way, so a reply never waits for them."""

    replies: list[str]
    learner_id: int | None
    reply: ReplyRecord | None = None
    due: tuple[str, ...] = ()
    # What the operator should know when the model could not be used because of how it is
    # configured (a rejected key, an unknown model, an unreachable base URL): `pam chat`,
    # where the learner is the operator, shows it on stderr. Never shown to a learner.
    problem: str | None = None
    # What recall did this turn (how, snippets added, their tokens): for the log line and
    # the token benchmark.
    recall: RecallUse = NO_RECALL
    # What review added to the prompt (due items, a /review exercise, their tokens): the same.
    review: ReviewUse = NO_REVIEW
    # What the turn does to the learner's review items, written by `Tutor.start_jobs`.
    grading: Grading | None = None
    # A /progress chart (stored, by id) sent with the first reply as its caption.
    chart_id: int | None = None
    # The words of the reply's spoken copy (/voice on): queued after its text as a part to
    # speak, made and sent by a speech lane once the text went out (bot/speaking.py).
    speech: str | None = None


@dataclass(frozen=True)
class Stored:
    """What storing a turn came to: the parts queued (or, with no claim, to show), what the
    write handed back, and whether they are the turn's own reply — not when /forget won a
    race with the turn (nothing is said or kept) or another worker answered the message first
    (its reply is sent instead)."""

    parts: list[str]
    written: Written
    own: bool


def store_reply(
    writer: TurnWriter,
    claim: InboxClaim | None,
    turn: Turn,
    split: Callable[[list[str]], list[str]] = list,
) -> Stored:
    """Write the end of `turn` with `writer`, finishing `claim` (if any) with the turn's
    texts, `split` into the parts a channel sends."""
    parts = split(turn.replies)
    try:
        written = writer.write(claim, parts, turn.reply, chart_id=turn.chart_id, speech=turn.speech)
    except LearnerGone:  # /forget won a race with this turn: say nothing, keep nothing
        log.info("turn for learner %s dropped: forgotten mid-turn", turn.learner_id)
        return Stored([], writer.write(claim, []), own=False)
    if written.existing is None:
        return Stored(parts, written, own=True)
    parts = split([written.existing])  # another worker answered this message first
    return Stored(parts, writer.write(claim, parts), own=False)


def _unless_forgotten(learner_id: int, turn: Callable[[], Turn]) -> Turn:
    """`turn()` — unless /forget wins a race with it: then nothing is said or kept."""
    try:
        return turn()
    except LearnerGone:
        log.info("turn for learner %s dropped: forgotten mid-turn", learner_id)
        return Turn([], learner_id)


class ModelUnavailable(Exception):
    """The LLM failed this turn (after the client's own retries) and the caller said it can
    try the turn again later: nothing was answered, the learner's message is kept.
    `retry_after`: seconds to wait at least before that (a server that timed out may still
    be working on the request), None for the caller's own backoff."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Tutor:
    """Pam's channel-agnostic core: one call per inbound text, returning the texts to send."""

    def __init__(
        self,
        store: Store,
        model: ChatModel,
        counter: TokenCounter,
        runner: JobRunner,
        settings: Settings,
        writer: TurnWriter,
        clock: Clock = utcnow,
        searcher: Searcher | None = None,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
    ) -> None:
        self.store = store
        self.counter = counter
        self.runner = runner
        self.settings = settings
        self.writer = writer
        self.clock = clock  # the rate and budget windows go by it
        self.memory = settings.memory
        # The reply request, with recall of the learner's folded-out past through `searcher`
        # (the store's recall; None: no recall, whatever PAM_RECALL says).
        self.asking = Asking(model, counter, settings, searcher, clock)
        # Due items in the prompt, grading by the reply's report, /review (PAM_REVIEW).
        self.review = Reviewing(store.reviews, settings.memory.review, clock)
        self.commands = Commands(store, self.review, clock, voice=settings.voice.voice_notes)
        self.limits = Limits(settings.limits, store.conversation, store.learners, clock)
        # Voice notes transcribed, replies spoken (PAM_VOICE_NOTES; None: neither).
        self.hearing = Hearing(transcriber, settings.voice, store.ledger)
        self.speaking = Speaking(speaker, settings.voice, store.ledger, store.voice_clips)

    def handle(
        self,
        external_id: str,
        text: str,
        display_name: str | None = None,
        inbox_id: int | None = None,
        kind: str = "text",
        can_retry: bool = False,
    ) -> list[str]:
        """Answer one inbound text from the learner known as `external_id` on its channel,
        store the reply and start the memory jobs it made due; the texts to send.
        With `inbox_id` (the message's durable inbox item) the turn is idempotent: run again
        after a crash, it stores nothing twice and answers with the reply already made.
        A `kind` other than "text" (a voice note, a photo) gets a friendly answer.
        When the LLM fails, the learner gets an apology, unless `can_retry`: then
        ModelUnavailable is raised and the caller runs the turn again later."""
        turn = self.respond(external_id, text, display_name, inbox_id, kind, can_retry)
        self.start_jobs(turn)
        return turn.replies

    def respond(
        self,
        external_id: str,
        text: str,
        display_name: str | None = None,
        inbox_id: int | None = None,
        kind: str = "text",
        can_retry: bool = False,
        *,
        can_speak: bool = False,
    ) -> Turn:
        """`answer`, with the reply stored (no inbox claim to finish: the terminal, tests);
        the turn as stored, its memory jobs not started yet (`start_jobs`)."""
        turn = self.answer(
            external_id, text, display_name, inbox_id, kind, can_retry, can_speak=can_speak
        )
        if turn.reply is None:
            return turn
        stored = store_reply(self.writer, None, turn)
        if not stored.own:
            return Turn(stored.parts, turn.learner_id)
        return replace(turn, due=turn.due + stored.written.due)

    def answer(
        self,
        external_id: str,
        text: str,
        display_name: str | None = None,
        inbox_id: int | None = None,
        kind: str = "text",
        can_retry: bool = False,
        known: LearnerInfo | None = None,
        *,
        voice: VoiceNote | None = None,
        fetcher: VoiceFetcher | None = None,
        can_speak: bool = False,
        group: GroupChats | None = None,
    ) -> Turn:
        """What to answer the learner known as `external_id` (see `handle`), storing only
        their message: the reply is the caller's to store (`Turn.reply`), and the memory jobs
        its to start. `known`: the learner with `external_id`, if the caller has just read
        them. `voice`: the voice note the message is, downloaded with `fetcher` (its
        channel's) and transcribed; `can_speak`: the channel takes spoken replies; `group`:
        the channel, when the message was said in a group (commands that show the learner's
        memory are answered in private only)."""
        text = clean_text(text)
        if kind == TURNED_AWAY:
            return self._turned_away(external_id, known)
        if kind == VOICE and voice is not None and self.hearing.enabled:
            learner = known or self.store.learners.learner(external_id, display_name)
            return _unless_forgotten(
                learner.id,
                lambda: self._voice_turn(
                    learner, voice, fetcher, text, inbox_id, can_retry, can_speak
                ),
            )
        if kind != "text" and not text:
            known = known or self.store.learners.find_learner(external_id)
            language = known.target_language if known else None
            said = phrases.not_text(kind, language)
            if kind == VOICE and self.hearing.enabled:  # a note without its audio's address
                said = phrases.in_language(phrases.VOICE_UNREADABLE, language)
            return Turn([said], known.id if known else None)
        if not text:
            return Turn([], None)
        learner = known or self.store.learners.learner(external_id, display_name)
        command = parse_command(text)
        if command is not None:
            command = replace(command, inbox_id=inbox_id, group=group)
            try:
                answered = self.commands.handle(learner, command)
            except LearnerGone:
                return Turn([phrases.FORGOTTEN], learner.id)
            if isinstance(answered, CommandAnswer):
                return Turn([answered.text], learner.id, chart_id=answered.chart_id)
            return Turn([answered], learner.id)
        if len(text) > MAX_MESSAGE_CHARS:
            return Turn([phrases.TOO_LONG.format(limit=MAX_MESSAGE_CHARS)], learner.id)
        # A photo with a caption: the caption is answered like any message, after the
        # friendly note that Pam cannot see the picture itself.
        note = phrases.not_text(kind, learner.target_language) if kind != "text" else None
        return _unless_forgotten(
            learner.id,
            lambda: self._converse(
                learner, text, inbox_id, can_retry=can_retry, note=note, can_speak=can_speak
            ),
        )

    def _turned_away(self, external_id: str, known: LearnerInfo | None) -> Turn:
        """The note that the web turned messages of the learner away (too many waiting):
        "slow down", as when the rate limit stops a turn, and as seldom. Nothing is kept."""
        learner = known or self.store.learners.find_learner(external_id)
        if learner is None:  # forgotten meanwhile, or never answered: say it plainly
            return Turn([self.limits.said("rate", None)], None)
        said = self.limits.say("rate", learner.id, learner.target_language)
        return Turn([said] if said else [], learner.id)

    def _voice_turn(
        self,
        learner: LearnerInfo,
        note: VoiceNote,
        fetcher: VoiceFetcher | None,
        caption: str,
        inbox_id: int | None,
        can_retry: bool,
        can_speak: bool,
    ) -> Turn:
        """A voice note: heard (or why not), then answered like text, the transcript being
        the learner's message. Heard once: a turn run again after its LLM call failed finds
        the transcript stored, and a note answered with a friendly word is not fetched again.
        The limits are checked before the download: a learner over them costs no
        transcription."""
        language = learner.target_language
        stored = self.store.conversation.message_for(learner.id, inbox_id=inbox_id)
        if stored is None:
            limit = self.limits.passed_before(learner.id)
            if limit is not None:
                log.info("voice note limited learner=%s limit=%s", learner.id, limit)
                metrics.BUDGET_REFUSALS.labels(limit).inc()
                said = self.limits.say(limit, learner.id, language)
                heard: Heard | NotHeard = NotHeard(limit, said)
            else:
                try:
                    heard = self.hearing.hear(
                        learner.id, language, note, fetcher, can_retry=can_retry
                    )
                except HearingUnavailable as exc:
                    raise ModelUnavailable(str(exc)) from exc
        elif stored.untranscribed:
            said = phrases.in_language(phrases.VOICE_UNREADABLE, language)
            heard = NotHeard("answered before", said, stored.spoken_seconds)
        else:  # the transcript, after the caption if there was one, as it was stored
            transcript = stored.content.removeprefix(f"{caption}\n\n" if caption else "")
            heard = Heard(transcript, stored.spoken_seconds or 0.0)
        if isinstance(heard, NotHeard):
            return self._not_heard(learner, heard, caption, inbox_id, stored, can_retry)
        text = f"{caption}\n\n{heard.text}" if caption else heard.text
        return self._converse(
            learner,
            text[:MAX_MESSAGE_CHARS],
            inbox_id,
            can_retry=can_retry,
            note=None,
            heard=heard_line(heard.text),
            can_speak=can_speak,
            spoken=heard.seconds,
        )

    def _not_heard(
        self,
        learner: LearnerInfo,
        heard: NotHeard,
        caption: str,
        inbox_id: int | None,
        stored: StoredMessage | None,
        can_retry: bool,
    ) -> Turn:
        """A voice note Pam could not hear: kept as a note not transcribed, and answered with
        the friendly word — and, when it came with a caption, the caption answered after it
        like any message (the two are one learner message)."""
        kept = heard.kept()
        if caption:
            text = stored.content if stored is not None else f"{kept}\n\n{caption}"
            return self._converse(
                learner, text, inbox_id, can_retry=can_retry, note=heard.said, untranscribed=True
            )
        if stored is None:
            self.store.conversation.add_learner_message(
                learner.id,
                kept,
                self.counter.count_message(kept),
                inbox_id=inbox_id,
                spoken_seconds=heard.seconds,
                untranscribed=True,
            )
        # Said is "" when a limit stopped it and Pam said so within the minute.
        return Turn([heard.said] if heard.said else [], learner.id, problem=heard.problem)

    def speak(self, turn: Turn) -> Spoken:
        """The spoken copy of `turn`'s reply, made now: for the terminal, which shows the text
        first and has no outbox (elsewhere a speech lane makes it, bot/speaking.py)."""
        if turn.speech is None or turn.learner_id is None:
            return Spoken(None, "nothing to speak")
        try:
            learner = self.store.learners.get_learner(turn.learner_id)
            return self.speaking.speak(learner.id, turn.speech, learner.target_language)
        except LearnerGone:
            return Spoken(None, "forgotten")

    def start_jobs(self, turn: Turn, due: tuple[str, ...] = ()) -> None:
        """Write the review grades of `turn` (off the reply's path: its reply is stored, and
        sent where a channel sends it) and start the memory jobs it made due, and `due`
        (those its write found due), each in the background."""
        if turn.grading is not None:
            self.review.record(turn.grading)
        for kind in turn.due + due:
            assert turn.learner_id is not None
            self.runner.request(turn.learner_id, kind)

    def _converse(
        self,
        learner: LearnerInfo,
        text: str,
        inbox_id: int | None,
        *,
        can_retry: bool,
        note: str | None,
        heard: str | None = None,
        can_speak: bool = False,
        spoken: float | None = None,
        untranscribed: bool = False,
    ) -> Turn:
        """A conversational turn: the reply to store and send. The learner's message is
        stored first, so an LLM failure loses nothing. `note`: a line said before the reply
        (and kept with it); `heard`: a voice note's "🎙 …" line, shown before it all, not
        kept; `spoken`: the message is a voice note's transcript, this long; `can_speak`: the
        reply is spoken too when the learner asked for it (/voice on)."""
        started = time.monotonic()
        stored, answered, context, activity = self.store.conversation.begin_turn(
            learner.id,
            text,
            self.counter.count_message(text),
            inbox_id=inbox_id,
            window=self.limits.window(),
            spoken_seconds=spoken,
            untranscribed=untranscribed,
        )
        if answered is not None:  # a re-run after a crash: the reply exists already
            return Turn([answered.content], learner.id)
        assert context is not None
        language = context.learner.target_language
        limit = self.limits.passed(activity)
        if limit is not None:  # the message stays in memory; the LLM is not called
            log.info("turn limited learner=%s limit=%s", learner.id, limit)
            metrics.BUDGET_REFUSALS.labels(limit).inc()
            said = self.limits.say(limit, learner.id, language)
            return Turn([said] if said else [], learner.id)
        asked = self.review.prepare(learner.id, context)
        try:
            completion, recalled = self.asking.ask(learner.id, text, context, stored.id, asked)
            answer = corrections.parse_answer(completion.text)
            # Only what the learner really wrote this turn is corrected (and so drilled).
            answer = corrections.checked(answer, text, learner.id)
            if spoken is not None:  # the transcriber wrote the spelling, not the learner
                answer = replace(answer, corrections=spoken_corrections(answer.corrections))
        except LLMError as exc:
            self.store.ledger.record_calls(learner.id, "reply", exc.billed)
            return self._failed(learner.id, exc, language, can_retry=can_retry)
        except corrections.NoReply as exc:  # JSON with no reply in it, even with more room
            self.store.ledger.record_calls(learner.id, "reply", completion.calls)
            return self._failed(learner.id, Unusable(str(exc)), language, can_retry=False)
        # The unusable answers before this one; its own call is stored with the reply.
        self.store.ledger.record_calls(learner.id, "reply", completion.billed)
        # The items' grades are written after the reply is sent (start_jobs), a /review
        # answer's here: its reply says what comes next.
        added, grading = self.review.finish(
            learner.id, stored.id, text, answer.corrections, answer.rest, asked
        )
        if added:  # the next exercise or the score, before the correction lines
            answer = replace(answer, reply=f"{answer.reply}\n\n{added}")
        shown = corrections.render(answer)
        if note:
            shown = f"{note}\n\n{shown}"
        # Spoken after the text went out, never before (bot/speaking.py).
        speech = self.speaking.words(answer.reply) if can_speak else None
        speech = speech if context.learner.voice_replies else None
        reviewed = self._review_use(asked)
        log.info(
            "turn learner=%s prompt_tokens=%s output_tokens=%s calls=%d corrections=%s "
            "truncated=%s recall=%s snippets=%d review_items=%d review_tokens=%d "
            "exercise=%s ms=%d",
            learner.id,
            completion.input_tokens,
            completion.output_tokens,
            1 + len(completion.billed),
            len(answer.corrections),
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
            content=shown,
            tokens=self.counter.count_message(shown),
            corrections=tuple(answer.corrections),
            usage=(completion.model, completion.input_tokens, completion.output_tokens),
        )
        sent = f"{heard}\n\n{shown}" if heard else shown
        return Turn(
            [sent],
            learner.id,
            reply,
            recall=recalled,
            review=reviewed,
            grading=grading,
            speech=speech,
        )

    def _review_use(self, asked: Asked | None) -> ReviewUse:
        """What review added to this turn's prompt, counted."""
        if asked is None:
            return NO_REVIEW
        tokens = self.counter.count(asked.added)
        return ReviewUse(len(asked.items), tokens, exercise=asked.session is not None)

    def _failed(
        self, learner_id: int, exc: LLMError, language: str | None, *, can_retry: bool
    ) -> Turn:
        """The answer when the model gave none. An outage (or a configuration an operator
        may fix) is worth trying again later when the caller can; an unusable answer is not
        asked for again (each costs a billed call); a refusal gets a friendly word."""
        problem = exc.advice
        # Billed calls came back unusable before the failure: a new try would spend a new
        # budget of them on the same message, so the message ends here.
        retryable = isinstance(exc, Misconfigured | Outage) and not exc.billed
        if can_retry and retryable:
            wait = exc.retry_after if isinstance(exc, Outage) else None
            raise ModelUnavailable(str(exc), wait) from exc
        if isinstance(exc, Refused):
            log.warning("turn refused learner=%s reason=%s", learner_id, exc.reason)
            said = phrases.in_language(phrases.REFUSED, language)
        else:
            log.warning("turn failed learner=%s: %s", learner_id, type(exc).__name__)
            said = phrases.apology(language)
        due = due_now(self.store.conversation, learner_id, self.memory)
        return Turn([said], learner_id, due=due, problem=problem)
