"""The audio ports over the real openai SDK against the loopback server: what a transcription
request carries, every answer shape real servers send (their sources named beside each), the
annotations Whisper writes for silence, each failure as its memory.llm kind, speech verified as
OGG/Opus, and which server and key the audio client uses."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.llm.openai_audio import OpenAISpeaker, OpenAITranscriber, audio_client
from bot.llm.openai_chat import openai_client
from bot.llm.transcripts import is_silence, read_transcript, without_silence
from bot.settings import LLMSettings, VoiceSettings
from bot.voice.audio import inspect
from bot.voice.audio_info import UnreadableAudio
from bot.voice.opus import ogg_opus
from loopback.audio_samples import sample
from loopback.llm_shapes import encoded
from loopback.openai_server import HEARD, Fault, OpenAIServer
from memory.llm import Misconfigured, Outage, Unusable
from tests import error_shapes as errors
from tests.transcription_shapes import (
    MUSIC,
    NOISE,
    NOISE_OUTRO,
    SPEECH_THEN_SILENCE,
    segment,
    verbose,
)

SAID = "Ayer yo es muy cansado porque trabajé mucho."
# Tells the SDK to retry after 20 ms instead of its 0.5 s backoff: keeps retry tests quick.
FAST_RETRY = {"retry-after-ms": "20"}

# Transcription answers as real servers send them, for response_format="json" (or ignoring it).
# OpenAI gpt-4o-*-transcribe (openai-python types/audio/transcription.py, `Transcription` with
# `UsageTokens`): text and token usage.
OPENAI_TOKENS = {
    "text": SAID,
    "usage": {
        "type": "tokens",
        "input_tokens": 14,
        "input_token_details": {"text_tokens": 0, "audio_tokens": 14},
        "output_tokens": 12,
        "total_tokens": 26,
    },
}
# OpenAI whisper-1 (the same file, `UsageDuration`) and vLLM (vllm/entrypoints/openai/protocol.py,
# `TranscriptionResponse` with `TranscriptionUsageAudio`): usage by the second.
WHISPER_DURATION = {"text": SAID, "usage": {"type": "duration", "seconds": 3}}
# verbose_json (openai-python types/audio/transcription_verbose.py; vLLM's
# `TranscriptionResponseVerbose` sends `duration` as a string): text beside segments.
VERBOSE = {
    "task": "transcribe",
    "language": "spanish",
    "duration": "3.0",
    "text": SAID,
    "segments": [
        {
            "id": 0,
            "seek": 0,
            "start": 0.0,
            "end": 3.0,
            "text": f" {SAID}",
            "tokens": [50364, 10059],
            "temperature": 0.0,
            "avg_logprob": -0.21,
            "compression_ratio": 0.9,
            "no_speech_prob": 0.01,
        }
    ],
}
# speaches (src/speaches/api_types.py, `CreateTranscriptionResponseJson`): text alone.
SPEACHES = {"text": SAID}
# LocalAI (docs/content/features/audio-to-text.md): segments (nanosecond times) and text.
LOCALAI = {
    "segments": [
        {"id": 0, "start": 0, "end": 3000000000, "text": f" {SAID}", "tokens": [50364, 1222]}
    ],
    "text": SAID,
}
# whisper.cpp's server (examples/server/server.cpp) for response_format=text: the plain
# transcript, sent as "text/html; charset=utf-8"; some servers ignore response_format.
WHISPER_CPP_TEXT = (f"\n {SAID}\n".encode(), {"Content-Type": "text/html; charset=utf-8"})
PLAIN_TEXT = (SAID.encode(), {"Content-Type": "text/plain; charset=utf-8"})

# What Whisper-family models write for a note without speech. whisper.cpp: "[BLANK_AUDIO]"
# (quoted with "[SILENCE]" in karansinghgit/speaktype#42); the others are subtitle annotations
# Whisper learned ("[Music]", "♪"), with the spacing and case variants models write.
SILENCE_MARKERS = [
    "[BLANK_AUDIO]",
    " [BLANK_AUDIO]\n",
    "[SILENCE]",
    "[ Silence ]",
    "(silence)",
    "[Music]",
    "[MÚSICA]",
    "♪",
    "♪♪♪",
    "*music*",
    "[BLANK_AUDIO] [BLANK_AUDIO]",
    "(música) ...",
    "",
    "   ",
]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def client(server: OpenAIServer) -> Iterator[openai.OpenAI]:
    client = openai_client("sk-test", server.base_url, 5.0, 2)
    yield client
    client.close()


@pytest.fixture
def transcriber(client: openai.OpenAI) -> OpenAITranscriber:
    return OpenAITranscriber(client, "gpt-4o-mini-transcribe")


@pytest.fixture
def speaker(client: openai.OpenAI) -> OpenAISpeaker:
    return OpenAISpeaker(client, "gpt-4o-mini-tts", "coral")


def transcribe(transcriber: OpenAITranscriber, language: str | None = "es") -> str:
    note = sample("voice.ogg")
    return transcriber.transcribe(
        note, name="voice.oga", content_type="audio/ogg", language=language
    ).text


# -- transcription ------------------------------------------------------------------------------


def test_transcription_request_carries_model_language_and_file(
    server: OpenAIServer, transcriber: OpenAITranscriber
) -> None:
    transcript = transcriber.transcribe(
        sample("voice.ogg"), name="voice.oga", content_type="audio/ogg", language="es"
    )
    assert (transcript.text, transcript.model) == (HEARD, "gpt-4o-mini-transcribe")
    [request] = server.audio_requests
    assert request.path == "/v1/audio/transcriptions"
    assert request.fields == {
        "model": "gpt-4o-mini-transcribe",
        "language": "es",
        "response_format": "json",
    }
    assert (request.file, request.filename, request.file_type) == (
        sample("voice.ogg"),
        "voice.oga",
        "audio/ogg",
    )
    # Audio requests are not chat requests: the chat tests count those.
    assert server.requests == [] and server.counts == {}


def test_no_language_leaves_it_to_the_model(
    server: OpenAIServer, transcriber: OpenAITranscriber
) -> None:
    transcribe(transcriber, language=None)
    assert "language" not in server.audio_requests[0].fields


def test_what_the_fake_hears_is_scriptable(
    server: OpenAIServer, transcriber: OpenAITranscriber
) -> None:
    server.hear(SAID)
    assert transcribe(transcriber) == SAID


@pytest.mark.parametrize(
    "shape",
    [OPENAI_TOKENS, WHISPER_DURATION, VERBOSE, SPEACHES, LOCALAI],
    ids=["openai-tokens", "whisper-duration", "verbose-json", "speaches", "localai"],
)
def test_every_json_shape(
    server: OpenAIServer, transcriber: OpenAITranscriber, shape: dict[str, Any]
) -> None:
    server.answer_next(shape)
    assert transcribe(transcriber) == SAID


@pytest.mark.parametrize("answer", [WHISPER_CPP_TEXT, PLAIN_TEXT], ids=["whisper.cpp", "plain"])
def test_a_plain_text_body(
    server: OpenAIServer,
    transcriber: OpenAITranscriber,
    answer: tuple[bytes, dict[str, str]],
) -> None:
    body, headers = answer
    server.fail_next(Fault(status=200, body=body, headers=headers))
    assert transcribe(transcriber) == SAID


def test_segments_alone_are_read_when_text_is_missing() -> None:
    # Lenient where the intent is clear: LocalAI's shape without its `text`.
    segments = {"segments": [{"text": " Ayer fui"}, {"text": " al mercado."}]}
    assert read_transcript(encoded(segments), "application/json") == " Ayer fui al mercado."


@pytest.mark.parametrize("marker", SILENCE_MARKERS)
def test_silence_markers_are_silence(
    server: OpenAIServer, transcriber: OpenAITranscriber, marker: str
) -> None:
    server.hear(marker)
    assert transcribe(transcriber) == ""


@pytest.mark.parametrize(
    "text", ["Hola [risas] qué tal", "Me gusta la música ♪", "(Bueno) vale", "¿Sí?"]
)
def test_speech_beside_an_annotation_is_kept(text: str) -> None:
    assert without_silence(f"  {text}\n") == text


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", "text/html"),
        (b"<html><body>Welcome to nginx!</body></html>", "text/html; charset=utf-8"),
        (encoded({"segments": []}), "application/json"),
        (encoded({"transcript": SAID}), "application/json"),
        (encoded({"error": {"message": "failed to process audio"}}), "application/json"),
        (encoded({"text": None}), "application/json"),
        (encoded([1, 2]), "application/json"),
        (b'{"text": "cut', "application/json"),
        (b"\xff\xfe\x00garbage", "application/octet-stream"),
    ],
    ids=["html-502", "nginx", "no-text", "wrong-key", "error", "null", "list", "cut", "binary"],
)
def test_a_200_that_is_no_transcription_is_unusable(
    server: OpenAIServer, transcriber: OpenAITranscriber, body: bytes, content_type: str
) -> None:
    server.fail_next(Fault(status=200, body=body, headers={"Content-Type": content_type}))
    with pytest.raises(Unusable):
        transcribe(transcriber)


def test_the_transcript_is_never_logged(
    server: OpenAIServer, transcriber: OpenAITranscriber, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.hear(SAID)
    transcribe(transcriber)
    server.fail_next(Fault(status=200, body=b"<html>" + SAID.encode()))
    with pytest.raises(Unusable):
        transcribe(transcriber)
    assert "cansado" not in caplog.text


# -- transcription failures ---------------------------------------------------------------------


def test_500_after_retries_is_an_outage(
    server: OpenAIServer, transcriber: OpenAITranscriber
) -> None:
    server.fail_next(*(Fault(status=500, headers=FAST_RETRY) for _ in range(3)))
    with pytest.raises(Outage) as raised:
        transcribe(transcriber)
    assert raised.value.advice is None
    assert len(server.audio_requests) == 3  # the first and the SDK's two retries


def test_429_is_an_outage(server: OpenAIServer, transcriber: OpenAITranscriber) -> None:
    server.fail_next(*(Fault(status=429, headers=FAST_RETRY) for _ in range(3)))
    with pytest.raises(Outage):
        transcribe(transcriber)


def test_a_retried_500_then_an_answer(server: OpenAIServer, transcriber: OpenAITranscriber) -> None:
    server.fail_next(Fault(status=503, headers=FAST_RETRY))
    assert transcribe(transcriber) == HEARD


def test_a_refused_connection_is_an_outage_with_advice() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    with openai_client(None, base, 2.0, 0) as client, pytest.raises(Outage) as raised:
        transcribe(OpenAITranscriber(client, "whisper-1"))
    assert raised.value.advice is not None
    assert base in raised.value.advice and "PAM_AUDIO_BASE_URL" in raised.value.advice


def test_401_is_misconfigured_naming_the_keys(
    server: OpenAIServer, transcriber: OpenAITranscriber
) -> None:
    # OpenAI's 401 quotes part of the key: it stays out of the message.
    error = {
        "error": {"message": "Incorrect API key provided: sk-test.", "code": "invalid_api_key"}
    }
    server.fail_next(Fault(status=401, body=encoded(error)))
    with pytest.raises(Misconfigured) as raised:
        transcribe(transcriber)
    assert "PAM_AUDIO_API_KEY" in raised.value.advice and "OPENAI_API_KEY" in raised.value.advice
    assert "sk-test" not in str(raised.value) and "sk-test" not in raised.value.advice


def test_403_is_misconfigured(server: OpenAIServer, transcriber: OpenAITranscriber) -> None:
    server.fail_next(Fault(status=403))
    with pytest.raises(Misconfigured, match="403"):
        transcribe(transcriber)


def test_404_no_audio_api_is_misconfigured_pointing_to_an_audio_server(
    server: OpenAIServer, transcriber: OpenAITranscriber
) -> None:
    # Ollama, llama.cpp's server and LM Studio have no /audio/transcriptions: a plain 404.
    server.fail_next(Fault(status=404, body=b"404 page not found"))
    with pytest.raises(Misconfigured) as raised:
        transcribe(transcriber)
    advice = raised.value.advice
    assert "PAM_AUDIO_BASE_URL" in advice and "/audio/transcriptions" in advice
    assert "PAM_TRANSCRIPTION_MODEL" in advice and server.base_url in advice


def test_an_unknown_model_is_misconfigured_naming_the_setting(
    server: OpenAIServer, transcriber: OpenAITranscriber
) -> None:
    # OpenAI's error for a model that does not exist (code model_not_found).
    error = {
        "error": {
            "message": "The model `gpt-4o-mini-transcribe` does not exist or you do not have "
            "access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    server.fail_next(Fault(status=404, body=encoded(error)))
    with pytest.raises(Misconfigured) as raised:
        transcribe(transcriber)
    assert "PAM_TRANSCRIPTION_MODEL" in raised.value.advice


def test_400_for_the_file_is_unusable(server: OpenAIServer, transcriber: OpenAITranscriber) -> None:
    # OpenAI's 400 for a file it cannot decode, and for one shorter than 0.1 s.
    for message in (
        "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', "
        "'oga', 'ogg', 'wav', 'webm']",
        "Audio file is too short. Minimum audio length is 0.1 seconds.",
    ):
        error = {"error": {"message": message, "type": "invalid_request_error", "param": "file"}}
        server.fail_next(Fault(status=400, body=encoded(error)))
        with pytest.raises(Unusable):
            transcribe(transcriber)
    assert len(server.audio_requests) == 2  # a 400 is not retried


# -- speech -------------------------------------------------------------------------------------


def test_speech_returns_ogg_opus(server: OpenAIServer, speaker: OpenAISpeaker) -> None:
    speech = speaker.speak("¡Qué bien! ¿Y qué compraste?", language="es")
    assert speech.audio == sample("voice.ogg")
    assert (speech.content_type, speech.model) == ("audio/ogg", "gpt-4o-mini-tts")
    [request] = server.audio_requests
    assert request.path == "/v1/audio/speech"
    # Plain: no language or instructions, which local servers may refuse.
    assert request.fields == {
        "model": "gpt-4o-mini-tts",
        "voice": "coral",
        "input": "¡Qué bien! ¿Y qué compraste?",
        "response_format": "opus",
    }
    assert server.requests == [] and server.counts == {}


def test_speech_asked_for_slower_sends_openais_speed(
    server: OpenAIServer, speaker: OpenAISpeaker
) -> None:
    """A reply heard again (/say … slower) is asked at OpenAI's `speed` (0.25–4.0), clamped."""
    speaker.speak("¿Y qué compraste?", language="es", speed=0.8)
    speaker.speak("¿Y qué compraste?", language="es", speed=0.1)
    assert [r.fields["speed"] for r in server.audio_requests] == [0.8, 0.25]


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (sample("voice.wav"), "audio/wav"),  # servers that ignore response_format
        (sample("voice.mp3"), "audio/mpeg"),
    ],
    ids=["wav", "mp3"],
)
def test_speech_in_another_format_is_converted_to_ogg_opus(
    server: OpenAIServer, speaker: OpenAISpeaker, body: bytes, content_type: str
) -> None:
    server.fail_next(Fault(status=200, body=body, headers={"Content-Type": content_type}))
    speech = speaker.speak("Hola", language="es")
    assert (speech.audio, speech.content_type) == (body, content_type)  # as the server sent it
    audio, info = ogg_opus(speech.audio, speech.content_type)
    assert audio.startswith(b"OggS") and (info.content_type, info.codec) == ("audio/ogg", "opus")
    assert info.seconds == pytest.approx(inspect(body, None).seconds, abs=0.1)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"", "audio/ogg"),
        (b"<html><body>Bad Gateway</body></html>", "text/html"),
        (encoded({"error": {"message": "voice not found"}}), "application/json"),
        (sample("voice.ogg")[:40], "audio/ogg"),
    ],
    ids=["empty", "html", "json-error", "cut"],
)
def test_speech_that_is_no_audio_cannot_be_converted(
    server: OpenAIServer, speaker: OpenAISpeaker, body: bytes, content_type: str
) -> None:
    server.fail_next(Fault(status=200, body=body, headers={"Content-Type": content_type}))
    speech = speaker.speak("Hola", language="es")
    with pytest.raises(UnreadableAudio):
        ogg_opus(speech.audio, speech.content_type)


