"""Telegram voice through the real python-telegram-bot against the fake Bot API: a voice note
is found with getFile and downloaded from the file server TELEGRAM_API_URL names, within the
cap (before any request, before the download, and while it runs); Telegram's refusals and
outages become VoiceRefused and VoiceUnavailable; a spoken reply is uploaded with sendVoice."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from bot.channels import (
    PermanentSendError,
    TransientSendError,
    VoiceFetcher,
    VoiceRefused,
    VoiceSender,
    VoiceTooLarge,
    VoiceUnavailable,
)
from loopback.local_server import Trickle
from loopback.telegram_server import MAX_DOWNLOAD_BYTES, TOKEN, Failure, TelegramServer
from loopback.twilio_server import Item, MediaCDN
from memory.messages import VoiceNote
from webhooks.telegram.address import chat_address
from webhooks.telegram.client import TelegramClient
from webhooks.telegram.transport import (
    DownloadTooLarge,
    SyncHTTPXRequest,
    download_cap,
    file_url,
)

OGG = (Path(__file__).parent / "fixtures" / "hola.ogg").read_bytes()
CAP = 10 * 1024 * 1024


@pytest.fixture
def telegram(telegram_server: TelegramServer) -> Iterator[tuple[TelegramServer, TelegramClient]]:
    client = TelegramClient(TOKEN, telegram_server.base_url)
    yield telegram_server, client
    client.close()


def note(file_id: str, source: str = "voice", size: int | None = None) -> VoiceNote:
    types = {"voice": "audio/ogg", "audio": "audio/mpeg", "video_note": "video/mp4"}
    return VoiceNote(file_id, types[source], 3.0, size, source)


def test_the_telegram_client_fetches_and_sends_voice() -> None:
    client = TelegramClient(TOKEN, "http://127.0.0.1:9/bot")
    try:
        assert isinstance(client, VoiceFetcher) and isinstance(client, VoiceSender)
    finally:
        client.close()


def test_files_come_from_the_file_server_of_the_api_url() -> None:
    assert file_url("https://api.telegram.org/bot") == "https://api.telegram.org/file/bot"
    assert file_url("http://127.0.0.1:8081/bot/") == "http://127.0.0.1:8081/file/bot"


def test_a_voice_note_is_found_and_downloaded_through_the_api_url(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram
    server.add_file("AwAC-hola", OGG, path="voice/file_7.oga")

    audio = client.fetch_voice(note("AwAC-hola", size=len(OGG)), CAP)

    assert audio.data == OGG and audio.data.startswith(b"OggS")
    assert (audio.name, audio.content_type) == ("file_7.oga", "audio/ogg")
    assert [c.params["file_id"] for c in server.of("getFile")] == ["AwAC-hola"]
    assert server.downloads == [f"/file/bot{TOKEN}/voice/file_7.oga"]


@pytest.mark.parametrize(
    ("source", "path", "name", "content_type"),
    [
        ("audio", "music/file_3.mp3", "file_3.mp3", "audio/mpeg"),
        ("video_note", "video_notes/file_9.mp4", "video_note.mp4", "video/mp4"),
        ("voice", "voice/file_8", "voice.oga", "audio/ogg"),  # a path without an extension
    ],
)
def test_the_audio_is_named_for_its_format(
    telegram: tuple[TelegramServer, TelegramClient],
    source: str,
    path: str,
    name: str,
    content_type: str,
) -> None:
    server, client = telegram
    server.add_file("file-1", OGG, path=path)

    audio = client.fetch_voice(note("file-1", source), CAP)

    assert (audio.name, audio.content_type, audio.data) == (name, content_type, OGG)


def test_a_note_the_update_says_is_too_big_is_refused_before_any_request(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram
    server.add_file("big", OGG)

    with pytest.raises(VoiceTooLarge):
        client.fetch_voice(note("big", size=CAP + 1), CAP)

    assert server.calls == [] and server.downloads == []


def test_a_file_getfile_says_is_too_big_is_not_downloaded(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram
    server.add_file("big", OGG, size=CAP + 1)

    with pytest.raises(VoiceTooLarge):
        client.fetch_voice(note("big"), CAP)

    assert len(server.of("getFile")) == 1 and server.downloads == []


def test_a_file_over_the_bot_apis_20_mb_is_too_large(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram
    server.add_file("huge", OGG, size=MAX_DOWNLOAD_BYTES + 1)

    with pytest.raises(VoiceTooLarge, match="too big"):
        client.fetch_voice(note("huge"), 50 * 1024 * 1024)

    assert server.downloads == []


def test_a_download_bigger_than_getfile_said_is_stopped_at_the_cap(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram
    server.add_file("liar", OGG * 10, size=len(OGG))  # getFile tells less than there is

    with pytest.raises(VoiceTooLarge):
        client.fetch_voice(note("liar"), len(OGG) * 2)

    assert len(server.downloads) == 1


def test_a_download_without_a_length_stops_once_past_the_cap() -> None:
    """The transport streams the download: a body that tells no length is cut off past the
    cap, not read whole."""
    transport = SyncHTTPXRequest(5.0, read_timeout=5.0)
    with MediaCDN() as cdn:
        url = cdn.add(Item(b"x" * 300_000, "application/octet-stream", unsized=True))
        small = cdn.add(Item(b"x" * 1000, "application/octet-stream", unsized=True))
        with download_cap(100_000):
            with pytest.raises(DownloadTooLarge):
                asyncio.run(transport.do_request(url, "GET"))
            status, data = asyncio.run(transport.do_request(small, "GET"))
    asyncio.run(transport.shutdown())
    assert (status, data) == (200, b"x" * 1000)
    assert len(cdn.seen) == 2


def test_an_unknown_file_is_refused(telegram: tuple[TelegramServer, TelegramClient]) -> None:
    _, client = telegram

    with pytest.raises(VoiceRefused, match=r"(?i)invalid file_id"):
        client.fetch_voice(note("AwAC-nobody-knows"), CAP)


def test_a_file_gone_from_the_file_server_is_refused(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram
    server.add_file("gone", OGG)
    server.fail_next(Failure("download", 404, "Not Found"))

    with pytest.raises(VoiceRefused):
        client.fetch_voice(note("gone"), CAP)


@pytest.mark.parametrize(
    "failure",
    [
        Failure("getFile", 500, "Internal Server Error"),
        Failure("getFile", 429, "Too Many Requests: retry after 3", {"retry_after": 3}),
        Failure("download", 500, "Internal Server Error"),
        Failure("download", 429, "Too Many Requests"),
    ],
    ids=["getFile 500", "getFile 429", "download 500", "download 429"],
)
def test_an_outage_is_worth_another_try(
    telegram: tuple[TelegramServer, TelegramClient], failure: Failure
) -> None:
    server, client = telegram
    server.add_file("AwAC-hola", OGG)
    server.fail_next(failure)

    with pytest.raises(VoiceUnavailable):
        client.fetch_voice(note("AwAC-hola"), CAP)

    assert client.fetch_voice(note("AwAC-hola"), CAP).data == OGG  # and it is, later


def test_an_unreachable_bot_api_is_worth_another_try() -> None:
    client = TelegramClient(TOKEN, "http://127.0.0.1:9/bot", timeout=2.0)
    try:
        with pytest.raises(VoiceUnavailable):
            client.fetch_voice(note("AwAC-hola"), CAP)
    finally:
        client.close()


@pytest.fixture
def own_server(
    telegram_server: TelegramServer, tmp_path: Path
) -> Iterator[tuple[TelegramServer, TelegramClient, Path]]:
    """The operator's own Bot API server in --local mode: its files directory, as Pam sees
    it, is TELEGRAM_LOCAL_FILES_DIR."""
    files = tmp_path / "telegram-bot-api"
    (files / TOKEN / "voice").mkdir(parents=True)
    client = TelegramClient(TOKEN, telegram_server.base_url, local_files=files)
    yield telegram_server, client, files
    client.close()


def test_a_local_bot_api_servers_file_is_read_from_the_shared_disk(
    own_server: tuple[TelegramServer, TelegramClient, Path],
) -> None:
    """In --local mode getFile gives an absolute path on the server's disk, and no download."""
    server, client, files = own_server
    local = files / TOKEN / "voice" / "file_12.oga"
    local.write_bytes(OGG)
    server.add_file("local", OGG, path=str(local))

    audio = client.fetch_voice(note("local"), CAP)

    assert (audio.data, audio.name) == (OGG, "file_12.oga") and server.downloads == []
    with pytest.raises(VoiceTooLarge):
        client.fetch_voice(note("local"), len(OGG) - 1)


