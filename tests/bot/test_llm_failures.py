"""The one classifier of failed calls (bot.llm.failures), as the chat and the audio API use it,
on the error bodies real servers send (tests/error_shapes.py, tests/llm_shapes.py, with their
sources): the same body means the same LLMError kind to both, each with advice that names its
own settings; only a request refused for its content is the audio's to call unusable."""

from __future__ import annotations

import logging

import httpx
import openai
import pytest

from bot.llm.errors import Edge, read_error
from bot.llm.failures import Call, Failures
from bot.llm.openai_audio import CONTENT_STATUSES
from memory.llm import LLMError, Misconfigured, Outage, Refused, Unusable, Usage
from tests import error_shapes as errors
from tests import llm_shapes as shapes

CHAT = (
    Call("LLM reply"),
    Edge("LLM server", "http://llm/v1", "gpt-4o-mini", "OPENAI_API_KEY", "PAM_MODEL", "/v1"),
)
AUDIO = (
    Call("Audio transcription", content_statuses=CONTENT_STATUSES),
    Edge(
        "transcription server",
        "http://audio/v1",
        "whisper-1",
        "PAM_AUDIO_API_KEY",
        "PAM_TRANSCRIPTION_MODEL",
        "no audio API here",
        voice_settings="PAM_SPEECH_VOICE",
    ),
)

# What each side's advice names, by the cause of a misconfiguration.
SETTINGS = {
    "model": ("PAM_MODEL", "PAM_TRANSCRIPTION_MODEL"),
    "key": ("OPENAI_API_KEY", "PAM_AUDIO_API_KEY"),
    "endpoint": ("/v1", "no audio API here"),
}


def failure(status: int, body: object, side: tuple[Call, Edge], refused: bool = False) -> LLMError:
    """What `side` makes of an HTTP error with `body`."""
    call, edge = side
    failures = Failures(logging.getLogger("tests.llm_failures"))
    return failures.rejected(
        read_error(status, body), "APIStatusError", call, edge, refused=refused
    )


@pytest.mark.parametrize(
    ("status", "body", "kind", "names"),
    [
        pytest.param(500, errors.LLAMA_CPP_PYTHON_DECODE_FAILED["error"], Outage, None, id="500"),
        pytest.param(500, errors.KOKORO_FASTAPI_PROCESSING_ERROR, Outage, None, id="kokoro-500"),
        pytest.param(429, {"error": {"message": "Rate limit reached"}}, Outage, None, id="429"),
        pytest.param(
            400,
            errors.LLAMA_CPP_PYTHON_NO_SUCH_MODEL["error"],
            Misconfigured,
            "model",
            id="llama-cpp-python-model",
        ),
        pytest.param(
            400,
            errors.FASTER_WHISPER_SERVER_UNKNOWN_MODEL,
            Misconfigured,
            "model",
            id="faster-whisper-model",
        ),
        pytest.param(400, errors.UNKNOWN_MODEL_TEXT, Misconfigured, "model", id="plain-text"),
        pytest.param(500, errors.UNKNOWN_MODEL_TEXT, Misconfigured, "model", id="plain-text-500"),
        pytest.param(
            400, errors.FASTKOKORO_UNSUPPORTED_MODEL, Misconfigured, "model", id="fastkokoro-model"
        ),
        pytest.param(
            400,
            errors.KOKORO_FASTAPI_UNSUPPORTED_MODEL,
            Misconfigured,
            "model",
            id="kokoro-fastapi-model",
        ),
        pytest.param(
            404, shapes.OLLAMA_NO_SUCH_MODEL["error"], Misconfigured, "model", id="ollama"
        ),
        pytest.param(401, shapes.OPENAI_BAD_KEY["error"], Misconfigured, "key", id="key"),
        pytest.param(404, b"404 page not found", Misconfigured, "endpoint", id="endpoint"),
        pytest.param(
            400, shapes.OPENAI_FLAGGED_PROMPT["error"], Refused, None, id="invalid-prompt"
        ),
        pytest.param(400, shapes.AZURE_FILTERED_PROMPT["error"], Refused, None, id="azure-filter"),
        pytest.param(403, shapes.OPENROUTER_FLAGGED["error"], Refused, None, id="openrouter-flag"),
    ],
)
def test_the_chat_and_the_audio_read_an_error_alike(
    status: int, body: object, kind: type[LLMError], names: str | None
) -> None:
    chat, audio = failure(status, body, CHAT), failure(status, body, AUDIO)
    assert type(chat) is kind and type(audio) is kind
    if names is None:
        return
    assert isinstance(chat, Misconfigured) and isinstance(audio, Misconfigured)
    chat_names, audio_names = SETTINGS[names]
    assert chat_names in chat.advice and "http://llm/v1" in chat.advice
    assert audio_names in audio.advice and "http://audio/v1" in audio.advice


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(errors.VLLM_NO_VERBOSE_JSON, id="vllm"),
        pytest.param(shapes.GROQ_NO_JSON_SCHEMA["error"], id="groq"),
        pytest.param(errors.OLLAMA_NO_TOOLS["error"], id="ollama-tools"),
    ],
)
def test_a_request_refused_again_is_the_chats_setting_and_the_audios_content(body: object) -> None:
    # The chat's request is Pam's own making: an operator must look. The audio's carries the
    # learner's file or words: asking again would get the same answer, and no setting helps.
    assert isinstance(failure(400, body, CHAT), Misconfigured)
    assert isinstance(failure(400, body, AUDIO), Unusable)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(500, errors.LLAMA_CPP_PYTHON_NO_JSON_SCHEMA["error"], id="llama-cpp-python"),
        pytest.param(422, errors.FASTAPI_NO_OPUS, id="fastapi-no-opus"),
        pytest.param(400, errors.OPENAI_NO_VERBOSE_JSON["error"], id="openai-no-verbose-json"),
    ],
)
def test_a_refused_part_of_the_request_is_advice_for_both(status: int, body: object) -> None:
    for side in (CHAT, AUDIO):
        assert isinstance(failure(status, body, side, refused=True), Misconfigured)


def test_an_outage_after_unusable_answers_is_unusable() -> None:
    billed = (Usage("gpt-4o-mini", 10, 2),)
    body = errors.LLAMA_CPP_PYTHON_DECODE_FAILED["error"]
    failed = failure(500, body, (Call("LLM reply", billed), CHAT[1]))
    assert isinstance(failed, Unusable) and failed.billed == billed


def test_no_server_at_all_is_an_outage_with_advice_for_both() -> None:
    request = httpx.Request("POST", "http://nowhere/v1/chat/completions")
    refused = openai.APIConnectionError(request=request)
    for call, _ in (CHAT, AUDIO):
        failures = Failures(logging.getLogger("tests.llm_failures"))
        failed = failures.no_answer(refused, call, unreachable_advice="is it running?")
        assert isinstance(failed, Outage) and failed.advice == "is it running?"


def test_a_timeout_is_an_outage_not_before_the_server_may_be_done() -> None:
    request = httpx.Request("POST", "http://slow/v1/chat/completions")
    billed = (Usage("gpt-4o-mini", 10, 2),)  # a timeout is no sign of a model that cannot answer
    failures = Failures(logging.getLogger("tests.llm_failures"))
    failed = failures.no_answer(
        openai.APITimeoutError(request=request),
        Call("LLM reply", billed),
        unreachable_advice="is it running?",
        timed_out_advice="raise the timeout",
        retry_after=60.0,
    )
    assert isinstance(failed, Outage)
    assert (failed.advice, failed.retry_after, failed.billed) == ("raise the timeout", 60.0, billed)
