"""The WhatsApp channel's section of the settings (TWILIO_*), a part of the whole configuration
(webhooks/settings.py)."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings

from bot.settings import long_enough, section, variable_of

# Twilio's auth tokens are 32 hex digits.
TWILIO_AUTH_TOKEN_CHARS = 32


class WhatsAppSettings(BaseSettings):
    """The WhatsApp channel, through Twilio."""

    model_config = section("TWILIO_")

    account_sid: str | None = None
    """Your Twilio account's SID; with the auth token, enables the WhatsApp channel."""
    auth_token: str | None = None
    """Your Twilio account's auth token (its 32 characters); with the SID, enables the
    WhatsApp channel."""
    number: str | None = Field(default=None, validation_alias="TWILIO_WHATSAPP_NUMBER")
    """The WhatsApp sender, e.g. `whatsapp:+14155238886`."""
    webhook_shared_key: str | None = Field(
        default=None, validation_alias="TWILIO_WEBHOOK_SHARED_KEY_SECRET"
    )
    """The SharedKey secret Twilio signs with when the webhook has signature settings
    (`X-Twilio-Webhooks-Signature-Settings`); else the auth token signs (at least 16
    characters)."""
    api_url: str | None = None
    """Unset: Twilio. REST API base URL override (tests)."""
    checkin_template_sid: str | None = Field(
        default=None, validation_alias="PAM_CHECKIN_WHATSAPP_TEMPLATE_SID"
    )
    """The content template (`HX…`, approved by WhatsApp) a check-in goes through when the
    learner's last message is over 24 hours old; its body's one variable `{{1}}` is the
    check-in. Unset: no check-in outside the 24-hour window (see [Check-ins](how/checkins.md))."""

    @field_validator("auth_token")
    @classmethod
    def _twilios_shape(cls, token: str | None) -> str | None:
        if token and len(token) < TWILIO_AUTH_TOKEN_CHARS:
            raise ValueError(
                f"TWILIO_AUTH_TOKEN is too short: Twilio's auth tokens are "
                f"{TWILIO_AUTH_TOKEN_CHARS} characters (the Twilio Console's Account Info)"
            )
        return token

    @field_validator("webhook_shared_key")
    @classmethod
    def _a_secret(cls, secret: str | None, info: ValidationInfo) -> str | None:
        return long_enough(variable_of(cls, info), secret)