def test_a_files_directory_needs_the_operators_own_bot_api_server(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="TELEGRAM_API_URL"):
        TelegramClient(TOKEN, None, local_files=tmp_path)


def test_without_a_files_directory_no_absolute_path_is_read(
    telegram: tuple[TelegramServer, TelegramClient], tmp_path: Path
) -> None:
    """A Bot API server at TELEGRAM_API_URL alone (a hosted-API configuration, or a local
    server whose files Pam was not told of) may not name a file on this disk."""
    server, client = telegram
    secret = tmp_path / "pam.db"
    secret.write_bytes(b"SQLite format 3\x00 every learner")
    server.add_file("ours", OGG, path=str(secret))

    with pytest.raises(VoiceRefused, match="TELEGRAM_LOCAL_FILES_DIR"):
        client.fetch_voice(note("ours"), CAP)
    assert server.downloads == []


@pytest.mark.parametrize("configured", [False, True], ids=["hosted API", "own server"])
@pytest.mark.parametrize("name", ["pam.db", "voice/file_7.oga", "big.oga"])
def test_a_relative_path_is_downloaded_even_where_it_names_a_file_here(
    telegram_server: TelegramServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    configured: bool,
    name: str,
) -> None:
    """python-telegram-bot reads a relative path that is a file under the working directory
    instead of downloading it: the database, any file, one far over the cap. Pam asks the
    file server for it, as Telegram means."""
    monkeypatch.chdir(tmp_path)
    here = tmp_path / name
    here.parent.mkdir(parents=True, exist_ok=True)
    here.write_bytes(b"SQLite format 3\x00 every learner")
    if name == "big.oga":
        with here.open("r+b") as file:
            file.truncate(5 * CAP)  # sparse: no disk spent
    telegram_server.add_file("rel", OGG, path=name)
    client = (
        TelegramClient(TOKEN, telegram_server.base_url, local_files=tmp_path / "files")
        if configured
        else TelegramClient(TOKEN, telegram_server.base_url)
    )
    try:
        audio = client.fetch_voice(note("rel"), CAP)
    finally:
        client.close()

    assert audio.data == OGG
    assert telegram_server.downloads == [f"/file/bot{TOKEN}/{name}"]