def test_speech_that_times_out_names_the_setting(server: OpenAIServer) -> None:
    # As wiring builds it: the speech client's own timeout, no retries.
    slow = openai_client("sk-test", server.base_url, 0.2, 0)
    server.fail_next(Fault(delay=1.0, status=200, body=sample("voice.ogg")))
    with slow, pytest.raises(Outage) as raised:
        OpenAISpeaker(slow, "kokoro", "ef_dora").speak("Hola", language="es")
    assert "PAM_SPEECH_TIMEOUT" in (raised.value.advice or "")
    assert len(server.audio_requests) == 1  # not retried


def test_speech_500_after_retries_is_an_outage(
    server: OpenAIServer, speaker: OpenAISpeaker
) -> None:
    server.fail_next(*(Fault(status=500, headers=FAST_RETRY) for _ in range(3)))
    with pytest.raises(Outage):
        speaker.speak("Hola", language="es")


def test_speech_404_names_the_speech_settings(server: OpenAIServer, speaker: OpenAISpeaker) -> None:
    server.fail_next(Fault(status=404, body=b"Not Found"))
    with pytest.raises(Misconfigured) as raised:
        speaker.speak("Hola", language="es")
    advice = raised.value.advice
    assert "PAM_AUDIO_BASE_URL" in advice and "PAM_SPEECH_MODEL" in advice
    assert "/audio/speech" in advice


