"""Small real audio files for tests and the fake speech endpoint, read by name from
loopback/samples/ (made once with espeak-ng and ffmpeg; CI needs neither). loopback is not an
installed package: the files are read from the repository, never packaged.

- voice.ogg: ~2 s of Spanish speech, OGG/Opus (a Telegram or WhatsApp voice note)
- silence.ogg: 2 s of silence, OGG/Opus
- long.ogg: 10 minutes of silence, OGG/Opus at a low bitrate
- voice.mp3: ~2 s of speech, MP3
- voice.wav: 1 s of speech, 8 kHz 8-bit PCM WAV
- video_note.mp4: a 2 s square H.264 video with an AAC audio track (a Telegram video note)
- video_silent.mp4: the same video without an audio track
- voice.amr: 2 s of AMR-NB at 12.2 kbit/s (WhatsApp's other voice type; no AMR encoder was at
  hand, so its frames carry random speech bits: a valid file that decodes to noise)"""

from __future__ import annotations

from functools import cache
from pathlib import Path

SAMPLES = Path(__file__).with_name("samples")


@cache
def sample(name: str) -> bytes:
    """The bytes of the sample file `name` ("voice.ogg")."""
    path = SAMPLES / name
    if path.parent != SAMPLES:
        raise ValueError(f"not a sample name: {name!r}")
    return path.read_bytes()
