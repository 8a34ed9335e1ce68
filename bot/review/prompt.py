"""Review in the reply prompt: the due items or the /review exercise it carries as data, what
it asks the model to report about them, and the reading of that report — leniently, for a
model's answer is untrusted input. bot/review/reviewing.py decides when the prompt carries them and
what a report does to the learner's items."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.reply_format import strict_object
from memory.model_output import flat_items, key_name, scalar_text
from memory.recall_terms import plain
from memory.review.reads import DueItem, ReviewState
from prompts import as_data

DUE_TAG = "review_due"
EXERCISE_TAG = "review_exercise"
FIELD_CHARS = 120  # an item's original, corrected form and rule, each, in a prompt
REPORT_VALUES = 10  # labels read from one field of a report, at most

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
class Asked:
    """What review adds to one reply prompt, at its end: the data section, what to do with
    it and what to add to the answer, and the schema's properties for that; the due items by
    label (1 first), or the /review under way (and the learner's `native` language)."""

    section: str
    rule: str
    report: str
    schema: dict[str, Any]
    items: tuple[DueItem, ...] = ()
    session: ReviewState | None = None
    # The language Pam's own words about the /review are in (bot.i18n.native_of's).
    native: str | None = None

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


def exercise_verdict(rest: dict[str, Any]) -> bool | None:
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
