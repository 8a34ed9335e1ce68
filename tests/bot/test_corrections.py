"""Lenient parsing of the tutor's answer into a reply and corrections, and how they are shown."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.corrections import (
    EXPLANATION_CHARS,
    MAX_CORRECTIONS,
    QUOTE_CHARS,
    NoReply,
    TutorAnswer,
    chat_part,
    grounded,
    parse_answer,
    render,
)
from bot.reply_format import CATEGORIES, REPLY_SCHEMA
from memory.database.records import CorrectionRecord
from memory.model_output import looks_like_json, well_formed

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


@pytest.mark.parametrize("key", ["message", "response", "Answer", "text"])
def test_the_reply_under_another_key_is_read(key: str) -> None:
    text = json.dumps({key: "Hola, ¿qué tal?", "corrections": []}, ensure_ascii=False)
    assert parse_answer(text) == TutorAnswer("Hola, ¿qué tal?")


@pytest.mark.parametrize(
    "text",
    [
        '{"reply": "   ", "corrections": []}',
        '{"reply": null, "corrections": []}',
        '{"reply": {"mood": "happy", "emoji": true}}',
        '{"corrections": [{"original": "yo es", "corrected": "yo soy"}]}',
        '{"reply": "chat message", "corrections": []}',  # the format's example, echoed
        '[{"original": "yo es", "corrected": "yo soy"}]',
        "",
        "   ",
    ],
)
def test_json_without_a_chat_message_is_no_reply_never_raw_json(text: str) -> None:
    with pytest.raises(NoReply):
        parse_answer(text)


def test_half_an_emoji_escaped_in_the_answer_can_be_stored_and_sent() -> None:
    # Small models split an emoji's surrogate pair; JSON decodes each half to a lone one.
    text = (
        '{"reply": "¡Genial! \\ud83d\\udc4b y \\ud83d", "corrections": [{"original": '
        '"yo es\\udc4b", "corrected": "yo soy", "explanation": "ser", "category": "grammar"}]}'
    )

    answer = parse_answer(text)

    assert answer.reply == "¡Genial! 👋 y \ufffd"
    assert (answer.corrections[0].original, answer.corrections[0].corrected) == (
        "yo es\ufffd",
        "yo soy",
    )
    assert parse_answer("Hola \ud83d").reply == "Hola \ufffd"  # prose too


def test_reply_of_the_wrong_type_is_read() -> None:
    assert parse_answer('{"reply": ["Hola", "amiga"]}') == TutorAnswer("Hola amiga")
    assert parse_answer('{"reply": 42}') == TutorAnswer("42")


def test_a_wrapped_answer_is_opened() -> None:
    text = json.dumps({"answer": GOOD}, ensure_ascii=False)
    assert parse_answer(text) == TutorAnswer(GOOD["reply"], [EXPECTED_CORRECTION])


def test_an_answer_encoded_twice_is_read_once() -> None:
    inner = json.dumps(GOOD, ensure_ascii=False)
    text = json.dumps({"reply": inner, "corrections": []}, ensure_ascii=False)
    assert parse_answer(text) == TutorAnswer(GOOD["reply"], [EXPECTED_CORRECTION])
    # A reply that only starts like JSON is still the reply.
    assert parse_answer('{"reply": "[risas] ¡Qué bueno!"}') == TutorAnswer("[risas] ¡Qué bueno!")


def test_a_raw_newline_inside_the_reply_and_a_trailing_comma_are_read() -> None:
    text = '{"reply": "¡Hola!\n¿Qué tal?", "corrections": [],}'
    assert parse_answer(text) == TutorAnswer("¡Hola!\n¿Qué tal?")


# -- the final answer, not a draft before it -------------------------------------------

DRAFT = '{"reply": "chat message", "corrections": []}'


def test_the_last_object_is_the_answer_not_a_draft_in_leftover_reasoning() -> None:
    # A reasoning model served without a parser, its think tags already removed: it drafts
    # the format, then answers.
    text = (
        "Okay, the format is "
        + DRAFT
        + ". The learner wrote 'yo es Lena', so I correct it.\n"
        + json.dumps(GOOD, ensure_ascii=False)
    )
    assert parse_answer(text) == TutorAnswer(GOOD["reply"], [EXPECTED_CORRECTION])


def test_a_real_draft_before_a_cut_off_answer_is_not_the_reply() -> None:
    draft = json.dumps({"reply": "Hola Lena (draft)", "corrections": []})
    text = f"Let me draft: {draft}\nFinal: " + '{"reply": "¡Hola, Lena! ¿Qué tal el tra'
    assert parse_answer(text) == TutorAnswer("¡Hola, Lena! ¿Qué tal el tra")


def test_a_cut_off_answer_keeps_the_corrections_that_arrived_whole() -> None:
    whole = json.dumps(GOOD, ensure_ascii=False)
    text = whole[: whole.rindex("]")] + ', {"original": "muy bien yo", "correc'
    assert parse_answer(text) == TutorAnswer(GOOD["reply"], [EXPECTED_CORRECTION])


def test_a_cut_off_answer_with_reply_after_the_corrections() -> None:
    text = '{"corrections": [{"original": "yo es", "corrected": "yo soy"}], "reply": "Qué bi'
    assert parse_answer(text) == TutorAnswer(
        "Qué bi", [CorrectionRecord("yo es", "yo soy", "", "other")]
    )


def test_prose_with_braces_is_still_the_reply() -> None:
    text = "¡Hola! Escribe {tu nombre} aquí, o {} si no quieres. ¿Vale?"
    assert parse_answer(text) == TutorAnswer(text)


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
        # A list where the explanation's string belongs is read as its text.
        CorrectionRecord("ola", "hola", "x", "other"),
    ]
    assert all(c.category in CATEGORIES for c in answer.corrections)


def test_a_correction_that_cannot_be_read_is_logged_by_reason_never_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    items = ["SECRET-A", {"original": "SECRET-B"}, {"corrected": "SECRET-C"}, 7]
    with caplog.at_level(logging.INFO):
        answer = parse_answer(json.dumps({"reply": "Vale", "corrections": items}))
    assert answer == TutorAnswer("Vale")
    lines = [r.getMessage() for r in caplog.records]
    assert "reply correction 1 dropped: not an object" in lines
    assert "reply correction 2 dropped: no corrected form" in lines
    assert "reply correction 3 dropped: no original" in lines
    assert "reply correction 4 dropped: not an object" in lines
    assert "SECRET" not in caplog.text


def test_one_correction_given_as_an_object_is_a_list_of_one() -> None:
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": {"original": "x"}}))
    assert answer == TutorAnswer("Vale")  # no corrected form: dropped
    item = GOOD["corrections"][0]
    text = json.dumps({"reply": "Vale", "corrections": item}, ensure_ascii=False)
    assert parse_answer(text) == TutorAnswer("Vale", [EXPECTED_CORRECTION])


@pytest.mark.parametrize("raw", [None, "none", "No mistakes!", 0, True, []])
def test_corrections_that_are_no_list_or_object_are_none(raw: object) -> None:
    assert parse_answer(json.dumps({"reply": "Vale", "corrections": raw})) == TutorAnswer("Vale")


@pytest.mark.parametrize(
    ("written", "category"),
    [
        ("Verb conjugation", "conjugation"),
        ("GRAMMAR", "grammar"),
        ("word_order", "word-order"),
        ("Word-Order", "word-order"),
        ("Spelling mistake", "spelling"),
        ("accents", "spelling"),
        ("Vocabulary / word choice", "vocabulary"),
        ("Punctuation", "punctuation"),
        ("gender agreement", "gender"),
        ("subject-verb agreement", "conjugation"),
        ("article", "grammar"),
        ("style", "other"),
        ("", "other"),
        (None, "other"),
        (["grammar"], "grammar"),
    ],
)
def test_category_variants_are_read(written: object, category: str) -> None:
    item = {"original": "yo es", "corrected": "yo soy", "category": written}
    (correction,) = parse_answer(json.dumps({"reply": "Vale", "corrections": [item]})).corrections
    assert correction.category == category


def test_other_field_names_numbers_and_missing_fields() -> None:
    items = [
        {"mistake": "yo es", "correction": "yo soy", "why": "first person"},
        {"original": 1990, "corrected": "mil novecientos noventa"},
    ]
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": items}))
    assert answer.corrections == [
        CorrectionRecord("yo es", "yo soy", "first person", "other"),
        CorrectionRecord("1990", "mil novecientos noventa", "", "other"),
    ]


def test_over_long_fields_are_capped() -> None:
    item = {"original": "o" * 900, "corrected": "c" * 900, "explanation": "e" * 900}
    (correction,) = parse_answer(json.dumps({"reply": "Vale", "corrections": [item]})).corrections
    assert correction == CorrectionRecord(
        "o" * QUOTE_CHARS, "c" * QUOTE_CHARS, "e" * EXPLANATION_CHARS, "other"
    )


def test_repeated_corrections_and_nested_lists() -> None:
    fix = {"original": "yo es", "corrected": "yo soy"}
    other = {"original": "el casa", "corrected": "la casa", "category": "gender"}
    shout = {"original": "YO ES", "corrected": "YO SOY"}
    items = [[fix], [[other, shout]], fix]
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": items}))
    assert answer.corrections == [
        CorrectionRecord("yo es", "yo soy", "", "other"),
        CorrectionRecord("el casa", "la casa", "", "gender"),
    ]


def test_the_reply_schema_is_strict_and_complete() -> None:
    """OpenAI's strict mode: every property required, no others, at every object level."""
    assert REPLY_SCHEMA["name"] == "tutor_reply"
    assert REPLY_SCHEMA["strict"] is True
    schema = REPLY_SCHEMA["schema"]
    item = schema["properties"]["corrections"]["items"]
    for level in (schema, item):
        assert level["type"] == "object"
        assert level["required"] == list(level["properties"])
        assert level["additionalProperties"] is False
    assert item["properties"]["category"]["enum"] == list(CATEGORIES)
    assert parse_answer(json.dumps(GOOD, ensure_ascii=False)).corrections  # GOOD fits it


