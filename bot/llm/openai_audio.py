"""The audio ports (bot.voice) over the openai SDK: transcribing a voice note with
/audio/transcriptions and speaking a reply with /audio/speech, on OpenAI or any compatible
server (speaches, LocalAI, vLLM, whisper.cpp's server, Kokoro-FastAPI). The SDK retries what it
sees as errors (connection errors, timeouts, 429, 5xx); this module reads the answers as the
untrusted input they are and turns failures into memory.llm's LLMError kinds. Transcripts are
never logged."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, Literal

import openai

from bot.llm.errors import Edge, ServerError, refuses, server_error
from bot.llm.failures import Call, Failures
from bot.llm.openai_chat import openai_client
from bot.llm.transcripts import read_transcript, without_silence
from bot.settings import LLMSettings, VoiceSettings
from bot.voice.ports import Speech, Transcript
from memory.llm import LLMError, Outage, Unusable

log = logging.getLogger(__name__)

# The SDK's own retries of an outage: few, since a voice note's whole turn is tried again from
# the inbox, and each try re-sends the whole file.
AUDIO_MAX_RETRIES = 2

# OpenAI's gpt-4o transcription models answer json (or text) only: "For gpt-4o-transcribe and
# gpt-4o-mini-transcribe, the only supported format is json" (the API reference for
# /audio/transcriptions, `response_format`). They are not asked for verbose_json at all.
_JSON_ONLY = re.compile(r"gpt-4o.*transcribe", re.IGNORECASE)
# How a server that has no verbose_json says so: OpenAI's param "response_format", vLLM's
# "Currently do not support verbose_json for <model>", FastAPI's location of the field.
_FORMAT_WORDS = re.compile(r"verbose_json|response_format|timestamp_granularit", re.IGNORECASE)
# The statuses of a request the audio server read and refused for its content.
CONTENT_STATUSES = frozenset({400, 413, 415, 422})


class OpenAITranscriber:
    """A Transcriber over `client`'s /audio/transcriptions, with `model`. It asks for
    verbose_json (Whisper's scores of each segment tell silence from speech) where the model
    gives it, and for json once the server has refused verbose_json (learned once per
    process)."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        self.client = client
        self.model = model
        self.errors = _Errors(client, "transcription", "/audio/transcriptions", model)
        self.verbose = not _JSON_ONLY.search(model)

    def transcribe(
        self, audio: bytes, *, name: str, content_type: str, language: str | None
    ) -> Transcript:
        """The words in `audio`; see Transcriber. "" for silence: the segments Whisper marks
        as no speech or as invented, the annotations and sentences it writes for silence."""
        while True:
            asked: Literal["verbose_json", "json"] = "verbose_json" if self.verbose else "json"
            try:
                raw = self.client.audio.transcriptions.with_raw_response.create(
                    model=self.model,
                    file=(name, audio, content_type),
                    language=language or openai.omit,
                    response_format=asked,
                )
            except openai.APIStatusError as exc:
                error = server_error(exc)
                sent = {"response_format": asked}
                if asked == "verbose_json" and refuses(
                    error, sent, ("response_format",), {"response_format": _FORMAT_WORDS}
                ):
                    self.verbose = False
                    self.errors.told(
                        "no verbose_json",
                        "Audio transcription at %s refuses verbose_json for %r: asking for json "
                        "from now on, without Whisper's silence scores (learned once per "
                        "process; the server said (%s): %s)",
                        self.errors.base_url(),
                        self.model,
                        error.status,
                        error.words,
                    )
                    continue
                raise self.errors.rejected(error, sent, type(exc).__name__) from exc
            except openai.APIError as exc:  # no answer at all: unreachable, timed out
                raise self.errors.outage(exc) from exc
            response = raw.http_response
            text = read_transcript(response.content, response.headers.get("content-type"))
            if text is None:
                log.warning("Transcription answer unusable: a 200 that is no transcription")
                raise Unusable("the transcription server answered with no transcription")
            return Transcript(without_silence(text), self.model)


class OpenAISpeaker:
    """A Speaker over `client`'s /audio/speech, with `model` and `voice`. OGG/Opus is asked
    for; a server that ignores response_format="opus" (answering MP3, WAV) has its audio
    converted by the caller (bot/voice/speaking.py). `client`'s timeout (PAM_SPEECH_TIMEOUT) bounds
    each call; it should not retry: a timed-out call would take as long again."""

    def __init__(self, client: openai.OpenAI, model: str, voice: str) -> None:
        self.client = client
        self.model = model
        self.voice = voice
        self.errors = _Errors(client, "speech", "/audio/speech", model)

    def speak(self, text: str, *, language: str | None, speed: float = 1.0) -> Speech:
        """`text` spoken as OGG/Opus; see Speaker. `language` is not sent: OpenAI's speech has
        no such parameter (the voice speaks the text's language), and a plain request is what
        local servers take. `speed` (OpenAI's 0.25–4.0) is sent only when it is not the
        voice's own pace, for the same reason."""
        paced = {"speed": min(4.0, max(0.25, speed))} if speed != 1.0 else {}
        try:
            response = self.client.audio.speech.create(
                model=self.model,
                voice=self.voice,
                input=text,
                response_format="opus",
                **paced,  # type: ignore[arg-type]
            )
            data = response.content
        except openai.APITimeoutError as exc:
            raise self.errors.speech_timed_out(exc) from exc
        except openai.APIStatusError as exc:
            sent = {"voice": self.voice, "response_format": "opus", **paced}
            raise self.errors.rejected(server_error(exc), sent, type(exc).__name__) from exc
        except openai.APIError as exc:
            raise self.errors.outage(exc) from exc
        return Speech(data, response.response.headers.get("content-type", ""), self.model)


def audio_client(settings: VoiceSettings, llm: LLMSettings) -> openai.OpenAI:
    """The client of the audio API: PAM_AUDIO_BASE_URL with PAM_AUDIO_API_KEY, or else the
    chat's server (OPENAI_BASE_URL, OPENAI_API_KEY). The chat's key goes only to the chat's
    server: a separate audio server without PAM_AUDIO_API_KEY gets none."""
    key: str | None = settings.audio_api_key
    base = settings.audio_base_url
    if not base:
        key, base = key or llm.api_key, llm.base_url
    return openai_client(key, base, settings.audio_timeout_seconds, AUDIO_MAX_RETRIES)


class _Errors:
    """Turns the SDK's errors for one audio endpoint into LLMError kinds, with advice that names
    the URL, the endpoint and the setting to change (never the key)."""

    _SETTING = {"transcription": "PAM_TRANSCRIPTION_MODEL", "speech": "PAM_SPEECH_MODEL"}

    def __init__(self, client: openai.OpenAI, task: str, endpoint: str, model: str) -> None:
        self.client = client
        self.task = task
        self.endpoint = endpoint
        self.model = model
        self.failures = Failures(log)

    def told(self, cause: str, message: str, *args: object) -> None:
        """Tell the operator `message` at WARNING, once per process and cause."""
        self.failures.once.warning(cause, message, *args)

    def rejected(self, error: ServerError, sent: Mapping[str, Any], name: str) -> LLMError:
        """The LLMError for an HTTP error the SDK gave up on or never retries; `sent`: the
        request's parameters that a server may refuse; `name`: the SDK's for the error."""
        refused = refuses(error, sent, ("response_format",), {"response_format": _FORMAT_WORDS})
        refusal = (
            f"The {self.task} server at {self.base_url()} refused response_format="
            f"{sent['response_format']} for {self.model!r} ({error.status}: {error.words}): Pam "
            f"needs it; set PAM_AUDIO_BASE_URL to a server that has it, or "
            f"{self._SETTING[self.task]} to a model that does."
        )
        return self.failures.rejected(
            error, name, self._call(), self._edge(), refused=refused is not None, refusal=refusal
        )

    def outage(self, exc: openai.APIError) -> LLMError:
        """The LLMError for a request that got no answer at all."""
        return self.failures.no_answer(
            exc,
            self._call(),
            unreachable_advice=f"Pam cannot reach the audio server at {self.base_url()}: is it "
            "running, and is PAM_AUDIO_BASE_URL (or OPENAI_BASE_URL) right?",
        )

    def _call(self) -> Call:
        """A call to this endpoint, as its failures name it. A request the server read and
        refused for its content (the file: unsupported, corrupt, too short; the text) is
        unusable."""
        return Call(f"Audio {self.task}", content_statuses=CONTENT_STATUSES)

    def speech_timed_out(self, exc: openai.APITimeoutError) -> LLMError:
        """The LLMError for a speech call that got no answer within PAM_SPEECH_TIMEOUT."""
        log.warning("Audio %s call timed out", self.task)
        said = (
            f"The speech server at {self.base_url()} did not answer within "
            f"{self.client.timeout} s: on a CPU server (about 2 s per spoken second) raise "
            "PAM_SPEECH_TIMEOUT, or lower PAM_SPEECH_MAX_CHARS."
        )
        return Outage(f"{type(exc).__name__}: no answer in time", advice=said)

    def _edge(self) -> Edge:
        """What advice about this endpoint names."""
        setting = self._SETTING[self.task]
        return Edge(
            f"{self.task} server",
            self.base_url(),
            self.model,
            key_settings="PAM_AUDIO_API_KEY / OPENAI_API_KEY",
            model_settings=setting,
            missing=f"many chat servers have no audio API. Set PAM_AUDIO_BASE_URL to a server "
            f"with {self.endpoint} (OpenAI, speaches, LocalAI), or {setting} to a model it "
            f"serves.",
            voice_settings=f"PAM_SPEECH_VOICE (and {setting})" if self.task == "speech" else "",
        )

    def base_url(self) -> str:
        """The audio API's base URL, as configured."""
        return str(self.client.base_url).rstrip("/")
