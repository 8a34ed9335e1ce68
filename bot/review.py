"""Review in the conversation: due items in the reply prompt and the reply's report of what
the learner used or got wrong again, and /review's exercises, one at a time in the chat. What
is due and how a grade moves an item is memory/review.py's (FSRS); this module decides what
the prompt says about it and reads what the model answered, leniently (untrusted input)."""

from __future__ import annotations

import difflib
import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.reply_format import strict_object
from memory.clock import Clock, utcnow
from memory.grounding import overlap
from memory.model_output import flat_items, key_name, scalar_text
from memory.recall_terms import plain
from memory.records import LEARNER, Context, CorrectionRecord, LearnerGone
from memory.review import DueItem, Exercise, Reviews, ReviewState
from prompts import as_data

log = logging.getLogger(__name__)

DUE_TAG = "review_due"
EXERCISE_TAG = "review_exercise"
PROMPT_ITEMS = 2  # due items one reply prompt carries, at most
SESSION_ITEMS = 5  # exercises one /review asks, at most
STALE = timedelta(days=1)  # a /review left this long is over
FIELD_CHARS = 120  # an item's original, corrected form and rule, each, in a prompt
SHOWN_CHARS = 200  # the learner's words, each, in an exercise
KINDS = ("fix", "gap")  # a session alternates them, "fix" first
REPORT_VALUES = 10  # labels read from one field of a report, at most
# An answer with at least this share of its words from the exercise is an attempt at it.
ATTEMPT_SHARE = 0.5

# What a prompt with due items adds after its data section — at the very end, so that the
# stable start of the prompt stays the same (providers cache it) — and to the answer's
# schema. The format's example lists are empty: a model that copies it grades nothing.
DUE_RULE = (
    "\nThe review items are old mistakes of theirs, data like the profile: let your question "
    "invite one naturally; never drill or mention review."
)
DUE_REPORT = (
    '\nAdd to your JSON "review": {"used": [], "missed": []}, the labels their latest message '
    'got right ("used") or wrong again ("missed").'
)
_LABELS = {"type": "array", "items": {"type": "integer"}}
DUE_SCHEMA = {"review": strict_object(used=_LABELS, missed=_LABELS)}
# And a prompt whose learner is answering a /review exercise.
EXERCISE_RULE = (
    "\nIf their latest message answers this review exercise (data, like the profile), say in "
    "one or two sentences whether it is right, with the correct form, and ask nothing."
)
EXERCISE_REPORT = (
    '\nAdd to your JSON "exercise": "right", "wrong", or "none" when they chat about '
    "something else."
)
EXERCISE_SCHEMA = {"exercise": {"type": "string", "enum": ["right", "wrong", "none"]}}

REVIEW_OFF = "Review is switched off here: I still correct your mistakes as we chat."
NOTHING_YET = (
    "Nothing to review yet: the mistakes I correct in our chats come back here when they're due."
)
NOTHING_DUE = "Nothing to review right now — your next item is due {when}."
STARTED = (
    "Let's practise {count} of your mistakes from our chats, one at a time. "
    "Answer, or just chat on to stop.\n\n{first}"
)
UNDER_WAY = "We're in the middle of a review — {exercise}"
DONE = "That's the review done: {right} of {asked} right. {next}"

# The report's words for "used correctly" and "got wrong again", as models write them.
_USED = {"used", "correct", "correctly", "right", "good", "ok", "used_correctly", "got_right"}
_MISSED = {"missed", "wrong", "again", "incorrect", "mistake", "mistakes", "error", "failed"}
_MISSED |= {"wrong_again", "got_wrong", "errors"}
_RIGHT = {"right", "correct", "true", "yes", "good"}
_WRONG = {"wrong", "incorrect", "false", "no", "missed"}
_REPORT_KEYS = ("review", "review_report", "reviews", "report", "review_items")
_EXERCISE_KEYS = ("exercise", "exercise_result", "result", "verdict", "grade")
_ENTRY_LABEL_KEYS = ("label", "item", "id", "number", "n")
_ENTRY_VERDICT_KEYS = ("result", "status", "verdict", "outcome", "grade")
_LABEL = re.compile(r"(?:item|label|no\.?|number)?\s*#?\s*(\d{1,3})\s*[.):]?")
_LABELLED = re.compile(r"#?(\d{1,3})[.):]\s")


