"""Reading downloaded audio: which format a voice note (or a spoken reply) really is, and how
long it lasts, from its bytes. A platform's declared type is only a hint — Telegram calls every
voice note audio/ogg, Twilio passes on whatever the phone sent — so the container is read
(with mutagen) and the type sent on to the transcription API is the one found."""

from __future__ import annotations

import io
import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import mutagen
from mutagen.flac import FLAC
from mutagen.mp3 import MP3
from mutagen.mp4 import MP4
from mutagen.oggflac import OggFLAC
from mutagen.oggopus import OggOpus
from mutagen.oggvorbis import OggVorbis
from mutagen.wave import WAVE

log = logging.getLogger(__name__)

# The formats mutagen reads that OpenAI's /audio/transcriptions takes (flac, mp3, mp4, mpeg,
# mpga, m4a, ogg, wav, webm): type, file extension and codec of each.
_TAKEN: dict[type[mutagen.FileType], tuple[str, str, str]] = {
    OggOpus: ("audio/ogg", "ogg", "opus"),
    OggVorbis: ("audio/ogg", "ogg", "vorbis"),
    OggFLAC: ("audio/ogg", "ogg", "flac"),
    MP3: ("audio/mpeg", "mp3", "mp3"),
    WAVE: ("audio/wav", "wav", "pcm"),
    FLAC: ("audio/flac", "flac", "flac"),
}
# Formats known by their first bytes that the API does not take (mutagen reads none of them
# as audio it can time): WhatsApp sends AMR voice notes from some phones.
_MAGIC_UNSUPPORTED = {
    b"#!AMR\n": "AMR-NB",
    b"#!AMR-WB\n": "AMR-WB",
    b"#!AMR_MC1.0\n": "AMR-NB (multichannel)",
    b"#!AMR-WB_MC1.0\n": "AMR-WB (multichannel)",
    b"\x1a\x45\xdf\xa3": "Matroska/WebM (Pam cannot read its length)",
}
# MP4's names of AAC (RFC 6381 codecs: MPEG-4 audio object types 2, 5 and 29: LC, HE, HE v2).
_AAC = {"mp4a.40.2": "aac", "mp4a.40.5": "aac", "mp4a.40.29": "aac"}
# How many MP4 boxes are looked at, at most, while looking for the tracks: a hostile file of
# a million empty boxes is refused, not walked.
_MAX_BOXES = 256


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
    """The bytes are no audio the transcription API takes: empty, corrupt, truncated, or a
    format it lacks."""


class UnsupportedAudio(UnreadableAudio):
    """A real audio format the transcription API does not take (AMR, AAC without a container,
    WMA, ...); the message names it."""


class NoSound(UnreadableAudio):
    """A video (a video note) without an audio track: there is nothing to hear."""


def inspect(data: bytes, content_type: str | None) -> AudioInfo:
    """The format and length of `data`, found from its bytes; `content_type` (what the platform
    declared) is only logged when it disagrees. Raises UnreadableAudio (or its kinds
    UnsupportedAudio, NoSound)."""
    if not data:
        raise UnreadableAudio("the file is empty")
    for magic, name in _MAGIC_UNSUPPORTED.items():
        if data.startswith(magic):
            raise UnsupportedAudio(f"{name} audio is not a format the transcription API takes")
    info = _mp4(data) if _is_mp4(data) else _read(data)
    if content_type and _major(content_type) not in (_major(info.content_type), "application"):
        log.debug("Audio declared as %s is %s", content_type, info.content_type)
    return info


def _read(data: bytes) -> AudioInfo:
    """A non-MP4 file's format and length, as mutagen reads them."""
    file = _mutagen(data)
    if file is None:
        raise UnreadableAudio("no audio format recognised in the bytes")
    taken = _TAKEN.get(type(file))
    if taken is None:
        raise UnsupportedAudio(
            f"{type(file).__name__} audio is not a format the transcription API takes"
        )
    if isinstance(file, MP3) and _stream(file).sketchy:
        # mutagen found something like MPEG frames but could not confirm them: noise.
        raise UnreadableAudio("no valid MPEG audio frames")
    content_type, extension, codec = taken
    return AudioInfo(content_type, extension, _length(file), codec)


