"""The audio ports (bot.voice) over the openai SDK: transcribing a voice note with
/audio/transcriptions and speaking a reply with /audio/speech, on OpenAI or any compatible
server (speaches, LocalAI, vLLM, whisper.cpp's server, Kokoro-FastAPI). The SDK retries what it
sees as errors (connection errors, timeouts, 429, 5xx); this module reads the answers as the
untrusted input they are and turns failures into memory.llm's LLMError kinds. Transcripts are
never logged."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import openai

from bot.audio import UnreadableAudio, inspect
from bot.llm_answers import error_words
from bot.logs import OnceLog
from bot.openai_chat import openai_client, unreachable
from bot.settings import LLMSettings, VoiceSettings
from bot.voice import Speech, Transcript
from memory.llm import LLMError, Misconfigured, Outage, Unusable

log = logging.getLogger(__name__)

# The SDK's own retries of an outage: few, since a voice note's whole turn is tried again from
# the inbox, and each try re-sends the whole file.
AUDIO_MAX_RETRIES = 2

# What Whisper-family models write for a note without speech: a bracketed or parenthesised
# annotation ("[BLANK_AUDIO]", "[ Silence ]", "(silence)", "[Music]", "*music*") or music notes,
# nothing else. whisper.cpp writes "[BLANK_AUDIO]" (karansinghgit/speaktype#42 quotes it and
# "[SILENCE]"); Whisper's training subtitles taught it "[Music]" and "♪".
_ANNOTATION = re.compile(r"\[[^\[\]]*\]|\([^()]*\)|\*[^*]*\*|[♪♫🎵🎶]")
_NOTHING_LEFT = re.compile(r"[\s.,;:!?¡¿…\-–—]*")


class OpenAITranscriber:
    """A Transcriber over `client`'s /audio/transcriptions, with `model`."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        self.client = client
        self.model = model
        self.errors = _Errors(client, "transcription", "/audio/transcriptions", model)

    def transcribe(
        self, audio: bytes, *, name: str, content_type: str, language: str | None
    ) -> Transcript:
        """The words in `audio`; see Transcriber. "" for silence (and for the annotations
        Whisper-family models write for it)."""
        try:
            raw = self.client.audio.transcriptions.with_raw_response.create(
                model=self.model,
                file=(name, audio, content_type),
                language=language or openai.omit,
                response_format="json",
            )
        except openai.APIStatusError as exc:
            raise self.errors.rejected(exc) from exc
        except openai.APIError as exc:  # no answer at all: unreachable, timed out
            raise self.errors.outage(exc) from exc
        response = raw.http_response
        text = read_transcript(response.content, response.headers.get("content-type"))
        if text is None:
            log.warning("Transcription answer unusable: a 200 that is no transcription")
            raise Unusable("the transcription server answered with no transcription")
        return Transcript(without_silence(text), self.model)


class OpenAISpeaker:
    """A Speaker over `client`'s /audio/speech, with `model` and `voice`. Only OGG/Opus is
    taken back: WhatsApp plays nothing else as a voice note, and Telegram's sendVoice shows an
    MP3 as a voice message but not everywhere, so a server that ignores response_format="opus"
    (answering MP3, WAV) gives an Unusable answer, not a reply that works on one channel."""

    def __init__(self, client: openai.OpenAI, model: str, voice: str) -> None:
        self.client = client
        self.model = model
        self.voice = voice
        self.errors = _Errors(client, "speech", "/audio/speech", model)

    def speak(self, text: str, *, language: str | None) -> Speech:
        """`text` spoken as OGG/Opus; see Speaker. `language` is not sent: OpenAI's speech has
        no such parameter (the voice speaks the text's language), and a plain request is what
        local servers take."""
        try:
            response = self.client.audio.speech.create(
                model=self.model, voice=self.voice, input=text, response_format="opus"
            )
            data = response.content
        except openai.APIStatusError as exc:
            raise self.errors.rejected(exc) from exc
        except openai.APIError as exc:
            raise self.errors.outage(exc) from exc
        try:
            info = inspect(data, response.response.headers.get("content-type"))
        except UnreadableAudio as exc:
            log.warning("Speech answer unusable: %s", exc)
            raise Unusable(f"the speech server's answer is no audio ({exc})") from exc
        if info.codec != "opus" or info.content_type != "audio/ogg":
            log.warning("Speech answer unusable: %s in %s, not Opus", info.codec, info.extension)
            raise Unusable(f"the speech server answered {info.extension} audio, not OGG/Opus")
        return Speech(data, "audio/ogg", self.model)


def audio_client(settings: VoiceSettings, llm: LLMSettings) -> openai.OpenAI:
    """The client of the audio API: PAM_AUDIO_BASE_URL with PAM_AUDIO_API_KEY, or else the
    chat's server (OPENAI_BASE_URL, OPENAI_API_KEY). The chat's key goes only to the chat's
    server: a separate audio server without PAM_AUDIO_API_KEY gets none."""
    key: str | None = settings.audio_api_key
    base = settings.audio_base_url
    if not base:
        key, base = key or llm.api_key, llm.base_url
    return openai_client(key, base, settings.audio_timeout_seconds, AUDIO_MAX_RETRIES)


def read_transcript(body: bytes, content_type: str | None) -> str | None:
    """The transcript in a 200's body, or None when the body is no transcription (an HTML page,
    JSON without text, an error in the body). Takes every shape servers send: OpenAI's json
    and verbose_json (`text`), LocalAI's `segments` beside or instead of `text`, and a plain
    text body (servers that ignore response_format)."""
    try:
        words = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    stripped = words.lstrip()
    # By its markup, not its type: whisper.cpp's server sends its plain text as text/html.
    if stripped.startswith("<"):
        return None
    if kind.endswith("json") or stripped.startswith(("{", "[")):
        try:
            parsed = json.loads(words)
        except (ValueError, RecursionError):
            return None
        return _text_of(parsed)
    return words


