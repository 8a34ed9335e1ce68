"""Downloading a Telegram voice note's audio: `getFile` for its path, then the file itself
through python-telegram-bot, from the Bot API server TELEGRAM_API_URL names, capped before
and during the download; Telegram's errors mapped onto Pam's voice errors.

A local Bot API server in `--local` mode answers `getFile` with an absolute path on its own
disk and serves no downloads: Pam then reads the file there, so it must share that disk (the
server's working directory mounted at the same path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, TypeVar

from bot.channels import Audio, VoiceRefused, VoiceTooLarge, VoiceUnavailable
from memory.messages import VoiceNote
from webhooks.telegram.transport import DownloadFailed, DownloadTooLarge, SyncBot, download_cap

if TYPE_CHECKING:
    from telegram import File

T = TypeVar("T")

# The hosted Bot API's limit for a bot's download; getFile refuses bigger files outright.
BOT_API_MAX_BYTES = 20 * 1024 * 1024

# A file name for what Telegram's file path does not name well (the transcription API reads the
# format from the name's extension).
_EXTENSIONS = {
    "audio/ogg": ".oga",
    "audio/mpeg": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/aac": ".aac",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/flac": ".flac",
    "audio/webm": ".webm",
    "video/mp4": ".mp4",
}


class VoiceDownloads(SyncBot):
    """The Bot's side of voice notes: their download (the worker's `VoiceFetcher`)."""

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        """The audio of `note` (its `ref` is Telegram's file_id), at most `max_bytes` long.
        Raises VoiceTooLarge (before any request when the update said the size), VoiceRefused
        (an unknown file) or VoiceUnavailable (5xx, 429, timeouts)."""
        if note.size is not None and note.size > max_bytes:
            raise VoiceTooLarge(f"the {note.source} is {note.size} bytes, over {max_bytes}")
        file = self._call(lambda: self._run(self.bot.get_file(note.ref)))
        if file.file_size is not None and file.file_size > max_bytes:
            raise VoiceTooLarge(f"the {note.source} is {file.file_size} bytes, over {max_bytes}")
        path = str(file.file_path or "")
        if not path:
            raise VoiceRefused("telegram gave the file no path to download it from")
        local = Path(path)
        if local.is_absolute() and local.is_file():  # a local Bot API server in --local mode
            # (python-telegram-bot keeps a path absolute only where such a file exists.)
            if not self.own_server:
                raise VoiceRefused("getFile named a file on this disk, and not our own server")
            data = _read_local(local, max_bytes)
        else:
            data = self._download(file, max_bytes)
        content_type = note.content_type or ("video/mp4" if note.source == "video_note" else None)
        return Audio(data=data, content_type=content_type, name=audio_name(note, path))

    def _download(self, file: File, max_bytes: int) -> bytes:
        """The file's bytes from the Bot API's file server, stopped past `max_bytes`."""
        with download_cap(max_bytes):
            return bytes(self._call(lambda: self._run(file.download_as_bytearray())))

    def _call(self, request: Callable[[], T]) -> T:
        """`request`'s answer, with Telegram's errors mapped onto the voice errors."""
        try:
            return request()
        except Exception as exc:
            raise _voice_error(exc) from exc


def _read_local(path: Path, max_bytes: int) -> bytes:
    """A file a local Bot API server keeps on the disk Pam shares, capped like a download."""
    try:
        if path.stat().st_size > max_bytes:
            raise VoiceTooLarge(f"the file is {path.stat().st_size} bytes, over {max_bytes}")
        return path.read_bytes()
    except OSError as exc:
        raise VoiceUnavailable(f"the local Bot API server's file: {type(exc).__name__}") from exc


def _voice_error(exc: Exception) -> Exception:
    """Telegram's error (python-telegram-bot's, or the transport's) as a voice error."""
    from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter

    if isinstance(exc, DownloadTooLarge):
        return VoiceTooLarge(str(exc))
    if isinstance(exc, DownloadFailed):
        if exc.status == 429 or exc.status >= 500:
            return VoiceUnavailable(str(exc))
        return VoiceRefused(str(exc))
    if isinstance(exc, BadRequest) and "too big" in str(exc).lower():
        return VoiceTooLarge(f"over the Bot API's {BOT_API_MAX_BYTES} bytes: {exc}")
    if isinstance(exc, BadRequest | Forbidden | InvalidToken):  # a wrong file_id, a 404
        return VoiceRefused(f"telegram refused the file: {exc}")
    if isinstance(exc, RetryAfter | NetworkError | TimeoutError):  # TimedOut is a NetworkError
        return VoiceUnavailable(f"telegram unreachable: {type(exc).__name__}")
    return VoiceUnavailable(f"telegram error: {type(exc).__name__}")


def audio_name(note: VoiceNote, file_path: str) -> str:
    """A file name whose extension says the audio's format: a video note's "video_note.mp4";
    else the name in Telegram's file path ("voice/file_7.oga" → "file_7.oga") when it has an
    extension; else one made from the type ("voice.oga")."""
    if note.source == "video_note":
        return "video_note.mp4"
    name = PurePosixPath(file_path).name
    if PurePosixPath(name).suffix:
        return name
    kind = (note.content_type or "").split(";")[0].strip().lower()
    default = ".oga" if note.source == "voice" else ""
    return f"{note.source}{_EXTENSIONS.get(kind, default)}"
