"""A tutor turn: store the learner's message, answer it with corrections, trigger memory jobs."""

from __future__ import annotations

import logging
import time
import unicodedata
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from bot import corrections, phrases
from bot.commands import Commands, parse_command
from bot.prompt import reply_prompt
from bot.settings import Settings
from memory.density import is_low_information
from memory.jobs import FOLD, PROFILE, JobRunner
from memory.llm import (
    ChatModel,
    LLMError,
    Misconfigured,
    Outage,
    Refused,
    Unusable,
)
from memory.profile import profile_due
from memory.queue import Finished, Finishing
from memory.records import Activity, ActivityWindow
from memory.store import Backlog, LearnerGone, LearnerInfo, Store
from memory.summary import fold_due
from memory.tokens import TokenCounter

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000
# How many unread learner messages a turn looks at to decide whether the profile is due; a
# profile that keeps failing leaves more, and counting them all would grow without bound.
PROFILE_COUNT_LIMIT = 200
LIMIT_PHRASES = {
    "rate": phrases.SLOW_DOWN,
    "learner_budget": phrases.LEARNER_BUDGET,
    "service_budget": phrases.SERVICE_BUDGET,
}


def clean_text(text: str) -> str:
    """The learner's text with surrounding whitespace and invisible control characters removed
    (newlines and tabs stay; RTL marks, CJK and emoji are kept as they are)."""
    # Half an emoji (a lone surrogate, legal in JSON) cannot be stored: pair what pairs, and
    # replace what cannot with U+FFFD.
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = unicodedata.normalize("NFC", text)
    kept = (ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc")
    return "".join(kept).strip()


@dataclass(frozen=True)
class Answer:
    """What to send back for one inbound message, whose message it was, and which memory jobs
    the turn made due: the caller starts those with `Tutor.start_jobs` once the replies are
    on their way, so a reply never waits for them."""

    replies: list[str]
    learner_id: int | None
    due: tuple[str, ...] = ()
    # The inbox claim, if the turn finished it with its reply (see `Tutor.answer`).
    finished: Finished | None = None
    # What the operator should know when the model could not be used because of how it is
    # configured (a rejected key, an unknown model, an unreachable base URL): `pam chat`,
    # where the learner is the operator, shows it on stderr. Never shown to a learner.
    problem: str | None = None


class ModelUnavailable(Exception):
    """The LLM failed this turn (after the client's own retries) and the caller said it can
    try the turn again later: nothing was answered, the learner's message is kept."""


class Tutor:
    """Pam's channel-agnostic core: one call per inbound text, returning the texts to send."""

    def __init__(
        self,
        store: Store,
        model: ChatModel,
        counter: TokenCounter,
        runner: JobRunner,
        settings: Settings,
    ) -> None:
        self.store = store
        self.model = model
        self.counter = counter
        self.runner = runner
        self.settings = settings
        self.memory = settings.memory
        self.commands = Commands(store)

    def handle(
        self,
        external_id: str,
        text: str,
        display_name: str | None = None,
        inbox_id: int | None = None,
        kind: str = "text",
        can_retry: bool = False,
    ) -> list[str]:
        """Answer one inbound text from the learner known as `external_id` on its channel.
        With `inbox_id` (the message's durable inbox item) the turn is idempotent: run again
        after a crash, it stores nothing twice and answers with the reply already made.
        A `kind` other than "text" (a voice note, a photo) gets a friendly answer.
        When the LLM fails, the learner gets an apology, unless `can_retry`: then
        ModelUnavailable is raised and the caller runs the turn again later."""
        answer = self.answer(external_id, text, display_name, inbox_id, kind, can_retry)
        self.start_jobs(answer)
        return answer.replies

    def answer(
        self,
        external_id: str,
        text: str,
        display_name: str | None = None,
        inbox_id: int | None = None,
        kind: str = "text",
        can_retry: bool = False,
        known: LearnerInfo | None = None,
        finishing: Finishing | None = None,
    ) -> Answer:
        """`handle`, also saying which learner it was (for the caller's log line), without
        starting the memory jobs the turn made due: the caller does, with `start_jobs`.
        `known`: the learner with `external_id`, if the caller has just read them.
        `finishing`: the inbox claim being answered; a turn that stores a reply finishes it
        in the same write (`Answer.finished`), any other answer leaves that to the caller."""
        text = clean_text(text)
        if kind != "text" and not text:
            known = known or self.store.find_learner(external_id)
            language = known.target_language if known else None
            return Answer([phrases.not_text(kind, language)], known.id if known else None)
        if not text:
            return Answer([], None)
        learner = known or self.store.learner(external_id, display_name)
        command = parse_command(text)
        if command is not None:
            command = replace(command, inbox_id=inbox_id)
            try:
                return Answer([self.commands.handle(learner, command)], learner.id)
            except LearnerGone:
                return Answer([phrases.FORGOTTEN], learner.id)
        if len(text) > MAX_MESSAGE_CHARS:
            return Answer([phrases.TOO_LONG.format(limit=MAX_MESSAGE_CHARS)], learner.id)
        # A photo with a caption: the caption is answered like any message, after the
        # friendly note that Pam cannot see the picture itself.
        note = phrases.not_text(kind, learner.target_language) if kind != "text" else None
        try:
            return self.turn(
                learner, text, inbox_id, can_retry=can_retry, finishing=finishing, note=note
            )
        except LearnerGone:  # /forget won a race with this turn: say nothing, keep nothing
            log.info("turn for learner %s dropped: forgotten mid-turn", learner.id)
            return Answer([], learner.id)

    def start_jobs(self, answer: Answer) -> None:
        """Start the memory jobs `answer`'s turn made due (each runs in the background)."""
        for kind in answer.due:
            assert answer.learner_id is not None
            self.runner.request(answer.learner_id, kind)

    def turn(
        self,
        learner: LearnerInfo,
        text: str,
        inbox_id: int | None = None,
        *,
        can_retry: bool = False,
        finishing: Finishing | None = None,
        note: str | None = None,
    ) -> Answer:
        """A conversational turn: the replies, the memory jobs now due, and the inbox claim
        if `finishing` finished it with the reply. The learner's message is stored first, so
        an LLM failure loses nothing. `note`: a line said before the reply (and kept with it).
        """
        started = time.monotonic()
        stored, answered, context, activity = self.store.begin_turn(
            learner.id,
            text,
            self.counter.count_message(text),
            inbox_id=inbox_id,
            window=self._limit_window(),
        )
        if answered is not None:  # a re-run after a crash: the reply exists already
            return Answer([answered.content], learner.id)
        assert context is not None
        language = context.learner.target_language
        limit = self._over_limit(activity)
        if limit is not None:  # the message stays in memory; the LLM is not called
            log.info("turn limited learner=%s limit=%s", learner.id, limit)
            return Answer([phrases.in_language(LIMIT_PHRASES[limit], language)], learner.id)
        prompt = reply_prompt(context, summary_cap_chars=self.memory.summary_max_tokens * 8)
        try:
            completion = self.model.complete(
                prompt,
                model=self.settings.llm.model,
                max_tokens=self.settings.llm.reply_max_tokens,
                purpose="reply",
                schema=corrections.REPLY_SCHEMA,
                # JSON with no chat message in it is asked for again, like any unusable answer.
                accept=corrections.reply_problem,
            )
            answer = corrections.parse_answer(completion.text)
        except LLMError as exc:
            self.store.record_calls(learner.id, "reply", exc.billed)
            return self._failed(learner.id, exc, language, can_retry=can_retry)
        except corrections.NoReply as exc:  # JSON with no reply in it, even with more room
            self.store.record_calls(learner.id, "reply", completion.calls)
            return self._failed(learner.id, Unusable(str(exc)), language, can_retry=False)
        # The unusable answers before this one; its own call is stored with the reply.
        self.store.record_calls(learner.id, "reply", completion.billed)
        shown = corrections.render(answer)
        if note:
            shown = f"{note}\n\n{shown}"
        reply, backlog, finished = self.store.save_reply(
            learner.id,
            stored.id,
            shown,
            self.counter.count_message(shown),
            answer.corrections,
            (completion.model, completion.input_tokens, completion.output_tokens),
            backlog_limit=PROFILE_COUNT_LIMIT,
            finishing=finishing,
        )
        if backlog is None:  # another worker answered this message first: theirs stands
            return Answer([reply.content], learner.id)
        log.info(
            "turn learner=%s prompt_tokens=%s output_tokens=%s calls=%d corrections=%s "
            "truncated=%s ms=%d",
            learner.id,
            completion.input_tokens,
            completion.output_tokens,
            1 + len(completion.billed),
            len(answer.corrections),
            completion.truncated,
            (time.monotonic() - started) * 1000,
        )
        return Answer([shown], learner.id, self._due(backlog), finished)

    def _failed(
        self, learner_id: int, exc: LLMError, language: str | None, *, can_retry: bool
    ) -> Answer:
        """The answer when the model gave none. An outage (or a configuration an operator
        may fix) is worth trying again later when the caller can; an unusable answer is not
        asked for again (each costs a billed call); a refusal gets a friendly word."""
        problem = exc.advice if isinstance(exc, Misconfigured | Outage) else None
        # Billed calls came back unusable before the failure: a new try would spend a new
        # budget of them on the same message, so the message ends here.
        retryable = isinstance(exc, Misconfigured | Outage) and not exc.billed
        if can_retry and retryable:
            raise ModelUnavailable(str(exc)) from exc
        if isinstance(exc, Refused):
            log.warning("turn refused learner=%s reason=%s", learner_id, exc.reason)
            said = phrases.in_language(phrases.REFUSED, language)
        else:
            log.warning("turn failed learner=%s: %s", learner_id, type(exc).__name__)
            said = phrases.apology(language)
        due = self._due(self.store.memory_backlog(learner_id, PROFILE_COUNT_LIMIT))
        return Answer([said], learner_id, due, problem=problem)

    def _limit_window(self) -> ActivityWindow | None:
        """What the cost and abuse limits count this turn; None if none is set."""
        settings, now = self.settings, datetime.now(UTC)
        if not (
            settings.limits.rate_limit_per_minute
            or settings.limits.learner_daily_tokens
            or settings.limits.daily_tokens
        ):
            return None
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return ActivityWindow(now - timedelta(minutes=1), today, bool(settings.limits.daily_tokens))

    def _over_limit(self, activity: Activity | None) -> str | None:
        """Which cost or abuse limit this turn would pass, if any."""
        if activity is None:
            return None
        settings = self.settings
        if (
            settings.limits.rate_limit_per_minute
            and activity.messages > settings.limits.rate_limit_per_minute
        ):
            return "rate"
        if (
            settings.limits.learner_daily_tokens
            and activity.tokens >= settings.limits.learner_daily_tokens
        ):
            return "learner_budget"
        if (
            settings.limits.daily_tokens
            and (activity.everyone_tokens or 0) >= settings.limits.daily_tokens
        ):
            return "service_budget"
        return None

    def _due(self, backlog: Backlog) -> tuple[str, ...]:
        """The memory jobs `backlog` calls for."""
        count, tokens, unread = backlog
        due: tuple[str, ...] = (FOLD,) if fold_due(count, tokens, self.memory) else ()
        # Only messages that say something count toward the profile's cadence: "ok", "jaja"
        # and 👍 never cost a profile call on their own.
        if profile_due(sum(not is_low_information(t) for t in unread), self.memory):
            due += (PROFILE,)
        return due
