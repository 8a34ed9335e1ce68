"""Lenient parsing of the tutor's answer into a reply and corrections, and how they are shown."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bot.corrections import (
    CATEGORIES,
    MAX_CORRECTIONS,
    TutorAnswer,
    chat_part,
    parse_answer,
    render,
)
from memory.store import CorrectionRecord

GOOD = {
    "reply": "¡Qué bien, Lena! ¿Y qué hiciste el fin de semana?",
    "corrections": [
        {
            "original": "yo es Lena",
            "corrected": "yo soy Lena",
            "explanation": "'ser' in the first person is 'soy'",
            "category": "conjugation",
        }
    ],
}
EXPECTED_CORRECTION = CorrectionRecord(
    "yo es Lena", "yo soy Lena", "'ser' in the first person is 'soy'", "conjugation"
)


def test_well_formed_json() -> None:
    answer = parse_answer(json.dumps(GOOD, ensure_ascii=False))
    assert answer == TutorAnswer(GOOD["reply"], [EXPECTED_CORRECTION])


def test_json_in_a_code_fence() -> None:
    text = "```json\n" + json.dumps(GOOD, ensure_ascii=False, indent=2) + "\n```"
    assert parse_answer(text) == TutorAnswer(GOOD["reply"], [EXPECTED_CORRECTION])


def test_json_with_chatter_around_it() -> None:
    text = (
        "Sure! Here is my answer:\n```json\n"
        + json.dumps(GOOD, ensure_ascii=False)
        + "\n```\nI hope {this} helps."
    )
    assert parse_answer(text) == TutorAnswer(GOOD["reply"], [EXPECTED_CORRECTION])


def test_chatter_with_braces_before_the_json() -> None:
    text = "Let me think {about it}... " + json.dumps(GOOD, ensure_ascii=False)
    assert parse_answer(text).reply == GOOD["reply"]


def test_truncated_json_salvages_the_reply() -> None:
    text = '{"reply": "Hola Lena, \\"qué\\" tal?", "corrections": [{"original": "yo es'
    answer = parse_answer(text)
    assert answer.reply == 'Hola Lena, "qué" tal?'
    assert answer.corrections == []


def test_json_cut_off_inside_the_reply_keeps_what_arrived() -> None:
    answer = parse_answer('{"reply": "Me encanta la playa y tambi')
    assert answer.reply == "Me encanta la playa y tambi"


def test_plain_text_is_the_whole_reply() -> None:
    text = "  ¡Hola! Me alegra leerte. ¿Qué tal tu día?\n"
    assert parse_answer(text) == TutorAnswer("¡Hola! Me alegra leerte. ¿Qué tal tu día?")


def test_json_without_reply_is_not_lost() -> None:
    text = '{"message": "Hola, ¿qué tal?", "corrections": []}'
    answer = parse_answer(text)
    assert "Hola, ¿qué tal?" in answer.reply
    assert answer.corrections == []


def test_json_with_an_empty_reply_is_not_lost() -> None:
    answer = parse_answer('{"reply": "   ", "corrections": []}')
    assert answer.reply.strip()


def test_reply_of_the_wrong_type_is_not_lost() -> None:
    answer = parse_answer('{"reply": ["Hola", "amiga"]}')
    assert "Hola" in answer.reply


def test_bad_correction_items_are_dropped_and_unknown_categories_become_other() -> None:
    items: list[Any] = [
        "yo es → yo soy",
        42,
        None,
        {"original": "", "corrected": "soy"},
        {"original": "es"},
        {"original": "same", "corrected": "same"},
        {"original": "yo tiene", "corrected": "yo tengo", "category": "Tense"},
        {"original": "el casa", "corrected": "la casa", "category": "GENDER"},
        {"original": "muy bien yo", "corrected": "yo muy bien", "category": "Word Order"},
        {"original": "ola", "corrected": "hola", "category": 7, "explanation": ["x"]},
    ]
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": items}))
    assert answer.corrections == [
        CorrectionRecord("yo tiene", "yo tengo", "", "other"),
        CorrectionRecord("el casa", "la casa", "", "gender"),
        CorrectionRecord("muy bien yo", "yo muy bien", "", "word-order"),
        CorrectionRecord("ola", "hola", "", "other"),
    ]
    assert all(c.category in CATEGORIES for c in answer.corrections)


def test_corrections_that_are_not_a_list_are_ignored() -> None:
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": {"original": "x"}}))
    assert answer == TutorAnswer("Vale")


def test_corrections_are_capped() -> None:
    items = [{"original": f"w{i}", "corrected": f"W{i}"} for i in range(12)]
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": items}))
    assert len(answer.corrections) == MAX_CORRECTIONS
    assert answer.corrections[0].original == "w0"


def test_deeply_nested_brackets_do_not_crash() -> None:
    """A degenerate, looping model answer (small local models do this) must still be a reply."""
    text = "[" * 3000
    answer = parse_answer(text)
    assert answer.reply == text


def test_render_shows_reply_then_one_line_per_correction() -> None:
    answer = TutorAnswer(
        "¡Genial!",
        [
            CorrectionRecord("yo es", "yo soy", "first person of 'ser'", "conjugation"),
            CorrectionRecord("el casa", "la casa", "", "gender"),
        ],
    )
    lines = render(answer).split("\n")
    assert lines[0] == "¡Genial!"
    assert lines[1] == ""
    assert lines[2].endswith("yo es → yo soy — first person of 'ser'")
    assert lines[3].endswith("el casa → la casa")
    assert "—" not in lines[3]
    assert len(lines) == 4


def test_render_without_corrections_is_just_the_reply() -> None:
    assert render(TutorAnswer("Hola")) == "Hola"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["reply", "corrections", "original", "corrected", "category", "x"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@st.composite
def model_answers(draw: st.DrawFn) -> str:
    """Things a model might answer: JSON (maybe cut off), fenced, with chatter, or any text."""
    kind = draw(st.sampled_from(["text", "json", "answer"]))
    if kind == "text":
        return draw(st.text(min_size=1))
    if kind == "json":
        body = json.dumps(draw(json_values), ensure_ascii=draw(st.booleans()))
    else:
        corrections = draw(st.lists(json_values, max_size=3))
        body = json.dumps({"reply": draw(st.text()), "corrections": corrections})
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]
    if draw(st.booleans()):
        body = f"```json\n{body}\n```"
    return draw(st.text(max_size=10)) + body + draw(st.text(max_size=10))


@given(model_answers())
def test_parse_answer_never_raises_and_never_loses_the_reply(text: str) -> None:
    answer = parse_answer(text)
    if text.strip():
        assert answer.reply.strip()
        assert answer.reply == answer.reply.strip()
    assert len(answer.corrections) <= MAX_CORRECTIONS
    assert all(c.category in CATEGORIES and c.original and c.corrected for c in answer.corrections)


@given(st.text(min_size=1))
def test_parse_answer_on_any_text(text: str) -> None:
    answer = parse_answer(text)
    if text.strip():
        assert answer.reply.strip()


# -- what the model sees of Pam's earlier messages ------------------------------------------

line_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), min_size=1
)


@given(
    reply=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1),
    fixes=st.lists(st.tuples(line_text, line_text, st.text()), max_size=MAX_CORRECTIONS),
)
def test_chat_part_is_the_reply_of_any_rendered_answer(
    reply: str, fixes: list[tuple[str, str, str]]
) -> None:
    answer = TutorAnswer(
        reply, [CorrectionRecord(o, c, why.replace("\n", " "), "grammar") for o, c, why in fixes]
    )
    shown = render(answer)
    if "\n\n✏️ " in reply:  # the reply itself looks like a correction block: kept whole
        return
    assert chat_part(shown) == reply


def test_chat_part_keeps_a_message_that_only_mentions_the_pencil() -> None:
    text = "Mira este emoji:\n\n✏️ es un lápiz\n¿Te gusta?"
    assert chat_part(text) == text
    assert chat_part("Hola 👋") == "Hola 👋"
