"""A tutor turn: one `TurnRequest` in, one `Turn` out (bot/turn/values.py). The tutor stores the
learner's message and decides what it is — the note that messages were turned away, a voice
note (bot/turn/voice_turn.py), media without words, /forget or the answer to its question
(bot/turn/forgetting.py), a command (bot/turn/commands.py), or a message to converse about
(bot/turn/conversing.py) — and returns the reply as a plain value. It knows
nothing of claims, leases or message splitting: the caller stores the reply (bot/turn/storing.py),
sends it, and then does the turn's after-send work (bot/turn/after_send.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from bot import phrases
from bot.i18n import native_of
from bot.review.reviewing import Reviewing
from bot.settings import CoreSettings
from bot.turn.asking import Asking
from bot.turn.commands import Command, CommandAnswer, Commands, parse_command
from bot.turn.conversing import Conversing, Said
from bot.turn.forgetting import FORGET, Forgetting
from bot.turn.limits import Limits
from bot.turn.native_guess import with_guess
from bot.turn.taps import NAMES as TAPS
from bot.turn.taps import Taps
from bot.turn.values import Turn, TurnRequest
from bot.turn.voice_turn import VoiceTurns
from bot.voice.hearing import Hearing
from bot.voice.ports import Speaker, Transcriber
from bot.voice.speaking import Speaking
from memory.clock import Clock, utcnow
from memory.database.records import LearnerGone, LearnerInfo
from memory.llm import ChatModel
from memory.messages import TURNED_AWAY, VOICE, clean_text
from memory.recall.search import Searcher
from memory.store.message_store import Store
from memory.tokens import TokenCounter

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000


def _unless_forgotten(learner_id: int, turn: Callable[[], Turn]) -> Turn:
    """`turn()` — unless /forget wins a race with it: then nothing is said or kept."""
    try:
        return turn()
    except LearnerGone:
        log.info("turn for learner %s dropped: forgotten mid-turn", learner_id)
        return Turn([], learner_id)


def _after_note(note: str | None, turn: Turn) -> Turn:
    """`turn`, with `note` said before its replies (if there is one)."""
    return replace(turn, replies=[note, *turn.replies]) if note else turn


class Tutor:
    """Pam's channel-agnostic core: one call per inbound message (`answer`), returning what to
    send and store."""

    def __init__(
        self,
        store: Store,
        model: ChatModel,
        counter: TokenCounter,
        settings: CoreSettings,
        clock: Clock = utcnow,
        searcher: Searcher | None = None,
        transcriber: Transcriber | None = None,
        speaker: Speaker | None = None,
    ) -> None:
        self.store = store
        self.counter = counter
        self.settings = settings
        self.clock = clock  # the rate and budget windows go by it
        # The reply request, with recall of the learner's folded-out past through `searcher`
        # (the store's recall; None: no recall, whatever PAM_RECALL says).
        self.asking = Asking(model, counter, settings, searcher, clock)
        # Due items in the prompt, grading by the reply's report, /review (PAM_REVIEW).
        self.review = Reviewing(store.reviews, settings.memory.review, clock)
        self.commands = Commands(
            store,
            self.review,
            clock,
            voice=settings.voice.voice_notes,
            window=settings.memory.window_messages,
            checkins=settings.checkin.enabled,
        )
        # /forget: asked first, erased on the learner's yes (PAM_FORGET_CONFIRM_SECONDS).
        self.forgetting = Forgetting(store, clock, settings.memory.forget_confirm_seconds)
        self.limits = Limits(settings.limits, store.conversation, store.learners, clock)
        # Voice notes transcribed, replies spoken (PAM_VOICE_NOTES; None: neither).
        self.hearing = Hearing(transcriber, settings.voice, store.ledger)
        self.speaking = Speaking(speaker, settings.voice, store.ledger, store.voice_clips)
        self.conversing = Conversing(
            store, counter, self.asking, self.limits, self.review, self.speaking, settings.memory
        )
        # /translate, /explain, /say: the commands behind the buttons under a reply.
        self.taps = Taps(store, model, settings, self.limits, self.speaking)
        self.voice_turns = VoiceTurns(
            store, counter, self.hearing, self.limits, self.conversing, MAX_MESSAGE_CHARS
        )

    def answer(self, request: TurnRequest) -> Turn:
        """What to answer `request`'s message, storing only the message: the reply is the
        caller's to store (`Turn.reply`), and the after-send work its to do once the reply is
        sent (`Turn.after_send`). A `kind` other than "text" (a voice note, a photo) gets a
        friendly answer, or its caption is answered; when the LLM fails, the learner gets an
        apology, unless the request `can_retry`: then ModelUnavailable is raised and the
        caller runs the turn again later."""
        text = clean_text(request.text)
        kind = request.kind
        if kind == TURNED_AWAY:
            return self._turned_away(request)
        if kind == VOICE and request.voice is not None and self.hearing.enabled:
            learner = self._learner(request)
            dropped = self.forgetting.drop(learner)
            turn = _unless_forgotten(
                learner.id, lambda: self.voice_turns.answer(learner, request, caption=text)
            )
            return _after_note(dropped, turn)
        if kind != "text" and not text:
            known = request.learner or self.store.learners.find_learner(request.address)
            native = native_of(known)
            said = phrases.not_text(kind, native)
            if kind == VOICE and self.hearing.enabled:  # a note without its audio's address
                said = phrases.said(phrases.VOICE_UNREADABLE, native)
            return Turn([said], known.id if known else None)
        if not text:
            return Turn([], None)
        command = parse_command(text)
        if command is not None:
            command = replace(command, inbox_id=request.inbox_id, group=request.group)
            if command.name == FORGET:  # asked or confirmed; nobody is made up for it
                known = request.learner or self.store.learners.find_learner(request.address)
                if known is not None:
                    known = with_guess(self.store.learners, known, request.language_hint)
                return self.forgetting.answer(known, command, request)
        learner = self._learner(request)
        if command is None and self.forgetting.confirms(learner, text):
            return self.forgetting.confirm(learner, None, request)
        dropped = self.forgetting.drop(learner)  # any other message: nothing is erased
        return _after_note(dropped, self._answer(learner, text, command, request))

    def _answer(
        self, learner: LearnerInfo, text: str, command: Command | None, request: TurnRequest
    ) -> Turn:
        """What to answer the learner's text: a command, or a message to converse about."""
        kind = request.kind
        if command is not None:
            if command.name in TAPS:
                return _unless_forgotten(
                    learner.id,
                    lambda: self.taps.answer(learner, command.name, command.args, request),
                )
            try:
                answered = self.commands.handle(learner, command)
            except LearnerGone:
                return Turn([phrases.said(phrases.FORGOTTEN, native_of(learner))], learner.id)
            if isinstance(answered, CommandAnswer):
                return Turn(
                    [answered.text],
                    learner.id,
                    chart_id=answered.chart_id,
                    buttons=answered.buttons,
                )
            return Turn([answered], learner.id)
        if len(text) > MAX_MESSAGE_CHARS:
            too_long = phrases.said(phrases.TOO_LONG, native_of(learner), limit=MAX_MESSAGE_CHARS)
            return Turn([too_long], learner.id)
        # A photo with a caption: the caption is answered like any message, after the
        # friendly note that Pam cannot see the picture itself.
        note = phrases.not_text(kind, native_of(learner)) if kind != "text" else None
        message = Said(text, note=note)
        return _unless_forgotten(
            learner.id, lambda: self.conversing.reply(learner, message, request)
        )

    def _learner(self, request: TurnRequest) -> LearnerInfo:
        """The learner who sent `request`, as the caller read them or looked up (made, for a
        first message), with the native language the channel hints at guessed."""
        learner = request.learner or self.store.learners.learner(
            request.address, request.display_name
        )
        return with_guess(self.store.learners, learner, request.language_hint)

    def _turned_away(self, request: TurnRequest) -> Turn:
        """The note that the web turned messages of the learner away (too many waiting):
        "slow down", as when the rate limit stops a turn, and as seldom. Nothing is kept."""
        learner = request.learner or self.store.learners.find_learner(request.address)
        if learner is None:  # forgotten meanwhile, or never answered: say it plainly
            return Turn([self.limits.said("rate", None)], None)
        said = self.limits.say("rate", learner.id, native_of(learner))
        return Turn([said] if said else [], learner.id)
