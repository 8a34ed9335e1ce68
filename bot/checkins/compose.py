"""What a check-in says: the seam the scheduler calls (`Composer`), and the composer that writes
one from the learner's memory (`MemoryComposer`) — what to follow up (bot/checkins/subject.py),
the check-in prompt (prompts/checkin.txt) with the learner's data in delimited data sections as
in the reply prompt, one model call read by the reply's own reader (bot/checkins/answer.py).
The composer sends, stores and bills nothing: the draft says what it cost and which plan it
follows up, and the caller stores it as Pam's turn, with the plan marked followed up
(`plan_edit`) in the same transaction."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from bot.checkins import answer
from bot.checkins.subject import THREAD, WEEKDAYS, Subject, choose
from bot.corrections import chat_part
from bot.languages import LEVEL_DESCRIPTIONS, languages_of
from bot.settings import CoreSettings
from bot.timezones import zone
from memory.database.records import LEARNER, Context, LearnerGone
from memory.jobs.plans import Plan, kept_plans, marked, same_plan
from memory.jobs.profile import MAX_PROFILE_CHARS
from memory.jobs.profile_facts import settled
from memory.llm import ChatMessage, ChatModel, Unusable, Usage
from memory.store.checkins import ProfileEdit
from memory.store.message_store import Store
from prompts import as_data, render

log = logging.getLogger(__name__)

# The end of the conversation the check-in prompt shows: what was said last, so the message
# follows on from it and asks nothing already asked.
RECENT_MESSAGES = 6
RECENT_CHARS = 300  # one message of it
# Learned fields the check-in prompt leaves out: the density is for corrections (a check-in
# corrects nothing), and a plan comes in its own section when it is the one followed up.
NOT_IN_PROFILE = ("corrections", "plans", "recurring_mistakes")


@dataclass(frozen=True)
class CheckinDraft:
    """A check-in to send: `text`, in the learner's target language, ready to send; what it
    `follows_up` ("plan", "thread", "review" or "invitation"); an operator's `topic` label (no
    message text); the LLM calls it billed (`usage`), for the caller to record; the `plan` it
    follows up (None: none), for the caller to mark followed up once it is written."""

    text: str
    follows_up: str
    topic: str
    usage: tuple[Usage, ...]
    plan: Plan | None = None


class Composer(Protocol):
    """Writes a learner's check-in."""

    def compose(self, learner_id: int, now: datetime) -> CheckinDraft | None:
        """The check-in for `learner_id` at `now`, or None: nothing worth saying now. Raises
        the LLM layer's errors (memory.llm.LLMError) like a reply's model call."""
        ...


def _recent(context: Context) -> str:
    """The last RECENT_MESSAGES of the conversation, "Learner: …" / "Pam: …", Pam's without
    their correction lines."""
    lines = []
    for message in context.messages[-RECENT_MESSAGES:]:
        said = message.content if message.role == LEARNER else chat_part(message.content)
        said = " ".join(said.split())[:RECENT_CHARS]
        lines.append(f"{'Learner' if message.role == LEARNER else 'Pam'}: {said}")
    return "\n".join(lines)


def _previous(context: Context) -> str:
    """What Pam said last in the conversation ("" for nothing)."""
    said = next((m.content for m in reversed(context.messages) if m.role != LEARNER), "")
    return chat_part(said)


def _chatted(context: Context) -> bool:
    """Whether the learner has ever written (a message kept, or folded or learned from)."""
    return (
        any(m.role == LEARNER for m in context.messages)
        or context.summary.folds > 0
        or context.profile.messages_processed > 0
    )


