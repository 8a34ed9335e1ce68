"""Downloading a Telegram voice note's audio: `getFile` for its path, then the file itself
through python-telegram-bot's transport, from the Bot API server TELEGRAM_API_URL names,
capped before and during the download, the whole within PAM_MEDIA_DEADLINE; Telegram's errors
mapped onto Pam's voice errors.

A local Bot API server in `--local` mode answers `getFile` with an absolute path on its own
disk and serves no downloads: Pam then reads the file there, so it must share that disk (the
server's working directory mounted at the same path, TELEGRAM_LOCAL_FILES_DIR). No other path
is ever read from disk: not an absolute one without that setting or outside that directory,
nor a relative one (which python-telegram-bot would read from the working directory were it
a file there)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from bot.channels import Audio, VoiceRefused, VoiceTooLarge, VoiceUnavailable
from memory.messages import VoiceNote
from webhooks import deadline
from webhooks.telegram.transport import DownloadFailed, DownloadTooLarge, SyncBot, download_cap

T = TypeVar("T")

# Seconds a whole download may take (PAM_MEDIA_DEADLINE's default).
DEFAULT_MEDIA_DEADLINE = 30.0

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
    """The Bot's side of voice notes: their download (the worker's `VoiceFetcher`).
    `local_files`: the directory of the operator's own Bot API server in `--local` mode
    (TELEGRAM_LOCAL_FILES_DIR), the only place a file is read from disk; `media_deadline`:
    the seconds a whole download (getFile and the file) may take (PAM_MEDIA_DEADLINE)."""

    local_files: Path | None = None
    media_deadline: float = DEFAULT_MEDIA_DEADLINE

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        """The audio of `note` (its `ref` is Telegram's file_id), at most `max_bytes` long.
        Raises VoiceTooLarge (before any request when the update said the size), VoiceRefused
        (an unknown file, a path it may not come from) or VoiceUnavailable (5xx, 429,
        timeouts, the deadline passed)."""
        if note.size is not None and note.size > max_bytes:
            raise VoiceTooLarge(f"the {note.source} is {note.size} bytes, over {max_bytes}")
        with deadline.deadline(self.media_deadline) as within:
            file = self._call(within, lambda: self._run(self.bot.get_file(note.ref)))
            if file.file_size is not None and file.file_size > max_bytes:
                raise VoiceTooLarge(
                    f"the {note.source} is {file.file_size} bytes, over {max_bytes}"
                )
            path = self._given_path(str(file.file_path or ""))
            if not path:
                raise VoiceRefused("telegram gave the file no path to download it from")
            if PurePosixPath(path).is_absolute():  # a local Bot API server in --local mode
                data = read_local(self.local_files, path, max_bytes)
            else:
                data = self._download(within, path, max_bytes)
        content_type = note.content_type or ("video/mp4" if note.source == "video_note" else None)
        return Audio(data=data, content_type=content_type, name=audio_name(note, path))

    def _given_path(self, file_path: str) -> str:
        """The path getFile answered. python-telegram-bot puts its file server's address in
        front, except where the path names a file that exists on this disk (relative ones
        under the working directory included): that one it leaves as it was, and would read
        from disk were it asked to download it; it is not."""
        prefix = f"{self.bot.base_file_url}/"
        return file_path.removeprefix(prefix) if file_path.startswith(prefix) else file_path

    def _download(self, within: deadline.Deadline, path: str, max_bytes: int) -> bytes:
        """The file at the relative `path` from the Bot API's file server, stopped past
        `max_bytes` and at the deadline."""
        if "\\" in path or "\0" in path or any(s in (".", "..") for s in path.split("/")):
            raise VoiceRefused("getFile answered a path that climbs out of the file server's")
        url = urlsplit(f"{self.bot.base_file_url}/{path}")  # quoted as python-telegram-bot does
        encoded = urlunsplit(url._replace(path=quote(url.path)))
        with download_cap(max_bytes):
            return bytes(self._call(within, lambda: self._run(self.bot.request.retrieve(encoded))))

    def _call(self, within: deadline.Deadline, request: Callable[[], T]) -> T:
        """`request`'s answer, with Telegram's errors mapped onto the voice errors."""
        try:
            return request()
        except Exception as exc:
            if within.passed():
                raise VoiceUnavailable(
                    f"the download passed its {within.seconds:g} s deadline"
                ) from exc
            raise _voice_error(exc) from exc


def read_local(root: Path | None, path: str, max_bytes: int) -> bytes:
    """The file at the absolute `path` that the operator's own Bot API server keeps in `root`
    (its --local mode), read only when it lies there (symbolic links resolved) and is a
    regular file of at most `max_bytes`: its size checked before reading, and no more than
    one byte past the cap read. The reasons name no path (a local server's paths hold the
    bot's token)."""
    if root is None:
        raise VoiceRefused(
            "getFile named a file on a local disk, which only the operator's own Bot API "
            "server may, with TELEGRAM_LOCAL_FILES_DIR set"
        )
    if "\0" in path or ".." in PurePosixPath(path).parts:
        raise VoiceRefused("getFile named a local path that climbs out of its directory")
    try:
        real = Path(os.path.realpath(path, strict=True))
    except OSError as exc:
        raise VoiceRefused(f"getFile named no local file: {exc.strerror}") from exc
    if not real.is_relative_to(root):
        raise VoiceRefused("getFile named a local file outside TELEGRAM_LOCAL_FILES_DIR")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(real, flags)  # non-blocking: a FIFO must not hang the lane
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode):
                raise VoiceRefused("getFile named a local path that is no regular file")
            if status.st_size > max_bytes:
                raise VoiceTooLarge(f"the file is {status.st_size} bytes, over {max_bytes}")
            data = _read_at_most(descriptor, max_bytes + 1)
        finally:
            os.close(descriptor)
    except OSError as exc:
        raise VoiceUnavailable(f"the local Bot API server's file: {type(exc).__name__}") from exc
    if len(data) > max_bytes:  # it grew since
        raise VoiceTooLarge(f"the file runs past {max_bytes} bytes")
    return data


def _read_at_most(descriptor: int, limit: int) -> bytes:
    """Up to `limit` bytes of the open file, fewer where it ends first."""
    data = bytearray()
    while len(data) < limit:
        chunk = os.read(descriptor, min(limit - len(data), 1024 * 1024))
        if not chunk:
            break
        data += chunk
    return bytes(data)


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
