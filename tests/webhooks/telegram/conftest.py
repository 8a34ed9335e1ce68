"""Telegram fixtures: empty queues, a fake Bot API server, Telegram settings, the web app with
its test client, a real PTB-backed TelegramClient, and a Worker that delivers through it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from werkzeug.test import TestResponse

from bot.runtime import Pam
from bot.settings import Settings
from bot.worker import Worker
from loopback.telegram_server import TOKEN, TelegramServer
from memory.models import InboxItem, OutboxItem
from webhooks.app import create_app
from webhooks.telegram.client import TelegramClient
from webhooks.telegram.route import SECRET_HEADER

SECRET = "pam-webhook_Secret-7f3a9c"
WEBHOOK = "/telegram/webhook"


@pytest.fixture
def telegram_server() -> Iterator[TelegramServer]:
    """A fake Telegram Bot API on 127.0.0.1 that records the real PTB Bot's calls."""
    with TelegramServer() as server:
        yield server


@pytest.fixture
def telegram_settings(settings: Settings, telegram_server: TelegramServer) -> Settings:
    """The test settings with the Telegram channel configured against the fake server."""
    return settings.replace(
        telegram={"bot_token": TOKEN, "webhook_secret": SECRET, "api_url": telegram_server.base_url}
    )


@pytest.fixture
def woken() -> list[int]:
    """One entry per on_inbound call (the web app waking an in-process worker)."""
    return []


@pytest.fixture
def app(telegram_settings: Settings, engine: Engine, woken: list[int]) -> Iterator[Flask]:
    """The web app with Telegram configured; its lazily made TelegramClient is closed after."""
    app = create_app(telegram_settings, engine=engine, on_inbound=lambda: woken.append(1))
    yield app
    app.extensions["pam"].close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


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
    worker.typing_after = 0.0
    return worker


def post_update(
    client: FlaskClient, update: Any, secret: str | None = SECRET, **options: Any
) -> TestResponse:
    """POST `update` as Telegram does: JSON, with the secret-token header (unless None)."""
    headers = {} if secret is None else {SECRET_HEADER: secret}
    return client.post(WEBHOOK, json=update, headers=headers, **options)


def inbox_items(engine: Engine) -> list[InboxItem]:
    """Every inbox row, oldest first (the queues start empty in every test)."""
    with Session(engine, expire_on_commit=False) as session:
        return list(session.scalars(select(InboxItem).order_by(InboxItem.id)))


def queue_rows(engine: Engine) -> int:
    """Inbox and outbox rows in the whole database."""
    with Session(engine) as session:
        return len(session.scalars(select(InboxItem.id)).all()) + len(
            session.scalars(select(OutboxItem.id)).all()
        )
