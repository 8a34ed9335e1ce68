"""The commands behind the buttons under a reply — /translate, /explain, /say — and which
buttons a reply carries (`reply_buttons`).

Each names one of Pam's replies by the learner message it answers (`/translate 41`: Pam's
reply to message 41), or her newest reply when it names none. The reply's own id is not known
when its turn returns (the caller stores it, in the same write that queues its buttons); the
message it answers is, and has exactly one reply. Every look-up is within the tapping learner's
own messages: a tap is the command typed by whoever tapped, never trusted beyond that.

A tap is a turn like any message (the durable inbox dedups and orders it, the limits check it)
and costs at most one LLM call, recorded in the learner's usage under its own purpose like a
reply's. Its answer is not kept in the conversation: a translation or an explanation in the
learner's native language would teach the next reply to leave the target language, and would
only repeat the reply it is about in the window and the summary."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import prompts
from bot.channels import Button
from bot.corrections import chat_part, shown_in
from bot.i18n import N_, Words, native_of, words_for
from bot.settings import CoreSettings
from bot.turn.limits import Limits
from bot.turn.values import ModelUnavailable, Turn, TurnRequest
from bot.voice.speaking import SLOWER, Speaking, asked_for
from memory import metrics
from memory.database.records import CorrectionRecord, LearnerInfo
from memory.llm import ChatModel, Completion, LLMError, Outage, Purpose
from memory.store.conversation import PamReply
from memory.store.message_store import Store

log = logging.getLogger(__name__)

DOMAIN = "taps"
TRANSLATE, EXPLAIN, SAY = "translate", "explain", "say"
NAMES = (TRANSLATE, EXPLAIN, SAY)
SLOW_WORDS = ("slow", "slower", "slowly")  # `/say 41 slower`: the 🐢 button's command

# What a tap sends the model, at most (a reply is a few sentences; a stored one is capped
# anyway), and what Pam shows of its answer, at most: the model's text is untrusted.
SOURCE_CHARS = 2000
ANSWER_CHARS = 2500
EXPLAIN_WORDS = 60  # per correction, in the prompt's word limit: two lines and an example
MAX_REFERENCE = 2**63 - 1  # a message id: larger is no id of Pam's

TRANSLATE_LABEL = N_("Translate")
EXPLAIN_LABEL = N_("Explain")
SAY_LABEL = N_("🔊 Say it")
SLOWER_LABEL = N_("🐢 Slower")
FEWER_LABEL = N_("Fewer corrections")

NOT_FOUND = N_("I can't find that message — tap the button under one of my replies.")
NO_NATIVE = N_(
    "I don't know your native language yet. Tell me with /language, e.g. "
    "/language Spanish German — then I can translate and explain in it."
)
NOTHING_TO_EXPLAIN = N_("There was nothing to correct in that message — well done!")
COULD_NOT = N_("Sorry, I couldn't do that just now. Try again in a moment?")
NO_VOICE = N_("Sorry, I can't send voice messages here.")
SPOKEN = N_("Here it is 🔊")
SPOKEN_SLOWER = N_("Here it is again, slower 🐢")

_FENCE = re.compile(r"^```[\w-]*\n(.*)\n```$", re.DOTALL)
_QUOTES = {'"': '"', "“": "”", "«": "»", "„": "“", "「": "」"}


def reply_buttons(
    learner: LearnerInfo, answers: int, *, corrected: bool, voice: bool, fewer: bool = True
) -> tuple[Button, ...]:
    """The buttons under a reply the model wrote to the learner's message `answers`: Translate;
    Explain when the reply corrected something (`corrected`); 🔊 Say it when replies can be
    spoken (`voice`); Fewer corrections when it corrected something and fewer is still
    possible (`fewer`: the density is not "few" already, bot/turn/density.py). Labels in the
    learner's native language, most useful first (a channel that shows fewer keeps the
    first)."""
    say = words_for(native_of(learner), DOMAIN)
    buttons = [Button(say(TRANSLATE_LABEL), f"/{TRANSLATE} {answers}")]
    if corrected:
        buttons.append(Button(say(EXPLAIN_LABEL), f"/{EXPLAIN} {answers}"))
    if voice:
        buttons.append(Button(say(SAY_LABEL), f"/{SAY} {answers}"))
    if corrected and fewer:
        buttons.append(Button(say(FEWER_LABEL), "/corrections few"))
    return tuple(buttons)


@dataclass(frozen=True)
class Tap:
    """What a tap's command asks for: which reply (`answering`: the learner message it
    answers; None, the newest), whether it names one Pam cannot have (`unknown`), and for /say
    whether to speak slower."""

    answering: int | None
    unknown: bool = False
    slower: bool = False


def read_tap(args: list[str]) -> Tap:
    """The reply and options `args` name: `41`, `41 slower`, `slower` or nothing."""
    words = [a.lower() for a in args]
    slower = any(w in SLOW_WORDS for w in words)
    rest = [w for w in words if w not in SLOW_WORDS]
    if not rest:
        return Tap(None, slower=slower)
    # ASCII digits only: "²" is a digit to str.isdigit, and no number to int().
    number = rest[0] if len(rest) == 1 and rest[0].isascii() and rest[0].isdigit() else ""
    if not number or not 0 < int(number) <= MAX_REFERENCE:
        return Tap(None, unknown=True)
    return Tap(int(number), slower=slower)


def _answer_problem(text: str) -> str | None:
    """Why a tap's answer cannot be shown (None: it can): an empty answer is no answer."""
    return None if read_answer(text) else "empty answer"


