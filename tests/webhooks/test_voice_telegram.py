"""Telegram voice through the real python-telegram-bot against the fake Bot API: a voice note
is found with getFile and downloaded from the file server TELEGRAM_API_URL names, within the
cap (before any request, before the download, and while it runs); Telegram's refusals and
outages become VoiceRefused and VoiceUnavailable; a spoken reply is uploaded with sendVoice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.channels import (
    PermanentSendError,
    TransientSendError,
    VoiceFetcher,
    VoiceRefused,
    VoiceSender,
    VoiceTooLarge,
    VoiceUnavailable,
)
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


def test_a_local_bot_api_servers_file_is_read_from_the_shared_disk(
    telegram: tuple[TelegramServer, TelegramClient], tmp_path: Path
) -> None:
    """In --local mode getFile gives an absolute path on the server's disk, and no download."""
    server, client = telegram
    local = tmp_path / "voice" / "file_12.oga"
    local.parent.mkdir()
    local.write_bytes(OGG)
    server.add_file("local", OGG, path=str(local))

    audio = client.fetch_voice(note("local"), CAP)

    assert (audio.data, audio.name) == (OGG, "file_12.oga") and server.downloads == []
    with pytest.raises(VoiceTooLarge):
        client.fetch_voice(note("local"), len(OGG) - 1)


def test_only_the_operators_own_bot_api_server_may_name_a_file_on_this_disk(
    telegram: tuple[TelegramServer, TelegramClient], tmp_path: Path
) -> None:
    server, client = telegram
    secret = tmp_path / "pam.db"
    secret.write_bytes(b"SQLite format 3\x00 every learner")
    server.add_file("ours", OGG, path=str(secret))
    client.own_server = False  # as with Telegram's own API: it never names a local path

    with pytest.raises(VoiceRefused):
        client.fetch_voice(note("ours"), CAP)
    assert server.downloads == []


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
