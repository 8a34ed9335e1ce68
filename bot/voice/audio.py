"""Reading downloaded audio: which format a voice note (or a spoken reply) really is, and how
long it lasts, from its bytes. A platform's declared type is only a hint — Telegram calls every
voice note audio/ogg, Twilio passes on whatever the phone sent — so the container is read and
the type sent on to the transcription API is the one found.

A note is hostile input, so reading one has a bound on its work whatever its bytes: only the
headers that give the format and the length are read (an Ogg file's first page and one near
its end, FLAC's STREAMINFO, a few WAV chunks, the MP4 boxes on the way to the sound track, the
first MPEG frames), each walk with a cap on what it visits, and a file that needs more is
"unreadable". A general tag reader (mutagen's, before issue 27) walks every FLAC block, WAV
chunk, Ogg page, MP4 box and ID3 frame in pure Python, holding the GIL: a crafted 10 MB FLAC
cost it 8.6 s of CPU, and four such notes held every lane. mutagen still reads MPEG frames
(their headers and VBR tables), within a bounded window. What a reading gives or refuses is
bot/voice/audio_info.py's; the MP4 walk is bot/voice/audio_mp4.py's."""

from __future__ import annotations

import io
import logging
import struct
from typing import NamedTuple

from mutagen.mp3 import MPEGInfo

from bot.voice.audio_info import AudioInfo, UnreadableAudio, UnsupportedAudio, checked_length
from bot.voice.audio_mp4 import is_mp4, read_mp4

log = logging.getLogger(__name__)

# Formats known by their first bytes that OpenAI's /audio/transcriptions (flac, mp3, mp4, mpeg,
# mpga, m4a, ogg, wav, webm) does not take, or whose length Pam cannot read: WhatsApp sends AMR
# voice notes from some phones.
_MAGIC_UNSUPPORTED = {
    b"#!AMR\n": "AMR-NB",
    b"#!AMR-WB\n": "AMR-WB",
    b"#!AMR_MC1.0\n": "AMR-NB (multichannel)",
    b"#!AMR-WB_MC1.0\n": "AMR-WB (multichannel)",
    b"\x1a\x45\xdf\xa3": "Matroska/WebM (Pam cannot read its length)",
    b"FORM": "AIFF",
    b"\x30\x26\xb2\x75\x8e\x66\xcf\x11": "ASF (WMA)",
    b"ADIF": "AAC without a container (ADIF)",
    b"MAC ": "Monkey's Audio",
    b"wvpk": "WavPack",
    b"MPCK": "Musepack",
    b".snd": "Sun/NeXT audio",
}
# The first packet of an Ogg stream names its codec; those the API does not take.
_OGG_UNSUPPORTED = {b"Speex   ": "Speex", b"\x80theora": "Theora video", b"\x80kate": "Kate"}
# ADTS (AAC without a container) begins with 0xFFF and MPEG's reserved "layer 0".
_ADTS = (b"\xf0", b"\xf1", b"\xf8", b"\xf9")

# The caps on each walk. Real notes need a handful of each; a crafted file needs more and is
# refused before its walk costs more than a few milliseconds.
_MAX_BLOCKS = 32  # FLAC metadata blocks looked at, up to the audio
_MAX_CHUNKS = 64  # WAV chunks looked at before both "fmt " and "data" are found
_MAX_TAGS = 8  # ID3v2 tags skipped before an MP3's (or a FLAC's) audio (WMP stacks them)
_MPEG_WINDOW = 128 * 1024  # the bytes after the tags where the first MPEG frames must be
_OGG_TAIL = 64 * 1024  # where the Ogg stream's last page must start, from the file's end
_MAX_OGG_PAGES = 64  # candidate pages looked at in that tail


def inspect(data: bytes, content_type: str | None) -> AudioInfo:
    """The format and length of `data`, found from its bytes; `content_type` (what the platform
    declared) is only logged when it disagrees. Raises UnreadableAudio (or its kinds
    UnsupportedAudio, NoSound)."""
    if not data:
        raise UnreadableAudio("the file is empty")
    for magic, name in _MAGIC_UNSUPPORTED.items():
        if data.startswith(magic):
            raise UnsupportedAudio(f"{name} audio is not a format the transcription API takes")
    info = _read(data)
    if content_type and _major(content_type) not in (_major(info.content_type), "application"):
        log.debug("Audio declared as %s is %s", content_type, info.content_type)
    return info


