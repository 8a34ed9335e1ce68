"""bot.audio.inspect on real files: each sample's type, codec and length, the 10-minute note,
and the refusals — empty, random, truncated, AMR, a video without sound — never a crash."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.audio import AudioInfo, NoSound, UnreadableAudio, UnsupportedAudio, inspect
from loopback.audio_samples import sample

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
