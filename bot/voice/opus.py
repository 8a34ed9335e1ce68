"""Spoken replies as the platforms take them: OGG/Opus (Telegram's sendVoice, WhatsApp's
audio/ogg voice notes). Many speech servers answer WAV or MP3 whatever `response_format` says;
their audio is converted here with PyAV (FFmpeg's libraries, shipped in its wheel: no system
ffmpeg), and every result is checked, by reading its container (bot/voice/audio.py), to be Opus."""

from __future__ import annotations

import io

from bot.voice.audio import inspect
from bot.voice.audio_info import AudioInfo, UnreadableAudio

OGG = "audio/ogg"
# Opus codes at 48 kHz in frames of 20 ms; one voice is mono; 32 kbit/s is clear speech (what
# WhatsApp's own voice notes use, roughly).
RATE, FRAME, BIT_RATE = 48_000, 960, 32_000
# A spoken reply is at most PAM_SPEECH_MAX_CHARS (≤ 4096) characters, a few minutes spoken: an
# answer much longer than that is no reply's speech, and its decoding stops there.
MAX_SECONDS = 900.0


def ogg_opus(data: bytes, content_type: str | None = None) -> tuple[bytes, AudioInfo]:
    """`data` (any audio: OGG/Opus, WAV, MP3, FLAC, ...) as OGG/Opus, and what it is. Audio
    that is OGG/Opus already is kept as it came. Raises UnreadableAudio when it cannot be
    converted (no audio in it, a format FFmpeg does not read, too long)."""
    try:
        info = inspect(data, content_type)
    except UnreadableAudio:
        info = None  # Pam reads fewer formats than FFmpeg does: try it
    if info is not None and info.codec == "opus" and info.content_type == OGG:
        return data, info
    converted = _convert(data)
    try:
        info = inspect(converted, OGG)
    except UnreadableAudio as exc:
        raise UnreadableAudio(f"the converted audio cannot be read back ({exc})") from exc
    if info.codec != "opus" or info.content_type != OGG:  # FFmpeg was asked for nothing else
        raise UnreadableAudio(f"the conversion made {info.codec} in {info.extension}, not Opus")
    return converted, info


def _convert(data: bytes) -> bytes:
    """The first audio stream of `data`, encoded as mono Opus in an Ogg container."""
    # Imported here: FFmpeg's libraries take ~25 MB of memory, paid only by a worker whose
    # speech server does not answer Opus (the web process and `pam chat` rarely need them).
    import av
    import av.error

    out = io.BytesIO()
    try:
        with av.open(io.BytesIO(data), "r") as source:
            if not source.streams.audio:
                raise UnreadableAudio("the speech server's answer has no audio stream")
            stream = source.streams.audio[0]
            with av.open(out, "w", format="ogg") as target:
                opus = target.add_stream("libopus", rate=RATE, layout="mono")
                opus.bit_rate = BIT_RATE
                resampler = av.AudioResampler("s16", "mono", RATE, frame_size=FRAME)
                samples = 0
                # The demuxer ends with an empty packet, which flushes the decoder.
                for frame in (f for p in source.demux(stream) for f in stream.decode(p)):
                    samples += frame.samples
                    if samples > MAX_SECONDS * frame.sample_rate:
                        raise UnreadableAudio(f"the audio lasts more than {MAX_SECONDS:g} s")
                    for resampled in resampler.resample(frame):
                        target.mux(opus.encode(resampled))
                for resampled in resampler.resample(None):  # what the resampler still holds
                    target.mux(opus.encode(resampled))
                target.mux(opus.encode(None))  # and the encoder
    # FFmpeg's errors (no format recognised, corrupt data) and PyAV's own on odd streams.
    except (av.error.FFmpegError, ValueError) as exc:
        if isinstance(exc, UnreadableAudio):
            raise
        raise UnreadableAudio(f"FFmpeg cannot read it ({type(exc).__name__})") from exc
    if samples == 0:
        raise UnreadableAudio("the speech server's answer holds no sound")
    return out.getvalue()