@dataclass(frozen=True)
class ReviewUse:
    """What review added to one turn's prompt, for the log line and the token benchmark: the
    due items it carried, whether it carried a /review exercise, and the tokens of all it
    added (section, rule, format)."""

    items: int = 0
    tokens: int = 0
    exercise: bool = False


NO_REVIEW = ReviewUse()


@dataclass(frozen=True)
class Grading:
    """What one turn does to the learner's review items, to write after its reply is sent:
    its corrections (each grades its pattern Again), the items its answer reported used
    (Good) or missed (Again), and those its prompt offered."""

    learner_id: int
    message_id: int
    corrections: tuple[CorrectionRecord, ...]
    used: tuple[int, ...] = ()
    missed: tuple[int, ...] = ()
    offered: tuple[int, ...] = ()

    def write(self, reviews: Reviews) -> None:
        """Record it in `reviews` (once per learner message, however often it runs)."""
        reviews.record_turn(
            self.learner_id,
            self.message_id,
            self.corrections,
            used=self.used,
            missed=self.missed,
            offered=self.offered,
        )


@dataclass(frozen=True)
class Asked:
    """What review adds to one reply prompt, at its end: the data section, what to do with
    it and what to add to the answer, and the schema's properties for that; the due items by
    label (1 first), or the /review under way."""

    section: str
    rule: str
    report: str
    schema: dict[str, Any]
    items: tuple[DueItem, ...] = ()
    session: ReviewState | None = None

    @property
    def added(self) -> str:
        """Every text it adds to the prompt, for counting its tokens."""
        return "".join((self.section, self.rule, self.report))


def folded(text: str) -> str:
    """`text` compared loosely: case, accents and punctuation ignored, spaces collapsed."""
    kept = (" " if unicodedata.category(ch)[0] in "PSZ" else ch for ch in plain(text.casefold()))
    return " ".join("".join(kept).split())


def _line(text: str) -> str:
    return as_data(" ".join(text.split()), FIELD_CHARS)


def due_prompt(items: Sequence[DueItem]) -> Asked:
    """The prompt's part for `items` (labels 1, 2 …, never database ids): one compact line
    each."""
    lines = []
    for label, item in enumerate(items, 1):
        rule = f" ({_line(item.rule)})" if item.rule else ""
        lines.append(f"{label}. {_line(item.original)} → {_line(item.corrected)}{rule}")
    section = f"\n\n<{DUE_TAG}>\n" + "\n".join(lines) + f"\n</{DUE_TAG}>"
    return Asked(section, DUE_RULE, DUE_REPORT, DUE_SCHEMA, items=tuple(items))


def exercise_prompt(session: ReviewState, rule: str) -> Asked:
    """The prompt's part while the learner answers `session`'s exercise (of an item named
    `rule`)."""
    exercise = session.exercise
    lines = [f"asked: {_line(exercise.prompt)}", f"expected: {_line(exercise.expected)}"]
    if rule:
        lines.append(f"rule: {_line(rule)}")
    section = f"\n\n<{EXERCISE_TAG}>\n" + "\n".join(lines) + f"\n</{EXERCISE_TAG}>"
    return Asked(section, EXERCISE_RULE, EXERCISE_REPORT, EXERCISE_SCHEMA, session=session)


# -- the report -----------------------------------------------------------------------------


def _kind(word: str) -> bool | None:
    """True for a "used" word, False for a "missed" one, None for neither."""
    name = key_name(word).strip("_")
    if name in _USED:
        return True
    if name in _MISSED:
        return False
    return None


