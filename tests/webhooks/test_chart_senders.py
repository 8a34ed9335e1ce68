"""/progress charts on every channel, through the real clients against the local fakes:
Telegram uploads the PNG as a photo (python-telegram-bot, multipart), WhatsApp sends media
Twilio fetches from the signed link (the twilio client's MediaUrl) or, without PAM_PUBLIC_URL,
the caption alone with a warning, and the API's callback carries `image_url`. The whole way
(webhook, worker, channel) is in each channel's test_delivery.py."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from bot.channels import ChartSender, PermanentSendError
from bot.review.progress import render
from loopback.callback_server import CallbackServer
from loopback.telegram_server import TOKEN, Failure, TelegramServer
from loopback.twilio_server import ACCOUNT_SID, AUTH_TOKEN, NUMBER, TwilioServer
from memory.review.progress import Progress, Week, week_starts
from tests.support import API_TOKEN
from webhooks.api.sender import ApiCallbackSender
from webhooks.telegram.address import chat_address
from webhooks.telegram.client import TelegramClient
from webhooks.whatsapp.sender import TwilioSender

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
URL = "https://pam.example/charts/token.png"
CAPTION = (
    "This week you practised on 2 days.\n"
    "I've noticed 3 mistake patterns: 1 mastered, 1 getting there."
)


@pytest.fixture(scope="module")
def png() -> bytes:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return render(Progress(now, [Week(week_starts(now, 1)[0].date())], frozenset({now.date()})))


@pytest.fixture
def telegram() -> Iterator[tuple[TelegramServer, TelegramClient]]:
    with TelegramServer() as server:
        client = TelegramClient(TOKEN, server.base_url)
        yield server, client
        client.close()


@pytest.fixture
def twilio() -> Iterator[TwilioServer]:
    with TwilioServer() as server:
        yield server


def test_every_channel_sender_takes_charts(twilio: TwilioServer) -> None:
    api = ApiCallbackSender("http://127.0.0.1:9/replies", API_TOKEN)
    whatsapp = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio.base_url)
    telegram = TelegramClient(TOKEN, "http://127.0.0.1:9/bot")
    try:
        assert all(isinstance(s, ChartSender) for s in (api, whatsapp, telegram))
    finally:
        api.close()
        telegram.close()


def test_telegram_uploads_the_chart_as_a_photo_with_its_caption(
    telegram: tuple[TelegramServer, TelegramClient], png: bytes
) -> None:
    server, client = telegram
    sent = client.send_chart("4242", png, URL, CAPTION, idempotency_key="pam-1")
    (call,) = server.of("sendPhoto")
    assert call.params["photo"] == png and call.params["photo"].startswith(PNG_SIGNATURE)
    assert call.params["caption"] == CAPTION
    assert str(call.params["chat_id"]) == "4242"
    assert sent.platform_id is not None
    assert server.of("sendMessage") == []


def test_telegram_sends_a_chart_into_its_forum_topic_and_caps_the_caption(
    telegram: tuple[TelegramServer, TelegramClient], png: bytes
) -> None:
    server, client = telegram
    client.send_chart(chat_address(-100777, 12), png, None, "x" * 2000, idempotency_key="pam-2")
    (call,) = server.of("sendPhoto")
    assert call.params["message_thread_id"] == 12
    assert len(call.params["caption"]) == 1024


def test_a_photo_telegram_refuses_is_a_permanent_failure(
    telegram: tuple[TelegramServer, TelegramClient], png: bytes
) -> None:
    server, client = telegram
    server.fail_next(Failure("sendPhoto", 403, "Forbidden: bot was blocked by the user"))
    with pytest.raises(PermanentSendError):
        client.send_chart("4242", png, URL, CAPTION, idempotency_key="pam-3")


def test_whatsapp_sends_the_chart_as_media_from_its_link(twilio: TwilioServer, png: bytes) -> None:
    sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio.base_url)
    sent = sender.send_chart("whatsapp:+34600000001", png, URL, CAPTION, idempotency_key="k")
    (message,) = twilio.messages
    assert message["MediaUrl"] == URL
    assert message["Body"] == CAPTION
    assert message["To"] == "whatsapp:+34600000001"
    assert sent.platform_id


def test_whatsapp_without_a_public_url_sends_the_caption_and_says_what_to_set(
    twilio: TwilioServer, png: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    sender = TwilioSender(ACCOUNT_SID, AUTH_TOKEN, NUMBER, api_url=twilio.base_url)
    with caplog.at_level(logging.WARNING):
        sender.send_chart("whatsapp:+34600000002", png, None, CAPTION, idempotency_key="k")
    (message,) = twilio.messages
    assert "MediaUrl" not in message and message["Body"] == CAPTION
    assert any("PAM_PUBLIC_URL" in r.getMessage() for r in caplog.records)
    assert all(CAPTION not in r.getMessage() for r in caplog.records)


def test_the_api_callback_carries_the_image_url(png: bytes) -> None:
    with CallbackServer() as callback:
        sender = ApiCallbackSender(callback.url, API_TOKEN)
        try:
            sender.send_chart("api:lena", png, URL, CAPTION, idempotency_key="pam-9")
            sender.send_chart("api:lena", png, None, CAPTION, idempotency_key="pam-10")
        finally:
            sender.close()
        first, second = (json.loads(r.body) for r in callback.received)
    assert first["image_url"] == URL and first["text"] == CAPTION and first["id"] == "pam-9"
    assert "image_url" not in second and second["text"] == CAPTION