def _read(data: bytes) -> AudioInfo:
    """The container's reading, chosen by its first bytes."""
    if data.startswith(b"OggS"):
        return _ogg(data)
    if data.startswith(b"RIFF") and data[8:12] == b"WAVE":
        return _wav(data)
    if is_mp4(data):
        return read_mp4(data)
    start = _after_id3(data)
    if data.startswith(b"fLaC", start):
        return _flac(data, start)
    if data[start : start + 1] == b"\xff" and data[start + 1 : start + 2] in _ADTS:
        raise UnsupportedAudio("AAC without a container (ADTS) is not a format the API takes")
    if start or _is_mpeg(data):
        return _mp3(data, start)
    raise UnreadableAudio("no audio format recognised in the bytes")


# Ogg (RFC 3533): Opus (RFC 7845), Vorbis, FLAC. The length is the last page's granule
# position, in samples at the codec's rate.


class _Page(NamedTuple):
    """An Ogg page's header: flags, granule position (-1: no packet ends on it), stream serial,
    and the lacing values and body of the page."""

    flags: int
    granule: int
    serial: int
    lacing: bytes
    body: bytes


_OGG_HEADER = struct.Struct("<4sBBqIIIB")  # capture, version, flags, granule, serial, seq, crc, n


def _ogg(data: bytes) -> AudioInfo:
    """An Ogg file's codec and length: its first page holds the codec's identification header
    (alone, as every mapping requires), its last page the stream's end."""
    first = _ogg_page(data, 0)
    if first is None or not first.flags & 0x02:  # "beginning of stream"
        raise UnreadableAudio("the Ogg file does not begin with a stream's first page")
    head = _first_packet(first)
    skip = 0
    if head.startswith(b"OpusHead") and len(head) >= 19 and head[8] >> 4 == 0:
        codec, rate, skip = "opus", 48_000, struct.unpack_from("<H", head, 10)[0]
    elif head.startswith(b"\x01vorbis") and len(head) >= 16:
        codec, rate = "vorbis", struct.unpack_from("<I", head, 12)[0]
    elif head.startswith(b"\x7fFLAC") and head[9:13] == b"fLaC":
        codec, rate = "flac", _streaminfo(head[17:])[0]
    else:
        name = next((n for m, n in _OGG_UNSUPPORTED.items() if head.startswith(m)), None)
        if name is not None:
            raise UnsupportedAudio(f"Ogg {name} is not a format the transcription API takes")
        raise UnreadableAudio("the Ogg stream's codec is not one Pam reads")
    if not rate:
        raise UnreadableAudio("the Ogg stream's sample rate is 0")
    return AudioInfo(
        "audio/ogg", "ogg", checked_length((_ogg_end(data, first.serial) - skip) / rate), codec
    )


def _ogg_page(data: bytes, at: int) -> _Page | None:
    """The whole Ogg page at `at`, or None when there is none (or it is cut short)."""
    if at + _OGG_HEADER.size > len(data):
        return None
    capture, version, flags, granule, serial, _, _, segments = _OGG_HEADER.unpack_from(data, at)
    lacing_at = at + _OGG_HEADER.size
    lacing = data[lacing_at : lacing_at + segments]
    body_at = lacing_at + segments
    if capture != b"OggS" or version != 0 or body_at + sum(lacing) > len(data):
        return None
    return _Page(flags, granule, serial, lacing, data[body_at : body_at + sum(lacing)])


def _first_packet(page: _Page) -> bytes:
    """The first packet of a page, which must end on it."""
    size = 0
    for value in page.lacing:
        size += value
        if value < 255:
            return page.body[:size]
    raise UnreadableAudio("the Ogg stream's first packet does not fit its first page")


def _ogg_end(data: bytes, serial: int) -> int:
    """The granule position of stream `serial`'s last page that ends a packet, looked for only
    near the file's end (a stream interleaved with another, or followed by another, is not a
    voice note)."""
    tail, at = max(0, len(data) - _OGG_TAIL), len(data)
    for _ in range(_MAX_OGG_PAGES):
        at = data.rfind(b"OggS", tail, at + 3)  # the last "OggS" that starts before `at`
        if at < 0:
            break
        page = _ogg_page(data, at)
        if page is not None and page.serial == serial and page.granule != -1:
            return page.granule
    raise UnreadableAudio("the end of the Ogg stream cannot be found")


# FLAC: its first metadata block is STREAMINFO, which holds the rate and the sample count.


def _flac(data: bytes, start: int) -> AudioInfo:
    """A FLAC file's length, from its STREAMINFO (the first metadata block); the others are
    skipped by their headers, up to the last one."""
    at = start + 4  # after "fLaC"
    if data[at : at + 1] not in (b"\x00", b"\x80") or at + 4 + 34 > len(data):
        raise UnreadableAudio("the FLAC file does not begin with its stream information")
    rate, samples = _streaminfo(data[at + 4 : at + 4 + 34])
    for _ in range(_MAX_BLOCKS):
        if at + 4 > len(data):
            raise UnreadableAudio("the FLAC file's metadata is cut short")
        last, size = data[at] & 0x80, int.from_bytes(data[at + 1 : at + 4], "big")
        at += 4 + size
        if last:
            break
    else:
        raise UnreadableAudio("the FLAC file has too many metadata blocks")
    if not rate:
        raise UnreadableAudio("the FLAC stream's sample rate is 0")
    return AudioInfo("audio/flac", "flac", checked_length(samples / rate), "flac")