def _outside(files: Path, tmp_path: Path) -> str:
    secret = tmp_path / "pam.db"
    secret.write_bytes(b"SQLite format 3\x00 every learner")
    return str(secret)


def _climbing(files: Path, tmp_path: Path) -> str:
    _outside(files, tmp_path)
    return f"{files}/{TOKEN}/../../pam.db"


def _linked_out(files: Path, tmp_path: Path) -> str:
    link = files / TOKEN / "voice" / "file_1.oga"
    link.symlink_to(_outside(files, tmp_path))
    return str(link)


def _linked_directory(files: Path, tmp_path: Path) -> str:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "file_2.oga").write_bytes(OGG)
    (files / TOKEN / "music").symlink_to(tmp_path / "elsewhere")
    return str(files / TOKEN / "music" / "file_2.oga")


def _a_prefix_alike(files: Path, tmp_path: Path) -> str:
    twin = Path(f"{files}-old")  # starts like the directory, is not in it
    twin.mkdir()
    (twin / "file_3.oga").write_bytes(OGG)
    return str(twin / "file_3.oga")


def _a_directory(files: Path, tmp_path: Path) -> str:
    return str(files / TOKEN / "voice")


def _a_fifo(files: Path, tmp_path: Path) -> str:
    fifo = files / TOKEN / "voice" / "file_4.oga"
    os.mkfifo(fifo)  # nobody writes: a blocking open would hang the lane
    return str(fifo)


def _missing(files: Path, tmp_path: Path) -> str:
    return str(files / TOKEN / "voice" / "file_5.oga")


@pytest.mark.parametrize(
    "hostile",
    [
        _outside,
        _climbing,
        _linked_out,
        _linked_directory,
        _a_prefix_alike,
        _a_directory,
        _a_fifo,
        _missing,
    ],
)
def test_a_local_path_outside_the_files_directory_is_refused_unread(
    own_server: tuple[TelegramServer, TelegramClient, Path],
    tmp_path: Path,
    hostile: Callable[[Path, Path], str],
) -> None:
    server, client, files = own_server
    server.add_file("hostile", OGG, path=hostile(files, tmp_path))

    with pytest.raises(VoiceRefused):
        client.fetch_voice(note("hostile"), CAP)
    assert server.downloads == []


SECRET = b"SQLite format 3\x00 every learner's words"
LEGIT = b"OggS the operator's own server's file"
SEGMENTS = ["..", ".", "", "pam.db", "voice", "file_7.oga", "etc", "passwd", "%2e%2e", "\\", "~"]


@st.composite
def file_paths(draw: st.DrawFn, files: str, outside: str) -> str:
    """What a hostile Bot API might answer getFile with: relative and absolute paths of
    files here and elsewhere, climbing, encoded, odd."""
    parts = draw(st.lists(st.sampled_from(SEGMENTS) | st.text(max_size=6), max_size=6))
    root = draw(st.sampled_from(["", "/", f"{files}/", f"{outside}/", f"{files}/{TOKEN}/"]))
    return root + "/".join(parts)