def _label(value: Any, items: Sequence[DueItem]) -> int | None:
    """The label `value` names: 1, "1", "#1", "item 1", "1. yo soy", or an item's corrected
    form or rule written out; None for one not offered."""
    text = scalar_text(value)
    if not text:
        return None
    found = _LABEL.fullmatch(text.casefold()) or _LABELLED.match(text)
    if found:
        label = int(found.group(1))
        return label if 1 <= label <= len(items) else None
    loose = folded(text)
    for label, item in enumerate(items, 1):
        if loose in (folded(item.corrected), folded(item.rule)):
            return label
    return None


def _labels(value: Any, items: Sequence[DueItem]) -> set[int]:
    values = flat_items(value) if isinstance(value, list) else [value]
    return {label for v in values[:REPORT_VALUES] if (label := _label(v, items)) is not None}


def _verdict_of(value: Any) -> bool | None:
    """A "used"/"missed" verdict: a word (see _kind) or a boolean."""
    if isinstance(value, bool):
        return value
    text = scalar_text(value)
    return _kind(text) if text else None


def _entry(entry: Any, items: Sequence[DueItem]) -> tuple[int, bool] | None:
    """One report entry of a list: {"label": 1, "result": "used"} or {"item": 1, "used": true}."""
    if not isinstance(entry, dict):
        return None
    fields = {key_name(k): v for k, v in entry.items()}
    label = next((_label(fields[k], items) for k in _ENTRY_LABEL_KEYS if k in fields), None)
    verdict = next((_verdict_of(fields[k]) for k in _ENTRY_VERDICT_KEYS if k in fields), None)
    if verdict is None:
        verdict = next((v if k else not v for k, v in _flags(fields)), None)
    return (label, verdict) if label is not None and verdict is not None else None


def _flags(fields: dict[str, Any]) -> list[tuple[bool, bool]]:
    """(whether the key means "used", its boolean value) for the boolean fields."""
    return [
        (kind, value)
        for key, value in fields.items()
        if isinstance(value, bool) and (kind := _kind(key)) is not None
    ]


def report(rest: dict[str, Any], items: Sequence[DueItem]) -> tuple[list[int], list[int]]:
    """The item ids the answer reports the learner used correctly and got wrong again, read
    from its other fields `rest` (TutorAnswer.rest): {"review": {"used": [1], "missed": [2]}}
    as asked, and what models write instead — labels as strings ("#1"), a single value, the
    corrected form, {"1": "used"}, a list of {"label", "result"} entries, "used"/"missed"
    beside "reply". Labels not offered are ignored; one reported both ways counts as missed."""
    raw: Any = next((rest[k] for k in _REPORT_KEYS if k in rest), rest)
    if isinstance(raw, list):
        raw = {"entries": raw}
    if not isinstance(raw, dict):
        return [], []
    used: set[int] = set()
    missed: set[int] = set()
    for key, value in raw.items():
        kind = _kind(key)
        if kind is not None:
            (used if kind else missed).update(_labels(value, items))
        elif isinstance(value, list) and key == "entries":
            for entry in flat_items(value)[:REPORT_VALUES]:
                if (found := _entry(entry, items)) is not None:
                    (used if found[1] else missed).add(found[0])
        elif (label := _label(key, items)) is not None:
            verdict = _verdict_of(value)
            if verdict is not None:
                (used if verdict else missed).add(label)
    return [items[n - 1].id for n in sorted(used - missed)], [
        items[n - 1].id for n in sorted(missed)
    ]


# -- /review's exercises --------------------------------------------------------------------


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _gap(original: str, corrected: str) -> tuple[str, str, str] | None:
    """The corrected form with its one changed run of words blanked, the words that fill it,
    and the learner's words there as the hint ("" when they left the words out); None when
    the change is not one short run of the corrected form's words."""
    wrote, right = original.split(), corrected.split()
    matcher = difflib.SequenceMatcher(
        a=[w.casefold() for w in wrote], b=[w.casefold() for w in right], autojunk=False
    )
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if len(changes) != 1:
        return None
    _, i1, i2, j1, j2 = changes[0]
    if j1 == j2 or j2 - j1 > 3 or j2 - j1 == len(right):
        return None
    sentence = " ".join([*right[:j1], "___", *right[j2:]])
    return sentence, " ".join(right[j1:j2]), " ".join(wrote[i1:i2])