def _streaminfo(block: bytes) -> tuple[int, int]:
    """FLAC's STREAMINFO: the sample rate (20 bits at byte 10, then channels, bits per sample)
    and the total number of samples (the 36 bits after)."""
    if len(block) < 18:
        raise UnreadableAudio("the FLAC stream information is cut short")
    packed = int.from_bytes(block[10:18], "big")
    return packed >> 44, packed & (1 << 36) - 1


# WAV (RIFF): the "fmt " chunk gives the rate and the bytes per sample frame, "data" the audio.


def _wav(data: bytes) -> AudioInfo:
    """A WAV file's length, from its "fmt " and "data" chunks."""
    fmt: bytes | None = None
    audio_bytes: int | None = None
    at, looked = 12, 0
    while at + 8 <= len(data) and (fmt is None or audio_bytes is None):
        looked += 1
        if looked > _MAX_CHUNKS:
            raise UnreadableAudio("the WAV file has too many chunks")
        name, size = struct.unpack_from("<4sI", data, at)
        if name == b"fmt ":
            fmt = data[at + 8 : at + 8 + size]
        elif name == b"data":  # a streamed WAV may claim more than it holds
            audio_bytes = min(size, len(data) - at - 8)
        at += 8 + size + (size & 1)  # chunks are padded to an even length
    if fmt is None or len(fmt) < 16 or audio_bytes is None:
        raise UnreadableAudio("the WAV file has no format or no data chunk")
    _, _, rate, _, frame_bytes, _ = struct.unpack_from("<HHIIHH", fmt)
    if not rate or not frame_bytes:
        raise UnreadableAudio("the WAV file's format is empty")
    return AudioInfo("audio/wav", "wav", checked_length(audio_bytes / frame_bytes / rate), "pcm")


# MPEG audio (MP3): mutagen reads the frame headers and the Xing/VBRI tables.


def _after_id3(data: bytes) -> int:
    """Where the audio begins after the ID3v2 tags at the start of `data` (an MP3 or a FLAC file
    may carry one; Windows Media Player stacks several)."""
    at = 0
    for _ in range(_MAX_TAGS):
        if not data.startswith(b"ID3", at):
            return at
        header = data[at : at + 10]
        if len(header) < 10 or any(b & 0x80 for b in header[6:10]):
            raise UnreadableAudio("the ID3 tag is cut short or corrupt")
        size = (header[6] << 21) | (header[7] << 14) | (header[8] << 7) | header[9]
        at += 10 + size + (10 if header[5] & 0x10 else 0)  # a footer follows the tag
    if data.startswith(b"ID3", at):
        raise UnreadableAudio("the file has too many ID3 tags")
    return at


def _is_mpeg(data: bytes) -> bool:
    """Whether `data` begins with what looks like an MPEG audio frame header (the frame sync,
    and a layer that exists)."""
    return len(data) >= 4 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0 and data[1] & 0x06 != 0


class _Window(io.BytesIO):
    """`data` as a file whose reads stop at `end` while its size stays all of it: mutagen looks
    for the first frames in what it can read, and times a file without a VBR table by its
    size."""

    def __init__(self, data: bytes, end: int) -> None:
        super().__init__(data)
        self.end = end

    def read(self, size: int | None = -1, /) -> bytes:
        left = max(0, self.end - self.tell())
        return super().read(left if size is None or size < 0 else min(size, left))


def _mp3(data: bytes, start: int) -> AudioInfo:
    """An MPEG audio file's length: its first frames must lie in the window after the tags."""
    try:
        stream = MPEGInfo(_Window(data, start + _MPEG_WINDOW), start)
    # Hostile frames fail inside mutagen in many ways (its own errors, struct.error,
    # IndexError...); none of them is Pam's bug, all mean unreadable.
    except Exception as exc:
        raise UnreadableAudio(f"no MPEG audio frames ({type(exc).__name__})") from exc
    if stream.sketchy:  # something like MPEG frames, which could not be confirmed: noise
        raise UnreadableAudio("no valid MPEG audio frames")
    return AudioInfo("audio/mpeg", "mp3", checked_length(float(stream.length)), "mp3")


def _major(content_type: str) -> str:
    """The major type of a MIME type ("audio" of "audio/ogg; codecs=opus")."""
    return content_type.split("/", 1)[0].strip().lower()