def test_speech_401_is_misconfigured(server: OpenAIServer, speaker: OpenAISpeaker) -> None:
    server.fail_next(Fault(status=401))
    with pytest.raises(Misconfigured, match="401"):
        speaker.speak("Hola", language="es")


def test_speech_400_for_the_voice_is_misconfigured(
    server: OpenAIServer, speaker: OpenAISpeaker
) -> None:
    # Kokoro-FastAPI and speaches have their own voices: OpenAI's "coral" is unknown there.
    error = {"error": {"message": "Voice 'coral' not found", "type": "invalid_request_error"}}
    server.fail_next(Fault(status=400, body=encoded(error)))
    with pytest.raises(Misconfigured) as raised:
        speaker.speak("Hola", language="es")
    assert "PAM_SPEECH_VOICE" in raised.value.advice


def test_speech_400_for_the_text_is_unusable(server: OpenAIServer, speaker: OpenAISpeaker) -> None:
    error = {"error": {"message": "[] is too short - 'input'", "type": "invalid_request_error"}}
    server.fail_next(Fault(status=400, body=encoded(error)))
    with pytest.raises(Unusable):
        speaker.speak("Hola", language="es")


# -- the client ---------------------------------------------------------------------------------


def test_the_audio_client_defaults_to_the_chat_server() -> None:
    llm = LLMSettings(api_key="sk-chat", base_url="http://chat.example/v1")
    with audio_client(VoiceSettings(audio_timeout_seconds=7), llm) as client:
        assert str(client.base_url).rstrip("/") == "http://chat.example/v1"
        assert client.api_key == "sk-chat"
        assert client.timeout == 7 and client.max_retries == 2


