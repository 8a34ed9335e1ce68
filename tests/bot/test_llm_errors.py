"""The one reader of OpenAI-compatible servers' errors (bot.llm.errors) on the bodies real
servers send (tests/error_shapes.py, tests/llm_shapes.py, with their sources): the server's
words, the fields it points at, and what the error means, whatever the status."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.llm.errors import Verdict, classify, read_error, refuses
from bot.llm.requests import STRUCTURED_WORDS
from loopback.openai_server import VLLM_REFUSES_TOOLS
from tests import error_shapes as errors
from tests import llm_shapes as shapes


@pytest.mark.parametrize(
    ("status", "body", "message", "fields"),
    [
        pytest.param(
            500,
            errors.LLAMA_CPP_PYTHON_NO_JSON_SCHEMA["error"],  # as the SDK hands it on
            "Input should be 'text' or 'json_object' (response_format.type)",
            ("response_format",),
            id="llama-cpp-python-500",
        ),
        pytest.param(
            422,
            errors.FASTAPI_EXTRA_MAX_COMPLETION_TOKENS,
            "Extra inputs are not permitted (max_completion_tokens)",
            ("max_completion_tokens",),
            id="fastapi-detail-list",
        ),
        pytest.param(
            400,
            errors.FASTKOKORO_NO_SUCH_VOICE,
            "Voice 'coral' is not available",
            (),
            id="fastapi-detail-string",
        ),
        pytest.param(
            400,
            errors.KOKORO_FASTAPI_NO_SUCH_VOICE,
            "Voice 'coral' not found. Available voices: af_alloy, af_heart, ef_dora",
            (),
            id="kokoro-fastapi-detail-object",
        ),
        pytest.param(
            400,
            errors.FASTER_WHISPER_SERVER_UNKNOWN_MODEL,
            "unknown model: whisper-1",
            (),
            id="faster-whisper-server-nested",
        ),
        pytest.param(
            400, errors.UNKNOWN_MODEL_TEXT, "unknown model: whisper-1", (), id="plain-text"
        ),
        pytest.param(
            400,
            errors.VLLM_NO_VERBOSE_JSON,
            "Currently do not support verbose_json for openai/whisper-large-v3-turbo",
            (),
            id="vllm-unwrapped",
        ),
        pytest.param(
            400,
            shapes.LM_STUDIO_NO_JSON_OBJECT["error"],  # the SDK unwraps {"error": "..."}
            "'response_format.type' must be 'json_schema' or 'text'",
            (),
            id="string-error",
        ),
        pytest.param(502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "", (), id="html"),
        pytest.param(500, None, "", (), id="no-body"),
    ],
)
def test_every_shape_is_read(
    status: int, body: object, message: str, fields: tuple[str, ...]
) -> None:
    error = read_error(status, body)

    assert (error.status, error.message, error.fields) == (status, message, fields)


def test_openai_style_fields_are_kept() -> None:
    error = read_error(400, shapes.OPENAI_NO_JSON_SCHEMA["error"])

    assert (error.param, error.type, error.code) == (
        "response_format",
        "invalid_request_error",
        None,
    )
    assert read_error(400, VLLM_REFUSES_TOOLS).code == "400"  # vLLM's code is the status
    kokoro = read_error(400, errors.KOKORO_FASTAPI_UNSUPPORTED_MODEL)
    assert (kokoro.code, kokoro.type) == ("invalid_model", "invalid_request_error")


def test_a_validation_errors_input_is_never_kept() -> None:
    # The input may be what the learner said (a message's content): it stays out of logs.
    body = errors.fastapi_validation(
        {
            "type": "string_type",
            "loc": ["body", "messages", 1, "content"],
            "msg": "Input should be a valid string",
            "input": ["Hola, me llamo Lena"],
        }
    )
    wrapped = {"error": {"message": repr(body["detail"]), "type": "internal_server_error"}}

    for error in (read_error(422, body), read_error(500, wrapped)):
        assert "Lena" not in error.message and "Lena" not in error.words
        assert error.fields == ("messages",)


def test_a_long_message_is_capped_and_one_line() -> None:
    error = read_error(500, {"detail": "Traceback:\n" + "  line\n" * 200})

    assert "\n" not in error.message and len(error.message) <= 300
    assert len(error.words) <= 160


SENT = {
    "response_format": {"type": "json_schema", "json_schema": {}},
    "temperature": 0.7,
    "max_tokens": 700,
    "tools": [{}],
}


@pytest.mark.parametrize(
    ("status", "body", "field"),
    [
        (500, errors.LLAMA_CPP_PYTHON_NO_JSON_SCHEMA["error"], "response_format"),
        (400, shapes.OPENAI_NO_JSON_SCHEMA["error"], "response_format"),
        (400, shapes.GROQ_NO_JSON_SCHEMA["error"], "response_format"),
        (400, errors.OLLAMA_NO_TOOLS["error"], "tools"),
        (400, VLLM_REFUSES_TOOLS, "tools"),
        (500, {"error": {"message": "tools param requires --jinja flag"}}, "tools"),
        (500, errors.LLAMA_CPP_PYTHON_DECODE_FAILED["error"], None),
        (500, {"error": {"message": "scripted fault", "type": "server_error"}}, None),
        (503, {"error": {"message": "response_format is busy, try later"}}, None),
        (429, {"error": {"message": "Rate limit reached for max_tokens"}}, None),
    ],
)
def test_a_refused_field_is_found_in_4xx_and_5xx_alike(
    status: int, body: dict[str, Any], field: str | None
) -> None:
    words = {"response_format": STRUCTURED_WORDS, "tools": re.compile(r"\btools?\b")}

    assert refuses(read_error(status, body), SENT, ("response_format", "tools"), words) == field


def test_a_field_not_sent_is_never_refused() -> None:
    error = read_error(500, errors.LLAMA_CPP_PYTHON_NO_JSON_SCHEMA["error"])

    assert refuses(error, {"temperature": 0.2}, ("response_format",)) is None


@pytest.mark.parametrize(
    ("status", "body", "verdict"),
    [
        pytest.param(400, errors.FASTKOKORO_NO_SUCH_VOICE, Verdict("misconfigured", "voice")),
        pytest.param(400, errors.KOKORO_FASTAPI_NO_SUCH_VOICE, Verdict("misconfigured", "voice")),
        pytest.param(400, errors.FASTKOKORO_UNSUPPORTED_MODEL, Verdict("misconfigured", "model")),
        pytest.param(
            400, errors.KOKORO_FASTAPI_UNSUPPORTED_MODEL, Verdict("misconfigured", "model")
        ),
        pytest.param(
            400, errors.FASTER_WHISPER_SERVER_UNKNOWN_MODEL, Verdict("misconfigured", "model")
        ),
        pytest.param(400, errors.UNKNOWN_MODEL_TEXT, Verdict("misconfigured", "model")),
        pytest.param(500, errors.UNKNOWN_MODEL_TEXT, Verdict("misconfigured", "model")),
        pytest.param(
            400, errors.LLAMA_CPP_PYTHON_NO_SUCH_MODEL["error"], Verdict("misconfigured", "model")
        ),
        pytest.param(404, shapes.OPENAI_NO_SUCH_MODEL["error"], Verdict("misconfigured", "model")),
        pytest.param(404, shapes.OLLAMA_NO_SUCH_MODEL["error"], Verdict("misconfigured", "model")),
        pytest.param(404, shapes.VLLM_NO_SUCH_MODEL, Verdict("misconfigured", "model")),
        pytest.param(401, shapes.OPENAI_BAD_KEY["error"], Verdict("misconfigured", "key")),
        pytest.param(429, shapes.OPENAI_NO_QUOTA["error"], Verdict("misconfigured", "quota")),
        pytest.param(
            403, {"error": {"message": "Forbidden"}}, Verdict("misconfigured", "forbidden")
        ),
        pytest.param(404, b"404 page not found", Verdict("misconfigured", "endpoint")),
        pytest.param(500, errors.LLAMA_CPP_PYTHON_DECODE_FAILED["error"], Verdict("outage")),
        pytest.param(500, errors.KOKORO_FASTAPI_PROCESSING_ERROR, Verdict("outage")),
        pytest.param(503, b"<html>Service Unavailable</html>", Verdict("outage")),
        # A gateway's "later", though it names the model: an outage, never a wrong setting.
        pytest.param(
            503,
            {"error": {"message": "The model gpt-4o is not available right now, please retry"}},
            Verdict("outage"),
        ),
        pytest.param(429, {"error": {"message": "Rate limit reached"}}, Verdict("outage")),
        pytest.param(400, shapes.GROQ_NO_JSON_SCHEMA["error"], Verdict("rejected")),
        pytest.param(400, errors.VLLM_NO_VERBOSE_JSON, Verdict("rejected")),
        pytest.param(400, shapes.OPENAI_FLAGGED_PROMPT["error"], Verdict("flagged")),
        pytest.param(400, shapes.AZURE_FILTERED_PROMPT["error"], Verdict("flagged")),
        pytest.param(403, shapes.OPENROUTER_FLAGGED["error"], Verdict("flagged")),
    ],
)
def test_what_an_error_means(status: int, body: object, verdict: Verdict) -> None:
    # Groq's "This model does not support ..." and vLLM's "do not support verbose_json for
    # <model>" name a model without saying it is wrong: refusals are the caller's to find.
    assert classify(read_error(status, body)) == verdict


def test_a_refusal_outranks_the_status_but_not_a_wrong_model() -> None:
    llama = read_error(500, errors.LLAMA_CPP_PYTHON_NO_JSON_SCHEMA["error"])
    assert classify(llama, refused=True) == Verdict("refused")
    assert classify(llama) == Verdict("outage")  # had the caller found nothing sent
    wrong_model = read_error(400, errors.FASTKOKORO_UNSUPPORTED_MODEL)
    assert classify(wrong_model, refused=True) == Verdict("misconfigured", "model")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["error", "detail", "message", "msg", "loc", "code", "param", "type"])
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(status=st.integers(min_value=400, max_value=599), body=JSON | st.binary(max_size=200))
def test_any_body_is_read_without_failing(status: int, body: object) -> None:
    # A server's error is untrusted input: whatever it is, it is read, never raised on.
    error = read_error(status, body)

    assert "\n" not in error.message and len(error.message) <= 300
    assert classify(error).kind in ("flagged", "refused", "misconfigured", "outage", "rejected")
    assert refuses(error, SENT, ("response_format", "tools")) in (None, "response_format", "tools")
