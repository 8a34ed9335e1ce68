"""What each model is sent (bot.llm.requests): reasoning models by name, the parameters a
400 teaches a model refuses, the structured-output modes and the room left for reasoning."""

from __future__ import annotations

import threading

import pytest

from bot.llm.errors import read_error
from bot.llm.requests import REASONING_ROOM, THINKING_ROOM, ModelQuirks, is_reasoning_model
from loopback.llm_shapes import OPENAI_REFUSES_MAX_TOKENS, openai_refuses_temperature
from tests import error_shapes as errors
from tests import llm_shapes as shapes

SCHEMA = {"name": "reply", "schema": {"type": "object"}}


def quirks(structured: str = "auto") -> ModelQuirks:
    return ModelQuirks(structured, {"reply": "low", "summary": "low", "profile": "low"})  # type: ignore[arg-type]


def learn(
    q: ModelQuirks, model: str, sent: dict[str, object], error: object, status: int = 400
) -> str | None:
    """Teach `q` what error body `error`, answered with `status`, says about `sent`."""
    return q.learn(model, sent, read_error(status, error))


@pytest.mark.parametrize(
    "model",
    [
        "o1",
        "o1-mini",
        "o3-mini-2025-01-31",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
        "gpt-5.1",
        "gpt-5-nano-2025-08-07",
        "openai/o3-mini",
        "openai/gpt-5",
        "O3",
    ],
)
def test_openai_reasoning_models_are_known_by_name(model: str) -> None:
    assert is_reasoning_model(model)


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o-mini",
        "gpt-4.1-mini",
        "llama3.1",
        "qwen3:8b",
        "deepseek-r1:8b",
        "ollama",
        "openai/gpt-4o",
        "mistral-small",
        "gpt-oss-20b",
        "phi4-mini",
    ],
)
def test_other_models_are_not(model: str) -> None:
    assert not is_reasoning_model(model)


def test_an_ordinary_model_gets_max_tokens_and_a_temperature_per_purpose() -> None:
    q = quirks()

    assert q.params("gpt-4o-mini", "reply", 700, None) == {"max_tokens": 700, "temperature": 0.7}
    assert q.params("gpt-4o-mini", "summary", 120, None) == {"max_tokens": 120, "temperature": 0.2}


def test_a_reasoning_model_gets_max_completion_tokens_with_room_and_no_temperature() -> None:
    params = quirks().params("o4-mini", "reply", 700, None)

    assert params == {
        "reasoning_effort": "low",
        "max_completion_tokens": 700 + REASONING_ROOM["low"],
    }


def test_effort_off_sends_none_and_leaves_the_default_efforts_room() -> None:
    q = ModelQuirks("auto", {"reply": "off", "summary": "high", "profile": "high"})

    assert q.params("gpt-5", "reply", 700, None) == {
        "max_completion_tokens": 700 + REASONING_ROOM["medium"]
    }
    assert q.params("gpt-5", "profile", 300, None)["reasoning_effort"] == "high"


def test_twice_the_room_doubles_the_cap() -> None:
    assert quirks().params("gpt-4o-mini", "reply", 700, None, room=2)["max_tokens"] == 1400


def test_a_refused_max_tokens_is_learned_once_and_sent_under_its_other_name() -> None:
    q = quirks()
    sent = q.params("my-azure-deployment", "reply", 700, None)

    learned = learn(q, "my-azure-deployment", sent, OPENAI_REFUSES_MAX_TOKENS)

    assert learned == "refuses max_tokens; sending max_completion_tokens"
    params = q.params("my-azure-deployment", "reply", 700, None)
    assert "max_tokens" not in params
    # It behaves like an o-series deployment: reasoning room, and the effort is asked.
    assert params["max_completion_tokens"] == 700 + REASONING_ROOM["low"]
    assert params["reasoning_effort"] == "low"
    assert q.params("gpt-4o-mini", "reply", 700, None)["max_tokens"] == 700  # other models


