"""bot.voice.audio.inspect on real files: each sample's type, codec and length, the 10-minute note,
files as FFmpeg writes them read as a full tag reader reads them, and the refusals — empty,
random, truncated, AMR, a video without sound — never a crash; crafted files (issue 27) cost a
fraction of a second of CPU."""

from __future__ import annotations

import io
import math
import random
import struct
import time

import av
import mutagen
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.voice.audio import inspect
from bot.voice.audio_info import AudioInfo, NoSound, UnreadableAudio, UnsupportedAudio
from loopback.audio_samples import sample
from tests.helpers.crafted_audio import CRAFTED

SAMPLES = ["voice.ogg", "silence.ogg", "long.ogg", "voice.mp3", "voice.wav", "video_note.mp4"]


@pytest.mark.parametrize(
    ("name", "content_type", "extension", "codec", "seconds"),
    [
        ("voice.ogg", "audio/ogg", "ogg", "opus", 2.0),
        ("silence.ogg", "audio/ogg", "ogg", "opus", 2.0),
        ("voice.mp3", "audio/mpeg", "mp3", "mp3", 2.09),
        ("voice.wav", "audio/wav", "wav", "pcm", 1.0),
        # The AAC track's length (ffprobe: 2.064 s), not the 2 s video's.
        ("video_note.mp4", "video/mp4", "mp4", "aac", 2.06),
    ],
)
def test_each_sample_type_and_length(
    name: str, content_type: str, extension: str, codec: str, seconds: float
) -> None:
    info = inspect(sample(name), None)
    assert (info.content_type, info.extension, info.codec) == (content_type, extension, codec)
    assert info.seconds == pytest.approx(seconds, abs=0.1)


def test_ten_minute_note() -> None:
    assert inspect(sample("long.ogg"), "audio/ogg").seconds == pytest.approx(600, abs=0.1)


def test_the_bytes_win_over_the_declared_type() -> None:
    # Twilio passes on what the phone said; a platform may call an MP3 "audio/ogg".
    assert inspect(sample("voice.mp3"), "audio/ogg").content_type == "audio/mpeg"
    assert inspect(sample("voice.ogg"), "application/octet-stream").extension == "ogg"


def test_an_mp3_without_an_id3_tag() -> None:
    # The sample's frames without its 20-byte tag: what many phones' recorders write.
    assert inspect(sample("voice.mp3")[20:], None) == AudioInfo("audio/mpeg", "mp3", 2.088, "mp3")


def test_an_audio_only_mp4_is_m4a() -> None:
    # The video note's boxes with the video track's handler renamed: only sound is left.
    data = sample("video_note.mp4").replace(b"vide", b"hint")
    assert inspect(data, "audio/mp4") == AudioInfo("audio/mp4", "m4a", 2.064, "aac")


def test_empty_is_unreadable() -> None:
    with pytest.raises(UnreadableAudio, match="empty"):
        inspect(b"", "audio/ogg")


def test_random_bytes_are_unreadable() -> None:
    noise = random.Random(19).randbytes(4000)
    with pytest.raises(UnreadableAudio):
        inspect(noise, "audio/ogg")


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("keep", [4, 12, 40])
def test_a_truncated_header_is_unreadable(name: str, keep: int) -> None:
    with pytest.raises(UnreadableAudio):
        inspect(sample(name)[:keep], None)


def test_amr_is_unsupported_and_named() -> None:
    with pytest.raises(UnsupportedAudio, match="AMR-NB"):
        inspect(sample("voice.amr"), "audio/amr")


def test_a_video_without_sound_has_no_sound() -> None:
    with pytest.raises(NoSound, match="video"):
        inspect(sample("video_silent.mp4"), "video/mp4")


def test_unsupported_and_no_sound_are_unreadable() -> None:
    # The caller catches one kind for every "cannot transcribe this file".
    assert issubclass(UnsupportedAudio, UnreadableAudio)
    assert issubclass(NoSound, UnreadableAudio)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([*SAMPLES, "video_silent.mp4"]),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=8),
    cut=st.integers(0, 12000),
)
def test_hostile_bytes_never_crash(name: str, flips: list[tuple[int, int]], cut: int) -> None:
    """Corrupted headers and cut files: an AudioInfo or UnreadableAudio, nothing else."""
    data = bytearray(sample(name)[:cut])
    for at, value in flips:
        if at < len(data):
            data[at] = value
    try:
        info = inspect(bytes(data), None)
    except UnreadableAudio:
        return
    assert info.seconds > 0


# -- what every real file reads as: the same as a full tag reader ------------------------------


