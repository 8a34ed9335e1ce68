"""Review in the conversation: due items in the reply prompt and the reply's report of what
the learner used or got wrong again, and /review's exercises, one at a time in the chat. What
is due and how a grade moves an item is memory/review/reviews.py's (FSRS); this module decides when
a turn offers review and what its answer does to the learner's items and their /review. What the
prompt says and how the answer is read are bot/review/prompt.py's; the exercises,
bot/review/exercises.py's. Pam's own words here — the scaffolding, the score, when the next
review is — are in the learner's native language (the "review" catalog of bot/i18n)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from typing import Any

from babel.dates import format_skeleton

from bot.i18n import N_, Words, native_of, words_for
from bot.review.exercises import KINDS, exercise, exercise_result
from bot.review.prompt import Asked, due_prompt, exercise_prompt, report
from memory.clock import Clock, utcnow
from memory.database.records import (
    LEARNER,
    Context,
    CorrectionRecord,
    LearnerGone,
    LearnerInfo,
    ReviewReport,
)
from memory.review.reads import Exercise, ReviewState
from memory.review.reviews import Reviews

log = logging.getLogger(__name__)

PROMPT_ITEMS = 2  # due items one reply prompt carries, at most
SESSION_ITEMS = 5  # exercises one /review asks, at most
STALE = timedelta(days=1)  # a /review left this long is over

REVIEW_OFF = N_("Review is switched off here: I still correct your mistakes as we chat.")
NOTHING_YET = N_(
    "Nothing to review yet: the mistakes I correct in our chats come back here when they're due."
)
NOTHING_DUE = N_("Nothing to review right now. {next}")
COUNTER = N_("Exercise {number} of {total}: {exercise}")
UNDER_WAY = N_("We're in the middle of a review — {exercise}")
# Chatting on before answering one exercise ends the review with a word, never silently.
PAUSED_EARLY = N_("Review paused — we'll practise later: send /review when you like.")
MORE_DUE = N_("There's more to practise: send /review again.")
NOW = N_("now")
TOMORROW = N_("tomorrow")
ON = N_("on {date}")
# The items a "Next review" line counts: those due within this of the next one when it is
# hours away, else those due by the end of its day.
SITTING = timedelta(hours=1)


@dataclass(frozen=True)
class ReviewUse:
    """What review added to one turn's prompt, for the log line and the token benchmark: the
    due items it carried, whether it carried a /review exercise, and the tokens of all it
    added (section, rule, format)."""

    items: int = 0
    tokens: int = 0
    exercise: bool = False


NO_REVIEW = ReviewUse()


def when(due: datetime, now: datetime, say: Words | None = None) -> str:
    """When `due` comes, in `say`'s words (English when None): "now", "in 20 minutes",
    "in 5 hours", "tomorrow", "on 14 March" (days in UTC, as Pam keeps them)."""
    say = say or words_for(None, "review")
    wait = due - now
    if wait <= timedelta(0):
        return say(NOW)
    # Rounded, never "in 60 minutes" nor "in 24 hours": the next unit then.
    minutes = max(1, round(wait.total_seconds() / 60))
    if minutes < 60:
        return say.plural("in {count} minute", "in {count} minutes", minutes)
    hours = round(wait.total_seconds() / 3600)
    if hours < 24:
        return say.plural("in {count} hour", "in {count} hours", hours)
    due, now = due.astimezone(UTC), now.astimezone(UTC)
    if due.date() == (now + timedelta(days=1)).date():
        return say(TOMORROW)
    skeleton = "MMMMd" if due.year == now.year else "yMMMMd"
    return say(ON, date=format_skeleton(skeleton, due, locale=say.cldr))


def _counted_by(due: datetime, now: datetime) -> datetime:
    """Until when the items a "Next review" line counts are due (see SITTING)."""
    if due - now < timedelta(hours=24):
        return due + SITTING
    return datetime.combine(due.astimezone(UTC).date() + timedelta(days=1), time(), UTC)


def say_for(language: str | None) -> Words:
    """Review's words for a learner whose native language is `language`."""
    return words_for(language, "review")


