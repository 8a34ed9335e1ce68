"""Reading an MP4 note (ISO base media file format: MP4, M4A, 3GP, MOV): whether it has a
sound track, what codec that track holds and how long it lasts. The box walk has a cap on the
boxes it visits, as every reading of bot/voice/audio.py has on its walk (a note is hostile
input)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from bot.voice.audio_info import AudioInfo, NoSound, UnreadableAudio, checked_length

# MP4's names of AAC (RFC 6381 codecs: MPEG-4 audio object types 2, 5 and 29: LC, HE, HE v2).
_AAC = {"mp4a.40.2": "aac", "mp4a.40.5": "aac", "mp4a.40.29": "aac"}
# The cap on the walk: a real note has a handful of boxes on the way to its tracks; a crafted
# file of many more is refused before its walk costs more than a few milliseconds.
_MAX_BOXES = 256  # boxes looked at, in all


def is_mp4(data: bytes) -> bool:
    """Whether `data` begins as an ISO base media file (MP4, M4A, 3GP, MOV)."""
    return data[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")


def read_mp4(data: bytes) -> AudioInfo:
    """An MP4 file's format and length: a video (a video note) only when it has a sound track,
    an audio-only file as M4A. The first sound track is read, as players do (its media header's
    length, not the movie's: the AAC track of a video note outlasts its video)."""
    boxes = _Boxes(data)
    handlers, sound = set(), None
    moov = boxes.first(0, len(data), b"moov")
    for trak in boxes.each(*moov, b"trak") if moov else ():
        mdia = boxes.first(*trak, b"mdia")
        hdlr = boxes.first(*mdia, b"hdlr") if mdia else None
        # A full box: version and flags, pre_defined, then the handler type.
        handler = data[hdlr[0] + 8 : hdlr[0] + 12] if hdlr and hdlr[1] - hdlr[0] >= 12 else b""
        handlers.add(handler)
        if handler == b"soun" and sound is None:
            sound = mdia
    if sound is None:
        kind = "video" if b"vide" in handlers else "MP4 file"
        raise NoSound(f"the {kind} has no audio track")
    codec = _mp4_codec(boxes, boxes.first(*sound, b"minf", b"stbl", b"stsd"))
    seconds = checked_length(_mp4_length(data, boxes.first(*sound, b"mdhd")))
    if b"vide" in handlers:
        return AudioInfo("video/mp4", "mp4", seconds, codec)
    return AudioInfo("audio/mp4", "m4a", seconds, codec)


class _Boxes:
    """A walk over an MP4 file's boxes that looks at _MAX_BOXES of them at most, in all: a
    hostile file of a million empty boxes is refused, not walked."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.seen = 0

    def each(self, start: int, end: int, kind: bytes) -> Iterator[tuple[int, int]]:
        """The (start, end) of the payloads of the boxes of type `kind` between `start` and
        `end`. Raises UnreadableAudio for a box that runs past its parent."""
        data, at = self.data, start
        while at + 8 <= end:
            self.seen += 1
            if self.seen > _MAX_BOXES:
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

    def first(self, start: int, end: int, *path: bytes) -> tuple[int, int] | None:
        """The payload of the first box at `path` (b"minf", b"stbl", ...) under `start`-`end`."""
        found: tuple[int, int] | None = (start, end)
        for kind in path:
            found = next(self.each(*found, kind), None) if found else None
        return found


def _mp4_length(data: bytes, mdhd: tuple[int, int] | None) -> float:
    """The track's length from its media header (ISO 14496-12 8.4.2): duration / timescale."""
    if mdhd is None:
        raise UnreadableAudio("the MP4 file's audio track has no media header")
    start, end = mdhd
    version = data[start]
    layout = {0: (start + 12, ">II"), 1: (start + 20, ">IQ")}.get(version)
    if layout is None or layout[0] + struct.calcsize(layout[1]) > end:
        raise UnreadableAudio("the MP4 file's media header cannot be read")
    timescale, duration = struct.unpack_from(layout[1], data, layout[0])
    return duration / timescale if timescale else 0.0


def _mp4_codec(boxes: _Boxes, stsd: tuple[int, int] | None) -> str:
    """What the track's first sample entry holds (ISO 14496-12 8.5.2): its name, and for AAC
    the RFC 6381 codec ("mp4a.40.2") mapped to "aac"."""
    data = boxes.data
    if stsd is None or stsd[1] - stsd[0] < 16 or not struct.unpack_from(">I", data, stsd[0] + 4)[0]:
        raise UnreadableAudio("the MP4 file's audio track cannot be read")
    entry_size, name = struct.unpack_from(">I4s", data, stsd[0] + 8)  # after version, count
    codec: str = name.decode("latin-1")
    # An AudioSampleEntry's 28 bytes of fields, then (for AAC) its esds box; QuickTime's
    # longer sound descriptions have none there, and are named "mp4a" alone.
    at, end = stsd[0] + 16 + 28, min(stsd[0] + 8 + entry_size, stsd[1])
    if name == b"mp4a" and at + 8 <= end:
        size, child = struct.unpack_from(">I4s", data, at)
        if child == b"esds" and 8 <= size <= end - at:
            codec += _esds_codec(data[at + 8 : at + size])
    return _AAC.get(codec, codec)


def _esds_codec(esds: bytes) -> str:
    """The RFC 6381 suffix of an MPEG-4 audio track (".40.2": object type 0x40, audio object
    type 2), from its ES descriptor (ISO 14496-1 7.2.6); what it does not say is left out."""
    es = _descriptor(esds, 4, 0x03)  # after the full box's version and flags
    if es is None or es[1] - es[0] < 3:
        return ""
    flags, at = esds[es[0] + 2], es[0] + 3
    at += 2 if flags & 0x80 else 0  # streamDependenceFlag: dependsOn_ES_ID
    if flags & 0x40 and at < len(esds):  # URL_Flag: a counted URL
        at += 1 + esds[at]
    at += 2 if flags & 0x20 else 0  # OCRstreamFlag: OCR_ES_Id
    config = _descriptor(esds, at, 0x04)
    if config is None or config[1] - config[0] < 2:
        return ""
    object_type, stream_type = esds[config[0]], esds[config[0] + 1] >> 2
    suffix = f".{object_type:X}"
    info = _descriptor(esds, config[0] + 13, 0x05)
    if (object_type, stream_type) == (0x40, 0x05) and info is not None and info[1] > info[0]:
        audio_type = esds[info[0]] >> 3  # AudioSpecificConfig (ISO 14496-3 1.6.2.1)
        if audio_type == 31 and info[1] - info[0] >= 2:  # escaped: 32 + the next 6 bits
            audio_type = 32 + ((esds[info[0]] & 0x07) << 3 | esds[info[0] + 1] >> 5)
        suffix += f".{audio_type}"
    return suffix


def _descriptor(data: bytes, at: int, tag: int) -> tuple[int, int] | None:
    """The (start, end) of the payload of the MPEG-4 descriptor at `at` when its tag is `tag`:
    a tag byte, then a length in 1 to 4 bytes of 7 bits."""
    if at >= len(data) or data[at] != tag:
        return None
    length = 0
    for size in range(1, 5):
        if at + size >= len(data):
            return None
        length = length << 7 | data[at + size] & 0x7F
        if not data[at + size] & 0x80:
            start = at + size + 1
            return start, min(start + length, len(data))
    return None
