"""Fixtures of the web app's tests: the fake Telegram Bot API, the settings the app is built
with (`app_settings`: a channel's tests override it to configure their channel), the app with
its test client, and the record of the app waking a worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import Engine

from loopback.telegram_server import TelegramServer
from webhooks.app import create_app
from webhooks.settings import Settings


@pytest.fixture
def telegram_server() -> Iterator[TelegramServer]:
    """A fake Telegram Bot API on 127.0.0.1 that records the real PTB Bot's calls."""
    with TelegramServer() as server:
        yield server


@pytest.fixture
def woken() -> list[int]:
    """One entry per on_inbound call (the web app waking an in-process worker)."""
    return []


def app_for(settings: Settings, engine: Engine, woken: list[int]) -> Flask:
    """The web app for `settings`, recording wake-ups in `woken`."""
    return create_app(settings, engine=engine, on_inbound=lambda: woken.append(1))


@pytest.fixture
def app_settings(settings: Settings) -> Settings:
    """The settings `app` is built with: the test settings, no channel configured."""
    return settings


@pytest.fixture
def app(app_settings: Settings, engine: Engine, woken: list[int]) -> Iterator[Flask]:
    """The web app for `app_settings`; the TelegramClient it may make lazily is closed after."""
    app = app_for(app_settings, engine, woken)
    yield app
    app.extensions["pam"].close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """Flask's test client for `app`."""
    return app.test_client()
