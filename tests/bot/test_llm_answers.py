"""Reading answers (bot.llm.answers) on the recorded shapes of real servers: reasoning is
never part of the answer, content arrays are text, refusals and filters are refusals, and
in-body errors, empty choices and empty content are no answer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.llm.answers import complete_json_object, read_answer, strip_reasoning
from tests import llm_shapes as shapes
from tests.llm_shapes import REASONING, REPLY

# -- reasoning in the content ----------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(f"<think>\n{REASONING}\n</think>\n\n{REPLY}", id="think-block"),
        pytest.param(f"<thinking>{REASONING}</thinking>{REPLY}", id="thinking-block"),
        pytest.param(f"<THINK>{REASONING}</THINK>\n{REPLY}", id="upper-case"),
        pytest.param(f"[THINK]{REASONING}[/THINK]{REPLY}", id="magistral-tokens-as-text"),
        # The chat template put "<think>\n" at the end of the prompt: only the closing tag.
        pytest.param(f"{REASONING}\n</think>\n\n{REPLY}", id="template-opened-it"),
        pytest.param(f"<think>a</think><think>{REASONING}</think>{REPLY}", id="two-blocks"),
    ],
)
def test_the_answer_is_what_follows_the_reasoning(content: str) -> None:
    assert strip_reasoning(content) == REPLY


def test_a_block_cut_off_by_the_cap_leaves_what_came_before_it() -> None:
    assert strip_reasoning(f"<think>\n{REASONING}") == ""
    assert strip_reasoning(f"{REPLY}\n<think>and now") == REPLY


def test_text_without_reasoning_is_kept_as_it_is() -> None:
    assert strip_reasoning(f"  {REPLY}\n") == REPLY
    assert strip_reasoning("I think <b>this</b> is fine") == "I think <b>this</b> is fine"


@given(st.text(), st.text())
def test_no_reasoning_tag_survives_and_the_answer_after_it_does(
    reasoning: str, answer: str
) -> None:
    tagless = answer.replace("<", "").replace("[", "")
    cleaned = strip_reasoning(f"<think>{reasoning}</think>{tagless}")
    assert cleaned == tagless.strip()


# -- the recorded shapes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [pytest.param(body, id=name) for name, body in shapes.answers().items()]
)
def test_every_server_shape_reads_as_the_answer_alone(body: dict[str, object]) -> None:
    reading = read_answer(body)

    assert reading.kind == "answer"
    assert reading.text == REPLY
    assert "chat message" not in reading.text  # the draft inside the reasoning
    assert not reading.truncated


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(shapes.ollama(REPLY, reasoning=REASONING), id="reasoning-field"),
        pytest.param(shapes.deepseek(), id="reasoning_content"),
        pytest.param(shapes.mistral(), id="thinking-part"),
        pytest.param(shapes.openrouter_reasoning(), id="reasoning_details"),
        pytest.param(shapes.groq(f"<think>{REASONING}</think>{REPLY}"), id="think-block"),
    ],
)
def test_reasoning_is_noticed_and_counted_as_written(body: dict[str, object]) -> None:
    reading = read_answer(body)

    assert reading.reasoned
    assert REASONING in reading.spent_text  # what output is counted from when usage is missing
    assert REPLY in reading.spent_text


def test_reasoning_tokens_in_the_usage_are_noticed() -> None:
    reading = read_answer(shapes.openai_reasoning())

    assert reading.reasoned
    assert reading.output_tokens == 1236


def test_a_plain_answer_shows_no_reasoning() -> None:
    reading = read_answer(shapes.openai())

    assert not reading.reasoned
    assert reading.spent_text == REPLY
    assert (reading.model, reading.input_tokens, reading.output_tokens) == (
        "gpt-4o-2024-08-06",
        1117,
        46,
    )


def test_a_refusal_is_refused_with_its_kind_not_its_words() -> None:
    reading = read_answer(shapes.OPENAI_REFUSAL)

    assert (reading.kind, reading.reason) == ("refused", "refusal")
    assert reading.text == ""
    assert reading.input_tokens == 1117


def test_a_filtered_answer_is_refused_naming_the_category() -> None:
    reading = read_answer(shapes.AZURE_FILTERED_ANSWER)

    assert (reading.kind, reading.reason) == ("refused", "content_filter (violence)")
    assert (reading.input_tokens, reading.output_tokens) == (812, 17)


def test_a_cut_off_answer_is_an_answer_marked_truncated() -> None:
    body = shapes.finished(shapes.openai('{"reply": "Hola, ¿qué tal tu'), "length")

    reading = read_answer(body)

    assert (reading.kind, reading.truncated) == ("answer", True)
    assert reading.text == '{"reply": "Hola, ¿qué tal tu'


def test_half_an_emoji_in_the_content_is_replaced() -> None:
    # The body's JSON may escape a lone surrogate ("\\ud83d"): decoded, it cannot be stored.
    reading = read_answer(shapes.openai("¡Genial! \ud83d\udc4b y \ud83d"))

    assert reading.text == "¡Genial! 👋 y \ufffd"
    mistral = shapes.mistral()
    mistral["choices"][0]["message"]["content"][-1]["text"] = "Hola \udc4b"
    assert read_answer(mistral).text == "Hola \ufffd"


def test_reasoning_a_template_opened_is_noticed() -> None:
    reading = read_answer(shapes.llama_cpp(f"{REASONING}\n</think>\n\n{REPLY}"))

    assert (reading.text, reading.template_opened) == (REPLY, True)
    assert not read_answer(shapes.groq(f"<think>{REASONING}</think>{REPLY}")).template_opened


def test_template_opened_reasoning_cut_off_before_its_close_is_no_answer() -> None:
    cut = shapes.llama_cpp(REASONING, finish="length")

    reading = read_answer(cut, template_opens=True)

    assert (reading.kind, reading.text, reading.truncated) == ("answer", "", True)
    assert reading.reasoned
    assert REASONING in reading.spent_text
    # Without knowing the template opens it, no tag marks the text as reasoning.
    assert read_answer(cut).text == REASONING


def test_reasoning_cut_off_by_the_cap_is_an_empty_truncated_answer() -> None:
    reading = read_answer(shapes.llama_cpp(f"<think>\n{REASONING}", finish="length"))

    assert (reading.kind, reading.text, reading.truncated) == ("answer", "", True)
    assert reading.reasoned


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(
            shapes.OPENROUTER_ERROR_200,
            "an error in the body: 502 Your chosen model is down or we received an invalid "
            "response from it",
            id="openrouter-error-200",
        ),
        pytest.param({**shapes.openai(), "choices": None}, "no choices in the answer", id="null"),
        pytest.param({**shapes.openai(), "choices": []}, "no choices in the answer", id="empty"),
        pytest.param({"choices": "none"}, "no choices in the answer", id="not-a-list"),
        pytest.param(shapes.openai(""), "no text in the answer", id="empty-content"),
        pytest.param(shapes.openai(None), "no text in the answer", id="null-content"),
        pytest.param(shapes.openai(" \n "), "no text in the answer", id="blank-content"),
        pytest.param(
            shapes.ollama(f"<think>{REASONING}</think>"),
            "no text in the answer",
            id="only-reasoning",
        ),
        pytest.param(
            {"choices": [{"message": {"content": 42}}]}, "the content is not text", id="number"
        ),
        pytest.param([1, 2], "the body is not a JSON object", id="a-list"),
    ],
)
def test_non_answers_are_unusable_with_a_reason(body: object, reason: str) -> None:
    reading = read_answer(body)

    assert (reading.kind, reading.reason) == ("unusable", reason)
    assert reading.text == ""


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        pytest.param((812, 17), (812, 17), id="counts"),
        pytest.param((0, 0), (None, None), id="all-zero-is-not-trusted"),
        pytest.param((812, 0), (812, 0), id="zero-output-is-a-count"),
        pytest.param((0, 17), (None, 17), id="zero-input-is-not"),
        pytest.param(("812", 17.0), (None, None), id="not-integers"),
        pytest.param((True, 17), (None, 17), id="a-bool-is-no-count"),
        pytest.param((-3, 17), (None, 17), id="negative"),
    ],
)
def test_usage_is_taken_only_where_it_is_a_count(
    usage: tuple[object, object], expected: tuple[int | None, int | None]
) -> None:
    reading = read_answer(shapes.with_usage(shapes.openai(), *usage))

    assert (reading.input_tokens, reading.output_tokens) == expected


def test_missing_usage_is_none() -> None:
    body = shapes.openai()
    del body["usage"]

    assert (read_answer(body).input_tokens, read_answer(body).output_tokens) == (None, None)


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        (REPLY, True),
        (f"```json\n{REPLY}\n```", True),
        (f"Here it is: {REPLY}", True),
        ('{"reply": "Hola, ¿qué tal tu', False),
        ('{"reply": "Hola"', False),
        ("Hola, ¿qué tal?", False),
        ("[1, 2]", False),
    ],
)
def test_a_whole_json_object_is_told_from_a_cut_off_one(text: str, whole: bool) -> None:
    assert complete_json_object(text) is whole