def test_a_separate_audio_server_gets_its_own_key_not_the_chats() -> None:
    llm = LLMSettings(api_key="sk-chat", base_url="http://chat.example/v1")
    voice = VoiceSettings(audio_base_url="http://speaches.local:8000/v1")
    with audio_client(voice, llm) as client:
        assert str(client.base_url).rstrip("/") == "http://speaches.local:8000/v1"
        assert client.api_key != "sk-chat"
    voice = VoiceSettings(audio_base_url="http://speaches.local:8000/v1", audio_api_key="sk-a")
    with audio_client(voice, llm) as client:
        assert client.api_key == "sk-a"


def test_an_audio_key_alone_is_used_on_the_chat_server() -> None:
    llm = LLMSettings(api_key="sk-chat")
    with audio_client(VoiceSettings(audio_api_key="sk-audio"), llm) as client:
        assert client.api_key == "sk-audio"


# -- what a server's error says (tests/error_shapes.py names each source) ----------------------


@pytest.mark.parametrize(
    ("body", "setting"),
    [
        pytest.param(encoded(errors.FASTKOKORO_NO_SUCH_VOICE), "PAM_SPEECH_VOICE", id="fastkokoro"),
        pytest.param(
            encoded(errors.KOKORO_FASTAPI_NO_SUCH_VOICE), "PAM_SPEECH_VOICE", id="kokoro-fastapi"
        ),
        pytest.param(
            encoded(errors.FASTKOKORO_UNSUPPORTED_MODEL), "PAM_SPEECH_MODEL", id="fastkokoro-model"
        ),
        pytest.param(
            encoded(errors.KOKORO_FASTAPI_UNSUPPORTED_MODEL),
            "PAM_SPEECH_MODEL",
            id="kokoro-fastapi-model",
        ),
    ],
)
def test_a_speech_servers_wrong_voice_or_model_is_advice_told_once(
    server: OpenAIServer,
    speaker: OpenAISpeaker,
    caplog: pytest.LogCaptureFixture,
    body: bytes,
    setting: str,
) -> None:
    server.fail_next(*[Fault(status=400, body=body)] * 2)

    with pytest.raises(Misconfigured) as raised:
        speaker.speak("Hola", language="es")
    with pytest.raises(Misconfigured):
        speaker.speak("Hola", language="es")

    assert setting in raised.value.advice and server.base_url in raised.value.advice
    assert len(server.audio_requests) == 2  # a 400 is not retried
    told = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in told] == [
        f"Audio speech call rejected (400): {raised.value.advice}"
    ]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(400, encoded(errors.FASTER_WHISPER_SERVER_UNKNOWN_MODEL), id="detail-object"),
        pytest.param(400, errors.UNKNOWN_MODEL_TEXT, id="plain-text"),
        pytest.param(500, errors.UNKNOWN_MODEL_TEXT, id="plain-text-500"),
    ],
)
def test_a_transcription_servers_unknown_model_is_advice_not_a_bad_file(
    server: OpenAIServer, transcriber: OpenAITranscriber, status: int, body: bytes
) -> None:
    # Issue 26: the learner was asked to record again, the operator told nothing.
    server.fail_next(*[Fault(status=status, body=body, headers=FAST_RETRY)] * 3)

    with pytest.raises(Misconfigured) as raised:
        transcribe(transcriber)
    assert "PAM_TRANSCRIPTION_MODEL" in raised.value.advice
    assert "unknown model: whisper-1" in raised.value.advice