def test_corrections_are_capped() -> None:
    items = [{"original": f"w{i}", "corrected": f"W{i}"} for i in range(12)]
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": items}))
    assert len(answer.corrections) == MAX_CORRECTIONS
    assert answer.corrections[0].original == "w0"


@pytest.mark.parametrize("text", ["[" * 3000, "{" * 3000, '{"reply": ' * 3000])
def test_deeply_nested_brackets_do_not_crash(text: str) -> None:
    """A degenerate, looping model answer (small local models do this) is no reply, never a
    crash, and never sent to the learner."""
    with pytest.raises(NoReply):
        parse_answer(text)


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


def _reply_or_none(text: str) -> TutorAnswer | None:
    """The answer read from `text`, or None where parse_answer says there is no reply —
    only ever for an empty answer (NULs aside) or one that holds JSON: prose is always the
    reply."""
    try:
        answer = parse_answer(text)
    except NoReply:
        assert not well_formed(text).strip() or "{" in text or "[" in text
        return None
    assert answer.reply.strip()
    assert answer.reply == answer.reply.strip()
    assert answer.reply == well_formed(answer.reply)  # it can be stored and sent
    return answer


@given(model_answers())
def test_parse_answer_reads_a_reply_or_says_there_is_none(text: str) -> None:
    answer = _reply_or_none(text)
    if answer is not None:
        assert len(answer.corrections) <= MAX_CORRECTIONS
        assert all(
            c.category in CATEGORIES and c.original and c.corrected for c in answer.corrections
        )


@given(st.text(min_size=1))
def test_parse_answer_on_any_text(text: str) -> None:
    answer = _reply_or_none(text)
    if answer is not None and not looks_like_json(text) and "{" not in text:
        assert answer.reply == well_formed(text).strip()  # prose is the reply as it is


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


def test_a_missing_accent_corrected_from_a_near_quote_is_kept() -> None:
    # The model quotes the original a letter off and adds the accent the learner left out:
    # the corrected form is not in the message as written, so the correction stands.
    message = "Yo esta muy cansada hoy"
    correction = CorrectionRecord(
        "Yo esta muy cansado hoy", "Yo está muy cansada hoy", "", "spelling"
    )
    assert grounded([correction], message, None) == [correction]