def test_a_refused_temperature_is_left_out_from_then_on() -> None:
    q = quirks()
    sent = q.params("custom", "summary", 120, None)

    assert learn(q, "custom", sent, openai_refuses_temperature(0.2)) == (
        "refuses temperature; leaving it out"
    )
    assert q.params("custom", "reply", 700, None) == {"max_tokens": 700}


def test_a_refused_reasoning_effort_is_left_out() -> None:
    q = quirks()
    sent = q.params("o1-mini", "reply", 700, None)
    error = {
        "error": {
            "message": "Unsupported parameter: 'reasoning_effort' is not supported with this "
            "model.",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_parameter",
        }
    }

    assert learn(q, "o1-mini", sent, error) == "refuses reasoning_effort; leaving it out"
    assert "reasoning_effort" not in q.params("o1-mini", "reply", 700, None)


def test_a_refusal_named_only_in_the_message_is_learned_too() -> None:
    # A proxy that passes OpenAI's words on without its `param` (copilot-api, issue #164).
    q = quirks()
    sent = q.params("gpt-5.4", "reply", 700, None) | {"max_tokens": 700}
    error = {"error": {"message": OPENAI_REFUSES_MAX_TOKENS["error"]["message"]}}

    assert learn(q, "gpt-5.4", sent, error) is not None
    assert "max_tokens" in q._learned["gpt-5.4"].refused


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens",
        "This model's maximum context length is 128000 tokens.",
        "scripted fault",
    ],
)
def test_other_400s_teach_nothing(message: str) -> None:
    q = quirks()
    sent = q.params("gpt-4o-mini", "reply", 700, SCHEMA)

    error = {"error": {"message": message, "param": "max_tokens"}}
    assert learn(q, "gpt-4o-mini", sent, error) is None
    assert q.params("gpt-4o-mini", "reply", 700, SCHEMA) == sent


def test_structured_output_steps_down_once_per_model_in_auto() -> None:
    q = quirks()
    sent = q.params("chatgpt-4o-latest", "reply", 700, SCHEMA)
    assert sent["response_format"] == {"type": "json_schema", "json_schema": SCHEMA}

    assert learn(q, "chatgpt-4o-latest", sent, shapes.OPENAI_NO_JSON_SCHEMA) == (
        "cannot do json_schema; asking in json_object_schema mode"
    )
    schema_in_json_mode = q.params("chatgpt-4o-latest", "reply", 700, SCHEMA)
    assert schema_in_json_mode["response_format"] == {
        "type": "json_object",
        "schema": SCHEMA["schema"],
    }
    assert learn(q, "chatgpt-4o-latest", schema_in_json_mode, shapes.LM_STUDIO_NO_JSON_OBJECT) == (
        "cannot do json_object_schema; asking in json_object mode"
    )
    then = q.params("chatgpt-4o-latest", "reply", 700, SCHEMA)
    assert then["response_format"] == {"type": "json_object"}
    assert learn(q, "chatgpt-4o-latest", then, shapes.LM_STUDIO_NO_JSON_OBJECT) == (
        "cannot do json_object; asking in off mode"
    )
    last = q.params("chatgpt-4o-latest", "reply", 700, SCHEMA)
    assert "response_format" not in last
    assert learn(q, "chatgpt-4o-latest", last, shapes.LM_STUDIO_NO_JSON_OBJECT) is None
    # Without a schema no response_format is sent at all, in any mode.
    assert "response_format" not in quirks().params("x", "summary", 120, None)


def test_groqs_words_for_no_json_schema_step_down_too() -> None:
    q = quirks()
    sent = q.params("llama-3.3-70b-versatile", "profile", 300, SCHEMA)

    assert learn(q, "llama-3.3-70b-versatile", sent, shapes.GROQ_NO_JSON_SCHEMA) is not None
    assert q.mode("llama-3.3-70b-versatile") == "json_object_schema"


