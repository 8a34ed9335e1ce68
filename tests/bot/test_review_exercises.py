"""/review's gap exercises never pass the learner's wrong form off as a hint: over corrections
in Spanish, French, German, Italian and Portuguese (accents, several words, casing,
punctuation), and over any text at all, a gap's expected answer is the corrected form, the
learner's words appear only labelled as theirs ("you wrote «soy»"), and the clue beside them
never repeats the wrong form nor gives the answer away — in every language Pam's words are in.
The same over corrections as the store keeps them, on real databases."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from bot.i18n import Words, words_for
from bot.reply_format import CATEGORIES
from bot.review.exercises import (
    FIX,
    GAP,
    GAP_CLUE,
    GAP_WROTE,
    GAP_WROTE_CLUE,
    exercise,
    exercise_result,
    gap_of,
)
from bot.review.prompt import folded
from memory.clock import ManualClock
from memory.database.records import LEARNER, CorrectionRecord
from memory.review.reads import DueItem, Exercise
from memory.store.message_store import Store
from tests.conftest import unique_user

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)
# Languages Pam's words are in, for the scaffolding: Latin, Japanese and Arabic script.
NATIVE = [None, "German", "French", "Japanese", "Arabic", "Russian"]
# Words a learner of each language writes, and gets corrected: accents, capitals, clitics.
WORDS = {
    language: words.split()
    for language, words in {
        "es": "yo soy estoy está esta cansado cansada mis mi amigos el la al a niño niña también "
        "¿Dónde está? ¡Qué día! buen bueno Él él años",
        "fr": "je suis j'ai été à a où ou l'école les élèves très français Française c'est "
        "qu'il ça ce allé allée",
        "de": "ich bin habe Straße Mädchen über ueber für dem den der die das Äpfel schön "
        "geht's weiß Grüße",
        "it": "io sono è e perché perche città l'amico gli le più così andato andata c'è "
        "dell'acqua",
        "pt": "eu sou estou é está não nao coração ação você vocês irmã avô avó pôr por",
    }.items()
}
RULES = ["", "ser vs estar", "agreement", "{wrote} vs {right}", "{wrote} → {right}", "{right}"]


def _clue_pattern(template: str, say: Words) -> re.Pattern[str]:
    """`template` said in `say`'s language, as a pattern with one group per placeholder."""
    marked = say(template, sentence="\0sentence\0", wrote="\0wrote\0", clue="\0clue\0")
    pattern = re.escape(marked)
    for name in ("sentence", "wrote", "clue"):
        pattern = pattern.replace(re.escape(f"\0{name}\0"), f"(?P<{name}>.*)")
    return re.compile(pattern, re.DOTALL)


def _parts(made: Exercise, say: Words) -> dict[str, str]:
    """The parts a gap exercise shows, read back from its text by the catalog's templates:
    the quoted sentence, the learner's words (labelled as theirs) and the clue; a part the
    template has none of is ""."""
    for template in (GAP_WROTE_CLUE, GAP_WROTE, GAP_CLUE, GAP):
        found = _clue_pattern(template, say).fullmatch(made.prompt)
        if found:
            return {"sentence": "", "wrote": "", "clue": "", **found.groupdict()}
    raise AssertionError(f"no gap template makes {made.prompt!r}")


def _mentions(text: str, words: str) -> bool:
    needle = folded(words)
    return bool(needle) and f" {needle} " in f" {folded(text)} "


def check_gap(item: DueItem, say: Words) -> Exercise:
    """The property itself, for one item in one language."""
    made = exercise(item, "gap", say)
    gap = gap_of(item.original, item.corrected)
    if gap is None:  # no gap to make: the learner's original, to fix, said as such
        assert made.kind == "fix"
        assert made.prompt == say(FIX, sentence=f"«{' '.join(item.original.split())}»")
        assert made.expected == item.corrected
        return made
    assert made.kind == "gap"
    parts = _parts(made, say)
    # The answer is the corrected form: the gap filled with it is the corrected sentence.
    assert made.expected == gap.missing
    assert parts["sentence"] == f"«{gap.sentence}»"
    filled = parts["sentence"][1:-1].replace("___", made.expected, 1)
    assert filled == " ".join(item.corrected.split())
    assert exercise_result({}, made.expected, made) is True
    assert exercise_result({}, item.corrected, made) is True
    # The learner's words: shown only labelled as theirs, never as the clue.
    assert parts["wrote"] == (f"«{gap.wrote}»" if gap.wrote else "")
    assert not _mentions(parts["clue"], gap.wrote)
    assert not _mentions(parts["clue"], made.expected)
    if gap.wrote and folded(gap.wrote) != folded(gap.missing):  # not an accent-only fix
        assert exercise_result({}, gap.wrote, made) is False  # the mistake again: wrong
    return made


@st.composite
def corrections(draw: st.DrawFn) -> DueItem:
    """A correction as a tutor makes them: one run of 1-3 words of a sentence replaced (or
    left out by the learner), the rest the same but for casing and punctuation here and
    there; a rule that may name the forms themselves, any category."""
    words = WORDS[draw(st.sampled_from(sorted(WORDS)))]
    right = draw(st.lists(st.sampled_from(words), min_size=2, max_size=8))
    start = draw(st.integers(0, len(right) - 1))
    end = draw(st.integers(start + 1, min(start + 3, len(right))))
    wrong = draw(st.lists(st.sampled_from(words), min_size=0, max_size=3))
    kept = [
        draw(st.sampled_from([w, w.capitalize(), w.upper(), f"{w},", f"{w}.", f"¿{w}?"]))
        for w in right
    ]
    original = " ".join([*kept[:start], *wrong, *kept[end:]])
    corrected = " ".join(right)
    assume(original.split() != corrected.split())
    rule = draw(st.sampled_from(RULES)).format(
        wrote=" ".join(wrong), right=" ".join(right[start:end])
    )
    category = draw(st.sampled_from(CATEGORIES))
    return DueItem(1, rule, original, corrected, "", category, NOW, 1, 1, 0)


