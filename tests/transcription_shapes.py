"""Transcription answers in Whisper's verbose_json for noise, music and speech: the shape of
OpenAI's verbose_json object (the API reference for /audio/transcriptions; openai-python
types/audio/transcription_verbose.py) with the segment fields faster-whisper's `Segment` fills
(faster_whisper/transcribe.py: temperature, avg_logprob, compression_ratio, no_speech_prob).
NOISE carries the scores issue 26's run measured on background noise (a no-speech probability
near 0.6, an average log-probability under -1.7, a temperature fallback); the other scores are
typical values on either side of Whisper's own thresholds (bot/llm/transcripts.py)."""

from __future__ import annotations

from typing import Any

SAID = "Ayer yo es muy cansado porque trabajé mucho."


def segment(text: str, **scores: float) -> dict[str, Any]:
    """A verbose_json segment: the fields of OpenAI's TranscriptionSegment (the API reference's
    verbose_json object) as faster-whisper's Segment fills them; a clear voice unless
    `scores` say otherwise."""
    fields = {"temperature": 0.0, "avg_logprob": -0.25, "compression_ratio": 1.2}
    fields |= {"no_speech_prob": 0.02} | scores
    return {"id": 0, "seek": 0, "start": 0.0, "end": 2.0, "text": text, "tokens": [50364]} | fields


def verbose(*segments: dict[str, Any]) -> dict[str, Any]:
    """A verbose_json answer of `segments`, its `text` theirs joined (as servers write it)."""
    text = "".join(s["text"] for s in segments)
    return {
        "task": "transcribe",
        "language": "spanish",
        "duration": 6.0,
        "text": text,
        "segments": list(segments),
    }


# Whisper base on 6 s of background noise, as issue 26 measured it: a lone " y", no-speech
# probability about 0.6, average log-probability below -1.7, decoded after falling back to a
# higher temperature.
NOISE = verbose(segment(" y", no_speech_prob=0.62, avg_logprob=-1.74, temperature=0.4))
# ...and what it invents on other noise, with scores that pass (the sentence is known).
NOISE_OUTRO = verbose(
    segment(" Nos vemos en el próximo video.", no_speech_prob=0.55, avg_logprob=-0.9)
)
# Music: a chorus repeated, the way Whisper loops (compression ratio over 2.4).
MUSIC = verbose(
    segment(" La la la la la la la la la la la la la la la la la.", compression_ratio=3.1)
)
# Speech, then a second of silence Whisper wrote a word for.
SPEECH_THEN_SILENCE = verbose(
    segment(f" {SAID}"),
    segment(" Gracias.", no_speech_prob=0.91, avg_logprob=-1.31),
)
