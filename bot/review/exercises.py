"""/review's exercises, one at a time in the chat: making one of a due item (correct the
learner's original, or fill the gap in the corrected form) and grading the learner's answer to
it — by Pam's own comparison first, by the model's verdict (bot/review/prompt.py) next."""

from __future__ import annotations

import difflib
from typing import Any

from bot.review.prompt import exercise_verdict, folded
from memory.grounding import overlap
from memory.review.reads import DueItem, Exercise

SHOWN_CHARS = 200  # the learner's words, each, in an exercise
KINDS = ("fix", "gap")  # a session alternates them, "fix" first
# An answer with at least this share of its words from the exercise is an attempt at it.
ATTEMPT_SHARE = 0.5


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
    verdict = exercise_verdict(rest)
    if verdict is not None:
        return verdict
    return False if _attempted(answer, exercise) else None
