"""Telegram fixtures: Telegram settings against the fake Bot API (the web app of
tests/webhooks/conftest.py is built with them), a real PTB-backed TelegramClient, and a Worker
that delivers through it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.telegram_server import TOKEN, TelegramServer
from webhooks.settings import Settings
from webhooks.telegram.client import TelegramClient
from webhooks.telegram.route import SECRET_HEADER

SECRET = "pam-webhook_Secret-7f3a9c"
WEBHOOK = "/telegram/webhook"


@pytest.fixture
def telegram_settings(settings: Settings, telegram_server: TelegramServer) -> Settings:
    """The test settings with the Telegram channel configured against the fake server."""
    return settings.replace(
        telegram={"bot_token": TOKEN, "webhook_secret": SECRET, "api_url": telegram_server.base_url}
    )


@pytest.fixture
def app_settings(telegram_settings: Settings) -> Settings:
    """The web app of these tests has Telegram configured."""
    return telegram_settings


@pytest.fixture
def telegram_client(telegram_server: TelegramServer) -> Iterator[TelegramClient]:
    """The real adapter (PTB Bot) talking to the fake server."""
    client = TelegramClient(TOKEN, telegram_server.base_url)
    yield client
    client.close()


@pytest.fixture
def worker(pam: Pam, telegram_client: TelegramClient) -> Worker:
    """A worker delivering Telegram replies through the real adapter; call .drain(). It shows
    "typing…" at the start of every turn, as it does for any turn slower than a moment."""
    worker = Worker(pam, {"telegram": telegram_client})
    worker.answering.typing_after = 0.0
    return worker


def post_update(
    client: FlaskClient, update: Any, secret: str | None = SECRET, **options: Any
) -> TestResponse:
    """POST `update` as Telegram does: JSON, with the secret-token header (unless None)."""
    headers = {} if secret is None else {SECRET_HEADER: secret}
    return client.post(WEBHOOK, json=update, headers=headers, **options)