# -- review in a turn and in /review ---------------------------------------------------------


class Reviewing:
    """Review's part in a tutor turn (`prepare`, `finish`) and /review (`start`), over the
    store's `reviews`; `enabled` is PAM_REVIEW (off: nothing offered or asked, corrections
    still recorded as patterns)."""

    def __init__(self, reviews: Reviews, enabled: bool = True, clock: Clock = utcnow) -> None:
        self.reviews = reviews
        self.enabled = enabled
        self.clock = clock

    def prepare(self, learner_id: int, context: Context) -> Asked | None:
        """What review adds to this turn's prompt: the exercise of a /review under way, else
        up to PROMPT_ITEMS due items whose last mistake has left the prompt's messages; None
        for nothing. A failing read adds nothing: review never costs the learner a reply. When
        the context's read saw no item due and no /review under way, review's own read is
        skipped: it would find nothing."""
        if not self.enabled:
            return None
        try:
            if context.review is not None and context.review.nothing_for_prompt(self.clock()):
                return None
            oldest = min(m.id for m in context.messages)
            # The learner's message before this one: the items its prompt invited come again.
            theirs = [m.id for m in context.messages if m.role == LEARNER]
            found = self.reviews.for_prompt(
                learner_id,
                before_message_id=oldest,
                limit=PROMPT_ITEMS,
                previous_message_id=theirs[-2] if len(theirs) > 1 else None,
            )
            if isinstance(found, ReviewState):
                session = self._fresh(learner_id, found)
                if session is None:
                    return None
                item = self.reviews.item(learner_id, session.exercise.item_id)
                asked = exercise_prompt(session, item.rule if item else "")
                return replace(asked, native=native_of(context.learner))
        except LearnerGone:
            raise
        except Exception as exc:
            log.warning("review read failed learner=%s: %s", learner_id, type(exc).__name__)
            return None
        return due_prompt(found) if found else None

    def finish(
        self,
        learner_id: int,
        message_id: int,
        text: str,
        corrections: Sequence[CorrectionRecord],
        rest: dict[str, Any],
        asked: Asked | None,
    ) -> tuple[str, ReviewReport | None]:
        """What this turn's answer does to review: the text Pam adds to the reply (the next
        exercise, or the score; "" for none), and the answer's report on the learner's items,
        stored with the reply for the "review" memory job to grade them by, with the turn's
        corrections, in the background (None: nothing to grade). A /review answer is graded
        here, the session moved on with it: its reply says what comes next. A failure other
        than LearnerGone is logged, and the reply goes out without the grade."""
        used: list[int] = []
        missed: list[int] = []
        if asked is not None and asked.items:
            used, missed = report(rest, asked.items)
        offered = tuple(item.id for item in asked.items) if asked is not None else ()
        grades = None
        if corrections or offered:  # else nothing to grade: no row, no job
            grades = ReviewReport(tuple(used), tuple(missed), offered)
        if asked is None or asked.session is None:
            return "", grades
        try:
            if grades is not None:  # the corrections first: a pattern made again is Again
                self.reviews.record_turn(
                    learner_id,
                    message_id,
                    corrections,
                    used=grades.used,
                    missed=grades.missed,
                    offered=grades.offered,
                )
            say = say_for(asked.native)
            return self._answered(learner_id, message_id, text, rest, asked.session, say), None
        except LearnerGone:
            raise
        except Exception as exc:
            log.warning("review grading failed learner=%s: %s", learner_id, type(exc).__name__)
        return "", None

    def _answered(
        self,
        learner_id: int,
        message_id: int,
        text: str,
        rest: dict[str, Any],
        at: ReviewState,
        say: Words,
    ) -> str:
        """Grade the learner's answer to `at`'s exercise and move the session on: the next
        exercise, or the score and when the next review is. Not an answer: the session ends,
        the reply is chat, and the score so far goes with it."""
        right = exercise_result(rest, text, at.exercise)
        if right is None:
            self.reviews.end_session(learner_id)
            log.info("review session ended learner=%s: chatting on", learner_id)
            answered = at.asked - 1  # `asked` counts the exercise left unanswered
            if answered < 1:
                return say(PAUSED_EARLY)
            # The score so far, once: the session is over, the reply is chat.
            return say.plural(
                "Review paused: {right} of {count} right so far. We'll do the rest later "
                "(/review).",
                "Review paused: {right} of {count} right so far. We'll do the rest later "
                "(/review).",
                answered,
                right=say.number(at.right),
            )
        self.reviews.grade(learner_id, at.exercise.item_id, right, message_id)
        kind = KINDS[at.asked % len(KINDS)]
        following = self._following(learner_id, at.queue, kind, say)
        self.reviews.next_exercise(learner_id, right, following)
        if following is not None:
            return _numbered(following, at.asked + 1, at.asked + len(at.queue), say)
        score = say.plural(
            "That's the review done: {right} of {count} right.",
            "That's the review done: {right} of {count} right.",
            at.asked,
            right=say.number(at.right + (1 if right else 0)),
        )
        following_due = self._next_due(learner_id, say)
        return f"{score} {following_due}" if following_due else score

    def _following(
        self, learner_id: int, queue: Sequence[int], kind: str, say: Words
    ) -> Exercise | None:
        """The next exercise: on the first item of `queue` still there."""
        for item_id in queue:
            item = self.reviews.item(learner_id, item_id)
            if item is not None:
                return exercise(item, kind, say)
        return None

    def _next_due(self, learner_id: int, say: Words) -> str:
        """When the next review is, and how many items it has: "Next review: 3 items
        tomorrow."; "" without items."""
        due = self.reviews.next_due(learner_id)
        if due is None:
            return ""
        now = self.clock()
        if due <= now:
            return say(MORE_DUE)
        count = max(1, self.reviews.due_by(learner_id, _counted_by(due, now)))
        coming = when(due, now, say)
        return say.plural(
            "Next review: {count} item {when}.",
            "Next review: {count} items {when}.",
            count,
            when=coming,
        )

    def session(self, learner_id: int) -> ReviewState | None:
        """The learner's /review under way; one left longer than STALE is ended first."""
        session = self.reviews.session(learner_id)
        return self._fresh(learner_id, session) if session is not None else None

    def _fresh(self, learner_id: int, session: ReviewState) -> ReviewState | None:
        """`session`, or None (and ended) when it was left longer than STALE."""
        if self.clock() - session.started_at > STALE:
            self.reviews.end_session(learner_id)
            return None
        return session

    def start(self, learner: LearnerInfo) -> str:
        """/review: the first exercise of a session over the learner's due items (at most
        SESSION_ITEMS), the one under way, or when the next review is — in the learner's
        native language (bot.i18n.native_of's)."""
        say = say_for(native_of(learner))
        learner_id = learner.id
        if not self.enabled:
            return say(REVIEW_OFF)
        session = self.session(learner_id)
        if session is not None:
            total = session.asked + len(session.queue)
            asked = _numbered(session.exercise, session.asked, total, say)
            return say(UNDER_WAY, exercise=asked)
        due = self.reviews.due(learner_id)[:SESSION_ITEMS]
        if not due:
            following_due = self._next_due(learner_id, say)
            return say(NOTHING_DUE, next=following_due) if following_due else say(NOTHING_YET)
        first = exercise(due[0], KINDS[0], say)
        self.reviews.start_session(learner_id, first, [item.id for item in due[1:]])
        numbered = _numbered(first, 1, len(due), say)
        return say.plural(
            "Let's practise one of your mistakes from our chats. Answer it, or just chat on "
            "to stop.\n\n{first}",
            "Let's practise {count} of your mistakes from our chats, one at a time. Answer, "
            "or just chat on to stop.\n\n{first}",
            len(due),
            first=numbered,
        )


def _numbered(asked: Exercise, number: int, total: int, say: Words) -> str:
    """The exercise with where it is in the session: "Exercise 1 of 3: Fix this: …" (as it
    is, alone)."""
    if total < 2:
        return asked.prompt
    return say(COUNTER, number=say.number(number), total=say.number(total), exercise=asked.prompt)
