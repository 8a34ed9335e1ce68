"""The outbound senders of every configured channel, built from the settings."""

from __future__ import annotations

import logging

from bot.channels import Sender
from bot.settings import Settings
from webhooks import api
from webhooks.telegram import CHANNEL as TELEGRAM
from webhooks.telegram_bot import TelegramClient

log = logging.getLogger(__name__)


def senders(settings: Settings) -> dict[str, Sender]:
    """One sender per channel that has its outbound configuration."""
    built: dict[str, Sender] = {}
    if settings.api_token and settings.api_callback_url:
        built[api.CHANNEL] = api.ApiCallbackSender(settings.api_callback_url, settings.api_token)
    elif settings.api_token:
        log.warning(
            "PAM_API_TOKEN is set but PAM_API_CALLBACK_URL is not: API replies will wait "
            "in the outbox until it is"
        )
    if settings.telegram_bot_token:
        built[TELEGRAM] = TelegramClient(settings.telegram_bot_token, settings.telegram_api_url)
    return built
