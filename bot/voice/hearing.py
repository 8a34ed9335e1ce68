"""The voice side of a turn: hearing a voice note (download it through its channel, check what
it is, transcribe it). Speaking a reply is not the turn's: bot/voice/speaking.py does it after the
text went out.

It runs in the worker, on the turn's lane. What can go wrong is expected: a note too long or
too big, a file that does not play, a video without sound, silence, an audio server that is
down. Each ends in a friendly word in the learner's native language (`NotHeard`), or — for an
outage the turn may still retry — in `HearingUnavailable`, which sends the message back to the
inbox."""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from bot import phrases
from bot.channels import VoiceFetcher, VoiceRefused, VoiceTooLarge, VoiceUnavailable
from bot.languages import iso_code
from bot.settings import VoiceSettings
from bot.voice.audio import inspect
from bot.voice.audio_info import NoSound, UnreadableAudio, UnsupportedAudio
from bot.voice.ports import Transcriber
from memory.database.records import CorrectionRecord
from memory.llm import LLMError, Misconfigured, Outage
from memory.messages import VoiceNote, clean_text
from memory.store.ledger import Ledger

log = logging.getLogger(__name__)

TRANSCRIPTION = "transcription"
HEARD_MARK = "🎙"
HEARD_CHARS = 160  # the "🎙 …" line shows at most this much of the transcript
# What a voice note Pam could not transcribe is kept as, in the conversation (marked
# `untranscribed`, so a re-run after a crash knows it was answered): the summary and the
# profile see that the learner sent one.
NOT_TRANSCRIBED = "🎙 (a voice note of {length}, not transcribed: {why})"
# Corrections of these kinds, in a transcript, are the transcriber's: it wrote the spelling
# and the punctuation, the learner only spoke.
TRANSCRIBERS_CATEGORIES = frozenset({"spelling", "punctuation"})


@dataclass(frozen=True)
class Heard:
    """A voice note transcribed: what the learner said, and how long it was."""

    text: str
    seconds: float


@dataclass(frozen=True)
class NotHeard:
    """A voice note Pam could not transcribe: why (for the log and the note kept), what to
    tell the learner (in their native language), its length if known, and what an operator
    should know (a misconfigured audio server; shown by `pam chat`, never to a learner)."""

    why: str
    said: str
    seconds: float | None = None
    problem: str | None = None

    def kept(self) -> str:
        """The learner message this note is kept as."""
        return NOT_TRANSCRIBED.format(length=length_of(self.seconds), why=self.why)


class HearingUnavailable(Exception):
    """The download or the transcription failed for now (an outage) and the turn can be tried
    again later: nothing was stored, the note stays in the inbox."""


def length_of(seconds: float | None) -> str:
    """A note's length as people say it: "0:42", "10:00"; "unknown length"."""
    if seconds is None:
        return "unknown length"
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def heard_line(text: str) -> str:
    """The line that shows the learner what Pam heard: "🎙 …", cut at a word."""
    words = " ".join(text.split())
    if len(words) > HEARD_CHARS:
        words = words[:HEARD_CHARS].rsplit(" ", 1)[0] + "…"
    return f"{HEARD_MARK} “{words}”"