def test_llama_cpp_pythons_500_for_json_schema_asks_with_the_schema_in_json_mode() -> None:
    q = quirks()
    sent = q.params("qwen", "reply", 700, SCHEMA)

    learned = learn(q, "qwen", sent, errors.LLAMA_CPP_PYTHON_NO_JSON_SCHEMA, status=500)
    assert learned == "cannot do json_schema; asking in json_object_schema mode"
    then = q.params("qwen", "reply", 700, SCHEMA)
    assert then["response_format"] == {"type": "json_object", "schema": SCHEMA["schema"]}


def test_a_refused_schema_in_json_mode_steps_down_to_plain_json_mode() -> None:
    q = quirks()
    q.learn("m", q.params("m", "reply", 700, SCHEMA), read_error(400, shapes.OPENAI_NO_JSON_SCHEMA))
    sent = q.params("m", "reply", 700, SCHEMA)

    learned = learn(q, "m", sent, errors.FASTAPI_EXTRA_RESPONSE_FORMAT_SCHEMA, status=422)
    assert learned == "cannot do json_object_schema; asking in json_object mode"
    assert q.params("m", "reply", 700, SCHEMA)["response_format"] == {"type": "json_object"}
    # A late lane's refusal of the schema step does not step plain JSON mode down too.
    learn(q, "m", sent, errors.FASTAPI_EXTRA_RESPONSE_FORMAT_SCHEMA, status=422)
    assert q.mode("m") == "json_object"


def test_a_model_that_takes_json_schema_is_asked_with_it_every_time() -> None:
    q = quirks()
    for purpose, cap in (("reply", 700), ("summary", 120), ("profile", 300)):
        sent = q.params("gpt-4o-mini", purpose, cap, SCHEMA)  # type: ignore[arg-type]
        assert sent["response_format"] == {"type": "json_schema", "json_schema": SCHEMA}


def test_a_pinned_mode_is_never_stepped_down() -> None:
    q = quirks("json_object")
    sent = q.params("local", "reply", 700, SCHEMA)
    assert sent["response_format"] == {"type": "json_object"}

    assert learn(q, "local", sent, shapes.LM_STUDIO_NO_JSON_OBJECT) is None
    assert q.params("local", "reply", 700, SCHEMA)["response_format"] == {"type": "json_object"}
    assert "response_format" not in quirks("off").params("local", "reply", 700, SCHEMA)
    pinned = quirks("json_object_schema")
    sent = pinned.params("local", "reply", 700, SCHEMA)
    assert sent["response_format"] == {"type": "json_object", "schema": SCHEMA["schema"]}
    assert learn(pinned, "local", sent, errors.FASTAPI_EXTRA_RESPONSE_FORMAT_SCHEMA, 422) is None
    assert pinned.mode("local") == "json_object_schema"


def test_lanes_that_hit_the_same_400_step_down_once() -> None:
    q = quirks()
    sent = q.params("m", "reply", 700, SCHEMA)
    barrier = threading.Barrier(8)
    results: list[str | None] = []

    def lane() -> None:
        barrier.wait()
        results.append(learn(q, "m", sent, shapes.OPENAI_NO_JSON_SCHEMA))

    threads = [threading.Thread(target=lane) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert q.mode("m") == "json_object_schema"  # one step, however many lanes saw the 400
    assert results == ["cannot do json_schema; asking in json_object_schema mode"] * 8


def test_a_model_seen_thinking_aloud_gets_room_from_then_on() -> None:
    q = quirks()

    assert q.saw_thinking("deepseek-r1:8b") is True
    assert q.saw_thinking("deepseek-r1:8b") is False
    assert q.params("deepseek-r1:8b", "reply", 700, None)["max_tokens"] == 700 + THINKING_ROOM


def test_a_model_whose_template_opens_its_reasoning_is_known_for_it() -> None:
    q = quirks()

    assert q.saw_thinking("deepseek-r1:8b") is True
    assert not q.template_opens("deepseek-r1:8b")
    assert q.saw_thinking("deepseek-r1:8b", template_opened=True) is True  # something new
    assert q.saw_thinking("deepseek-r1:8b") is False
    assert q.template_opens("deepseek-r1:8b")
    assert not q.template_opens("qwen3:8b")
