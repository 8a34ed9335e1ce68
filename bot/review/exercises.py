"""/review's exercises, one at a time in the chat: making one of a due item (correct the
learner's original, or fill the gap in the corrected form) and grading the learner's answer to
it — by Pam's own comparison first, by the model's verdict (bot/review/prompt.py) next.

A gap's hint is never the learner's wrong form passed off as a hint (a learner reads
"«___ cansado» (soy)" as the answer): their words there are shown labelled as theirs ("you
wrote «soy»"), beside a clue that names what the mistake is about — the item's rule, or its
category in the learner's language — and a clue that gives away the answer, or repeats the
wrong form, is left out. The lemma or the infinitive would take a model call: Pam's own
words are templated, and review costs no call of its own."""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from bot.i18n import N_, Words, words_for
from bot.review.prompt import exercise_verdict, folded
from memory.grounding import overlap
from memory.review.reads import DueItem, Exercise

SHOWN_CHARS = 200  # the learner's words, each, in an exercise
KINDS = ("fix", "gap")  # a session alternates them, "fix" first
# An answer with at least this share of its words from the exercise is an attempt at it.
ATTEMPT_SHARE = 0.5
OPEN, CLOSE = "«", "»"  # around the exercise's target-language words, in every language
_QUOTED = re.compile(f"{OPEN}([^{OPEN}{CLOSE}]*){CLOSE}")

FIX = N_("Fix this: {sentence}")
GAP = N_("Fill the gap: {sentence}")
GAP_WROTE = N_("Fill the gap: {sentence} (you wrote {wrote})")
GAP_CLUE = N_("Fill the gap: {sentence} ({clue})")
GAP_WROTE_CLUE = N_("Fill the gap: {sentence} (you wrote {wrote}; {clue})")
# What a mistake of each category is about, as a clue (reply_format.CATEGORIES; "other"
# names nothing).
CATEGORY_CLUES = {
    "grammar": N_("grammar"),
    "vocabulary": N_("word choice"),
    "spelling": N_("spelling"),
    "word-order": N_("word order"),
    "gender": N_("gender"),
    "conjugation": N_("verb form"),
    "punctuation": N_("punctuation"),
}
RULE_LOCALE = "en"  # the language the model names rules in (prompts/reply.txt)


@dataclass(frozen=True)
class Gap:
    """A gap exercise's parts: the corrected form with its one changed run of words blanked
    (`sentence`), the words that fill it (`missing`, the answer) and the learner's words there
    (`wrote`; "" when they left the words out)."""

    sentence: str
    missing: str
    wrote: str


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _quote(text: str) -> str:
    return f"{OPEN}{_shown(text)}{CLOSE}"


def _key(word: str) -> str:
    """A word as the gap compares it: case and punctuation aside ("Cansado." is "cansado"),
    accents kept ("esta" is not "está")."""
    return "".join(ch for ch in word.casefold() if not unicodedata.category(ch).startswith("P"))


def gap_of(original: str, corrected: str) -> Gap | None:
    """The gap of `corrected` where it differs from `original`; None when the change is not
    one short run of the corrected form's words (a change of the whole form, of several
    places, or only words left out)."""
    wrote, right = original.split(), corrected.split()
    matcher = difflib.SequenceMatcher(
        a=[_key(w) for w in wrote], b=[_key(w) for w in right], autojunk=False
    )
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if len(changes) != 1:
        return None
    _, i1, i2, j1, j2 = changes[0]
    if j1 == j2 or j2 - j1 > 3 or j2 - j1 == len(right):
        return None
    sentence = " ".join([*right[:j1], "___", *right[j2:]])
    return Gap(sentence, " ".join(right[j1:j2]), " ".join(wrote[i1:i2]))


def _mentions(text: str, words: str) -> bool:
    """Whether `text` holds `words` as whole words (case, accents and punctuation aside)."""
    needle = folded(words)
    return bool(needle) and f" {needle} " in f" {folded(text)} "


def clue(item: DueItem, gap: Gap, say: Words) -> str:
    """What the item's mistake is about, to name beside its gap: the rule's name for a
    learner Pam speaks English to (the model names rules in English), else the category in
    their language; "" when there is none. A rule that would give away the answer or repeat
    the wrong form ("mi vs mis", "bueno → buen") is passed over for the category."""
    named = []
    if say.locale == RULE_LOCALE:
        named.append(" ".join(item.rule.split()))
    if item.category in CATEGORY_CLUES:
        named.append(say(CATEGORY_CLUES[item.category]))
    for text in named:
        given_away = any(_mentions(text, words) for words in (gap.missing, gap.wrote))
        if text and len(text) <= SHOWN_CHARS and not given_away:
            return text
    return ""


def exercise(item: DueItem, kind: str, say: Words | None = None) -> Exercise:
    """/review's exercise of `kind` on `item`, its scaffolding in `say`'s language (English
    when None): "fix" asks to correct the learner's original; "gap" shows the corrected form
    with the changed words blanked (a "fix" when they cannot be: see gap_of). The learner's
    own words stay as they wrote them."""
    say = say or words_for(None, "review")
    gap = gap_of(item.original, item.corrected) if kind == "gap" else None
    if gap is None:
        return Exercise(item.id, "fix", say(FIX, sentence=_quote(item.original)), item.corrected)
    named = clue(item, gap, say)
    parts = {"sentence": _quote(gap.sentence), "wrote": _quote(gap.wrote), "clue": named}
    template = {(True, True): GAP_WROTE_CLUE, (True, False): GAP_WROTE, (False, True): GAP_CLUE}
    text = say(template.get((bool(gap.wrote), bool(named)), GAP), **parts)
    return Exercise(item.id, "gap", text, gap.missing)


def _quoted(exercise: Exercise) -> list[str]:
    """The target-language words the exercise shows: its «…» parts (the sentence to fix or
    fill, and the learner's words), not the scaffolding around them."""
    return _QUOTED.findall(exercise.prompt)


def _accepted(exercise: Exercise) -> set[str]:
    """The answers that are right whatever the model says, folded: the expected form, and for
    a gap the whole sentence with it filled in."""
    accepted = {folded(exercise.expected)}
    if exercise.kind == "gap":
        for sentence in _quoted(exercise):
            if "___" in sentence:
                accepted.add(folded(sentence.replace("___", exercise.expected, 1)))
                break
    return accepted - {""}


def _attempted(answer: str, exercise: Exercise) -> bool:
    """Whether `answer` is an attempt at `exercise` by Pam's own comparison: most of its
    words are the exercise's own (its sentence, the learner's words, the expected form), or
    nearly so ("bueno" for "buen"). A message about something else is not — nor one in the
    language of the scaffolding."""
    source = _quoted(exercise) or [exercise.prompt]
    return overlap(answer, (*source, exercise.expected)) >= ATTEMPT_SHARE


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