def read_answer(text: str) -> str:
    """What to show of the model's answer to a tap: its text without a code fence or quotes
    around it all, capped at ANSWER_CHARS (cut at a word)."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if len(text) > 1 and _QUOTES.get(text[0]) == text[-1] and text.count(text[0]) == 1:
        text = text[1:-1].strip()
    if len(text) > ANSWER_CHARS:
        text = text[: ANSWER_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return text


def _corrections_data(found: list[CorrectionRecord]) -> str:
    """The corrections as the explain prompt shows them, one a line."""
    lines = []
    for c in found:
        why = f" ({c.explanation})" if c.explanation else ""
        lines.append(f"- {c.original} → {c.corrected}{why}")
    return "\n".join(lines)


class Taps:
    """Answers /translate, /explain and /say for a learner, with `model` (one call at most),
    within `limits`, spoken by `speaking`."""

    def __init__(
        self,
        store: Store,
        model: ChatModel,
        settings: CoreSettings,
        limits: Limits,
        speaking: Speaking,
    ) -> None:
        self.store = store
        self.model = model
        self.settings = settings
        self.limits = limits
        self.speaking = speaking

    def answer(
        self, learner: LearnerInfo, name: str, args: list[str], request: TurnRequest
    ) -> Turn:
        """The answer to the tap `/name args` by `learner` (the message of `request`)."""
        say = words_for(native_of(learner), DOMAIN)
        tap = read_tap(args)
        reply = None if tap.unknown else self.store.conversation.reply_of(learner.id, tap.answering)
        if reply is None:
            return Turn([say(NOT_FOUND)], learner.id)
        if name == SAY:
            return self._say(learner, reply, tap, request, say)
        native = native_of(learner)
        if native is None:
            return Turn([say(NO_NATIVE)], learner.id)
        if name == EXPLAIN:
            # Those the reply showed: at "few" the others were stored for review, unsaid.
            found = shown_in(
                reply.content, self.store.ledger.corrections_of(learner.id, reply.answers)
            )
            if not found:
                return Turn([say(NOTHING_TO_EXPLAIN)], learner.id)
            values = {
                "target": learner.target_language or "the language they practise",
                "native": native,
                "max_words": str(EXPLAIN_WORDS * len(found)),
                "message": prompts.as_data(reply.message, SOURCE_CHARS),
                "corrections": prompts.as_data(_corrections_data(found), SOURCE_CHARS),
            }
            return self._asked(learner, "explain", values, request, say)
        values = {
            "native": native,
            "message": prompts.as_data(chat_part(reply.content), SOURCE_CHARS),
        }
        return self._asked(learner, "translate", values, request, say)

    def _asked(
        self,
        learner: LearnerInfo,
        purpose: Purpose,
        values: dict[str, str],
        request: TurnRequest,
        say: Words,
    ) -> Turn:
        """The model's answer to the `purpose` prompt with `values`, in one call, its usage
        recorded; the limits checked first (a tap costs tokens like a message)."""
        limited = self._limited(learner)
        if limited is not None:
            return limited
        try:
            completion: Completion = self.model.complete(
                prompts.render(purpose, **values),  # type: ignore[arg-type]
                model=self.settings.llm.model,
                max_tokens=self.settings.llm.reply_max_tokens,
                purpose=purpose,
                accept=_answer_problem,
            )
        except LLMError as exc:
            self.store.ledger.record_calls(learner.id, purpose, exc.billed)
            if request.can_retry and isinstance(exc, Outage):
                raise ModelUnavailable(str(exc), exc.retry_after) from exc
            log.warning("tap failed learner=%s purpose=%s: %s", learner.id, purpose, exc)
            return Turn([say(COULD_NOT)], learner.id, problem=exc.advice)
        self.store.ledger.record_calls(learner.id, purpose, completion.calls)
        log.info(
            "tap learner=%s purpose=%s prompt_tokens=%s output_tokens=%s calls=%d",
            learner.id,
            purpose,
            completion.input_tokens,
            completion.output_tokens,
            len(completion.calls),
        )
        shown = read_answer(completion.text)
        return Turn([f"{shown}…" if completion.truncated else shown], learner.id)

    def _limited(self, learner: LearnerInfo) -> Turn | None:
        """What Pam says instead when a limit stops the tap (as it would a message: a tap
        costs tokens too), None when none does."""
        limit = self.limits.passed_before(learner.id)
        if limit is None:
            return None
        log.info("tap limited learner=%s limit=%s", learner.id, limit)
        metrics.BUDGET_REFUSALS.labels(limit).inc()
        said = self.limits.say(limit, learner.id, learner.target_language)
        return Turn([said] if said else [], learner.id)

    def _say(
        self, learner: LearnerInfo, reply: PamReply, tap: Tap, request: TurnRequest, say: Words
    ) -> Turn:
        """The reply spoken, after a line that says so, by the speech lanes; no chat-model
        call (the speech's usage is the lane's). Slower when it is heard again: asked for with
        the 🐢 button, or with /voice on, where every reply was spoken once already."""
        if not self.speaking.enabled or not request.can_speak:
            return Turn([say(NO_VOICE)], learner.id)
        words = self.speaking.words(chat_part(reply.content))
        if words is None:
            return Turn([say(NOT_FOUND)], learner.id)
        limited = self._limited(learner)
        if limited is not None:
            return limited
        if tap.slower or learner.voice_replies:
            return Turn([say(SPOKEN_SLOWER)], learner.id, speech=asked_for(words, SLOWER))
        slower = Button(say(SLOWER_LABEL), f"/{SAY} {reply.answers} slower")
        return Turn([say(SPOKEN)], learner.id, speech=asked_for(words), buttons=(slower,))
