"""Issue 32, item 2: every placeholder and enum list the prompts show in their formats, copied
into an answer as a weak model does, is recognised and dropped — read from the prompt files
themselves, so a format changed there is checked here. And the corrections and the /review
answer checked against the learner's words (items 1 and 6), at Pam's own interface."""

from __future__ import annotations

import json
import logging
import re

import pytest

from bot.corrections import NoReply, checked, grounded, parse_answer
from bot.reply_format import CATEGORY_LIST
from bot.review.exercises import exercise_result
from bot.review.prompt import EXERCISE_REPORT
from memory.database.records import CorrectionRecord, LearnerInfo
from memory.jobs.profile_answer import InvalidProfile, parse_profile_answer
from memory.jobs.profile_facts import format_pieces, is_placeholder, settled
from memory.jobs.profile_facts import grounded as grounded_facts
from memory.review.reads import Exercise
from prompts import template

LENA = LearnerInfo(1, "lena", "Lena", "Spanish", "English", "A2")


def reply_format() -> dict[str, object]:
    """The JSON object reply.txt shows as its format."""
    line = next(x for x in template("reply").template.splitlines() if x.startswith('{"reply"'))
    return json.loads(line)


def test_the_reply_formats_example_is_no_answer() -> None:
    with pytest.raises(NoReply):
        parse_answer(json.dumps(reply_format()))


def test_each_placeholder_of_a_correction_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    copied = reply_format()
    copied["reply"] = "¡Qué bien! ¿Y tu perro?"
    [item] = copied["corrections"]  # type: ignore[misc]
    item.update(original="yo es", corrected="yo soy")

    answer = parse_answer(json.dumps(copied))
    with caplog.at_level(logging.INFO, logger="memory.grounding"):
        kept = checked(answer, "Hola, yo es Lena", 3)

    [correction] = kept.corrections
    assert correction.category == "other"  # not "word-order", found first in the list
    assert (correction.rule, correction.explanation) == ("", "")
    assert sorted(caplog.messages) == [
        f"dropped {kind} reason=placeholder learner=3"
        for kind in ("category", "explanation", "rule")
    ]


@pytest.mark.parametrize(
    "copied",
    [CATEGORY_LIST, "grammar|vocabulary|…", "Grammar, Vocabulary or Spelling", "grammar/spelling"],
)
def test_the_category_list_copied_is_no_category(copied: str) -> None:
    item = {"original": "yo es", "corrected": "yo soy", "category": copied}
    answer = parse_answer(json.dumps({"reply": "¡Hola!", "corrections": [item]}))
    assert answer.corrections[0].category == "other"


@pytest.mark.parametrize("named", ["Verb conjugation", "grammar (verb conjugation)"])
def test_a_category_named_in_other_words_is_still_read(named: str) -> None:
    item = {"original": "yo es", "corrected": "yo soy", "category": named}
    answer = parse_answer(json.dumps({"reply": "¡Hola!", "corrections": [item]}))
    assert answer.corrections[0].category == "conjugation"


def profile_descriptions() -> dict[str, str]:
    """Each field of profile.txt's format and the description it shows for it."""
    found = re.findall(r'^- "(\w+)"(?:, "(\w+)")*: (.+)$', template("profile").template, re.M)
    return {name: text for name, _, text in found}


@pytest.mark.parametrize("field", ["who", "style", "focus", "interests", "misc"])
def test_every_profile_description_copied_is_a_placeholder(field: str) -> None:
    description = profile_descriptions()[field]
    assert is_placeholder(description)
    assert is_placeholder(description.split(": ", 1)[1])
    assert format_pieces()  # read from the prompt file


@pytest.mark.parametrize("fine", ["casual", "Lena, a nurse", "jazz", "wants to travel"])
def test_real_values_are_no_placeholder(fine: str) -> None:
    assert not is_placeholder(fine)


def test_the_level_list_copied_is_no_level() -> None:
    with pytest.raises(InvalidProfile):
        parse_profile_answer('{"level": "A1|A2|B1|B2|C1|C2"}')
    assert parse_profile_answer('{"level": "B1 (intermediate)"}') == {"level": "B1"}


def test_the_exercise_report_copied_leaves_grading_to_pam() -> None:
    fix = Exercise(1, "fix", "Fix this: «un bueno amigo»", "un buen amigo")
    copied = {"exercise": "right|wrong|none"}
    assert "right" in EXERCISE_REPORT
    assert exercise_result(copied, "un bueno amigos", fix) is False
    assert exercise_result(copied, "Un buen amigo!", fix) is True
    assert exercise_result({}, "Hoy voy a la playa con mis primos", fix) is None
    assert exercise_result({"exercise": "none"}, "un bueno amigo", fix) is False


def test_a_gap_answered_with_the_mistake_again_is_wrong_not_chat() -> None:
    gap = Exercise(1, "gap", "Fill the gap: «Tengo un ___ amigo» (bueno)", "buen")
    assert exercise_result({}, "bueno", gap) is False
    assert exercise_result({}, "buen", gap) is True


# -- corrections grounded in the latest message (item 1) -------------------------------------


def correction(original: str, corrected: str) -> CorrectionRecord:
    return CorrectionRecord(original, corrected, "", "grammar")


@pytest.mark.parametrize(
    ("original", "corrected", "kept"),
    [
        ("yo es", "yo soy", True),
        ("YO  ES", "yo soy", True),  # case and spacing aside
        ("tenia", "tenía", True),  # the learner wrote "tenía" without the accent: found
        ("ayer yo tenía un perro negro", "ayer yo tenía un perro negro.", False),  # punctuation
        ("ruidosa", "ruidoso", False),  # never written
        ("bueno", "buen", False),  # "buen" is what they wrote: already right
        ("yo es contenta", "yo estoy contento", True),  # their words, quoted one letter off
        ("un perros negro", "un perro negro", False),  # near their words, which are right
    ],
)
def test_a_correction_must_quote_the_latest_message(
    original: str, corrected: str, kept: bool
) -> None:
    message = "Ayer yo es contento porque yo tenia un perro negro. Es un buen día."
    assert bool(grounded([correction(original, corrected)], message, None)) is kept


# -- the profile: settings win, facts need the learner's words (item 3) -------------------------


def test_a_learned_language_or_level_against_the_settings_is_dropped() -> None:
    new = {"native_language": "Spanish", "target_language": "English", "level": "B2"}
    assert grounded_facts(new, {}, ["Hola"], LENA) == {}
    # Agreeing with the settings, kept — and never shown beside them.
    agreeing = {"target_language": "Spanish", "level": "A2", "who": "Lena"}
    assert grounded_facts(agreeing, {}, ["Soy Lena"], LENA) == agreeing
    assert settled(agreeing, LENA) == {"who": "Lena"}


def test_facts_without_the_learners_words_are_dropped() -> None:
    said = ["Me llamo Lena, soy enfermera en Berlín.", "Me encanta el jazz."]
    new = {
        "who": "Lena, a nurse in Berlin, mother of two",
        "interests": ["jazz", "novels"],
        "misc": ["trip to London"],
        "style": "casual, short messages",  # the model's reading, not a quote: kept
    }
    old = {"misc": ["sister in Madrid"]}
    kept = grounded_facts({**new, "misc": ["sister in Madrid", "trip to London"]}, old, said, LENA)
    assert kept == {
        "who": "Lena, a nurse in Berlin",
        "interests": ["jazz"],
        "misc": ["sister in Madrid"],  # learned before: supported by the old profile
        "style": "casual, short messages",
    }
