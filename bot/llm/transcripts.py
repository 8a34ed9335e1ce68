"""Reading a transcription answer, and telling speech from silence in it. Whisper writes words
for notes without any: subtitle annotations ("[Music]"), and on noise whole sentences it learned
from the ends of videos ("Thanks for watching!"). Its verbose_json answer marks them: each
segment's no-speech probability, average log-probability, compression ratio and the temperature
it fell back to. Segments Whisper itself would have dropped are dropped here, and a transcript
left with nothing but an annotation or a known sentence of silence is silence ("")."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

# Whisper's own defaults (openai/whisper, whisper/transcribe.py, `transcribe`; faster-whisper's
# `WhisperModel.transcribe` has the same): a segment is silence when its no-speech probability
# passes 0.6 and its average log-probability is below -1.0 (no_speech_threshold together with
# logprob_threshold); a decode whose compression ratio passes 2.4 repeats itself (the
# hallucination check, compression_ratio_threshold); one below -1.0 failed the log-probability
# check and was decoded again at a higher temperature.
NO_SPEECH_THRESHOLD = 0.6
LOGPROB_THRESHOLD = -1.0
COMPRESSION_RATIO_THRESHOLD = 2.4

# What Whisper-family models write for a note without speech: a bracketed or parenthesised
# annotation ("[BLANK_AUDIO]", "[ Silence ]", "(silence)", "[Music]", "*music*") or music notes,
# nothing else. whisper.cpp writes "[BLANK_AUDIO]" (karansinghgit/speaktype#42 quotes it and
# "[SILENCE]"); Whisper's training subtitles taught it "[Music]" and "♪".
_ANNOTATION = re.compile(r"\[[^\[\]]*\]|\([^()]*\)|\*[^*]*\*|[♪♫🎵🎶]")
_NOTHING_LEFT = re.compile(r"[\s.,;:!?¡¿…\-–—]*")

# Whole transcripts Whisper invents for noise and silence, compared without case, accents or
# punctuation. Kept short: each is something a learner would hardly say as a whole voice note.
# "Nos vemos en el próximo video." and a lone "y": Whisper base on 6 s of background noise
# (issue 26's run against faster-whisper-server); "Thanks for watching!", "Subtítulos realizados
# por la comunidad de Amara.org" and "Gracias por ver el video.": openai/whisper discussion #928
# ("hallucination on audio with no speech") and the phrase lists of Vexa-ai/vexa#617.
SILENCE_SENTENCES = (
    "Nos vemos en el próximo video.",
    "y",
    "Thanks for watching!",
    "Thank you for watching.",
    "Subtítulos realizados por la comunidad de Amara.org",
    "Subtitles by the Amara.org community",
    "Gracias por ver el video.",
)


def _folded(text: str) -> str:
    """`text`'s letters and digits only, case and accents folded."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if ch.isalnum())


_SILENCE = frozenset(_folded(sentence) for sentence in SILENCE_SENTENCES)


def read_transcript(body: bytes, content_type: str | None) -> str | None:
    """The spoken words in a 200's body, or None when the body is no transcription (an HTML
    page, JSON without text, an error in the body). Takes every shape servers send: OpenAI's
    json and verbose_json (`text`; with `segments`, only those Whisper did not mark as silence
    or a hallucination), LocalAI's `segments` beside or instead of `text`, and a plain text
    body (servers that ignore response_format)."""
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
    write for silence and noise, or one of the sentences it invents for them."""
    text = text.strip()
    if _NOTHING_LEFT.fullmatch(_ANNOTATION.sub("", text)) or _folded(text) in _SILENCE:
        return ""
    return text


def is_silence(segment: dict[str, Any]) -> bool:
    """Whether Whisper marks a verbose_json segment as no speech or as a failed decode: silence
    (no-speech probability over NO_SPEECH_THRESHOLD with a log-probability under
    LOGPROB_THRESHOLD), repetition (compression ratio over COMPRESSION_RATIO_THRESHOLD), or a
    low-confidence decode even after falling back to a higher temperature. A segment without
    these fields (servers that send only times and text) is speech."""
    no_speech = _number(segment.get("no_speech_prob"))
    logprob = _number(segment.get("avg_logprob"))
    ratio = _number(segment.get("compression_ratio"))
    temperature = _number(segment.get("temperature"))
    unsure = logprob is not None and logprob < LOGPROB_THRESHOLD
    if no_speech is not None and no_speech > NO_SPEECH_THRESHOLD and unsure:
        return True
    if ratio is not None and ratio > COMPRESSION_RATIO_THRESHOLD:
        return True
    return unsure and temperature is not None and temperature > 0.0


def _number(value: object) -> float | None:
    """A segment's numeric field, None when missing or not a number (servers send strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _text_of(parsed: Any) -> str | None:
    """The transcript of a JSON answer: its segments' texts without the silent ones where
    Whisper scored them, else its `text`, else its segments' texts joined."""
    if isinstance(parsed, str):
        return parsed
    if not isinstance(parsed, dict) or "error" in parsed:
        return None
    text = parsed.get("text")
    segments = parsed.get("segments")
    if not isinstance(segments, list) or not segments:
        return text if isinstance(text, str) else None
    texts = _segment_texts(segments)
    if texts is not None and (not isinstance(text, str) or any(map(is_silence, segments))):
        return "".join(t for s, t in zip(segments, texts, strict=True) if not is_silence(s))
    return text if isinstance(text, str) else None


def _segment_texts(segments: list[Any]) -> list[str] | None:
    """Each segment's text, or None when any segment is not a dict with a text."""
    texts = [s.get("text") if isinstance(s, dict) else None for s in segments]
    return (
        [t for t in texts if isinstance(t, str)] if all(isinstance(t, str) for t in texts) else None
    )
