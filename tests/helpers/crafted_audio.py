"""Hostile audio files for the tests of issue 27: each a real container's header followed by as
many empty elements (FLAC metadata blocks, WAV chunks, Ogg pages, ID3 tags, MP4 boxes, AIFF
chunks) as fit in `size` bytes, the shapes a tag reader walks one by one in pure Python. The
layouts are the formats' own: FLAC (xiph.org/flac/format.html, METADATA_BLOCK_HEADER), RIFF
WAVE, Ogg (RFC 3533) with Opus (RFC 7845), ID3v2.4 (id3.org, section 3.1), ISO 14496-12 boxes
and AIFF (FORM/COMM)."""

from __future__ import annotations

import struct
from collections.abc import Callable

from loopback.audio_samples import sample


def flac_of_empty_blocks(size: int) -> bytes:
    """A FLAC file whose STREAMINFO (1 s at 16 kHz) is followed by empty PADDING blocks, four
    bytes each, the last one marked last."""
    streaminfo = bytes(10) + ((16_000 << 44) | (0 << 41) | (15 << 36) | 16_000).to_bytes(8, "big")
    head = b"fLaC" + b"\x00" + (34).to_bytes(3, "big") + streaminfo + bytes(16)
    blocks = (size - len(head)) // 4
    return head + b"\x01\x00\x00\x00" * (blocks - 1) + b"\x81\x00\x00\x00"


def wav_of_tiny_chunks(size: int) -> bytes:
    """A WAV file whose "fmt " chunk is followed by empty chunks, eight bytes each, and 1 s of
    8 kHz 8-bit audio at the end."""
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8)
    audio = b"data" + struct.pack("<I", 8000) + bytes(8000)
    chunks = (size - 12 - len(fmt) - len(audio)) // 8
    body = b"WAVE" + fmt + b"junk\x00\x00\x00\x00" * chunks + audio
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _ogg_pages(serial: int, flags: int, granule: int, packet: bytes) -> bytes:
    """The Ogg pages of one packet, as many as it needs (255 segments of 255 bytes each at
    most); CRCs are left 0, as readers of the length do not check them."""
    pages, rest = [], packet
    while True:
        segments, rest = rest[: 255 * 255], rest[255 * 255 :]
        full, left = divmod(len(segments), 255)
        lacing = b"\xff" * full + (bytes([left]) if full < 255 else b"")
        continued = 0x01 if pages else 0
        last = full < 255 or not rest
        header = struct.pack(
            "<4sBBqIIIB", b"OggS", 0, flags | continued, granule if last else -1, serial,
            len(pages), 0, len(lacing),
        )  # fmt: skip
        pages.append(header + lacing + segments)
        if full < 255:
            return b"".join(pages)


def ogg_of_tiny_comments(size: int) -> bytes:
    """An Ogg/Opus file of 1 s whose OpusTags packet is `size` bytes of three-letter comments
    ("a=b"), seven bytes each, over as many pages as that takes: a reader of the tags walks
    every one."""
    head = _ogg_pages(1, 0x02, 0, b"OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00")
    count = int((size - len(head) - 64) / (1 + 282 / (255 * 255))) // 7  # room for page headers
    tags = b"OpusTags" + struct.pack("<I", 0) + struct.pack("<I", count) + b"\x03\0\0\0a=b" * count
    audio = _ogg_pages(1, 0x04, 48_000 + 312, b"\xfc\xff\xfe")  # one packet, end of stream
    return head + _ogg_pages(1, 0, 0, tags) + audio


def mp3_of_stacked_tags(size: int) -> bytes:
    """ID3v2 tag headers of one byte each, eleven bytes a tag, before the MP3 sample's frames
    (Windows Media Player stacks tags, so readers skip as many as they find)."""
    frames = sample("voice.mp3")
    tag = b"ID3\x04\x00\x00\x00\x00\x00\x01" + b"\x00"
    return tag * ((size - len(frames)) // len(tag)) + frames


def mp3_of_tiny_frames(size: int) -> bytes:
    """One ID3v2.4 tag of `size` bytes made of empty text frames (ten-byte headers, one byte of
    encoding each), before the MP3 sample's frames."""
    frames = sample("voice.mp3")
    frame = b"TXXX" + b"\x00\x00\x00\x01" + b"\x00\x00" + b"\x00"
    body = frame * ((size - len(frames) - 10) // len(frame))
    syncsafe = bytes((len(body) >> shift) & 0x7F for shift in (21, 14, 7, 0))
    return b"ID3\x04\x00\x00" + syncsafe + body + frames


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def mp4_of_empty_boxes(size: int) -> bytes:
    """An M4A file whose sound track's media information box holds empty "free" boxes, eight
    bytes each, before its sample table: a reader of every box walks them all."""
    hdlr = _box(b"hdlr", bytes(8) + b"soun" + bytes(12) + b"\x00")
    mdhd = _box(b"mdhd", bytes(12) + struct.pack(">II", 1000, 2000) + bytes(4))
    entry = _box(b"mp4a", bytes(6) + b"\x00\x01" + bytes(8) + b"\x00\x01\x00\x10" + bytes(4))
    stsd = _box(b"stsd", bytes(4) + struct.pack(">I", 1) + entry)
    stbl = _box(b"stbl", stsd)
    ftyp = _box(b"ftyp", b"M4A \x00\x00\x00\x00M4A isom")
    fixed = len(ftyp) + 8 * 4 + len(mdhd) + len(hdlr) + len(stbl)
    minf = _box(b"minf", _box(b"free", b"") * ((size - fixed - 8) // 8) + stbl)
    return ftyp + _box(b"moov", _box(b"trak", _box(b"mdia", mdhd + hdlr + minf)))


def aiff_of_tiny_chunks(size: int) -> bytes:
    """An AIFF file (a format the transcription API does not take) of a COMM chunk and empty
    chunks, eight bytes each: refusing it must not cost a walk of them first."""
    comm = b"COMM" + struct.pack(">IhIh", 18, 1, 8000, 16) + b"\x40\x0b\xfa" + bytes(7)
    chunks = (size - 12 - len(comm)) // 8
    body = b"AIFF" + comm + b"junk\x00\x00\x00\x00" * chunks
    return b"FORM" + struct.pack(">I", len(body)) + body


CRAFTED: dict[str, Callable[[int], bytes]] = {
    "flac": flac_of_empty_blocks,
    "wav": wav_of_tiny_chunks,
    "ogg": ogg_of_tiny_comments,
    "mp3-tags": mp3_of_stacked_tags,
    "mp3-frames": mp3_of_tiny_frames,
    "mp4": mp4_of_empty_boxes,
    "aiff": aiff_of_tiny_chunks,
}