def _letters(text: str) -> str:
    """`text`'s letters and digits only, case and accents folded: what speech carries."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if ch.isalnum())


def spoken_corrections(found: Sequence[CorrectionRecord]) -> list[CorrectionRecord]:
    """The corrections of a transcript that are about what the learner said: not spelling or
    punctuation (the transcriber's), and not a change of case, accents or punctuation alone."""
    return [
        c
        for c in found
        if c.category.lower() not in TRANSCRIBERS_CATEGORIES
        and _letters(c.original) != _letters(c.corrected)
    ]


class Hearing:
    """Voice notes in: fetched through their channel, checked, transcribed with `transcriber`
    (None: voice notes are off), the seconds heard recorded in `ledger`."""

    def __init__(
        self, transcriber: Transcriber | None, settings: VoiceSettings, ledger: Ledger
    ) -> None:
        self.transcriber = transcriber if settings.voice_notes else None
        self.settings = settings
        self.ledger = ledger

    @property
    def enabled(self) -> bool:
        """Whether voice notes are transcribed at all."""
        return self.transcriber is not None

    def hear(
        self,
        learner_id: int,
        language: str | None,
        note: VoiceNote,
        fetcher: VoiceFetcher | None,
        *,
        can_retry: bool,
        native: str | None = None,
    ) -> Heard | NotHeard:
        """What the learner said in `note` (in `language`, the target language, a hint to the
        transcriber), or why Pam could not hear it, said in `native`, the learner's native
        language. Raises HearingUnavailable when an outage may pass and `can_retry`."""
        settings = self.settings
        if self.transcriber is None or fetcher is None:  # off, or a channel without downloads
            return NotHeard("voice notes are off", phrases.not_text("voice", native))
        if note.seconds is not None and note.seconds > settings.voice_max_seconds:
            return self._too_long(note.seconds, native)
        if note.size is not None and note.size > settings.voice_max_bytes:
            return self._too_big(note, native)
        started = time.monotonic()
        try:
            audio = fetcher.fetch_voice(note, settings.voice_max_bytes)
        except VoiceTooLarge:
            return self._too_big(note, native)
        except VoiceRefused as exc:
            log.warning("voice note refused learner=%s: %s", learner_id, exc)
            return NotHeard("could not be fetched", _said(phrases.VOICE_UNREADABLE, native))
        except VoiceUnavailable as exc:
            return self._unavailable(learner_id, f"download failed: {exc}", native, can_retry)
        try:
            info = inspect(audio.data, audio.content_type or note.content_type)
        except NoSound:
            return NotHeard("no sound", _said(phrases.VOICE_NO_SOUND, native), note.seconds)
        except UnsupportedAudio as exc:
            log.info("voice note unsupported learner=%s: %s", learner_id, exc)
            return NotHeard("unsupported format", _said(phrases.VOICE_UNREADABLE, native))
        except UnreadableAudio:
            return NotHeard("unreadable", _said(phrases.VOICE_UNREADABLE, native), note.seconds)
        if info.seconds > settings.voice_max_seconds:
            return self._too_long(info.seconds, native)
        name = f"{audio.name.rsplit('.', 1)[0] or 'voice'}.{info.extension}"
        try:
            transcript = self.transcriber.transcribe(
                audio.data, name=name, content_type=info.content_type, language=iso_code(language)
            )
        except LLMError as exc:
            return self._transcription_failed(learner_id, exc, info.seconds, native, can_retry)
        tokens = round(info.seconds * settings.transcription_tokens_per_second)
        self.ledger.record_audio(
            learner_id, transcript.model, TRANSCRIPTION, tokens, seconds=info.seconds
        )
        log.info(
            "voice note heard learner=%s seconds=%.1f bytes=%d chars=%d ms=%d",
            learner_id,
            info.seconds,
            len(audio.data),
            len(transcript.text),
            (time.monotonic() - started) * 1000,
        )
        said = clean_text(transcript.text)  # the transcriber's text is untrusted, like typed text
        if not said:
            return NotHeard("silence", _said(phrases.VOICE_SILENT, native), info.seconds)
        return Heard(said, info.seconds)

    def _too_long_said(self, native: str | None) -> str:
        minutes = max(1, self.settings.voice_max_seconds // 60)
        return phrases.said(phrases.VOICE_TOO_LONG, native, minutes=minutes)

    def _too_big(self, note: VoiceNote, native: str | None) -> NotHeard:
        return NotHeard("too big", self._too_long_said(native), note.seconds)

    def _too_long(self, seconds: float, native: str | None) -> NotHeard:
        return NotHeard("too long", self._too_long_said(native), seconds)

    def _unavailable(
        self, learner_id: int, why: str, native: str | None, can_retry: bool
    ) -> NotHeard:
        """An outage: raised to retry while the turn can, else the apology."""
        if can_retry:
            raise HearingUnavailable(why)
        log.warning("voice note given up learner=%s: %s", learner_id, why)
        return NotHeard("the audio service failed", _said(phrases.VOICE_FAILED, native))

    def _transcription_failed(
        self,
        learner_id: int,
        exc: LLMError,
        seconds: float,
        native: str | None,
        can_retry: bool,
    ) -> NotHeard:
        """The transcription model gave no transcript. An outage, or a configuration an
        operator may fix, is retried while the turn can, then apologised for; an answer that
        is no transcript (the server could not read the file) gets a word at once."""
        if isinstance(exc, Misconfigured):
            log.warning("voice transcription misconfigured: %s", exc.advice)
        if isinstance(exc, Outage | Misconfigured):
            failed = self._unavailable(learner_id, f"transcription: {exc}", native, can_retry)
            return NotHeard(failed.why, failed.said, seconds, problem=exc.advice)
        log.warning("voice note not transcribed learner=%s: %s", learner_id, type(exc).__name__)
        said = _said(phrases.VOICE_UNREADABLE, native)
        return NotHeard("the transcription failed", said, seconds)


def _said(text: str, native: str | None) -> str:
    return phrases.said(text, native)