def _mp4(data: bytes) -> AudioInfo:
    """An MP4 file's format and length: a video (a video note) only when it has a sound track,
    an audio-only file as M4A."""
    handlers = _mp4_handlers(data)
    if b"soun" not in handlers:
        kind = "video" if b"vide" in handlers else "MP4 file"
        raise NoSound(f"the {kind} has no audio track")
    file = _mutagen(data)
    if not isinstance(file, MP4) or not _stream(file).codec:
        raise UnreadableAudio("the MP4 file's audio track cannot be read")
    codec = _AAC.get(_stream(file).codec, _stream(file).codec)
    seconds = _length(file)
    if b"vide" in handlers:
        return AudioInfo("video/mp4", "mp4", seconds, codec)
    return AudioInfo("audio/mp4", "m4a", seconds, codec)


def _mutagen(data: bytes) -> mutagen.FileType | None:
    """mutagen's reading of `data`, or None for no format it knows. Raises UnreadableAudio for
    what it cannot parse."""
    try:
        found: mutagen.FileType | None = mutagen.File(io.BytesIO(data))
        return found
    # Hostile or broken input fails deep inside mutagen's parsers in many ways (its own errors,
    # struct.error, IndexError, ValueError...); none of them is Pam's bug, all mean unreadable.
    except Exception as exc:
        raise UnreadableAudio(f"the audio cannot be read ({type(exc).__name__})") from exc


def _length(file: mutagen.FileType) -> float:
    """The file's length in seconds; refused when the container holds no audio at all."""
    seconds = float(_stream(file).length or 0.0)
    if not seconds > 0.0 or seconds == float("inf"):
        raise UnreadableAudio("the file holds no audio (its length is 0)")
    return seconds


def _stream(file: mutagen.FileType) -> Any:
    """mutagen's stream information of a file it read (typed as None on FileType)."""
    return file.info


def _is_mp4(data: bytes) -> bool:
    """Whether `data` begins as an ISO base media file (MP4, M4A, 3GP, MOV)."""
    return data[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")


def _mp4_handlers(data: bytes) -> set[bytes]:
    """The handler types of the MP4 file's tracks (b"soun", b"vide", ...): moov/trak/mdia/hdlr,
    walked here because mutagen times a file without a sound track by its movie header instead
    of saying it has none."""
    handlers = set()
    for moov in _boxes(data, 0, len(data), b"moov"):
        for trak in _boxes(data, *moov, b"trak"):
            for mdia in _boxes(data, *trak, b"mdia"):
                for start, end in _boxes(data, *mdia, b"hdlr"):
                    # A full box: version and flags, pre_defined, then the handler type.
                    if end - start >= 12:
                        handlers.add(data[start + 8 : start + 12])
    return handlers


def _boxes(data: bytes, start: int, end: int, kind: bytes) -> Iterator[tuple[int, int]]:
    """The (start, end) of the payloads of the boxes of type `kind` between `start` and `end`.
    Raises UnreadableAudio for a box that runs past its parent."""
    at, seen = start, 0
    while at + 8 <= end:
        seen += 1
        if seen > _MAX_BOXES:
            raise UnreadableAudio("the MP4 file has too many boxes")
        size, name = struct.unpack_from(">I4s", data, at)
        header = 8
        if size == 1:  # a 64-bit size follows the type
            if at + 16 > end:
                raise UnreadableAudio("the MP4 file is truncated")
            (size,) = struct.unpack_from(">Q", data, at + 8)
            header = 16
        elif size == 0:  # the box runs to the end of its parent
            size = end - at
        if size < header or at + size > end:
            raise UnreadableAudio("the MP4 file is truncated or corrupt")
        if name == kind:
            yield at + header, at + size
        at += size


def _major(content_type: str) -> str:
    """The major type of a MIME type ("audio" of "audio/ogg; codecs=opus")."""
    return content_type.split("/", 1)[0].strip().lower()