def test_a_speech_servers_500_without_a_refusal_is_an_outage(
    server: OpenAIServer, speaker: OpenAISpeaker
) -> None:
    body = encoded(errors.KOKORO_FASTAPI_PROCESSING_ERROR)
    server.fail_next(*[Fault(status=500, body=body, headers=FAST_RETRY)] * 3)

    with pytest.raises(Outage):
        speaker.speak("Hola", language="es")


def test_a_speech_server_without_opus_is_advice(
    server: OpenAIServer, speaker: OpenAISpeaker
) -> None:
    server.fail_next(Fault(status=422, body=encoded(errors.FASTAPI_NO_OPUS)))

    with pytest.raises(Misconfigured) as raised:
        speaker.speak("Hola", language="es")
    assert "response_format=opus" in raised.value.advice
    assert "Input should be 'mp3' or 'wav' (response_format)" in raised.value.advice


# -- verbose_json and silence -------------------------------------------------------------------


@pytest.fixture
def whisper(client: openai.OpenAI) -> OpenAITranscriber:
    """A transcriber of a Whisper model: asked for verbose_json."""
    return OpenAITranscriber(client, "whisper-1")


def test_a_whisper_model_is_asked_for_verbose_json(
    server: OpenAIServer, whisper: OpenAITranscriber
) -> None:
    server.hear(SAID)

    assert transcribe(whisper) == SAID
    assert server.audio_requests[0].fields["response_format"] == "verbose_json"