@settings(max_examples=300, deadline=None)
@given(item=corrections(), native=st.sampled_from(NATIVE))
def test_a_gap_never_shows_the_wrong_form_as_its_hint(item: DueItem, native: str | None) -> None:
    check_gap(item, words_for(native, "review"))


@settings(max_examples=200, deadline=None)
@given(
    original=st.text(min_size=1, max_size=60),
    corrected=st.text(min_size=1, max_size=60),
    rule=st.text(max_size=30),
    native=st.sampled_from(NATIVE),
)
def test_nor_over_any_text(original: str, corrected: str, rule: str, native: str | None) -> None:
    assume("«" not in original + corrected and "»" not in original + corrected)
    assume("___" not in corrected and "\0" not in original + corrected + rule)
    item = DueItem(1, rule, original, corrected, "", "grammar", NOW, 1, 1, 0)
    check_gap(item, words_for(native, "review"))


@pytest.mark.parametrize(
    ("original", "corrected", "rule", "category", "native", "prompt", "expected"),
    [
        ("Yo soy cansado.", "Yo estoy cansado.", "ser vs estar", "conjugation", None,
         "Fill the gap: «Yo ___ cansado.» (you wrote «soy»; ser vs estar)", "estoy"),
        # The rule names both forms: the category instead.
        ("Son mi amigos", "Son mis amigos", "mi vs mis", "grammar", None,
         "Fill the gap: «Son ___ amigos» (you wrote «mi»; grammar)", "mis"),
        ("Son mi amigos", "Son mis amigos", "mi vs mis", "other", None,
         "Fill the gap: «Son ___ amigos» (you wrote «mi»)", "mis"),
        # The rule is English: in German, the category, in German.
        ("Yo soy cansado.", "Yo estoy cansado.", "ser vs estar", "conjugation", "German",
         "Füll die Lücke: «Yo ___ cansado.» (du hast «soy» geschrieben; Verbform)", "estoy"),
        ("Voy cine", "Voy al cine", "", "grammar", "Japanese",
         "空欄を埋めてね：«Voy ___ cine»（文法）", "al"),
        ("J'ai allé à l'école", "Je suis allé à l'école", "", "conjugation", "Arabic",
         "املأ الفراغ: «___ allé à l'école» (كتبتَ «J'ai»؛ صيغة الفعل)", "Je suis"),
    ],
)  # fmt: skip
def test_a_gap_names_the_rule_and_shows_the_learners_words_as_theirs(
    original: str,
    corrected: str,
    rule: str,
    category: str,
    native: str | None,
    prompt: str,
    expected: str,
) -> None:
    item = DueItem(1, rule, original, corrected, "", category, NOW, 1, 1, 0)
    made = exercise(item, "gap", words_for(native, "review"))
    assert (made.prompt, made.expected) == (prompt, expected)


def test_chat_in_the_learners_own_language_is_no_attempt() -> None:
    """The scaffolding is in the learner's language: a message in it shares its words, and
    is still chat, not a wrong answer."""
    item = DueItem(1, "", "Yo soy cansado.", "Yo estoy cansado.", "", "conjugation", NOW, 1, 1, 0)
    made = exercise(item, "gap", words_for("German", "review"))
    assert exercise_result({}, "Du hast die Lücke geschrieben", made) is None


# -- corrections as the store keeps them -----------------------------------------------------

STORED = [
    CorrectionRecord("Yo soy cansado.", "Yo estoy cansado.", "", "conjugation", "ser vs estar"),
    CorrectionRecord("Son mi amigos", "Son mis amigos", "", "grammar", "mi vs mis"),
    CorrectionRecord("J'ai allé au cinéma", "Je suis allé au cinéma", "", "conjugation", "être"),
    CorrectionRecord("Ich habe nach Hause gegangen", "Ich bin nach Hause gegangen", "", "grammar",
                     "sein-Perfekt"),
    CorrectionRecord("Io sono andato a la città", "Io sono andato alla città", "", "grammar",
                     "preposizioni articolate"),
    CorrectionRecord("Eu esta muito feliz", "Eu estou muito feliz.", "", "conjugation",
                     "estar, eu"),
    CorrectionRecord("el niño ESTA aqui", "El niño está aquí", "", "spelling", "accents"),
]  # fmt: skip


@pytest.mark.parametrize("native", NATIVE)
def test_stored_corrections_make_gaps_that_hold_it(engine: Engine, native: str | None) -> None:
    clock = ManualClock(NOW)
    store = Store(engine, clock)
    learner = store.learners.learner(unique_user("gaps")).id
    message = store.conversation.add_message(learner, LEARNER, "hola", 3).id
    store.reviews.record_turn(learner, message, STORED)
    clock.advance(timedelta(days=2))
    due = store.reviews.due(learner)
    assert len(due) == len(STORED)
    made = [check_gap(item, words_for(native, "review")) for item in due]
    assert sum(m.kind == "gap" for m in made) >= 5