def exercise(item: DueItem, kind: str) -> Exercise:
    """/review's exercise of `kind` on `item`: "fix" asks to correct the learner's original;
    "gap" shows the corrected form with the changed words blanked (a "fix" when they cannot
    be: a change of the whole form, or of several places)."""
    gap = _gap(item.original, item.corrected) if kind == "gap" else None
    if gap is None:
        return Exercise(item.id, "fix", f"Fix this: «{_shown(item.original)}»", item.corrected)
    sentence, missing, hint = gap
    hinted = f" ({_shown(hint)})" if hint else ""
    return Exercise(item.id, "gap", f"Fill the gap: «{_shown(sentence)}»{hinted}", missing)


def _accepted(exercise: Exercise) -> set[str]:
    """The answers that are right whatever the model says, folded: the expected form, and for
    a gap the whole sentence with it filled in."""
    accepted = {folded(exercise.expected)}
    if exercise.kind == "gap" and "«" in exercise.prompt:
        sentence = exercise.prompt.split("«", 1)[1].rsplit("»", 1)[0]
        accepted.add(folded(sentence.replace("___", exercise.expected)))
    return accepted - {""}


def _attempted(answer: str, exercise: Exercise) -> bool:
    """Whether `answer` is an attempt at `exercise` by Pam's own comparison: most of its
    words are the exercise's (its sentence, hint or expected form), or nearly so ("bueno"
    for "buen"). A message about something else is not."""
    return overlap(answer, (exercise.prompt, exercise.expected)) >= ATTEMPT_SHARE


def exercise_result(rest: dict[str, Any], answer: str, exercise: Exercise) -> bool | None:
    """Whether the learner's `answer` to `exercise` is right: True when it is the expected
    form (case, accents and punctuation aside), whatever the model says; else the answer's
    "exercise" verdict, read leniently ("Right", true, {"result": "wrong"}); else — no
    verdict, "none", or the format's list copied — Pam's own comparison: an attempt at the
    exercise that is not the expected form is wrong. None: a message about something else."""
    if folded(answer) in _accepted(exercise):
        return True
    verdict = _verdict(rest)
    if verdict is not None:
        return verdict
    return False if _attempted(answer, exercise) else None


def _verdict(rest: dict[str, Any]) -> bool | None:
    """The answer's "exercise" verdict: True (right), False (wrong), None (none, or none that
    can be read)."""
    raw: Any = next((rest[k] for k in _EXERCISE_KEYS if k in rest), None)
    if isinstance(raw, dict):
        fields = {key_name(k): v for k, v in raw.items()}
        raw = next((fields[k] for k in _ENTRY_VERDICT_KEYS if k in fields), None)
    if isinstance(raw, bool):
        return raw
    word = folded(scalar_text(raw) or "")
    if word in _RIGHT:
        return True
    if word in _WRONG:
        return False
    return None