@pytest.mark.parametrize("configured", [False, True], ids=["hosted API", "own server"])
def test_no_getfile_answer_reads_a_file_from_elsewhere_on_this_disk(
    telegram_server: TelegramServer, tmp_path: Path, configured: bool
) -> None:
    """The working directory and the disk around it hold secrets under the names a hostile
    path would try; only the files directory, when configured, holds a file Pam may read."""
    outside, files = tmp_path / "work", tmp_path / "telegram-bot-api"
    for name in ["pam.db", "voice/file_7.oga", "etc/passwd", "file_7.oga"]:
        (outside / name).parent.mkdir(parents=True, exist_ok=True)
        (outside / name).write_bytes(SECRET)
    (files / TOKEN / "voice").mkdir(parents=True)
    (files / TOKEN / "voice" / "file_7.oga").write_bytes(LEGIT)
    client = (
        TelegramClient(TOKEN, telegram_server.base_url, local_files=files)
        if configured
        else TelegramClient(TOKEN, telegram_server.base_url)
    )
    ids = iter(range(10**6))

    @hypothesis_settings(
        max_examples=50,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(path=file_paths(str(files), str(outside)))
    @example(path="pam.db")  # the issue's: python-telegram-bot read these from the disk
    @example(path="voice/file_7.oga")
    @example(path="./etc/passwd")
    @example(path="voice/../pam.db")
    @example(path="../work/pam.db")
    @example(path=f"{outside}/pam.db")
    @example(path=f"{files}/{TOKEN}/../../work/pam.db")
    @example(path=f"{files}/{TOKEN}/voice/file_7.oga")
    def fetch(path: str) -> None:
        file_id = f"hostile-{next(ids)}"
        telegram_server.add_file(file_id, OGG, path=path)
        try:
            audio = client.fetch_voice(note(file_id), CAP)
        except (VoiceRefused, VoiceUnavailable):
            return
        assert audio.data in (OGG, LEGIT), "read from elsewhere on this disk"
        if audio.data == LEGIT:
            assert configured and Path(os.path.realpath(path)).is_relative_to(files)

    try:
        with contextlib.chdir(outside):
            fetch()
    finally:
        client.close()


def test_a_local_file_over_the_cap_is_refused_by_its_size_unread(
    own_server: tuple[TelegramServer, TelegramClient, Path],
) -> None:
    server, client, files = own_server
    big = files / TOKEN / "voice" / "file_6.oga"
    with big.open("wb") as file:
        file.truncate(5 * CAP)  # sparse: its size says it all
    server.add_file("big", OGG, path=str(big), size=len(OGG))  # getFile tells less

    with pytest.raises(VoiceTooLarge, match=str(5 * CAP)):
        client.fetch_voice(note("big"), CAP)


@pytest.mark.parametrize("head", [False, True], ids=["body", "headers"])
def test_a_trickling_download_is_cut_off_at_the_deadline(
    telegram_server: TelegramServer, head: bool
) -> None:
    """A byte every 50 ms, each read far inside the 15 s per-read timeout: without an overall
    deadline the download would take its 20 s and succeed."""
    trickle = Trickle(OGG[:400], every=0.05, head=head)
    telegram_server.add_file("slow", OGG[:400], trickle=trickle)
    client = TelegramClient(TOKEN, telegram_server.base_url, media_deadline=0.5)
    try:
        with pytest.raises(VoiceUnavailable, match="deadline"):
            client.fetch_voice(note("slow"), CAP)
    finally:
        client.close()

    assert trickle.hung_up.wait(10) and not trickle.done.is_set()
    assert trickle.sent < 400


def test_a_spoken_reply_is_uploaded_as_a_voice_message(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram

    sent = client.send_voice("4242", OGG, None, idempotency_key="pam-1")

    (call,) = server.of("sendVoice")
    assert call.params["voice"] == OGG and str(call.params["chat_id"]) == "4242"
    assert "message_thread_id" not in call.params
    assert sent.platform_id is not None


def test_a_spoken_reply_goes_into_its_forum_topic(
    telegram: tuple[TelegramServer, TelegramClient],
) -> None:
    server, client = telegram

    client.send_voice(chat_address(-100777, 12), OGG, None, idempotency_key="pam-2")

    (call,) = server.of("sendVoice")
    assert call.params["message_thread_id"] == 12 and call.params["voice"] == OGG


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (Failure("sendVoice", 403, "Forbidden: bot was blocked by the user"), PermanentSendError),
        (
            Failure("sendVoice", 400, "Bad Request: VOICE_MESSAGES_FORBIDDEN"),
            PermanentSendError,
        ),
        (Failure("sendVoice", 429, "Too Many Requests", {"retry_after": 2}), TransientSendError),
        (Failure("sendVoice", 502, "Bad Gateway"), TransientSendError),
    ],
    ids=["blocked", "voice forbidden", "rate limit", "bad gateway"],
)
def test_a_spoken_reply_telegram_refuses_is_mapped_like_any_send(
    telegram: tuple[TelegramServer, TelegramClient], failure: Failure, error: type[Exception]
) -> None:
    server, client = telegram
    server.fail_next(failure)

    with pytest.raises(error):
        client.send_voice("4242", OGG, None, idempotency_key="pam-3")
