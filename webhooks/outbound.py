"""The outbound senders of every configured channel, built from the settings."""

from __future__ import annotations

import logging

from bot.channels import Sender
from bot.settings import Settings
from webhooks import api
from webhooks.telegram import CHANNEL as TELEGRAM
from webhooks.telegram_bot import TelegramClient
from webhooks.whatsapp import CHANNEL as WHATSAPP
from webhooks.whatsapp import TwilioSender

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
    if settings.twilio_account_sid and settings.twilio_auth_token:
        if settings.twilio_whatsapp_number:
            built[WHATSAPP] = TwilioSender(
                settings.twilio_account_sid,
                settings.twilio_auth_token,
                settings.twilio_whatsapp_number,
                api_url=settings.twilio_api_url,
                status_callback=(
                    f"{settings.public_url.rstrip('/')}/whatsapp/status"
                    if settings.public_url
                    else None
                ),
            )
        else:
            log.warning(
                "TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are set but TWILIO_WHATSAPP_NUMBER is "
                "not: WhatsApp replies will wait in the outbox until it is"
            )
    if settings.telegram_bot_token:
        built[TELEGRAM] = TelegramClient(settings.telegram_bot_token, settings.telegram_api_url)
    return built
