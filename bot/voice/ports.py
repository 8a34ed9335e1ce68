"""The audio edge: the two calls voice needs of an OpenAI-compatible audio API, as small
interfaces — transcribing a voice note, and speaking a reply. `bot.llm.openai_audio` implements
both over the openai SDK; tests use fakes. Failures are memory.llm's LLMError kinds: an
Outage is tried again from the inbox, the rest are not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Transcript:
    """What the learner said, as the transcription model heard it ("" for silence), and the
    model that heard it."""

    text: str
    model: str


class Transcriber(Protocol):
    """Turns a voice note's audio into text."""

    def transcribe(
        self, audio: bytes, *, name: str, content_type: str, language: str | None
    ) -> Transcript:
        """The words in `audio` (a file called `name`, of `content_type`); `language`: the
        learner's target language as an ISO-639-1 code, a hint (None: let the model tell).
        Raises an LLMError kind."""
        ...


@dataclass(frozen=True)
class Speech:
    """A reply spoken: the audio as the speech server sent it (asked for OGG/Opus, what
    Telegram's sendVoice and WhatsApp's voice notes take; bot/voice/opus.py converts anything else),
    the type it declared ("" if none), and the model that spoke it."""

    audio: bytes
    content_type: str
    model: str


class Speaker(Protocol):
    """Turns a reply's text into speech."""

    def speak(self, text: str, *, language: str | None, speed: float = 1.0) -> Speech:
        """`text` spoken (in `language`, an ISO-639-1 code, where the model takes a hint), at
        `speed` (1.0 the voice's own pace, 0.8 slower: a learner asked to hear it again).
        Raises an LLMError kind."""
        ...
