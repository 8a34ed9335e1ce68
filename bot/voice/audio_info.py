"""What reading a note's bytes gives (its type, extension, length and codec) or refuses
(unreadable, unsupported, soundless), shared by the container readers: bot/voice/audio.py and
bot/voice/audio_mp4.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AudioInfo:
    """What the transcription request needs of a file: the type to send it as ("audio/ogg",
    "audio/mpeg", "video/mp4", ...), its file extension ("ogg", "mp3", "mp4", "m4a", "wav",
    "flac") and its length in seconds, from the container. `codec`: what the audio inside is
    ("opus", "vorbis", "mp3", "aac", "pcm", "flac", or the MP4 sample entry's name) — a spoken
    reply must be Opus, not merely Ogg."""

    content_type: str
    extension: str
    seconds: float
    codec: str = ""


class UnreadableAudio(ValueError):
    """The bytes are no audio the transcription API takes: empty, corrupt, truncated, crafted
    to cost more than a note's reading may, or a format it lacks."""


class UnsupportedAudio(UnreadableAudio):
    """A real audio format the transcription API does not take (AMR, AAC without a container,
    WMA, ...); the message names it."""


class NoSound(UnreadableAudio):
    """A video (a video note) without an audio track: there is nothing to hear."""


def checked_length(seconds: float) -> float:
    """A length read from a header; refused when the container holds no audio at all."""
    if not seconds > 0.0 or seconds == float("inf"):
        raise UnreadableAudio("the file holds no audio (its length is 0)")
    return seconds