@pytest.mark.parametrize(
    "refusal",
    [
        pytest.param(errors.VLLM_NO_VERBOSE_JSON, id="vllm"),
        pytest.param(errors.VLLM_ONLY_TEXT_OR_JSON, id="vllm-0.8"),
        pytest.param(errors.OPENAI_NO_VERBOSE_JSON, id="openai"),
    ],
)
def test_a_server_without_verbose_json_is_asked_for_json_learned_once(
    server: OpenAIServer,
    whisper: OpenAITranscriber,
    caplog: pytest.LogCaptureFixture,
    refusal: dict[str, Any],
) -> None:
    server.hear(SAID)
    server.fail_next(Fault(status=400, body=encoded(refusal)))

    assert transcribe(whisper) == SAID
    assert transcribe(whisper) == SAID

    formats = [r.fields["response_format"] for r in server.audio_requests]
    assert formats == ["verbose_json", "json", "json"]
    [told] = [r for r in caplog.records if "verbose_json" in r.getMessage()]
    assert told.levelno == logging.WARNING and server.base_url in told.getMessage()


def test_a_refusal_of_something_else_is_not_taken_for_one_of_verbose_json(
    server: OpenAIServer, whisper: OpenAITranscriber
) -> None:
    error = {"error": {"message": "Invalid file format.", "param": "file"}}
    server.fail_next(Fault(status=400, body=encoded(error)))

    with pytest.raises(Unusable):
        transcribe(whisper)
    transcribe(whisper)
    assert [r.fields["response_format"] for r in server.audio_requests] == ["verbose_json"] * 2