def without_silence(text: str) -> str:
    """`text` stripped, and "" when it holds nothing but the annotations Whisper-family models
    write for silence and noise."""
    text = text.strip()
    if _NOTHING_LEFT.fullmatch(_ANNOTATION.sub("", text)):
        return ""
    return text


def _text_of(parsed: Any) -> str | None:
    """The transcript of a JSON answer: its `text`, else its segments' texts joined."""
    if isinstance(parsed, str):
        return parsed
    if not isinstance(parsed, dict) or "error" in parsed:
        return None
    text = parsed.get("text")
    if isinstance(text, str):
        return text
    segments = parsed.get("segments")
    if isinstance(segments, list) and segments:
        texts = [s.get("text") for s in segments if isinstance(s, dict)]
        if texts and all(isinstance(t, str) for t in texts):
            return "".join(t for t in texts if isinstance(t, str))
    return None


class _Errors:
    """Turns the SDK's errors for one audio endpoint into LLMError kinds, with advice that names
    the URL, the endpoint and the setting to change (never the key)."""

    _SETTING = {"transcription": "PAM_TRANSCRIPTION_MODEL", "speech": "PAM_SPEECH_MODEL"}

    def __init__(self, client: openai.OpenAI, task: str, endpoint: str, model: str) -> None:
        self.client = client
        self.task = task
        self.endpoint = endpoint
        self.model = model
        self._once = OnceLog(log)

    def rejected(self, exc: openai.APIStatusError) -> LLMError:
        """The LLMError for an HTTP error the SDK gave up on or never retries."""
        status, words = exc.status_code, error_words(exc.body)
        if (
            (status == 429 and exc.code != "insufficient_quota")
            or status >= 500
            or status in (408, 409)
        ):
            log.warning("Audio %s call failed: %s %s", self.task, status, type(exc).__name__)
            return Outage(f"{type(exc).__name__} ({status})")
        if status in (400, 413, 415, 422) and not self._about_setup(exc, words):
            # The server read the request and refused its content: the file (unsupported,
            # corrupt, too short) or the text. Asking again would get the same answer.
            log.warning("Audio %s call rejected (%s): %s", self.task, status, words)
            return Unusable(f"{type(exc).__name__} ({status}): {words}")
        advice = self._advice(status, exc.code, words)
        self._once.error(f"{status}", "Audio %s call rejected (%s): %s", self.task, status, advice)
        # OpenAI's 401 message quotes part of the key: it stays out of messages and logs.
        said = "" if status == 401 else f": {words}"
        return Misconfigured(f"{type(exc).__name__} ({status}){said}", advice)

    def outage(self, exc: openai.APIError) -> LLMError:
        """The LLMError for a request that got no answer at all."""
        log.warning("Audio %s call failed: %s", self.task, type(exc).__name__)
        advice = None
        if unreachable(exc):
            advice = (
                f"Pam cannot reach the audio server at {self._base_url()}: is it running, and "
                "is PAM_AUDIO_BASE_URL (or OPENAI_BASE_URL) right?"
            )
        return Outage(f"{type(exc).__name__}: {exc}", advice=advice)

    def _about_setup(self, exc: openai.APIStatusError, words: str) -> bool:
        """Whether a 4xx about the request's content is really about the configuration: an
        unknown model, or (for speech) a voice the server does not have."""
        lowered = words.lower()
        return (
            exc.code == "model_not_found"
            or ("model" in lowered and _says_not_found(lowered))
            or (self.task == "speech" and "voice" in lowered)
        )

    def _advice(self, status: int, code: str | None, words: str) -> str:
        """What an operator should do about a rejection."""
        base, setting = self._base_url(), self._SETTING[self.task]
        if status == 401:
            return (
                f"The audio server at {base} rejected the API key (401): check "
                "PAM_AUDIO_API_KEY / OPENAI_API_KEY."
            )
        if status == 402 or code == "insufficient_quota":
            return f"The audio account at {base} has no credit or quota left ({status}): top it up."
        if status == 403:
            return (
                f"The audio server at {base} refused access to model {self.model!r} (403): check "
                "PAM_AUDIO_API_KEY / OPENAI_API_KEY and the key's permissions."
            )
        lowered = words.lower()
        if self.task == "speech" and "voice" in lowered:
            return (
                f"The speech server at {base} refused the voice or model ({status}: {words}): "
                f"check PAM_SPEECH_VOICE and {setting}."
            )
        if code == "model_not_found" or ("model" in lowered and _says_not_found(lowered)):
            return (
                f"The audio server at {base} has no {self.task} model {self.model!r} ({status}): "
                f"check {setting}."
            )
        if status == 404:
            return (
                f"{base} answered 404 for {self.endpoint}: many chat servers have no audio API. "
                f"Set PAM_AUDIO_BASE_URL to a server with {self.endpoint} (OpenAI, speaches, "
                f"LocalAI), or {setting} to a model it serves."
            )
        return (
            f"The audio server at {base} rejected the {self.task} request for {self.model!r} "
            f"({status}): {words}"
        )

    def _base_url(self) -> str:
        """The audio API's base URL, as configured."""
        return str(self.client.base_url).rstrip("/")


def _says_not_found(text: str) -> bool:
    """Whether an error message says something does not exist."""
    return "not found" in text or "not exist" in text or "unknown model" in text