def when(due: datetime, now: datetime) -> str:
    """When `due` comes, in words: "now", "in 20 minutes", "in 5 hours", "tomorrow",
    "on 14 March"."""
    wait = due - now
    if wait <= timedelta(0):
        return "now"
    if wait < timedelta(hours=1):
        minutes = max(1, round(wait.total_seconds() / 60))
        return f"in {minutes} minute{'s' if minutes != 1 else ''}"
    if wait < timedelta(hours=24):
        hours = max(1, round(wait.total_seconds() / 3600))
        return f"in {hours} hour{'s' if hours != 1 else ''}"
    if due.date() == (now + timedelta(days=1)).date():
        return "tomorrow"
    year = f" {due.year}" if due.year != now.year else ""
    return f"on {due.day} {due:%B}{year}"


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
        for nothing. A failing read adds nothing: review never costs the learner a reply."""
        if not self.enabled:
            return None
        try:
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
                return exercise_prompt(session, item.rule if item else "")
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
    ) -> tuple[str, Grading | None]:
        """What this turn's answer does to review: the text Pam adds to the reply (the next
        exercise, or the score; "" for none), and the grading of the learner's items by the
        turn's corrections and the answer's report, for `record` to write once the reply is
        on its way (None: nothing to write). A /review answer is graded here, the session
        moved on with it. A failure other than LearnerGone is logged, and the reply goes out
        without the grade."""
        used: list[int] = []
        missed: list[int] = []
        if asked is not None and asked.items:
            used, missed = report(rest, asked.items)
        offered = tuple(item.id for item in asked.items) if asked is not None else ()
        grading = None
        if corrections or offered:  # else nothing to write: no round trip
            grading = Grading(
                learner_id, message_id, tuple(corrections), tuple(used), tuple(missed), offered
            )
        if asked is None or asked.session is None:
            return "", grading
        try:
            if grading is not None:  # the corrections first: a pattern made again is Again
                grading.write(self.reviews)
            return self._answered(learner_id, message_id, text, rest, asked.session), None
        except LearnerGone:
            raise
        except Exception as exc:
            log.warning("review grading failed learner=%s: %s", learner_id, type(exc).__name__)
        return "", None

    def record(self, grading: Grading) -> None:
        """Write `grading` (once per learner message, however often it runs). It runs after
        the reply is sent, off the reply's path: a failure, or the learner forgotten
        meanwhile, costs only the grade, logged without content."""
        try:
            grading.write(self.reviews)
        except LearnerGone:
            log.info("review grading for learner %s dropped: forgotten", grading.learner_id)
        except Exception as exc:
            log.warning(
                "review grading failed learner=%s: %s", grading.learner_id, type(exc).__name__
            )

    def _answered(
        self, learner_id: int, message_id: int, text: str, rest: dict[str, Any], at: ReviewState
    ) -> str:
        """Grade the learner's answer to `at`'s exercise and move the session on: the next
        exercise, or the score. Not an answer: the session ends and the reply is chat."""
        right = exercise_result(rest, text, at.exercise)
        if right is None:
            self.reviews.end_session(learner_id)
            log.info("review session ended learner=%s: chatting on", learner_id)
            return ""
        self.reviews.grade(learner_id, at.exercise.item_id, right, message_id)
        following = self._following(learner_id, at.queue, KINDS[at.asked % len(KINDS)])
        self.reviews.next_exercise(learner_id, right, following)
        if following is not None:
            return f"({at.asked + 1}/{at.asked + len(at.queue)}) {following.prompt}"
        score = at.right + (1 if right else 0)
        return DONE.format(right=score, asked=at.asked, next=self._next_due(learner_id))

    def _following(self, learner_id: int, queue: Sequence[int], kind: str) -> Exercise | None:
        """The next exercise: on the first item of `queue` still there."""
        for item_id in queue:
            item = self.reviews.item(learner_id, item_id)
            if item is not None:
                return exercise(item, kind)
        return None

    def _next_due(self, learner_id: int) -> str:
        due = self.reviews.next_due(learner_id)
        if due is None:
            return ""
        if due <= self.clock():
            return "There's more to practise: send /review again."
        return f"Your next item is due {when(due, self.clock())}."

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

    def start(self, learner_id: int) -> str:
        """/review: the first exercise of a session over the learner's due items (at most
        SESSION_ITEMS), the one under way, or when the next item is due."""
        if not self.enabled:
            return REVIEW_OFF
        session = self.session(learner_id)
        if session is not None:
            return UNDER_WAY.format(exercise=session.exercise.prompt)
        due = self.reviews.due(learner_id)[:SESSION_ITEMS]
        if not due:
            following = self.reviews.next_due(learner_id)
            if following is None:
                return NOTHING_YET
            return NOTHING_DUE.format(when=when(following, self.clock()))
        first = exercise(due[0], KINDS[0])
        self.reviews.start_session(learner_id, first, [item.id for item in due[1:]])
        return STARTED.format(count=len(due), first=f"(1/{len(due)}) {first.prompt}")