def _made_by_ffmpeg(container: str, codec: str, rate: int, layout: str) -> bytes:
    """Three seconds of a tone in `container` (an FFmpeg muxer's name), encoded with PyAV."""
    channels = 2 if layout == "stereo" else 1
    frames = rate * 3
    tone = (struct.pack("<h", int(8000 * math.sin(i * math.pi / 20))) * channels for i in range(40))
    pcm = (b"".join(tone) * (frames // 40 + 1))[: frames * 2 * channels]  # 40 frames a period
    out = io.BytesIO()
    with av.open(out, "w", format=container) as file:
        stream = file.add_stream(codec, rate=rate, layout=layout)
        frame = av.AudioFrame(format="s16", layout=layout, samples=frames)
        frame.planes[0].update(pcm)
        frame.sample_rate, frame.pts = rate, 0
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            file.mux(packet)
    return out.getvalue()


@pytest.mark.parametrize("layout", ["mono", "stereo"])
@pytest.mark.parametrize(
    ("container", "codec", "rate"),
    [
        ("ogg", "libopus", 48_000),
        ("ogg", "flac", 22_050),
        ("flac", "flac", 16_000),
        ("flac", "flac", 44_100),
        ("wav", "pcm_s16le", 8_000),
        ("wav", "pcm_s16le", 44_100),
        ("mp3", "libmp3lame", 16_000),
        ("mp3", "libmp3lame", 44_100),
        ("ipod", "aac", 44_100),  # M4A
        ("mp4", "aac", 48_000),
        ("mp4", "libopus", 48_000),
        ("mp4", "alac", 44_100),
        ("mov", "aac", 44_100),  # QuickTime's sound description has no esds where MP4's has
        ("3gp", "aac", 16_000),
    ],
)
def test_real_files_read_as_a_full_tag_reader_reads_them(
    container: str, codec: str, rate: int, layout: str
) -> None:
    """Pam reads only a few headers of each container (issue 27): the length it finds is the
    one mutagen's full reading finds, for files as FFmpeg writes them."""
    data = _made_by_ffmpeg(container, codec, rate, layout)
    reference = mutagen.File(io.BytesIO(data))
    assert reference is not None
    assert inspect(data, None).seconds == pytest.approx(reference.info.length, abs=1e-6)


# -- hostile files: a bounded cost, whatever their bytes (issue 27) ----------------------------

NOTE_CAP = 10_000_000  # PAM_VOICE_MAX_BYTES's default: the biggest note Pam downloads
CPU_BUDGET = 0.1  # seconds of this thread's CPU a note's reading may cost, at most


def _cpu_of_inspecting(data: bytes) -> tuple[float, AudioInfo | UnreadableAudio]:
    """The CPU time (this thread's, not the wall clock's) that reading `data` costs, and what
    it reads as."""
    started = time.thread_time()
    try:
        found: AudioInfo | UnreadableAudio = inspect(data, None)
    except UnreadableAudio as exc:
        found = exc
    return time.thread_time() - started, found


@pytest.mark.parametrize(
    ("shape", "read_as"),
    [
        ("flac", UnreadableAudio),
        ("wav", UnreadableAudio),
        ("mp4", UnreadableAudio),
        ("mp3-tags", UnreadableAudio),
        ("aiff", UnsupportedAudio),
        # Real metadata in bulk, skipped by its size: the note is read, at once.
        ("ogg", AudioInfo("audio/ogg", "ogg", 1.0, "opus")),
        ("mp3-frames", AudioInfo("audio/mpeg", "mp3", 2.088, "mp3")),
    ],
)
def test_a_crafted_note_costs_a_fraction_of_a_second_of_cpu(
    shape: str, read_as: AudioInfo | type[UnreadableAudio]
) -> None:
    """A note of empty elements up to the size cap: a tag reader spent 10 s of CPU on each."""
    cpu, found = _cpu_of_inspecting(CRAFTED[shape](NOTE_CAP))
    assert cpu < CPU_BUDGET
    if isinstance(read_as, AudioInfo):
        assert found == read_as
    else:
        assert type(found) is read_as


@settings(max_examples=60, deadline=None)
@given(
    shape=st.sampled_from(sorted(CRAFTED)),
    size=st.integers(200, 3_000_000),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6),
)
def test_crafted_shapes_of_any_size_cost_a_bounded_cpu(
    shape: str, size: int, flips: list[tuple[int, int]]
) -> None:
    """The crafted shapes at any size, their headers corrupted: an AudioInfo or UnreadableAudio,
    within the CPU budget."""
    data = bytearray(CRAFTED[shape](size))
    for at, value in flips:
        if at < len(data):
            data[at] = value
    cpu, found = _cpu_of_inspecting(bytes(data))
    assert cpu < CPU_BUDGET
    assert isinstance(found, UnreadableAudio) or found.seconds > 0