@pytest.mark.parametrize(
    ("answer", "heard"),
    [
        pytest.param(NOISE, "", id="noise"),
        pytest.param(NOISE_OUTRO, "", id="noise-known-sentence"),
        pytest.param(MUSIC, "", id="music"),
        pytest.param(SPEECH_THEN_SILENCE, SAID, id="speech-then-silence"),
        pytest.param(verbose(segment(f" {SAID}")), SAID, id="speech"),
        pytest.param(
            verbose(segment(" Y luego fuimos al cine.", no_speech_prob=0.7, avg_logprob=-0.4)),
            "Y luego fuimos al cine.",
            id="quiet-but-sure",  # Whisper keeps it too: the log-probability is high enough
        ),
    ],
)
def test_segments_whisper_marks_as_silence_are_dropped(
    server: OpenAIServer, whisper: OpenAITranscriber, answer: dict[str, Any], heard: str
) -> None:
    server.answer_next(answer)

    assert transcribe(whisper) == heard


@pytest.mark.parametrize(
    "text",
    ["y", " Y.", "Thanks for watching!", "Subtítulos realizados por la comunidad de Amara.org"],
)
def test_known_sentences_of_silence_are_silence(text: str) -> None:
    assert without_silence(text) == ""


def test_a_sentence_that_only_contains_one_of_them_is_speech() -> None:
    said = "Y luego dije: thanks for watching!"
    assert without_silence(said) == said


SCORE = st.none() | st.floats() | st.integers() | st.text(max_size=6) | st.booleans()


@settings(max_examples=200, deadline=None)
@given(
    segments=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "text": st.text(max_size=20) | st.none(),
                "no_speech_prob": SCORE,
                "avg_logprob": SCORE,
                "compression_ratio": SCORE,
                "temperature": SCORE,
            },
        ),
        max_size=5,
    ),
    text=st.text(max_size=20) | st.none(),
)
def test_any_verbose_answer_is_read_without_failing(
    segments: list[dict[str, Any]], text: str | None
) -> None:
    # A server's answer is untrusted input: read, never raised on; the words it keeps are
    # the answer's own.
    body = encoded({"text": text, "segments": segments})

    heard = read_transcript(body, "application/json")

    spoken = "".join(s.get("text") or "" for s in segments if not is_silence(s))
    assert heard in (None, text, spoken)