def checkin_prompt(
    context: Context, subject: Subject, target: str, level: str | None, today: date, cap: int
) -> list[ChatMessage]:
    """The check-in prompt: the task and the rules in the system message with the learner's
    settings; their profile, summary, the recent conversation and what to follow up in the
    user message, each a delimited data section. `cap`: the summary's characters."""
    learner = context.learner
    learned = settled(context.profile.data, learner)
    profile = {k: v for k, v in learned.items() if k not in NOT_IN_PROFILE}
    messages = render(
        "checkin",
        max_chars=str(answer.MAX_CHARS),
        what_to_do=subject.task,
        learner_name=as_data(" ".join((learner.display_name or "not known").split()), 100),
        target_language=target,
        level_description=LEVEL_DESCRIPTIONS.get(
            level or "", "level not known: keep it simple and short"
        ),
        today=f"{WEEKDAYS[today.weekday()]} {today.isoformat()}",
        profile=as_data(json.dumps(profile, ensure_ascii=False), MAX_PROFILE_CHARS)
        if profile
        else "(nothing learned yet)",
        summary=as_data(context.summary.text, cap) or "(no earlier conversation yet)",
        recent=as_data(_recent(context), RECENT_MESSAGES * (RECENT_CHARS + 10)) or "(nothing yet)",
        follow_up=subject.follow_up,
    )
    return messages  # type: ignore[return-value]


class MemoryComposer:
    """Writes check-ins from what Pam remembers of the learner (the store's profile, summary,
    conversation and review items) with the reply model (PAM_MODEL), under the reply's output
    cap (PAM_REPLY_MAX_TOKENS)."""

    def __init__(self, store: Store, model: ChatModel, settings: CoreSettings) -> None:
        self.store = store
        self.model = model
        self.settings = settings

    def compose(self, learner_id: int, now: datetime) -> CheckinDraft | None:
        """See Composer. A learner forgotten (before or during the call), whose target
        language Pam does not know, or who never wrote, gets None. The plan followed up is
        marked nowhere here: the caller marks it with the check-in's write (`plan_edit`), so
        a draft dropped leaves it to the next check-in."""
        try:
            context = self.store.conversation.context(learner_id)
        except LearnerGone:
            return None
        learner, learned = context.learner, context.profile.data
        target, _, level = languages_of(
            learner.target_language, learner.native_language, learner.level, learned
        )
        if not target:
            return None
        # The learner's own day: 18:00 in Los Angeles is already tomorrow in UTC.
        today = now.astimezone(zone(self.store.checkins.prefs(learner_id).timezone)).date()
        due = self.store.reviews.due(learner_id, now) if self.settings.memory.review else []
        subject = choose(learned, context.summary.text, due, _chatted(context), today)
        if subject is None:
            return None
        cap = self.settings.memory.summary_max_tokens * 8
        prompt = checkin_prompt(context, subject, target, level, today, cap)
        previous = _previous(context)

        def accept(text: str) -> str | None:
            return answer.problem(text, target, previous, learner_id)

        completion = self.model.complete(
            prompt,
            model=self.settings.llm.model,
            max_tokens=self.settings.llm.reply_max_tokens,
            purpose="checkin",
            schema=answer.CHECKIN_SCHEMA,
            accept=accept,
        )
        if completion.truncated:
            # The client salvages a cut-off answer without asking `accept`: half a check-in
            # is no check-in.
            raise Unusable("the check-in was cut off at the output cap", completion.calls)
        written = answer.read(completion.text)
        if not self._still_here(learner_id):
            log.info("check-in for learner %s dropped: forgotten meanwhile", learner_id)
            return None
        topic = subject.topic if subject.topic is not None else written.topic or THREAD
        log.info(
            "check-in composed learner=%s follows_up=%s calls=%d chars=%d",
            learner_id,
            subject.follows_up,
            len(completion.calls),
            len(written.message),
        )
        return CheckinDraft(
            written.message, subject.follows_up, topic, completion.calls, subject.plan
        )

    def _still_here(self, learner_id: int) -> bool:
        """Whether the learner is still there after the call (/forget may have come between)."""
        try:
            self.store.learners.get_learner(learner_id)
        except LearnerGone:
            return False
        return True


def plan_edit(store: Store, learner_id: int, plan: Plan, today: date) -> ProfileEdit | None:
    """The learner's profile with `plan` marked followed up on `today`, to be written with the
    check-in (over the version read here); None when there is nothing to mark (the plan gone
    from the profile meanwhile, or marked already). Raises LearnerGone."""
    state = store.memory.profile(learner_id)
    plans = state.data.get("plans")
    kept = next((p for p in kept_plans(plans) if same_plan(p, plan)), None)
    if kept is None or kept.followed_up:
        return None
    return ProfileEdit(state.version, {**state.data, "plans": marked(plans, kept, today)})
